"""Column checks shared by the evidence tables: each names the table, the row and the rule."""

from __future__ import annotations

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet

__all__ = ["RUN_ID", "TEXT_COLUMNS", "at_most", "base_columns", "check_columns", "check_counts",
           "checked_frame", "empty_frame", "float_column", "integer_column", "interface_columns",
           "is_missing", "present", "refuse_duplicates", "show_value", "string_column"]

RUN_ID = "run_id"
"""Optional column of the count tables naming each run, so that two runs with equal values
are told apart (without it, two equal rows are taken for one run recorded twice)."""


def show_value(v: object) -> str:
    """A value as a user wrote it (numpy scalars unwrapped)."""
    return repr(v.item() if isinstance(v, np.generic) else v)


def integer_column(df: pd.DataFrame, col: str, table: str) -> np.ndarray:
    dtype = df[col].dtype
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        raise InputError(table, f"{col} is stored as datetimes ({dtype}), expected an integer "
                                "(a Parquet timestamp column is not a step or a count)")
    values = df[col].to_numpy()
    for i, v in enumerate(values):
        if isinstance(v, bool | np.bool_):
            raise InputError(table, f"{col} must be an integer count, got {show_value(v)}", row=i)
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise InputError(table, f"{col} must be an integer count, got {show_value(v)}",
                             row=i) from None
        if not np.isfinite(fv):
            raise InputError(table, f"{col} is missing or not finite", row=i)
        if fv != np.floor(fv):
            raise InputError(table, f"{col} must be an integer count, got {show_value(v)}", row=i)
        if fv < 0:
            raise InputError(table, f"{col} must be >= 0 (negative count {show_value(v)})", row=i)
        if fv > 2**53:
            raise InputError(table, f"{col} is implausibly large ({show_value(v)})", row=i)
    return values.astype(float).astype(np.int64)


def string_column(df: pd.DataFrame, col: str, table: str) -> np.ndarray:
    """The column as text; a missing value, surrounding whitespace (``"pi0, pi1"`` read as
    ``" pi1"`` would be another policy) or a control character is refused."""
    values = df[col].to_numpy(dtype=object)
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == "":
            raise InputError(table, f"{col} is missing", row=i)
        text = str(v)
        if text != text.strip():
            raise InputError(table, f"{col} {text!r} has surrounding whitespace", row=i)
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
            raise InputError(table, f"{col} {text!r} contains a control character", row=i)
    return np.array([str(v) for v in values], dtype=object)


def at_most(out: pd.DataFrame, part: str, whole: str, table: str, *, verb: str = "exceed",
             prefix: str = "") -> None:
    """Refuse the first row whose count ``part`` is above its ``whole`` (successes ≤ trials)."""
    bad = np.flatnonzero(out[part] > out[whole])
    if bad.size:
        i = int(bad[0])
        raise InputError(table, f"{prefix}{part} ({out[part][i]}) {verb} {whole} "
                                f"({out[whole][i]})", row=i)


def float_column(df: pd.DataFrame, col: str, table: str, positive: bool = False) -> np.ndarray:
    values = df[col].to_numpy()
    out = np.empty(len(values))
    for i, v in enumerate(values):
        try:
            fv = float(v) if not isinstance(v, bool | np.bool_) else float("nan")
        except (TypeError, ValueError):
            fv = float("nan")
        if not np.isfinite(fv):
            raise InputError(table, f"{col} must be a finite number, got {show_value(v)}", row=i)
        if positive and fv <= 0:
            raise InputError(table, f"{col} must be > 0, got {show_value(v)}", row=i)
        out[i] = fv
    return out


TEXT_COLUMNS = frozenset({"candidate", "policy", "eval_protocol", "source", "treated_policy",
                          RUN_ID})


def empty_frame(columns: tuple[str, ...], floats: tuple[str, ...] = ()) -> pd.DataFrame:
    """A table without rows: text columns ``object``, ``floats`` float, the rest int64."""
    return pd.DataFrame({c: pd.Series(dtype=object if c in TEXT_COLUMNS
                                      else float if c in floats else np.int64)
                         for c in columns})


