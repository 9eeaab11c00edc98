"""Evidence folders: one validated table per file, plus the realised costs.

Evidence folder
    One file per table, named after the table, ``.csv`` or ``.parquet`` (``.pq``):
    ``paired_evaluations`` (required; a header-only file is allowed), ``gain_estimates``,
    ``policy_evaluations``, ``safety_events``, ``deployment_safety``, ``sensitivity_runs``,
    ``transfer_evaluations``, ``model_updates``, ``direction_estimates``,
    ``sim_paired_evaluations`` (columns in :mod:`belief.inputs.evidence`) and
    ``costs`` (realised costs per executed action, :mod:`belief.inputs.costs`).  Without a
    ``model_updates`` file the executed model updates are read off the costs table (it lists
    every executed action).  A ``.csv``/``.parquet`` file with
    another name, a table given twice, or a table file in another format is refused; other files
    (notes, README) are listed as ignored.

The current policy (:func:`infer_policy`)
    The ``treated_policy`` of the paired evaluation with the largest ``step`` (each executed
    adaptation moves the campaign to the policy it produced); without paired rows, the single
    policy of ``policy_evaluations`` and ``gain_estimates``.  Several candidates at the last
    step, or several evaluated policies, are refused: pass ``policy``.

The next step (:func:`next_step`)
    1 + the largest ``step`` of any evidence row (0 without rows): the belief is the state
    *before* the next decision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.costs import check_executed, empty_costs, validate_costs
from belief.inputs.evidence import Evidence
from belief.inputs.names import closest, refuse_unknown
from belief.inputs.tables import (
    DEPLOYMENT_COLUMNS,
    DIRECTION_ESTIMATE_COLUMNS,
    GAIN_ESTIMATE_COLUMNS,
    MODEL_UPDATE_COLUMNS,
    PAIRED_COLUMNS,
    POLICY_EVAL_COLUMNS,
    SAFETY_COLUMNS,
    SENS_FAMILIES,
    SENSITIVITY_COLUMNS,
    SIM_PAIRED_COLUMNS,
    TRANSFER_COLUMNS,
    TRANSFER_FAMILIES,
    XI_PREFIX,
)

__all__ = ["KNOWN_COLUMNS", "REQUIRED_TABLES", "SUFFIXES", "TABLES", "EvidenceTables",
           "check_known_columns", "evidence_from_tables",
           "infer_policy", "known_policies", "next_step", "read_evidence_dir", "validate_tables"]

TABLES = ("paired_evaluations", "gain_estimates", "policy_evaluations", "safety_events",
          "deployment_safety", "sensitivity_runs", "transfer_evaluations", "model_updates",
          "direction_estimates", "sim_paired_evaluations", "costs")
"""Table names of an evidence folder (file stem = table name)."""
REQUIRED_TABLES = ("paired_evaluations",)
_RUN = ("run_id", "note")
KNOWN_COLUMNS: dict[str, tuple[str, ...]] = {
    "paired_evaluations": (*PAIRED_COLUMNS, "treated_policy", *_RUN),
    "gain_estimates": (*GAIN_ESTIMATE_COLUMNS, "source", *_RUN),
    "policy_evaluations": (*POLICY_EVAL_COLUMNS, "policy_interface", *_RUN),
    "safety_events": (*SAFETY_COLUMNS, "policy", *_RUN),
    "deployment_safety": (*DEPLOYMENT_COLUMNS, *_RUN),
    "sensitivity_runs": (*SENSITIVITY_COLUMNS, *(c for cols in SENS_FAMILIES.values()
                                                 for c in cols), "policy_interface", *_RUN),
    "transfer_evaluations": (*TRANSFER_COLUMNS, *(c for cols in TRANSFER_FAMILIES.values()
                                                  for c in cols),
                             "policy_interface", "sim_interface", "real_interface", *_RUN),
    "model_updates": (*MODEL_UPDATE_COLUMNS, "policy", *_RUN),
    "direction_estimates": (*DIRECTION_ESTIMATE_COLUMNS, "policy", *_RUN),
    "sim_paired_evaluations": (*SIM_PAIRED_COLUMNS, "treated_policy", *_RUN),
}
"""The columns each evidence table may have (required and optional; ``note`` is free text,
``run_id`` tells runs apart); ``sensitivity_runs`` also takes any ``xi_<direction>`` column and
``costs`` one column per resource (:mod:`belief.inputs.costs`).  Any other column is refused:
a misspelt optional column (``treatd_policy``) would otherwise be read as absent."""
SUFFIXES = (".csv", ".parquet", ".pq")


@dataclass(frozen=True)
class EvidenceTables:
    """Validated evidence with the realised costs and where each table came from.

    Attributes
    ----------
    evidence : Evidence
    costs : DataFrame
        Realised costs per executed action (:mod:`belief.inputs.costs`).
    files : dict of str to str
        Table name → file it was read from (``"<python>"`` for DataFrames).
    digests : dict of str to str
        Table name → SHA-256 of the file's bytes (empty for DataFrames).
    ignored : list of str
        Files of the folder that are not tables.
    costs_complete : bool
        The costs table lists every executed action (a campaign's own record): the history
        is taken from it even when it has no rows (:func:`belief.inputs.costs.executed_actions`).
    """

    evidence: Evidence
    costs: pd.DataFrame
    files: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    costs_complete: bool = False

    def rows(self) -> dict[str, int]:
        """Rows per table (every documented table, 0 when absent)."""
        out = {name: len(df) for name, df in self.evidence.tables().items()}
        out["costs"] = len(self.costs)
        return out


def _rewrap(err: InputError, table: str, csv: bool) -> InputError:
    row = err.row
    if isinstance(row, int | np.integer) and csv:
        row = f"{int(row)} (line {int(row) + 2} of the file)"
    return InputError(table, err.rule, row=row)


def check_known_columns(name: str, df: pd.DataFrame, table: str) -> None:
    """Refuse a column of evidence table ``name`` that is not one of :data:`KNOWN_COLUMNS`
    (naming ``table`` and the closest known column)."""
    known = KNOWN_COLUMNS.get(name)
    if known is None or not isinstance(df, pd.DataFrame):
        return
    given = [c for c in df.columns
             if not (name == "sensitivity_runs" and isinstance(c, str)
                     and c.startswith(XI_PREFIX))]
    refuse_unknown(given, known, table, "column")


def validate_tables(tables: Mapping[str, pd.DataFrame], candidates: CandidateSet,
                     labels: Mapping[str, str], csv: Mapping[str, bool]) -> tuple[Evidence,
                                                                                   pd.DataFrame]:
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        refuse_unknown(unknown, TABLES, "evidence", "table")
    for name, df in tables.items():
        check_known_columns(name, df, labels.get(name, name))
    evidence = Evidence.from_tables(
        candidates, {k: v for k, v in tables.items() if k != "costs"},
        on_error=lambda name, err: _rewrap(err, labels.get(name, name), csv.get(name, False)))
    costs = empty_costs(candidates)
    if "costs" in tables:
        try:
            costs = validate_costs(tables["costs"], candidates)
            check_executed(costs, evidence.paired, evidence.gain_estimates)
        except InputError as err:
            raise _rewrap(err, labels.get("costs", "costs"), csv.get("costs", False)) from None
    if "model_updates" not in tables and len(costs):
        # the costs table records every executed action: its model updates are the record
        roles = {c.id: c.role for c in candidates}
        rows = costs[[roles.get(str(c)) == "model_update" for c in costs["candidate"]]]
        if len(rows):
            evidence = evidence.append(model_updates=rows[["step", "candidate"]])
    return evidence, costs


def read_evidence_dir(path: str | Path, candidates: CandidateSet,
                      required: tuple[str, ...] = REQUIRED_TABLES) -> EvidenceTables:
    """Read and validate the tables of an evidence folder (see the module docstring).

    ``required``: the tables that must be there (default ``paired_evaluations``; a campaign's
    initial evidence — bench safety runs, a baseline evaluation — needs none).

    Raises
    ------
    InputError
        Naming the file, the row (with its line in a CSV file) and the rule: a missing folder
        or required table, a file that is not CSV/Parquet, an unknown table name, a table given
        twice, a column missing or of the wrong type, any rule of the table's validator.
    """
    from belief.inputs.evidence import read_table

    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "evidence folder not found")
    if not path.is_dir():
        raise InputError(str(path), "is not a folder: give the folder that holds the evidence "
                                    f"tables ({', '.join(TABLES)})")
    found: dict[str, Path] = {}
    ignored = []
    for f in sorted(path.iterdir()):
        if f.name.startswith(".") or f.is_dir():
            continue
        stem, suffix = f.stem, f.suffix.lower()
        if stem in TABLES:
            if suffix not in SUFFIXES:
                raise InputError(str(f), f"{f.name} is neither CSV (.csv) nor Parquet "
                                         "(.parquet): save the table in one of these formats")
            if stem in found:
                raise InputError(str(f), f"table {stem!r} is given twice ({found[stem].name} "
                                         f"and {f.name}); keep one")
            found[stem] = f
        elif suffix in SUFFIXES:
            near = closest(stem, TABLES)
            hint = f" (did you mean {near + suffix!r}?)" if near else ""
            raise InputError(str(f), f"{f.name} is not a known evidence table{hint}; table "
                                     f"files are named "
                                     f"{', '.join(t + '.csv' for t in TABLES)} (or .parquet)")
        else:
            ignored.append(f.name)
    missing = [t for t in required if t not in found]
    if missing:
        raise InputError(str(path), f"missing required table {missing[0]}.csv (or .parquet); "
                                    f"found: {sorted(found) or 'no tables'} (a header-only "
                                    "paired_evaluations.csv is fine before any adaptation)")
    tables = {}
    for name, f in found.items():
        df = read_table(f, table=str(f))
        if len(df.columns) == 0:
            raise InputError(str(f), "the file has no columns")
        tables[name] = df
    labels = {name: str(f) for name, f in found.items()}
    csv = {name: f.suffix.lower() == ".csv" for name, f in found.items()}
    evidence, costs = validate_tables(tables, candidates, labels, csv)
    digests = {name: hashlib.sha256(f.read_bytes()).hexdigest() for name, f in found.items()}
    return EvidenceTables(evidence, costs, {k: str(v) for k, v in found.items()}, digests,
                          ignored)


def evidence_from_tables(tables: Mapping[str, pd.DataFrame] | Evidence | EvidenceTables,
                         candidates: CandidateSet) -> EvidenceTables:
    """Validate in-memory tables (table name → DataFrame, or an :class:`Evidence`)."""
    if isinstance(tables, EvidenceTables):
        return tables
    if isinstance(tables, Evidence):
        return EvidenceTables(tables, empty_costs(candidates),
                              {k: "<python>" for k, v in tables.tables().items() if len(v)})
    if not isinstance(tables, Mapping):
        raise InputError("evidence", f"expected a folder, a mapping table name → DataFrame or "
                                     f"an Evidence, got {type(tables).__name__}")
    evidence, costs = validate_tables(dict(tables), candidates, {}, {})
    return EvidenceTables(evidence, costs, {k: "<python>" for k in tables})


def infer_policy(evidence: Evidence) -> tuple[str, str]:
    """The current policy and the rule that gave it (see the module docstring)."""
    paired = evidence.paired
    if len(paired):
        last = paired[paired["step"] == paired["step"].max()]
        names = list(dict.fromkeys(last["treated_policy"]))
        if len(names) > 1:
            raise InputError("paired_evaluations", f"cannot tell the current policy: step "
                                                   f"{int(last['step'].iloc[0])} produced "
                                                   f"several policies {names}; pass --policy")
        return names[0], (f"treated_policy of the last paired evaluation (step "
                          f"{int(last['step'].iloc[0])}, candidate "
                          f"{last['candidate'].iloc[0]})")
    names = list(dict.fromkeys([*evidence.policy_evals["policy"],
                                *evidence.gain_estimates["policy"]]))
    if len(names) == 1:
        return str(names[0]), "the single policy evaluated (no paired evaluations)"
    if not names:
        raise InputError("evidence", "cannot tell the current policy: no paired evaluations, "
                                     "policy evaluations or gain estimates; pass --policy")
    raise InputError("evidence", f"cannot tell the current policy: no paired evaluations and "
                                 f"several evaluated policies {names}; pass --policy")


def known_policies(evidence: Evidence) -> list[str]:
    p = evidence.paired
    return list(dict.fromkeys([*p["policy"], *p["treated_policy"],
                               *evidence.policy_evals["policy"],
                               *evidence.gain_estimates["policy"]]))


def next_step(tables: EvidenceTables) -> int:
    steps = [int(df["step"].max()) for df in (*tables.evidence.tables().values(), tables.costs)
             if len(df)]
    return max(steps) + 1 if steps else 0


