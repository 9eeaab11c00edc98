"""The upward bias of G0 under importance weights or a regression, estimated and removed.

Under the weights of outcome Y_j every candidate's φ is estimated from the same S draws with
an effective sample size ESS_j ≪ S, so φ̂_j = φ_j + ε_j with ε_j ≈ N(0, V_j) and

    V_j[c, d] = Σ_i w̃_ij² ψ_jc(g_ic) ψ_jd(g_id)

(w̃_ij the normalised smoothed weights, ψ_jc the influence function of φ at column c under
them: g − φ̂ for the mean, :func:`belief.decision.cvu.preposterior.influence` otherwise; the
delta-method variance of a self-normalised importance estimate, the draws taken as
independent).  G0 is a maximum, so by Jensen E[G0(φ̂_j)] ≥ G0(φ_j): the noise of the weighted
functionals of candidates that the study barely informs is read as information, and the more
informative the study (the smaller ESS_j), the larger the bias — an informative diagnosis
facing several near-tied actions is over-valued.

Every other G0 of a decision — G0(s^∅), a candidate whose outcome nobody predicts — carries
the smaller bias of equally weighted draws (noise V_0 = Σ_i ψ_i ψ_iᵀ/S²), common to all
candidates.  What is removed is the bias from the noise of φ̂_j beyond that of the equally
weighted functionals, estimated to first order (a parametric bootstrap at φ̂_j):

    b_j = E_z[G0(φ̂_j + L_j z)] − G0(φ̂_j),   L_j L_jᵀ = (V_j − V_0)₊,

the positive part of V_j − V_0: the noise of φ̂_j given the equally weighted functionals (for
the mean of independent draws, Var(Σ_i w̃_ij g_i | ḡ) = σ²(Σ_i w̃_ij² − 1/S) exactly), with K
antithetic normal vectors z common to every outcome and every candidate of a decision
(:func:`noise_draws`), so that a study that teaches nothing (equal weights, V_j = V_0) keeps
CVU = 0 exactly.  (An earlier form, E_z[G0(φ̂_j + L_j z)] − E_z[G0(φ̂_j + L_0 z)], subtracted
the equal-weight noise at φ̂_j: for a very informative study, whose fitted values have far
less noise than the draws' means, it corrected upward by about 3 of the estimate's own
outcome errors at n = 10⁶ — ``benchmarks/bench_evsi_coverage.py``.)  The PSIS estimator
averages G0(φ̂_j) − b_j (:func:`belief.decision.cvu.psis.importance_estimate`), an exact
refit's outcome likewise with its own equally weighted draws, and the MCSE includes the
error of b over the antithetic pairs.  The look-ahead and rollout continuations are not
corrected: their G0s, and V(s^∅) built from the one-step estimates, stay plug-in (a decision
whose continuation falls back to one step is corrected like a one-step decision).

How much the earlier form removed (``tests/test_cvu_noise.py``, which the present form passes
too; a normal study of Δ ~ N(0, 1) with five
uninformed competitors, 4000 draws, n observations of sd 1; mean error over draw sets
against the closed form under the draws' own prior): stratified draws, 8 sets, n = 30
(ESS ≈ 800) +0.023 → +0.014 on a value of 0.39, n = 3 +0.012 → +0.008; independent draws,
16 sets, n = 30 +0.020 → +0.011, n = 3 +0.007 → +0.003 (regression: +0.015, +0.007); without
competitors it changes nothing.  The first-order estimate is evaluated at the noisy φ̂, whose
near-ties are already spread by the noise, so at a tie of k noisy maxima it recovers only
about √2 − 1 of the bias; it removed 33–51 % above and never over-corrected.  A second
bootstrap level (2b − E*[b*]) removed more at up to 30 % more variance; a SIMEX extrapolation
in the noise scale over-corrected by up to 2 s.e. and inflated the spread by 50–90 % —
neither is used.

The regression estimator (:mod:`belief.decision.cvu.regression`) has the same bias from the
fitting noise of its fitted values μ̂_c(T_n) = x_nᵀβ̂_c: its V_n is the cluster-robust
covariance of the fitted values (:func:`fitted_covariance`; the R replicates of a draw share
its gains, so the draws are the clusters), its V_0 the noise of the draws' means (the
intercept-only fit's), and :func:`fitted_noise_bias` removes the same bias, averaged over at
most 256 of the outcomes within reach (that subset's error joins the MCSE).  For an LCB or
CVaR only the location's noise is counted.  Same closed form, 16 independent draw sets:
n = 30 +0.015 → +0.008, n = 3 +0.007 → +0.003; an outcome unrelated to every gain,
+0.0007 ± 0.0003 (the fitting noise read as information) → −0.0000 ± 0.0002.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from belief.decision.cvu.preposterior import influence, influence_levels
from belief.decision.functionals import Functional, weighted_column_quantiles

Quantiles = Callable[[tuple[float, ...]], list[np.ndarray]]
"""levels → one array of weighted column quantiles per level."""

__all__ = ["FittedNoiseBias", "LocationFit", "NoiseBias", "Quantiles", "WeightedFunctionals",
           "fitted_covariance", "fitted_noise_bias", "gram_pinv", "noise_bias",
           "noise_covariance", "noise_draws", "noise_ratio"]


@dataclass(frozen=True)
class NoiseBias:
    """The bias estimate of every outcome's G0 and its Monte Carlo error.

    Attributes
    ----------
    pairs : ndarray (J, K/2)
        (G0(φ̂_j + L_j z_k) + G0(φ̂_j − L_j z_k))/2 − G0(φ̂_j) for each antithetic pair k.
    """

    pairs: np.ndarray

    @property
    def b(self) -> np.ndarray:
        """b_j (J,): the mean over the pairs."""
        return self.pairs.mean(axis=1)


def noise_draws(seed: int, n_columns: int, draws: int = 256) -> np.ndarray:
    """The K/2 = ``draws``/2 normal vectors (K/2, C) of the bootstrap, one row per antithetic
    pair and one column per candidate column, shared by every estimate of a decision (common
    random numbers: the same state gives the same b; a study that teaches nothing gives CVU 0
    exactly)."""
    return np.random.default_rng([int(seed), 105]).standard_normal((max(draws // 2, 1),
                                                                     int(n_columns)))


def noise_covariance(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                     smooth: np.ndarray, chunk: int = 64,
                     quantiles: Quantiles | None = None) -> np.ndarray:
    """V_j (J, C, C): the covariance of the weighted functionals of the columns of ``gain``
    (S, C) under the normalised weights ``smooth`` (J, S), at their values ``phi`` (J, C).

    ``quantiles``: levels → the (J, C) weighted quantiles of the columns at those levels
    (:func:`belief.decision.functionals.weighted_column_quantiles` of ``gain`` and
    ``smooth``), when the caller has them; computed here otherwise."""
    gain = np.asarray(gain, float)
    n_j, n_s = smooth.shape
    n_c = gain.shape[1]
    out = np.empty((n_j, n_c, n_c))
    w2 = smooth**2
    if functional.linear:
        outer = (gain[:, :, None] * gain[:, None, :]).reshape(n_s, n_c * n_c)
        a = (w2 @ outer).reshape(n_j, n_c, n_c)
        m = w2 @ gain
        s = w2.sum(axis=1)[:, None, None]
        out[:] = (a - m[:, :, None] * phi[:, None, :] - phi[:, :, None] * m[:, None, :]
                  + s * phi[:, :, None] * phi[:, None, :])
        return out
    for start in range(0, n_j, chunk):
        sl = slice(start, min(start + chunk, n_j))

        def of(levels: tuple[float, ...], sl: slice = sl) -> list[np.ndarray]:
            """This chunk's quantiles, every column at once (influence asks once)."""
            return ([v[sl] for v in quantiles(levels)] if quantiles is not None
                    else weighted_column_quantiles(gain, smooth[sl], levels))

        if functional.quantile_level is not None:
            out[sl] = _quantile_covariance(functional, gain, phi[sl], smooth[sl], of)
            continue
        # ψ of every column at once, (rows, S, C): column c is influence() of gain[:, c]
        psi = influence(functional, gain[None, :, :], phi[sl], None, None, of)
        out[sl] = (psi * w2[sl, :, None]).transpose(0, 2, 1) @ psi  # Σ_i w̃² ψ ψᵀ
    return out


