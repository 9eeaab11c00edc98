"""The model registry and the Model protocol: every registered model states what the engine
reads of it, the registry refuses what would make two models collide, and a model registered
with the protocol's module functions is fitted, checked and put in q_t with no other file
changed."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import xarray as xr

from belief.errors import InputError
from belief.posterior import fitter as fitter_module
from belief.posterior.diagnostics import CHECK_VARS
from belief.posterior.fitter import BeliefFitter, FitSettings
from models import registry
from models.protocol import Model, ModelEntry
from models.registry import MODELS, check_registry, model, model_names


# -- what every registered model states -------------------------------------------------------
@pytest.mark.parametrize("entry", MODELS, ids=lambda m: m.name)
def test_every_registered_model_meets_the_protocol(entry):
    cls = entry.model_type
    assert callable(cls.fit) and callable(cls.build)
    assert 0 < entry.target_accept < 1
    for name, fn in entry.cvu_functions().items():
        assert callable(fn), name
    if entry.sbc is not None:
        assert callable(entry.sbc_case())
        assert entry.sbc_scale in {f for f in entry.priors().as_dict()}
    # the priors round-trip through what a belief file stores
    assert entry.stored_priors({entry.name: entry.priors().as_dict()}) == entry.priors()
    assert CHECK_VARS[entry.name] == list(entry.check_vars)


def test_the_registry_holds_the_models_in_their_stored_order():
    # the order is the fit settings' "priors" order in every belief file written so far; a
    # model added later comes last (optional: older belief files store no priors for it)
    assert model_names() == ("gains", "exec_risk", "transfer", "sensitivity", "costs",
                             "sim_proxy")
    assert model("sim_proxy").optional


def test_fit_seeds_are_the_streams_the_fitter_always_used():
    assert model("gains").fit_seed(7) == 7
    for name, k in (("exec_risk", 2), ("transfer", 3), ("costs", 5)):
        assert model(name).fit_seed(7) == int(np.random.default_rng([7, k]).integers(2**31))


def test_an_unknown_model_is_refused_with_the_closest_name():
    with pytest.raises(InputError, match=r"unknown model 'gain' \(did you mean 'gains'\?\)"):
        model("gain")


@pytest.mark.parametrize(("change", "rule"), [
    ({"name": "gains", "fitter_field": None, "seed_stream": 9}, "duplicate name"),
    ({"name": "toy", "fitter_field": None, "seed_stream": 2}, "duplicate seed_stream"),
    ({"name": "toy", "fitter_field": "gains_priors", "seed_stream": 9},
     "duplicate fitter_field"),
    ({"name": "toy", "fitter_field": None, "seed_stream": 6}, "reserved seed stream"),
])
def test_the_registry_refuses_colliding_models(change, rule):
    with pytest.raises(ValueError, match=rule):
        check_registry((*MODELS, replace(model("exec_risk"), **change)))


def test_an_entry_refuses_an_unknown_role_and_half_an_sbc_case():
    with pytest.raises(ValueError, match="role"):
        ModelEntry("toy", ToyPriors, __name__, "ToyModel", role="scored")
    with pytest.raises(ValueError, match="sbc and sbc_scale"):
        ModelEntry("toy", ToyPriors, __name__, "ToyModel", sbc="toy_case")


def test_the_fitter_takes_every_models_priors_from_the_registry(world_candidates):
    f = BeliefFitter.from_priors(world_candidates, FitSettings(),
                                 {"costs": {"heavy_tailed": ["real_h"]},
                                  "gains": {"effect_mu_sigma": 0.3}})
    assert f.priors_of("costs").heavy_tailed == ("real_h",)
    assert f.priors_of("gains").effect_mu_sigma == 0.3
    assert f.priors_of("exec_risk") == model("exec_risk").priors()
    g = f.with_priors("costs", heavy_tailed=())
    assert g.cost_priors.heavy_tailed == () and g.gains_priors == f.gains_priors
    with pytest.raises(InputError, match=r"priors: unknown model 'cost' \(did you mean"):
        BeliefFitter.from_priors(world_candidates, FitSettings(), {"cost": {}})
    with pytest.raises(InputError, match=r"priors\['gains'\]: unknown prior 'tau_lense'"):
        BeliefFitter.from_priors(world_candidates, FitSettings(), {"gains": {"tau_lense": 1}})


# -- a sixth model through the protocol alone --------------------------------------------------
@dataclass(frozen=True)
class ToyPriors:
    """μ ~ Normal(0, sd²)."""

    sd: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"sd": self.sd}


class ToyModel:
    """y_i ~ Normal(μ, 1), μ ~ Normal(0, sd²): the posterior is Normal(n ȳ v, v) with
    v = 1/(1/sd² + n); ``fit`` draws it exactly (no sampler), as a DataTree like a PyMC fit's."""

    def __init__(self, priors: ToyPriors):
        self.priors = priors

    def build(self, *data: Any) -> None:
        return None

    def fit(self, y: np.ndarray, *, draws: int, tune: int, chains: int, seed: int,
            target_accept: float, thin: int = 1, progressbar: bool = False) -> xr.DataTree:
        v = 1.0 / (1.0 / self.priors.sd ** 2 + len(y))
        mu = np.random.default_rng(seed).normal(v * np.sum(y), np.sqrt(v), (chains, draws))
        dims = ("chain", "draw")
        return xr.DataTree.from_dict({
            "posterior": xr.Dataset({"mu": (dims, mu)}),
            "sample_stats": xr.Dataset({"diverging": (dims, np.zeros_like(mu, bool))})})


