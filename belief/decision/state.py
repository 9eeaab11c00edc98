"""The campaign state s_t = (b_t, π_t, q_t, h_t) at step t."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import xarray as xr

__all__ = ["State"]


@dataclass(frozen=True)
class State:
    """Campaign state s_t = (b_t, π_t, q_t, h_t) at step t.

    Attributes
    ----------
    step : int
        t, counted from 0.
    budget : DataArray over ``resource``
        Remaining budget b_t.
    policy : str
        Current policy π_t.
    belief : Dataset
        q_t (see :func:`make_belief`).
    history : tuple of str
        Candidates executed so far, in order (h_t).
    horizon : int or None
        T: the last decision is taken at step T − 1 (CVU := 0 there).
    available : tuple of str or None
        Candidates still available (non-repeatable ones leave after execution); None = all.
    """

    step: int
    budget: xr.DataArray
    policy: str
    belief: xr.Dataset
    history: tuple[str, ...] = ()
    horizon: int | None = None
    available: tuple[str, ...] | None = field(default=None)

    @property
    def is_terminal(self) -> bool:
        """Whether this is the last decision before the horizon (Q = U0 there)."""
        return self.horizon is not None and self.step >= self.horizon - 1

    def with_(self, **changes) -> State:
        """A copy with fields replaced."""
        return replace(self, **changes)
