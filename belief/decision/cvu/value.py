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

- ``psis+cv`` (:mod:`belief.decision.cvu.psis`): J outcomes from the posterior predictive
  (the same draw indices for every candidate: common random numbers), every joint draw
  reweighted by p(Y_j | θ_i) with Pareto smoothing, φ recomputed under the weights, and
  E_Y[G0] the control-variate regression estimate with the preposterior-martingale controls
  of :mod:`belief.decision.cvu.preposterior` (for φ = mean, E_Y[E(ΔJ_c | Y)] = E(ΔJ_c) for every
  c, known exactly from the draws).  Outcomes whose weights cannot be trusted (k̂ above the
  threshold or NaN, NaN or infinite log-likelihoods or weights) are refit exactly when a refit
  hook is given (``+refit``).
- ``regression`` (:mod:`belief.decision.cvu.regression`): Strong et al. (2015) — regress
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
draws, from the influence of each draw on CVU (:mod:`belief.decision.cvu.preposterior`; batch
means over contiguous blocks, so autocorrelated MCMC draws are handled) — or, for the PSIS
estimator at a near tie of G0(s^∅) or where the influence values are too noisy to trust their
error (:func:`belief.decision.cvu.psis.noisy_influence`), the larger of that and a block
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
two-step look-ahead V_2 or the U0-greedy rollout R_d (:mod:`belief.decision.cvu.lookahead`,
which states its estimator and errors); the default ``one_step`` is the framework's CVU, and
the continuation is truncated to the decisions the horizon leaves after m.  It applies to every
candidate of a decision or to none (one-step for all when any candidate's CVU needed the
regression estimator), so that Q always compares the same quantity.

Execution-safety channel (:mod:`belief.decision.cvu.safety`): an experiment that runs
``safety_runs`` safety trials of an execution-risk cell (a hardware run of its own, or a bench
safety test of ``safety_test_of``) appends the simulated unsafe count y ~ Binomial(r, p_unsafe)
to its outcome, and the gate of that cell in s_{t+1} is recomputed from (n + r, k + y)
with the gate's own bound (anytime or Clopper–Pearson) or from the reweighted p_unsafe draws
(posterior); G0(s_{t+1}^{m,Y}) uses
that gate, so a bench test can earn CVU > 0 from feasibility alone.  ``cvu_safety`` states it
per candidate.  Where no gate can change the safety of s_t is held fixed and CVU is exactly the
fixed-gate value.

Split by channel (:mod:`belief.decision.cvu.channels`): CVU = cvu_own + cvu_order +
cvu_safety_value, the sequential attribution own/siblings learning → order effects γ_{m→·} →
execution safety on common random numbers, each part with its Monte Carlo error.  The
experiments themselves come from the models through :mod:`belief.posterior.experiments`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, replace

import numpy as np
import xarray as xr

from belief.decision.cvu.channels import CHANNEL_COLUMNS
from belief.decision.cvu.estimate import Estimate
from belief.decision.cvu.estimators import (
    ESTIMATOR_ERRORS,
    Lookahead,
    OneStep,
    split_by_channel,
)
from belief.decision.cvu.lookahead import (
    Node,
    continuation_choice,
    continuation_rows,
    expected_continuation,
    needs_weights,
)
from belief.decision.cvu.preposterior import draws_variance
from belief.decision.cvu.problem import Branch, CVUProblem
from belief.decision.cvu.psis import OutcomeWeights
from belief.decision.cvu.regression import RegressionMemo
from belief.decision.cvu.safety import with_safety_channels
from belief.decision.feasibility import BudgetRule, ChanceConstraint, Feasibility, feasibility
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates
from belief.posterior.experiments import Experiment, experiments_from_belief

__all__ = ["CVUProblem", "CVUSettings", "Experiment", "Scoring", "blas_threads",
           "continuation_value", "cvu_for_state"]

#: the float columns of the dataset, in its order
_FLOAT_COLUMNS = ("cvu", "cvu_mcse", "cvu_draws_se", "cvu_se", "pareto_k", "pareto_k_bad",
                  "cvu_ess", "cvu_cv_gain", "cvu_noise_bias", "cvu_voi")
