"""Importance weights of simulated outcomes: Pareto-smoothed (PSIS), raw, and their diagnostics.

For an outcome Y_j and joint draws θ_1..θ_S the importance log-ratios are the log-likelihoods
r_ij = log p(Y_j | θ_i).  :func:`psis` Pareto-smooths every row at once — the same algorithm
and the same numbers as ArviZ's ``psislw`` (Vehtari, Simpson, Gelman, Yao & Gabry 2024,
"Pareto smoothed importance sampling"; arviz_stats' implementation, which tests check
against), vectorised over rows instead of a Python loop per row:

1. shift each row by its maximum; the M = ⌊3√S⌋ largest ratios (⌊S/5⌋ when S ≤ 225) form the
   tail, the next one below is the cutoff u;
2. fit a generalised Pareto distribution to exp(tail) − exp(u) with the empirical-Bayes
   estimate of Zhang & Stephens (2009) and the weakly informative prior on k of Vehtari et al.
   (k̂ = (M·k + 10·0.5)/(M + 10));
3. replace the tail by the GPD quantiles at (i − ½)/M (capped at the largest raw ratio) and
   normalise: log w̃_ij = log-weights with Σ_i w̃_ij = 1.

k̂ is NaN where the fit is impossible (the first quartile of the tail equals its minimum,
which is what happens when the weights underflow: one draw carries the whole posterior);
such rows are *not* trustworthy and callers must treat NaN like an untrusted k̂.  A flat tail (all
tail ratios equal: the outcome does not discriminate between those draws) has no Pareto tail
and gets k̂ = −∞, unsmoothed.

:func:`raw_weights` are the unsmoothed self-normalised weights ω_ij = p(Y_j | θ_i) /
Σ_k p(Y_j | θ_k); under the empirical prior (uniform on the S draws) and Y_j drawn from its
predictive, E_Y[Σ_i ω_i(Y) f(θ_i)] = (1/S) Σ_i f(θ_i) exactly for any f — the preposterior
martingale the control variates of CVU use.
"""

from __future__ import annotations

import numpy as np

__all__ = ["effective_sample_size", "khat_threshold", "psis", "psis_weights", "raw_weights",
           "row_is_valid", "tail_length"]

_PRIOR_BS = 3.0
_PRIOR_K = 10.0


def tail_length(n_draws: int, r_eff: float = 1.0) -> int:
    """M, the number of tail draws ArviZ smooths: ⌊3·√(S/r_eff)⌋ if S·r_eff > 225, else ⌊S/5⌋."""
    if n_draws * r_eff > 225:
        return int(np.floor(3 * (n_draws / r_eff) ** 0.5))
    return int(np.floor(n_draws / 5))


def row_is_valid(log_ratios: np.ndarray) -> np.ndarray:
    """Rows whose log-ratios are all finite or −∞ (zero likelihood), with at least one finite
    value: NaN and +∞ make an outcome's weights undefined."""
    return _shifted(log_ratios)[1]