_CODE_COLUMNS = 10
"""Columns up to which :func:`_quantile_covariance` sums the weights per pattern of
indicators (2^C patterns per outcome) instead of multiplying the weighted indicators."""


def _quantile_covariance(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                         smooth: np.ndarray, quantiles: Quantiles) -> np.ndarray:
    """:func:`noise_covariance` of the q-quantile from the indicators of the draws below it.

    The influence function takes two values per row and column,
    ψ_jc(g) = δ_jc (q − 1[g ≤ φ_jc]) with δ = 1/f (0 where the density f is not finite;
    :func:`belief.decision.cvu.preposterior.influence`), so with I_ijc = 1[g_ic ≤ φ_jc],
    s_j = Σ_i w̃_ij², P_j[c, d] = Σ_i w̃_ij² I_ijc I_ijd and M_jc = P_j[c, c]:

        V_j[c, d] = δ_jc δ_jd (q² s_j − q M_jc − q M_jd + P_j[c, d])

    — the same value to rounding as building ψ.  P is summed per pattern of the indicators
    (up to :data:`_CODE_COLUMNS` columns) or as the product of the weighted indicators."""
    q = float(functional.quantile_level)
    h = 0.5 * min(q, 1 - q)
    lo, hi = quantiles(influence_levels(functional))
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(hi > lo, 2 * h / (hi - lo), np.inf)
        delta = np.where(np.isfinite(dens), 1.0 / dens, 0.0)  # (rows, C)
    gain_t = np.ascontiguousarray(gain.T)  # (C, S): the draws of a column contiguous
    n_r, n_c = phi.shape
    if n_c <= _CODE_COLUMNS:
        # P from the pattern of each draw: code_ij = Σ_c I_ijc 2^c, h_j[k] = Σ_{i: code = k}
        # w̃_ij², P_j[c, d] = Σ_k h_j[k] bit_c(k) bit_d(k) — one pass over the draws
        code = np.zeros(smooth.shape, np.int64)
        for c in range(n_c):
            code |= (gain_t[c][None, :] <= phi[:, c, None]).astype(np.int64) << c
        code += (np.arange(n_r) << n_c)[:, None]
        hist = np.bincount(code.ravel(), weights=(smooth**2).ravel(),
                           minlength=n_r << n_c).reshape(n_r, 1 << n_c)
        bits = (np.arange(1 << n_c)[:, None] >> np.arange(n_c)[None, :]) & 1
        p = (hist @ (bits[:, :, None] & bits[:, None, :]).reshape(1 << n_c, n_c * n_c)
             ).reshape(n_r, n_c, n_c)
    else:
        a = np.multiply(gain_t[None, :, :] <= phi[:, :, None], smooth[:, None, :])  # w̃ I
        p = a @ a.transpose(0, 2, 1)
    m = np.diagonal(p, axis1=1, axis2=2)
    s = (smooth**2).sum(axis=1)[:, None, None]
    k = q * q * s - q * m[:, :, None] - q * m[:, None, :] + p
    return delta[:, :, None] * delta[:, None, :] * k


