"""Decision settings, parsed and validated once, when they are built.

Every caller — the notebook API (:meth:`belief.workflow.fitted.FittedBelief.decide`), the CLI,
the campaign loop, replay and the benchmarks — builds one :class:`DecisionSettings` and hands
it to the one decision entry point, :func:`belief.decision.engine.decide`.  Nothing downstream
parses a functional string or re-checks a weight again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from belief.decision.functional_registry import parse_functional
from belief.decision.functionals import Functional, Mean
from belief.decision.safety import SafetyGate
from belief.decision.weights import WeightRule, as_weight_rule
from belief.errors import InputError
from belief.validate import choice, integer, real

__all__ = ["EFFORTS", "OPTIONS", "CVUSettings", "DecisionSettings", "Effort",
           "settings_from_options"]


ESTIMATORS = ("auto", "psis", "regression")
CONTINUATIONS = ("one_step", "lookahead2", "rollout")
REFIT_SCOPES = ("decisive", "all")


@dataclass(frozen=True)
class Effort:
    """A named level of CVU's effort: the :class:`CVUSettings` fields it sets and whether it
    makes exact refits.

    Attributes
    ----------
    name : str
        ``fast``, ``default`` or ``thorough`` (:data:`EFFORTS`).
    cvu : mapping
        :class:`CVUSettings` field → value; the fields not named keep the caller's.
    refit : bool or None
        Exact refits of the gains model where PSIS k̂ is above its threshold (True), none
        (False: a campaign then sets ``max_refits`` to 0), or the caller's own default (None).
    """

    name: str
    cvu: Mapping[str, Any]
    refit: bool | None = None


EFFORTS: dict[str, Effort] = {
    # one-step, a quarter of the default's outcomes, no split by channel, no refits: measured
    # on the README example, CVU's reported standard error is the default's (the error of the
    # finite posterior draws dominates it) at about half the CVU time
    "fast": Effort("fast", {"n_outcomes": 64, "continuation": "one_step",
                            "channel_split": False}, refit=False),
    # today's defaults (belief decide: no refits; a campaign: its own, max_refits 4)
    "default": Effort("default", {"n_outcomes": 256, "continuation": "one_step",
                                  "inner_outcomes": 32, "channel_split": True}),
    # the best rule measured on the 20 varied worlds (the two-step look-ahead, 8 inner
    # outcomes, exact refits)
    "thorough": Effort("thorough", {"n_outcomes": 128, "continuation": "lookahead2",
                                    "inner_outcomes": 8, "max_refits": 2}, refit=True),
}
"""The effort levels of ``--effort`` (:meth:`CVUSettings.for_effort`); their cost and
accuracy are measured in the docs' effort how-to."""


