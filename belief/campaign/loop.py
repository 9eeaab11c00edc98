"""The closed loop s_t → m*_t → Y_t → s_{t+1} against a world, with an append-only log.

Each step: fit the models on D_t (compiled once), build q_t, decide (with CVU when β > 0),
let the allocation policy pick (see :mod:`belief.decision.allocation`), execute the pick in the
world,
append the evidence, deduct the realised cost b_{t+1} = b_t − ΔC, move to the new policy if the
pick changed it, drop it if it is not repeatable; λ_{t+1} = λ(s_{t+1}) follows from the weight
rule at the next step.  Stops on the economic stop, when the budget is exhausted, at a budget
overrun, or at the horizon T.

Uncertain costs.  With ``CampaignSettings.fit.costs`` the cost model
(:mod:`models.costs`) is fitted at every step on the realised costs the campaign has logged so
far (on none at step 0: its prior predictive, the candidate file's cost as the median), q_t
carries its joint draws, and the decision uses E[λᵀΔC] and the chance constraint
Pr(ΔC_r(m) ≤ b_t,r) ≥ 1 − ε_budget (``CampaignSettings.eps_budget``).  A realised cost above the
budget left is not refused: it is a *budget overrun*, recorded in the step record (``overrun``:
per overrun resource r the realised cost ΔC_r, the budget left b_t,r and the probability
Pr(ΔC_r(m) > b_t,r) the belief gave at decision time — the chosen row's ``overrun_<r>`` of the
decision table, or with known costs 1[c̃_r(m) > b_t,r], i.e. 0 for a feasible pick), the budget
left is clamped at 0 (b_{t+1,r} = max(b_t,r − ΔC_r, 0)), and the campaign stops with a stop
reason naming the overrun (a ``stop`` record carrying the same ``overrun``).  Negative or
non-finite realised costs are refused (InputError naming the outcome's step and candidate).

At the stop, the deployment chance constraint P_deploy(unsafe | π_T) ≤ α_deploy is checked on
the final policy from deployment evidence only — once, one look: Clopper–Pearson, not the
anytime bound of the gate (which looks after every step).

The world (:class:`~belief.campaign.world.World`) declares everything the loop uses;
:class:`~belief.campaign.synthetic.SyntheticWorld` and :class:`~belief.campaign.manual.ManualWorld`
implement it.  The decision at every step is the one entry point
:func:`belief.decision.engine.decide`, with the :class:`DecisionSettings` built once from the
campaign settings.

Every step is logged (:mod:`belief.campaign.log`); :meth:`Campaign.resume` continues an
interrupted campaign from its log with results identical to an uninterrupted run of the same
seed (every random choice is seeded by (seed, step)).

The campaign folder
    A campaign holds an exclusive lock on its folder while it runs (a second process is
    refused, :func:`belief.files.hold_folder`).  A new campaign refuses a folder that holds
    another campaign's log or anything else unless ``overwrite=True``
    (:func:`folder_state`); starting over clears what the campaign owns there first (its log,
    ``decisions/step_*.csv`` and the outputs of its last run), and the final outputs are
    written as one set (:class:`belief.files.OutputSet`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import belief as _pkg
from belief.campaign.log import LOG_FORMAT, LOG_NAME, append_record, read_log, repair_tail
from belief.campaign.overrun import decision_overrun, find_overrun, overrun_reason
from belief.campaign.world import (
    Outcome,
    World,
    model_update_row,
    outcome_records,
    table_records,
)
from belief.decision.allocation import USES_CVU, check_policy, choose
from belief.decision.engine import STOP, decide, decision_table
from belief.decision.feasibility import ChanceConstraint
from belief.decision.functional_registry import parse_functional
from belief.decision.functionals import Functional, Mean
from belief.decision.safety import SafetyGate, deployment_check, deployment_method
from belief.decision.schema import Attrs, Vars, per_resource
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.decision.weights import FixedWeights, ScarcityWeights, WeightRule, as_weight_rule
from belief.errors import InputError
from belief.files import acquire_folder, release_folder
from belief.inputs.candidates import CandidateSet, candidates_from_dict, candidates_to_dict
from belief.inputs.evidence import Evidence
from belief.posterior.fitter import BeliefFitter, FitSettings
from belief.posterior.registry import resolve_priors
from belief.validate import fraction, integer, real

__all__ = ["LEGACY_SETTINGS", "NEUTRAL_FIELDS", "OUTPUTS_OWNER", "Campaign", "CampaignResult",
           "CampaignSettings", "campaign_fitter", "folder_state", "header_settings",
           "logged_settings", "outputs_complete", "run_campaign", "same_campaign",
           "settings_from_dict", "settings_to_dict", "unreproducible_fields",
           "unreproducible_rule"]

OUTPUTS_OWNER = "campaign"  # manifest .belief-campaign.json of the final outputs
_STEP_FILE = re.compile(r"step_\d{3,}\.csv")


@dataclass(frozen=True)
class CampaignSettings:
    """Settings of one campaign, parsed and validated at construction.

    Attributes
    ----------
    horizon : int
        T, the maximum number of steps.
    functional : Functional (a string is parsed)
    weights : WeightRule, optional (a mapping becomes FixedWeights)
        λ rule; default the world's ``weight_values`` (fixed).
    beta : float
        β in Q = U0 + β·CVU (used by the ``q`` and ``plan_voi`` allocations).
    gate : SafetyGate
        The execution-safety gate; default the anytime bound (over every look: a campaign
        looks after every step).  A log records it (``gate.method``); a resumed campaign
        keeps the logged one.
    fit : FitSettings
    seed : int
    stability_resamples : int
    cvu : CVUSettings
        Monte Carlo settings of CVU (computed when β > 0, before the horizon; exact refits
        where k̂ > 0.7, at most ``cvu.max_refits`` per candidate).
    alpha_deploy : float
        Ceiling of the deployment chance constraint P_deploy(unsafe | π_T) ≤ α_deploy, checked
        once, at the stop, with the gate's δ — with the one-look Clopper–Pearson bound, or the
        posterior's when the gate is ``posterior`` (:func:`~belief.decision.safety.
        deployment_method`) — never mixed with execution events.
    allocation : str
        The allocation policy (:data:`belief.decision.allocation.POLICIES`); ``q`` is the
        engine's.
    act_on_unreliable : bool
        A belief whose fit fails the convergence checks (R-hat, ESS, divergences) is re-fitted
        (see :meth:`belief.posterior.fitter.BeliefFitter.fit_reliable`); if it still fails, the
        loop refuses to act on it (a stop with the reason) unless this is True — then it acts
        and the decision carries the flag.
    eps_budget : float
        ε_budget ∈ [0, 1) of the budget's chance constraint Pr(ΔC_r(m) ≤ b_t,r) ≥ 1 − ε_budget
        (:class:`~belief.decision.feasibility.ChanceConstraint`); it acts on the cost
        posterior, so it goes with ``fit=FitSettings(costs=True)`` (without cost draws the
        known costs must fit, the rule at ε_budget = 0).
    heavy_tailed_costs : tuple of str
        Resources whose realised costs get the cost model's repair tail, a two-component
        log-normal mixture (:class:`models.costs.CostPriors` ``heavy_tailed``, e.g.
        ``("real_h",)``); used with ``fit.costs``.  When empty, the cost priors' own
        ``heavy_tailed`` (from ``priors``) applies.
    priors : mapping of model name to priors
        The models' priors (a candidate file's ``[priors.<model>]`` tables, or priors objects
        of :func:`models.registry.prior_classes`), checked at construction and kept in their
        JSON-able form (``as_dict()``), so that a log records them and a resume and a replay
        fit with them; a model left out has its defaults.
    """

    horizon: int = 6
    functional: Functional = field(default_factory=Mean)
    weights: WeightRule | None = None
    beta: float = 0.0
    gate: SafetyGate = field(default_factory=SafetyGate)
    fit: FitSettings = field(default_factory=FitSettings)
    seed: int = 0
    stability_resamples: int = 200
    cvu: CVUSettings = field(default_factory=lambda: CVUSettings(max_refits=4))
    alpha_deploy: float = 0.05
    allocation: str = "q"
    act_on_unreliable: bool = False
    eps_budget: float = 0.0
    heavy_tailed_costs: tuple[str, ...] = ()
    priors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "horizon", integer(self.horizon, "horizon", minimum=1))
        set_(self, "functional", parse_functional(self.functional))
        if self.weights is not None:
            set_(self, "weights", as_weight_rule(self.weights))
        set_(self, "beta", real(self.beta, "beta", minimum=0.0))
        set_(self, "seed", integer(self.seed, "seed", minimum=0))
        set_(self, "stability_resamples",
             integer(self.stability_resamples, "stability_resamples", minimum=0))
        set_(self, "alpha_deploy", fraction(self.alpha_deploy, "alpha_deploy"))
        check_policy(self.allocation)
        if self.allocation == "kg_cost" and self.beta <= 0:
            raise InputError("beta", "the kg_cost allocation needs CVU: beta > 0")
        if self.allocation == "kg_cost" and self.cvu.continuation != "one_step":
            raise InputError("CVUSettings.continuation", "the kg_cost allocation needs the "
                                                         "one-step CVU: continuation one_step")
        if not isinstance(self.act_on_unreliable, bool):
            raise InputError("act_on_unreliable", "must be true or false")
        set_(self, "eps_budget", ChanceConstraint(self.eps_budget).eps_budget)
        heavy = self.heavy_tailed_costs
        if isinstance(heavy, str) or not isinstance(heavy, tuple | list) \
                or not all(isinstance(r, str) for r in heavy):
            raise InputError("heavy_tailed_costs", f"must be a tuple of resource names, got "
                                                   f"{heavy!r}")
        set_(self, "heavy_tailed_costs", tuple(heavy))
        if not isinstance(self.priors, Mapping):
            raise InputError("priors", f"must map model names to priors, got {self.priors!r}")
        resolved = resolve_priors(priors=self.priors)
        set_(self, "priors", {name: resolved[name].as_dict() for name in self.priors})

    @property
    def used_cvu(self) -> CVUSettings:
        """The CVU settings the campaign runs with: ``cvu``, with ``refit_scope="all"`` unless
        Q chooses (a refit skipped because it cannot change Q's choice can change another
        policy's: plan_voi ranks by every candidate's value of information).  The log header
        holds ``cvu`` as given, so that a campaign derived with another allocation uses the
        scope given."""
        return self.cvu if self.allocation == "q" else replace(self.cvu, refit_scope="all")

    def decision(self, weights: WeightRule | None = None) -> DecisionSettings:
        """The decision settings of every step (β = 0 for the baseline allocations)."""
        return DecisionSettings(weights=self.weights if weights is None else weights,
                                functional=self.functional,
                                beta=self.beta if self.allocation in USES_CVU else 0.0,
                                gate=self.gate, cvu=self.used_cvu, horizon=self.horizon,
                                stability_resamples=self.stability_resamples,
                                eps_budget=self.eps_budget)


def settings_to_dict(s: CampaignSettings) -> dict[str, Any]:
    """JSON-able settings (weights: fixed values or scarcity parameters; callables refused)."""
    w = s.weights
    if w is None:
        weights: Any = None
    elif isinstance(w, FixedWeights):
        weights = {"kind": "fixed", "values": dict(w.values)}
    elif isinstance(w, ScarcityWeights):
        weights = {"kind": "scarcity", **{k: (dict(v) if isinstance(v, Mapping) else v)
                                          for k, v in asdict(w).items()}}
    else:
        weights = {"kind": "custom", "describe": w.describe()}
    out = {"horizon": s.horizon, "functional": str(s.functional),
           "weights": weights, "beta": s.beta, "gate": asdict(s.gate), "fit": asdict(s.fit),
           "seed": s.seed, "stability_resamples": s.stability_resamples,
           "cvu": asdict(s.cvu), "alpha_deploy": s.alpha_deploy, "allocation": s.allocation,
           "act_on_unreliable": s.act_on_unreliable}
    if s.eps_budget:  # absent at their defaults: logs of earlier campaigns stay resumable
        out["eps_budget"] = s.eps_budget
    if s.heavy_tailed_costs:
        out["heavy_tailed_costs"] = list(s.heavy_tailed_costs)
    if s.priors:
        out["priors"] = {name: dict(p) for name, p in s.priors.items()}
    return out


LEGACY_SETTINGS: dict[str, dict[str, Any]] = {
    "cvu": {"noise_correction": False, "regression_noise_correction": False,
            "refit_scope": "all"},
    "gate": {"method": "clopper_pearson"}}
"""Fields added after campaign logs were written whose default changes what a campaign does,
with the value that reproduces the behaviour from before them: a log without such a field
ran that way (CVU's noise-bias correction; refits only where they can change the choice,
``cvu.refit_scope``; the gate's bound
``gate.method``, whose default was Clopper–Pearson before the anytime bound became it: a
header without it ran Clopper–Pearson; every other log names its method, which a resume and
a replay keep; CHANGELOG.md says when each was added).  Not covered: an exact refit's sampler
seed became a function of the outcome instead of the order of the
calls (:func:`belief.posterior.refit.refit_seed`), so a campaign that used refits before
that change replays with other refit draws (the same estimator; its values move by their Monte
Carlo error).  ``regression_noise_
correction`` is filled only where it cannot matter (no ``noise_correction``, or it is off):
logs that hold ``noise_correction: true`` without it were written both before the regression
estimator was corrected and after (with the same version number), so they are refused."""

NEUTRAL_FIELDS: dict[str, tuple[str, ...]] = {
    "cvu": ("blas_threads", "workers", "continuation", "rollout_depth", "inner_outcomes",
            "channel_split"),
    "fit": ("costs",)}
"""Fields added after campaign logs were written whose default is the behaviour from before them
(one BLAS thread: rounding only; one candidate at a time: the same numbers; the one-step
continuation, which ignores the depth and inner outcomes; the channel split, reported beside CVU
without moving it; the candidate file's known costs): a log without them takes their defaults. A
log that lacks any other field was written by a version whose choices this one cannot reproduce
and is refused (:func:`unreproducible_fields`)."""

_SECTIONS = (("gate", SafetyGate), ("fit", FitSettings), ("cvu", CVUSettings))


def logged_settings(d: Any) -> Any:
    """A log header's settings as :func:`settings_to_dict` writes them today, as far as they
    can be known: the fields of :data:`LEGACY_SETTINGS` and :data:`NEUTRAL_FIELDS` that a
    log written before they existed lacks are filled (with the old behaviour and with their
    defaults); any other missing field stays missing, so that such a log compares unequal to
    every settings of this version (a field the log holds is kept as it is, and a field this
    version does not know is left for the reader to refuse; what is not a mapping is
    returned as it is)."""
    if not isinstance(d, Mapping):
        return d
    out: dict[str, Any] = dict(d)
    for key, cls in _SECTIONS:
        if isinstance(out.get(key), Mapping):
            defaults = asdict(cls())
            fill = {k: defaults[k] for k in NEUTRAL_FIELDS.get(key, ())}
            legacy = dict(LEGACY_SETTINGS.get(key, {}))
            if key == "cvu" and out[key].get("noise_correction", False) is not False:
                legacy.pop("regression_noise_correction")  # ambiguous (LEGACY_SETTINGS)
            out[key] = {**fill, **legacy, **out[key]}
    return out


def unreproducible_fields(d: Any) -> list[str]:
    """The settings fields (``"cvu.estimator"``, …) that a log header lacks even after
    :func:`logged_settings`: it was written before they existed, and this version cannot
    run what it ran."""
    if not isinstance(d, Mapping):
        return []
    d = logged_settings(d)
    today = settings_to_dict(CampaignSettings())  # every field this version writes
    missing = [k for k in today if k not in d]
    for key, fields in today.items():
        if isinstance(fields, Mapping) and isinstance(d.get(key), Mapping):
            missing += [f"{key}.{k}" for k in fields if k not in d[key]]
    return missing


def unreproducible_rule(d: Any) -> str:
    """The refusal of a header that lacks :func:`unreproducible_fields` ("" when none)."""
    missing = unreproducible_fields(d)
    return (f"record 1 (header): the settings lack {', '.join(missing)} (written by a version "
            "before they existed, whose choices this one cannot reproduce)" if missing else "")


def _refuse_unreproducible(d: Any, path: str | Path) -> None:
    rule = unreproducible_rule(d)
    if rule:
        raise InputError(str(path), rule)


def header_settings(header: Mapping[str, Any], path: str | Path, *,
                    custom_weights: bool = False) -> CampaignSettings:
    """The settings of a log's header, or an InputError naming record 1 and the rule (a
    header written by hand or by another tool may hold anything).  ``custom_weights``: a λ
    rule that was a user callable (it cannot be restored) gives settings without weights
    instead of an error."""
    _refuse_unreproducible(header.get("settings") if isinstance(header, Mapping) else None,
                           path)
    try:
        d = logged_settings(header["settings"])
        w = d.get("weights") if isinstance(d, Mapping) else None
        if custom_weights and isinstance(w, Mapping) and w.get("kind") == "custom":
            d = {**d, "weights": None}
        return settings_from_dict(d)
    except InputError as err:
        raise InputError(str(path), f"record 1 (header): unusable settings: {err}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InputError(str(path), f"record 1 (header): unusable settings "
                                    f"({type(err).__name__}: {err})") from None


def settings_from_dict(d: Mapping[str, Any]) -> CampaignSettings:
    """Inverse of :func:`settings_to_dict` (a custom weight callable cannot be restored; a log
    header is read by :func:`header_settings`, which fills and checks what an earlier version
    did not write)."""
    w = d.get("weights")
    weights: Any = None
    if w is not None:
        if w.get("kind") == "fixed":
            weights = FixedWeights(w["values"])
        elif w.get("kind") == "scarcity":
            weights = ScarcityWeights(w["base"], w["initial_budget"], w["kappa"], w["floor"])
        else:
            raise InputError("campaign log", f"weights {w.get('describe')!r} were a user "
                                             "callable, which a log cannot hold: resume from "
                                             "Python with Campaign.resume(folder, settings=...)")
    return CampaignSettings(
        horizon=d["horizon"], functional=d["functional"], weights=weights,
        beta=d["beta"], gate=SafetyGate(**d["gate"]), fit=FitSettings(**d["fit"]),
        seed=d["seed"], stability_resamples=d["stability_resamples"],
        cvu=CVUSettings(**d["cvu"]), alpha_deploy=d["alpha_deploy"],
        allocation=d.get("allocation", "q"),
        act_on_unreliable=bool(d.get("act_on_unreliable", False)),
        eps_budget=d.get("eps_budget", 0.0),
        heavy_tailed_costs=tuple(d.get("heavy_tailed_costs", ())),
        priors=d.get("priors", {}))


@dataclass
class CampaignResult:
    """What a campaign produced.

    ``decisions`` holds the decision Datasets of the steps run in this process (a resumed
    campaign's earlier steps are in its log); ``deployment_check`` is the result of
    :func:`belief.decision.safety.deployment_check` on the final policy; ``overrun`` is the
    budget overrun that stopped the campaign, if any: ``{"step", "candidate", "resources":
    {r: {"realised", "budget_left", "probability"}}}`` (module docstring).
    """

    decisions: list[xr.Dataset]
    evidence: Evidence
    budget: xr.DataArray
    policy: str
    history: list[str]
    stop_reason: str
    belief: xr.Dataset
    idata: xr.DataTree
    step_seconds: list[float]
    deployment_check: xr.Dataset | None = None
    overrun: dict[str, Any] | None = None


def step_seed(seed: int, step: int) -> int:
    """The seed of step t, derived from the campaign seed (same on resume)."""
    return int(np.random.default_rng([seed, step]).integers(2**31))


def _named(da: xr.DataArray) -> dict[str, float]:
    return {str(r): float(v) for r, v in zip(da["resource"].values, da.values, strict=True)}


class Campaign:
    """A campaign that can be stepped, run to the end, or resumed from its log.

    Parameters
    ----------
    world : World
    settings : CampaignSettings
    out : Path, optional
        Folder for ``campaign_log.jsonl``, ``decisions/step_XXX.csv``, the evidence tables
        with ``costs.csv`` (``evidence/``), ``candidates.toml``, ``choices.csv`` and the final
        ``belief.nc`` (a complete belief file, see :func:`belief.workflow.belief_file.load`).  An
        existing log there is refused unless ``overwrite=True`` (use :meth:`resume` to continue it).
    fitter : BeliefFitter, optional
        Re-use compiled models.

    Examples
    --------
    >>> c = Campaign(SyntheticWorld(seed=1), CampaignSettings(horizon=4, beta=1.0))
    >>> result = c.run()
    """

    def __init__(self, world: World, settings: CampaignSettings, out: str | Path | None = None,
                 fitter: BeliefFitter | None = None, *, overwrite: bool = False,
                 _fresh: bool = True) -> None:
        self.world = world
        self.candidates: CandidateSet = world.candidates
        if settings.weights is None:
            if world.weight_values is None:
                raise InputError("weights", "resource weights λ are required: none were given "
                                            "and the world has no default (no [weights] in "
                                            "the candidate file)")
            settings = replace(settings, weights=FixedWeights(world.weight_values))
        self.settings = settings
        self.decision_settings = settings.decision()
        self.fitter = campaign_fitter(fitter, self.candidates, settings)
        init = world.initial_evidence()
        self.initial_evidence = {k: v for k, v in init.items() if v is not None}
        self.evidence = Evidence(self.candidates).append(**self.initial_evidence)
        self.budget = (self.candidates.budget if self.candidates.budget is not None
                       else world.initial_budget)
        self.initial_budget = self.budget
        self.policy = world.initial_policy
        self.history: list[str] = []
        self.available = list(self.candidates.ids)
        self.step_index = 0
        self.decisions: list[xr.Dataset] = []
        self.step_seconds: list[float] = []
        self.decide_seconds: list[float] = []  # the decision alone (U0, CVU, Q), no fit
        self.stop_reason: str | None = None
        self.overrun: dict[str, Any] | None = None
        self._cost_rows: list[dict[str, Any]] = []
        self.belief: xr.Dataset | None = None
        self.idata: xr.DataTree | None = None
        self.out = Path(out) if out is not None else None
        self.log_path = self.out / LOG_NAME if self.out is not None else None
        self._deployment_logged = False
        self._lock: str | None = None
        if self.out is not None and _fresh:
            state = folder_state(self.out)
            if state == "campaign" and not overwrite:
                raise InputError(str(self.log_path), "a campaign log exists here: resume it "
                                                     "(Campaign.resume) or pass overwrite=True")
            if state == "other" and not overwrite:
                raise InputError(str(self.out), "the folder is not empty and holds no campaign "
                                                "log: choose an empty or new folder, or pass "
                                                "overwrite=True")
            self.out.mkdir(parents=True, exist_ok=True)
            self._hold()
            self._clear_owned()
            (self.out / "decisions").mkdir(parents=True, exist_ok=True)
            append_record(self.log_path, self._header())
        elif self.out is not None:
            self._hold()

    # -- the folder ---------------------------------------------------------------------------
    def _hold(self) -> None:
        if self._lock is None:
            self._lock = acquire_folder(self.out, "campaign folder", blocking=False)

    def release(self) -> None:
        """Release the campaign folder's lock (done by :meth:`finish`; a process that ends
        releases it too)."""
        if getattr(self, "_lock", None) is not None:
            release_folder(self._lock)
            self._lock = None

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # at interpreter exit the process releases the lock anyway
            pass

    def _clear_owned(self) -> None:
        """Starting over: remove what a campaign owns in the folder (its log, the step
        decision tables and its last outputs), never anything else."""
        from belief.files import OutputSet

        self.log_path.unlink(missing_ok=True)
        decisions = self.out / "decisions"
        if decisions.is_dir():
            for f in decisions.iterdir():
                if _STEP_FILE.fullmatch(f.name) and f.is_file():
                    f.unlink()
        outputs = OutputSet(self.out, OUTPUTS_OWNER)
        for name in outputs.owned():
            target = self.out / name
            if target.is_file():
                target.unlink()
        outputs.manifest.unlink(missing_ok=True)

    # -- log --------------------------------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        return {"record": "header", "format": LOG_FORMAT, "belief_version": _pkg.__version__,
                "world": self.world.describe(),
                "settings": settings_to_dict(self.settings),
                "candidates": candidates_to_dict(self.candidates),
                "initial_budget": _named(self.budget), "initial_policy": self.policy,
                "initial_evidence": {k: table_records(v) for k, v in self.initial_evidence.items()}}

    def _log(self, record: dict[str, Any]) -> None:
        if self.log_path is not None:
            append_record(self.log_path, record)

    # -- one step ---------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.stop_reason is not None or self.step_index >= self.settings.horizon

    def costs_table(self) -> pd.DataFrame:
        """The realised costs of the steps so far (the ``costs`` table,
        :mod:`belief.inputs.costs`): one row per executed step."""
        return pd.DataFrame(self._cost_rows,
                            columns=["step", "candidate", *self.candidates.resources, "policy"])

    def spent(self) -> dict[str, float]:
        """The realised consumption so far per resource (Σ of the realised costs)."""
        return {r: float(sum(row[r] for row in self._cost_rows))
                for r in self.candidates.resources}

    def _fit(self, step: int, seed: int) -> None:
        """q_t on D_t (and, with ``fit.costs``, the cost model on the realised costs)."""
        costs = self.costs_table() if self.settings.fit.costs else None
        self.idata, self.belief = self.fitter.fit_reliable(self.evidence, self.policy, step,
                                                           seed, costs=costs)

    def decide_next(self) -> xr.Dataset:
        """Fit on D_t, build q_t and score every candidate at the current step."""
        s = self.settings
        step = self.step_index
        seed = step_seed(s.seed, step)
        self._fit(step, seed)
        state = State(step=step, budget=self.budget, policy=self.policy, belief=self.belief,
                      history=tuple(self.history), available=tuple(self.available))
        ds = self.decision_settings
        refit = None
        if ds.beta > 0 and not ds.is_terminal(step) and s.cvu.max_refits > 0:
            from belief.posterior.refit import exact_refit

            refit = exact_refit(self.fitter, self.evidence, state, s.cvu.trials, seed,
                                s.cvu.refit_draws)
        t0 = time.perf_counter()
        decision = decide(state, self.candidates, ds, seed=seed, refit=refit)
        self.decide_seconds.append(time.perf_counter() - t0)
        if s.allocation != "q":
            pick = choose(s.allocation, decision, belief=self.belief, world=self.world,
                          history=tuple(self.history),
                          rng=np.random.default_rng([seed, 7]), candidates=self.candidates,
                          spent=self.spent())
            ids = list(decision["candidate"].values)
            decision = decision.assign({Vars.chosen: ("candidate",
                                                      np.array(ids) == pick.candidate)})
            decision.attrs.update({Attrs.q_choice: decision.attrs[Attrs.chosen],
                                   Attrs.chosen: pick.candidate, Attrs.stop: int(pick.stop),
                                   Attrs.stop_reason: pick.reason if pick.stop else ""})
        if not self.belief.attrs.get("reliable", 1) and not s.act_on_unreliable \
                and not decision.attrs[Attrs.stop]:
            reason = ("refusing to act on an unreliable belief ("
                      f"{self.belief.attrs.get('reliability_reason', '')}); re-run with more "
                      "draws, or allow it (--act-on-unreliable; act_on_unreliable=True in "
                      "Python)")
            decision = decision.assign({Vars.chosen: ("candidate", np.zeros(
                decision.sizes["candidate"], bool))})
            decision.attrs.update({Attrs.q_choice: decision.attrs[Attrs.chosen],
                                   Attrs.chosen: STOP, Attrs.stop: 1, Attrs.stop_reason: reason})
        decision.attrs[Attrs.allocation] = s.allocation
        decision.attrs[Attrs.seed] = seed
        return decision

    def _update(self, chosen: str, outcome: Outcome,
                probability: Mapping[str, float | None] | None = None) -> np.ndarray:
        """s_{t+1} = T(s_t, m, Y): evidence, budget, policy, history, candidate set.

        A realised cost above the budget left is an overrun (module docstring): recorded in
        ``self.overrun`` with ``probability`` (the decision-time Pr(ΔC_r(m) > b_t,r) per
        resource), the budget clamped at 0 and the campaign stopped."""
        for attr, expected in (("candidate", chosen), ("step", self.step_index)):
            got = getattr(outcome, attr)
            if got != expected:
                raise InputError("outcome", f"the outcome is for {attr} {got!r}, but the "
                                            f"campaign applies {attr} {expected!r}")
        resources = list(self.budget["resource"].values)
        unknown = [r for r in outcome.cost if r not in resources]
        if unknown:
            raise InputError("outcome", f"realised cost names unknown resource(s) {unknown}; "
                                        f"resources are {resources}")
        where = f"step {self.step_index}, candidate {chosen!r}"
        try:
            cost = np.array([float(outcome.cost.get(r, 0.0)) for r in resources])
        except (TypeError, ValueError):
            cost = np.array([np.nan])
        if not np.all(np.isfinite(cost)) or np.any(cost < 0):
            raise InputError("outcome", f"realised cost must be a finite number >= 0 for every "
                                        f"resource, got {dict(outcome.cost)}", where=where)
        named_cost = dict(zip(resources, cost.tolist(), strict=True))
        overrun = find_overrun(named_cost, _named(self.budget), probability)
        self.evidence = self.evidence.append(**outcome.tables(),
                                             model_updates=model_update_row(
                                                 self.candidates, chosen, self.step_index,
                                                 self.policy))
        self._cost_rows.append({"step": self.step_index, "candidate": chosen, **named_cost,
                                "policy": self.policy})
        self.budget = (self.budget - cost).clip(min=0.0)  # clamped at 0 after an overrun
        if overrun:
            self.overrun = {"step": self.step_index, "candidate": chosen, "resources": overrun}
            self.stop_reason = overrun_reason(self.step_index, chosen, overrun)
        self.policy = outcome.policy
        self.history.append(chosen)
        if not self.candidates[chosen].repeatable and chosen in self.available:
            self.available.remove(chosen)
        self.step_index += 1
        return cost

    def apply(self, decision: xr.Dataset, outcome: Any) -> dict[str, Any]:
        """Apply an outcome of the chosen candidate and log the step record (returned)."""
        step, policy, budget = self.step_index, self.policy, self.budget
        chosen = decision.attrs[Attrs.chosen]
        probability = decision_overrun(decision, chosen, self.candidates[chosen].cost,
                                       _named(budget))
        cost = self._update(chosen, outcome, probability)
        self.world.observe(outcome)
        resources = list(budget["resource"].values)
        a = decision.attrs
        record = {
            "record": "step", "step": step, "policy": policy, "budget": _named(budget),
            "lambda": {r: a.get(per_resource(Attrs.lambda_, r)) for r in resources},
            "reliable": a.get(Attrs.reliable, 1),
            "reliability_reason": a.get(Attrs.reliability_reason, ""),
            "allocation": a.get(Attrs.allocation, "q"), "chosen": chosen,
            "decision": table_records(decision_table(decision).reset_index()),
            "flip_probability": a.get(Attrs.flip_probability),
            "seed": a.get(Attrs.seed),
            "outcome": outcome_records(outcome),
            "realised_cost": dict(zip(resources, cost, strict=True)),
            "budget_after": _named(self.budget), "policy_after": self.policy}
        if outcome.true_gain is not None:
            record["true_gain"] = outcome.true_gain
        truth = self.world.true_success(self.policy)
        if truth is not None:
            record["true_success_after"] = truth
        if self.overrun is not None and self.overrun["step"] == step:
            record["overrun"] = self.overrun["resources"]
        self._log(record)
        if "overrun" in record:
            self._log_overrun_stop()
        return record

    def _log_overrun_stop(self) -> None:
        """The ``stop`` record of a campaign stopped by an overrun (after its step record)."""
        self._log({"record": "stop", "step": self.step_index, "policy": self.policy,
                   "budget": _named(self.budget), "stop_reason": self.stop_reason,
                   "overrun": self.overrun["resources"]})

    def record_decision(self, decision: xr.Dataset) -> bool:
        """Keep a decision (table CSV; a ``stop`` record when it stops); True when it stops."""
        self.decisions.append(decision)
        if self.out is not None:
            from belief.files import atomic_write

            table = decision_table(decision)
            atomic_write(self.out / "decisions" / f"step_{self.step_index:03d}.csv",
                         lambda tmp: table.to_csv(tmp))
        if decision.attrs[Attrs.stop]:
            self.stop_reason = decision.attrs[Attrs.stop_reason]
            self._log({"record": "stop", "step": self.step_index, "policy": self.policy,
                       "budget": _named(self.budget), "stop_reason": self.stop_reason,
                       "decision": table_records(decision_table(decision).reset_index()),
                       "seed": decision.attrs.get(Attrs.seed)})
        return bool(decision.attrs[Attrs.stop])

    def step(self) -> tuple[xr.Dataset, Any]:
        """Decide, execute the pick in the world and apply the outcome (None when stopping)."""
        t0 = time.perf_counter()
        decision = self.decide_next()
        self.step_seconds.append(time.perf_counter() - t0)
        if self.record_decision(decision):
            return decision, None
        outcome = self.world.execute(decision.attrs[Attrs.chosen], self.step_index)
        self.apply(decision, outcome)
        return decision, outcome

    def run(self, on_step: Callable[[int, xr.Dataset, Any], None] | None = None
            ) -> CampaignResult:
        """Step until a stop or the horizon, then check deployment and write the outputs."""
        while not self.finished:
            step = self.step_index
            decision, outcome = self.step()
            if on_step is not None:
                on_step(step, decision, outcome)
        return self.finish()

    def finish(self) -> CampaignResult:
        """Final belief, deployment check on π_T, outputs; idempotent for a finished log."""
        s = self.settings
        if self.stop_reason is None:
            self.stop_reason = f"horizon T = {s.horizon} reached"
        end = self.step_index
        if self.belief is None or self.belief.attrs.get("step") != end or \
                self.belief.attrs.get("policy") != self.policy:
            self._fit(end, step_seed(s.seed, end))
        rows = self.__dict__.get("_deployment_rows")
        if rows is None:
            rows = self.world.deployment_evaluation(end, self.policy)
            if rows is not None:
                self.evidence = self.evidence.append(deployment_safety=rows)
                self._deployment_rows = rows
        # one look, at the stop: the one-look Clopper–Pearson bound (or the posterior's)
        deployment = deployment_check(self.evidence, self.policy, s.alpha_deploy, s.gate.delta,
                                      deployment_method(s.gate.method))
        if not self._deployment_logged:
            self._log({"record": "deployment_check", "step": end, "policy": self.policy,
                       "deployment_check": dict(deployment.attrs),
                       "deployment_safety": table_records(rows)})
            self._deployment_logged = True
        result = CampaignResult(self.decisions, self.evidence, self.budget, self.policy,
                                self.history, self.stop_reason, self.belief, self.idata,
                                self.step_seconds, deployment, self.overrun)
        if self.out is not None:
            _write_outputs(self.out, result, replace(self.candidates,
                                                     budget=self.initial_budget),
                           settings_to_dict(self.settings)["weights"])
            self.release()
        return result

    # -- resume -----------------------------------------------------------------------------
    @classmethod
    def resume(cls, out: str | Path, world: World | None = None,
               settings: CampaignSettings | None = None,
               fitter: BeliefFitter | None = None) -> Campaign:
        """Continue the campaign logged in ``out``.

        The log is validated (a truncated last record — a crash mid-write — is cut off; any
        other broken record stops the resume with an error naming it); the state after the
        last intact step is rebuilt from the header and the step records; the world is brought
        to the same point by re-executing the logged steps (a world whose outcomes differ from
        the log is refused).  The next steps then use the same seeds as an uninterrupted run.
        """
        log = read_log(out)
        if log.problem and not log.problem.endswith("(no end of line)"):
            raise InputError(str(log.path), f"cannot resume: {log.problem}")
        h = log.header
        settings = settings or header_settings(h, log.path)
        try:
            if world is None:
                from belief.campaign.synthetic import world_from_spec

                world = world_from_spec(h["world"])
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, InputError):  # named for this log's header
                rule = err.rule if err.table == "campaign log" else str(err)
                raise InputError(str(log.path), rule, where="record 1 (header)") from None
            raise InputError(str(log.path), f"record 1 (header): unusable world description "
                                            f"({type(err).__name__}: {err})") from None
        logged = candidates_from_dict(h["candidates"], source=str(log.path))
        if candidates_to_dict(logged) != candidates_to_dict(world.candidates):
            raise InputError(str(log.path), "the world's candidates differ from the log's")
        c = cls(world, settings, out, fitter, _fresh=False)
        _refuse_unreproducible(h.get("settings"), log.path)
        if settings_to_dict(c.settings) != logged_settings(h["settings"]):
            raise InputError(str(log.path), "settings differ from the logged campaign's; "
                                            "resume with the logged settings")
        logged_initial = {k: pd.DataFrame(v) for k, v in h["initial_evidence"].items() if v}
        if c.initial_evidence and {k: table_records(v) for k, v in c.initial_evidence.items()} != \
                {k: table_records(v) for k, v in logged_initial.items()}:
            raise InputError(str(log.path), "the world's initial evidence differs from the "
                                            "log's (different world or seed?)")
        c.initial_evidence = logged_initial  # the log is the record of what was known
        c.evidence = Evidence(c.candidates).append(**logged_initial)
        repair_tail(log)
        (Path(out) / "decisions").mkdir(parents=True, exist_ok=True)
        for rec in log.steps:
            outcome = Outcome.from_record(rec)
            world.resume_step(outcome)  # the world reaches the logged state (or refuses)
            logged_overrun = rec.get("overrun") or {}
            c._update(rec["chosen"], outcome,
                      {r: o.get("probability") for r, o in logged_overrun.items()})
        if log.stop is not None:
            c.stop_reason = log.stop["stop_reason"]
        elif c.overrun is not None:  # stopped by an overrun whose stop record was not written
            c._log_overrun_stop()
        c._deployment_logged = log.deployment is not None
        return c


def campaign_fitter(fitter: BeliefFitter | None, candidates: CandidateSet,
                    settings: CampaignSettings) -> BeliefFitter:
    """The campaign's fitter: ``fitter`` or a new one, with the priors of the models named in
    ``settings.priors`` (a given fitter keeps its compiled models and its priors for the
    others), fitting the cost model when ``settings.fit.costs`` with
    ``settings.heavy_tailed_costs`` (when given; else the cost priors' own)."""
    resolved = resolve_priors(priors=settings.priors)
    heavy = settings.heavy_tailed_costs or resolved["costs"].heavy_tailed
    priors = {name: resolved[name] for name in settings.priors}
    priors["costs"] = replace(resolved["costs"], heavy_tailed=heavy)
    if fitter is None:
        return BeliefFitter.from_priors(candidates, settings.fit, priors)
    if settings.fit.costs and not fitter.settings.costs:
        fitter = fitter.scaled(costs=True)
    for name, value in priors.items():
        if name == "costs" and "costs" not in settings.priors:
            if settings.fit.costs and fitter.priors_of("costs").heavy_tailed != heavy:
                fitter = fitter.with_priors("costs", heavy_tailed=heavy)
        elif fitter.priors_of(name) != value:
            fitter = fitter.with_priors(name, **{f.name: getattr(value, f.name)
                                                 for f in dataclass_fields(value)})
    return fitter


def folder_state(out: str | Path) -> str:
    """What a campaign folder holds: ``"missing"``, ``"empty"``, ``"campaign"`` (a campaign
    log) or ``"other"`` (anything else: not a campaign's folder)."""
    out = Path(out)
    if not out.exists():
        return "missing"
    if not out.is_dir():
        return "other"
    if (out / LOG_NAME).exists():
        return "campaign"
    return "other" if any(out.iterdir()) else "empty"


def same_campaign(out: str | Path, world: World, settings: CampaignSettings) -> bool:
    """Whether the log in ``out`` is of this world and these settings (a restart of it gives
    the same steps: every random choice is seeded by (seed, step))."""
    try:
        header = read_log(out).header
    except InputError:
        return False
    if settings.weights is None and world.weight_values is not None:
        settings = replace(settings, weights=FixedWeights(world.weight_values))
    return (header.get("world") == world.describe()
            and isinstance(header.get("settings"), Mapping)
            and logged_settings(header["settings"]) == settings_to_dict(settings)
            and header.get("candidates") == candidates_to_dict(world.candidates))


def outputs_complete(out: str | Path) -> bool:
    """Whether the final outputs of a finished campaign are all in ``out`` (their set was
    committed: see :class:`belief.files.OutputSet`)."""
    from belief.files import OutputSet

    owned = OutputSet(out, OUTPUTS_OWNER).owned()
    return bool(owned) and all((Path(out) / name).is_file() for name in owned)


def run_campaign(world: World, settings: CampaignSettings, out: Path | None = None, *,
                 on_step: Callable[[int, xr.Dataset, Any], None] | None = None,
                 fitter: BeliefFitter | None = None) -> CampaignResult:
    """Run the closed loop for at most ``settings.horizon`` steps (see :class:`Campaign`)."""
    return Campaign(world, settings, out, fitter, overwrite=True).run(on_step)


def _write_outputs(out: Path, result: CampaignResult, candidates: CandidateSet,
                   weight_rule: dict[str, Any] | None) -> None:
    """Write ``choices.csv``, the evidence folder (tables and ``costs.csv``),
    ``candidates.toml`` and ``belief.nc``.

    ``belief.nc`` is a complete belief file (:func:`belief.workflow.belief_file.load`): it carries
    the candidate
    set (``[budget]`` = b_0; ``[weights]`` = λ when the campaign's weight rule was fixed), the
    evidence and the realised costs of every step (marked complete, so the history is exactly
    the campaign's), so that ``belief decide OUT/belief.nc`` continues from where the campaign
    stopped (budget b_0 − Σ realised costs, executed non-repeatable candidates removed).  It
    holds no fit settings, so exact CVU refits (``--refit``) are refused for it; q_t records
    its sampler settings and seed (as every fit's does) and where its evidence came from
    (``evidence_source``), for a report's header.
    """
    from belief.files import OutputSet
    from belief.inputs.candidate_file import CandidateFile, candidates_toml
    from belief.inputs.costs import validate_costs
    from belief.inputs.evidence_dir import EvidenceTables
    from belief.workflow.fitted import FittedBelief

    log = read_log(out)
    steps = log.steps
    summary = pd.DataFrame({"step": [r["step"] for r in steps],
                            "chosen": [r["chosen"] for r in steps],
                            "policy_after": [r["policy_after"] for r in steps],
                            "flip_probability": [r.get("flip_probability") for r in steps]})
    tables = dict(result.evidence.tables())
    tables["costs"] = validate_costs(pd.DataFrame(
        [{"step": r["step"], "candidate": r["chosen"], **r["realised_cost"],
          "policy": r["policy"]} for r in steps],
        columns=["step", "candidate", *candidates.resources, "policy"]), candidates)
    fixed = weight_rule is not None and weight_rule.get("kind") == "fixed"
    weights = {str(k): float(v) for k, v in weight_rule["values"].items()} if fixed else None
    header = f"candidate set of the campaign in {out.name}/ ([budget] = its b_0)"
    if weight_rule is not None and not fixed:
        header += (f"\nits λ rule was {weight_rule['kind']!r}, not fixed: no [weights]; pass "
                   "--weights to belief decide")
    text = candidates_toml(candidates, weights, header=header)
    belief = result.belief.assign_attrs(evidence_source=f"campaign {out.name}/ (its "
                                                        "evidence/ folder)")
    fitted = FittedBelief(belief, result.idata,
                          CandidateFile(candidates, text, weights, str(out / "candidates.toml")),
                          EvidenceTables(result.evidence, tables["costs"], costs_complete=True),
                          {})
    with OutputSet(out, OUTPUTS_OWNER) as outputs:  # one set: all of it or none of it
        outputs.write("choices.csv", lambda tmp: summary.to_csv(tmp, index=False))
        for name, table in tables.items():
            outputs.write(f"evidence/{name}.csv",
                          lambda tmp, table=table: table.to_csv(tmp, index=False))
        outputs.write("candidates.toml", lambda tmp: Path(tmp).write_text(text, "utf-8"))
        outputs.write("belief.nc", lambda tmp: fitted.save(tmp))