@dataclass(frozen=True)
class WeightedFunctionals:
    """The functionals of the next-gain draws under each outcome's weights.

    Attributes
    ----------
    phi : ndarray (J, C)
        φ̂_jc under the weights of outcome j.
    smooth : ndarray (J, S)
        Normalised (smoothed) weights.
    quantiles : callable levels → list of ndarray (J, C), optional
        The weighted quantiles of the columns of the draws under ``smooth`` at those levels
        (:func:`belief.decision.functionals.weighted_column_quantiles`), when the caller has
        them (the same values; computed where needed otherwise).
    """

    phi: np.ndarray
    smooth: np.ndarray
    quantiles: Quantiles | None = None


def noise_bias(functional: Functional, gain: np.ndarray, weighted: WeightedFunctionals,
               c_lambda: np.ndarray, feasible: np.ndarray, z: np.ndarray,
               reference: np.ndarray | None = None) -> NoiseBias:
    """The excess bias of G0(φ̂_j) = max(0, max_{c feasible} φ̂_jc − C_λ'(c)) from the noise of
    the weighted functionals (module docstring), per outcome and antithetic pair:
    b_j = E_z[G0(φ̂_j + L_j z)] − G0(φ̂_j), L_j L_jᵀ = (V_j − V_0)₊ with V_0 the noise of the
    functionals of ``reference`` with equal weights (eigenvalues below 1e-9 of V_0's largest
    entry are taken as 0).

    Parameters
    ----------
    gain : ndarray (S, C)
        Next-gain draws.
    weighted : WeightedFunctionals
        φ̂ (J, C) under the weights (J, S) of each outcome, and their weighted quantiles when
        the caller has them.
    c_lambda : ndarray (C,)
    feasible : bool ndarray (C,) or (J, C)
        M' per outcome.
    z : ndarray (K/2, C)
        :func:`noise_draws`; column c is used for candidate column c.
    reference : ndarray (S0, C), optional
        The draws whose equally weighted noise every other G0 of the decision carries
        (default ``gain``).
    """
    phi, smooth, quantiles = weighted.phi, weighted.smooth, weighted.quantiles
    n_j = phi.shape[0]
    gain = np.asarray(gain, float)
    ref = gain if reference is None else np.asarray(reference, float)
    feas = np.broadcast_to(np.asarray(feasible, bool), phi.shape)
    zero = NoiseBias(np.zeros((n_j, z.shape[0])))
    cols = np.flatnonzero(feas.any(axis=0))
    if cols.size == 0:
        return zero
    keep, rows = _within_reach(functional, gain[:, cols], phi[:, cols],
                               np.asarray(c_lambda, float)[cols], feas[:, cols], smooth)
    cols, rows = cols[keep], np.flatnonzero(rows)
    if cols.size == 0 or rows.size == 0:
        return zero
    sub = None if quantiles is None else (
        lambda levels: [q[np.ix_(rows, cols)] for q in quantiles(levels)])
    v = noise_covariance(functional, gain[:, cols], phi[np.ix_(rows, cols)], smooth[rows],
                         quantiles=sub)
    n_0 = ref.shape[0]
    phi_0 = functional(ref[:, cols].T)[None, :]
    v_0 = noise_covariance(functional, ref[:, cols], phi_0, np.full((1, n_0), 1.0 / n_0))
    u = phi[np.ix_(rows, cols)] - np.asarray(c_lambda, float)[cols]
    mask = feas[np.ix_(rows, cols)]
    zc = z[:, cols]
    pairs = zero.pairs.copy()
    # the noise of φ̂_j given the equally weighted functionals: V_j − V_0 (for the mean of
    # independent draws Var(Σ w_i g_i | ḡ) = σ²(Σ w_i² − 1/S) exactly), its positive part
    pairs[rows] = _pairs(u, mask, v - v_0, zc, floor=_FLOOR * np.abs(v_0).max())
    return NoiseBias(pairs)