_INT_COLUMNS = ("n_refits", "cvu_outcomes", "n_deferred")


@dataclass
class _Scored:
    """One candidate's one-step estimate, on its branch, and its split by channel (None:
    not computed with it)."""

    branch: Branch
    est: Estimate
    parts: dict[str, float] | None = None


def _one_step(problem: CVUProblem, c: int, split: bool) -> _Scored:
    """Candidate c's one-step estimate (:class:`~belief.decision.cvu.estimators.OneStep`),
    failed with the reason when the draws are not finite, and its split when ``split``."""
    branch = problem.branch(c)
    nxt = branch.next_state
    if not problem.belief_ok:
        est = Estimate.failed("the belief's gain draws are not finite")
    elif nxt.gain.shape != problem.gain_now.shape or not np.isfinite(nxt.gain).all():
        est = Estimate.failed("the next-gain draws are not finite or not (S, C)")
    else:
        try:
            est = OneStep().estimate(problem, branch)
        except ESTIMATOR_ERRORS as err:
            est = Estimate.failed(f"{type(err).__name__}: {err}")
    return _Scored(branch, est, split_by_channel(problem, branch, est) if split else None)


def _score_on_threads(problem: CVUProblem, columns: list[int], split: bool,
                      workers: int) -> dict[int, _Scored]:
    """:func:`_one_step` of every column on ``workers`` threads.  Candidates are independent
    (own streams, own memos, results by index) and their array work releases the GIL.  A
    candidate's split is a task of its own, queued ``workers`` candidates after its estimate
    (the threads share the work more evenly than whole candidates would; about workers + 1
    candidates' weights are held at once)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix="belief-cvu") as pool:
        futures = {}

        def split_later(c: int) -> dict[str, float]:
            s = futures[c].result()
            return split_by_channel(problem, s.branch, s.est)

        splits = {}
        for k, c in enumerate(columns):
            futures[c] = pool.submit(_one_step, problem, c, False)
            if split and k >= workers:
                splits[columns[k - workers]] = pool.submit(split_later, columns[k - workers])
        if split:
            for c in columns[max(len(columns) - workers, 0):]:
                splits[c] = pool.submit(split_later, c)
        results = {c: futures[c].result() for c in columns}
        for c, f in splits.items():
            results[c].parts = f.result()
    return results


def _score_all(problem: CVUProblem, split: bool) -> dict[int, _Scored]:
    """The one-step estimate of every candidate with an experiment, by column; on threads
    (``settings.workers``) unless an exact refit (PyMC) must stay on this thread."""
    ids, exps = problem.candidate_ids, problem.experiments
    columns = [c for c, cid in enumerate(ids) if exps.get(cid) is not None]
    workers = min(problem.settings.workers, len(columns))
    if workers > 1 and (problem.defer_refits
                        or all(exps[ids[c]].refit is None for c in columns)):
        return _score_on_threads(problem, columns, split, workers)
    return {c: _one_step(problem, c, split) for c in columns}


def _plugin(est: Estimate) -> tuple[float, float]:
    """E_Y[G0] and its MCSE without the noise-bias correction (for V(s^∅)), NaN and 0 when
    the estimate failed."""
    if est.method == "failed":
        return np.nan, 0.0
    return est.extra.get("plugin_g0", (est.expected_g0, est.mcse))


def _null_continuation(problem: CVUProblem, depth: int, eg_one: np.ndarray,
                       se_one: np.ndarray) -> tuple[float, float]:
    """V(s^∅) and its Monte Carlo error, from the one-step estimates E_Y[G0(s^{c,Y})]:

    - look-ahead: V_2(s^∅) = max(0, max_{c feasible} U0(c) + E_Y[G0(s^{c,Y})]) (the one-step
      value against stopping of every feasible candidate; those without an estimate are
      left out);
    - rollout: R_d(s^∅) = 0 when the U0-greedy stops, else U0(c_1) + E_Y[R_{d−1}(s^{c_1,Y})]
      with c_1 = argmax U0 (R_1 = G0: the one-step estimate; deeper: the rollout of c_1).

    Candidates without an experiment teach nothing: their E[G0] is that of the state after
    them with the belief unchanged."""
    ctx, kind, settings = problem.context, problem.kind, problem.settings
    feasible_now, u0_now = problem.feasible_now, problem.phi_now - problem.c_lambda_now
    n_s = ctx.gain_now.shape[0]
    uniform = np.full((1, n_s), 1.0 / n_s)
    eg_one = eg_one.copy()
    for c in np.flatnonzero(feasible_now & np.isnan(eg_one)):
        if problem.candidate_ids[c] not in problem.experiments:
            after = Node(ctx.after(ctx.gain_now, int(c)), ctx.budget - ctx.costs[c],
                         ctx.leave(ctx.available, int(c)))
            eg_one[c] = continuation_rows(ctx, uniform, after, kind, 1, 2,
                                          np.random.default_rng(0))[0][0]
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
    exp = problem.experiments.get(problem.candidate_ids[c]) or Experiment(
        next_gain=ctx.after(ctx.gain_now, c))
    after = Node(np.asarray(exp.next_gain, float), ctx.budget - ctx.costs[c],
                 ctx.leave(ctx.available, c))
    ce = expected_continuation(ctx, exp, after, kind, depth - 1, settings.inner_outcomes,
                               problem.outcome_index,
                               (np.random.default_rng([settings.seed, 101, c]),
                                np.random.default_rng([settings.seed, 104, c])))
    return float(u[c] + ce.value), float(ce.mcse)


def _continued(problem: CVUProblem, s: _Scored, depth: int, by_regression: bool) -> Estimate:
    """The candidate's final estimate: the one-step one, or its non-myopic continuation
    (:class:`~belief.decision.cvu.estimators.Lookahead`) when ``depth`` > 1."""
    if depth <= 1 or s.est.method == "failed":
        return s.est
    try:
        return Lookahead(s.est, by_regression).estimate(problem, s.branch)
    except ESTIMATOR_ERRORS as err:
        return Estimate.failed(f"{problem.kind}: {type(err).__name__}: {err}")


def _errors(problem: CVUProblem, est: Estimate, depth: int) -> dict[str, float]:
    """``cvu_mcse``, ``cvu_draws_se`` (influence functions against G0(s^∅), the larger with
    the near tie's bootstrap) and ``cvu_se`` of a estimate that did not fail."""
    draws_se = np.nan
    if est.if_draws is not None:
        draws_se = np.sqrt(draws_variance(est.if_draws - problem.if_null, est.if_noise,
                                          problem.settings.draw_blocks))
    if "draws_sd_bootstrap" in est.extra:  # the larger of the two
        draws_se = np.fmax(draws_se, est.extra["draws_sd_bootstrap"])
    se = (np.hypot(est.mcse, draws_se) if np.isfinite(draws_se) or depth <= 1
          else est.mcse)
    return {"cvu_mcse": est.mcse, "cvu_draws_se": draws_se, "cvu_se": se}


def _row(problem: CVUProblem, s: _Scored, est: Estimate, depth: int,
         g0_base: float) -> dict[str, object]:
    """The dataset's values of one scored candidate from its final estimate."""
    value = est.expected_g0 - g0_base
    if not np.isfinite(value) and est.method != "failed":
        est = Estimate.failed(f"{est.method} gave a non-finite value ({est.reason})")
        value = np.nan
    row: dict[str, object] = {"cvu": value}
    nxt = s.branch.next_state
    if depth <= 1 and est.method != "failed":  # EVSI: E_Y[G0(s^{m,Y})] − G0(s̄^m)
        row["cvu_voi"] = est.expected_g0 - nxt.g0(
            problem.functional(nxt.gain.T)[None, :], nxt.feasible & problem.safe)[0]
    if est.method != "failed":
        row.update(_errors(problem, est, depth))
    row.update(pareto_k=est.pareto_k, pareto_k_bad=est.bad_share, cvu_ess=est.ess,
               cvu_cv_gain=est.cv_gain, cvu_noise_bias=est.extra.get("noise_bias", np.nan),
               n_refits=est.n_refits, cvu_outcomes=est.n_outcomes,
               n_deferred=est.extra.get("deferred", 0), cvu_method=est.method,
               cvu_reason=est.reason)
    if s.branch.experiment.safe_next is not None:  # the execution-risk channel
        row["cvu_safety"] = s.branch.experiment.safety_note
    if "bounds" in est.extra:
        row["reach"] = np.asarray(est.extra["bounds"], float) - est.expected_g0
    if depth > 1:
        row["cvu_bias_bound"] = est.extra.get("bias_bound", np.nan)
        row["cvu_inner_bad_share"] = est.extra.get("inner_bad_share", np.nan)
    return row


def _columns(n_c: int, rows: Mapping[int, Mapping[str, object]],
             defaults: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The dataset's per-candidate arrays, filled from the scored candidates' rows (the
    others keep their defaults: NaN, 0, "not computed", no reason, no safety channel, and
    ``defaults``)."""
    cols: dict[str, np.ndarray] = {k: np.full(n_c, np.nan) for k in _FLOAT_COLUMNS}
    cols.update(defaults)
    cols.update({k: np.zeros(n_c, int) for k in _INT_COLUMNS})
    cols.update({k: np.full(n_c, np.nan) for k in CHANNEL_COLUMNS})
    cols["reach"] = np.zeros((n_c, 2))  # how far the deferred refits could take CVU
    cols["cvu_method"] = np.array(["not computed"] * n_c, dtype=object)
    cols["cvu_reason"] = np.array(["no experiment given (not scored)"] * n_c, dtype=object)
    cols["cvu_safety"] = np.array([""] * n_c, dtype=object)
    for c, row in rows.items():
        for k, v in row.items():
            if k in cols:
                cols[k][c] = v
    return cols


def _dataset(problem: CVUProblem, cols: dict[str, np.ndarray], depth: int,
             choice: tuple[str, str], g0_null: float) -> xr.Dataset:
    """The CVU dataset over ``candidate`` (:func:`continuation_value`)."""
    settings = problem.settings
    one = {k: ("candidate", cols[k]) for k in _FLOAT_COLUMNS}
    if settings.continuation != "one_step":
        one["cvu_bias_bound"] = ("candidate", cols["cvu_bias_bound"])
        one["cvu_inner_bad_share"] = ("candidate", cols["cvu_inner_bad_share"])
        one["cvu_continuation"] = ("candidate", cols["cvu_continuation"])
    tie, tie_ratio = problem.tie
    return xr.Dataset(
        {**one, **{k: ("candidate", cols[k]) for k in _INT_COLUMNS},
         "cvu_low": ("candidate", cols["cvu"] + cols["reach"][:, 0]),
         "cvu_high": ("candidate", cols["cvu"] + cols["reach"][:, 1]),
         **{k: ("candidate", cols[k]) for k in CHANNEL_COLUMNS},
         **{k: ("candidate", cols[k]) for k in ("cvu_method", "cvu_reason", "cvu_safety")}},
        coords={"candidate": problem.candidate_ids},
        attrs={"g0_null": g0_null, "g0_null_near_tie": int(tie and depth <= 1),
               "g0_null_gap_in_se": tie_ratio, "n_outcomes": settings.n_outcomes,
               "k_threshold": settings.k_threshold, "functional": str(problem.functional),
               "estimator": settings.estimator,
               **({"continuation": settings.continuation, "continuation_depth": depth,
                   "continuation_inner_outcomes": settings.inner_outcomes,
                   "continuation_used": choice[0], "continuation_reason": choice[1]}
                  if settings.continuation != "one_step" else {})})


def _continuation_columns(problem: CVUProblem, depth: int, used: str
                          ) -> dict[str, np.ndarray]:
    """``cvu_continuation`` and the defaults of ``cvu_bias_bound``, ``cvu_inner_bad_share``
    of every candidate (0 and the one-step label when one step is used)."""
    n_c, one = problem.n_candidates, depth <= 1 or used == "one_step"
    label = "one_step" if one else f"{problem.kind}(d={depth})"
    return {"cvu_continuation": np.full(n_c, label, dtype=object),
            "cvu_bias_bound": np.full(n_c, 0.0 if one else np.nan),
            "cvu_inner_bad_share": np.full(n_c, np.nan)}


def _scored_rows(problem: CVUProblem, scored: dict[int, _Scored], depth: int,
                 split_now: bool) -> dict[int, dict[str, object]]:
    """Every scored candidate's row: its split by channel (computed here with fresh memos
    when a continuation fell back to one step), its final estimate and its errors."""
    by_regression = depth > 1 and any(needs_weights(s.est.method) for s in scored.values())
    g0_base = problem.g0_null if depth <= 1 else 0.0  # depth > 1: V(s^∅) is subtracted later
    rows = {}
    for c, s in scored.items():
        parts = s.parts
        if problem.settings.channel_split and depth <= 1 and problem.belief_ok and not split_now:
            loglik = s.branch.experiment.loglik
            fresh = replace(s.branch, memo=OutcomeWeights(loglik) if loglik is not None
                            else None, fits=RegressionMemo())
            parts = split_by_channel(problem, fresh, s.est)
        rows[c] = {**(parts or {}),
                   **_row(problem, s, _continued(problem, s, depth, by_regression), depth,
                          g0_base)}
    return rows


def _continuation_value(problem: CVUProblem) -> xr.Dataset:
    """:func:`continuation_value` on a prepared problem."""
    depth = problem.depth
    # a one-step CVU is split while its outcomes' weights are at hand (one candidate's memo
    # at a time: its smoothed and raw weights, 2·J·S floats, or its regression outcomes and
    # fits — unless the caller keeps them in ``memos``); a continuation that falls back to
    # one step is split afterwards, with fresh memos (the log-likelihood is evaluated again)
    split_now = problem.settings.channel_split and depth <= 1 and problem.belief_ok
    scored = _score_all(problem, split_now)
    # all or none: the continuation replaces G0 for every scored candidate or for none, so
    # that Q compares like with like; one estimator family for every candidate: nested
    # regression when any scored candidate's one-step estimate could not use weights
    steps_after = problem.steps_after
    used, why = continuation_choice(
        depth, problem.kind,
        {problem.candidate_ids[c]: s.est.method for c, s in scored.items()},
        "no decisions left after m" if steps_after is not None and steps_after <= 1 else "")
    cont = _continuation_columns(problem, depth, used)
    if used == "one_step":
        depth = 1
    cols = _columns(problem.n_candidates, _scored_rows(problem, scored, depth, split_now),
                    cont)
    g0_null = problem.g0_null
    if depth > 1:
        eg_se = np.array([_plugin(scored[c].est) if c in scored else (np.nan, 0.0)
                          for c in range(problem.n_candidates)]).reshape(-1, 2)
        g0_null, null_se = (_null_continuation(problem, depth, eg_se[:, 0], eg_se[:, 1])
                            if problem.belief_ok else (np.nan, np.nan))
        cols["cvu"] = cols["cvu"] - g0_null
        cols["cvu_mcse"] = np.hypot(cols["cvu_mcse"], null_se)
        cols["cvu_se"] = np.hypot(cols["cvu_se"], null_se)
    return _dataset(problem, cols, depth, (used, why), g0_null)


def continuation_value(problem: CVUProblem) -> xr.Dataset:
    """CVU(m) for every candidate in ``problem.experiments``, from arbitrary joint draws.

    Parameters
    ----------
    problem : CVUProblem
        The draws, candidates, costs, budget, λ rule, φ, feasibility, settings and options
        (:class:`belief.decision.cvu.problem.CVUProblem`, whose attributes are documented
        there); its candidates with an experiment are scored.

    With ``settings.continuation`` other than ``one_step`` (and more than one step left), G0
    is replaced by the continuation V in both terms, CVU = E_Y[V(s^{m,Y})] − V(s^∅) and
    ``g0_null`` holds V(s^∅); the one-step estimator is computed first for every candidate
    (it chooses between PSIS and regression).  The continuation is importance-weighted
    (:mod:`belief.decision.cvu.lookahead`) when every scored candidate's one-step estimate
    used PSIS, and by nested regression (:mod:`belief.decision.cvu.lookahead_regression`;
    two steps only) for every candidate when any used regression (an informative study: no
    weights to look further ahead from).  It is used for all scored candidates or for none
    (:func:`belief.decision.cvu.lookahead.continuation_choice`): a rollout deeper than two
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
    of s_t is held fixed); the split of CVU by channel (:mod:`belief.decision.cvu.channels`:
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
    with blas_threads(problem.settings.blas_threads):
        return _continuation_value(problem.prepare())


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


@dataclass(frozen=True)
class Scoring:
    """What a decision hands :func:`cvu_for_state` besides the state: how this call scores.

    Attributes
    ----------
    seed : int, optional
        Seed of the simulated outcomes (default ``settings.cvu.seed``).
    feas : Feasibility, optional
        The decision's feasibility (computed by :func:`cvu_for_state` when absent).
    only : collection of str, optional
        Score only these candidates (of the feasible ones); every candidate's estimate uses
        its own streams, so it is the same as when all are scored.
    defer_refits : bool
        Bound what the refits could change instead of running them
        (:class:`~belief.decision.cvu.problem.CVUProblem`).
    memos : mutable mapping, optional
        Weights kept across calls (:class:`~belief.decision.cvu.problem.CVUProblem`).
    """

    seed: int | None = None
    feas: Feasibility | None = None
    only: Collection[str] | None = None
    defer_refits: bool = False
    memos: MutableMapping[str, OutcomeWeights] | None = None


def cvu_for_state(state: State, candidates: CandidateSet, settings: DecisionSettings, *,
                  experiments: Mapping[str, Experiment] | None = None,
                  refit: Callable[[str, np.ndarray], np.ndarray] | None = None,
                  costs: np.ndarray | None = None, cost_draws: np.ndarray | None = None,
                  scoring: Scoring | None = None) -> xr.Dataset:
    """CVU of every feasible candidate at ``state`` under the decision's settings.

    Parameters
    ----------
    state : State
        s_t; q_t must hold the gains model's joint draws unless ``experiments`` are given.
    candidates : CandidateSet
    settings : DecisionSettings
        φ, the λ rule, the gate and the CVU settings of the decision.
    experiments : mapping id → Experiment, optional
        Default: :func:`belief.posterior.experiments.experiments_from_belief`.
    refit : callable (m, Y) → next-gain draws, optional
        Exact refits where k̂ > ``settings.cvu.k_threshold``
        (:func:`belief.posterior.refit.exact_refit`).
    costs : array (C, R), optional
        ΔC(m) of the budget dynamics (default: the candidate file's known costs, or E[ΔC(m)]
        of ``cost_draws`` when given — what the decision passes, see
        :mod:`belief.decision.engine`).
    cost_draws : array (S, C, R), optional
        Joint predictive draws of ΔC (a cost posterior): M^budget is then the decision's chance
        constraint (ε_budget of ``settings``) at s_t and after m alike
        (:class:`belief.decision.feasibility.BudgetRule`); default the known-cost test.
    scoring : Scoring, optional
        The seed, the decision's feasibility, which candidates, deferred refits and memos
        (default ``Scoring()``).
    """
    sc = scoring or Scoring()
    seed, feas, only = sc.seed, sc.feas, sc.only
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
    return continuation_value(CVUProblem(
        belief["gain"].transpose("sample", "candidate").values, exps, ids, costs, budget,
        settings.weights.bind(candidates.resources, state), settings.functional,
        available=feas.available, repeatable=np.array([c.repeatable for c in candidates]),
        safe=feas.safe, feasible=feas.feasible, settings=cvu_settings,
        steps_after=(None if settings.horizon is None
                     else settings.horizon - int(state.step) - 1), defer_refits=sc.defer_refits,
        memos=sc.memos, within_budget=rule))