TARGET_ACCEPT = 0.8


def make_model(candidates: Any, priors: ToyPriors, max_policies: int) -> ToyModel:
    return ToyModel(priors)


def fit_inputs(model_: ToyModel, evidence: Any, policy: str) -> dict[str, Any] | None:
    paired = evidence.paired
    if not len(paired):
        return None
    return {"y": paired["treated_successes"].to_numpy(float) / paired["treated_trials"]
            - paired["control_successes"].to_numpy(float) / paired["control_trials"]}


def belief_draws(model_: ToyModel, idata: xr.DataTree, policy: str,
                 rng: np.random.Generator) -> xr.Dataset:
    return xr.Dataset({"toy_mu": ("sample", idata["posterior"]["mu"].values.ravel())})


TOY = ModelEntry("toy", ToyPriors, __name__, "ToyModel", seed_stream=9, check_vars=("mu",))


def test_a_model_registered_with_the_protocol_is_fitted_into_q_t(monkeypatch, fitter,
                                                                 campaign_evidence, fitted):
    """The toy model's registry line is all the fitter needs: fitted with its own seed
    stream, its check joins the belief's, its draws are q_t's ``toy_mu`` — the exact
    posterior within Monte Carlo error, drawn with its seed — and everything else in q_t is
    what the five models gave without it."""
    assert isinstance(ToyModel(ToyPriors()), Model)
    ev, world = campaign_evidence
    _, before = fitted
    models = check_registry((*MODELS, TOY))
    monkeypatch.setattr(registry, "MODELS", models)
    monkeypatch.setattr(fitter_module, "MODELS", models)
    toy_fitter = BeliefFitter.from_priors(fitter.candidates, fitter.settings,
                                          {"toy": {"sd": 0.5}})
    assert toy_fitter.priors_of("toy") == ToyPriors(sd=0.5)
    idata, q = toy_fitter.fit(ev, world.policy, step=4, seed=11)
    assert "toy" in idata.children and q.attrs["toy_attempts"] == 1
    assert q.attrs["toy_reliable"] == 1 and "toy" not in q.attrs["reliability_reason"]
    y = fit_inputs(None, ev, world.policy)["y"]
    v = 1 / (1 / 0.25 + len(y))
    draws = q["toy_mu"].values
    assert draws.shape == (q.sizes["sample"],)
    assert abs(draws.mean() - v * y.sum()) < 4 * np.sqrt(v / draws.size)
    assert abs(draws.std() / np.sqrt(v) - 1) < 4 / np.sqrt(2 * draws.size)
    s = fitter.settings
    expected = np.random.default_rng(TOY.fit_seed(11)).normal(v * y.sum(), np.sqrt(v),
                                                             (s.chains, s.draws))
    np.testing.assert_array_equal(draws, expected.ravel())
    toy_attrs = [k for k in q.attrs if k.startswith("toy_")]
    xr.testing.assert_identical(q.drop_vars("toy_mu").drop_attrs(deep=False),
                                before.drop_attrs(deep=False))
    assert {k: v for k, v in q.attrs.items() if k not in toy_attrs} == before.attrs
    assert sys.modules[TOY.module] is sys.modules[__name__]


def test_the_sbc_loop_reads_the_registry():
    """The SBC loop's models and mis-specified scales are the registry's (the same as when they
    were a table of models.sbc); a registered model without an SBC case is named as such."""
    from models.sbc import MISSPECIFIED_SCALE, model_case

    assert MISSPECIFIED_SCALE == {"gains": "effect_mu_sigma", "exec_risk": "sigma_group",
                                  "transfer": "shift_tau", "sensitivity": "S_tau",
                                  "sim_proxy": "b_sigma"}
    with pytest.raises(InputError, match=r"model 'costs' has no SBC case; known: \['exec_risk'"):
        model_case("costs")
    with pytest.raises(InputError, match="unknown model 'nonsense'"):
        model_case("nonsense")


def toy_case(priors: ToyPriors, fit_priors: ToyPriors, *, name: str) -> tuple:
    return (name, priors, fit_priors)


def test_an_sbc_case_may_live_in_the_models_own_module(monkeypatch):
    toy = replace(TOY, sbc=f"{__name__}:toy_case", sbc_scale="sd")
    assert toy.sbc_case() is toy_case
    models = check_registry((*MODELS, toy))
    monkeypatch.setattr(registry, "MODELS", models)
    from models import sbc

    monkeypatch.setattr(sbc, "MODELS", models)
    name, priors, fit_priors = sbc.model_case("toy", factor=0.5)
    assert name == "toy, fit sd ÷ 2" and priors == ToyPriors()
    assert fit_priors == ToyPriors(sd=0.5)