_FLOOR = 1e-9
"""Eigenvalues of V_j − V_0 below this share of V_0's largest entry are rounding: set to 0
(an equally weighted outcome then gives b = 0 exactly)."""


def _pairs(u: np.ndarray, mask: np.ndarray, v: np.ndarray, z: np.ndarray,
           floor: float = 0.0) -> np.ndarray:
    """(G0(u_j + L_j z_k) + G0(u_j − L_j z_k))/2 − G0(u_j) (J, K/2), L_j L_jᵀ = the positive
    part of v_j (eigenvalues ≤ ``floor`` set to 0); a single (C', C') ``v`` is one covariance
    for every outcome (factored once)."""
    lam, vec = np.linalg.eigh(v)
    root = vec * np.sqrt(np.where(lam > floor, lam, 0.0))[..., None, :]  # L_j, or one L
    if v.ndim == 2:
        eps = (z @ root.T)[None, :, :]  # (1, K/2, C')
    else:
        eps = z[None] @ root.transpose(0, 2, 1)  # (J, K/2, C')
    m = mask[:, None, :]

    def g0(x: np.ndarray) -> np.ndarray:
        return np.maximum(np.where(m, x, -np.inf).max(axis=-1), 0.0)

    x = u[:, None, :]
    return 0.5 * (g0(x + eps) + g0(x - eps)) - g0(x)

