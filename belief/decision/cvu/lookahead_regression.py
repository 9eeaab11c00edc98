"""CVU's two-step continuations by nested regression: no importance weights needed.

The look-ahead and the rollout of :mod:`belief.decision.cvu.lookahead` reweight the draws by
the likelihood of simulated outcomes; for an informative study (100 trials per arm) the
weights collapse and one-step CVU switches to the regression estimator of Strong et al.
(2015) (:mod:`belief.decision.cvu.regression`).  This module gives the two-step values for
those candidates by regression at both stages, as least-squares Monte Carlo does for
optimal stopping (Longstaff & Schwartz 2001, "Valuing American options by simulation",
Rev. Financ. Stud. 14(1):113–147: regress the realised values of the later stage on the
earlier stage's state):

1. for every joint draw i and replicate r (N = R·S pairs, idx the draws), one outcome of m,
   Y_n ~ p(Y | θ_{i_n}), summary T_n = Y_n flattened (constant columns dropped);
2. first stage, the state s' after m: φ̂'_c(T) by regression of the gains after m, g'_{i_n c},
   on a basis of T (:func:`belief.decision.cvu.regression.conditional_functional`), for every
   c ∈ M' (feasible after m, the gate held at s_t as in the look-ahead), and
   Û'_c(T) = φ̂'_c(T) − C_λ'(c);
3. second stage, the state s'' after m then c: one outcome of c on the *same* draw,
   Y'_n ~ p(Y' | θ_{i_n}) from c's experiment in s' (``Experiment.then``: γ_{m→c} moves it),
   φ̂''_{c'}(T, T') by regression of the gains after m then c on a basis of (T, T'), and the
   realised inner value G0''_n = max(0, max_{c' ∈ M''} φ̂''_{c'}(T_n, T'_n) − C_λ''(c'));
4. Ĝ_c(T) = the regression of G0''_n on a basis of T chosen for it (E[G0(s'') | T] is convex
   with a kink where c's outcome starts to matter, unlike the gains' nearly linear posterior
   means): the value of the state after c averaged over c's outcome given what m showed (c
   without an outcome model: G0''_n itself, already a function of T);
5. ``lookahead2``: V̂_2(T_n) = max(0, max_{c ∈ M'} Û'_c(T_n) + Ĝ_c(T_n));
   ``rollout`` of depth 2: c_1(T_n) = argmax_c Û'_c(T_n), R̂_2(T_n) = Û'_{c_1} + Ĝ_{c_1}
   if Û'_{c_1} > 0, else 0 (the greedy stops);
6. E_Y[V(s^{m,Y})] ≈ (1/N) Σ_n V̂(T_n).

Each regression converges to its conditional expectation under the joint draws as N grows
when its basis is flexible enough, so the estimate targets the same quantity the
importance-weighted continuation estimates; with the bounded knot grid below this holds
approximately (a basis too stiff for a conditional expectation biases the estimate, and
``bias_bound`` does not cover that misspecification).

**Basis.**  The summary of one stage: the natural-spline basis of the one-step estimator
(:func:`belief.decision.cvu.regression.spline_design`); of two stages, (T, T'): each stage's
basis (its own tensor products) plus the products of their components (bilinear
interactions) — :func:`block_design`.  When the summary takes few distinct values
(discrete outcomes: at most min(N/8, 256) of them), the cell means (one indicator per
distinct value, the saturated regression) are a further candidate.  The basis size is
chosen by generalised cross-validation over the grid, as in the one-step estimator,
separately for every regression (the gains after m, the gains after m then c, and each G0'').

**Errors.**  ``mcse``: the outcome Monte Carlo error given the fitted regressions, from the
spread of V̂ over the R replicates of each draw, Var = Σ_i Σ_r (V̂_ir − V̂̄_i)² / (R−1) / (R·S²)
(the error of the fitted coefficients is not in it).  ``bias_bound``: the maxima over fitted
values are biased upward by the fitting noise (as the importance-weighted look-ahead's are by
the inner noise): per pair, E max_c |ε_c| ≤ √(Σ_c Var ε_c), with Var ε_c(T_n) ≈ s_c² h_n
(s_c² the residual variance of the regression, h_n the leverage of pair n), summed over the
stages and averaged over n — an approximate bound of the fitting noise only, and loose (on
the gains model it is of the order of the values themselves).  There are no importance
weights, so the untrusted-weight shares are NaN.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from belief.decision.cvu.lookahead import Context, ContinuationEstimate, Node
from belief.decision.cvu.regression import (
    KNOT_GRID,
    best_by_gcv,
    conditional_functional,
    least_squares,
    spline_design,
)
from belief.decision.scores import g0
from belief.posterior.experiments import Experiment

__all__ = ["MAX_CELLS", "block_design", "regression_continuation"]

MAX_CELLS = 256  # the cell-means design only for summaries with at most this many values


def _varying(y: np.ndarray, n: int) -> np.ndarray:
    """The summary (N, d) of outcomes y: flattened per pair, constant columns dropped."""
    t = np.asarray(y, float).reshape(n, -1)
    if not np.isfinite(t).all():
        raise ValueError("regression look-ahead: the simulated outcomes are not finite")
    return t[:, t.std(axis=0) > 0]


def block_design(t: np.ndarray, widths: tuple[int, ...], n_knots: int) -> np.ndarray:
    """Design [1, each block's spline basis without its constant, the products of the
    components of every two blocks] of the summaries t (N, Σ widths), the blocks being the
    stages' summaries side by side (module docstring, "Basis").  One block is
    :func:`belief.decision.cvu.regression.spline_design`."""
    n = t.shape[0]
    cols, scaled, start = [np.ones((n, 1))], [], 0
    for w in widths:
        block = t[:, start:start + w]
        start += w
        if w == 0:
            continue
        cols.append(spline_design(block, n_knots)[:, 1:])
        lo, hi = block.min(axis=0), block.max(axis=0)
        scaled.append((block - lo) / np.where(hi > lo, hi - lo, 1.0))
    for a, b in combinations(scaled, 2):
        cols.append((a[:, :, None] * b[:, None, :]).reshape(n, -1))
    return np.concatenate(cols, axis=1)


def _cells(t: np.ndarray) -> np.ndarray | None:
    """Indicators of the distinct rows of t (the saturated design), or None when there are
    more than min(N/8, 256) of them."""
    n = t.shape[0]
    if t.shape[1] == 0:
        return None
    _, inv, counts = np.unique(t, axis=0, return_inverse=True, return_counts=True)
    if counts.size > min(n // 8, MAX_CELLS):
        return None
    x = np.zeros((n, counts.size))
    x[np.arange(n), inv.ravel()] = 1.0
    return x


def _design(t: np.ndarray, widths: tuple[int, ...], resp: np.ndarray) -> np.ndarray:
    """The design with the smallest generalised cross-validation score
    (:func:`belief.decision.cvu.regression.best_by_gcv`) among the block designs of the knot
    grid and the cell means (module docstring, "Basis")."""
    n = t.shape[0]
    if t.shape[1] == 0:
        return np.ones((n, 1))
    options = [block_design(t, widths, k) for k in KNOT_GRID.get(max(widths), (2, 4))]
    cells = _cells(t)
    if cells is not None:
        options.append(cells)
    i = best_by_gcv(options, resp)
    if i is None:
        raise ValueError(f"too few simulated outcomes ({n}) for any basis of the summary")
    return options[i]


def _leverage(x: np.ndarray) -> np.ndarray:
    """h_n = x_n (XᵀX)⁺ x_nᵀ, the diagonal of the hat matrix (same pseudo-inverse as the
    least-squares fit)."""
    scale = np.sqrt((x**2).mean(axis=0))
    xs = x / np.where(scale > 0, scale, 1.0)
    vals, vecs = np.linalg.eigh(xs.T @ xs)
    keep = vals > vals.max() * 1e-10
    proj = xs @ vecs[:, keep]
    return (proj**2 / vals[keep]).sum(axis=1)


def _fit_noise(resid: np.ndarray, lev: np.ndarray) -> np.ndarray:
    """√(Σ_c s_c² h_n) per pair: the bound on the upward bias of a max over the fitted
    columns (module docstring, "Errors")."""
    return np.sqrt(lev * (resid**2).mean(axis=0).sum())


def _second_stage(inner: Context, node: Node, t1: np.ndarray, idx: np.ndarray, c: int,
                  seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The second stage after next candidate c: E[G0(s''^c) | T] fitted on the first outcome
    T (N,), the variance of that fit (N,) and the bias bound of the inner max (N,); None when
    nothing is feasible after c.  Without a second outcome G0'' is already a function of T."""
    gains, budget, available = node
    n = idx.size
    b2 = budget - inner.costs[c]
    f2 = inner.feasible(b2, inner.leave(available, c))
    if not f2.any():
        return None
    cols2 = np.flatnonzero(f2)
    resp2 = inner.after(gains, c)[idx][:, cols2]
    e = inner.experiments.get(c)
    if e is None or e.simulate is None:
        t2, widths = t1, (t1.shape[1],)
    else:
        y2 = _varying(e.simulate(np.random.default_rng([seed, 106, c]), idx), n)
        t2, widths = np.concatenate([t1, y2], axis=1), (t1.shape[1], y2.shape[1])
    x2 = _design(t2, widths, resp2)
    phi2, resid2, _ = conditional_functional(x2, resp2, inner.functional)
    inner_g0 = g0(phi2 - inner.c_lambda(b2)[cols2][None, :], np.ones(cols2.size, bool))
    noise2 = _fit_noise(resid2, _leverage(x2))
    if t2 is t1:  # no second outcome: G0'' is already a function of T
        return inner_g0, np.zeros(n), noise2
    # E[G0'' | T] has its own shape (convex, kinked where c's outcome starts to matter):
    # its basis is chosen for it, not taken from the gains' regression
    xt = _design(t1, (t1.shape[1],), inner_g0[:, None])
    coef, _ = least_squares(xt, inner_g0)
    fitted = xt @ coef
    return fitted, _leverage(xt) * float(((inner_g0 - fitted) ** 2).mean()), noise2


