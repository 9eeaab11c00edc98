"""The CVU problem: one object holding everything every candidate's estimate reads.

:class:`CVUProblem` replaces the long parameter lists of CVU's functions: the joint draws of
s_t, the candidates' experiments (their simulated outcomes), the costs, the budget, the λ rule,
φ, the feasibility of s_t, the settings, the horizon, and how refits and weights are handled.
What follows from these for every candidate alike — G0(s^∅) and its influence on the draws,
whether it is a near tie, the common outcome indices, the noise draws, the look-ahead context —
is derived from it on first use (:meth:`CVUProblem.prepare` derives it at once, under the
BLAS limit of :func:`belief.decision.cvu.value.continuation_value`).

:class:`Branch` is one candidate's state after it, s_{t+1}^{m,·}: what its estimators
(:mod:`belief.decision.cvu.estimators`) read besides the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import KW_ONLY, dataclass, replace
from functools import cached_property

import numpy as np

from belief.decision.cvu.lookahead import Context
from belief.decision.cvu.noise import noise_draws
from belief.decision.cvu.preposterior import NextState, draws_variance, influence, winners
from belief.decision.cvu.psis import OutcomeWeights
from belief.decision.cvu.regression import RegressionMemo
from belief.decision.feasibility import BudgetRule
from belief.decision.functionals import Functional, SortedColumns
from belief.decision.scores import g0
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment

__all__ = ["Branch", "CVUProblem", "influence_of_winner", "near_tie"]


def influence_of_winner(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                        c_lambda: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """ψ of the option G0 takes under uniform weights on the draws, at every draw (S,)."""
    c = int(winners(phi[None, :], c_lambda, np.asarray(feasible)[None, :])[0])
    if c < 0:
        return np.zeros(gain.shape[0])
    x = gain[:, c][None, :]
    return influence(functional, x, phi[c:c + 1], x, None)[0]


def near_tie(functional: Functional, gain: np.ndarray, phi: np.ndarray,
             c_lambda: np.ndarray, feasible: np.ndarray, blocks: int) -> tuple[bool, float]:
    """Whether G0(s^∅) is a near tie: the best two options (candidates or stopping) differ by
    less than 3 standard errors of their difference from the draws (influence functions,
    batch means).  Returns (tie, gap / se)."""
    u = np.where(feasible, phi - c_lambda, -np.inf)
    # options: stopping (value 0, no error) and every feasible candidate
    values = np.concatenate([[0.0], u])
    top = np.argsort(-values, kind="stable")[:2]
    if not np.isfinite(values[top[1]]):
        return False, np.inf

    def psi(o: int) -> np.ndarray:
        if o == 0:
            return np.zeros(gain.shape[0])
        x = gain[:, o - 1][None, :]
        return influence(functional, x, phi[o - 1:o], x, None)[0]

    gap = values[top[0]] - values[top[1]]
    se = np.sqrt(draws_variance(psi(int(top[0])) - psi(int(top[1])), None, blocks))
    ratio = gap / se if se > 0 else np.inf
    return bool(ratio < 3.0), float(ratio)


def _memoised(refit: Callable[[np.ndarray], np.ndarray]
              ) -> Callable[[np.ndarray], np.ndarray]:
    """``refit`` remembering its result per outcome: the channel split estimates the same
    outcomes again (:mod:`belief.decision.cvu.channels`), and an exact refit is an MCMC fit."""
    done: dict[bytes, np.ndarray] = {}

    def once(y: np.ndarray) -> np.ndarray:
        key = np.ascontiguousarray(y).tobytes()
        if key not in done:
            done[key] = refit(y)
        return done[key]

    return once


@dataclass(frozen=True)
class CVUProblem:
    """CVU(m) for every candidate in ``experiments``, from arbitrary joint draws.

    Attributes
    ----------
    gain_now : ndarray (S, C)
        Joint draws of every candidate's gain at s_t (= at s_{t+1}^∅), in sample order
        (contiguous blocks of it are used for the error of the draws).
    experiments : mapping candidate id → Experiment
        The candidates to score and how their outcomes are simulated and weighed.
    candidate_ids : list of str
        Column labels of the gain arrays (C).
    costs : ndarray (C, R)
        ΔC of every candidate.
    budget : ndarray (R,)
        b_t.
    weights : callable b → λ (R,)
        The bound weight rule (:meth:`belief.decision.weights.WeightRule.bind`): λ_t =
        weights(b_t), λ_{t+1} = weights(b_t − ΔC(m)).
    functional : Functional
        φ, the decision's functional.
    available, repeatable, safe : bool arrays (C,), optional
        Candidate set at s_t, which candidates stay after execution, and the safety gate
        (held fixed into s_{t+1}); default all True.
    feasible : bool array (C,), optional
        M_t^feasible, when the caller has it (the decision entry point); default
        available ∧ safe ∧ M^budget(b_t).
    settings : CVUSettings, optional
        Default ``CVUSettings()``.
    steps_after : int, optional
        Decisions left after m (T − t − 1 with the horizon T; None: unbounded): the
        non-myopic continuations (``settings.continuation``,
        :mod:`belief.decision.cvu.lookahead`) look at most this many steps ahead.
    defer_refits : bool
        Leave the exact refits undone: a PSIS estimate keeps the untrusted outcomes it would
        refit, counted in ``n_deferred``, and ``cvu_low``, ``cvu_high`` bound the CVU that the
        refits could give (:func:`belief.decision.cvu.psis.refit_bounds`; equal to ``cvu``
        where nothing was deferred).  Candidates are then scored on ``settings.workers``
        threads.  One-step continuation only (ValueError otherwise).
    memos : mutable mapping candidate id → OutcomeWeights, optional
        The PSIS weights (and weighted functionals) of each candidate's outcomes, kept across
        calls on the same draws, experiments and seed (a deferred estimate and its refit):
        an entry is used only for the same log-likelihood object, and filled here.
    within_budget : callable b → bool (C,), optional
        M^budget at a budget b, the same rule for s_t and every state after m
        (:class:`belief.decision.feasibility.BudgetRule`; default: the known-cost rule on
        ``costs``).  With uncertain costs the decision passes its chance constraint.
    """

    gain_now: np.ndarray
    experiments: Mapping[str, Experiment]
    candidate_ids: list[str]
    costs: np.ndarray
    budget: np.ndarray
    weights: Callable[[np.ndarray], np.ndarray]
    functional: Functional
    _: KW_ONLY
    available: np.ndarray | None = None
    repeatable: np.ndarray | None = None
    safe: np.ndarray | None = None
    feasible: np.ndarray | None = None
    settings: CVUSettings | None = None
    steps_after: int | None = None
    defer_refits: bool = False
    memos: MutableMapping[str, OutcomeWeights] | None = None
    within_budget: Callable[[np.ndarray], np.ndarray] | None = None

    def __post_init__(self) -> None:
        settings = self.settings or CVUSettings()
        if self.defer_refits and settings.continuation != "one_step":
            raise ValueError("continuation_value: refits can be deferred for the one-step "
                             f"continuation only, not {settings.continuation!r}")
        gain_now = np.asarray(self.gain_now, dtype=float)
        ones = np.ones(gain_now.shape[1], bool)
        costs = np.asarray(self.costs, float)
        fixed = {"settings": settings, "gain_now": gain_now, "costs": costs,
                 "budget": np.asarray(self.budget, float),
                 "within_budget": (BudgetRule(costs) if self.within_budget is None
                                   else self.within_budget)}
        for name in ("available", "repeatable", "safe"):
            value = getattr(self, name)
            fixed[name] = ones if value is None else np.asarray(value, bool)
        for name, value in fixed.items():
            object.__setattr__(self, name, value)

    # -- what every candidate's estimate shares (derived on first use) -------------------

    @property
    def n_candidates(self) -> int:
        """C, the columns of ``gain_now``."""
        return self.gain_now.shape[1]

    @cached_property
    def c_lambda_now(self) -> np.ndarray:
        """C_λ(c) = λ_tᵀ ΔC(c) with λ_t = weights(b_t), (C,)."""
        return self.costs @ np.asarray(self.weights(self.budget), float)

    @cached_property
    def phi_now(self) -> np.ndarray:
        """φ of every candidate's gain draws at s_t, (C,)."""
        return self.functional(self.gain_now.T)

    @cached_property
    def feasible_now(self) -> np.ndarray:
        """M_t^feasible: ``feasible``, or available ∧ safe ∧ M^budget(b_t)."""
        if self.feasible is None:
            return self.available & self.safe & self.within_budget(self.budget)
        return np.asarray(self.feasible, bool)

    @cached_property
    def g0_null(self) -> float:
        """G0(s^∅), one number per decision."""
        return float(g0(self.phi_now - self.c_lambda_now, self.feasible_now))

    @cached_property
    def belief_ok(self) -> bool:
        """Whether every gain draw of s_t is finite."""
        return bool(np.isfinite(self.gain_now).all())

    @cached_property
    def if_null(self) -> np.ndarray:
        """The influence of every draw on G0(s^∅), (S,) (zeros when the belief is not
        finite)."""
        if not self.belief_ok:
            return np.zeros(self.gain_now.shape[0])
        return influence_of_winner(self.functional, self.gain_now, self.phi_now,
                                   self.c_lambda_now, self.feasible_now)

    @cached_property
    def tie(self) -> tuple[bool, float]:
        """(near tie, gap / se) of G0(s^∅) (:func:`near_tie`)."""
        if not self.belief_ok:
            return False, np.nan
        return near_tie(self.functional, self.gain_now, self.phi_now, self.c_lambda_now,
                        self.feasible_now, self.settings.draw_blocks)

    @cached_property
    def null_columns(self) -> SortedColumns:
        """φ(gain_now.T, v) under draw weights v, the columns sorted once."""
        return SortedColumns(self.functional, self.gain_now)

    def g0_null_weighted(self, v: np.ndarray) -> float:
        """G0(s^∅) under draw weights v (S,) (the near tie's bootstrap)."""
        return float(g0(self.null_columns(v) - self.c_lambda_now, self.feasible_now))

    @property
    def kind(self) -> str:
        """The continuation (``settings.continuation``)."""
        return self.settings.continuation

    @property
    def depth(self) -> int:
        """The continuation's depth, truncated to the decisions left after m."""
        if self.steps_after is None:
            return self.settings.depth
        return min(self.settings.depth, int(self.steps_after))

    @cached_property
    def context(self) -> Context:
        """What the continuations' inner steps need (:class:`~belief.decision.cvu.lookahead.
        Context`)."""
        ids = self.candidate_ids
        return Context({ids.index(k): v for k, v in self.experiments.items() if k in ids},
                       self.gain_now, self.costs, self.weights, self.safe, self.repeatable,
                       self.functional, self.budget, self.available,
                       self.settings.k_threshold, tuple(ids), self.within_budget)

    @cached_property
    def noise_z(self) -> np.ndarray | None:
        """The noise-bias correction's draws (:func:`~belief.decision.cvu.noise.noise_draws`),
        or None without the correction."""
        if not self.settings.noise_correction:
            return None
        return noise_draws(self.settings.seed, self.n_candidates)

    @cached_property
    def outcome_index(self) -> np.ndarray:
        """The draw indices of the simulated outcomes, the same for every candidate (common
        random numbers), (J,)."""
        return np.random.default_rng([self.settings.seed, 100]).integers(
            0, self.gain_now.shape[0], self.settings.n_outcomes)

    def prepare(self) -> CVUProblem:
        """Derive everything shared at once (before candidates are scored on threads)."""
        for name in ("c_lambda_now", "phi_now", "feasible_now", "g0_null", "belief_ok",
                     "if_null", "tie", "null_columns", "context", "noise_z", "outcome_index"):
            getattr(self, name)
        return self

    # -- one candidate's state after it ----------------------------------------------------

    def branch(self, c: int) -> Branch:
        """s_{t+1}^{m,·} of candidate column ``c`` (its experiment must be given): budget
        b − ΔC(m), λ_{t+1}, m removed unless repeatable, the gate held fixed or moved by the
        outcome (the execution-risk channel); its PSIS weights from ``memos`` when they were
        built from the same log-likelihood, and an exact refit run once per outcome."""
        cid = self.candidate_ids[c]
        exp = self.experiments[cid]
        memo = None if exp.loglik is None else (self.memos or {}).get(cid)
        if exp.loglik is not None and (memo is None or memo.loglik is not exp.loglik):
            memo = OutcomeWeights(exp.loglik)
            if self.memos is not None:  # one key per candidate: safe on the scoring threads
                self.memos[cid] = memo
        if exp.refit is not None:  # one refit per distinct outcome, with or without the split
            exp = replace(exp, refit=_memoised(exp.refit))  # (so the split cannot move CVU)
        b_next = self.budget - self.costs[c]
        c_lam_next = self.costs @ np.asarray(self.weights(b_next), float)
        avail_next = self.available.copy()
        if not self.repeatable[c]:
            avail_next[c] = False
        if exp.safe_next is None:
            nxt = NextState(np.asarray(exp.next_gain, float), c_lam_next,
                            avail_next & self.safe & self.within_budget(b_next))
        else:  # the execution-risk channel: M^safe(s_{t+1}) from the outcome
            nxt = NextState(np.asarray(exp.next_gain, float), c_lam_next,
                            avail_next & self.within_budget(b_next), exp.safe_next)
        return Branch(c, exp, nxt, b_next, avail_next, self.settings.seed, memo,
                      RegressionMemo())

    def fixed_feasible(self, branch: Branch) -> np.ndarray:
        """M^feasible(s_{t+1}) of ``branch`` with the gate of s_t held fixed, (C,)."""
        return branch.available & self.safe & self.within_budget(branch.budget)


