"""The result of one candidate's CVU estimator, shared by the importance and regression ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Estimate"]


@dataclass
class Estimate:
    """E_Y[G0(s^{m,Y})] of one candidate, its errors and diagnostics.

    Attributes
    ----------
    expected_g0 : float
        E_Y[G0(s_{t+1}^{m,Y})] under the S draws (NaN: not estimable, see ``reason``).
    mcse : float
        Monte Carlo standard error from the simulated outcomes (given the draws).
    if_draws, if_noise : ndarray (S,), optional
        Influence of each draw on E_Y[G0] and the variance of its Monte Carlo noise
        (:func:`belief.decision.cvu.preposterior.draws_variance`).
    method : str
        ``psis``, ``psis+cv``, ``psis+cv+refit``, ``regression``, ``regression+ls``,
        ``no outcome`` or ``failed``.
    reason : str
        Why this estimator was used (or why the estimate failed).
    terms : ndarray, optional
        The per-outcome terms the Monte Carlo error comes from, for pairing two estimates on
        the same outcomes (:meth:`mcse_of_difference`): (J,) adjusted values of the PSIS
        estimator (mcse = sd/√J), or (R, S) influence values of the regression estimator
        (mcse² = Σ_i var_r / (R S²)).
    """

    expected_g0: float
    mcse: float
    method: str
    reason: str = ""
    if_draws: np.ndarray | None = None
    if_noise: np.ndarray | None = None
    n_outcomes: int = 0
    pareto_k: float = np.nan
    bad_share: float = np.nan
    n_refits: int = 0
    ess: float = np.nan
    cv_gain: float = np.nan
    extra: dict = field(default_factory=dict)
    terms: np.ndarray | None = None

    def mcse_of_difference(self, other: Estimate) -> float:
        """Monte Carlo error of ``self.expected_g0 − other.expected_g0`` when both were
        computed on the same simulated outcomes (common random numbers) by the same
        estimator: the error formula of the estimator applied to the difference of the
        per-outcome terms, and the errors of both noise-bias corrections (``extra
        ["correction_mcse"]``, not in the terms) in quadrature.  Without paired terms
        (different estimators or shapes), the unpaired √(mcse_a² + mcse_b²), which
        overstates it for positively correlated estimates."""
        a, b = self.terms, other.terms
        if a is None or b is None or a.shape != b.shape:
            return float(np.hypot(self.mcse, other.mcse))
        d = np.asarray(a, float) - np.asarray(b, float)
        if d.ndim == 1:
            paired = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.nan
        else:
            r, n_s = d.shape
            paired = float(np.sqrt(d.var(axis=0, ddof=1).sum() / (r * n_s**2)))
        corr = [float(e.extra.get("correction_mcse", 0.0)) for e in (self, other)]
        return float(np.sqrt(paired**2 + corr[0] ** 2 + corr[1] ** 2))

    @classmethod
    def failed(cls, reason: str, **diagnostics) -> Estimate:
        """A CVU that could not be estimated."""
        return cls(np.nan, np.nan, "failed", reason, **diagnostics)
