"""CVU: the continuation value, by preposterior simulation — PSIS with control variates, or
regression for informative studies — with its Monte Carlo error and the error of the draws.

For a candidate m at state s_t::

    CVU(m | s_t) = E_Y[ G0(s_{t+1}^{m,Y}) ] − G0(s_{t+1}^∅),
    G0(s)        = max(0, max_{m' ∈ M^feasible(s)} U0(m' | s)),   U0 = φ(ΔJ) − λᵀΔC.

s_{t+1}^{m,Y} — beliefs updated by the outcome Y of m's experiment, budget b − ΔC(m), weights
λ_{t+1} = λ(b − ΔC(m)), m removed if it is not repeatable, the policy changed if m adapts it;
s_{t+1}^∅ — beliefs, budget, λ and policy unchanged.  ΔC(m) is charged once, in U0; CVU may be
negative.

Estimators, chosen per candidate (``CVUSettings.estimator = "auto"``):

- ``psis+cv`` (:mod:`belief.decision.cvu_psis`): J outcomes from the posterior predictive
  (the same draw indices for every candidate: common random numbers), every joint draw
  reweighted by p(Y_j | θ_i) with Pareto smoothing, φ recomputed under the weights, and
  E_Y[G0] the control-variate regression estimate with the preposterior-martingale controls
  of :mod:`belief.decision.preposterior` (for φ = mean, E_Y[E(ΔJ_c | Y)] = E(ΔJ_c) for every
  c, known exactly from the draws).  Outcomes whose weights cannot be trusted (k̂ above the
  threshold or NaN, NaN or infinite log-likelihoods or weights) are refit exactly when a refit
  hook is given (``+refit``).
- ``regression`` (:mod:`belief.decision.cvu_regression`): Strong et al. (2015) — regress
  every candidate's gain on a spline basis of the simulated outcome, no reweighting; used
  when the study is too informative for the weights: more than ``max_bad_share`` of the
  outcomes untrusted after refits, any outcome with non-finite weights not refit, or a median
  effective sample size below ``min_ess``.  For LCB/CVaR it assumes a location–scale
  conditional distribution (``regression+ls``).
- ``no outcome``: an experiment no model predicts changes only budget, λ, the candidate set
  and the policy; its CVU is exact given the draws.
- ``failed``: the CVU could not be estimated (the reason says why); it is NaN, and the
  decision entry point refuses to rank the candidate.

Errors: ``cvu_mcse`` is the Monte Carlo error of the simulated outcomes given the draws (the
error that more outcomes remove); ``cvu_draws_se`` the error of the finite set of S posterior
draws, from the influence of each draw on CVU (:mod:`belief.decision.preposterior`; batch
means over contiguous blocks, so autocorrelated MCMC draws are handled) — or, for the PSIS
estimator at a near tie of G0(s^∅) or where the influence values are too noisy to trust their
error (:func:`belief.decision.cvu_psis.noisy_influence`), the larger of that and a block
bootstrap of the draws; ``cvu_se`` both.
The control variates act on E_Y[G0(s^{m,Y})], and G0(s^∅) is computed from the same draws
without simulation, so they reduce the outcome error of CVU, of Q = U0 + β·CVU and of
value_vs_stop = U0 + β·E_Y[G0] alike (G0(s^∅) cancels between CVU and value_vs_stop
exactly); the draws error is CVU's (most of the draws' error of E_Y[G0] and G0(s^∅) is common
and cancels in the difference).

s^∅ is the same for every candidate: the same step, beliefs, policy and candidate set, the
budget b_t (not deducted) and therefore λ_t = λ(b_t) even for a state-dependent λ rule, and no
background drift (the engine models none); so G0(s^∅) is one number per decision
(``g0_null``) and Q = U0 + β·CVU ranks candidates exactly as U0 + β·E_Y[G0(s^{m,Y})] does.

``CVUSettings.continuation`` replaces G0 by a non-myopic continuation V in both terms — the
two-step look-ahead V_2 or the U0-greedy rollout R_d (:mod:`belief.decision.cvu_lookahead`,
which states its estimator and errors); the default ``one_step`` is the framework's CVU, and
the continuation is truncated to the decisions the horizon leaves after m.  It applies to every
candidate of a decision or to none (one-step for all when any candidate's CVU needed the
regression estimator), so that Q always compares the same quantity.

Execution-safety channel (:mod:`belief.decision.cvu_safety`): an experiment that runs
``safety_runs`` safety trials of an execution-risk cell (a hardware run of its own, or a bench
safety test of ``safety_test_of``) appends the simulated unsafe count y ~ Binomial(r, p_unsafe)
to its outcome, and the gate of that cell in s_{t+1} is recomputed from (n + r, k + y)
with the gate's own bound (anytime or Clopper–Pearson) or from the reweighted p_unsafe draws
(posterior); G0(s_{t+1}^{m,Y}) uses
that gate, so a bench test can earn CVU > 0 from feasibility alone.  ``cvu_safety`` states it
per candidate.  Where no gate can change the safety of s_t is held fixed and CVU is exactly the
fixed-gate value.

Split by channel (:mod:`belief.decision.cvu_channels`): CVU = cvu_own + cvu_order +
cvu_safety_value, the sequential attribution own/siblings learning → order effects γ_{m→·} →
execution safety on common random numbers, each part with its Monte Carlo error.  The
experiments themselves come from the models through :mod:`belief.posterior.experiments`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import replace

import numpy as np
import xarray as xr

from belief.decision.cvu_channels import CHANNEL_COLUMNS, channel_split
from belief.decision.cvu_estimate import Estimate
from belief.decision.cvu_lookahead import (
    Context,
    continuation_choice,
    continuation_rows,
    expected_continuation,
    needs_weights,
)
from belief.decision.cvu_lookahead_regression import regression_continuation
from belief.decision.cvu_noise import noise_draws
from belief.decision.cvu_psis import OutcomeWeights, importance_estimate
from belief.decision.cvu_regression import RegressionMemo, regression_estimate
from belief.decision.cvu_safety import with_safety_channels
from belief.decision.feasibility import (
    BudgetRule,
    ChanceConstraint,
    Feasibility,
    feasibility,
)
from belief.decision.functionals import Functional, SortedColumns
from belief.decision.importance import psis
from belief.decision.preposterior import NextState, draws_variance, influence, winners
from belief.decision.scores import g0
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates
from belief.posterior.experiments import Experiment, experiments_from_belief

__all__ = ["CVUSettings", "Experiment", "blas_threads", "continuation_value", "cvu_for_state",
           "psis"]

_ESTIMATOR_ERRORS = (np.linalg.LinAlgError, FloatingPointError, ValueError)


def _influence_of_winner(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                         c_lambda: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """ψ of the option G0 takes under uniform weights on the draws, at every draw (S,)."""
    c = int(winners(phi[None, :], c_lambda, np.asarray(feasible)[None, :])[0])
    if c < 0:
        return np.zeros(gain.shape[0])
    x = gain[:, c][None, :]
    return influence(functional, x, phi[c:c + 1], x, None)[0]


def _near_tie(functional: Functional, gain: np.ndarray, phi: np.ndarray,
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


def _estimate(exp: Experiment, nxt: NextState, functional: Functional, idx: np.ndarray,
              rngs: tuple[np.random.Generator, ...], settings: CVUSettings,
              bootstrap: Callable[[np.ndarray], float] | None = None,
              noise_z: np.ndarray | None = None, memo: OutcomeWeights | None = None,
              draws_influence: bool = True, fits: RegressionMemo | None = None,
              defer_refits: bool = False, if_null: np.ndarray | None = None) -> Estimate:
    """One candidate's E_Y[G0(s^{m,Y})] with the estimator the settings and the weights call
    for (module docstring); ``noise_z``: the PSIS estimate's noise-bias correction, and the
    regression estimate's with ``settings.regression_noise_correction``
    (:mod:`belief.decision.cvu_noise`; its Monte Carlo error is added to the MCSE); ``memo``:
    the PSIS weights of this experiment's outcomes shared with other estimates on them, and
    ``fits`` its regression outcomes and fits likewise; ``draws_influence`` False: no error of
    the draws (the channel split's estimates); ``defer_refits``: the refits' range instead of
    the refits (:func:`belief.decision.cvu_psis.importance_estimate`)."""
    if exp.simulate is None:
        phi = functional(nxt.gain.T)
        value = float(nxt.g0(phi[None, :])[0])
        infl = _influence_of_winner(functional, nxt.gain, phi, nxt.c_lambda, nxt.feasible)
        return Estimate(value, 0.0, "no outcome", "no model predicts this experiment's "
                        "outcome: budget, λ, candidate set and policy change only (a model "
                        "update's order effects enter through next_gain; no safety gate "
                        "can change: belief.decision.cvu_safety)",
                        if_draws=infl, if_noise=np.zeros_like(infl))
    regression = {"replicates": settings.regression_replicates,
                  "noise_z": noise_z if settings.regression_noise_correction else None,
                  "memo": fits}
    if settings.estimator == "regression" or exp.loglik is None:
        why = ("regression forced by the settings" if settings.estimator == "regression"
               else "the experiment has no likelihood to reweight by")
        return regression_estimate(nxt, functional, exp.simulate, rngs[1], reason=why,
                                   **regression)
    y = np.asarray(exp.simulate(rngs[0], idx))
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        return Estimate.failed("the simulated outcomes are not finite")
    est, reason, diag = importance_estimate(
        nxt, functional, y, exp.loglik, exp.refit, k_threshold=settings.k_threshold,
        max_refits=settings.max_refits, chunk=settings.chunk,
        max_bad_share=settings.max_bad_share, min_ess=settings.min_ess,
        control_variates=settings.control_variates, forced=settings.estimator == "psis",
        noise_z=noise_z,
        bootstrap=bootstrap, blocks=settings.draw_blocks, rng=rngs[2], memo=memo,
        draws_influence=draws_influence, defer_refits=defer_refits,
        refit_draws=settings.refit_draws, if_null=if_null)
    if est is not None:
        return est
    est = regression_estimate(nxt, functional, exp.simulate, rngs[1], reason=reason,
                              **regression)
    est.pareto_k, est.bad_share, est.ess = diag["pareto_k"], diag["bad_share"], diag["ess"]
    return est


def _memoised(refit: Callable[[np.ndarray], np.ndarray]
              ) -> Callable[[np.ndarray], np.ndarray]:
    """``refit`` remembering its result per outcome: the channel split estimates the same
    outcomes again (:mod:`belief.decision.cvu_channels`), and an exact refit is an MCMC fit."""
    done: dict[bytes, np.ndarray] = {}

    def once(y: np.ndarray) -> np.ndarray:
        key = np.ascontiguousarray(y).tobytes()
        if key not in done:
            done[key] = refit(y)
        return done[key]

    return once


def _null_continuation(ctx: Context, experiments: Mapping[str, Experiment],
                       candidate_ids: list[str], kind: str, depth: int, u0_now: np.ndarray,
                       feasible_now: np.ndarray, eg_one: np.ndarray, se_one: np.ndarray,
                       idx: np.ndarray, settings: CVUSettings) -> tuple[float, float]:
    """V(s^∅) and its Monte Carlo error, from the one-step estimates E_Y[G0(s^{c,Y})]:

    - look-ahead: V_2(s^∅) = max(0, max_{c feasible} U0(c) + E_Y[G0(s^{c,Y})]) (the one-step
      value against stopping of every feasible candidate; those without an estimate are
      left out);
    - rollout: R_d(s^∅) = 0 when the U0-greedy stops, else U0(c_1) + E_Y[R_{d−1}(s^{c_1,Y})]
      with c_1 = argmax U0 (R_1 = G0: the one-step estimate; deeper: the rollout of c_1).

    Candidates without an experiment teach nothing: their E[G0] is that of the state after
    them with the belief unchanged."""
    n_s = ctx.gain_now.shape[0]
    uniform = np.full((1, n_s), 1.0 / n_s)
    eg_one = eg_one.copy()
    for c in np.flatnonzero(feasible_now & np.isnan(eg_one)):
        if candidate_ids[c] not in experiments:
            eg_one[c] = continuation_rows(
                ctx, uniform, ctx.after(ctx.gain_now, int(c)), ctx.budget - ctx.costs[c],
                ctx.leave(ctx.available, int(c)), kind, 1, 2, np.random.default_rng(0))[0][0]
    if kind == "lookahead2":
        vals = np.where(feasible_now & np.isfinite(eg_one), u0_now + eg_one, -np.inf)
        c = int(vals.argmax())
        return (float(vals[c]), float(se_one[c])) if vals[c] > 0 else (0.0, 0.0)
    u = np.where(feasible_now, u0_now, -np.inf)
    c = int(u.argmax())
    if not u[c] > 0:
        return 0.0, 0.0
    if depth == 2:
        return float(u[c] + eg_one[c]), float(se_one[c])
    exp = experiments.get(candidate_ids[c]) or Experiment(
        next_gain=ctx.after(ctx.gain_now, c))
    ce = expected_continuation(ctx, exp, np.asarray(exp.next_gain, float),
                               ctx.budget - ctx.costs[c], ctx.leave(ctx.available, c), kind,
                               depth - 1, settings.inner_outcomes, idx,
                               np.random.default_rng([settings.seed, 101, c]),
                               np.random.default_rng([settings.seed, 104, c]))
    return float(u[c] + ce.value), float(ce.mcse)


def continuation_value(gain_now: np.ndarray, experiments: Mapping[str, Experiment],
                       candidate_ids: list[str], costs: np.ndarray, budget: np.ndarray,
                       weights: Callable[[np.ndarray], np.ndarray], functional: Functional,
                       *, available: np.ndarray | None = None,
                       repeatable: np.ndarray | None = None, safe: np.ndarray | None = None,
                       feasible: np.ndarray | None = None,
                       settings: CVUSettings | None = None,
                       steps_after: int | None = None,
                       defer_refits: bool = False,
                       memos: MutableMapping[str, OutcomeWeights] | None = None,
                       within_budget: Callable[[np.ndarray], np.ndarray] | None = None
                       ) -> xr.Dataset:
    """CVU(m) for every candidate in ``experiments`` from arbitrary joint draws.

    Parameters
    ----------
    gain_now : ndarray (S, C)
        Joint draws of every candidate's gain at s_t (= at s_{t+1}^∅), in sample order
        (contiguous blocks of it are used for the error of the draws).
    experiments : mapping candidate id → Experiment
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
    settings : CVUSettings
    steps_after : int, optional
        Decisions left after m (T − t − 1 with the horizon T; None: unbounded): the
        non-myopic continuations (``settings.continuation``, :mod:`belief.decision.
        cvu_lookahead`) look at most this many steps ahead.
    defer_refits : bool
        Leave the exact refits undone: a PSIS estimate keeps the untrusted outcomes it would
        refit, counted in ``n_deferred``, and ``cvu_low``, ``cvu_high`` bound the CVU that the
        refits could give (:func:`belief.decision.cvu_psis.refit_bounds`; equal to ``cvu``
        where nothing was deferred).  Candidates are then scored on ``settings.workers``
        threads.  One-step continuation only (ValueError otherwise).
    within_budget : callable b → bool (C,), optional
        M^budget at a budget b, the same rule for s_t and every state after m
        (:class:`belief.decision.feasibility.BudgetRule`; default: :func:`affordable` on
        ``costs``).  With uncertain costs the decision passes its chance constraint.
    memos : mutable mapping candidate id → OutcomeWeights, optional
        The PSIS weights (and weighted functionals) of each candidate's outcomes, kept across
        calls on the same draws, experiments and seed (a deferred estimate and its refit):
        an entry is used only for the same log-likelihood object, and filled here.

    With ``settings.continuation`` other than ``one_step`` (and more than one step left), G0
    is replaced by the continuation V in both terms, CVU = E_Y[V(s^{m,Y})] − V(s^∅) and
    ``g0_null`` holds V(s^∅); the one-step estimator is computed first for every candidate
    (it chooses between PSIS and regression).  The continuation is importance-weighted
    (:mod:`belief.decision.cvu_lookahead`) when every scored candidate's one-step estimate
    used PSIS, and by nested regression (:mod:`belief.decision.cvu_lookahead_regression`;
    two steps only) for every candidate when any used regression (an informative study: no
    weights to look further ahead from).  It is used for all scored candidates or for none
    (:func:`belief.decision.cvu_lookahead.continuation_choice`): a rollout deeper than two
    steps when any candidate needs regression falls back to the one-step CVU for every
    candidate — the dataset is then the one-step one — and the attributes
    ``continuation_used`` and ``continuation_reason`` say which continuation was used and
    why.  With the continuation, ``cvu_draws_se`` is NaN (not estimated) and ``cvu_se`` is the
    outcome error only; ``cvu_bias_bound`` bounds the continuation's upward bias from the max
    over noisy inner estimates (or fitted values).

    Returns
    -------
    Dataset over ``candidate``: ``cvu``; ``cvu_mcse`` (outcome Monte Carlo error),
    ``cvu_draws_se`` (error of the finite draws) and ``cvu_se`` (both); ``cvu_method``
    (``psis+cv``, ``psis+cv+refit``, ``psis``, ``regression``, ``regression+ls``,
    ``no outcome``, ``not computed`` or ``failed``) and ``cvu_reason``; ``pareto_k`` (max k̂
    over the PSIS outcomes, NaN counted as ∞), ``pareto_k_bad`` (share of outcomes with
    untrusted weights), ``cvu_ess`` (median effective sample size of the weights),
    ``cvu_cv_gain`` (variance reduction of the control variates), ``n_refits`` and
    ``cvu_outcomes``; ``cvu_safety`` (what the execution-risk channel does: "can open X:
    anytime UCB ≤ α_exec for y ≤ y* unsafe of r runs", "can close X: …", or empty when the gate
    of s_t is held fixed); the split of CVU by channel (:mod:`belief.decision.cvu_channels`:
    own/siblings learning, order effects, execution safety, in that order; they sum to
    ``cvu``) ``cvu_own``, ``cvu_order``, ``cvu_safety_value`` with their outcome errors
    ``cvu_own_mcse``, ``cvu_order_mcse``, ``cvu_safety_value_mcse`` (NaN for a non-myopic
    continuation or with ``settings.channel_split`` False); attribute ``g0_null`` = G0(s^∅)
    (V(s^∅) for a non-myopic continuation, which adds ``cvu_continuation``, ``cvu_bias_bound`` and
    ``cvu_inner_bad_share``); ``cvu_voi``, the expected value of m's sample information for
    the next decision, E_Y[G0(s^{m,Y})] − G0(s̄^m), with s̄^m the state after m without its
    outcome (every change of m — budget, repeat count, order effects, λ — but the draws not
    reweighted and the gate of s_t): the part of CVU that is learning.  For φ = mean it is
    ≥ 0 up to Monte Carlo error (Jensen: the posterior means average to the prior's) when the
    outcome cannot move the safety gate; through the execution-risk channel an outcome that
    may open a gate adds to it and one that may close a gate can make it negative (G0 does not
    value the unsafe executions a closed gate prevents).  NaN for a non-myopic continuation.

    BLAS runs on ``settings.blas_threads`` threads meanwhile (:func:`blas_threads`).
    """
    settings = settings or CVUSettings()
    with blas_threads(settings.blas_threads):
        return _continuation_value(
            gain_now, experiments, candidate_ids, costs, budget, weights, functional,
            available=available, repeatable=repeatable, safe=safe, feasible=feasible,
            settings=settings, steps_after=steps_after, defer_refits=defer_refits,
            memos=memos, within_budget=within_budget)


def blas_threads(n: int):
    """A context running BLAS on ``n`` threads (threadpoolctl); ``n = 0``: leave the pool as it
    is.  CVU's matrix products are on (J × S) arrays of a few hundred by a few thousand, too
    small to gain from threads and slowed by them on a loaded machine (see
    :class:`belief.decision.settings.CVUSettings`)."""
    if not n:
        import contextlib

        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(n), user_api="blas")


def _continuation_value(gain_now: np.ndarray, experiments: Mapping[str, Experiment],
                       candidate_ids: list[str], costs: np.ndarray, budget: np.ndarray,
                       weights: Callable[[np.ndarray], np.ndarray], functional: Functional,
                       *, available: np.ndarray | None = None,
                       repeatable: np.ndarray | None = None, safe: np.ndarray | None = None,
                       feasible: np.ndarray | None = None,
                       settings: CVUSettings | None = None,
                       steps_after: int | None = None,
                       defer_refits: bool = False,
                       memos: MutableMapping[str, OutcomeWeights] | None = None,
                       within_budget: Callable[[np.ndarray], np.ndarray] | None = None
                       ) -> xr.Dataset:
    settings = settings or CVUSettings()
    if defer_refits and settings.continuation != "one_step":
        raise ValueError("continuation_value: refits can be deferred for the one-step "
                         f"continuation only, not {settings.continuation!r}")
    gain_now = np.asarray(gain_now, dtype=float)
    n_s, n_c = gain_now.shape
    ones = np.ones(n_c, bool)
    available = ones if available is None else np.asarray(available, bool)
    repeatable = ones if repeatable is None else np.asarray(repeatable, bool)
    safe = ones if safe is None else np.asarray(safe, bool)
    costs = np.asarray(costs, float)
    budget = np.asarray(budget, float)
    if within_budget is None:
        within_budget = BudgetRule(costs)

    lam_now = np.asarray(weights(budget), float)
    c_lam_now = costs @ lam_now
    phi_now = functional(gain_now.T)
    feasible_now = (available & safe & within_budget(budget) if feasible is None
                    else np.asarray(feasible, bool))
    g0_null = float(g0(phi_now - c_lam_now, feasible_now))
    belief_ok = bool(np.isfinite(gain_now).all())
    if_null = (_influence_of_winner(functional, gain_now, phi_now, c_lam_now, feasible_now)
               if belief_ok else np.zeros(n_s))
    tie, tie_ratio = (_near_tie(functional, gain_now, phi_now, c_lam_now, feasible_now,
                                settings.draw_blocks) if belief_ok else (False, np.nan))

    null_columns = SortedColumns(functional, gain_now)  # φ(gain_now.T, v), sorted once

    def g0_null_weighted(v: np.ndarray) -> float:
        return float(g0(null_columns(v) - c_lam_now, feasible_now))

    depth = settings.depth if steps_after is None else min(settings.depth, int(steps_after))
    kind = settings.continuation
    ctx = Context({candidate_ids.index(k): v for k, v in experiments.items()
                   if k in candidate_ids}, gain_now, costs, weights, safe, repeatable,
                  functional, budget, available, settings.k_threshold, tuple(candidate_ids),
                  within_budget)
    g0_base = g0_null if depth <= 1 else 0.0  # depth > 1: V(s^∅) is subtracted at the end
    # the one-step estimates are corrected; the continuations' G0s stay plug-in, and so does
    # V(s^∅) built from the one-step estimates (``eg_one``), so that a continuation compares
    # like with like
    noise_z = noise_draws(settings.seed, n_c) if settings.noise_correction else None
    eg_one, se_one = np.full(n_c, np.nan), np.zeros(n_c)
    cont = np.full(n_c, "one_step" if depth <= 1 else f"{kind}(d={depth})", dtype=object)
    bias_bound = np.full(n_c, 0.0 if depth <= 1 else np.nan)
    inner_bad = np.full(n_c, np.nan)

    out = {k: np.full(n_c, np.nan) for k in ("cvu", "cvu_mcse", "cvu_draws_se", "cvu_se",
                                             "pareto_k", "pareto_k_bad", "cvu_ess",
                                             "cvu_cv_gain", "cvu_noise_bias", "cvu_voi")}
    ints = {k: np.zeros(n_c, int) for k in ("n_refits", "cvu_outcomes", "n_deferred")}
    reach = np.zeros((n_c, 2))  # how far below and above CVU the deferred refits could take it
    split = {k: np.full(n_c, np.nan) for k in CHANNEL_COLUMNS}
    method = np.array(["not computed"] * n_c, dtype=object)
    safety = np.array([""] * n_c, dtype=object)
    reason = np.array(["no experiment given (not scored)"] * n_c, dtype=object)
    # the same draw indices for every candidate (common random numbers)
    idx = np.random.default_rng([settings.seed, 100]).integers(0, n_s, settings.n_outcomes)
    one_step: dict[int, tuple[Experiment, Estimate, NextState, np.ndarray, np.ndarray,
                             Callable[[], tuple[np.random.Generator, ...]]]] = {}
    def split_of(c: int, exp: Experiment, est: Estimate, nxt: NextState, b_next: np.ndarray,
                 avail_next: np.ndarray, streams: Callable[[], tuple],
                 memo: OutcomeWeights | None, fits: RegressionMemo) -> None:
        """The one-step CVU's split by channel (module cvu_channels) into ``split``, on the
        CVU's outcomes and, through ``memo`` and ``fits``, their weights or regression fits;
        no error of the draws."""
        try:
            parts = channel_split(
                exp, nxt, est, g0_null,
                lambda e, n, s: _estimate(e, n, functional, idx, streams(), s,
                                          noise_z=noise_z, memo=memo, draws_influence=False,
                                          fits=fits, defer_refits=defer_refits),
                settings, avail_next & safe & within_budget(b_next))
        except _ESTIMATOR_ERRORS:
            parts = {}
        for k, v in parts.items():
            split[k][c] = v

    # a one-step CVU is split while its outcomes' weights are at hand (one candidate's memo
    # at a time: its smoothed and raw weights, 2·J·S floats, or its regression outcomes and
    # fits — unless the caller keeps them in ``memos``); a continuation that falls back to
    # one step is split below, with fresh memos (the log-likelihood is evaluated once more)
    split_now = settings.channel_split and depth <= 1 and belief_ok
    held: dict[int, tuple[OutcomeWeights | None, RegressionMemo]] = {}  # until split

    def score(c: int, exp: Experiment, split: bool = split_now) -> tuple:
        """Candidate c's one-step estimate (and its split when ``split``; without, its memos
        are kept in ``held`` for :func:`split_later`)."""
        memo = None if exp.loglik is None else (memos or {}).get(candidate_ids[c])
        if exp.loglik is not None and (memo is None or memo.loglik is not exp.loglik):
            memo = OutcomeWeights(exp.loglik)
            if memos is not None:  # one key per candidate: safe on the scoring threads
                memos[candidate_ids[c]] = memo
        fits = RegressionMemo()  # its regression outcomes and fits, likewise
        if exp.refit is not None:  # one refit per distinct outcome, with or without the split
            exp = replace(exp, refit=_memoised(exp.refit))  # (so the split cannot move CVU)
        b_next = budget - costs[c]
        c_lam_next = costs @ np.asarray(weights(b_next), float)
        avail_next = available.copy()
        if not repeatable[c]:
            avail_next[c] = False
        if exp.safe_next is None:
            nxt = NextState(np.asarray(exp.next_gain, float), c_lam_next,
                            avail_next & safe & within_budget(b_next))
        else:  # the execution-risk channel: M^safe(s_{t+1}) from the outcome
            nxt = NextState(np.asarray(exp.next_gain, float), c_lam_next,
                            avail_next & within_budget(b_next), exp.safe_next)
            safety[c] = exp.safety_note

        # one stream per candidate (its CVU does not depend on which others are scored)
        def streams(c: int = c) -> tuple[np.random.Generator, ...]:
            return tuple(np.random.default_rng([settings.seed, k, c]) for k in (101, 102, 103))

        rngs = streams()
        if not belief_ok:
            est = Estimate.failed("the belief's gain draws are not finite")
        elif nxt.gain.shape != gain_now.shape or not np.isfinite(nxt.gain).all():
            est = Estimate.failed("the next-gain draws are not finite or not (S, C)")
        else:
            try:
                # the block bootstrap of the draws at a near tie, or where the influence
                # values are too noisy for their error (cvu_psis.noisy_influence)
                est = _estimate(exp, nxt, functional, idx, rngs, settings,
                                bootstrap=g0_null_weighted, noise_z=noise_z,
                                memo=memo, fits=fits, defer_refits=defer_refits,
                                if_null=None if tie else if_null)
            except _ESTIMATOR_ERRORS as err:
                est = Estimate.failed(f"{type(err).__name__}: {err}")
        if split:
            split_of(c, exp, est, nxt, b_next, avail_next, streams, memo, fits)
        elif split_now:
            held[c] = (memo, fits)
        return exp, est, nxt, b_next, avail_next, streams

    scored = [(c, experiments[cid]) for c, cid in enumerate(candidate_ids)
              if experiments.get(cid) is not None]
    workers = min(settings.workers, len(scored))
    if workers > 1 and (defer_refits or all(exp.refit is None for _, exp in scored)):
        # candidates are independent (own streams, own memos, results by index) and their
        # array work releases the GIL; an exact refit (PyMC) stays on this thread.  A
        # candidate's split is a task of its own, queued ``workers`` candidates after its
        # estimate (the threads share the work more evenly than whole candidates would;
        # about workers + 1 candidates' weights are held at once)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers, thread_name_prefix="belief-cvu") as pool:
            futures = {}

            def split_later(c: int) -> None:
                exp, est, nxt, b_next, avail_next, streams = futures[c].result()
                memo, fits = held.pop(c)
                split_of(c, exp, est, nxt, b_next, avail_next, streams, memo, fits)

            splits = []
            for k, (c, exp) in enumerate(scored):
                futures[c] = pool.submit(score, c, exp, False)
                if split_now and k >= workers:
                    splits.append(pool.submit(split_later, scored[k - workers][0]))
            if split_now:
                splits += [pool.submit(split_later, c)
                           for c, _ in scored[max(len(scored) - workers, 0):]]
            results = [futures[c].result() for c, _ in scored]
            for f in splits:
                f.result()
    else:
        results = [score(c, exp) for c, exp in scored]
    for (c, _), res in zip(scored, results, strict=True):
        est = res[1]
        if est.method != "failed":
            eg_one[c], se_one[c] = est.extra.get("plugin_g0", (est.expected_g0, est.mcse))
        one_step[c] = res

    # all or none: the continuation replaces G0 for every scored candidate or for none, so
    # that Q compares like with like
    used, why = continuation_choice(
        depth, kind, {candidate_ids[c]: v[1].method for c, v in one_step.items()},
        "no decisions left after m" if steps_after is not None and steps_after <= 1
        else "")
    if used == "one_step":
        depth, g0_base = 1, g0_null
        cont[:] = "one_step"
        bias_bound[:] = 0.0
    # one estimator family for every candidate (continuation_choice): nested regression when
    # any scored candidate's one-step estimate could not use importance weights
    by_regression = depth > 1 and any(needs_weights(v[1].method) for v in one_step.values())
    for c, (exp, est, nxt, b_next, avail_next, streams) in one_step.items():
        if settings.channel_split and depth <= 1 and belief_ok and not split_now:
            split_of(c, exp, est, nxt, b_next, avail_next, streams,
                     OutcomeWeights(exp.loglik) if exp.loglik is not None else None,
                     RegressionMemo())
        if depth > 1 and est.method != "failed":
            try:
                if by_regression:
                    ce = regression_continuation(
                        ctx, exp, nxt.gain, b_next, avail_next, kind, seed=settings.seed,
                        column=c, replicates=settings.regression_replicates)
                else:
                    ce = expected_continuation(
                        ctx, exp, nxt.gain, b_next, avail_next, kind, depth,
                        settings.inner_outcomes, idx,
                        np.random.default_rng([settings.seed, 101, c]),
                        np.random.default_rng([settings.seed, 104, c]))
                est = Estimate(ce.value, ce.mcse,
                               f"{est.method}+{kind}{'-by-regression' if by_regression else ''}",
                               f"{est.reason}; {kind} (depth "
                               f"{depth}): the error of the draws is not estimated, "
                               "cvu_se is the outcome error only", n_outcomes=est.n_outcomes,
                               pareto_k=est.pareto_k, bad_share=est.bad_share,
                               n_refits=est.n_refits, ess=est.ess, cv_gain=est.cv_gain)
                bias_bound[c], inner_bad[c] = ce.bias_bound, ce.inner_bad_share
            except _ESTIMATOR_ERRORS as err:
                est = Estimate.failed(f"{kind}: {type(err).__name__}: {err}")
        value = est.expected_g0 - g0_base
        if not np.isfinite(value) and est.method != "failed":
            est = Estimate.failed(f"{est.method} gave a non-finite value ({est.reason})")
            value = np.nan
        out["cvu"][c] = value
        if depth <= 1 and est.method != "failed":  # EVSI: E_Y[G0(s^{m,Y})] − G0(s̄^m)
            out["cvu_voi"][c] = est.expected_g0 - nxt.g0(
                functional(nxt.gain.T)[None, :], nxt.feasible & safe)[0]
        if est.method != "failed":
            out["cvu_mcse"][c] = est.mcse
            if est.if_draws is not None:
                var = draws_variance(est.if_draws - if_null, est.if_noise,
                                     settings.draw_blocks)
                out["cvu_draws_se"][c] = np.sqrt(var)
            if "draws_sd_bootstrap" in est.extra:  # the larger of the two
                out["cvu_draws_se"][c] = np.fmax(out["cvu_draws_se"][c],
                                                 est.extra["draws_sd_bootstrap"])
            out["cvu_se"][c] = (np.hypot(out["cvu_mcse"][c], out["cvu_draws_se"][c])
                                if np.isfinite(out["cvu_draws_se"][c]) or depth <= 1
                                else out["cvu_mcse"][c])
        out["pareto_k"][c], out["pareto_k_bad"][c] = est.pareto_k, est.bad_share
        out["cvu_ess"][c], out["cvu_cv_gain"][c] = est.ess, est.cv_gain
        out["cvu_noise_bias"][c] = est.extra.get("noise_bias", np.nan)
        ints["n_refits"][c], ints["cvu_outcomes"][c] = est.n_refits, est.n_outcomes
        ints["n_deferred"][c] = est.extra.get("deferred", 0)
        if "bounds" in est.extra:
            reach[c] = np.asarray(est.extra["bounds"], float) - est.expected_g0
        method[c], reason[c] = est.method, est.reason
    if depth > 1:
        g0_null, null_se = _null_continuation(ctx, experiments, candidate_ids, kind, depth,
                                              phi_now - c_lam_now, feasible_now, eg_one,
                                              se_one, idx, settings) if belief_ok else (
                                                  np.nan, np.nan)
        out["cvu"] = out["cvu"] - g0_null
        out["cvu_mcse"] = np.hypot(out["cvu_mcse"], null_se)
        out["cvu_se"] = np.hypot(out["cvu_se"], null_se)
    if settings.continuation != "one_step":
        out["cvu_bias_bound"], out["cvu_inner_bad_share"] = bias_bound, inner_bad
        method_extra = {"cvu_continuation": ("candidate", cont)}
    else:
        method_extra = {}
    return xr.Dataset(
        {**{k: ("candidate", v) for k, v in out.items()}, **method_extra,
         **{k: ("candidate", v) for k, v in ints.items()},
         "cvu_low": ("candidate", out["cvu"] + reach[:, 0]),
         "cvu_high": ("candidate", out["cvu"] + reach[:, 1]),
         **{k: ("candidate", v) for k, v in split.items()},
         "cvu_method": ("candidate", method), "cvu_reason": ("candidate", reason),
         "cvu_safety": ("candidate", safety)},
        coords={"candidate": candidate_ids},
        attrs={"g0_null": g0_null, "g0_null_near_tie": int(tie and depth <= 1),
               "g0_null_gap_in_se": tie_ratio, "n_outcomes": settings.n_outcomes,
               "k_threshold": settings.k_threshold, "functional": str(functional),
               "estimator": settings.estimator,
               **({"continuation": settings.continuation, "continuation_depth": depth,
                   "continuation_inner_outcomes": settings.inner_outcomes,
                   "continuation_used": used, "continuation_reason": why}
                  if settings.continuation != "one_step" else {})})


def cvu_for_state(state: State, candidates: CandidateSet, settings: DecisionSettings, *,
                  seed: int | None = None, feas: Feasibility | None = None,
                  experiments: Mapping[str, Experiment] | None = None,
                  refit: Callable[[str, np.ndarray], np.ndarray] | None = None,
                  costs: np.ndarray | None = None, defer_refits: bool = False,
                  cost_draws: np.ndarray | None = None,
                  only: Collection[str] | None = None,
                  memos: MutableMapping[str, OutcomeWeights] | None = None) -> xr.Dataset:
    """CVU of every feasible candidate at ``state`` under the decision's settings.

    Parameters
    ----------
    state : State
        s_t; q_t must hold the gains model's joint draws unless ``experiments`` are given.
    candidates : CandidateSet
    settings : DecisionSettings
        φ, the λ rule, the gate and the CVU settings of the decision.
    seed : int, optional
        Seed of the simulated outcomes (default ``settings.cvu.seed``).
    feas : Feasibility, optional
        The decision's feasibility (computed here when absent).
    experiments : mapping id → Experiment, optional
        Default: :func:`belief.posterior.experiments.experiments_from_belief`.
    refit : callable (m, Y) → next-gain draws, optional
        Exact refits where k̂ > ``settings.cvu.k_threshold``
        (:func:`belief.posterior.refit.exact_refit`).
    costs : array (C, R), optional
        ΔC(m) of the budget dynamics (default: the candidate file's known costs, or E[ΔC(m)]
        of ``cost_draws`` when given — what the decision passes, see
        :mod:`belief.decision.engine`).
    defer_refits : bool
        Bound what the refits could change instead of running them (:func:`continuation_value`).
    cost_draws : array (S, C, R), optional
        Joint predictive draws of ΔC (a cost posterior): M^budget is then the decision's chance
        constraint (ε_budget of ``settings``) at s_t and after m alike
        (:class:`belief.decision.feasibility.BudgetRule`); default the known-cost test.
    only : collection of str, optional
        Score only these candidates (of the feasible ones); every candidate's estimate uses
        its own streams, so it is the same as when all are scored.
    memos : mutable mapping, optional
        Weights kept across calls (:func:`continuation_value`).
    """
    belief = state.belief
    check_belief_candidates(belief, candidates)
    ids = candidates.ids
    if cost_draws is not None:
        cost_draws = np.asarray(cost_draws, float)
        if cost_draws.ndim != 3 or cost_draws.shape[1:] != (len(ids), len(candidates.resources)):
            raise InputError("cost_draws", f"expected draws over (sample, candidate, resource) = "
                                           f"(S, {len(ids)}, {len(candidates.resources)}), got "
                                           f"shape {cost_draws.shape}")
    if costs is None:  # E[ΔC] of the draws when there are draws (as decide passes it)
        costs = (candidates.costs().values if cost_draws is None
                 else cost_draws.mean(axis=0))
    costs = np.asarray(costs, float)
    budget = state.budget.sel(resource=list(candidates.resources)).values.astype(float)
    rule = BudgetRule(costs, cost_draws, ChanceConstraint(settings.eps_budget))
    if feas is None:
        feas = feasibility(state, candidates, settings.gate, costs, budget,
                           cost_draws=rule.draws, chance=rule.chance)
    if experiments is None:
        experiments = experiments_from_belief(belief, candidates, settings.cvu.trials, refit)
    # Q only matters where the candidate is feasible now: the others are not scored
    exps = {k: v for k, v in experiments.items() if feas.feasible[ids.index(k)]
            and (only is None or k in only)}
    # the execution-risk channel where an outcome can move a gate of s_{t+1}
    exps = with_safety_channels(exps, belief, candidates, settings.gate, feas, costs, budget,
                                rule)
    cvu_settings = settings.cvu if seed is None else replace(settings.cvu, seed=int(seed))
    return continuation_value(
        belief["gain"].transpose("sample", "candidate").values, exps, ids, costs, budget,
        settings.weights.bind(candidates.resources, state), settings.functional,
        available=feas.available, repeatable=np.array([c.repeatable for c in candidates]),
        safe=feas.safe, feasible=feas.feasible, settings=cvu_settings,
        steps_after=(None if settings.horizon is None
                     else settings.horizon - int(state.step) - 1), defer_refits=defer_refits,
        memos=memos, within_budget=rule)
