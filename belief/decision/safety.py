"""Execution-risk bounds and the safety gate M^safe = {m : UCB_{1−δ}[P_exec(unsafe | m)] ≤ α}.

Three upper bounds, picked per decision (``SafetyGate.method``):

- ``anytime`` (the default): a confidence sequence, valid over every look.  A campaign looks
  at the same candidate's accumulating counts after every step and opens its gate the first
  time the bound dips below α_exec: a one-look bound, read repeatedly, is optional stopping
  (the one-look Clopper–Pearson gate opens a candidate whose P_exec is exactly α_exec at some
  look of 50 with probability ≈ 0.2, not δ; ``benchmarks/bench_gate.py``).
  :func:`anytime_upper` inverts a one-sided Beta-mixture martingale, so that
  Pr(∃ n : UCB_n < p) ≤ δ for every p and every look schedule, data-dependent ones included.
  Its guarantee: "anytime, over every look".
- ``clopper_pearson``: the exact one-sided Clopper–Pearson bound for k unsafe outcomes in n
  executions, UCB = Beta.ppf(1 − δ; k + 1, n − k) (= 1 when k = n; = 1 when n = 0).
  Its companions, for reports: the one-sided lower bound :func:`clopper_pearson_lower`
  (Beta.ppf(δ; k, n − k + 1), 0 when k = 0) and the two-sided exact interval
  :func:`clopper_pearson_interval` (``scipy.stats.binomtest(k, n).proportion_ci``).
  Its guarantee: "one look" (coverage 1 − δ at a sample size fixed in advance).
- ``posterior``: the (1 − δ)-quantile of the posterior draws of p_unsafe (from the
  execution-risk model, carried in the belief as ``p_unsafe``): a Bayesian *credible* bound
  (Pr(p ≤ UCB | data) = 1 − δ under the model's prior), not a frequentist guarantee.

:data:`BOUNDS` names each bound and its guarantee for tables and reports.  For comparison
only, :func:`clopper_pearson_spending_upper` is Clopper–Pearson with an α-spending sequence
over sample sizes (valid over every look, far more conservative than the mixture).

Candidates that do not drive hardware pass deterministically with P_exec = 0.

The deployment chance constraint P_deploy(unsafe | π_T) ≤ α_deploy is checked at the stop by
:func:`deployment_check` from *deployment* evidence on the final policy (table
``deployment_safety``), once: one look, so the one-look Clopper–Pearson bound keeps its
guarantee there and stays the deployment check's bound (an ``anytime`` gate checks deployment
with Clopper–Pearson), or the (1 − δ)-quantile of the conjugate posterior
Beta(a + k, b + n − k) (default Beta(1, 1) prior).  Execution events
(``safety_events``, per candidate) and deployment events (per policy) are never mixed, even
when α_exec = α_deploy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.optimize import elementwise
from scipy.special import betainc, betaincinv, betaln  # no scipy.stats import needed

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.validate import is_number

__all__ = ["ANYTIME_MIXTURE", "BOUNDS", "METHODS", "SafetyGate", "anytime_upper",
           "clopper_pearson_interval", "clopper_pearson_lower",
           "clopper_pearson_spending_upper", "clopper_pearson_upper", "deployment_check",
           "deployment_method", "mixture_log_martingale", "posterior_upper"]

METHODS = ("anytime", "clopper_pearson", "posterior")
"""The gate's bounds, by name (the ``--gate`` flag of every command that decides)."""

ANYTIME_MIXTURE = (1.0, 9.0)
"""(a, b) of the Beta mixture of :func:`anytime_upper`: mean 0.1, the default α_exec.  Fixed
here, before any data (the guarantee holds for any fixed choice); a change of it changes what
an ``anytime`` gate decides.  Chosen on the gate's power (``benchmarks/bench_gate.py``, see
:func:`anytime_upper`)."""

BOUNDS: dict[str, tuple[str, str]] = {
    "anytime": ("anytime UCB", "frequentist, anytime: over every look"),
    "clopper_pearson": ("CP UCB", "frequentist, one look"),
    "posterior": ("posterior credible UCB", "Bayesian credible bound, not frequentist"),
}
"""method → (short label of the bound, its guarantee), as tables and reports state them."""


def deployment_method(gate_method: str) -> str:
    """The deployment check's bound for a gate's method: ``posterior`` stays posterior; the
    frequentist gates check deployment with the one-look Clopper–Pearson bound (the check is
    made once, at the stop)."""
    return "posterior" if gate_method == "posterior" else "clopper_pearson"


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