def _gpdfit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zhang–Stephens empirical-Bayes GPD fit of every row of sorted exceedances x (R, M),
    with the prior on k of ArviZ; (NaN, NaN) where the first quartile equals the minimum."""
    n = x.shape[-1]
    m_est = 30 + int(n**0.5)
    xstar = x[:, int((n / 4 + 0.5) - 1)]
    ok = xstar > x[:, 0]
    khat = np.full(x.shape[0], np.nan)
    sigma = np.full(x.shape[0], np.nan)
    if not ok.any():
        return khat, sigma
    xs = x[ok]
    grid = 1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5))
    with np.errstate(divide="ignore", over="ignore"):
        b = grid[None, :] / (_PRIOR_BS * xstar[ok][:, None]) + 1 / xs[:, -1][:, None]
    k = np.empty_like(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in range(0, b.shape[0], 16):  # in blocks of rows: the (rows, m_est, M) temporary
            sl = slice(s, s + 16)           # stays in cache
            k[sl] = np.log1p(-b[sl, :, None] * xs[sl, None, :]).mean(axis=-1)
        len_scale = n * (np.log(-b / k) - k - 1)
    w = np.exp(len_scale - _logsumexp(len_scale))
    w = np.where(w >= 10 * np.finfo(float).eps, w, 0.0)
    with np.errstate(invalid="ignore"):
        w /= w.sum(axis=-1, keepdims=True)
    b_post = (b * w).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.log1p(-b_post[:, None] * xs).mean(axis=-1)
    sig = -kappa / b_post
    kappa = (n * kappa + _PRIOR_K * 0.5) / (n + _PRIOR_K)
    nan = np.isnan(kappa)
    kappa = np.where(nan, np.inf, kappa)
    sig = np.where(nan, np.nan, sig)
    khat[ok], sigma[ok] = kappa, sig
    return khat, sigma


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """log Σ exp(a) along the last axis, keeping it (−∞ for an all −∞ row)."""
    m = np.max(a, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return m + np.log(np.exp(a - m).sum(axis=-1, keepdims=True))


def _gpinv(p: np.ndarray, kappa: np.ndarray, sigma: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """GPD quantiles at probabilities p (M,) for every row's (κ, σ, μ): (R, M)."""
    k, s, m = kappa[:, None], sigma[:, None], mu[:, None]
    lp = np.log1p(-p)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(k == 0, m - s * lp, m + s * np.expm1(-k * lp) / np.where(k == 0, 1.0, k))
    return np.where(s > 0, q, np.nan)


