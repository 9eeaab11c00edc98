"""The entropic risk measure as a decision functional (``entropic:θ``, θ > 0).

    φ_θ(X) = −(1/θ) · log E[exp(−θ·X)]
    weighted: φ_θ(X) = −(1/θ) · log( Σ_i w_i exp(−θ x_i) / Σ_i w_i )

computed with :func:`scipy.special.logsumexp` (no overflow for large θ·|x|).  It is the
certainty equivalent of an exponential utility with risk aversion θ: φ_θ ≤ E[X], φ_θ → E[X]
as θ → 0 and → min X as θ → ∞; for a normal X ~ N(μ, σ²), φ_θ = μ − θσ²/2.

Its influence function (what CVU's draw-level error and noise corrections use) is

    ψ(x) = (1 − exp(−θ·(x − φ))) / θ,

the derivative of φ along a point mass at x (E[exp(−θX)] = exp(−θφ)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import logsumexp

from belief.decision.functionals import Functional, Quantiles
from belief.errors import InputError

__all__ = ["Entropic"]


@dataclass(frozen=True)
class Entropic(Functional):
    """φ_θ(X) = −(1/θ)·log(Σ_i w_i exp(−θ x_i) / Σ_i w_i), θ > 0 (risk aversion)."""

    kind: ClassVar[str] = "entropic"
    syntax: ClassVar[str] = "entropic:θ"
    rule: ClassVar[str] = "θ > 0"

    param: float | None = None

    def check(self) -> None:
        p = self._finite_param()
        if not p > 0:
            raise InputError("functional", f"entropic risk aversion θ must satisfy θ > 0, "
                                           f"got {p}")

    def apply(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        theta = float(self.param)
        x = np.asarray(draws, dtype=float)
        if weights is None:
            return -(logsumexp(-theta * x, axis=-1) - np.log(x.shape[-1])) / theta
        w = np.broadcast_to(np.asarray(weights, dtype=float), x.shape)
        return -(logsumexp(-theta * x, axis=-1, b=w) - np.log(w.sum(axis=-1))) / theta

    def columns(self, draws: np.ndarray, weights: np.ndarray,
                order: np.ndarray | None = None) -> np.ndarray:
        """(J, C) from the (S, C) draws and (J, S) weights, without a (J, C, S) array:
        log Σ_i w_ji e^{a_ic} = m_c + log Σ_i w_ji e^{a_ic − m_c}, a = −θx,
        m_c = log Σ_i e^{a_ic} (every term ≤ 1: no overflow).  Where that sum underflows
        (weight only on draws more than ~745/θ above the column's minimum) the (j, c) pair
        is summed by :func:`scipy.special.logsumexp` with its own shift."""
        theta = float(self.param)
        x = np.asarray(draws, dtype=float)
        w = np.asarray(weights, dtype=float)
        a = -theta * x  # (S, C)
        shift = logsumexp(a, axis=0)  # (C,)
        with np.errstate(divide="ignore"):
            log_sum = np.log(w @ np.exp(a - shift)) + shift
        for j, c in zip(*np.nonzero(~np.isfinite(log_sum)), strict=True):
            log_sum[j, c] = logsumexp(a[:, c], b=w[j])
        return -(log_sum - np.log(w.sum(axis=-1))[:, None]) / theta

    def location_scale(self, loc: np.ndarray, scale: np.ndarray, z: np.ndarray) -> np.ndarray:
        """φ_θ(loc + scale·ε) = loc + h_c(scale), h_c(σ) = −(1/θ)·log mean_i exp(−θσ·ε_ic)
        over the N draws of column c of ``z``: φ_θ is translation-equivariant but not
        positively homogeneous (φ_θ(σε) = σ·φ_{θσ}(ε)), so the scale enters inside.

        h_c is evaluated exactly at each distinct scale of column c when there are at most
        :data:`_KNOTS` of them, else at :data:`_KNOTS` evenly spaced scales over their range
        and read off the cubic spline through them (h_c is smooth — an analytic function of
        σ —, so the spline's error is orders of magnitude below the Monte Carlo error of the
        regression it serves), which keeps the cost O(knots·N) instead of O(N²)."""
        from scipy.interpolate import CubicSpline

        theta = float(self.param)
        shape = np.broadcast_shapes(np.shape(loc), np.shape(scale))
        sc = np.broadcast_to(np.asarray(scale, dtype=float), shape)
        z = np.asarray(z, dtype=float)
        n = z.shape[0]
        shift = np.empty(shape)
        for c in range(shape[1]):
            s = sc[:, c]
            distinct = np.unique(s)
            exact = distinct.size <= _KNOTS
            knots = distinct if exact else np.linspace(distinct[0], distinct[-1], _KNOTS)
            h = np.empty(knots.size)
            for start in range(0, knots.size, 64):  # (64, N) at a time
                k = knots[start:start + 64]
                h[start:start + 64] = -(logsumexp(-theta * k[:, None] * z[None, :, c], axis=1)
                                        - np.log(n)) / theta
            shift[:, c] = h[np.searchsorted(knots, s)] if exact else CubicSpline(knots, h)(s)
        return loc + shift

    def influence(self, x: np.ndarray, phi: np.ndarray, quantiles: Quantiles) -> np.ndarray:
        theta = float(self.param)
        return -np.expm1(-theta * (x - phi)) / theta

    def noise_ratio(self, draws: np.ndarray) -> float:
        """2 · max_c sd(ψ(x_·c)) / sd(x_·c) over the columns of ``draws`` (S, C) under
        uniform weights, at least 1 and at most 10⁶ (ψ is not bounded by a constant multiple
        of x − φ, so the ratio is read from the draws; 2 makes it generous for reweighted
        draws)."""
        x = np.atleast_2d(np.asarray(draws, dtype=float).T).T  # (S, C)
        if x.shape[0] < 2:
            return 1.0
        phi = self.apply(x.T)  # (C,)
        sd_x = x.std(axis=0)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ratio = np.where(sd_x > 0,
                             self.influence(x, phi[None, :], lambda q: []).std(axis=0) / sd_x,
                             1.0)
        ratio = np.where(np.isfinite(ratio), ratio, _MAX_RATIO)
        return float(min(_MAX_RATIO, max(1.0, 2.0 * ratio.max(initial=1.0))))


_KNOTS = 257
"""Scales at which :meth:`Entropic.location_scale` evaluates h_c exactly (the rest by spline)."""

_MAX_RATIO = 1e6
"""The noise ratio's cap (where ψ's spread overflows: θ·(φ − min x) beyond ~700)."""
