"""Execution-risk bounds and the safety gate M^safe = {m : UCB_{1−δ}[P_exec(unsafe | m)] ≤ α}.

Two estimators of the upper bound, picked per decision:

- ``clopper_pearson``: the exact one-sided Clopper–Pearson bound for k unsafe outcomes in n
  executions, UCB = Beta.ppf(1 − δ; k + 1, n − k) (= 1 when k = n; = 1 when n = 0).
- ``posterior``: the (1 − δ)-quantile of the posterior draws of p_unsafe (from the
  execution-risk model, carried in the belief as ``p_unsafe``).

Candidates that do not drive hardware pass deterministically with P_exec = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy import stats

from belief.candidates import CandidateSet
from belief.errors import InputError

__all__ = ["SafetyGate", "clopper_pearson_upper", "posterior_upper"]

METHODS = ("clopper_pearson", "posterior")


def _check_level(value: float, name: str) -> None:
    if isinstance(value, bool) or not np.isfinite(value) or not 0 < value < 1:
        raise InputError(name, f"{name} must satisfy 0 < {name} < 1, got {value!r}")


def clopper_pearson_upper(k: np.ndarray | int, n: np.ndarray | int,
                          delta: float = 0.05) -> np.ndarray:
    """Exact one-sided (1 − δ) Clopper–Pearson upper bound on a binomial proportion.

    UCB_{1−δ}(k, n) = Beta.ppf(1 − δ; k + 1, n − k) for k < n, and 1 when k = n (including
    n = 0).
    """
    _check_level(delta, "delta")
    k = np.asarray(k)
    n = np.asarray(n)
    if np.any(k < 0) or np.any(n < 0):
        raise InputError("safety_events", "counts must be >= 0")
    if np.any(k > n):
        raise InputError("safety_events", "unsafe count k exceeds executions n")
    kk, nn = np.broadcast_arrays(k.astype(float), n.astype(float))
    out = np.ones(kk.shape)
    ok = kk < nn
    out[ok] = stats.beta.ppf(1.0 - delta, kk[ok] + 1.0, nn[ok] - kk[ok])
    return out


def posterior_upper(p_unsafe: xr.DataArray, delta: float = 0.05,
                    dim: str = "sample") -> xr.DataArray:
    """(1 − δ)-quantile of posterior draws of p_unsafe over ``dim``."""
    _check_level(delta, "delta")
    return p_unsafe.quantile(1.0 - delta, dim=dim).drop_vars("quantile")


@dataclass(frozen=True)
class SafetyGate:
    """The execution-safety gate.

    Parameters
    ----------
    alpha_exec : float
        Ceiling on the bound of P_exec(unsafe | m), 0 < α < 1.
    delta : float
        One-sided confidence/credibility level is 1 − δ, 0 < δ < 1.
    method : {"clopper_pearson", "posterior"}
        Which bound decides; both are reported when available.
    """

    alpha_exec: float = 0.1
    delta: float = 0.05
    method: str = "clopper_pearson"

    def __post_init__(self) -> None:
        _check_level(self.alpha_exec, "alpha_exec")
        _check_level(self.delta, "delta")
        if self.method not in METHODS:
            raise InputError("safety gate", f"method must be one of {list(METHODS)}, got "
                                            f"{self.method!r}")

    def evaluate(self, candidates: CandidateSet, executions: xr.DataArray,
                 unsafe: xr.DataArray, p_unsafe: xr.DataArray | None = None) -> xr.Dataset:
        """Bounds and pass/fail per candidate.

        Parameters
        ----------
        executions, unsafe : DataArray over ``candidate``
            Counts of executions and unsafe outcomes so far.
        p_unsafe : DataArray over (``sample``, ``candidate``), optional
            Posterior draws from the execution-risk model (needed for ``method="posterior"``).

        Returns
        -------
        Dataset over ``candidate`` with ``ucb_clopper_pearson``, ``ucb_posterior`` (NaN when no
        model), ``p_exec_bound`` (the one that decides), ``safe`` and ``safe_reason``.
        """
        ids = candidates.ids
        hw = np.array([c.drives_hardware for c in candidates])
        k = unsafe.sel(candidate=ids)
        n = executions.sel(candidate=ids)
        cp = np.where(hw, clopper_pearson_upper(k.values, n.values, self.delta), 0.0)
        if p_unsafe is not None:
            post = posterior_upper(p_unsafe, self.delta).reindex(candidate=ids).values
            post = np.where(hw, post, 0.0)
        else:
            post = np.full(len(ids), np.nan)
        if self.method == "posterior" and p_unsafe is None:
            raise InputError("safety gate", "method='posterior' needs posterior draws of "
                                            "p_unsafe (fit the execution-risk model)")
        bound = cp if self.method == "clopper_pearson" else post
        safe = bound <= self.alpha_exec
        label = "CP" if self.method == "clopper_pearson" else "posterior"
        reasons = []
        for i, _c in enumerate(candidates):
            if not hw[i]:
                reasons.append("no hardware: P_exec = 0")
            elif safe[i]:
                reasons.append(f"{label} UCB {bound[i]:.3f} <= α_exec {self.alpha_exec:g} "
                               f"({int(k.values[i])}/{int(n.values[i])} unsafe)")
            else:
                reasons.append(f"unsafe: {label} UCB {bound[i]:.3f} > α_exec "
                               f"{self.alpha_exec:g} ({int(k.values[i])}/{int(n.values[i])} "
                               "unsafe)")
        return xr.Dataset(
            {"ucb_clopper_pearson": ("candidate", cp), "ucb_posterior": ("candidate", post),
             "p_exec_bound": ("candidate", bound), "safe": ("candidate", safe),
             "safe_reason": ("candidate", np.array(reasons, dtype=object))},
            coords={"candidate": ids},
            attrs={"alpha_exec": self.alpha_exec, "delta": self.delta, "method": self.method})
