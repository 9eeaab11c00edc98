"""Realised costs per executed action (the ``costs`` evidence table) and the remaining budget.

Costs (realised)
    One row per executed action: what it actually cost (which may differ from the candidate's
    nominal ΔC).  The rows also record *which* actions were executed: a non-repeatable
    candidate with a cost row is no longer available.

    ==============  ===============================================================
    column          meaning
    ==============  ===============================================================
    step            campaign step t at which the action was executed (integer ≥ 0)
    candidate       candidate id (must be in the candidate file)
    <resource>      one column per resource of the candidate file (``real_h``,
                    ``compute``, ``eng_h`` by default): the realised amount, a finite
                    number ≥ 0; every resource must have a column
    policy          optional: the policy the action was executed from
    note            optional: free text
    ==============  ===============================================================

    A column that is neither one of these nor a resource of the candidate file is refused (a
    misspelt resource would otherwise be silently dropped from the budget).

    A cost row must be of an action executed at its step (:func:`check_executed`): where the
    other evidence says which action ran at step t — the ``candidate`` of a paired evaluation
    (an adaptation) or the ``source`` of a gain estimate (a diagnosis) at step t — a cost row of
    step t naming another candidate is refused.

The remaining budget b_t = max(b_0 − Σ realised costs, 0), with b_0 the candidate file's
``[budget]`` (:func:`remaining_budget`): a resource spent beyond its budget (a campaign's
budget overrun, :mod:`belief.campaign.overrun`) is clamped at 0 as the campaign clamps it, and
the result's ``overspent`` attribute names it with the amounts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.names import closest
from belief.inputs.resources import make_budget

__all__ = ["COST_COLUMNS", "check_executed", "empty_costs", "executed_actions",
           "realised_spend", "remaining_budget", "validate_costs"]

COST_COLUMNS = ("step", "candidate")
_OPTIONAL = ("policy", "note")


def empty_costs(candidates: CandidateSet) -> pd.DataFrame:
    """A costs table without rows (the columns of ``candidates``' resources)."""
    return pd.DataFrame({"step": pd.Series(dtype=np.int64),
                         "candidate": pd.Series(dtype=object),
                         **{r: pd.Series(dtype=float) for r in candidates.resources}})


def validate_costs(df: pd.DataFrame, candidates: CandidateSet,
                   table: str = "costs") -> pd.DataFrame:
    """Validate a realised-costs table and return a clean copy (see the module docstring).

    Rules: ``step`` a non-negative integer; ``candidate`` known; one column per resource of
    the candidate set, each value finite and ≥ 0; no column other than these and the optional
    ``policy`` and ``note``; no row equal to another in every column (one action recorded
    twice).

    Raises
    ------
    InputError
        Naming ``table``, the row (0-based) and the rule.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    resources = list(candidates.resources)
    unknown = [str(c) for c in df.columns if c not in (*COST_COLUMNS, *resources, *_OPTIONAL)]
    if unknown:
        near = closest(unknown[0], [*COST_COLUMNS, *resources, *_OPTIONAL])
        hint = f" (did you mean {near!r}?)" if near else ""
        raise InputError(table, f"column(s) {unknown} name no resource of the candidates"
                                f"{hint} (resources: {resources}; other allowed columns: "
                                f"{[*COST_COLUMNS, *_OPTIONAL]})")
    missing = [c for c in (*COST_COLUMNS, *resources) if c not in df.columns]
    if missing:
        raise InputError(table, f"missing required column(s) {missing}; required: "
                                f"{[*COST_COLUMNS, *resources]} (one column per resource)")
    df = df.reset_index(drop=True)
    if pd.api.types.is_datetime64_any_dtype(df["step"].dtype) \
            or pd.api.types.is_timedelta64_dtype(df["step"].dtype):
        raise InputError(table, f"step is stored as datetimes ({df['step'].dtype}), expected "
                                "an integer >= 0")
    out = pd.DataFrame({"step": np.zeros(len(df), np.int64),
                        "candidate": np.array([""] * len(df), dtype=object)})
    for i, v in enumerate(df["step"].to_numpy()):
        fv = _number(v)
        if fv is None or not np.isfinite(fv) or fv != np.floor(fv) or fv < 0 or fv > 2**53:
            raise InputError(table, f"step must be an integer >= 0, got {_show(v)}", row=i)
        out.loc[i, "step"] = int(fv)
    known = set(candidates.ids)
    for i, v in enumerate(df["candidate"].to_numpy(dtype=object)):
        if _missing(v) or str(v).strip() == "":
            raise InputError(table, "candidate is missing", row=i)
        if str(v) not in known:
            raise InputError(table, f"unknown candidate {str(v)!r}; known: {candidates.ids}",
                             row=i)
        out.loc[i, "candidate"] = str(v)
    for r in resources:
        values = np.empty(len(df))
        for i, v in enumerate(df[r].to_numpy()):
            fv = _number(v)
            if fv is None or not np.isfinite(fv):
                raise InputError(table, f"{r} must be a finite number, got {_show(v)}", row=i)
            if fv < 0:
                raise InputError(table, f"{r} must be >= 0 (a realised cost), got {fv:g}", row=i)
            values[i] = fv
        out[r] = values
    for col in _OPTIONAL:
        if col in df.columns:
            out[col] = ["" if _missing(v) else str(v) for v in df[col].to_numpy(dtype=object)]
    dup = np.flatnonzero(out.duplicated(keep="first").to_numpy())
    if dup.size:  # one action recorded twice would charge the budget twice
        j = int(dup[0])
        first = int(np.flatnonzero((out == out.iloc[j]).all(axis=1).to_numpy())[0])
        raise InputError(table, f"exact duplicate of row {first} (every column is equal): one "
                                "executed action recorded twice would be charged to the "
                                "budget twice; remove the copy", row=j)
    return out


def check_executed(costs: pd.DataFrame, paired: pd.DataFrame | None = None,
                   gain_estimates: pd.DataFrame | None = None, table: str = "costs") -> None:
    """Refuse a cost row for a candidate that was not executed at that step.

    The actions executed at step t, as far as the other evidence tells: the ``candidate`` of
    every paired evaluation of step t and the ``source`` of every gain estimate of step t.
    When that set is not empty, every cost row of step t must name one of them.  (A step
    that no other table mentions — e.g. a model update without an evaluation — is not
    checked.)

    Raises
    ------
    InputError
        Naming ``table``, the row (0-based) and the action(s) the evidence records at that
        step.
    """
    executed: dict[int, dict[str, str]] = {}
    if paired is not None and len(paired):
        for t, c in zip(paired["step"], paired["candidate"], strict=True):
            executed.setdefault(int(t), {}).setdefault(str(c), "paired_evaluations")
    if gain_estimates is not None and len(gain_estimates) and "source" in gain_estimates:
        for t, c in zip(gain_estimates["step"], gain_estimates["source"], strict=True):
            if not _missing(c) and str(c) != "":
                executed.setdefault(int(t), {}).setdefault(str(c), "gain_estimates (source)")
    for i, (t, c) in enumerate(zip(costs["step"], costs["candidate"], strict=True)):
        known = executed.get(int(t))
        if known and str(c) not in known:
            ran = ", ".join(f"{k!r} ({v})" for k, v in known.items())
            raise InputError(table, f"a cost row for {str(c)!r} at step {int(t)}, which was "
                                    f"not executed at that step: the evidence records {ran} "
                                    f"at step {int(t)}", row=i)


def realised_spend(costs: pd.DataFrame, candidates: CandidateSet) -> xr.DataArray:
    """Σ realised costs per resource (a DataArray over ``resource``; zeros without rows)."""
    resources = list(candidates.resources)
    total = [float(costs[r].sum()) if r in costs.columns else 0.0 for r in resources]
    return xr.DataArray(np.array(total), dims="resource", coords={"resource": resources},
                        name="spent")


def remaining_budget(candidates: CandidateSet, costs: pd.DataFrame,
                     source: str = "candidates") -> xr.DataArray:
    """b_t = max(b_0 − Σ realised costs, 0), with b_0 the candidate file's ``[budget]``.

    A resource spent beyond b_0 (an overrun) is left at 0, the campaign's rule after an
    overrun; the returned budget's ``attrs["overspent"]`` then says so with the amounts
    (``"real_h: spent 14.2 > budget 12"``; empty when nothing is overspent).

    Raises
    ------
    InputError
        When the candidate file has no ``[budget]``.
    """
    if candidates.budget is None:
        raise InputError(source, "no [budget] table: give the budget explicitly (--budget "
                                 "real_h=…,compute=…,eng_h=…) or add [budget] to the file")
    spent = realised_spend(costs, candidates)
    b0 = candidates.budget.sel(resource=spent["resource"])
    left = (b0 - spent).values
    over = [f"{r}: spent {s:g} > budget {b:g}" for r, s, b, x in
            zip(spent["resource"].values, spent.values, b0.values, left, strict=True)
            if x < -1e-9]
    out = make_budget(dict(zip(spent["resource"].values, np.maximum(left, 0.0), strict=True)),
                      spent["resource"].values, table="remaining budget")
    out.attrs["overspent"] = "; ".join(over)
    return out


def executed_actions(costs: pd.DataFrame, paired: pd.DataFrame | None = None,
                     gain_estimates: pd.DataFrame | None = None, *,
                     costs_complete: bool = False) -> list[str]:
    """Candidates executed so far, in step order, without repeats of the same row.

    Taken from the costs table (one row per executed action); when it has no rows, from the
    paired evaluations (each one is an executed adaptation) and the ``source`` of gain
    estimates (each one is an executed diagnosis) — unless ``costs_complete`` says that the
    costs table lists every action (a campaign's own record), so that no rows means none.
    """
    if len(costs) or costs_complete:
        rows = costs.sort_values("step", kind="stable")
        return [str(c) for c in rows["candidate"]]
    frames = []
    if paired is not None and len(paired):
        frames.append(paired[["step", "candidate"]])
    if gain_estimates is not None and len(gain_estimates) and "source" in gain_estimates:
        src = gain_estimates[gain_estimates["source"].astype(str) != ""]
        frames.append(src[["step", "source"]].drop_duplicates().rename(
            columns={"source": "candidate"}))
    if not frames:
        return []
    rows = pd.concat(frames, ignore_index=True).sort_values("step", kind="stable")
    return [str(c) for c in rows["candidate"]]


def _number(v: object) -> float | None:
    if isinstance(v, bool | np.bool_) or _missing(v):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _missing(v: object) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float | np.floating) and np.isnan(v))


def _show(v: object) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)