def is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float | np.floating) and np.isnan(v)) or v is pd.NA


def present(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        return np.zeros(len(df), bool)
    return np.array([not is_missing(v) for v in df[col].to_numpy(dtype=object)], bool)


def check_columns(df: pd.DataFrame, cols: tuple[str, ...], table: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(table, f"missing required column(s) {missing}; required: {list(cols)}")


def checked_frame(df: pd.DataFrame, cols: tuple[str, ...], table: str) -> pd.DataFrame:
    """A DataFrame with every required column, re-indexed 0..n−1 (rows are named by position)."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    check_columns(df, cols, table)
    return df.reset_index(drop=True)


def base_columns(df: pd.DataFrame, candidates: CandidateSet, table: str) -> pd.DataFrame:
    """step, policy, eval_protocol (equal to E_shared) and the optional ``policy_interface``."""
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "policy": string_column(df, "policy", table),
                        "eval_protocol": string_column(df, "eval_protocol", table)})
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r} (it would mix "
                                    "task-specification mismatch into δ_J and the "
                                    "sensitivities)", row=i)
    interface_columns(df, out, candidates, table, ("policy_interface",))
    return out


def interface_columns(df: pd.DataFrame, out: pd.DataFrame, candidates: CandidateSet,
                       table: str, columns: tuple[str, ...]) -> None:
    """Copy interface columns into ``out`` ("" when not stated), refusing any that differs from
    the campaign's ``policy_interface`` (when the campaign declares one)."""
    expected = candidates.policy_interface
    for col in columns:
        if col not in df.columns:
            continue
        values = np.array(["" if is_missing(v) else str(v).strip()
                           for v in df[col].to_numpy(dtype=object)], dtype=object)
        if expected is not None:
            for i, v in enumerate(values):
                if v and v != expected:
                    raise InputError(table, f"{col} {v!r} differs from the campaign's policy "
                                            f"interface {expected!r}: a policy with another "
                                            "observation/action interface is not the same "
                                            "function π, so its δ_J and sensitivities are not "
                                            "defined in this campaign", row=i)
        out[col] = values


def check_counts(out: pd.DataFrame, succ: str, trials: str, table: str) -> None:
    bad = np.flatnonzero(out[trials] < 1)
    if bad.size:
        i = int(bad[0])
        raise InputError(table, f"outcome out of range: {trials} must be >= 1, got "
                                f"{out[trials][i]}", row=i)
    at_most(out, succ, trials, table, prefix="outcome out of range: ")


def refuse_duplicates(df: pd.DataFrame, out: pd.DataFrame, table: str) -> pd.DataFrame:
    """Refuse rows that are one run recorded twice; return ``out`` with the ``run_id`` column
    when ``df`` has one.

    Without a ``run_id`` column, two rows equal in every column the models read (the validated
    columns of ``out``) are refused: summing them would count the run twice (2 unsafe in 70
    executions would become 4 in 140, and the Clopper–Pearson bound would fall from 0.087 to
    0.064).  With ``run_id``, rows with different run ids are different runs, and a run id
    given on two rows is refused (a run is one row); a missing run id falls back to the
    comparison of the values.
    """
    out = out.copy()
    if RUN_ID in df.columns:
        ids = np.array(["" if is_missing(v) else str(v).strip()
                        for v in df[RUN_ID].to_numpy(dtype=object)], dtype=object)
        seen: dict[str, int] = {}
        for i, rid in enumerate(ids):
            if rid and rid in seen:
                raise InputError(table, f"run_id {rid!r} is also on row {seen[rid]}: a run is "
                                        "one row (give each run its own run_id)", row=i)
            seen.setdefault(rid, i)
        out[RUN_ID] = ids
    dup = np.flatnonzero(out.duplicated(keep="first").to_numpy())
    if dup.size:
        j = int(dup[0])
        h = pd.util.hash_pandas_object(out, index=False).to_numpy()
        i = int(np.flatnonzero(h == h[j])[0])
        raise InputError(table, f"exact duplicate of row {i} (every column is equal): one run "
                                "recorded twice would be counted twice; remove the copy, or "
                                f"add a {RUN_ID} column that names each run", row=j)
    return out
