"""CVU's non-myopic continuations: the two-step look-ahead and the greedy rollout of depth d.

The framework's CVU values the state after m by G0(s') = max(0, max_{c ∈ M'} U0(c | s')): it
assumes one more action at most.  ``CVUSettings.continuation`` replaces G0 by V(s'), in both
terms of CVU(m) = E_Y[V(s^{m,Y})] − V(s^∅) (so the value against stopping, U0(m) +
β·E_Y[V(s^{m,Y})], and the ranking use the same continuation):

- ``lookahead2``: V_2(s') = max(0, max_{c ∈ M'} U0(c | s') + E_{Y'}[G0(s'^{c,Y'})]) — the
  Bellman recursion truncated at two steps (V_1 = G0);
- ``rollout`` of depth d: R_d(s') = 0 if the U0-greedy policy stops at s' (no feasible U0 > 0),
  else U0(c_1 | s') + E_{Y_1}[R_{d−1}(s'^{c_1,Y_1})] with c_1 = argmax U0(· | s'), R_1 = G0.

β weighs only the outer term (Q = U0 + β·CVU); inside V the recursion is the Bellman one
(β = 1), as G0 is.  Both are truncated to the steps the horizon leaves after m (depth
min(d, T − t − 1)); depth 1 is ``one_step`` and uses its estimator unchanged.

**The state after a sequence of actions.**  s'' after m then c: budget b − ΔC(m) − ΔC(c),
λ'' = λ(b''), c removed if not repeatable, the safety gate held at s_t (as in one-step CVU),
the belief reweighted by both outcomes, and the gains and c's experiment those of the state
after m:

- when m's experiment has ``then`` (:func:`belief.posterior.experiments.experiments_from_belief`
  gives it from :func:`models.gains.state_after`), the step from s' uses the experiments of
  the state after m: the gains after m then c are ``then()[c].next_gain``, i.e. with π' the
  policy m produced (η' = η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z_now,m), m's repeat count
  k_m + 1, m in the history (γ_{m→·} added once, on the logit scale) and the noise moved on::

      ΔJ''_j = logistic(η'' + θ_j ρ^{k''_j} + Σ_{a ∈ h''} γ_{a→j} + τ z''_j) − logistic(η''),
      η''    = η' + θ_c ρ^{k'_c} + Σ_{a ∈ h'} γ_{a→c} + τ z_next,c   (c adapting; else η'),

  h' = h ∪ {m}, h'' = h' ∪ {c} (actors only), k'' the repeat counts after both and z'' the
  run-to-run noise of the next execution there (z_now before any policy change, z_next after
  one, then fresh standard normals seeded by the depth: common random numbers across
  candidates).  c's outcome Y' ~ ``then()[c].simulate`` with its ``loglik`` (control arm at
  η', treated arm at η''; γ_{m→c} shifts c's outcomes and likelihood).  The samples are
  those of s_t moved on by one execution, so w_j carries over; the rollout moves on along
  each path (``then`` of ``then``).  This is exact for the gains model up to one rounding
  of the gains (``tests/test_lookahead_order.py``: equal to exact enumeration);
- otherwise (hand-built experiments without ``then``; or with a custom ``after``) the gains
  after c are ``Experiment.after`` (gains of any state → gains after executing c there;
  default: add c's change at s_t, ``gains + next_gain_c − gain_now``), and the outcome model
  is c's experiment at s_t.  That shortcut adds on the gain scale: it is exact only when c's
  gain change does not depend on what ran before it — not for the gains model, whose steps
  add on the logit scale (so not even without order effects, once m changed the policy), and
  it leaves out γ_{m→c} from c's outcomes.  A state the shortcut gets right (m a diagnosis, or
  any m that leaves the draws unchanged) gives the same numbers bit for bit either way, for
  experiments as ``experiments_from_belief`` builds them.  The inner steps use the
  experiments of ``then()`` as built: experiments the decision replaced at s_t (the
  execution-risk wrappers of :mod:`belief.decision.cvu.safety`, or experiments passed to
  ``decide``) are used for m's own outcome only; after it, the outcome model is the gains
  model's (the gate is held at s_t there anyway, so a safety outcome would only reweight).

**Estimator.**  With the S joint draws and the first outcomes Y_j of m (j = 1..J, the draws of
one-step CVU: common random numbers), w_j = PSIS-smoothed weights of log p(Y_j | θ):

1. for every c ∈ M' and j, K inner outcomes: draw indices i_jk by systematic resampling from
   w_j (the same uniforms for every c), Y'_jk ~ p(· | θ_{i_jk}) from c's experiment; the
   posterior after (Y_j, Y'_jk) has log-ratios log w_j + log p(Y'_jk | θ), PSIS-smoothed to
   w''_jk (φ) with raw weights ω''_jk ∝ w_j p(Y'_jk | θ);
2. Ĝ_jc = (1/K) Σ_k [G0(s''_jk) − Z_jk], Z_jk = Σ_i ω''_jk,i u_i − Σ_i w_j,i u_i with u the
   utility of the option that is best under w_j in s'' (0 for stopping): E[Z] = 0 exactly
   (preposterior martingale: i ~ w_j, Y' ~ p(· | θ_i)), so Ĝ_jc is unbiased for
   E_{Y'}[G0(s''_j)] given the weights, and when the best option does not change Z removes the
   whole variation (an inner EVSI-style control with coefficient 1);
3. V̂_2(s^{m,Y_j}) = max(0, max_c φ_jc − C_λ'(c) + Ĝ_jc) (φ_jc under w_j, exact given w_j);
4. E_Y[V_2(s^{m,Y})] ≈ the cross-fitted control-variate mean of V̂_2 over j with the
   martingale controls of one-step CVU (:func:`belief.decision.cvu.preposterior.control_functions`).

The rollout follows K greedy paths per first outcome: at each state the greedy pick under the
path's weights (exact U0), an outcome of the picked candidate drawn from the path's posterior
predictive (index by inverse CDF of the weights), log-ratios accumulated as in step 1; the path
value is Σ U0 of its picks + G0 at its last state; R̂_d(s^{m,Y_j}) = mean over the K paths.

**Errors.**  ``mcse``: the standard error of step 4 (the sd of the adjusted values over the J
outcomes / √J, which contains the inner noise, independent across j) combined with the inner
error of V(s^∅) (computed the same way from one uniform row with K = J inner outcomes).  The
rollout is unbiased given the weights.  The look-ahead is not: the max in step 3 over noisy
Ĝ_jc is biased upward (Jensen), by at most E max_c |ε_jc| ≤ √(Σ_c Var ε_jc) per outcome, and
that bound, averaged over j (ε from the spread over k / √K, systematic resampling counted as
independent, which overstates it), is reported as ``bias_bound``: the estimate lies within
[−bias_bound − 2·mcse, 2·mcse] of E_Y[V_2] given the draws.  The error of the finite S draws is
not estimated here (``if_draws`` is None): ``cvu_draws_se`` is NaN for these continuations.
Untrusted inner weights (k̂ > threshold or NaN) are counted (``inner_bad_share``), not refit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from belief.decision.cvu.importance import khat_threshold, psis_weights
from belief.decision.cvu.preposterior import control_functions, control_variate_mean, winners
from belief.decision.feasibility import BudgetRule
from belief.decision.functionals import Functional, weighted_columns
from belief.decision.scores import g0
from belief.posterior.experiments import Experiment

__all__ = ["Context", "ContinuationEstimate", "Node", "continuation_choice", "continuation_rows",
           "expected_continuation", "needs_weights"]


@dataclass(frozen=True)
class Context:
    """What the inner steps need besides the belief: the candidates' experiments in the state
    they start from (s_t, or the state after m by :meth:`moved`), the costs, the λ rule and
    the fixed parts of feasibility.

    Attributes
    ----------
    experiments : mapping column index → Experiment
        Candidates without one have no outcome and leave the gains unchanged.
    gain_now : ndarray (S, C)
        Gains in that state (for the default ``after``: add c's change there).
    costs : ndarray (C, R)
    weights : callable b → λ (R,)
    safe, repeatable : bool ndarray (C,)
    functional : Functional
    budget : ndarray (R,)
        b_t.
    available : bool ndarray (C,)
        The candidate set at s_t.
    k_threshold : float
    ids : tuple of str
        The candidates' ids in column order (to place the experiments of ``Experiment.then``;
        empty: ``then`` is not used).
    within_budget : callable b → bool (C,), optional
        M^budget at a budget b (the decision's rule,
        :class:`belief.decision.feasibility.BudgetRule`); None: :func:`affordable` on
        ``costs``.
    """

    experiments: Mapping[int, Experiment]
    gain_now: np.ndarray
    costs: np.ndarray
    weights: Callable[[np.ndarray], np.ndarray]
    safe: np.ndarray
    repeatable: np.ndarray
    functional: Functional
    budget: np.ndarray
    available: np.ndarray
    k_threshold: float = 0.7
    ids: tuple[str, ...] = ()
    within_budget: Callable[[np.ndarray], np.ndarray] | None = None

    def c_lambda(self, budget: np.ndarray) -> np.ndarray:
        """C_λ(c) = λ(b)ᵀΔC(c) for every candidate."""
        return self.costs @ np.asarray(self.weights(budget), float)

    def feasible(self, budget: np.ndarray, available: np.ndarray) -> np.ndarray:
        """available ∧ safe (held at s_t) ∧ M^budget(b)."""
        rule = self.within_budget or BudgetRule(self.costs)
        return available & self.safe & rule(budget)

    def moved(self, exp: Experiment | None) -> Context:
        """The context of the state after executing the candidate whose experiment is ``exp``:
        the experiments of ``exp.then()`` (the state after it, same samples) with that
        state's gains ``exp.next_gain``; ``self`` when ``exp`` has no ``then`` (or a custom
        ``after``), so the steps after it fall back to the experiments at s_t."""
        if exp is None or exp.then is None or exp.after is not None or not self.ids:
            return self
        pos = {k: i for i, k in enumerate(self.ids)}
        return replace(self, experiments={pos[k]: e for k, e in exp.then().items() if k in pos},
                       gain_now=np.asarray(exp.next_gain, float))

    def step(self, c: int) -> Context:
        """The context of the state after executing candidate c from this one."""
        return self.moved(self.experiments.get(c))

    def after(self, gains: np.ndarray, c: int) -> np.ndarray:
        """Gains after executing c from a state with gains ``gains`` (module docstring): exact
        (``next_gain``, up to one rounding) when ``gains`` are this context's ``gain_now``."""
        exp = self.experiments.get(c)
        if exp is None:
            return gains
        if exp.after is not None:
            return np.asarray(exp.after(gains), float)
        return gains + (np.asarray(exp.next_gain, float) - self.gain_now)

    def leave(self, available: np.ndarray, c: int) -> np.ndarray:
        """The candidate set after c (c leaves when not repeatable)."""
        out = available.copy()
        if not self.repeatable[c]:
            out[c] = False
        return out


