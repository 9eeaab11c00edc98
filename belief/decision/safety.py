"""Execution-risk bounds and the safety gate M^safe = {m : UCB_{1−δ}[P_exec(unsafe | m)] ≤ α}.

Two estimators of the upper bound, picked per decision:

- ``clopper_pearson``: the exact one-sided Clopper–Pearson bound for k unsafe outcomes in n
  executions, UCB = Beta.ppf(1 − δ; k + 1, n − k) (= 1 when k = n; = 1 when n = 0).
  Its companions, for reports: the one-sided lower bound :func:`clopper_pearson_lower`
  (Beta.ppf(δ; k, n − k + 1), 0 when k = 0) and the two-sided exact interval
  :func:`clopper_pearson_interval` (``scipy.stats.binomtest(k, n).proportion_ci``).
- ``posterior``: the (1 − δ)-quantile of the posterior draws of p_unsafe (from the
  execution-risk model, carried in the belief as ``p_unsafe``).

Candidates that do not drive hardware pass deterministically with P_exec = 0.

The deployment chance constraint P_deploy(unsafe | π_T) ≤ α_deploy is checked at the stop by
:func:`deployment_check` from *deployment* evidence on the final policy (table
``deployment_safety``), with the same two estimators: Clopper–Pearson, or the (1 − δ)-quantile
of the conjugate posterior Beta(a + k, b + n − k) (default Beta(1, 1) prior).  Execution events
(``safety_events``, per candidate) and deployment events (per policy) are never mixed, even
when α_exec = α_deploy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import betaincinv  # Beta.ppf(q; a, b), without importing scipy.stats

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.validate import is_number

__all__ = ["SafetyGate", "clopper_pearson_interval", "clopper_pearson_lower",
           "clopper_pearson_upper", "deployment_check", "posterior_upper"]

METHODS = ("clopper_pearson", "posterior")


def _check_level(value: float, name: str) -> None:
    if not (is_number(value) and np.isfinite(value) and 0 < value < 1):
        raise InputError(name, f"{name} must satisfy 0 < {name} < 1, got {value!r}")


def _first_bad(mask: np.ndarray, rows: list | None) -> int | str | None:
    """Label of the first offending entry: ``rows[i]`` when given, else i (None for scalars)."""
    if mask.ndim == 0:
        return None
    i = int(np.flatnonzero(mask.ravel())[0])
    return rows[i] if rows is not None else i


def clopper_pearson_upper(k: np.ndarray | int, n: np.ndarray | int,
                          delta: float = 0.05, *, table: str = "safety_events",
                          rows: list | None = None) -> np.ndarray:
    """Exact one-sided (1 − δ) Clopper–Pearson upper bound on a binomial proportion.

    UCB_{1−δ}(k, n) = Beta.ppf(1 − δ; k + 1, n − k) for k < n, and 1 when k = n (including
    n = 0).  Equal to the upper end of the two-sided exact interval at level 1 − 2δ.

    Parameters
    ----------
    k, n : int or array
        Unsafe outcomes and executions (broadcast together); integers with 0 ≤ k ≤ n.
    delta : float
        0 < δ < 1.
    table, rows : str, list, optional
        Names used in the error message (table, and a label per flattened entry).

    Raises
    ------
    InputError
        For negative or non-integer counts, k > n, or δ outside (0, 1).
    """
    _check_level(delta, "delta")
    kk, nn = _counts(k, n, table, rows)
    out = np.ones(kk.shape)
    ok = kk < nn
    out[ok] = betaincinv(kk[ok] + 1.0, nn[ok] - kk[ok], 1.0 - delta)
    return out


def _counts(k: np.ndarray | int, n: np.ndarray | int, table: str,
            rows: list | None) -> tuple[np.ndarray, np.ndarray]:
    """(k, n) broadcast as floats, refusing non-integer or negative counts and k > n."""
    kk, nn = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    for name, arr in (("unsafe count k", kk), ("count n", nn)):
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if np.any(bad):
            raise InputError(table, f"{name} must be an integer", row=_first_bad(bad, rows))
    bad = (kk < 0) | (nn < 0)
    if np.any(bad):
        raise InputError(table, "counts must be >= 0", row=_first_bad(bad, rows))
    bad = kk > nn
    if np.any(bad):
        raise InputError(table, "unsafe count k exceeds n (executions or trials)",
                         row=_first_bad(bad, rows))
    return kk, nn


def clopper_pearson_lower(k: np.ndarray | int, n: np.ndarray | int,
                          delta: float = 0.05, *, table: str = "safety_events",
                          rows: list | None = None) -> np.ndarray:
    """Exact one-sided (1 − δ) Clopper–Pearson lower bound on a binomial proportion.

    LCB_{1−δ}(k, n) = Beta.ppf(δ; k, n − k + 1) for k > 0, and 0 when k = 0 (including
    n = 0).  Equal to the lower end of the two-sided exact interval at level 1 − 2δ; the
    mirror image of :func:`clopper_pearson_upper`: LCB(k, n) = 1 − UCB(n − k, n).
    """
    _check_level(delta, "delta")
    kk, nn = _counts(k, n, table, rows)
    out = np.zeros(kk.shape)
    ok = kk > 0
    out[ok] = betaincinv(kk[ok], nn[ok] - kk[ok] + 1.0, delta)
    return out


def clopper_pearson_interval(k: np.ndarray | int, n: np.ndarray | int,
                             level: float = 0.95, *, table: str = "safety_events",
                             rows: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided Clopper–Pearson interval at confidence ``level`` (0 < level < 1).

    [Beta.ppf(α/2; k, n − k + 1), Beta.ppf(1 − α/2; k + 1, n − k)] with α = 1 − level (0 for
    k = 0, 1 for k = n), computed by ``scipy.stats.binomtest(k, n).proportion_ci(level,
    method="exact")``; with no trials (n = 0) the interval is [0, 1].

    Returns
    -------
    (low, high) : arrays of the broadcast shape of k and n
    """
    from scipy import stats  # reports only: the gate needs no scipy.stats

    _check_level(level, "level")
    kk, nn = _counts(k, n, table, rows)
    low, high = np.zeros(kk.shape), np.ones(kk.shape)
    for idx in np.ndindex(kk.shape):
        if nn[idx] > 0:
            ci = stats.binomtest(int(kk[idx]), int(nn[idx])).proportion_ci(
                confidence_level=level, method="exact")
            low[idx], high[idx] = ci.low, ci.high
    return low, high


