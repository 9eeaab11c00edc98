"""A logged campaign read back: the log this project writes (``campaign_log.jsonl`` or its
folder) or the plain CSV layout a team exports (described in :mod:`belief.campaign.replay`),
as a :class:`LoggedCampaign` — its candidates, starting budget, steps, evidence and settings,
cut at the first broken record.  Replay re-decides it; a fit with ``--past`` learns from it
(:mod:`belief.campaign.past`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.campaign.log import LOG_NAME, read_log
from belief.campaign.loop import (
    CampaignSettings,
    header_settings,
    unreproducible_rule,
)
from belief.campaign.overrun import TOL
from belief.campaign.world import model_update_row
from belief.errors import InputError
from belief.inputs.candidate_file import load_candidate_file
from belief.inputs.candidates import CandidateSet, candidates_from_dict
from belief.inputs.evidence import Evidence, read_table
from belief.inputs.evidence_dir import check_known_columns
from belief.inputs.resources import make_budget
from belief.posterior.registry import refuse_unknown_models

__all__ = ["EVIDENCE_TABLES", "LoggedCampaign", "load_campaign"]

EVIDENCE_TABLES = ("paired_evaluations", "safety_events", "gain_estimates",
                   "policy_evaluations", "model_updates", "direction_estimates")


@dataclass
class LoggedCampaign:
    """A past campaign normalised for replay (from a JSON log or the CSV layout)."""

    candidates: CandidateSet
    initial_budget: xr.DataArray
    initial_policy: str
    initial_evidence: dict[str, pd.DataFrame]
    steps: list[dict[str, Any]]  # step, chosen, policy, policy_after, cost, outcome tables,
    # overrun (None, or resource → realised, budget_left, probability: the log's entry)
    stop: dict[str, Any] | None = None
    settings: CampaignSettings | None = None
    problem: str | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def evidence_before(self, t: int) -> Evidence:
        """Initial evidence plus the outcomes of steps < t."""
        ev = Evidence(self.candidates).append(**self.initial_evidence)
        for rec in self.steps[:t]:
            ev = ev.append(**rec["outcome"])
            if "model_updates" not in rec["outcome"]:
                ev = ev.append(model_updates=model_update_row(
                    self.candidates, rec["chosen"], int(rec["step"]), rec["policy"]))
        return ev

    def costs_before(self, t: int) -> pd.DataFrame:
        """The realised costs of steps < t (the ``costs`` table of :mod:`belief.inputs.costs`,
        as :meth:`belief.campaign.loop.Campaign.costs_table` wrote it)."""
        resources = list(self.initial_budget["resource"].values)
        rows = [{"step": int(rec["step"]), "candidate": rec["chosen"],
                 **{r: float(rec["cost"].get(r, 0.0)) for r in resources},
                 "policy": rec["policy"]} for rec in self.steps[:t]]
        return pd.DataFrame(rows, columns=["step", "candidate", *resources, "policy"])

    def overrun(self) -> str:
        """The budget overrun that ended the campaign, in words ("" without one): the step,
        and per resource the realised cost, the budget left and the decision-time
        probability (unknown in the CSV layout)."""
        for rec in self.steps:
            if rec.get("overrun"):
                return f"step {rec['step']}: " + "; ".join(
                    f"{r} = {o['realised']:g} > {o['budget_left']:g} left (Pr at decision "
                    + ("unknown" if o["probability"] is None else f"{o['probability']:.3g}")
                    + ")" for r, o in rec["overrun"].items())
        return ""

    def budget_before(self, t: int) -> xr.DataArray:
        """b_t = max(b_{t-1} − ΔC_{t-1}, 0) per resource: clamped at 0 after an overrun, as in
        the campaign (:mod:`belief.campaign.loop`)."""
        b = self.initial_budget.copy()
        for rec in self.steps[:t]:
            b = (b - np.array([rec["cost"].get(r, 0.0) for r in b["resource"].values])
                 ).clip(min=0.0)
        return b


def _frames(records: dict[str, list[dict[str, Any]]]) -> dict[str, pd.DataFrame]:
    return {k: pd.DataFrame(v) for k, v in records.items() if v}


def _from_json_log(path: Path) -> LoggedCampaign:
    log = read_log(path)
    h = log.header
    cands = candidates_from_dict(h["candidates"], source=str(log.path))
    budget = make_budget(h["initial_budget"], cands.resources, table=str(log.path))
    steps = [{"step": r["step"], "chosen": r["chosen"], "policy": r["policy"],
              "policy_after": r["policy_after"], "cost": dict(r["realised_cost"]),
              "outcome": _frames(r.get("outcome", {})), "overrun": r.get("overrun")}
             for r in log.steps]
    extra: dict[str, Any] = {}
    problem = unreproducible_rule(h.get("settings"))
    if problem:  # replayable with explicit settings only
        settings, extra["settings_problem"] = None, problem
    else:
        settings = header_settings(h, log.path, custom_weights=True)
    # a stop record written after a budget overrun is not a decision to stop (the campaign was
    # stopped by the overrun, belief.campaign.loop): there is no logged choice to replay
    stop = (None if log.stop is None or "overrun" in log.stop
            else {"step": log.stop["step"]})
    return LoggedCampaign(cands, budget, h["initial_policy"],
                          _frames(h.get("initial_evidence", {})), steps, stop, settings,
                          log.problem, str(log.path), extra)


def _from_csv_layout(folder: Path) -> LoggedCampaign:
    cfile = load_candidate_file(folder / "candidates.toml")
    refuse_unknown_models(cfile.priors, f"{folder / 'candidates.toml'} [priors]")
    cands = cfile.candidates
    # the file's [weights] are the campaign's λ (a replay needs no --weights then)
    settings = CampaignSettings(weights=cfile.weights) if cfile.weights else None
    if cands.budget is None:
        raise InputError(str(folder / "candidates.toml"), "[budget] (the starting budget) is "
                                                          "required for replay")
    steps_path = folder / "steps.csv"
    table = str(steps_path)
    steps_df = read_table(steps_path, table)
    required = ["step", "candidate", "policy", "policy_after",
                *[f"cost_{r}" for r in cands.resources]]
    missing = [c for c in required if c not in steps_df.columns]
    if missing:
        raise InputError(table, f"missing required column(s) {missing}; required: {required}")
    evidence = {}
    for name in EVIDENCE_TABLES:
        if (folder / f"{name}.csv").exists():
            evidence[name] = read_table(folder / f"{name}.csv")
            check_known_columns(name, evidence[name], str(folder / f"{name}.csv"))
    initial = {}
    for name in EVIDENCE_TABLES:
        if (folder / "initial" / f"{name}.csv").exists():
            initial[name] = read_table(folder / "initial" / f"{name}.csv")
            check_known_columns(name, initial[name], str(folder / "initial" / f"{name}.csv"))
    Evidence(cands).append(**initial)  # validates (raises naming the table and row)
    budget = cands.budget.copy()
    steps, problem = [], None
    for i, row in enumerate(steps_df.to_dict("records")):
        where = f"{table}, record {i + 1}"
        try:
            step = int(row["step"])
        except (TypeError, ValueError):
            problem = f"{where}: step must be an integer, got {row['step']!r}"
            break
        if step != len(steps):
            problem = (f"{where}: step {step} is out of order (expected {len(steps)})"
                       if step < len(steps) else
                       f"{where}: step {len(steps)} is missing (found {step})")
            break
        if row["candidate"] not in cands.ids:
            problem = f"{where}: decision names unknown candidate {row['candidate']!r}"
            break
        if steps and steps[-1]["overrun"]:
            problem = (f"{where}: a step after the budget overrun of step {steps[-1]['step']} "
                       "(a campaign stops at an overrun)")
            break
        cost, overrun = {}, {}
        for r, left in zip(cands.resources, budget.values, strict=True):
            try:
                c = float(row[f"cost_{r}"])
            except (TypeError, ValueError):
                c = float("nan")
            if not np.isfinite(c) or c < 0:
                problem = f"{where}: cost_{r} must be a number >= 0, got {row[f'cost_{r}']!r}"
                break
            if c > left + TOL:  # an overrun: recorded as the campaign records it
                overrun[r] = {"realised": c, "budget_left": float(left), "probability": None}
            cost[r] = c
        if problem:
            break
        outcome = {name: df[df["step"] == step] for name, df in evidence.items()
                   if "step" in df.columns}
        try:
            Evidence(cands).append(**initial).append(**outcome)
        except InputError as err:
            problem = f"{where}: evidence of this step refused: {err}"
            break
        budget = (budget - np.array([cost[r] for r in cands.resources])).clip(min=0.0)
        steps.append({"step": step, "chosen": row["candidate"], "policy": str(row["policy"]),
                      "policy_after": str(row["policy_after"]), "cost": cost,
                      "outcome": {k: v for k, v in outcome.items() if len(v)},
                      "overrun": overrun or None})
    first_policy = steps[0]["policy"] if steps else str(steps_df["policy"].iloc[0]) \
        if len(steps_df) else "pi0"
    return LoggedCampaign(cands, cands.budget, first_policy, initial, steps, None, settings,
                          problem, str(folder))


def load_campaign(path: str | Path) -> LoggedCampaign:
    """Read a campaign for replay: a JSON log (file or run folder) or a CSV-layout folder."""
    path = Path(path)
    if path.is_dir() and (path / LOG_NAME).exists():
        return _from_json_log(path / LOG_NAME)
    if path.is_dir() and (path / "steps.csv").exists():
        return _from_csv_layout(path)
    if path.is_file():
        return _from_json_log(path)
    raise InputError(str(path), f"not a campaign log: expected {LOG_NAME}, a folder holding it, "
                                "or a folder with candidates.toml and steps.csv")