@dataclass(frozen=True)
class CVUSettings:
    """Monte Carlo settings of CVU.

    Attributes
    ----------
    n_outcomes : int
        J, simulated outcomes per candidate for the importance (PSIS) estimator (≥ 2).
    k_threshold : float
        The cap of the Pareto k̂ above which an outcome's weights are not trusted: the
        threshold used is min(1 − 1/log10 S, k_threshold) for S reweighted draws
        (:func:`belief.decision.cvu.importance.khat_threshold`; 0.697 at S = 2000); NaN is never
        trusted.
    max_refits : int
        At most this many exact refits per candidate (outcomes with the largest k̂ first).
    chunk : int
        Outcomes processed at once (bounds memory at ~chunk·C·S floats for LCB/CVaR).
    trials : int
        Trials per arm of a simulated paired evaluation.
    refit_draws : int
        Draws (and tuning steps) per chain of an exact refit.
    refit_scope : str
        Which candidates' untrusted outcomes are refit exactly (when the decision has a refit
        hook): ``decisive`` (default) only as many as settle the choice — CVU is first
        estimated with every refit deferred and bounded
        (:func:`belief.decision.cvu.psis.refit_bounds`), then the candidates that could still
        be chosen are refit one at a time until the choice is the same at every end of the
        ranges (:mod:`belief.decision.cvu.decisive`); it is the one ``all`` makes wherever
        the ranges hold and the skipped refits would have succeeded (a failed refit can send
        a candidate to the regression estimator), and the other candidates' CVU stays
        importance-weighted (``cvu_method`` ends in ``+bounded``, ``n_deferred`` counts the
        outcomes, ``cvu_low``/``cvu_high`` bound it).  ``all``: every candidate's.  The
        one-step continuation only (``all`` is used otherwise); campaigns use ``all`` unless
        Q chooses, and replays always.
    seed : int
        Seed of the outcome draws when :func:`belief.decision.cvu.continuation_value` is called
        directly (the decision entry point passes its own seed).
    estimator : {"auto", "psis", "regression"}
        ``auto`` chooses per candidate: PSIS with control variates while the weights can be
        trusted, the regression estimator for informative studies (see
        :func:`belief.decision.cvu.continuation_value`); the others force one.
    control_variates : bool
        Use the martingale control variates in the PSIS estimator (False: the plain mean).
    noise_correction : bool
        Remove from the PSIS estimator (and from the regression estimator, with
        ``regression_noise_correction``) the excess upward bias that the noise of the
        weighted functionals, or of the fitted values, gives the maximum in G0
        (:mod:`belief.decision.cvu.noise`; the one-step
        estimates only, not the look-ahead or rollout continuations; False: the plug-in G0,
        biased upward for informative studies facing near-tied candidates).
    regression_noise_correction : bool
        With ``noise_correction``, correct the regression estimator too (the cluster-robust
        covariance of its fitted values, :func:`belief.decision.cvu.noise.fitted_noise_bias`);
        False corrects the PSIS estimator only.  Without ``noise_correction`` neither is
        corrected.  (The regression's correction was added after the PSIS one: a campaign log
        with ``noise_correction`` on but without this
        field cannot say which ran, and is refused by resume and replay.)
    max_bad_share : float
        Share of outcomes whose weights stay untrusted (k̂ > threshold after refits) that
        PSIS tolerates before ``auto`` switches to regression (0 ≤ share < 1).
    min_ess : float
        Median effective sample size of an outcome's weights below which ``auto`` treats the
        study as informative and uses regression (≥ 0).
    regression_replicates : int
        R, outcomes per joint draw of the regression estimator (N = R·S pairs, R ≥ 2).
    draw_blocks : int
        Contiguous blocks of draws for the batch-means error of the finite draws (≥ 2).
    blas_threads : int
        Threads of the BLAS pool while CVU runs (threadpoolctl; 0 = leave the pool as it is).
        Default 1: measured on the shipped example (2 cores, loaded), a β = 1 decision with
        φ = mean took 1.4–2.3 s on one thread against 6.3–8.7 s on the default pool of 2
        (``benchmarks/bench_cvu.py --threads``): CVU's products are too small for threads.
    workers : int
        Candidates whose one-step CVU is estimated at once, on threads (≥ 1; the numbers do not
        depend on it: every candidate has its own streams and memos).  A decision with exact
        refits (PyMC) scores one candidate at a time.  With more than one, the λ rule
        (``DecisionSettings.weights``, which may be a user's callable) is called from several
        threads at once.  Default 1 (a campaign already runs on every core); ``belief
        decide`` uses 2, or 1 on a one-core machine (``--cvu-workers``).
    continuation : {"one_step", "lookahead2", "rollout"}
        What CVU takes as the value of the state after m
        (:mod:`belief.decision.cvu.lookahead`): ``one_step`` ``G0(s') = max(0, max U0(·|s'))``
        (the framework's CVU, the default); ``lookahead2`` the two-step look-ahead value
        ``V_2(s') = max(0, max_{m'} U0(m'|s') + E_{Y'}[G0(s'^{m',Y'})])``; ``rollout`` the value
        R_d(s') of ``rollout_depth`` steps of the U0-greedy policy (with its stop) on the
        updated belief (R_1 = G0: depth 1 is ``one_step``).  Both are truncated to the steps
        the horizon leaves.
    rollout_depth : int
        d ≥ 1 of ``rollout``.
    inner_outcomes : int
        K ≥ 2, simulated second-step outcomes per (first outcome, next candidate) of
        ``lookahead2`` and greedy paths per first outcome of ``rollout``.
    channel_split : bool
        Split the one-step CVU by channel (own/siblings learning, order effects, execution
        safety; :mod:`belief.decision.cvu.channels`).  It costs up to two more estimates per
        candidate, only where m creates order effects or can move a gate, on the CVU's own
        outcomes, weights and refits (no refit is computed again, nor the error of the draws;
        the log-likelihood of the outcomes is evaluated again only when a non-myopic
        continuation fell back to one step); False leaves the split columns NaN.
    """

    n_outcomes: int = 256
    k_threshold: float = 0.7
    max_refits: int = 16
    chunk: int = 64
    trials: int = 100
    refit_draws: int = 250
    refit_scope: str = "decisive"
    seed: int = 0
    estimator: str = "auto"
    control_variates: bool = True
    noise_correction: bool = True
    regression_noise_correction: bool = True
    max_bad_share: float = 0.05
    min_ess: float = 100.0
    regression_replicates: int = 8
    draw_blocks: int = 32
    blas_threads: int = 1
    workers: int = 1
    continuation: str = "one_step"
    rollout_depth: int = 2
    inner_outcomes: int = 32
    channel_split: bool = True

    def __post_init__(self) -> None:
        integer(self.n_outcomes, "CVUSettings.n_outcomes", minimum=2)
        for name in ("chunk", "trials", "refit_draws"):
            integer(getattr(self, name), f"CVUSettings.{name}", minimum=1)
        integer(self.max_refits, "CVUSettings.max_refits", minimum=0)
        integer(self.seed, "CVUSettings.seed", minimum=0)
        real(self.k_threshold, "CVUSettings.k_threshold")
        choice(self.estimator, "CVUSettings.estimator", ESTIMATORS)
        choice(self.refit_scope, "CVUSettings.refit_scope", REFIT_SCOPES)
        for name in ("control_variates", "channel_split", "noise_correction",
                     "regression_noise_correction"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"CVUSettings.{name}",
                                 f"must be true or false, got {getattr(self, name)!r}")
        real(self.max_bad_share, "CVUSettings.max_bad_share", minimum=0.0, maximum=1.0,
             open_max=True)
        real(self.min_ess, "CVUSettings.min_ess", minimum=0.0)
        integer(self.regression_replicates, "CVUSettings.regression_replicates", minimum=2)
        integer(self.draw_blocks, "CVUSettings.draw_blocks", minimum=2)
        integer(self.blas_threads, "CVUSettings.blas_threads", minimum=0)
        integer(self.workers, "CVUSettings.workers", minimum=1)
        choice(self.continuation, "CVUSettings.continuation", CONTINUATIONS)
        integer(self.rollout_depth, "CVUSettings.rollout_depth", minimum=1)
        integer(self.inner_outcomes, "CVUSettings.inner_outcomes", minimum=2)

    @classmethod
    def for_effort(cls, name: str, base: CVUSettings | None = None) -> CVUSettings:
        """``base`` (default: the defaults) with the fields of effort level ``name`` set
        (:data:`EFFORTS`); an unknown level is refused naming ``effort`` and the levels.
        Whether the level makes exact refits is ``EFFORTS[name].refit``."""
        choice(name, "effort", tuple(EFFORTS))
        return replace(base if base is not None else cls(), **EFFORTS[name].cvu)

    def at_effort(self, effort: str | None, explicit: Mapping[str, Any] | None = None,
                  refit: bool | None = None) -> tuple[CVUSettings, bool | None]:
        """These settings at effort level ``effort`` under the fields given explicitly, and
        whether to refit: the level's preset (:meth:`for_effort`; none when ``effort`` is
        None), then ``explicit`` (field → value: what the user named wins over the level);
        ``refit`` (the caller's default) becomes the level's when it has one
        (``EFFORTS[effort].refit``).  The one rule ``--effort`` and
        ``FittedBelief.decide(effort=...)`` both follow."""
        base = self if effort is None else self.for_effort(effort, self)
        if effort is not None and EFFORTS[effort].refit is not None:
            refit = EFFORTS[effort].refit
        return replace(base, **dict(explicit or {})), refit

    @property
    def decisive_refits(self) -> bool:
        """Whether a decision refits only as many candidates as settle its choice:
        ``refit_scope`` ``decisive`` with the one-step continuation."""
        return self.refit_scope == "decisive" and self.continuation == "one_step"

    @property
    def depth(self) -> int:
        """Steps the continuation looks ahead in s': 1 (``one_step``), 2 (``lookahead2``) or
        ``rollout_depth`` (``rollout``)."""
        return {"one_step": 1, "lookahead2": 2}.get(self.continuation, self.rollout_depth)


