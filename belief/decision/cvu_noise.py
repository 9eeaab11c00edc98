"""The upward bias of G0 under importance weights, estimated and removed.

Under the weights of outcome Y_j every candidate's φ is estimated from the same S draws with
an effective sample size ESS_j ≪ S, so φ̂_j = φ_j + ε_j with ε_j ≈ N(0, V_j) and

    V_j[c, d] = Σ_i w̃_ij² ψ_jc(g_ic) ψ_jd(g_id)

(w̃_ij the normalised smoothed weights, ψ_jc the influence function of φ at column c under
them: g − φ̂ for the mean, :func:`belief.decision.preposterior.influence` otherwise; the
delta-method variance of a self-normalised importance estimate, the draws taken as
independent).  G0 is a maximum, so by Jensen E[G0(φ̂_j)] ≥ G0(φ_j): the noise of the weighted
functionals of candidates that the study barely informs is read as information, and the more
informative the study (the smaller ESS_j), the larger the bias — an informative diagnosis
facing several near-tied actions is over-valued.

Every other G0 of a decision — G0(s^∅), a candidate whose outcome nobody predicts, the
regression estimator's fitted values around the draws' means — carries the smaller bias of
equally weighted draws (noise V_0 = Σ_i ψ_i ψ_iᵀ/S²), common to all candidates.  What is
removed is the excess, estimated to first order (a parametric bootstrap at φ̂_j):

    b_j = E_z[G0(φ̂_j + L_j z)] − E_z[G0(φ̂_j + L_0 z)],   L_j L_jᵀ = V_j,  L_0 L_0ᵀ = V_0,

with K antithetic normal vectors z common to every outcome and every candidate of a decision
(:func:`noise_draws`), so that a study that teaches nothing (equal weights) keeps CVU = 0
exactly.  The PSIS estimator averages G0(φ̂_j) − b_j
(:func:`belief.decision.cvu_psis.importance_estimate`), an exact refit's outcome likewise with
its own equally weighted draws, and the MCSE includes the error of b over the antithetic
pairs.  The look-ahead and rollout continuations are not corrected: their G0s, and V(s^∅)
built from the one-step estimates, stay plug-in (a decision whose continuation falls back to
one step is corrected like a one-step decision).

How much it removes (``tests/test_cvu_noise.py``; a normal study of Δ ~ N(0, 1) with five
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from belief.decision.functionals import Functional, weighted_column_quantiles
from belief.decision.preposterior import influence

__all__ = ["NoiseBias", "noise_bias", "noise_covariance", "noise_draws"]


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
                     smooth: np.ndarray, chunk: int = 64) -> np.ndarray:
    """V_j (J, C, C): the covariance of the weighted functionals of the columns of ``gain``
    (S, C) under the normalised weights ``smooth`` (J, S), at their values ``phi`` (J, C)."""
    gain = np.asarray(gain, float)
    n_j, n_s = smooth.shape
    n_c = gain.shape[1]
    out = np.empty((n_j, n_c, n_c))
    w2 = smooth**2
    if functional.kind == "mean":
        outer = (gain[:, :, None] * gain[:, None, :]).reshape(n_s, n_c * n_c)
        a = (w2 @ outer).reshape(n_j, n_c, n_c)
        m = w2 @ gain
        s = w2.sum(axis=1)[:, None, None]
        out[:] = (a - m[:, :, None] * phi[:, None, :] - phi[:, :, None] * m[:, None, :]
                  + s * phi[:, :, None] * phi[:, None, :])
        return out
    for start in range(0, n_j, chunk):
        sl = slice(start, min(start + chunk, n_j))
        rows = sl.stop - sl.start
        done: dict[tuple, list[np.ndarray]] = {}  # this chunk's quantiles, every column at once

        def quantiles(c: int, sl: slice = sl, done: dict = done):
            def of(levels: tuple[float, ...]) -> list[np.ndarray]:
                if levels not in done:
                    done[levels] = weighted_column_quantiles(gain, smooth[sl], levels)
                return [v[:, c] for v in done[levels]]
            return of

        psi = np.empty((rows, n_s, n_c))
        for c in range(n_c):
            x = np.broadcast_to(gain[:, c], (rows, n_s))
            psi[:, :, c] = influence(functional, x, phi[sl, c], x, smooth[sl], quantiles(c))
        out[sl] = (psi * w2[sl, :, None]).transpose(0, 2, 1) @ psi  # Σ_i w̃² ψ ψᵀ
    return out


def noise_bias(functional: Functional, gain: np.ndarray, phi: np.ndarray,
               c_lambda: np.ndarray, feasible: np.ndarray, smooth: np.ndarray,
               z: np.ndarray, reference: np.ndarray | None = None) -> NoiseBias:
    """The excess bias of G0(φ̂_j) = max(0, max_{c feasible} φ̂_jc − C_λ'(c)) from the noise of
    the weighted functionals (module docstring), per outcome and antithetic pair:
    b_j = E_z[G0(φ̂_j + L_j z)] − E_z[G0(φ̂_j + L_0 z)], L_0 L_0ᵀ = V_0 the noise of the
    functionals of ``reference`` with equal weights.

    Parameters
    ----------
    gain : ndarray (S, C)
        Next-gain draws.
    phi : ndarray (J, C)
        φ̂_jc under the weights of outcome j.
    c_lambda : ndarray (C,)
    feasible : bool ndarray (C,) or (J, C)
        M' per outcome.
    smooth : ndarray (J, S)
        Normalised (smoothed) weights.
    z : ndarray (K/2, C)
        :func:`noise_draws`; column c is used for candidate column c.
    reference : ndarray (S0, C), optional
        The draws whose equally weighted noise every other G0 of the decision carries
        (default ``gain``).
    """
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
    v = noise_covariance(functional, gain[:, cols], phi[np.ix_(rows, cols)], smooth[rows])
    n_0 = ref.shape[0]
    phi_0 = functional(ref[:, cols].T)[None, :]
    v_0 = noise_covariance(functional, ref[:, cols], phi_0, np.full((1, n_0), 1.0 / n_0))
    u = phi[np.ix_(rows, cols)] - np.asarray(c_lambda, float)[cols]
    mask = feas[np.ix_(rows, cols)]
    zc = z[:, cols]
    pairs = zero.pairs.copy()
    pairs[rows] = (_pairs(u, mask, v, zc)
                   - _pairs(u, mask, np.broadcast_to(v_0, v.shape), zc))
    return NoiseBias(pairs)


def _pairs(u: np.ndarray, mask: np.ndarray, v: np.ndarray, z: np.ndarray) -> np.ndarray:
    """(G0(u_j + L_j z_k) + G0(u_j − L_j z_k))/2 − G0(u_j) (J, K/2), L_j L_jᵀ = v_j."""
    lam, vec = np.linalg.eigh(v)
    root = vec * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]  # (J, C', C'): L_j
    eps = np.einsum("jcd,kd->jkc", root, z)  # (J, K/2, C')
    m = mask[:, None, :]

    def g0(x: np.ndarray) -> np.ndarray:
        return np.maximum(np.where(m, x, -np.inf).max(axis=-1), 0.0)

    x = u[:, None, :]
    return 0.5 * (g0(x + eps) + g0(x - eps)) - g0(x)

def _within_reach(functional: Functional, gain: np.ndarray, phi: np.ndarray,
                  c_lambda: np.ndarray, feas: np.ndarray, smooth: np.ndarray,
                  k: float = 8.0) -> tuple[np.ndarray, np.ndarray]:
    """(columns, outcomes) that the bootstrap needs.  Column c is within reach of outcome j's
    G0 when u_jc ≥ max(0, max_d u_jd) − k·κ·(s_jc + max_d s_jd), with s the noise sd of a
    weighted mean, √(Σ_i w̃_ij² (g_ic − m_jc)²), and κ a generous factor for other
    functionals (the normal-theory ratio √(q(1 − q))/pdf(z_q) for a quantile, 2/√α for
    CVaR_α); stopping (0) is within reach when |max_d u_jd| ≤ k·κ·max_d s_jd.  A column
    further below is ≥ k noise sd's from ever winning; an outcome with one option within reach
    has G0 linear in the noise (its antithetic pairs give 0) — leaving them out changes
    nothing."""
    from statistics import NormalDist

    w2 = smooth**2
    m = smooth @ gain
    var = w2 @ gain**2 - 2 * m * (w2 @ gain) + m**2 * w2.sum(axis=1)[:, None]
    sd = np.sqrt(np.clip(var, 0.0, None))
    if functional.kind == "lcb":
        q = float(functional.param)
        kappa = max(1.0, np.sqrt(q * (1 - q)) / NormalDist().pdf(NormalDist().inv_cdf(q)))
    elif functional.kind == "cvar":
        kappa = 2.0 / np.sqrt(float(functional.param))
    else:
        kappa = 1.0
    u = np.where(feas, phi - c_lambda, -np.inf)
    top = np.maximum(u.max(axis=1), 0.0)
    s_top = np.where(feas, sd, 0.0).max(axis=1)
    near = feas & (u >= top[:, None] - k * kappa * (sd + s_top[:, None]))
    stop_near = np.abs(u.max(axis=1)) <= k * kappa * s_top
    return near.any(axis=0), near.sum(axis=1) + stop_near >= 2