class Node(NamedTuple):
    """A state the continuation looks from, besides its belief: the gains (S, C), the budget
    b (R,) and the candidate set (C,) of s_t, of the state after m, or of a later one."""

    gains: np.ndarray
    budget: np.ndarray
    available: np.ndarray


def _normalise(logw: np.ndarray) -> np.ndarray:
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _log(w: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(w)


def _systematic(w: np.ndarray, u: np.ndarray, k: int) -> np.ndarray:
    """Indices (J, K) by systematic resampling of every row of w (J, S) with offsets u (J,)."""
    cdf = np.cumsum(w, axis=1)
    cdf[:, -1] = 1.0
    pos = (np.arange(k)[None, :] + u[:, None]) / k
    return np.stack([np.searchsorted(cdf[j], pos[j], side="right") for j in range(w.shape[0])])


def _inverse_cdf(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One index per row of w (P, S) at the uniforms u (P,)."""
    cdf = np.cumsum(w, axis=1)
    cdf[:, -1] = 1.0
    return np.minimum((cdf < u[:, None]).sum(axis=1), w.shape[1] - 1)


def _after_step(ctx: Context, w: np.ndarray, node: Node, c: int, k: int,
                rng: np.random.Generator, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """E_{Y'}[G0(s'^{c,Y'})] for every row of w (J, S) and its inner variance (J,), with the
    number of untrusted inner weight rows (step 1–2 of the module docstring)."""
    fn = ctx.functional
    gains, budget, available = node
    b2 = budget - ctx.costs[c]
    f2 = ctx.feasible(b2, ctx.leave(available, c))
    n_j = w.shape[0]
    if not f2.any():
        return np.zeros(n_j), np.zeros(n_j), 0
    cols = np.flatnonzero(f2)
    cl2 = ctx.c_lambda(b2)[cols]
    g2 = ctx.after(gains, c)[:, cols]
    exp = ctx.experiments.get(c)
    u_prior = weighted_columns(fn, g2, w) - cl2[None, :]  # (J, C'') under w_j
    if exp is None or exp.simulate is None or exp.loglik is None:
        return g0(u_prior, np.ones(cols.size, bool)), np.zeros(n_j), 0
    idx = _systematic(w, u, k)  # (J, K)
    y = np.asarray(exp.simulate(rng, idx.ravel()))
    logr = np.repeat(_log(w), k, axis=0) + np.asarray(exp.loglik(y), float)
    smooth, raw, khat, ok = psis_weights(logr)
    bad = int((~ok | ~(khat <= khat_threshold(ctx.k_threshold, logr.shape[-1]))).sum())
    val = g0(weighted_columns(fn, g2, smooth) - cl2[None, :], np.ones(cols.size, bool))
    # the option best under w_j, and its utility column (0 for stopping) for the control
    best = winners(u_prior + cl2[None, :], cl2, np.ones(cols.size, bool))  # (J,)
    lin = np.where(best[:, None] >= 0, g2[:, np.maximum(best, 0)].T - cl2[np.maximum(best, 0)]
                   [:, None], 0.0)  # (J, S)
    z = (raw.reshape(n_j, k, -1) * lin[:, None, :]).sum(-1) - (w * lin).sum(-1)[:, None]
    adj = val.reshape(n_j, k) - z
    return adj.mean(axis=1), adj.var(axis=1, ddof=1) / k, bad


def _lookahead_rows(ctx: Context, w: np.ndarray, node: Node, k: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    """V̂_2 of every row of w (J, S): values (J,), bias bounds (J,), untrusted share."""
    gains, budget, available = node
    n_j = w.shape[0]
    feas = ctx.feasible(budget, available)
    u0 = weighted_columns(ctx.functional, gains, w) - ctx.c_lambda(budget)[None, :]
    best = np.zeros(n_j)
    var = np.zeros(n_j)
    bad = 0
    offsets = rng.uniform(size=n_j)  # common to every next candidate
    for c in np.flatnonzero(feas):
        stream = np.random.default_rng([int(rng.integers(2**31)), int(c)])
        tail, v, b = _after_step(ctx, w, node, int(c), k, stream, offsets)
        best = np.maximum(best, u0[:, c] + tail)
        var += v
        bad += b
    share = bad / max(1, n_j * k * int(feas.sum()))
    return best, np.sqrt(var), share


def _rollout_rows(ctx: Context, w: np.ndarray, node: Node, depth: int, k: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """R̂_d of every row of w (J, S) from K greedy paths each: values (J,), their inner
    standard errors (J,), untrusted share of the path weights."""
    gains, budget, available = node
    fn = ctx.functional
    n_j = w.shape[0]
    logw = np.repeat(_log(w), k, axis=0)  # (P, S), P = J·K paths
    weights = np.repeat(w, k, axis=0)
    total = np.zeros(n_j * k)
    alive = np.ones(n_j * k, bool)
    hist = [()] * (n_j * k)
    cache: dict[tuple, tuple] = {(): (gains, budget, available, ctx)}
    n_bad = n_checked = 0
    for step in range(depth):
        last = step == depth - 1
        groups: dict[tuple, list[int]] = {}
        for p in np.flatnonzero(alive):
            groups.setdefault(hist[p], []).append(int(p))
        for h, rows in groups.items():
            g, b, av, cx = cache[h]
            rows_a = np.array(rows)
            feas = ctx.feasible(b, av)
            cl = ctx.c_lambda(b)
            u = weighted_columns(fn, g, weights[rows_a]) - cl[None, :]
            pick = winners(u + cl[None, :], cl, feas)
            total[rows_a] += np.where(pick >= 0, u[np.arange(rows_a.size),
                                                   np.maximum(pick, 0)], 0.0)
            if last:
                continue
            alive[rows_a[pick < 0]] = False
            for c in np.unique(pick[pick >= 0]):
                sel = rows_a[pick == c]
                h2 = (*h, int(c))
                if h2 not in cache:
                    cache[h2] = (cx.after(g, int(c)), b - ctx.costs[c], ctx.leave(av, int(c)),
                                 cx.step(int(c)))
                for p in sel:
                    hist[p] = h2
                exp = cx.experiments.get(int(c))
                if exp is None or exp.simulate is None or exp.loglik is None:
                    continue
                idx = _inverse_cdf(weights[sel], rng.uniform(size=sel.size))
                y = np.asarray(exp.simulate(rng, idx))
                logw[sel] = _log(weights[sel]) + np.asarray(exp.loglik(y), float)
                smooth, _raw, khat, ok = psis_weights(logw[sel])
                weights[sel] = smooth
                n_bad += int((~ok | ~(khat <= khat_threshold(ctx.k_threshold,
                                                              weights.shape[-1]))).sum())
                n_checked += sel.size
        if not alive.any():
            break
    per = total.reshape(n_j, k)
    return per.mean(axis=1), per.std(axis=1, ddof=1) / np.sqrt(k), n_bad / max(1, n_checked)


def continuation_rows(ctx: Context, w: np.ndarray, node: Node, kind: str, depth: int, k: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """V̂(s) for the states whose beliefs are the rows of w (J, S) and which share the gains,
    budget and candidate set of ``node``: (values, error per row, untrusted share of the inner
    weights).
    The error is the look-ahead's bias bound per row (``kind = "lookahead2"``) or the rollout's
    inner standard error (``"rollout"``).  Depth 1 is G0 exactly."""
    if depth <= 1:
        gains, budget, available = node
        u = weighted_columns(ctx.functional, gains, w) - ctx.c_lambda(budget)[None, :]
        return g0(u, ctx.feasible(budget, available)), np.zeros(w.shape[0]), 0.0
    if kind == "lookahead2":
        return _lookahead_rows(ctx, w, node, k, rng)
    return _rollout_rows(ctx, w, node, depth, k, rng)


def needs_weights(method: str) -> bool:
    """Whether a one-step estimate by ``method`` leaves the continuation without its weights
    (the regression estimator: no reweighted posterior to look further ahead from)."""
    return method != "failed" and not (method.startswith("psis") or method == "no outcome")


def continuation_choice(depth: int, kind: str, methods: Mapping[str, str],
                        truncated: str = "") -> tuple[str, str]:
    """Which continuation one decision uses — for every scored candidate, or for none — and
    by which estimator.

    CVU(m) = E_Y[V(s^{m,Y})] − V(s^∅) ranks candidates only when V is the same function for
    all of them, estimated alike: a candidate valued by G0 against others valued by V_2 ≥ G0
    would be ranked below them for the estimator, not for its value.  The importance-weighted
    continuations need the weights of every outcome on the way, and where the one-step
    estimator could not use them for some candidate (``regression``: the study is too
    informative for the weights, or it has no likelihood) the inner steps could not learn from
    that candidate either.  So when any scored candidate needs regression, the two-step
    continuations (``lookahead2``, ``rollout`` of depth 2) are estimated by nested regression
    for *every* candidate (:mod:`belief.decision.cvu.lookahead_regression`); a deeper rollout
    has no such estimator, and then no candidate gets the continuation and every one keeps the
    one-step E_Y[G0] (``failed`` candidates are not ranked and do not count).

    Parameters
    ----------
    depth : int
        The continuation's depth after truncation to the horizon (≤ 1: one step).
    kind : str
        ``settings.continuation``.
    methods : mapping candidate id → one-step ``cvu_method``
    truncated : str
        Why the depth is 1, when the horizon truncated it.

    Returns
    -------
    (used, reason) : ``"one_step"`` or ``"<kind>(d=<depth>)"``, and a sentence saying why
    (and, when the continuation is estimated by nested regression, that it is and for which
    candidates' sake).
    """
    if kind == "one_step":
        return "one_step", "one_step asked for"
    if depth <= 1:
        return "one_step", f"{kind} truncated to one step ({truncated or 'depth 1'})"
    blocked = {c: m for c, m in methods.items() if needs_weights(m)}
    names = ", ".join(f"{c} ({m})" for c, m in blocked.items())
    if blocked and depth > 2:
        return "one_step", (f"{kind} of depth {depth} not used for any candidate: beyond two "
                            f"steps it needs the importance weights of the outcomes, and the "
                            f"one-step estimator could not use them for {names}; every "
                            "candidate keeps the one-step E_Y[G0] so that Q compares the "
                            "same quantity")
    if blocked:
        return f"{kind}(d={depth})", (f"{kind} of depth {depth} for every scored candidate, "
                                      f"by nested regression (no importance weights for "
                                      f"{names})")
    return f"{kind}(d={depth})", f"{kind} of depth {depth} for every scored candidate"


@dataclass
class ContinuationEstimate:
    """E_Y[V(s^{m,Y})] of one candidate with its errors (module docstring)."""

    value: float
    mcse: float
    bias_bound: float
    inner_bad_share: float
    outer_bad_share: float


def expected_continuation(ctx: Context, exp: Experiment, node: Node, kind: str, depth: int,
                          k: int, idx: np.ndarray,
                          rngs: tuple[np.random.Generator, np.random.Generator]
                          ) -> ContinuationEstimate:
    """E_Y[V(s^{m,Y})] for candidate m with experiment ``exp``, from the state after m
    ``node`` (its gains, budget and candidate set): outcomes Y_j = exp.simulate(outcome_rng,
    idx) (the one-step estimator's, for common random numbers), then steps 1–4 of the module
    docstring (or the rollout) on the inner stream; ``rngs`` = (outcome_rng, inner rng).  An
    experiment without an outcome model gives one uniform row."""
    gains, budget, available = node
    outcome_rng, rng = rngs
    n_s = gains.shape[0]
    inner = ctx.moved(exp)  # the experiments of the state after m, when exp knows them
    if exp.simulate is None or exp.loglik is None:
        w = np.full((1, n_s), 1.0 / n_s)
        vals, err, share = continuation_rows(inner, w, node, kind, depth, max(k, idx.size),
                                             rng)
        bias = float(err[0]) if kind == "lookahead2" else 0.0
        return ContinuationEstimate(float(vals[0]), float(err[0]), bias, share, 0.0)
    y = np.asarray(exp.simulate(outcome_rng, idx))
    smooth, raw, khat, ok = psis_weights(np.asarray(exp.loglik(y), float))
    outer_bad = float((~ok | ~(khat <= khat_threshold(ctx.k_threshold,
                                                      smooth.shape[-1]))).mean())
    vals, err, share = continuation_rows(inner, smooth, node, kind, depth, k, rng)
    # outer martingale controls, as in one-step CVU (any f of the draws has mean-zero Z)
    feas = ctx.feasible(budget, available)
    cl = ctx.c_lambda(budget)
    phi = weighted_columns(ctx.functional, gains, smooth)
    won = winners(phi, cl, feas)
    funcs = control_functions(gains - cl[None, :], lambda f: raw @ f, won, feas)
    z = raw @ funcs - funcs.mean(axis=0) if funcs.shape[1] else np.zeros((y.shape[0], 0))
    value, se, _gain = control_variate_mean(vals, z)
    bias = float(err.mean()) if kind == "lookahead2" else 0.0
    return ContinuationEstimate(value, se, bias, share, outer_bad)
