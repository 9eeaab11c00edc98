"""Exact refits only where they can change the choice (``CVUSettings.refit_scope="decisive"``).

An exact refit (an MCMC fit per simulated outcome) is CVU's costliest step, and most of them
go to candidates that no value of the refit could make the choice.  So CVU is first estimated
with every refit deferred: each PSIS estimate keeps its untrusted outcomes at their
importance-weighted G0 and bounds what their refits could give
(:func:`belief.decision.cvu.psis.refit_bounds`), which bounds the value against stopping

    v(m) = U0(m) + β·(CVU(m) + G0(s^∅)) ∈ [v_low(m), v_high(m)].

The choice is settled when every v_high ≤ 0 (stop, whatever the refits give) or when one
candidate's v_low exceeds 0 and every other candidate's v_high (:func:`settled`).  Until it is,
the contender with the largest v_high among those with deferred outcomes (candidate m can be
chosen only if v_high(m) > 0 and v_high(m) ≥ max_{k ≠ m} v_low(k): :func:`contenders`) is
scored again with its refits — the same outcomes and streams, so the estimate that refitting
every candidate gives — and the bounds are read again; a candidate whose refits fail becomes
unranked or falls back to regression, as it would with every candidate refit.  The others keep
their bounded estimates (``cvu_method`` ending in ``+bounded``; the chosen candidate too when
its lower end already clears every other's upper end), and the choice is the one that
refitting every candidate makes wherever the bounds hold and the refits of the bounded
candidates would have succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import xarray as xr

__all__ = ["contenders", "decisive_cvu", "settled"]


def contenders(low: np.ndarray, high: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """The candidates that could be chosen (bool (C,)): eligible, ``high`` > 0 and ``high`` at
    least the largest ``low`` of the other eligible candidates."""
    eligible = np.asarray(eligible, bool)
    high = np.asarray(high, float)
    return eligible & (high > 0) & (high >= _best_other(low, eligible))


def settled(low: np.ndarray, high: np.ndarray, eligible: np.ndarray) -> bool:
    """Whether the choice is the same for every value in the ranges: every eligible ``high`` ≤ 0
    (stop), or one candidate's ``low`` > 0 and > every other eligible candidate's ``high``."""
    eligible = np.asarray(eligible, bool)
    low = np.where(eligible, np.asarray(low, float), -np.inf)
    if not (np.where(eligible, high, -np.inf) > 0).any():
        return True
    best = int(low.argmax())
    return bool(low[best] > max(0.0, _best_other(high, eligible)[best]))


def _best_other(x: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """max_{k ≠ m, k eligible} x_k for every m (−∞ where there is no other), (C,)."""
    x = np.where(eligible, np.asarray(x, float), -np.inf)
    if x.size < 2:
        return np.full(x.size, -np.inf)
    first = int(x.argmax())
    second = np.max(np.delete(x, first))
    return np.where(np.arange(x.size) == first, second, x[first])


def decisive_cvu(compute: Callable[[bool, Collection[str] | None], xr.Dataset],
                 u0: np.ndarray, beta: float, feasible: np.ndarray) -> xr.Dataset:
    """CVU with exact refits for the candidates that could be chosen only (module docstring).

    Parameters
    ----------
    compute : callable (defer_refits, only) → CVU dataset
        :func:`belief.decision.cvu.cvu_for_state` bound to the decision's state, settings,
        seed and refit hook.
    u0, feasible : ndarray (C,)
        U0(m) and M^feasible, in the candidate order of the datasets.
    beta : float
        β.

    Returns
    -------
    The CVU dataset, rows of refit candidates from their exact scoring; the ``cvu_reason`` of a
    candidate left bounded says why it was not refit.
    """
    cvu = compute(True, None)
    ids = [str(c) for c in cvu["candidate"].values]
    g0_null = float(cvu.attrs["g0_null"])
    while True:
        low, high, eligible = _values(cvu, u0, beta, g0_null, feasible)
        open_ = contenders(low, high, eligible) & (cvu["n_deferred"].values > 0)
        if settled(low, high, eligible) or not open_.any():
            break
        i = int(np.where(open_, high, -np.inf).argmax())
        exact = compute(False, [ids[i]])
        cvu = cvu.copy()
        for name in cvu.data_vars:
            values = cvu[name].values.copy()
            values[i] = exact[name].values[i]
            cvu[name] = ("candidate", values)
    low, high, eligible = _values(cvu, u0, beta, g0_null, feasible)
    others_low, others_high = _best_other(low, eligible), _best_other(high, eligible)
    reason = cvu["cvu_reason"].values.copy()
    for i in np.flatnonzero(cvu["n_deferred"].values > 0):
        if not high[i] > 0:
            why = f"it cannot be chosen: value against stopping at most {high[i]:.4g} <= 0"
        elif eligible[i] and low[i] > max(0.0, others_high[i]):
            why = (f"it is chosen whatever they give: value against stopping at least "
                   f"{low[i]:.4g}, above 0 and every other candidate's most")
        elif high[i] < others_low[i]:
            why = (f"it cannot be chosen: value against stopping at most {high[i]:.4g} < "
                   f"{others_low[i]:.4g}, another candidate's least")
        else:
            why = "the choice is settled without it"
        reason[i] = f"{reason[i]}; not refit: {why}"
    return cvu.assign(cvu_reason=("candidate", reason))


def _values(cvu: xr.Dataset, u0: np.ndarray, beta: float, g0_null: float,
            feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v_low, v_high of the value against stopping, and which candidates are ranked."""
    point = cvu["cvu"].values
    # the point itself is within its range (cvu_psis clips); a bound that is not finite where
    # the point is counts as unbounded, so that such a candidate is refit, never trusted
    low = np.fmin(np.where(np.isfinite(cvu["cvu_low"].values), cvu["cvu_low"].values, -np.inf),
                  point)
    high = np.fmax(np.where(np.isfinite(cvu["cvu_high"].values), cvu["cvu_high"].values,
                            np.inf), point)
    eligible = np.asarray(feasible, bool) & np.isfinite(point)  # as decide ranks them
    return u0 + beta * (low + g0_null), u0 + beta * (high + g0_null), eligible