def mixture_log_martingale(p0: np.ndarray | float, k: np.ndarray | float,
                           n: np.ndarray | float, mixture: tuple[float, float] = ANYTIME_MIXTURE,
                           *, one_sided: bool = True) -> np.ndarray:
    """log M_n(p0) of the Beta-mixture martingale of :func:`anytime_upper` (broadcast).

    Two-sided: log M_n(p0) = log B(a + k, b + n − k) − log B(a, b) − k log p0
    − (n − k) log(1 − p0).  One-sided (the mixture truncated to p < p0): plus
    log I_{p0}(a + k, b + n − k) − log I_{p0}(a, b), I the regularised incomplete beta function
    (``scipy.special.betainc``).  −inf where I underflows (p0 far below the counts' rate: no
    evidence against p0 there).
    """
    a, b = mixture
    p0 = np.asarray(p0, dtype=float)
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (betaln(a + k, b + n - k) - betaln(a, b) - k * np.log(p0)
               - (n - k) * np.log1p(-p0))
        if one_sided:
            out = out + np.log(betainc(a + k, b + n - k, p0)) - np.log(betainc(a, b, p0))
    return out


def anytime_upper(k: np.ndarray | int, n: np.ndarray | int, delta: float = 0.05, *,
                  mixture: tuple[float, float] = ANYTIME_MIXTURE, one_sided: bool = True,
                  table: str = "safety_events", rows: list | None = None) -> np.ndarray:
    """Anytime-valid (1 − δ) upper confidence bound on a binomial proportion: a confidence
    sequence, valid simultaneously over every look.

    For i.i.d. Bernoulli(p) outcomes with k successes in n and a mixing law π fixed before
    the data,

        M_n(p0) = ∫ (p/p0)^k ((1 − p)/(1 − p0))^{n−k} dπ(p)

    is a nonnegative martingale with M_0 = 1 under p = p0 (and a supermartingale under
    p > p0 when π lies below p0), so by Ville's inequality Pr(∃ n : M_n(p) ≥ 1/δ) ≤ δ, and

        UCB_n = sup{p0 ≥ k/n : M_n(p0) < 1/δ}

    satisfies Pr(∃ n : UCB_n < p) ≤ δ for every p, whatever the looks (Robbins; Howard et al.
    2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences").  With π =
    Beta(a, b), M_n(p0) = [B(a + k, b + n − k) / B(a, b)] / [p0^k (1 − p0)^{n−k}]
    (``one_sided=False``).  The default ``one_sided=True`` mixes only over the alternatives
    below p0 — π = Beta(a, b) truncated to [0, p0] — which is what an *upper* bound needs:

        M⁻_n(p0) = [B(a + k, b + n − k) I_{p0}(a + k, b + n − k)]
                   / [B(a, b) I_{p0}(a, b) p0^k (1 − p0)^{n−k}].

    It spends none of δ on the lower side, so it is tighter: with looks of 10 executions,
    α_exec = 0.1, δ = 0.05, the gate opens for P_exec = 0.025 after a median 70 executions
    against 90 two-sided with the same Beta(1, 9), and the truncation keeps the mixing law on
    the alternatives that matter for every p0 (nearly flat on [0, p0] for small p0).  M⁻_n(p0)
    is below 1 for p0 ≤ k/n and was checked increasing in p0 above k/n (for n ≤ 1000 and the
    mixtures tried), so the bound is the root of log M⁻_n(p0) = log(1/δ) on [k/n, 1), found
    for every entry at once by ``scipy.optimize.elementwise.find_root`` (Chandrupatla's
    bracketing method, the vectorised counterpart of ``brentq``).  UCB = 1 when n = 0, when
    k = n, and whenever M_n(p0) < 1/δ up to p0 = 1; it is ≥ k/n and increasing in k.

    The mixture ``(a, b)`` (default :data:`ANYTIME_MIXTURE` = Beta(1, 9), mean 0.1 = the default
    α_exec) only moves power, never validity: it was chosen among Beta(1, 1), Beta(½, ½),
    Beta(1, 4), Beta(1, 9), Beta(½, 4½), Beta(1, 19), Beta(2, 38) for the median executions
    before the gate opens at P_exec = α_exec/4 and α_exec/2 (``benchmarks/bench_gate.py``).

    Parameters
    ----------
    k, n : int or array
        Unsafe outcomes and executions (broadcast together); integers with 0 ≤ k ≤ n.
    delta : float
        0 < δ < 1.
    mixture : (float, float)
        a, b > 0 of the Beta mixing law.
    one_sided : bool
        Truncate the mixture to p < p0 (default) or mix over all p (two-sided).
    table, rows : str, list, optional
        Names used in the error message.

    Raises
    ------
    InputError
        For negative or non-integer counts, k > n, δ outside (0, 1) or a mixture that is not
        two positive numbers.
    """
    _check_level(delta, "delta")
    a, b = mixture
    if not all(is_number(v) and np.isfinite(v) and v > 0 for v in (a, b)):
        raise InputError("mixture", f"must be two numbers a, b > 0, got {mixture!r}")
    kk, nn = _counts(k, n, table, rows)
    out = np.ones(kk.shape)
    live = (nn > 0) & (kk < nn)
    if live.any():
        out[live] = _anytime_root(kk[live], nn[live], delta, (a, b), one_sided)
    return out