def regression_continuation(ctx: Context, exp: Experiment, node: Node, kind: str, *,
                            seed: int, column: int, replicates: int = 8
                            ) -> ContinuationEstimate:
    """E_Y[V(s^{m,Y})] of candidate m (experiment ``exp``, column ``column``) by nested
    regression, for ``kind`` ``"lookahead2"`` (V_2) or ``"rollout"`` (R_2) (module
    docstring).

    Parameters
    ----------
    ctx : Context
        The state s_t (experiments, costs, λ rule, gate, functional).
    exp : Experiment
        m's experiment at s_t (without ``simulate``: m shows nothing, the first stage is the
        prior mean).
    node : Node
        The state after m: gains g' (S, C), budget b', candidate set M'.
    kind : str
    seed : int
        The CVU seed: m's outcomes come from the stream (seed, 105, m), c's second-stage
        outcomes from (seed, 106, c) (common random numbers across m).
    column : int
        m's column.
    replicates : int
        R ≥ 2 outcomes per joint draw.
    """
    gains, budget, available = node
    n_s = gains.shape[0]
    idx = np.tile(np.arange(n_s), replicates)
    n = idx.size
    t1 = (np.zeros((n, 0)) if exp.simulate is None else  # m shows nothing: T is empty
          _varying(exp.simulate(np.random.default_rng([seed, 105, column]), idx), n))
    fn = ctx.functional
    inner = ctx.moved(exp)
    feas1 = ctx.feasible(budget, available)
    cols1 = np.flatnonzero(feas1)
    if cols1.size == 0:  # nothing feasible after m: V = 0 exactly (no weights: shares NaN)
        return ContinuationEstimate(0.0, 0.0, 0.0, np.nan, np.nan)
    resp1 = gains[idx][:, cols1]
    x1 = _design(t1, (t1.shape[1],), resp1)
    phi1, resid1, _ = conditional_functional(x1, resp1, fn)
    u1 = phi1 - ctx.c_lambda(budget)[cols1][None, :]  # Û'_c(T_n), (N, C')
    # m showing nothing: the first stage is φ of the draws, exactly
    noise1 = _fit_noise(resid1, _leverage(x1)) if t1.shape[1] else np.zeros(n)
    tail = np.zeros_like(u1)
    tail_var = np.zeros(n)
    noise2 = np.zeros((n, cols1.size))
    pick = u1.argmax(axis=1)  # the rollout's greedy pick at s' (its only second steps)
    go = u1[np.arange(n), pick] > 0
    needed = set(range(cols1.size)) if kind == "lookahead2" else set(np.unique(pick[go]))
    for j, c in enumerate(cols1):
        if j not in needed:
            continue
        stage = _second_stage(inner, node, t1, idx, int(c), seed)
        if stage is not None:
            tail[:, j], var_j, noise2[:, j] = stage
            tail_var += var_j
    total = u1 + tail
    if kind == "lookahead2":
        values = np.maximum(0.0, total.max(axis=1))
        bias = noise1 + np.sqrt(tail_var) + np.sqrt((noise2**2).sum(axis=1))
    else:  # rollout of depth 2: the U0-greedy pick at s', its value, or stop
        values = np.where(go, total[np.arange(n), pick], 0.0)
        bias = noise1 + np.sqrt(tail_var) + noise2[np.arange(n), pick]
    per = values.reshape(replicates, n_s)
    within = per.var(axis=0, ddof=1)
    mcse = float(np.sqrt(within.sum() / (replicates * n_s**2)))
    # no importance weights at any stage: the untrusted-weight shares do not apply
    return ContinuationEstimate(float(values.mean()), mcse, float(bias.mean()), np.nan, np.nan)
