"""The engine's models by name (:data:`MODELS`, one :class:`models.protocol.ModelEntry` a
line): what the fitter, the fit settings, the belief file's save/load checks, the candidate
file's ``[priors.<model>]`` tables, the convergence checks and the SBC loop iterate over instead
of naming the models.  Adding a model is its module, its line here and its tests
(``docs/architecture.md``, "Adding a model").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from belief.inputs.names import refuse_unknown
from models.costs import CostPriors
from models.exec_risk import ExecRiskPriors
from models.gains import GainsPriors
from models.protocol import ModelEntry
from models.sensitivity import SensitivityPriors
from models.sim_proxy import SimProxyPriors
from models.transfer import TransferPriors

__all__ = ["MODELS", "RESERVED_SEED_STREAMS", "ModelEntry", "check_registry", "model",
           "model_names", "prior_classes", "refuse_unknown_models"]

MODELS: tuple[ModelEntry, ...] = (
    # beliefs written before the order effects have none (and store no flag)
    ModelEntry("gains", GainsPriors, "models.gains", "GainsModel", fed_by="fitter",
               fitter_field="gains_priors",
               check_vars=("effect", "policy_logit", "tau_exec", "rho", "mu0", "group_effect",
                           "gamma", "xi", "tau_lens", "tau_method", "tau_candidate",
                           "tau_campaign", "campaign_offset"),
               cvu=("simulate", "loglik", "simulate_estimate", "loglik_estimate",
                    "simulate_direction", "loglik_direction"),
               sbc="gains_case", sbc_scale="effect_mu_sigma",
               stored_defaults={"order_effects": False}),
    ModelEntry("exec_risk", ExecRiskPriors, "models.exec_risk", "ExecRiskModel", seed_stream=2,
               fed_by="fitter", fitter_field="exec_risk_priors",
               check_vars=("p_unsafe", "group_logit", "mu0", "sigma_group", "sigma_candidate"),
               cvu=("simulate", "loglik"), sbc="exec_risk_case", sbc_scale="sigma_group"),
    ModelEntry("transfer", TransferPriors, "models.transfer", "TransferModel", role="reported",
               seed_stream=3, fed_by="fitter", fitter_field="transfer_priors",
               check_vars=("eta_sim", "shift", "shift_mu", "shift_tau"),
               sbc="transfer_case", sbc_scale="shift_tau"),
    ModelEntry("sensitivity", SensitivityPriors, "models.sensitivity", "SensitivityModel",
               role="on_request", seed_stream=4, fed_by="fitter",
               fitter_field="sensitivity_priors",
               check_vars=("S", "gamma", "alpha", "S_mu", "S_tau", "sigma"),
               sbc="sensitivity_case", sbc_scale="S_tau"),
    ModelEntry("costs", CostPriors, "models.costs", "CostModel", seed_stream=5,
               fed_by="fitter", fitter_field="cost_priors", opt_in="costs",
               check_vars=("delta", "mu", "sigma", "tau_lens", "tau_method", "tau_candidate",
                           "tail_prob", "tail_shift"),
               optional=True),  # older beliefs: none
    ModelEntry("sim_proxy", SimProxyPriors, "models.sim_proxy", "SimProxyModel",
               role="reported", seed_stream=7,
               check_vars=("theta", "theta_sim", "a", "b", "sigma", "theta_real_only"),
               sbc="sim_proxy_case", sbc_scale="b_sigma",
               optional=True),  # fitted with simulated paired evaluations; older beliefs: none
)


RESERVED_SEED_STREAMS = (1, 6)
"""Seed streams the fitter uses besides the models' fits: the gains' decision draws (1) and
the cost model's predictive draws (6)."""


def check_registry(entries: tuple[ModelEntry, ...]) -> tuple[ModelEntry, ...]:
    """``entries``, refused (ValueError) when two share a name, a fitter field or a seed
    stream (two models sampled with the same seed would share their random numbers), or a
    seed stream is reserved (:data:`RESERVED_SEED_STREAMS`)."""
    taken = [m.name for m in entries if m.seed_stream in RESERVED_SEED_STREAMS]
    if taken:
        raise ValueError(f"model registry: {taken} use a reserved seed stream "
                         f"{RESERVED_SEED_STREAMS}")
    for attr in ("name", "fitter_field", "seed_stream"):
        values = [getattr(m, attr) for m in entries if getattr(m, attr) is not None]
        dup = sorted({v for v in values if values.count(v) > 1}, key=str)
        if dup:
            raise ValueError(f"model registry: duplicate {attr} {dup}")
    return entries


check_registry(MODELS)


def model_names() -> tuple[str, ...]:
    """The registered models' names, in registry order."""
    return tuple(m.name for m in MODELS)


def model(name: str) -> ModelEntry:
    """The entry of model ``name`` (InputError listing the registered ones otherwise)."""
    for m in MODELS:
        if m.name == name:
            return m
    refuse_unknown([name], model_names(), "model registry", "model")
    raise AssertionError("unreachable")  # refuse_unknown raised


def prior_classes() -> dict[str, type]:
    """Model name → its priors type."""
    return {m.name: m.priors for m in MODELS}


def refuse_unknown_models(names: Mapping[str, Any] | list[str], where: str) -> None:
    """Refuse a name of ``names`` that is no registered model (InputError naming ``where``,
    the closest registered name and every one)."""
    refuse_unknown(list(names), model_names(), where, "model")