def _anytime_root(k1: np.ndarray, n1: np.ndarray, delta: float, mixture: tuple[float, float],
                  one_sided: bool) -> np.ndarray:
    """:func:`anytime_upper` for 0 ≤ k < n: the root of log M_n(p0) = log(1/δ) on [k/n, 1),
    1 where M_n stays below 1/δ up to p0 = 1."""
    threshold = np.log(1.0 / delta)
    top = np.nextafter(1.0, 0.0)

    def excess(p0, kk, nn):  # log M(p0) − log(1/δ), finite for the root finder
        v = mixture_log_martingale(p0, kk, nn, mixture, one_sided=one_sided) - threshold
        return np.clip(np.nan_to_num(v, nan=-1e300), -1e300, 1e300)

    high = np.full(k1.shape, top)
    closed = excess(high, k1, n1) > 0  # M reaches 1/δ below p0 = 1: a root below 1
    ucb = np.ones(k1.shape)
    if closed.any():
        low = np.maximum(k1[closed] / n1[closed], np.finfo(float).tiny)
        res = elementwise.find_root(excess, (low, high[closed]),
                                    args=(k1[closed], n1[closed]),
                                    tolerances={"xatol": 1e-12, "xrtol": 1e-12})
        ucb[closed] = np.where(res.success, res.x, np.maximum(res.bracket[1], res.x))
    return ucb


def clopper_pearson_spending_upper(k: np.ndarray | int, n: np.ndarray | int,
                                   delta: float = 0.05, *, table: str = "safety_events",
                                   rows: list | None = None) -> np.ndarray:
    """Clopper–Pearson with an α-spending sequence over sample sizes, for comparison.

    UCB_n = Clopper–Pearson UCB_{1−δ_n}(k, n) with δ_n = δ·6/(π² n²): by a union bound over
    n = 1, 2, … (Σ δ_n = δ) it holds at every n at once, so over any looks; a function of
    (k, n) only.  Valid but conservative (``benchmarks/bench_gate.py``): the gate uses
    :func:`anytime_upper`.
    """
    _check_level(delta, "delta")
    kk, nn = _counts(k, n, table, rows)
    spent = delta * 6.0 / (np.pi ** 2 * np.maximum(nn, 1.0) ** 2)
    out = np.ones(kk.shape)
    ok = kk < nn
    out[ok] = betaincinv(kk[ok] + 1.0, nn[ok] - kk[ok], 1.0 - spent[ok])
    return out


