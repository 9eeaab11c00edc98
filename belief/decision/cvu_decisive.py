"""Exact refits only where they can change the choice (``CVUSettings.refit_scope="decisive"``).

An exact refit (an MCMC fit per simulated outcome) is CVU's costliest step, and most of them
go to candidates that no value of the refit could make the choice.  So CVU is first estimated
with every refit deferred: each PSIS estimate keeps its untrusted outcomes at their
importance-weighted G0 and bounds what their refits could give
(:func:`belief.decision.cvu_psis.refit_bounds`), which bounds the value against stopping

    v(m) = U0(m) + β·(CVU(m) + G0(s^∅)) ∈ [v_low(m), v_high(m)].

Candidate m can be chosen only if v_high(m) > 0 (stopping is worth 0) and v_high(m) ≥
max_{k ≠ m} v_low(k) over the other ranked candidates.  Those with deferred outcomes are scored
again with their refits (the same outcomes and streams: the estimate that refitting every
candidate gives), until no candidate that could be chosen has a deferred outcome left; a
candidate whose refit fails is then unranked, which can make another one a contender, so the
check is repeated.  Every other candidate keeps its bounded estimate (``cvu_method`` ending in
``+bounded``), and the choice is the one that refitting every candidate makes wherever the
bounds hold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import xarray as xr

__all__ = ["contenders", "decisive_cvu"]


def contenders(low: np.ndarray, high: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """The candidates that could be chosen (bool (C,)): eligible, ``high`` > 0 and ``high`` at
    least the largest ``low`` of the other eligible candidates."""
    eligible = np.asarray(eligible, bool)
    low = np.where(eligible, np.asarray(low, float), -np.inf)
    high = np.asarray(high, float)
    n = low.size
    if n == 0:
        return np.zeros(0, bool)
    first = int(low.argmax())
    second = np.max(np.delete(low, first)) if n > 1 else -np.inf
    best_other = np.where(np.arange(n) == first, second, low[first])
    return eligible & (high > 0) & (high >= best_other)


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
    done: set[str] = set()
    while True:
        low, high, eligible = _values(cvu, u0, beta, g0_null, feasible)
        can = contenders(low, high, eligible)
        need = [ids[i] for i in np.flatnonzero(can & (cvu["n_deferred"].values > 0))
                if ids[i] not in done]
        if not need:
            break
        exact = compute(False, need)
        cvu = cvu.copy()
        for name in cvu.data_vars:
            values = cvu[name].values.copy()
            values[[ids.index(k) for k in need]] = exact[name].sel(candidate=need).values
            cvu[name] = ("candidate", values)
        done.update(need)
    low, high, eligible = _values(cvu, u0, beta, g0_null, feasible)
    reason = cvu["cvu_reason"].values.copy()
    for i in np.flatnonzero(cvu["n_deferred"].values > 0):
        others = np.delete(np.where(eligible, low, -np.inf), i)
        best = float(others.max()) if others.size else -np.inf
        why = (f"value against stopping at most {high[i]:.4g} <= 0" if not high[i] > 0
               else f"value against stopping at most {high[i]:.4g} < {best:.4g}, another "
                    "candidate's least")
        reason[i] = f"{reason[i]}; not refit: it cannot be chosen ({why})"
    return cvu.assign(cvu_reason=("candidate", reason))


def _values(cvu: xr.Dataset, u0: np.ndarray, beta: float, g0_null: float,
            feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v_low, v_high of the value against stopping, and which candidates are ranked."""
    low = u0 + beta * (cvu["cvu_low"].values + g0_null)
    high = u0 + beta * (cvu["cvu_high"].values + g0_null)
    eligible = np.asarray(feasible, bool) & np.isfinite(cvu["cvu"].values) & np.isfinite(low)
    return low, high, eligible