def posterior_upper(p_unsafe: xr.DataArray, delta: float = 0.05,
                    dim: str = "sample") -> xr.DataArray:
    """(1 − δ)-quantile of posterior draws of p_unsafe over ``dim``: the smallest draw whose
    empirical CDF reaches 1 − δ (``method="inverted_cdf"``), the quantile definition of
    :func:`belief.decision.functionals.lcb` — the one CVU's gate of s_{t+1}
    (:func:`belief.decision.cvu_safety.next_gate`) applies to reweighted draws, so a gate
    cannot change between s_t and s_{t+1} by the definition alone."""
    _check_level(delta, "delta")
    return p_unsafe.quantile(1.0 - delta, dim=dim, method="inverted_cdf").drop_vars("quantile")


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
        cp = np.where(hw, clopper_pearson_upper(k.values, n.values, self.delta, rows=ids), 0.0)
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
            elif int(n.values[i]) == 0 and not safe[i]:
                reasons.append(f"unsafe: no execution-safety data (0/0 unsafe): {label} UCB "
                               f"{bound[i]:.3f} > α_exec {self.alpha_exec:g}; give its bench "
                               "runs as safety_events")
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


def deployment_check(evidence: Evidence | tuple[int, int], policy: str,
                     alpha_deploy: float = 0.05, delta: float = 0.05,
                     method: str = "clopper_pearson",
                     prior: tuple[float, float] = (1.0, 1.0)) -> xr.Dataset:
    """The deployment chance constraint P_deploy(unsafe | π) ≤ α_deploy, checked at the stop.

    With k unsafe outcomes in n deployment trials of ``policy``:

    - Clopper–Pearson: UCB = Beta.ppf(1 − δ; k + 1, n − k) (1 when k = n, including n = 0);
    - posterior: UCB = Beta.ppf(1 − δ; a + k, b + n − k), the (1 − δ)-quantile of the
      conjugate posterior under a Beta(a, b) prior (``prior``; default Beta(1, 1) = uniform).

    The constraint passes when the deciding bound (``method``) is ≤ α_deploy.  Only deployment
    events are used (``Evidence.deployment``, never the execution-safety events).

    Parameters
    ----------
    evidence : Evidence or (trials, unsafe)
        Deployment evidence; rows of ``policy`` are summed.
    policy : str
        The final policy π_T.
    alpha_deploy, delta : float
        0 < α_deploy < 1, 0 < δ < 1.
    method : {"clopper_pearson", "posterior"}
    prior : (float, float)
        Beta(a, b) prior of the posterior estimator, a, b > 0.

    Returns
    -------
    Dataset
        Scalars ``trials``, ``unsafe``, ``ucb_clopper_pearson``, ``ucb_posterior``,
        ``p_deploy_bound`` (the deciding one) and ``passed``; ``attrs`` repeat them (JSON-ready)
        with ``policy``, ``alpha_deploy``, ``delta``, ``method``, ``prior`` and a
        human-readable ``reason``.
    """
    _check_level(alpha_deploy, "alpha_deploy")
    _check_level(delta, "delta")
    if method not in METHODS:
        raise InputError("deployment check", f"method must be one of {list(METHODS)}, got "
                                             f"{method!r}")
    a, b = prior
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)
               and v > 0 for v in (a, b)):
        raise InputError("deployment check", f"prior must be two numbers a, b > 0, got {prior!r}")
    if isinstance(evidence, Evidence):
        n, k = evidence.deployment_counts(policy)
    else:
        n, k = evidence
    cp = float(clopper_pearson_upper(k, n, delta, table="deployment_safety", rows=None))
    n, k = int(n), int(k)
    post = float(betaincinv(a + k, b + n - k, 1.0 - delta))
    bound = cp if method == "clopper_pearson" else post
    passed = bool(bound <= alpha_deploy)
    label = "CP" if method == "clopper_pearson" else f"posterior (Beta({a:g}, {b:g}) prior)"
    level = f"UCB_{1 - delta:g}"
    verdict, op = ("pass", "<=") if passed else ("fail", ">")
    if n == 0:  # CP gives 1; a posterior bound can pass on its prior alone
        reason = (f"{verdict}: no deployment trials of policy {policy!r} ({label} {level} = "
                  f"{bound:.3f} {op} α_deploy {alpha_deploy:g}"
                  f"{', from the prior alone' if passed else ''})")
    else:
        reason = (f"{verdict}: {label} {level} {bound:.4f} {op} α_deploy {alpha_deploy:g} "
                  f"({k}/{n} unsafe deployment trials of policy {policy!r})")
    values = {"trials": n, "unsafe": k, "ucb_clopper_pearson": cp, "ucb_posterior": post,
              "p_deploy_bound": bound, "passed": passed}
    ds = xr.Dataset({name: ((), v) for name, v in values.items()})
    ds.attrs.update({"event": "deployment", "policy": str(policy),
                     "alpha_deploy": float(alpha_deploy), "delta": float(delta),
                     "method": method, "prior": f"Beta({a:g}, {b:g})", "reason": reason,
                     **{name: (int(v) if isinstance(v, bool) else v)
                        for name, v in values.items()}})
    return ds