def _shifted(log_ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows shifted by their maximum (NaN and +∞ entries → −∞) and the rows' validity."""
    r = np.array(log_ratios, dtype=float, copy=True)
    if r.ndim != 2:
        raise ValueError("PSIS expects a (J, S) array of log-ratios")
    top = r.max(axis=1, keepdims=True)  # NaN or +∞ in a row make its maximum so
    broken = np.isnan(top[:, 0]) | (top[:, 0] == np.inf)
    if broken.any():
        rows = r[broken]
        rows[np.isnan(rows) | (rows == np.inf)] = -np.inf
        r[broken] = rows
        top[broken] = rows.max(axis=1, keepdims=True)
    valid = ~broken & np.isfinite(top[:, 0])
    r -= np.where(np.isfinite(top), top, 0.0)
    return r, valid


def _smooth_tails(r: np.ndarray, valid_top: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The PSIS tail of every shifted row r (J, S): k̂ (J,), the rows smoothed, their tail
    indices (R, M) and smoothed log-ratios (R, M)."""
    n_rows, n_draws = r.shape
    m = tail_length(n_draws)
    if m < 5:
        raise ValueError("PSIS needs at least 5 tail draws (S >= 25)")
    khat = np.full(n_rows, np.nan)
    # the M + 1 largest of every row, sorted: the cutoff and the tail
    part = np.argpartition(r, n_draws - m - 1, axis=1)[:, n_draws - m - 1:]
    vals = np.take_along_axis(r, part, 1)
    order = np.argsort(vals, axis=1, kind="stable")
    part = np.take_along_axis(part, order, 1)
    vals = np.take_along_axis(vals, order, 1)
    cutoff, tail, tail_idx = vals[:, 0], vals[:, 1:], part[:, 1:]
    with np.errstate(invalid="ignore"):
        flat = np.abs(tail[:, -1] - tail[:, 0]) < np.finfo(float).tiny
    fit = ~flat & valid_top
    rows = np.zeros(0, int)
    sm = np.zeros((0, m))
    if fit.any():
        with np.errstate(under="ignore"):
            e_cut = np.exp(cutoff[fit])
            k, s = _gpdfit(np.exp(tail[fit]) - e_cut[:, None])
        khat[fit] = k
        ok = np.isfinite(k)
        if ok.any():
            p = np.arange(0.5, m) / m
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                sm = np.log(_gpinv(p, k[ok], s[ok], e_cut[ok]))
            cap = tail[fit][ok][:, -1:]
            sm = np.where(sm > cap, cap, sm)
            rows = np.flatnonzero(fit)[ok]
    khat[flat & valid_top] = -np.inf
    return khat, rows, tail_idx[rows], sm


def khat_threshold(k_max: float, n_draws: int) -> float:
    """The Pareto k̂ above which importance weights over ``n_draws`` draws are not trusted.

    Implements the sample-size rule of Vehtari et al. (2024, "Pareto smoothed importance
    sampling", JMLR), as ArviZ applies it: k_thr = min(1 − 1/log10 S, ``k_max``), S the number
    of draws reweighted.  Below this k̂ the PSIS estimate's relative error falls at the usual
    rate in S; with S = 2000 draws it is 0.697, with S = 500 it is 0.630.  ``k_max`` (0.7 by
    default in :class:`belief.decision.settings.CVUSettings`) caps it.
    """
    if n_draws <= 1:
        return -np.inf
    return float(min(1.0 - 1.0 / np.log10(n_draws), k_max))


def psis(log_ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, self-normalised log-weights of every row of ``log_ratios`` (J, S).

    Returns
    -------
    log_weights : ndarray (J, S)
        log w̃_ij, Σ_i w̃_ij = 1 (NaN in rows the smoothing broke, see the module docstring).
    khat : ndarray (J,)
        The Pareto shape estimate of each row (NaN: the fit failed; −∞: a flat tail).

    Rows that are not valid (:func:`row_is_valid`) are computed with their NaN/+∞ entries
    replaced by −∞ so the others stay usable; callers must flag them.
    """
    r, _ = _shifted(log_ratios)
    khat, rows, idx, sm = _smooth_tails(r, np.isfinite(r.max(axis=1)))
    r[rows[:, None], idx] = sm
    with np.errstate(invalid="ignore"):
        r -= _logsumexp(r)
    return r, khat


def psis_weights(log_ratios: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed and raw normalised weights of every row at once (one exponential pass).

    Returns
    -------
    smoothed : ndarray (J, S)
        w̃_ij = exp of :func:`psis`'s log-weights; rows whose smoothing broke (non-finite) and
        invalid rows are uniform — flag them with ``ok``.
    raw : ndarray (J, S)
        ω_ij (:func:`raw_weights`), uniform in invalid rows.
    khat : ndarray (J,)
    ok : bool ndarray (J,)
        Valid rows (:func:`row_is_valid`) whose smoothed weights are finite.
    """
    r, valid = _shifted(log_ratios)
    khat, rows, idx, sm = _smooth_tails(r, valid)
    n_s = r.shape[1]
    with np.errstate(under="ignore"):
        e = np.exp(r)
    if not valid.all():
        e[~valid] = 1.0
    raw = e / e.sum(axis=1, keepdims=True)
    with np.errstate(under="ignore", invalid="ignore", over="ignore"):
        e[rows[:, None], idx] = np.exp(sm)
        total = e.sum(axis=1, keepdims=True)
    ok = valid & np.isfinite(total[:, 0]) & (total[:, 0] > 0)
    if not ok.all():
        e[~ok] = 1.0
        total[~ok] = n_s
    return e / total, raw, khat, ok


def raw_weights(log_ratios: np.ndarray) -> np.ndarray:
    """Self-normalised raw importance weights ω_ij = exp(r_ij − log Σ_k exp r_kj), (J, S);
    invalid rows (:func:`row_is_valid`) are uniform (flag them separately)."""
    r = np.array(log_ratios, dtype=float, copy=True)
    bad = ~row_is_valid(r)
    r[bad] = 0.0
    with np.errstate(under="ignore"):
        w = np.exp(r - _logsumexp(r))
    return w


def effective_sample_size(weights: np.ndarray) -> np.ndarray:
    """Kish's effective sample size 1 / Σ_i w_i² of normalised weight rows (J, S) → (J,)."""
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=-1, keepdims=True)
    return 1.0 / (w**2).sum(axis=-1)
