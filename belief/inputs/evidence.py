"""Evidence D_t: every validated table of a campaign in one object (columns and rules in
:mod:`belief.inputs.tables`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.tables import (
    OMITTED_WHEN_EMPTY,
    TABLES,
    empty_deployment,
    empty_direction_estimates,
    empty_gain_estimates,
    empty_model_updates,
    empty_paired,
    empty_policy_evals,
    empty_safety,
    empty_sensitivity,
    empty_sim_paired,
    empty_transfer,
)

__all__ = ["Evidence", "read_table"]


def read_table(path: str | Path, table: str | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame, refusing anything else."""
    path = Path(path)
    table = table or path.name
    if not path.exists():
        raise InputError(table, f"file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(table, f"cannot read {path.name} as {suffix[1:]}: {err}") from None
    except ImportError as err:
        raise InputError(table, f"reading {suffix} needs an optional dependency: {err}") from None
    raise InputError(table, f"{path.name} is neither CSV (.csv) nor Parquet (.parquet)")


@dataclass(frozen=True)
class Evidence:
    """All evidence D_t of a campaign, validated against its candidates and E_shared.

    Attributes
    ----------
    candidates : CandidateSet
    paired : DataFrame
        Paired binary evaluations (see module docstring).
    policy_evals : DataFrame
        Stand-alone evaluations of a policy: ``step, policy, eval_protocol, successes, trials``.
    safety : DataFrame
        Execution-safety events: ``step, candidate, executions, unsafe``.
    deployment : DataFrame
        Deployment-safety trials of a policy: ``step, policy, trials, unsafe`` (never mixed
        with execution-safety events).
    gain_estimates : DataFrame
        Summary-level logit-gain measurements: ``step, candidate, policy, eval_protocol,
        estimate, se`` (see :func:`validate_gain_estimates`).
    sensitivity : DataFrame
        Sensitivity runs ``step, policy, eval_protocol, xi_<direction>..., successes, trials``
        (or ``mean, se``); see :func:`validate_sensitivity`.
    transfer : DataFrame
        Sim/real evaluations of the same policy ``step, policy, eval_protocol, sim_successes,
        sim_trials, real_successes, real_trials`` (or ``sim_mean, sim_se, real_mean,
        real_se``); see :func:`validate_transfer`.
    model_updates : DataFrame
        Executed model updates ``step, candidate`` (the sources of order effects besides the
        adaptations on a lineage); see :func:`validate_model_updates`.
    direction_estimates : DataFrame
        Measurements of mismatch directions by diagnoses ``step, candidate, direction,
        estimate, se``; see :func:`validate_direction_estimates`.
    sim_paired : DataFrame
        Simulated paired evaluations: the columns of ``paired`` (optional; see
        :func:`validate_sim_paired`), read by the sim-proxy model.

    Use :meth:`append` to add rows; it validates the new rows, and the tables they join as a
    whole, and returns a new object.  Tables are validated when the object is built: treat
    them as read-only (modify a copy and build a new Evidence).
    """

    candidates: CandidateSet
    paired: pd.DataFrame = field(default_factory=empty_paired)
    policy_evals: pd.DataFrame = field(default_factory=empty_policy_evals)
    safety: pd.DataFrame = field(default_factory=empty_safety)
    gain_estimates: pd.DataFrame = field(default_factory=empty_gain_estimates)
    deployment: pd.DataFrame = field(default_factory=empty_deployment)
    sensitivity: pd.DataFrame = field(default_factory=empty_sensitivity)
    transfer: pd.DataFrame = field(default_factory=empty_transfer)
    model_updates: pd.DataFrame = field(default_factory=empty_model_updates)
    direction_estimates: pd.DataFrame = field(default_factory=empty_direction_estimates)
    sim_paired: pd.DataFrame = field(default_factory=empty_sim_paired)

    def __post_init__(self) -> None:
        for table, (attr, validate) in TABLES.items():
            object.__setattr__(self, attr, validate(getattr(self, attr), self.candidates, table))

    def append(self, **new_rows: pd.DataFrame | None) -> Evidence:
        """A new Evidence with rows appended (validated first; ``self`` is unchanged).

        Keywords are attribute names (``paired=``, ``policy_evals=``, ``safety=``, ...) or table
        names (``paired_evaluations=``, ...); ``None`` or empty frames are skipped.
        """
        by_attr = {attr: (table, validate) for table, (attr, validate) in TABLES.items()}
        changes = {}
        for key, new in new_rows.items():
            if key in TABLES:
                key = TABLES[key][0]
            if key not in by_attr:
                raise InputError("evidence", f"unknown table {key!r}; known: "
                                             f"{sorted(by_attr)}")
            if new is None or not len(new):
                continue
            table, validate = by_attr[key]
            clean = validate(new, self.candidates, table=f"{table} (new rows)")
            changes[key] = pd.concat([getattr(self, key), clean], ignore_index=True)
        return self._with(changes) if changes else self

    def _with(self, changes: Mapping[str, pd.DataFrame]) -> Evidence:
        """A copy with the tables of ``changes`` (attribute → table) replaced and validated
        whole — the rules that span rows (duplicates, the policy lineage) see the old rows
        with the new ones.  The other tables are this object's, validated when it was built,
        and are not validated again (a campaign appends a row per refit: re-validating all
        nine tables each time cost ≈ 10 ms an append)."""
        out = object.__new__(type(self))
        for f in fields(self):
            object.__setattr__(out, f.name, changes.get(f.name, getattr(self, f.name)))
        for table, (attr, validate) in TABLES.items():
            if attr in changes:
                object.__setattr__(out, attr, validate(changes[attr], self.candidates, table))
        return out

    def until(self, step: int) -> Evidence:
        """Evidence available before step ``step`` (rows with ``step < step``)."""
        return replace(self, **{attr: getattr(self, attr)[getattr(self, attr)["step"] < step]
                                for attr, _ in TABLES.values()})

    def safety_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(executions, unsafe) summed per candidate, in candidate order."""
        sums = self.safety.groupby("candidate")[["executions", "unsafe"]].sum()
        sums = sums.reindex(self.candidates.ids, fill_value=0)
        return sums["executions"].to_numpy(), sums["unsafe"].to_numpy()

    def deployment_counts(self, policy: str) -> tuple[int, int]:
        """(trials, unsafe) of deployment-safety evidence on ``policy``, summed over rows."""
        rows = self.deployment[self.deployment["policy"] == policy]
        return int(rows["trials"].sum()), int(rows["unsafe"].sum())

    def tables(self) -> dict[str, pd.DataFrame]:
        """The evidence tables by name (a table of :data:`OMITTED_WHEN_EMPTY` only when it has
        rows)."""
        return {name: getattr(self, attr) for name, (attr, _) in TABLES.items()
                if name not in OMITTED_WHEN_EMPTY or len(getattr(self, attr))}

    @classmethod
    def from_tables(cls, candidates: CandidateSet, tables: Mapping[str, pd.DataFrame],
                    on_error: Callable[[str, InputError], InputError] | None = None
                    ) -> Evidence:
        """Build from a mapping of table name (see :data:`TABLES`) to DataFrame.

        Each table is validated once, in the mapping's order; the first refusal is raised,
        passed through ``on_error(table name, error)`` when given (a caller that names the
        file it read the table from).  Absent tables are empty."""
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise InputError("evidence", f"unknown table(s) {sorted(unknown)}; known: "
                                         f"{sorted(TABLES)}")
        clean = {}
        for name, df in tables.items():
            attr, validate = TABLES[name]
            try:
                clean[attr] = validate(df, candidates, name)
            except InputError as err:
                if on_error is None:
                    raise
                raise on_error(name, err) from None
        out = object.__new__(cls)
        object.__setattr__(out, "candidates", candidates)
        defaults = {f.name: f.default_factory for f in fields(cls) if f.name != "candidates"}
        for table, (attr, validate) in TABLES.items():
            object.__setattr__(out, attr, clean[attr] if attr in clean
                               else validate(defaults[attr](), candidates, table))
        return out