def noise_ratio(functional: Functional, draws: np.ndarray) -> float:
    """A generous ratio of a functional's noise sd to that of the weighted mean of ``draws``
    (S, C): :meth:`belief.decision.functionals.Functional.noise_ratio` (the normal-theory
    √(q(1 − q))/pdf(z_q) for a quantile, 2/√α for CVaR_α, 1 for the mean)."""
    return functional.noise_ratio(draws)


def _reach(u: np.ndarray, feas: np.ndarray, sd: np.ndarray, k: float = 8.0
           ) -> tuple[np.ndarray, np.ndarray]:
    """(columns, outcomes) within reach of the bootstrap, from the utilities u (J, C), the
    feasibility (J, C) and generous noise sd's (J, C): column c is within reach of outcome j's
    G0 when u_jc ≥ max(0, max_d u_jd) − k·(sd_jc + max_d sd_jd); stopping (0) is within reach
    when |max_d u_jd| ≤ k·max_d sd_jd.  A column further below is ≥ k noise sd's from ever
    winning; an outcome with one option within reach has G0 linear in the noise (its
    antithetic pairs give 0) — leaving them out changes nothing."""
    u = np.where(feas, u, -np.inf)
    top = np.maximum(u.max(axis=1), 0.0)
    s_top = np.where(feas, sd, 0.0).max(axis=1)
    near = feas & (u >= top[:, None] - k * (sd + s_top[:, None]))
    stop_near = np.abs(u.max(axis=1)) <= k * s_top
    return near.any(axis=0), near.sum(axis=1) + stop_near >= 2


