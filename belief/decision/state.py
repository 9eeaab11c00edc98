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
        q_t (see :func:`belief.posterior.belief_state.make_belief`).
    history : tuple of str
        Candidates executed so far, in order (h_t).
    available : tuple of str or None
        Candidates still available (non-repeatable ones leave after execution); None = all.

    The horizon T is a decision setting (:class:`belief.decision.settings.DecisionSettings`),
    not part of the state.
    """

    step: int
    budget: xr.DataArray
    policy: str
    belief: xr.Dataset
    history: tuple[str, ...] = ()
    available: tuple[str, ...] | None = field(default=None)

    def with_(self, **changes) -> State:
        """A copy with fields replaced."""
        return replace(self, **changes)
