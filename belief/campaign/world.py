"""The world a campaign acts on, and what one execution produces.

:class:`World` declares everything the loop uses; :class:`~belief.campaign.synthetic.
SyntheticWorld` (the embedded, seeded sim-to-real world that knows its truth) and
:class:`~belief.campaign.manual.ManualWorld` (outcomes typed in by the user) implement it.  A
world that does not know something says so with ``None`` (no deployment trials, no truth), so
the loop never probes for optional members.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pandas as pd
import xarray as xr

from belief.files import jsonable
from belief.inputs.candidates import CandidateSet

__all__ = ["Outcome", "World", "model_update_row", "outcome_records", "table_records"]

OUTCOME_TABLES = ("paired", "safety", "gain_estimates")


@dataclass(frozen=True)
class Outcome:
    """What executing a candidate produced: evidence rows, realised cost and the next policy.

    Attributes
    ----------
    candidate : str
    step : int
    paired, safety, gain_estimates : DataFrame
        The evidence rows of the execution (empty when it produced none).
    direction_estimates : DataFrame
        Measurements of mismatch directions by a diagnosis (``targets`` with
        ``measurement_se``); in :meth:`tables` only when there are some, so the logs of
        campaigns without them are unchanged.
    cost : dict of str to float
        ΔC realised, per resource.
    policy : str
        The policy after the execution (unchanged unless the candidate adapts it).
    true_gain : float or None
        The realised true gain J(π') − J(π), when the world knows it.
    """

    candidate: str
    step: int
    paired: pd.DataFrame = field(default_factory=pd.DataFrame)
    safety: pd.DataFrame = field(default_factory=pd.DataFrame)
    cost: dict[str, float] = field(default_factory=dict)
    policy: str = ""
    true_gain: float | None = None
    gain_estimates: pd.DataFrame = field(default_factory=pd.DataFrame)
    direction_estimates: pd.DataFrame = field(default_factory=pd.DataFrame)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The evidence rows by :class:`~belief.inputs.evidence.Evidence` table name."""
        out = {name: getattr(self, name) for name in OUTCOME_TABLES}
        if len(self.direction_estimates):
            out["direction_estimates"] = self.direction_estimates
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Outcome:
        """The outcome of a logged step record (:mod:`belief.campaign.log`)."""
        o = rec.get("outcome", {})
        return cls(rec["chosen"], int(rec["step"]), pd.DataFrame(o.get("paired", [])),
                   pd.DataFrame(o.get("safety", [])), dict(rec["realised_cost"]),
                   rec["policy_after"], rec.get("true_gain"),
                   pd.DataFrame(o.get("gain_estimates", [])),
                   pd.DataFrame(o.get("direction_estimates", [])))


def model_update_row(candidates: Any, chosen: str, step: int,
                     policy: str) -> pd.DataFrame | None:
    """The ``model_updates`` evidence row of executing ``chosen`` at ``step`` (None unless it
    is a model update): what the gains model's order effects read as its history."""
    if chosen not in candidates.ids or candidates[chosen].role != "model_update":
        return None
    return pd.DataFrame([{"step": int(step), "candidate": chosen, "policy": str(policy)}])


def table_records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A table's rows as JSON-able records (none for a missing or empty table)."""
    return [] if df is None or df.empty else jsonable(df.to_dict("records"))


def outcome_records(outcome: Outcome) -> dict[str, list[dict[str, Any]]]:
    """The outcome's evidence rows as JSON-able records, by table (what the log stores)."""
    return {name: table_records(df) for name, df in outcome.tables().items()}


@runtime_checkable
class World(Protocol):
    """What the campaign loop needs from a world (synthetic or real).

    Attributes
    ----------
    candidates : CandidateSet
    initial_policy : str
        π_0.
    initial_budget : DataArray over ``resource``
        b_0 (the candidate file's ``[budget]`` wins when it has one).
    weight_values : dict or None
        Default fixed λ of the campaign (None: the settings must give λ).
    """

    candidates: CandidateSet

    @property
    def initial_policy(self) -> str: ...

    @property
    def initial_budget(self) -> xr.DataArray: ...

    @property
    def weight_values(self) -> dict[str, float] | None: ...

    def initial_evidence(self) -> dict[str, pd.DataFrame]:
        """Evidence available before the first step (tables by Evidence name)."""

    def execute(self, candidate_id: str, step: int) -> Outcome:
        """Run m at ``step`` from the current policy and report what happened."""

    def observe(self, outcome: Outcome) -> None:
        """The campaign applied ``outcome`` (a world that learns its state from the campaign
        moves to the outcome's policy; a world that produced it itself already has)."""

    def resume_step(self, logged: Outcome) -> None:
        """Bring the world to the state after a logged step (resuming a campaign); refuse a
        world whose outcome differs from the log with an InputError."""

    def deployment_evaluation(self, step: int, policy: str) -> pd.DataFrame | None:
        """Deployment-safety rows of ``policy`` at the stop, or None when the world runs none."""

    def expected_gain(self, candidate_id: str) -> float | None:
        """E[ΔJ] of executing m now under the world's truth, or None when it is unknown."""

    def true_success(self, policy: str) -> float | None:
        """J(π) under the world's truth, or None when it is unknown."""

    def describe(self) -> dict[str, Any]:
        """How to rebuild this world when resuming (stored in the campaign log)."""
