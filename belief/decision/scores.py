"""Scores of the framework, as array functions over candidates.

- C_λ(m) = λᵀ ΔC(m)
- U0(m)  = φ[ΔJ(m)] − C_λ(m)                       (performance net utility)
- MV(m)  = φ[ΔJ(m)] / C_λ(m)                       (efficiency reading; NaN with a reason when
  C_λ = 0, and uninformative for diagnosis and model-update candidates, whose immediate gain
  is 0 by definition)
- Q(m)   = U0(m) + β · CVU(m), with CVU := 0 at the horizon (Q = U0)
- G0(s)  = max(0, max_{m ∈ M^feasible(s)} U0(m | s))   (0 = the option to stop)
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["check_beta", "g0", "marginal_value", "net_utility", "q_score", "weighted_cost"]


def weighted_cost(costs: xr.DataArray, lam: xr.DataArray) -> xr.DataArray:
    """C_λ = Σ_r λ_r ΔC_r over the ``resource`` dim."""
    return (costs * lam).sum("resource").rename("c_lambda")


def net_utility(phi_gain: xr.DataArray, c_lambda: xr.DataArray) -> xr.DataArray:
    """U0 = φ(ΔJ) − C_λ."""
    return (phi_gain - c_lambda).rename("u0")


def marginal_value(phi_gain: xr.DataArray, c_lambda: xr.DataArray,
                   changes_policy: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """MV = φ(ΔJ) / C_λ and a reason per candidate where it is not defined.

    Returns
    -------
    mv, reason : DataArray
        ``mv`` is NaN where C_λ = 0 ("undefined") or the candidate does not change the policy
        ("uninformative").
    """
    cl = c_lambda.values
    adapt = changes_policy.values.astype(bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        mv = np.where(adapt & (cl > 0), phi_gain.values / np.where(cl > 0, cl, 1.0), np.nan)
    reason = np.where(~adapt, "uninformative: immediate gain is 0 by definition (value via CVU)",
                      np.where(cl > 0, "", "undefined: C_λ = 0"))
    coords = {"candidate": phi_gain["candidate"].values}
    return (xr.DataArray(mv, dims="candidate", coords=coords, name="mv"),
            xr.DataArray(reason.astype(object), dims="candidate", coords=coords,
                         name="mv_reason"))


def check_beta(beta: float) -> float:
    """β must be a finite number ≥ 0."""
    if isinstance(beta, bool) or not isinstance(beta, int | float | np.number) \
            or not np.isfinite(beta) or beta < 0:
        raise InputError("beta", f"β must be a finite number >= 0, got {beta!r}")
    return float(beta)


def q_score(u0: xr.DataArray, cvu: xr.DataArray, beta: float) -> xr.DataArray:
    """Q = U0 + β · CVU."""
    return (u0 + check_beta(beta) * cvu).rename("q")


def g0(u0: np.ndarray, feasible: np.ndarray, axis: int = -1) -> np.ndarray:
    """G0 = max(0, max over feasible m of U0(m)), reducing ``axis`` (the candidate axis)."""
    masked = np.where(feasible, u0, -np.inf)
    return np.maximum(0.0, masked.max(axis=axis))
