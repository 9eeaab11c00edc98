"""CVU's regression estimator: no reweighting, for studies too informative for PSIS.

Strong, Oakley, Brennan & Breeze (2015), "Estimating the expected value of sample information
using the probabilistic sensitivity analysis sample: a fast nonparametric regression-based
method", Medical Decision Making 35(5):570–583.  With one simulated outcome per joint draw,
the posterior mean of any quantity given the outcome is the regression of the quantity on the
outcome's summary:

1. for every draw i and replicate r = 1..R, Y_ir ~ p(Y | θ_i) (N = R·S pairs; the draws are
   all used, R times: stratified over the draws), summary T_ir = Y_ir flattened;
2. for every candidate c feasible in s_{t+1}, regress g_ic on a spline basis of T
   (:func:`spline_design`: natural cubic splines with knots at quantiles per component,
   tensor products for two components, additive beyond; the number of knots chosen by
   generalised cross-validation), μ̂_c(T) ≈ E(g_c | T);
3. φ̂_c(T) = μ̂_c(T) for the mean.  For an LCB or CVaR the conditional distribution of g_c
   given T is taken as location–scale: g_c = μ_c(T) + σ_c(T)·ε_c with ε_c independent of T
   (σ̂_c² from a regression of log e² on the same basis, rescaled so that mean σ̂² = mean e²),
   so φ̂_c(T) = μ̂_c(T) + σ̂_c(T)·φ(ε̂_c) (exact for normal–normal models, an approximation
   otherwise: the method is then named ``regression+ls``);
4. E_Y[G0] ≈ (1/N) Σ_n max(0, max_{c ∈ M'} φ̂_c(T_n) − C_λ'(c)), less the excess upward
   bias that the fitting noise of μ̂ gives the maximum (with ``noise_z``:
   :func:`belief.decision.cvu.noise.fitted_noise_bias`, the cluster-robust covariance of the
   fitted values, the draws as clusters).

Least squares with an intercept keeps (1/N) Σ_n μ̂_c(T_n) = ḡ_c exactly — the preposterior
martingale E_Y[E(g_c | Y)] = E(g_c) holds in the sample, so the linear part of G0 carries no
Monte Carlo error (the control variate is built in).

Errors, from the influence of each pair (T_n, g_n) on the estimate,
IF_n = G0_n − Ê + Σ_c a_cᵀ M⁻¹ x_n e_nc (a_c = mean of x over the pairs c wins, M = XᵀX/N,
e the residuals; the error of σ̂ is neglected): the outcome Monte Carlo error from the spread
of IF over the R replicates of each draw, Var = Σ_i Σ_r (IF_ir − IF̄_i)² / (R−1) / (R·S²);
the draws' influence IF̄_i feeds :func:`belief.decision.cvu.preposterior.draws_variance`.  A
regression that misses the shape of E(g | T) biases the estimate; GCV over the basis size
keeps that small when T is low-dimensional (the tests check it against closed forms).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from belief.decision.cvu.estimate import Estimate
from belief.decision.cvu.noise import LocationFit, fitted_noise_bias, gram_pinv
from belief.decision.cvu.preposterior import NextState, winners
from belief.decision.functionals import Functional

__all__ = ["KNOT_GRID", "RegressionMemo", "best_by_gcv", "conditional_functional",
           "least_squares", "natural_spline_basis", "regression_estimate", "spline_design"]

KNOT_GRID = {1: (2, 5, 9), 2: (2, 4, 6), 3: (2, 4, 6)}  # knot counts tried, by summary width


def natural_spline_basis(x: np.ndarray, n_knots: int) -> np.ndarray:
    """Natural cubic spline basis of x without the constant, (N, K − 1) for K knots at
    quantiles of x (Hastie, Tibshirani & Friedman, ESL eq. 5.4–5.5):
    x, and d_k(x) − d_{K−1}(x) with d_k = ((x − ξ_k)³₊ − (x − ξ_K)³₊)/(ξ_K − ξ_k).
    x is rescaled to [0, 1]; with fewer than 3 distinct knots the basis is x alone."""
    x = np.asarray(x, float)
    lo, hi = x.min(), x.max()
    u = (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    knots = np.unique(np.quantile(u, np.linspace(0, 1, n_knots))) if n_knots > 2 else []
    if len(knots) < 3:
        return u[:, None]
    last = knots[-1]
    cube = [np.maximum(u - k, 0.0) for k in knots[:-1]]
    cube = [c * c * c for c in cube]
    # d_k − d_{K−1}: the (u − ξ_K)³₊ terms, zero below the last knot, are 0 on the data
    # (ξ_K = max u), so d_k = (u − ξ_k)³₊ / (ξ_K − ξ_k)
    ref = cube[-1] / (last - knots[-2])
    out = np.empty((u.size, len(knots) - 1))
    out[:, 0] = u
    for j, k in enumerate(knots[:-2]):
        out[:, j + 1] = cube[j] / (last - k) - ref
    return out


def spline_design(t: np.ndarray, n_knots: int) -> np.ndarray:
    """Design matrix [1, per-component natural splines, and for two components their tensor
    products] of the summaries t (N, d)."""
    parts = [natural_spline_basis(t[:, k], n_knots) for k in range(t.shape[1])]
    cols = [np.ones((t.shape[0], 1)), *parts]
    if len(parts) == 2:
        a, b = parts
        cols.append((a[:, :, None] * b[:, None, :]).reshape(t.shape[0], -1))
    return np.concatenate(cols, axis=1)


def least_squares(x: np.ndarray, y: np.ndarray, pinv: tuple[np.ndarray, int] | None = None
                  ) -> tuple[np.ndarray, int]:
    """Least squares by the normal equations, β̂ = M⁺ Xᵀy / N with M⁺ the generalised inverse of
    M = XᵀX/N on standardised columns (:func:`belief.decision.cvu.noise.gram_pinv`: the
    designs here are tall and narrow, N ≫ p); returns the coefficients and the rank.
    ``pinv``: ``gram_pinv(x)`` when the caller has it."""
    m_inv, rank = gram_pinv(x) if pinv is None else pinv
    return m_inv @ (x.T @ y) / float(x.shape[0]), rank


def best_by_gcv(designs: list[np.ndarray], resp: np.ndarray,
                pinvs: list[tuple[np.ndarray, int]] | None = None) -> int | None:
    """Index of the design with the smallest generalised cross-validation score
    Σ_c (RSS_c / Var g_c) / (N (1 − p/N)²) for the responses ``resp`` (N, C'), p the rank
    (designs of rank ≥ N − 1 are skipped; the first of near-equal scores wins); None when
    every design is skipped.  ``pinvs``: ``gram_pinv`` of each design, when the caller has
    them."""
    n = resp.shape[0]
    scale = resp.var(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    best = None
    for i, x in enumerate(designs):
        coef, rank = least_squares(x, resp, None if pinvs is None else pinvs[i])
        if rank >= n - 1:
            continue
        rss = (((resp - x @ coef) ** 2).sum(axis=0) / scale).sum()
        gcv = rss / (n * (1 - rank / n) ** 2)
        if best is None or gcv < best[0] - 1e-12 * abs(best[0]):
            best = (gcv, i)
    return None if best is None else best[1]


def _select_design(t: np.ndarray, resp: np.ndarray
                   ) -> tuple[np.ndarray, int, tuple[np.ndarray, int]]:
    """The design of the grid of knot counts with the smallest generalised cross-validation
    score (:func:`best_by_gcv`), its knot count and its ``gram_pinv``."""
    grid = KNOT_GRID.get(t.shape[1], (2, 4))
    designs = [spline_design(t, k) for k in grid]
    pinvs = [gram_pinv(x) for x in designs]
    i = best_by_gcv(designs, resp, pinvs)
    if i is None:  # ValueError: CVU marks the candidate "failed" with this reason
        n = t.shape[0]
        raise ValueError(f"too few simulated outcomes ({n}) for any spline basis of the summary")
    return designs[i], grid[i], pinvs[i]


def conditional_functional(x: np.ndarray, resp: np.ndarray, functional: Functional,
                           pinv: tuple[np.ndarray, int] | None = None
                           ) -> tuple[np.ndarray, np.ndarray, str]:
    """φ̂_c(T_n) of every column c of ``resp`` (N, C') given the design x (N, p) of the
    summaries (steps 2–3 of the module docstring): the least-squares fit μ̂_c(T) for the mean;
    for another φ the location–scale form φ(μ̂_c(T) + σ̂_c(T)·ε̂_c)
    (:meth:`belief.decision.functionals.Functional.location_scale`: μ̂_c(T) + σ̂_c(T)·φ(ε̂_c)
    for an LCB or CVaR).  ``pinv``:
    ``gram_pinv(x)`` when the caller has it (both fits use it).

    Returns
    -------
    (phi, resid, method) : φ̂ (N, C'), the residuals g − μ̂ (N, C') and ``"regression"`` or
    ``"regression+ls"``.
    """
    pinv = gram_pinv(x) if pinv is None else pinv
    coef, _ = least_squares(x, resp, pinv)
    fitted = x @ coef
    resid = resp - fitted
    if functional.linear:
        return fitted, resid, "regression"
    lv, _ = least_squares(x, np.log(resid**2 + 1e-300), pinv)
    sig2 = np.exp(np.clip(x @ lv, -700, 700))
    sig2 *= (resid**2).mean(axis=0) / sig2.mean(axis=0)
    sig = np.sqrt(sig2)
    z = np.where(sig > 0, resid / np.where(sig > 0, sig, 1.0), 0.0)
    return functional.location_scale(fitted, sig, z), resid, "regression+ls"


class RegressionMemo:
    """What :func:`regression_estimate` computes from its outcomes and responses alone,
    remembered across estimates on the same outcomes (the CVU and its channel split,
    :mod:`belief.decision.cvu.channels`, which estimate on fresh copies of the candidate's
    outcome stream): the simulated outcomes, by the state of the stream and the draw
    indices; and the chosen design, its inverse and the conditional functional, by the
    summaries, the responses (their bytes) and the functional.  Holds one experiment's
    outcomes (the key does not name ``simulate``): build one per experiment."""

    def __init__(self) -> None:
        self._outcomes: dict[tuple[str, bytes], np.ndarray] = {}
        self._fits: dict[tuple[bytes, bytes, str], tuple] = {}

    def outcomes(self, simulate: Callable[[np.random.Generator, np.ndarray], np.ndarray],
                 rng: np.random.Generator, idx: np.ndarray) -> np.ndarray:
        """``simulate(rng, idx)`` as floats (read-only), once per state of ``rng`` (a stream
        in the same state gives the same outcomes; the stream is not advanced when they are
        remembered, and the estimator does not draw from it again)."""
        key = (repr(rng.bit_generator.state), _bytes(np.asarray(idx)))
        if key not in self._outcomes:
            y = np.asarray(simulate(rng, idx), dtype=float).view()  # a view: the caller's
            y.flags.writeable = False  # own array (when simulate returns one) stays writeable
            self._outcomes[key] = y
        return self._outcomes[key]

    def fit(self, t: np.ndarray, resp: np.ndarray, functional: Functional
            ) -> tuple[np.ndarray, int, tuple[np.ndarray, int], np.ndarray, np.ndarray, str]:
        """(design, knots, its ``gram_pinv``, φ̂, residuals, method) of the summaries ``t``
        and the responses ``resp``: :func:`_select_design` and
        :func:`conditional_functional`, once per (t, resp, φ)."""
        key = (_bytes(t), _bytes(resp), str(functional))
        if key not in self._fits:
            self._fits[key] = _fit(t, resp, functional)
        return self._fits[key]


def _bytes(a: np.ndarray) -> bytes:
    a = np.ascontiguousarray(a)
    return repr((a.shape, a.dtype.str)).encode() + a.tobytes()


def _fit(t: np.ndarray, resp: np.ndarray, functional: Functional
         ) -> tuple[np.ndarray, int, tuple[np.ndarray, int], np.ndarray, np.ndarray, str]:
    """:func:`_select_design` then :func:`conditional_functional` (read-only results)."""
    x, knots, pinv = _select_design(t, resp)
    phi_c, resid, method = conditional_functional(x, resp, functional, pinv)
    for a in (x, pinv[0], phi_c, resid):
        a.flags.writeable = False
    return x, knots, pinv, phi_c, resid, method


def regression_estimate(nxt: NextState, functional: Functional,
                        simulate: Callable[[np.random.Generator, np.ndarray], np.ndarray],
                        rng: np.random.Generator, *, replicates: int = 8,
                        reason: str = "", noise_z: np.ndarray | None = None,
                        memo: RegressionMemo | None = None) -> Estimate:
    """E_Y[G0(s^{m,Y})] by regression on the simulated outcomes (module docstring).

    Parameters
    ----------
    nxt : NextState
    functional : Functional
    simulate : callable (rng, idx) → Y (len(idx), ...)
    rng : Generator
        The candidate's outcome stream.
    replicates : int
        R ≥ 2 outcomes per joint draw.
    reason : str
        Why the regression estimator is used (kept in the estimate).
    noise_z : ndarray (K/2, C), optional
        :func:`belief.decision.cvu.noise.noise_draws`: subtract the excess noise bias of the
        fitted values (:func:`belief.decision.cvu.noise.fitted_noise_bias`); its mean is
        ``extra["noise_bias"]``, its Monte Carlo error ``extra["correction_mcse"]`` is added
        to the MCSE (the per-outcome ``terms`` stay uncorrected), and the plug-in
        value and MCSE are ``extra["plugin_g0"]``.
    memo : RegressionMemo, optional
        The outcomes and fits of this experiment shared with other estimates on them (the
        same values as computed here).
    """
    gain = nxt.gain
    n_s, n_c = gain.shape
    idx = np.tile(np.arange(n_s), replicates)
    y = (np.asarray(simulate(rng, idx), dtype=float) if memo is None
         else memo.outcomes(simulate, rng, idx))
    n = idx.size
    t = y.reshape(n, -1)
    if not np.isfinite(t).all():
        return Estimate.failed("regression: the simulated outcomes are not finite")
    t = t[:, t.std(axis=0) > 0]
    feas = nxt.mask_for(y)
    cols = np.flatnonzero(feas if feas.ndim == 1 else feas.any(axis=0))
    if cols.size == 0 or t.shape[1] == 0:
        # the outcome teaches nothing: φ of the unchanged draws, the decision's functional
        phi = np.broadcast_to(functional(gain.T), (n, n_c))
        g0_n = nxt.g0(phi, nxt.mask_for(y))
        return Estimate(float(g0_n.mean()), 0.0, "regression", reason or "outcome constant",
                        if_draws=np.zeros(n_s), if_noise=np.zeros(n_s), n_outcomes=n,
                        terms=np.zeros((replicates, n_s)))
    resp = gain[idx][:, cols]  # (N, C')
    x, knots, pinv, phi_c, resid, method = (_fit if memo is None else memo.fit)(
        t, resp, functional)
    phi = np.full((n, n_c), -np.inf)
    phi[:, cols] = phi_c
    g0_n = nxt.g0(phi, feas)
    value = float(g0_n.mean())

    won = winners(phi, nxt.c_lambda, feas)
    a = np.stack([(x * (won == c)[:, None]).mean(axis=0) for c in cols], 0)  # (C', p)
    v = a @ pinv[0]  # a_c M⁺, (C', p): the inverse of the fit
    infl = g0_n - value + ((x @ v.T) * resid).sum(axis=1)
    per = infl.reshape(replicates, n_s)
    within = per.var(axis=0, ddof=1)  # σ_i², the outcome noise of draw i
    mcse = float(np.sqrt(within.sum() / (replicates * n_s**2)))
    extra = {"knots": knots, "basis": x.shape[1]}
    if noise_z is not None:
        u = phi_c - nxt.c_lambda[cols]
        fb = fitted_noise_bias(LocationFit(x, resid, replicates, m_inv=pinv[0]),
                               gain[:, cols], u, feas[..., cols], noise_z[:, cols])
        extra.update(plugin_g0=(value, mcse), noise_bias=fb.b, correction_mcse=fb.mcse)
        value, mcse = value - fb.b, float(np.hypot(mcse, fb.mcse))
    return Estimate(value, mcse, method, reason, if_draws=per.mean(axis=0),
                    if_noise=within / replicates, n_outcomes=n, terms=per, extra=extra)

