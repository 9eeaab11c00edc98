"""The campaign log: append-only JSON lines, one record per step, crash-safe.

Layout (``campaign_log.jsonl``), one JSON object per line:

- ``{"record": "header", ...}`` — first line: format, package version, world description,
  settings, candidates, initial budget, initial policy and initial evidence;
- ``{"record": "step", "step": t, ...}`` — one per executed step: state summary (policy,
  budget, λ, reliability), the decision table, the chosen candidate, the outcome's evidence
  rows, the realised cost, the budget and policy afterwards, and the seed; at a budget overrun
  (a realised cost above the budget left, :mod:`belief.campaign.overrun`) also ``overrun``
  {r: {realised, budget_left, probability}} and ``budget_after`` clamped at 0;
- ``{"record": "stop", "step": t, ...}`` — the decision that stopped the campaign, if any, or
  the overrun that stopped it (with its ``overrun``);
- ``{"record": "deployment_check", ...}`` — the deployment chance constraint at the end.

Each record is written with one ``write`` of a full line followed by ``fsync``: a crash while
writing leaves at most a truncated last line, which :func:`read_log` reports and
:func:`repair_tail` cuts off before a resumed campaign appends again; earlier records are
never rewritten.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from belief.campaign.overrun import check_overrun_record
from belief.errors import InputError
from belief.files import jsonable

__all__ = ["LOG_FORMAT", "CampaignLog", "append_record", "read_log", "repair_tail"]

LOG_FORMAT = "belief-campaign-log-1"
LOG_NAME = "campaign_log.jsonl"


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync, so a crash loses at most the record being written."""
    line = json.dumps(jsonable(record), sort_keys=True, ensure_ascii=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


@dataclass
class CampaignLog:
    """A parsed, validated log.

    Attributes
    ----------
    header : dict
    steps : list of dict
        The ``step`` records, in order, up to the first broken record.
    stop : dict or None
        The ``stop`` record, if the campaign stopped by decision.
    deployment : dict or None
        The ``deployment_check`` record, if written.
    problem : str or None
        The first broken record and rule (records after it were not read).
    good_bytes : int
        Length of the intact prefix of the file (where a resumed campaign appends).
    """

    header: dict[str, Any]
    steps: list[dict[str, Any]]
    stop: dict[str, Any] | None
    deployment: dict[str, Any] | None
    problem: str | None
    good_bytes: int
    path: Path

    @property
    def finished(self) -> bool:
        """Whether the campaign ended (a stop or deployment record, or the horizon reached)."""
        horizon = self.header.get("settings", {}).get("horizon")
        return (self.stop is not None or self.deployment is not None
                or (horizon is not None and len(self.steps) >= horizon))


def read_log(path: str | Path, *, strict: bool = False) -> CampaignLog:
    """Read and validate a campaign log.

    Reading stops at the first broken record (unparsable or truncated line, missing or
    out-of-order step, unknown candidate, cost above the budget that was left without a
    matching ``overrun`` entry, a step after an overrun, budget that does not follow from the
    costs); the problem is reported in ``CampaignLog.problem`` naming the
    record (1-based line) and the rule.  With ``strict=True`` a problem raises
    :class:`~belief.errors.InputError` instead.

    Raises
    ------
    InputError
        When the file is missing, empty, or its header is unusable (always), or on any problem
        with ``strict=True``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / LOG_NAME
    table = str(path)
    if not path.exists():
        raise InputError(table, "campaign log not found")
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    offset = 0
    header: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = []
    stop = deployment = None
    problem = None
    context: _Context | None = None
    good = 0
    for i, line in enumerate(lines):
        line_no = i + 1
        is_last = i == len(lines) - 1
        end = offset + len(line) + (0 if is_last else 1)
        if is_last and not line:
            break
        if is_last:  # no trailing newline: the writer died mid-record
            problem = f"record {line_no}: truncated final record (no end of line)"
            break
        try:
            rec = json.loads(line.decode("utf-8"))
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError) as err:
            problem = f"record {line_no}: not a JSON object ({err})"
            break
        kind = rec.get("record")
        if header is None:
            if kind != "header" or rec.get("format") != LOG_FORMAT:
                raise InputError(table, f"record {line_no}: the first record must be a "
                                        f"{LOG_FORMAT!r} header", row=None)
            context = _check_header(rec, table)
            header = rec
        elif deployment is not None or (stop is not None and kind != "deployment_check"):
            problem = (f"record {line_no}: a {kind!r} record after the campaign's "
                       f"{'stop' if stop is not None else 'deployment check'}")
            break
        elif kind == "step":
            if steps and steps[-1].get("overrun"):
                problem = (f"record {line_no}: a step record after the budget overrun of step "
                           f"{steps[-1]['step']} (a campaign stops at an overrun)")
                break
            problem = _check_step(rec, header, steps, line_no, context)
            if problem:
                break
            steps.append(rec)
        elif kind == "stop":
            if rec.get("step") != len(steps):
                problem = (f"record {line_no}: stop record for step {rec.get('step')!r} but "
                           f"{len(steps)} steps were logged")
                break
            stop = rec
        elif kind == "deployment_check":
            deployment = rec
        else:
            problem = f"record {line_no}: unknown record type {kind!r}"
            break
        offset = end
        good = end
    if header is None:
        raise InputError(table, f"{problem}; the first record must be a {LOG_FORMAT!r} header"
                         if problem else "empty campaign log (no header record)")
    if problem and strict:
        raise InputError(table, problem)
    return CampaignLog(header, steps, stop, deployment, problem, good, path)


@dataclass
class _Context:
    """What the header fixes, used to validate the step records."""

    candidates: Any
    resources: list[str]
    evidence: Any


def _check_header(rec: dict[str, Any], table: str) -> _Context:
    """Validate the header record (raises InputError naming record 1 and the rule)."""
    from belief.inputs.candidates import candidates_from_dict
    from belief.inputs.evidence import Evidence
    from belief.inputs.resources import make_budget

    where = "record 1 (header)"
    for key, kind in (("candidates", dict), ("initial_budget", dict), ("initial_policy", str),
                      ("settings", dict), ("initial_evidence", dict), ("world", dict)):
        if not isinstance(rec.get(key), kind):
            raise InputError(table, f"{where}: {key} must be a {kind.__name__}")
    try:
        cands = candidates_from_dict(rec["candidates"], source="candidates")
        make_budget(rec["initial_budget"], cands.resources, table="initial_budget")
        evidence = Evidence(cands).append(**_tables(rec["initial_evidence"], "initial_evidence"))
    except InputError as err:
        raise InputError(table, f"{where}: {err}") from None
    return _Context(cands, list(cands.resources), evidence)


def _tables(obj: Any, name: str) -> dict[str, Any]:
    """Evidence tables of a record as DataFrames (lists of row objects only)."""
    import pandas as pd

    if not isinstance(obj, dict):
        raise InputError(name, "must map table names to lists of rows")
    out = {}
    for key, rows in obj.items():  # unknown table names are refused by Evidence.append
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError(name, f"table {key!r} must be a list of row objects")
        if rows:
            out[key] = pd.DataFrame(rows)
    return out


def _check_step(rec: dict[str, Any], header: dict[str, Any], steps: list[dict[str, Any]],
                line_no: int, context: _Context) -> str | None:
    where = f"record {line_no}"
    expected = len(steps)
    step = rec.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return f"{where}: step must be an integer, got {step!r}"
    if step > expected:
        return f"{where}: step {step} follows step {expected - 1}: step {expected} is missing"
    if step < expected:
        return f"{where}: step {step} is out of order (expected {expected})"
    chosen = rec.get("chosen")
    if chosen not in context.candidates.ids:
        return f"{where}: decision names unknown candidate {chosen!r}"
    for key in ("policy", "policy_after"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            return f"{where}: {key} must be a non-empty string"
    previous_policy = steps[-1]["policy_after"] if steps else header["initial_policy"]
    if rec["policy"] != previous_policy:
        return (f"{where}: policy {rec['policy']!r} does not follow from the previous record "
                f"({previous_policy!r})")
    cand = context.candidates[chosen]
    if not cand.repeatable and any(r["chosen"] == chosen for r in steps):
        return f"{where}: {chosen!r} is not repeatable but was executed before"
    paired = rec.get("outcome", {}).get("paired", []) if isinstance(rec.get("outcome"),
                                                                     dict) else []
    if cand.changes_policy:
        ok = isinstance(paired, list) and any(
            isinstance(r, dict) and r.get("candidate") == chosen
            and r.get("policy") == rec["policy"] and r.get("treated_policy") == rec["policy_after"]
            for r in paired)
        if not ok:
            return (f"{where}: {chosen!r} changes the policy, but no paired evaluation "
                    f"{rec['policy']!r} → {rec['policy_after']!r} of it is in the outcome")
    elif rec["policy_after"] != rec["policy"]:
        return f"{where}: {chosen!r} does not change the policy, but policy_after differs"
    budget = rec.get("budget")
    cost = rec.get("realised_cost")
    after = rec.get("budget_after")
    if not (isinstance(budget, dict) and isinstance(cost, dict) and isinstance(after, dict)):
        return f"{where}: budget, realised_cost and budget_after are required"
    resources = context.resources
    for name, values in (("budget", budget), ("realised_cost", cost),
                         ("budget_after", after)):
        if sorted(values) != sorted(resources):
            return f"{where}: {name} must give every resource of {resources}"
        bad = [r for r, v in values.items()
               if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v)]
        if bad:
            return f"{where}: {name} {bad[0]} must be a finite number"
    previous = steps[-1]["budget_after"] if steps else header["initial_budget"]
    for r in resources:
        if not np.isclose(previous[r], budget[r]):
            return (f"{where}: budget {r}={budget[r]} does not follow from the previous record "
                    f"({previous[r]})")
    for r in resources:
        if cost[r] < 0:
            return f"{where}: realised cost {r}={cost[r]!r} must be >= 0"
    problem = check_overrun_record(rec, budget, cost)
    if problem:
        return f"{where}: {problem}"
    for r in resources:
        if not np.isclose(after[r], max(budget[r] - cost[r], 0.0)):
            return f"{where}: budget_after {r} is not max(budget − realised cost, 0)"
    try:
        context.evidence = context.evidence.append(**_tables(rec.get("outcome", {}),
                                                             "outcome"))
    except InputError as err:
        return f"{where}: outcome refused: {err}"
    return None


def repair_tail(log: CampaignLog) -> None:
    """Cut a broken tail off the file (only bytes after the last intact record)."""
    size = log.path.stat().st_size
    if log.good_bytes < size:
        with open(log.path, "rb+") as fh:
            fh.truncate(log.good_bytes)
            fh.flush()
            os.fsync(fh.fileno())