def posterior_upper(p_unsafe: xr.DataArray, delta: float = 0.05,
                    dim: str = "sample") -> xr.DataArray:
    """(1 − δ)-quantile of posterior draws of p_unsafe over ``dim``: the smallest draw whose
    empirical CDF reaches 1 − δ (``method="inverted_cdf"``), the quantile definition of
    :func:`belief.decision.functionals.lcb` — the one CVU's gate of s_{t+1}
    (:func:`belief.decision.cvu.safety.next_gate`) applies to reweighted draws, so a gate
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
    method : {"anytime", "clopper_pearson", "posterior"}
        Which bound decides (:data:`METHODS`; default ``anytime``, the confidence sequence of
        :func:`anytime_upper`, whose guarantee holds over every look of a campaign; the
        one-look ``clopper_pearson`` and the credible ``posterior`` bound by name); every
        bound is reported when available.
    """

    alpha_exec: float = 0.1
    delta: float = 0.05
    method: str = "anytime"

    def __post_init__(self) -> None:
        _check_level(self.alpha_exec, "alpha_exec")
        _check_level(self.delta, "delta")
        if not isinstance(self.method, str) or self.method not in METHODS:
            raise InputError("safety gate", f"method must be one of {list(METHODS)}, got "
                                            f"{self.method!r}")

    @property
    def label(self) -> str:
        """The deciding bound's short name (``anytime UCB``, ``CP UCB``, ``posterior credible
        UCB``)."""
        return BOUNDS[self.method][0]

    @property
    def guarantee(self) -> str:
        """What the deciding bound guarantees (:data:`BOUNDS`)."""
        return BOUNDS[self.method][1]

    def count_bound(self, k: np.ndarray | int, n: np.ndarray | int, *,
                    rows: list | None = None) -> np.ndarray:
        """The deciding bound from counts alone (``anytime`` or ``clopper_pearson``; the
        posterior bound needs draws: :func:`posterior_upper`)."""
        if self.method == "anytime":
            return anytime_upper(k, n, self.delta, rows=rows)
        if self.method == "clopper_pearson":
            return clopper_pearson_upper(k, n, self.delta, rows=rows)
        raise InputError("safety gate", "the posterior bound is not a function of the counts")

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
        Dataset over ``candidate`` with ``ucb_anytime``, ``ucb_clopper_pearson``,
        ``ucb_posterior`` (NaN when no model), ``p_exec_bound`` (the one that decides),
        ``safe`` and ``safe_reason``; attributes ``alpha_exec``, ``delta``, ``method``,
        ``bound`` (its label) and ``guarantee``.
        """
        ids = candidates.ids
        hw = np.array([c.drives_hardware for c in candidates])
        k = unsafe.sel(candidate=ids)
        n = executions.sel(candidate=ids)
        cp = np.where(hw, clopper_pearson_upper(k.values, n.values, self.delta, rows=ids), 0.0)
        anytime = np.where(hw, anytime_upper(k.values, n.values, self.delta, rows=ids), 0.0)
        if p_unsafe is not None:
            post = posterior_upper(p_unsafe, self.delta).reindex(candidate=ids).values
            post = np.where(hw, post, 0.0)
        else:
            post = np.full(len(ids), np.nan)
        if self.method == "posterior" and p_unsafe is None:
            raise InputError("safety gate", "method='posterior' needs posterior draws of "
                                            "p_unsafe (fit the execution-risk model)")
        bound = {"anytime": anytime, "clopper_pearson": cp, "posterior": post}[self.method]
        safe = bound <= self.alpha_exec
        label = self.label
        reasons = []
        for i, _c in enumerate(candidates):
            if not hw[i]:
                reasons.append("no hardware: P_exec = 0")
            elif int(n.values[i]) == 0 and not safe[i]:
                reasons.append(f"unsafe: no execution-safety data (0/0 unsafe): {label} "
                               f"{bound[i]:.3f} > α_exec {self.alpha_exec:g}; give its bench "
                               "runs as safety_events")
            elif safe[i]:
                reasons.append(f"{label} {bound[i]:.3f} <= α_exec {self.alpha_exec:g} "
                               f"({int(k.values[i])}/{int(n.values[i])} unsafe)")
            else:
                reasons.append(f"unsafe: {label} {bound[i]:.3f} > α_exec "
                               f"{self.alpha_exec:g} ({int(k.values[i])}/{int(n.values[i])} "
                               "unsafe)")
        return xr.Dataset(
            {"ucb_anytime": ("candidate", anytime), "ucb_clopper_pearson": ("candidate", cp),
             "ucb_posterior": ("candidate", post),
             "p_exec_bound": ("candidate", bound), "safe": ("candidate", safe),
             "safe_reason": ("candidate", np.array(reasons, dtype=object))},
            coords={"candidate": ids},
            attrs={"alpha_exec": self.alpha_exec, "delta": self.delta, "method": self.method,
                   "bound": self.label, "guarantee": self.guarantee})


def deployment_check(evidence: Evidence | tuple[int, int], policy: str,
                     alpha_deploy: float = 0.05, delta: float = 0.05,
                     method: str = "clopper_pearson",
                     prior: tuple[float, float] = (1.0, 1.0)) -> xr.Dataset:
    """The deployment chance constraint P_deploy(unsafe | π) ≤ α_deploy, checked at the stop.

    The check is made once, on the final policy: one look, where the one-look
    Clopper–Pearson bound keeps its 1 − δ guarantee (a campaign whose gate is ``anytime``
    checks deployment with Clopper–Pearson, :func:`deployment_method`).  With k unsafe
    outcomes in n deployment trials of ``policy``:

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
    if method not in ("clopper_pearson", "posterior"):
        raise InputError("deployment check", f"method must be one of ['clopper_pearson', "
                                             f"'posterior'] (one look: no anytime bound), got "
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
