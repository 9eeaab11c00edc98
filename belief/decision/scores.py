"""Scores of the framework, as array functions over candidates (the last axis).

- C_λ(m) = λᵀ ΔC(m); with uncertain costs (draws of ΔC) C_λ(m) = E[λᵀ ΔC(m)]
- U0(m)  = φ[ΔJ(m)] − C_λ(m)                       (performance net utility)
- MV(m)  = φ[ΔJ(m)] / C_λ(m)                       (efficiency reading; NaN with a reason when
  C_λ = 0, and uninformative for diagnosis and model-update candidates, whose immediate gain
  is 0 by definition)
- Q(m)   = U0(m) + β · CVU(m), with CVU := 0 at the horizon (Q = U0)
- value against stopping V(m) = Q(m) + β · G0(s^∅) = U0(m) + β · E_Y[G0(s^{m,Y})]
- G0(s)  = max(0, max_{m ∈ M^feasible(s)} U0(m | s))   (0 = the option to stop)
"""

from __future__ import annotations

import numpy as np

__all__ = ["expected_cost", "expected_weighted_cost", "g0", "marginal_value", "net_utility",
           "q_score", "value_vs_stop", "weighted_cost"]


def weighted_cost(costs: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """C_λ = Σ_r λ_r ΔC_r: costs (C, R) and λ (R,) → (C,)."""
    return np.asarray(costs, dtype=float) @ np.asarray(lam, dtype=float)


def expected_cost(cost_draws: np.ndarray) -> np.ndarray:
    """E[ΔC] = (1/S) Σ_s ΔC^(s): draws (S, C, R) → (C, R); a cell whose draws are all equal
    (a known or zero cost) is that value exactly, not its floating-point mean."""
    draws = np.asarray(cost_draws, dtype=float)
    return np.ascontiguousarray(np.where((draws == draws[:1]).all(axis=0), draws[0],
                                         draws.mean(axis=0)))


def expected_weighted_cost(cost_draws: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """C_λ = E[λᵀ ΔC] = (1/S) Σ_s Σ_r λ_r ΔC_r^(s): draws (S, C, R) and λ (R,) → (C,).

    How the functionals treat cost: φ (mean, lcb, cvar) applies to the gain ΔJ only; the cost
    always enters U0 = φ[ΔJ] − E[λᵀΔC] through its expectation, for every φ.  Cost risk is
    handled by the chance constraint on the budget (:class:`belief.decision.feasibility.
    ChanceConstraint`), not by the functional: an lcb or cvar of the net λ-weighted utility
    would depend on the joint law of gain and cost, which the models do not relate (the cost
    model is independent of the gains), and would charge a cost's spread a second time on top
    of the budget's chance constraint.  With φ = mean the two readings coincide (linearity).
    With known costs (every draw equal) this is :func:`weighted_cost`.
    """
    return np.asarray(cost_draws, dtype=float).mean(axis=0) @ np.asarray(lam, dtype=float)


def net_utility(phi_gain: np.ndarray, c_lambda: np.ndarray) -> np.ndarray:
    """U0 = φ(ΔJ) − C_λ."""
    return np.asarray(phi_gain, dtype=float) - np.asarray(c_lambda, dtype=float)


def marginal_value(phi_gain: np.ndarray, c_lambda: np.ndarray,
                   changes_policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MV = φ(ΔJ) / C_λ and a reason per candidate where it is not defined.

    Returns
    -------
    mv, reason : arrays (C,)
        ``mv`` is NaN where C_λ = 0 ("undefined") or the candidate does not change the policy
        ("uninformative").
    """
    cl = np.asarray(c_lambda, dtype=float)
    adapt = np.asarray(changes_policy).astype(bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        mv = np.where(adapt & (cl > 0), np.asarray(phi_gain) / np.where(cl > 0, cl, 1.0), np.nan)
    reason = np.where(~adapt, "uninformative: immediate gain is 0 by definition (value via CVU)",
                      np.where(cl > 0, "", "undefined: C_λ = 0"))
    return mv, reason.astype(object)


def q_score(u0: np.ndarray, cvu: np.ndarray, beta: float) -> np.ndarray:
    """Q = U0 + β · CVU."""
    return np.asarray(u0, dtype=float) + beta * np.asarray(cvu, dtype=float)


def value_vs_stop(q: np.ndarray, g0_null: float, beta: float) -> np.ndarray:
    """V = Q + β · G0(s^∅) = U0 + β · E_Y[G0(s^{m,Y})]: doing m now and continuing, against
    the value of stopping, 0."""
    return np.asarray(q, dtype=float) + beta * float(g0_null)


def g0(u0: np.ndarray, feasible: np.ndarray, axis: int = -1) -> np.ndarray:
    """G0 = max(0, max over feasible m of U0(m)), reducing ``axis`` (the candidate axis)."""
    masked = np.where(feasible, u0, -np.inf)
    return np.maximum(0.0, masked.max(axis=axis))
