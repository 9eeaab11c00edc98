"""From evidence to the belief q_t: fit the models that have data, compress to joint draws.

This is the one seam between ``belief`` and ``models``: it calls each model's ``fit`` and its
decision-quantity function, and assembles the draws with
:func:`belief.posterior.belief_state.make_belief`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.posterior.belief_state import make_belief
from belief.posterior.diagnostics import CHECK_VARS, check_convergence
from belief.posterior.transfer import with_transfer
from belief.validate import integer, real
from models.exec_risk import ExecRiskModel, ExecRiskPriors, p_unsafe_draws
from models.gains import GainsModel, GainsPriors, gain_from_draws
from models.sensitivity import SensitivityModel, SensitivityPriors
from models.transfer import TransferModel, TransferPriors

__all__ = ["BeliefFitter", "FitSettings"]


@dataclass(frozen=True)
class FitSettings:
    """Sampler settings shared by every model fit.

    ``ess_min`` is the convergence threshold on bulk and tail ESS; the default is 10 % of all
    draws but at least 100 (so very short runs cannot pass on a tiny threshold).
    """

    draws: int = 500
    tune: int = 500
    chains: int = 2
    max_policies: int = 32
    rhat_max: float = 1.01
    ess_min: float | None = None

    def __post_init__(self) -> None:  # validated once, before anything is compiled
        for name in ("draws", "tune", "chains", "max_policies"):
            integer(getattr(self, name), f"FitSettings.{name}", minimum=1)
        real(self.rhat_max, "FitSettings.rhat_max", minimum=1.0, open_min=True)
        if self.ess_min is not None:
            real(self.ess_min, "FitSettings.ess_min", minimum=0.0, open_min=True)

    @property
    def ess_threshold(self) -> float:
        if self.ess_min is not None:
            return self.ess_min
        return max(100.0, 0.1 * self.draws * self.chains)


@dataclass
class BeliefFitter:
    """Fits the models on evidence and builds q_t; compiles each model once and re-uses it.

    Parameters
    ----------
    candidates : CandidateSet
    settings : FitSettings
    gains_priors : GainsPriors
    exec_risk_priors : ExecRiskPriors
        Priors of the execution-risk model (fitted only when some candidate drives hardware).
    transfer_priors : TransferPriors
        Priors of the transfer-delta model (fitted only when there are transfer evaluations).
    sensitivity_priors : SensitivityPriors
        Priors of the sensitivity model (fitted on request by :meth:`fit_sensitivity`; it is
        candidate generation, never part of q_t).
    """

    candidates: CandidateSet
    settings: FitSettings = field(default_factory=FitSettings)
    gains_priors: GainsPriors = field(default_factory=GainsPriors)
    exec_risk_priors: ExecRiskPriors = field(default_factory=ExecRiskPriors)
    transfer_priors: TransferPriors = field(default_factory=TransferPriors)
    sensitivity_priors: SensitivityPriors = field(default_factory=SensitivityPriors)

    def __post_init__(self) -> None:
        self.gains = GainsModel(self.candidates, self.gains_priors, self.settings.max_policies)
        self.exec_risk = (ExecRiskModel(self.candidates, self.exec_risk_priors)
                          if any(c.drives_hardware for c in self.candidates) else None)
        self.transfer = TransferModel(self.transfer_priors, self.settings.max_policies)
        self._sensitivity: dict[tuple, SensitivityModel] = {}

    def fit(self, evidence: Evidence, policy: str, step: int, seed: int,
            progressbar: bool = False) -> tuple[xr.DataTree, xr.Dataset]:
        """Posterior DataTree(s) and the belief q_t for the current policy.

        Returns
        -------
        idata : DataTree
            Children named by model (``gains``; ``exec_risk`` when some candidate drives
            hardware), each with ``posterior``, ``sample_stats``, ...
        belief : Dataset
            q_t (see :func:`belief.posterior.belief_state.make_belief`).
        """
        s = self.settings
        gains_idata = self.gains.fit(evidence.paired, policy, policy_evals=evidence.policy_evals,
                                     gain_estimates=evidence.gain_estimates,
                                     draws=s.draws, tune=s.tune,
                                     chains=s.chains, seed=seed, progressbar=progressbar)
        conv = check_convergence(gains_idata, CHECK_VARS["gains"],
                                 rhat_max=s.rhat_max, ess_min=s.ess_threshold)
        rng = np.random.default_rng([seed, 1])
        draws = self.gains.decision_draws(gains_idata, policy, rng)
        executions, unsafe = evidence.safety_counts()
        reliability = {"reliable": int(conv.reliable), "reliability_reason": conv.reason,
                       **conv.as_attrs("gains_")}
        children = {"gains": gains_idata}
        p_unsafe = None
        if self.exec_risk is not None:  # P_exec(unsafe | m) of hardware candidates
            exec_idata = self.exec_risk.fit(
                executions, unsafe, draws=s.draws, tune=s.tune, chains=s.chains,
                seed=int(np.random.default_rng([seed, 2]).integers(2**31)),
                progressbar=progressbar)
            exec_conv = check_convergence(exec_idata, CHECK_VARS["exec_risk"],
                                          rhat_max=s.rhat_max, ess_min=s.ess_threshold)
            p_unsafe = p_unsafe_draws(exec_idata)  # same sample count (draws × chains) as gain
            children["exec_risk"] = exec_idata
            reliability.update(exec_conv.as_attrs("exec_risk_"))
            reliability["reliable"] = int(conv.reliable and exec_conv.reliable)
            reliability["reliability_reason"] = "; ".join(
                f"{name}: {c.reason}" for name, c in (("gains", conv), ("exec_risk", exec_conv))
                if not c.reliable) or "converged"
        belief = make_belief(gain_from_draws(draws), self.candidates, step=step, policy=policy,
                             model_draws=draws, p_unsafe=p_unsafe,
                             executions=executions, unsafe=unsafe, reliability=reliability)
        if len(evidence.transfer):  # δ_J(π), G_J(π) per policy (reported, never scored)
            transfer_idata = self.fit_transfer(evidence, policy, seed, progressbar)
            transfer_conv = check_convergence(
                transfer_idata, CHECK_VARS["transfer"],
                rhat_max=s.rhat_max, ess_min=s.ess_threshold)
            belief = with_transfer(belief, self.transfer.decision_draws(transfer_idata),
                                   transfer_idata["constant_data"]["rows"].values,
                                   transfer_conv.as_attrs())
            children["transfer"] = transfer_idata
        idata = xr.DataTree.from_dict(children)
        return idata, belief

    def fit_reliable(self, evidence: Evidence, policy: str, step: int, seed: int,
                     factors: tuple[int, ...] = (2, 4)) -> tuple[xr.DataTree, xr.Dataset]:
        """:meth:`fit`, then re-fit with ``factor``× the draws and tuning steps while the
        belief fails the convergence checks (the reason of the last refit is kept in the
        ``refit_reason`` attribute; the result may still be unreliable)."""
        idata, belief = self.fit(evidence, policy, step, seed)
        for factor in factors:
            if belief.attrs.get("reliable", 1):
                break
            first = belief.attrs.get("reliability_reason", "")
            idata, belief = self._scaled(factor).fit(evidence, policy, step, seed)
            belief.attrs["refit_reason"] = f"refit with {factor}x draws after: {first}"
        return idata, belief

    def _scaled(self, factor: int) -> BeliefFitter:
        """The same fitter with ``factor``× draws and tuning (compiled models are shared)."""
        cache = self.__dict__.setdefault("_scaled_fitters", {})
        if factor not in cache:
            s = self.settings
            cache[factor] = replace(self, settings=replace(s, draws=factor * s.draws,
                                                           tune=factor * s.tune))
        return cache[factor]

    def fit_transfer(self, evidence: Evidence, policy: str | tuple[str, ...] = (),
                     seed: int = 0, progressbar: bool = False) -> xr.DataTree:
        """Posterior of δ_J(π) = J_real − J_sim for every policy with transfer evaluations
        (and ``policy``, which gets the pooled prediction when it has none); see
        :mod:`models.transfer`.

        Samples 4 × ``draws`` per chain and keeps every 4th (same sample count as the gains):
        with few policies the pooling hyperparameters mix slowly, and sampling costs ~0.1 s."""
        s = self.settings
        return self.transfer.fit(evidence.transfer, policy, draws=s.draws, tune=s.tune,
                                 chains=s.chains, thin=4,
                                 seed=int(np.random.default_rng([seed, 3]).integers(2**31)),
                                 progressbar=progressbar)

    def fit_sensitivity(self, evidence: Evidence, seed: int = 0,
                        progressbar: bool = False) -> xr.DataTree:
        """Posterior of S_kπ and γ_kl from ``evidence.sensitivity`` (see
        :mod:`models.sensitivity`); summarise it with :mod:`belief.posterior.sensitivity`.

        The model is compiled once per (directions, outcome family) and re-used."""
        from belief.inputs.tables import outcome_family, xi_directions

        runs = evidence.sensitivity
        if not len(runs):
            raise InputError("sensitivity_runs", "no sensitivity runs to fit")
        key = (tuple(xi_directions(runs)), outcome_family(runs))
        if key not in self._sensitivity:
            self._sensitivity[key] = SensitivityModel(key[0], key[1], self.sensitivity_priors)
        s = self.settings
        return self._sensitivity[key].fit(runs, draws=s.draws, tune=s.tune, chains=s.chains,
                                          seed=seed, progressbar=progressbar)