def _within_reach(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                  c_lambda: np.ndarray, feas: np.ndarray, smooth: np.ndarray,
                  k: float = 8.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_reach` with s the noise sd of a weighted mean, √(Σ_i w̃_ij² (g_ic − m_jc)²),
    times :func:`noise_ratio` for other functionals."""
    w2 = smooth**2
    m = smooth @ gain
    var = w2 @ gain**2 - 2 * m * (w2 @ gain) + m**2 * w2.sum(axis=1)[:, None]
    sd = np.sqrt(np.clip(var, 0.0, None)) * noise_ratio(functional, gain)
    return _reach(phi - c_lambda, feas, sd, k)


@dataclass(frozen=True)
class FittedNoiseBias:
    """The regression estimator's excess noise bias, averaged over its N outcomes.

    Attributes
    ----------
    b : float
        (1/N) Σ_n b_n, estimated on at most ``cap`` of the outcomes within reach.
    pairs : ndarray (K/2,)
        The same mean for each antithetic pair.
    se_rows : float
        The standard error from evaluating b_n on a subset of the outcomes (0 when all).
    """

    b: float
    pairs: np.ndarray
    se_rows: float

    @property
    def mcse(self) -> float:
        """Its Monte Carlo error: the pairs' and the subset's, in quadrature."""
        p = self.pairs
        se_pairs = p.std(ddof=1) / np.sqrt(p.size) if p.size > 1 else 0.0
        return float(np.hypot(se_pairs, self.se_rows))


def gram_pinv(x: np.ndarray) -> tuple[np.ndarray, int]:
    """A generalised inverse M⁺ of M = XᵀX/N taken on standardised columns, and its rank
    (M⁻¹ at full rank; otherwise M M⁺ M = M, and fitted values x_nᵀM⁺Xᵀy/N are those of
    least squares, though M⁺ is not the Moore–Penrose inverse of M).

    With D = diag(√(mean x_j²)) and X_s = X D⁻¹, the eigen-directions of X_sᵀX_s below 1e-10 of
    the largest eigenvalue are dropped: M⁺ = N D⁻¹ (X_sᵀX_s)⁺ D⁻¹.  Least squares
    (β̂ = M⁺ Xᵀy / N, :func:`belief.decision.cvu.regression.least_squares`) and the covariance
    of its fitted values (:func:`fitted_covariance`) use this one inverse, so they keep the
    same directions (raw spline columns differ in scale by orders of magnitude: a cut-off on
    the raw M drops directions the fit keeps)."""
    n = x.shape[0]
    scale = np.sqrt((x**2).mean(axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    xs = x / scale
    vals, vecs = np.linalg.eigh(xs.T @ xs)
    keep = vals > vals.max() * 1e-10
    inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
    return inv * (float(n) / np.outer(scale, scale)), int(keep.sum())


def _cluster_scores(x: np.ndarray, resid: np.ndarray, replicates: int,
                    m_inv: np.ndarray | None = None) -> np.ndarray:
    """(S, p, C'): M⁺u_ic / N for every draw i (:func:`fitted_covariance`; ``m_inv``:
    ``gram_pinv(x)[0]`` when the caller has it)."""
    n, p = x.shape
    n_s = n // replicates
    m_inv = gram_pinv(x)[0] if m_inv is None else m_inv
    u = (x.reshape(replicates, n_s, p).transpose(1, 2, 0)
         @ resid.reshape(replicates, n_s, -1).transpose(1, 0, 2))  # (S, p, C'): u_i
    return (m_inv @ u) / float(n)


def fitted_covariance(x: np.ndarray, resid: np.ndarray, replicates: int) -> np.ndarray:
    """B (p, C', p, C') with V_n = (x_n ⊗ I)ᵀ B (x_n ⊗ I) the covariance of the least-squares
    fitted values x_nᵀβ̂_c at design row x_n, the draws as clusters (the R replicates of a
    draw share its gains, so their residuals are correlated):

        Cov(β̂_c, β̂_d) = M⁺ [Σ_i u_ic u_idᵀ] M⁺ / N²,   u_ic = Σ_r x_ir e_irc,  M = XᵀX/N

    (the cluster-robust sandwich; rows ordered replicate-major, n = r·S + i; M⁺ from
    :func:`gram_pinv`, the inverse the least-squares fit uses)."""
    w = _cluster_scores(x, resid, replicates)
    n_s, p, n_c = w.shape
    flat = w.reshape(n_s, -1)
    return (flat.T @ flat).reshape(p, n_c, p, n_c)


@dataclass(frozen=True)
class LocationFit:
    """The regression estimator's location fit (:mod:`belief.decision.cvu.regression`).

    Attributes
    ----------
    x : ndarray (N, p)
        The design, N = R·S rows ordered replicate-major.
    resid : ndarray (N, C')
        Residuals of the location fit.
    replicates : int
        R.
    m_inv : ndarray (p, p), optional
        ``gram_pinv(x)[0]``, the fit's inverse, when the caller has it.
    """

    x: np.ndarray
    resid: np.ndarray
    replicates: int
    m_inv: np.ndarray | None = None


def fitted_noise_bias(fit: LocationFit, gain: np.ndarray, u: np.ndarray,
                      feasible: np.ndarray, z: np.ndarray, cap: int = 256) -> FittedNoiseBias:
    """The excess bias of the regression estimator's G0_n = max(0, max_c u_nc) from the
    fitting noise of its fitted values (:mod:`belief.decision.cvu.regression`):
    b_n = E_z[G0(u_n + L_n z)] − G0(u_n), L_n L_nᵀ = (V_n − V_0)₊ with V_n the cluster-robust
    covariance of the fitted values at x_n (:func:`fitted_covariance`) and V_0 =
    Σ_i (g_i − ḡ)(g_i − ḡ)ᵀ/S² the noise of the draws' means that every other G0 of the
    decision carries (the intercept-only fit's V_n): the positive part, so a very
    informative study, whose fitted values have less noise than the draws' means, is not
    corrected.  For the location–scale form of an LCB
    or CVaR only the location's noise is counted.

    The mean (1/N) Σ_n b_n is estimated on a subsample: 4·``cap`` evenly spaced outcomes (all
    when N is smaller) are screened (:func:`_reach`; b_n = 0 out of reach), and at most
    ``cap`` of those within reach, evenly spaced, are bootstrapped; ``se_rows`` is the
    error of both stages (with finite-population corrections).

    Parameters
    ----------
    fit : LocationFit
        The design x (N, p), the location fit's residuals (N, C'), R and optionally M⁺.
    gain : ndarray (S, C')
        The draws of the same columns.
    u : ndarray (N, C')
        φ̂_n − C_λ' of those columns.
    feasible : bool ndarray (C',) or (N, C')
    z : ndarray (K/2, C')
        :func:`noise_draws`, the columns of these candidates.
    cap : int
        Outcomes bootstrapped at most.
    """
    x = fit.x
    n = x.shape[0]
    feas = np.broadcast_to(np.asarray(feasible, bool), u.shape)
    zero = FittedNoiseBias(0.0, np.zeros(z.shape[0]), 0.0)
    gain = np.asarray(gain, float)
    n_s = gain.shape[0]
    dev = gain - gain.mean(axis=0)
    v_0 = dev.T @ dev / float(n_s) ** 2
    w = _cluster_scores(x, fit.resid, fit.replicates, fit.m_inv)  # (S, p, C')
    pick = np.arange(n) if n <= 4 * cap else np.linspace(0, n - 1, 4 * cap).astype(int)
    xp, up, fp = x[pick], u[pick], feas[pick]
    diag = np.stack([((xp @ (w[:, :, c].T @ w[:, :, c])) * xp).sum(axis=1)
                     for c in range(u.shape[1])], -1)  # V_n[c, c]
    sd = np.sqrt(np.clip(np.maximum(diag, np.diag(v_0)[None, :]), 0.0, None))
    keep, rows = _reach(up, fp, sd)
    cols, rows = np.flatnonzero(keep), np.flatnonzero(rows)
    if cols.size == 0 or rows.size == 0:
        return zero
    n_reach = rows.size
    sub = rows if n_reach <= cap else rows[np.linspace(0, n_reach - 1, cap).astype(int)]
    v = _fitted_covariances(xp[sub], w[:, :, cols])
    uc, mask = up[np.ix_(sub, cols)], fp[np.ix_(sub, cols)]
    zc = z[:, cols]
    v_ref = v_0[np.ix_(cols, cols)]
    per = _pairs(uc, mask, v - v_ref, zc, floor=_FLOOR * np.abs(v_ref).max())
    return _two_stage_mean(per, n, pick.size, n_reach, sub.size)


def _fitted_covariances(xs_all: np.ndarray, w: np.ndarray) -> np.ndarray:
    """V_n = x_nᵀ B x_n (K, C', C') for the rows ``xs_all`` (K, p), B = Σ_i w_iᵀ w_i of the
    cluster scores ``w`` (S, p, C') of these columns, in chunks of ≤ 32 MB."""
    n_s, p, k = w.shape
    wc = w.reshape(n_s, -1)
    bc = (wc.T @ wc).reshape(p, k, p, k)  # B of the columns within reach
    v = np.empty((xs_all.shape[0], k, k))
    bflat = bc.reshape(p, -1)
    step = max(1, int(2**22 // max(k * p * k, 1)))  # rows at a time: ≤ 32 MB of x_nᵀB
    for lo in range(0, xs_all.shape[0], step):
        xs = xs_all[lo:lo + step]
        half = (xs @ bflat).reshape(xs.shape[0], k, p, k)  # (x_nᵀ B)[c, q, d]
        v[lo:lo + step] = (xs[:, None, None, :] @ half)[:, :, 0, :]  # Σ_q (x_nᵀB)[c,q,d] x_nq
    return v


def _two_stage_mean(per: np.ndarray, n: int, n_screened: int, n_reach: int,
                    n_sub: int) -> FittedNoiseBias:
    """(1/N) Σ_n b_n from the pairs ``per`` (n_sub, K/2) of the bootstrapped outcomes:
    ``n_screened`` of the N screened, ``n_reach`` of those within reach (b_n = 0 for the
    others), ``n_sub`` of those bootstrapped; its error with finite-population corrections at
    both stages."""
    share = n_reach / n_screened
    b_rows = per.mean(axis=1)
    b = share * float(b_rows.mean())
    var = 0.0
    if n_screened < n:  # the screened outcomes are a sample of the N
        spread = max(share * float((b_rows**2).mean()) - b * b, 0.0)
        var += spread / n_screened * (1 - n_screened / n)
    if n_sub < n_reach and n_sub > 1:  # the bootstrapped ones, of those within reach
        var += share**2 * float(b_rows.var(ddof=1)) / n_sub * (1 - n_sub / n_reach)
    return FittedNoiseBias(b, share * per.mean(axis=0), float(np.sqrt(var)))