@dataclass(frozen=True)
class DecisionSettings:
    """Everything a decision needs besides the state and the candidates.

    Parameters
    ----------
    weights : WeightRule, mapping resource → λ, or callable, optional
        The λ rule (a mapping or DataArray is :class:`~belief.decision.weights.FixedWeights`,
        validated here).  A decision needs it; None means "to be filled in" (e.g. from the
        candidate file's ``[weights]``, see :meth:`with_weights`).
    functional : Functional or str
        φ: a name registered in :data:`belief.decision.functional_registry.REGISTRY`
        (``"mean"``, ``"lcb:Q"`` with 0 < Q < 1, ``"cvar:A"`` with 0 < A ≤ 1, …); the same φ
        is used in U0, MV and inside CVU.
    beta : float
        β ≥ 0 in Q = U0 + β·CVU (0: myopic, CVU is not computed).
    gate : SafetyGate
        The execution-safety gate (α_exec, δ, bound).
    cvu : CVUSettings
        Monte Carlo settings of CVU.
    horizon : int, optional
        T ≥ 1: the last decision is taken at step T − 1, where CVU := 0 and Q = U0.
    stability_resamples : int
        Bootstrap replicates of Pr(argmax flips) (0 skips it).
    eps_budget : float
        ε_budget ∈ [0, 1) of the budget's chance constraint Pr(ΔC_r(m) ≤ b_t,r) ≥ 1 − ε_budget
        for every resource r, applied when q_t holds cost draws (``cost``; else the known
        costs must fit, which is the same rule at ε_budget = 0).

    The fields hold parsed objects after construction (``settings.functional`` is a
    :class:`~belief.decision.functionals.Functional`, ``settings.weights`` a
    :class:`~belief.decision.weights.WeightRule`); :meth:`replace` re-validates.
    """

    weights: WeightRule | None = None
    functional: Functional = field(default_factory=Mean)
    beta: float = 0.0
    gate: SafetyGate = field(default_factory=SafetyGate)
    cvu: CVUSettings = field(default_factory=CVUSettings)
    horizon: int | None = None
    stability_resamples: int = 200
    eps_budget: float = 0.0

    def __post_init__(self) -> None:
        from belief.decision.feasibility import ChanceConstraint

        set_ = object.__setattr__
        set_(self, "eps_budget", ChanceConstraint(self.eps_budget).eps_budget)
        if self.weights is not None:
            set_(self, "weights", as_weight_rule(self.weights))
        set_(self, "functional", parse_functional(self.functional))
        set_(self, "beta", real(self.beta, "beta", minimum=0.0))
        if not isinstance(self.gate, SafetyGate):
            raise InputError("gate", f"expected a SafetyGate, got {type(self.gate).__name__}")
        if not isinstance(self.cvu, CVUSettings):
            raise InputError("cvu", f"expected CVUSettings, got {type(self.cvu).__name__}")
        if self.horizon is not None:
            set_(self, "horizon", integer(self.horizon, "horizon", minimum=1))
        set_(self, "stability_resamples",
             integer(self.stability_resamples, "stability_resamples", minimum=0))

    def is_terminal(self, step: int) -> bool:
        """Whether ``step`` is the last decision before the horizon (CVU := 0, Q = U0 there)."""
        return self.horizon is not None and step >= self.horizon - 1

    def with_weights(self, weights: WeightRule | Mapping[str, float]) -> DecisionSettings:
        """A copy with the λ rule set (the other fields are not validated again)."""
        out = copy.copy(self)
        object.__setattr__(out, "weights", as_weight_rule(weights))
        return out

    def replace(self, **changes: Any) -> DecisionSettings:
        """A copy with fields replaced (validated like a new one)."""
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """JSON-able summary (functional string, β, gate, λ rule, horizon, CVU outcomes and
        estimator)."""
        return {"functional": str(self.functional), "beta": self.beta,
                "weights": None if self.weights is None else self.weights.describe(),
                "alpha_exec": self.gate.alpha_exec, "delta": self.gate.delta,
                "safety_method": self.gate.method,
                "horizon": self.horizon, "cvu_outcomes": self.cvu.n_outcomes,
                "cvu_estimator": self.cvu.estimator,
                "cvu_continuation": self.cvu.continuation,
                "cvu_rollout_depth": self.cvu.rollout_depth, "eps_budget": self.eps_budget}


