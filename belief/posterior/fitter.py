"""From evidence to the belief q_t: fit the models that have data, compress to joint draws.

This is the one seam between ``belief`` and ``models`` (with :mod:`belief.posterior.registry`
for the layers above): it calls each model's ``fit`` and its decision-quantity function, and
assembles the draws with :func:`belief.posterior.belief_state.make_belief`.  The models come
from the registry (:data:`models.registry.MODELS`): their priors, seeds, target acceptance and
checked variables; a registered model fed by the protocol (:class:`models.protocol.ModelEntry`
``fed_by="protocol"``) is built, fitted and put in q_t by :meth:`BeliefFitter.fit` from its
module's ``make_model``/``fit_inputs``/``belief_draws`` with no code here.

Convergence and escalation
--------------------------
Every model is fitted with the field's defaults (:class:`FitSettings`: 4 chains, R-hat ≤ 1.01,
bulk and tail ESS ≥ 400, zero divergent transitions) and checked
(:func:`belief.posterior.diagnostics.check_convergence`).  :meth:`BeliefFitter.fit_reliable`
re-fits a model that fails, with a remedy for the failure, up to ``max_escalations`` times:

- divergent transitions → a smaller step size: target_accept 0.9 → 0.97 → 0.99, and twice the
  tuning steps (a divergence is the sampler failing to follow the geometry; more draws would
  only find more of them);
- R-hat or ESS below the thresholds → more draws: ``thin`` × 2 (twice the draws sampled, every
  other kept, so q_t keeps its sample count and the kept draws are less autocorrelated).

Both remedies apply when both fail.  The thresholds are never changed.  What was done and why is
recorded on the belief (``<model>_escalation``, ``<model>_attempts``, ``<model>_target_accept``,
``<model>_tune``, ``<model>_thin``) and in the model's posterior attributes.  A belief that still
fails is flagged unreliable, as before.

Costs
-----
With ``FitSettings.costs`` (``belief fit --costs``) and realised costs in the evidence, the cost
model is one more model of the belief: fitted, checked and escalated like the others (its
check joins ``reliable``, its attributes are ``costs_*``), its joint predictive draws
ΔC_r(m)^(s) are q_t's ``cost`` (sample, candidate, resource) beside the gains, and the
decision then uses E[λᵀΔC] and the chance constraint (:mod:`belief.decision.engine`).  It is
opt-in: without evidence of cost overruns a cost posterior is mostly its prior spread
(σ_r ≈ 0.3 on the log scale) and would move every decision of a campaign whose costs are
in fact known (the shipped example records each cost at its nominal amount), and it adds a
compile (≈ 20 s) and a fit to every ``belief fit``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.inputs.past_campaigns import PastCampaign, stack_campaigns
from belief.posterior.belief_state import make_belief
from belief.posterior.diagnostics import Convergence, check_convergence
from belief.posterior.transfer import with_transfer
from belief.validate import fraction, integer, real
from models.costs import CostModel, CostPriors
from models.exec_risk import ExecRiskModel, ExecRiskPriors, p_unsafe_draws
from models.gains import GainsModel, GainsPriors, gain_from_draws, own_evidence_share
from models.priors import priors_from_dict
from models.registry import MODELS, model, refuse_unknown_models
from models.sensitivity import SensitivityModel, SensitivityPriors
from models.transfer import TransferModel, TransferPriors

__all__ = ["DEFAULT_DRAWS", "DEFAULT_TUNE", "ESCALATION_TARGET_ACCEPT", "BeliefFitter",
           "FitSettings", "ModelFit"]

DEFAULT_DRAWS = 1000
"""Kept draws per chain: Stan's and PyMC's default.  With 4 chains × 500 draws, split R-hat
of an exact N(0, I) target exceeds 1.01 at one of ~20 checked values in 4.5–7 % of fits
(``benchmarks/bench_rhat_floor.py``), so a ≥ 99 % pass rate is out of reach
whatever the model; at 4 × 1000 draws it is 0 %."""

DEFAULT_TUNE = 500
"""Tuning steps per chain (nutpie adapts its mass matrix in far fewer; fewer when the draws
are fewer, :meth:`FitSettings.for_draws`)."""

ESCALATION_TARGET_ACCEPT = (0.97, 0.99)
"""target_accept of the first and second escalation after divergent transitions."""


@dataclass(frozen=True)
class FitSettings:
    """Sampler settings and convergence thresholds shared by every model fit.

    Attributes
    ----------
    draws, tune, chains : int
        Kept draws and tuning steps per chain, and chains: 4 × 1000 draws after 500 tuning
        steps by default (:data:`DEFAULT_DRAWS`: R-hat compares chains, 2 chains make it
        fragile, and 500 draws put the R-hat ≤ 1.01 rule below what NUTS reaches on an exact
        normal in ~5 % of fits).
    max_policies : int
        Policy slots of the gains and transfer models.
    rhat_max : float
        R-hat threshold (rank-normalised split R-hat, Vehtari et al. 2021).
    ess_min : float, optional
        Bulk and tail ESS threshold; default 400 (Vehtari et al. 2021), whatever the draws.
    target_accept : float, optional
        NUTS target acceptance of the first attempt (default: each model's, 0.9).
    max_escalations : int
        Re-fits of a failing model by :meth:`BeliefFitter.fit_reliable` (module docstring).
    costs : bool
        Fit the cost model (:mod:`models.costs`) when the evidence has realised costs, and put
        its joint predictive draws ``cost`` (sample, candidate, resource) in q_t.  Off by
        default: the decision then scores the candidate file's known costs exactly as before
        (module docstring of :mod:`belief.posterior.fitter`, "Costs").
    """

    draws: int = DEFAULT_DRAWS
    tune: int = DEFAULT_TUNE
    chains: int = 4
    max_policies: int = 32
    rhat_max: float = 1.01
    ess_min: float | None = None
    target_accept: float | None = None
    max_escalations: int = 2
    costs: bool = False

    def __post_init__(self) -> None:  # validated once, before anything is compiled
        if not isinstance(self.costs, bool | np.bool_):
            raise InputError("FitSettings.costs", f"must be True or False, got {self.costs!r}")
        for name in ("draws", "tune", "chains", "max_policies"):
            integer(getattr(self, name), f"FitSettings.{name}", minimum=1)
        integer(self.max_escalations, "FitSettings.max_escalations", minimum=0)
        real(self.rhat_max, "FitSettings.rhat_max", minimum=1.0, open_min=True)
        if self.ess_min is not None:
            real(self.ess_min, "FitSettings.ess_min", minimum=0.0, open_min=True)
        if self.target_accept is not None:
            fraction(self.target_accept, "FitSettings.target_accept")
        if self.draws * self.chains < self.ess_threshold:
            warnings.warn(f"FitSettings: {self.chains} chains × {self.draws} draws = "
                          f"{self.draws * self.chains} < the ESS threshold "
                          f"{self.ess_threshold:g}: no first fit can pass the check (each "
                          "escalation multiplies the draws)", UserWarning, stacklevel=3)

    @classmethod
    def for_draws(cls, draws: int | None = None, tune: int | None = None,
                  **kwargs: Any) -> FitSettings:
        """Settings from a command's ``--draws``/``--tune``: tuning defaults to
        min(draws, :data:`DEFAULT_TUNE`), so ``--draws 200`` stays a short run."""
        draws = DEFAULT_DRAWS if draws is None else draws
        integer(draws, "--draws", minimum=1)
        if tune is None:
            tune = min(int(draws), DEFAULT_TUNE)
        return cls(draws=int(draws), tune=int(tune), **kwargs)

    @property
    def ess_threshold(self) -> float:
        return 400.0 if self.ess_min is None else float(self.ess_min)


@dataclass
class ModelFit:
    """One model's fit after :meth:`BeliefFitter.fit_model`: the posterior, its check, and the
    attempts that led to it (``history``: one line per attempt)."""

    idata: xr.DataTree
    convergence: Convergence
    target_accept: float
    tune: int
    thin: int
    history: list[str] = field(default_factory=list)

    @property
    def attempts(self) -> int:
        return len(self.history)

    def as_attrs(self, prefix: str) -> dict[str, Any]:
        """Belief attributes: the check, and what was done (``<prefix>escalation``)."""
        return {**self.convergence.as_attrs(prefix), f"{prefix}attempts": self.attempts,
                f"{prefix}target_accept": self.target_accept, f"{prefix}tune": self.tune,
                f"{prefix}thin": self.thin,
                f"{prefix}escalation": "; ".join(self.history[1:]) or "none"}


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
    cost_priors : CostPriors
        Priors of the cost model (fitted only with ``settings.costs`` and realised costs).
    model_priors : mapping
        Priors of the registered models without a field of their own (model name → priors
        object; :data:`models.registry.MODELS`, ``fitter_field`` None); a model left out has
        its defaults.  :meth:`priors_of` reads any model's.
    past : tuple of PastCampaign
        Past campaigns of the same candidate set (``belief fit --past``,
        :mod:`belief.inputs.past_campaigns`): the gains model is fitted on the stacked
        evidence with a campaign level (:mod:`models.gains`, "Past campaigns"), with room
        for their policies and estimates beside ``settings.max_policies``.  Empty (default):
        the gains model without a campaign level, unchanged.
    """

    candidates: CandidateSet
    settings: FitSettings = field(default_factory=FitSettings)
    gains_priors: GainsPriors = field(default_factory=GainsPriors)
    exec_risk_priors: ExecRiskPriors = field(default_factory=ExecRiskPriors)
    transfer_priors: TransferPriors = field(default_factory=TransferPriors)
    sensitivity_priors: SensitivityPriors = field(default_factory=SensitivityPriors)
    cost_priors: CostPriors = field(default_factory=CostPriors)
    past: tuple[PastCampaign, ...] = ()
    model_priors: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_priors(cls, candidates: CandidateSet, settings: FitSettings | None = None,
                    priors: dict[str, Any] | None = None,
                    past: tuple[PastCampaign, ...] = ()) -> BeliefFitter:
        """The fitter with every registered model's priors from ``priors`` (model name →
        priors object, or a mapping of its fields checked by
        :func:`models.priors.priors_from_dict`); a model left out has its defaults.

        Raises
        ------
        InputError
            An unknown model (naming the registered ones), or a priors field it refuses.
        """
        given = dict(priors or {})
        refuse_unknown_models(given, "priors")
        fields_, extra = {}, {}
        for m in MODELS:
            value = given.get(m.name, m.priors())
            if not isinstance(value, m.priors):
                value = priors_from_dict(m.priors, value, f"priors[{m.name!r}]")
            if m.fitter_field is None:
                extra[m.name] = value
            else:
                fields_[m.fitter_field] = value
        return cls(candidates, settings if settings is not None else FitSettings(),
                   **fields_, past=tuple(past), model_priors=extra)

    def priors_of(self, name: str) -> Any:
        """The priors object of the registered model ``name``."""
        m = model(name)
        if m.fitter_field is not None:
            return getattr(self, m.fitter_field)
        return self.model_priors.get(name, m.priors())

    def with_priors(self, name: str, **changes: Any) -> BeliefFitter:
        """The same fitter with fields of model ``name``'s priors changed (compiled models
        of the other models are shared; this model's are rebuilt)."""
        m = model(name)
        new = replace(self.priors_of(name), **changes)
        if m.fitter_field is not None:
            return replace(self, **{m.fitter_field: new})
        return replace(self, model_priors={**self.model_priors, name: new})

    def __post_init__(self) -> None:
        if self.past:
            stacked = stack_campaigns(Evidence(self.candidates), self.past)
            n_pol = len({*stacked.paired["policy"], *stacked.paired["treated_policy"],
                         *stacked.policy_evals["policy"], *stacked.gain_estimates["policy"]})
            self.gains = GainsModel(self.candidates, self.gains_priors,
                                    self.settings.max_policies + n_pol,
                                    max_estimates=16 + len(stacked.gain_estimates),
                                    campaigns=len(self.past))
        else:
            self.gains = GainsModel(self.candidates, self.gains_priors,
                                    self.settings.max_policies)
        self.exec_risk = (ExecRiskModel(self.candidates, self.exec_risk_priors)
                          if any(c.drives_hardware for c in self.candidates) else None)
        self.transfer = TransferModel(self.transfer_priors, self.settings.max_policies)
        self._sensitivity: dict[tuple, SensitivityModel] = {}
        self._costs: dict[int, CostModel] = {}
        self._registered: dict[str, Any] = {}

    def gains_tables(self, evidence: Evidence) -> dict[str, Any]:
        """The gains model's inputs from ``evidence`` (keyword arguments of
        :meth:`models.gains.GainsModel.fit`, ``paired`` included): the current campaign's
        tables, or — with past campaigns — the current and the past ones stacked with
        ``campaign_of`` (:func:`belief.inputs.past_campaigns.stack_campaigns`).  Direction
        estimates are the current campaign's only."""
        ev = stack_campaigns(evidence, self.past) if self.past else evidence
        out: dict[str, Any] = {"paired": ev.paired, "policy_evals": ev.policy_evals,
                               "gain_estimates": ev.gain_estimates,
                               "model_updates": ev.model_updates,
                               "direction_estimates": evidence.direction_estimates}
        if self.past:
            out["campaign_of"] = ev.campaign_of
        return out

    def cost_model(self, rows: int) -> CostModel | None:
        """The cost model with room for ``rows`` realised-cost rows (slots in blocks of 64
        rows × resources, so a growing campaign recompiles rarely); None when no candidate
        has a positive nominal cost."""
        if not (np.asarray(self.candidates.costs().values) > 0).any():
            return None
        block = 64 * max(1, -(-int(rows) // 64))
        if block not in self._costs:
            self._costs[block] = CostModel(self.candidates, self.cost_priors,
                                           max_observations=block * len(
                                               self.candidates.resources))
        return self._costs[block]

    # -- one model -------------------------------------------------------------------------
    def fit_model(self, name: str, sample: Callable[..., xr.DataTree], seed: int,
                  default_target_accept: float | None = None,
                  escalate: bool = True) -> ModelFit:
        """Fit one model, check it, and (with ``escalate``) re-fit it with the remedy for
        its failure (module docstring) until it passes or ``max_escalations`` are spent.

        ``default_target_accept`` (default: the registered model's ``TARGET_ACCEPT``) is
        the first attempt's target acceptance unless the settings give one.

        ``sample(draws=, tune=, chains=, seed=, target_accept=, thin=)`` returns the
        model's DataTree; attempt i uses the seed ``default_rng([seed, 100 + i])`` (attempt 0
        uses ``seed`` itself).
        """
        s = self.settings
        entry = model(name)
        if default_target_accept is None:
            default_target_accept = entry.target_accept
        checked = list(entry.check_vars) or None  # None: every posterior variable
        ta = s.target_accept if s.target_accept is not None else default_target_accept
        tune, thin = s.tune, 1
        history: list[str] = []
        steps = s.max_escalations if escalate else 0
        for attempt in range(steps + 1):
            sd = seed if attempt == 0 else int(np.random.default_rng([seed, 100 + attempt])
                                               .integers(2**31))
            idata = sample(draws=s.draws, tune=tune, chains=s.chains, seed=sd,
                           target_accept=ta, thin=thin)
            conv = check_convergence(idata, checked, rhat_max=s.rhat_max,
                                     ess_min=s.ess_threshold)
            what = (f"target_accept {ta:g}, tune {tune}, {s.chains} × {s.draws} draws"
                    + (f" kept of {s.draws * thin} (thin {thin})" if thin > 1 else ""))
            history.append(f"attempt {attempt + 1} ({what}): {conv.reason}")
            if conv.reliable or attempt == steps:
                break
            if conv.divergences > 0:  # geometry: smaller steps, longer adaptation
                ta = max(ta, ESCALATION_TARGET_ACCEPT[min(attempt, 1)])
                tune *= 2
            if not (conv.rhat_max <= s.rhat_max and conv.ess_bulk_min >= s.ess_threshold
                    and conv.ess_tail_min >= s.ess_threshold):  # mixing: more draws
                thin *= 2
        idata.attrs.update({"escalation": "; ".join(history), "attempts": len(history),
                            "target_accept": ta, "tune": tune, "thin": thin})
        return ModelFit(idata, conv, ta, tune, thin, history)

    # -- every model -----------------------------------------------------------------------
    def fit(self, evidence: Evidence, policy: str, step: int, seed: int,
            progressbar: bool = False, escalate: bool = False,
            costs: pd.DataFrame | None = None) -> tuple[xr.DataTree, xr.Dataset]:
        """Posterior DataTree(s) and the belief q_t for the current policy.

        One attempt per model at the settings (``escalate`` False; see
        :meth:`fit_reliable`).  ``costs`` is the realised-costs table
        (:mod:`belief.inputs.costs`); with ``settings.costs`` and a table the cost model is
        fitted too (child ``costs``, q_t's ``cost``) — on a table without rows that is its
        prior predictive (the nominal cost as median, ≈ 1.04× it with a repair tail; a
        campaign's step 0).  ``None``: no
        cost model (known costs).

        Returns
        -------
        idata : DataTree
            Children named by model (``gains``; ``exec_risk`` when some candidate drives
            hardware; ``transfer`` with transfer evaluations), each with ``posterior``,
            ``sample_stats``, ...; ``costs`` when the cost model was fitted.
        belief : Dataset
            q_t (see :func:`belief.posterior.belief_state.make_belief`); attributes
            ``reliable`` and ``reliability_reason`` over gains and execution risk, the check
            and escalation of every model (``<model>_*``) and the sampler settings and seed
            (:meth:`sampler_attrs`).
        """
        tables = self.gains_tables(evidence)
        paired = tables.pop("paired")
        gains = self.fit_model(
            "gains", lambda **kw: self.gains.fit(paired, policy, progressbar=progressbar,
                                                 **tables, **kw),
            model("gains").fit_seed(seed), escalate=escalate)
        rng = np.random.default_rng([seed, 1])
        draws = self.gains.decision_draws(gains.idata, policy, rng)
        executions, unsafe = evidence.safety_counts()
        fits = {"gains": gains}
        children = {"gains": gains.idata}
        p_unsafe = None
        if self.exec_risk is not None:  # P_exec(unsafe | m) of hardware candidates
            fits["exec_risk"] = self.fit_model(
                "exec_risk", lambda **kw: self.exec_risk.fit(executions, unsafe,
                                                             progressbar=progressbar, **kw),
                model("exec_risk").fit_seed(seed), escalate=escalate)
            p_unsafe = p_unsafe_draws(fits["exec_risk"].idata)  # same sample count as gains
            children["exec_risk"] = fits["exec_risk"].idata
        cost_draws = None
        cost_model = (self.cost_model(len(costs)) if self.settings.costs and costs is not None
                      else None)
        if cost_model is not None:  # ΔC_r(m): joint predictive draws beside the gains
            fits["costs"] = self.fit_model(
                "costs", lambda **kw: cost_model.fit(costs, progressbar=progressbar, **kw),
                model("costs").fit_seed(seed), escalate=escalate)
            children["costs"] = fits["costs"].idata
            cost_draws = cost_model.decision_draws(fits["costs"].idata,
                                                   np.random.default_rng([seed, 6]))["cost"]
        extra, extra_draws = self._fit_registered(evidence, policy, seed, progressbar, escalate)
        children.update({name: f.idata for name, f in extra.items()})
        fits.update({name: f for name, f in extra.items() if model(name).role == "belief"})
        failing = [f"{name}: {f.convergence.reason}" for name, f in fits.items()
                   if not f.convergence.reliable]
        reliability = {"reliable": int(not failing),
                       "reliability_reason": "; ".join(failing) or "converged",
                       **self.sampler_attrs(seed)}
        for name, f in {**fits, **extra}.items():
            reliability.update(f.as_attrs(f"{name}_"))
        belief = make_belief(gain_from_draws(draws), self.candidates, step=step, policy=policy,
                             model_draws=draws, p_unsafe=p_unsafe,
                             executions=executions, unsafe=unsafe, reliability=reliability)
        share = own_evidence_share(gains.idata)
        belief["own_evidence_share"] = share.reindex(candidate=belief["candidate"].values,
                                                     fill_value=np.nan)
        if cost_draws is not None:
            belief["cost"] = (("sample", "candidate", "resource"),
                              cost_draws.transpose("sample", "candidate", "resource").values)
            belief = belief.assign_coords(resource=list(self.candidates.resources))
            belief["cost"].attrs.update({
                "long_name": "posterior-predictive cost ΔC_r(m) of the next execution",
                "heavy_tailed": str(cost_draws.attrs.get("heavy_tailed", ""))})
        for ds in extra_draws:  # the decision draws of the models the protocol feeds
            belief = belief.merge(ds.assign_coords(sample=belief["sample"].values),
                                  combine_attrs="drop_conflicts")
        if len(evidence.transfer):  # δ_J(π), G_J(π) per policy (reported, never scored)
            t = self.fit_model(
                "transfer", lambda **kw: self.transfer.fit(evidence.transfer, policy,
                                                           progressbar=progressbar, **kw),
                model("transfer").fit_seed(seed), escalate=escalate)
            belief = with_transfer(belief, self.transfer.decision_draws(t.idata),
                                   t.idata["constant_data"]["rows"].values, t.as_attrs(""))
            children["transfer"] = t.idata
        idata = xr.DataTree.from_dict(children)
        return idata, belief

    def registered_model(self, name: str) -> Any:
        """The model object of a registered model the protocol feeds (``fed_by`` =
        ``"protocol"``): its module's ``make_model(candidates, priors, max_policies)``, built
        once; None when it has nothing to model for these candidates."""
        if name not in self._registered:
            self._registered[name] = model(name).load().make_model(
                self.candidates, self.priors_of(name), self.settings.max_policies)
        return self._registered[name]

    def _fit_registered(self, evidence: Evidence, policy: str, seed: int, progressbar: bool,
                        escalate: bool) -> tuple[dict[str, ModelFit], list[xr.Dataset]]:
        """Fit every registered model the protocol feeds that has data (module functions
        ``fit_inputs(model, evidence, policy)`` → the fit's keyword arguments or None, and
        ``belief_draws(model, idata, policy, rng)`` → q_t variables over ``sample`` or None,
        with the generator ``default_rng([seed, seed_stream, 1])``)."""
        fits: dict[str, ModelFit] = {}
        draws: list[xr.Dataset] = []
        for entry in MODELS:
            if entry.fed_by != "protocol" or entry.role == "on_request" or (
                    entry.opt_in is not None and not getattr(self.settings, entry.opt_in)):
                continue
            obj = self.registered_model(entry.name)
            inputs = None if obj is None else entry.load().fit_inputs(obj, evidence, policy)
            if inputs is None:
                continue
            fits[entry.name] = self.fit_model(
                entry.name, lambda obj=obj, inputs=inputs, **kw: obj.fit(
                    **inputs, progressbar=progressbar, **kw),
                entry.fit_seed(seed), escalate=escalate)
            ds = entry.load().belief_draws(
                obj, fits[entry.name].idata, policy,
                np.random.default_rng([seed, entry.seed_stream or 0, 1]))
            if ds is not None:
                draws.append(ds)
        return fits, draws

    def sampler_attrs(self, seed: int) -> dict[str, int]:
        """What q_t records of how it was sampled: ``fit_chains``, ``fit_draws`` and
        ``fit_tune`` (the settings of the first attempt; a re-fit's are in
        ``<model>_escalation``) and ``fit_seed``, the seed of the fit."""
        s = self.settings
        return {"fit_chains": int(s.chains), "fit_draws": int(s.draws), "fit_tune": int(s.tune),
                "fit_seed": int(seed)}

    def fit_reliable(self, evidence: Evidence, policy: str, step: int, seed: int,
                     progressbar: bool = False,
                     costs: pd.DataFrame | None = None) -> tuple[xr.DataTree, xr.Dataset]:
        """:meth:`fit` with escalation: each failing model is re-fitted with the remedy for
        its failure (module docstring); the belief records every attempt and may still be
        unreliable."""
        return self.fit(evidence, policy, step, seed, progressbar=progressbar, escalate=True,
                        costs=costs)

    def fit_transfer(self, evidence: Evidence, policy: str | tuple[str, ...] = (),
                     seed: int = 0, progressbar: bool = False,
                     escalate: bool = True) -> xr.DataTree:
        """Posterior of δ_J(π) = J_real − J_sim for every policy with transfer evaluations
        (and ``policy``, which gets the pooled prediction when it has none); see
        :mod:`models.transfer`.  Escalated like every model (module docstring)."""
        return self.fit_model(
            "transfer", lambda **kw: self.transfer.fit(evidence.transfer, policy,
                                                       progressbar=progressbar, **kw),
            model("transfer").fit_seed(seed), escalate=escalate).idata

    def sensitivity_model(self, evidence: Evidence) -> SensitivityModel:
        """The sensitivity model for the directions and outcome family of the evidence's
        sweeps (compiled once per key and re-used)."""
        from belief.inputs.tables import outcome_family, xi_directions

        runs = evidence.sensitivity
        if not len(runs):
            raise InputError("sensitivity_runs", "no sensitivity runs to fit")
        key = (tuple(xi_directions(runs)), outcome_family(runs))
        if key not in self._sensitivity:
            self._sensitivity[key] = SensitivityModel(key[0], key[1], self.sensitivity_priors)
        return self._sensitivity[key]

    def fit_sensitivity(self, evidence: Evidence, seed: int = 0,
                        progressbar: bool = False, escalate: bool = True) -> xr.DataTree:
        """Posterior of S_kπ and γ_kl from ``evidence.sensitivity`` (see
        :mod:`models.sensitivity`); summarise it with :mod:`belief.posterior.sensitivity`.

        The model is compiled once per (directions, outcome family) and re-used; escalated
        like every model (module docstring; the attempts are in the posterior's attributes).
        """
        return self.fit_sensitivity_model(evidence, seed, progressbar, escalate).idata

    def fit_sensitivity_model(self, evidence: Evidence, seed: int = 0,
                              progressbar: bool = False, escalate: bool = True) -> ModelFit:
        """:meth:`fit_sensitivity` with its check and attempts (a :class:`ModelFit`, whose
        :meth:`ModelFit.as_attrs` is the belief's record, as for the other models)."""
        sens = self.sensitivity_model(evidence)
        return self.fit_model(
            "sensitivity", lambda **kw: sens.fit(evidence.sensitivity,
                                                 progressbar=progressbar, **kw),
            seed, escalate=escalate)

    def scaled(self, **changes: Any) -> BeliefFitter:
        """The same fitter with other settings (compiled models are shared)."""
        return replace(self, settings=replace(self.settings, **changes))