@dataclass(frozen=True)
class Branch:
    """One candidate's state after it, s_{t+1}^{m,·}.

    Attributes
    ----------
    column : int
        The candidate's column c.
    experiment : Experiment
        Its experiment (an exact refit remembered per outcome).
    next_state : NextState
        s_{t+1}^{m,·} but the simulated belief.
    budget, available : ndarray
        b_{t+1} = b_t − ΔC(m) and the candidate set after m.
    seed : int
        The problem's seed: the candidate's streams are drawn from (seed, k, c).
    memo : OutcomeWeights, optional
        Its outcomes' PSIS weights, shared by its estimates (None without a likelihood).
    fits : RegressionMemo
        Its regression outcomes and fits, likewise.
    """

    column: int
    experiment: Experiment
    next_state: NextState
    budget: np.ndarray
    available: np.ndarray
    seed: int
    memo: OutcomeWeights | None
    fits: RegressionMemo

    def streams(self) -> tuple[np.random.Generator, ...]:
        """Fresh outcome, regression and bootstrap streams of this candidate (its CVU does
        not depend on which others are scored)."""
        return tuple(np.random.default_rng([self.seed, k, self.column])
                     for k in (101, 102, 103))

    def continuation_streams(self) -> tuple[np.random.Generator, np.random.Generator]:
        """The streams of its non-myopic continuation."""
        return (np.random.default_rng([self.seed, 101, self.column]),
                np.random.default_rng([self.seed, 104, self.column]))
