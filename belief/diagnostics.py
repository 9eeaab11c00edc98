"""Convergence checks of a fit (ArviZ): R-hat, bulk/tail ESS and divergences.

A fit that fails any threshold is *unreliable*; the flag and its reason travel with the belief
into every decision it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import arviz as az
import numpy as np
import xarray as xr

__all__ = ["Convergence", "check_convergence"]


@dataclass(frozen=True)
class Convergence:
    """Result of :func:`check_convergence` (worst values over the checked variables)."""

    rhat_max: float
    ess_bulk_min: float
    ess_tail_min: float
    divergences: int
    reliable: bool
    reason: str

    def as_attrs(self, prefix: str = "") -> dict[str, float | int | str]:
        """Flat attributes for netCDF (booleans stored as 0/1)."""
        return {f"{prefix}rhat_max": self.rhat_max, f"{prefix}ess_bulk_min": self.ess_bulk_min,
                f"{prefix}ess_tail_min": self.ess_tail_min,
                f"{prefix}divergences": self.divergences,
                f"{prefix}reliable": int(self.reliable), f"{prefix}reason": self.reason}


def check_convergence(idata: xr.DataTree, var_names: list[str] | None = None, *,
                      rhat_max: float = 1.01, ess_min: float = 400.0,
                      max_divergences: int = 0) -> Convergence:
    """Check R-hat (rank-normalised), bulk and tail ESS, and divergent transitions.

    Thresholds follow Vehtari et al. (2021): R-hat ≤ 1.01, ESS ≥ 400 (scale ``ess_min`` down
    for short test runs), and no divergences.
    """
    rhat = az.rhat(idata, var_names=var_names)
    ess_b = az.ess(idata, var_names=var_names, method="bulk")
    ess_t = az.ess(idata, var_names=var_names, method="tail")

    def worst(ds: xr.Dataset, fn) -> float:
        vals = [fn(v.values) for v in ds.data_vars.values() if v.size]
        vals = [v for v in vals if np.isfinite(v)]
        return float(fn(np.array(vals))) if vals else float("nan")

    r = worst(rhat.to_dataset() if isinstance(rhat, xr.DataTree) else rhat, np.nanmax)
    eb = worst(ess_b.to_dataset() if isinstance(ess_b, xr.DataTree) else ess_b, np.nanmin)
    et = worst(ess_t.to_dataset() if isinstance(ess_t, xr.DataTree) else ess_t, np.nanmin)
    div = 0
    if "sample_stats" in idata.children and "diverging" in idata["sample_stats"].data_vars:
        div = int(idata["sample_stats"]["diverging"].sum())
    problems = []
    if not r <= rhat_max:
        problems.append(f"R-hat {r:.3f} > {rhat_max}")
    if not eb >= ess_min:
        problems.append(f"bulk ESS {eb:.0f} < {ess_min:.0f}")
    if not et >= ess_min:
        problems.append(f"tail ESS {et:.0f} < {ess_min:.0f}")
    if div > max_divergences:
        problems.append(f"{div} divergent transitions")
    return Convergence(r, eb, et, div, not problems, "; ".join(problems) or "converged")