OPTIONS: dict[str, tuple[str, str, Any]] = {
    "functional": ("decision", "functional", "mean"), "beta": ("decision", "beta", 0.0),
    "alpha_exec": ("gate", "alpha_exec", 0.1), "delta": ("gate", "delta", 0.05),
    "safety_method": ("gate", "method", "anytime"),
    "cvu_outcomes": ("cvu", "n_outcomes", 256), "horizon": ("decision", "horizon", None),
    "stability_resamples": ("decision", "stability_resamples", 200),
    "continuation": ("cvu", "continuation", "one_step"),
    "rollout_depth": ("cvu", "rollout_depth", 2),
    "eps_budget": ("decision", "eps_budget", 0.0),
    "cvu_estimator": ("cvu", "estimator", "auto"),
    "refit_scope": ("cvu", "refit_scope", "decisive"),
    "inner_outcomes": ("cvu", "inner_outcomes", 32), "max_refits": ("cvu", "max_refits", 16),
}
"""The flat options of :func:`settings_from_options`: name → (where it goes — a field of
:class:`DecisionSettings`, of its :class:`SafetyGate` or of its :class:`CVUSettings` —, the
field's name there, the option's default)."""


def settings_from_options(*, weights: WeightRule | Mapping[str, float] | None = None,
                          cvu: CVUSettings | None = None, **options: Any) -> DecisionSettings:
    """:class:`DecisionSettings` from flat options (the CLI's flags and the notebook API).

    ``options`` are the names of :data:`OPTIONS` (defaults there): ``functional``, ``beta``,
    ``horizon``, ``stability_resamples`` and ``eps_budget`` of :class:`DecisionSettings`;
    ``alpha_exec``, ``delta`` and ``safety_method`` (its ``method``) of the
    :class:`SafetyGate`; ``cvu_outcomes`` (``n_outcomes``), ``continuation``,
    ``rollout_depth``, ``inner_outcomes``, ``cvu_estimator`` (``estimator``),
    ``refit_scope`` and ``max_refits`` of :class:`CVUSettings` (not used when ``cvu`` is
    given).  Another name raises TypeError.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"settings_from_options() got unexpected keyword argument(s) "
                        f"{unknown}; it accepts weights, cvu and {', '.join(OPTIONS)}")
    parts: dict[str, dict[str, Any]] = {"decision": {}, "gate": {}, "cvu": {}}
    for name, (where, key, default) in OPTIONS.items():
        parts[where][key] = options.get(name, default)
    if cvu is None:
        cvu = CVUSettings(**parts["cvu"])
    return DecisionSettings(weights=weights, gate=SafetyGate(**parts["gate"]), cvu=cvu,
                            **parts["decision"])
