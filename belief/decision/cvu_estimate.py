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
        (:func:`belief.decision.preposterior.draws_variance`).
    method : str
        ``psis``, ``psis+cv``, ``psis+cv+refit``, ``regression``, ``regression+ls``,
        ``no outcome`` or ``failed``.
    reason : str
        Why this estimator was used (or why the estimate failed).
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

    @classmethod
    def failed(cls, reason: str, **diagnostics) -> Estimate:
        """A CVU that could not be estimated."""
        return cls(np.nan, np.nan, "failed", reason, **diagnostics)
