"""The closed loop s_t → m*_t → Y_t → s_{t+1} against a world, with an append-only log.

Each step: fit the models on D_t (compiled once), build q_t, decide, execute m*_t in the world,
append the evidence, deduct the realised cost b_{t+1} = b_t − ΔC, move to the new policy if m*
changed it, drop m* if it is not repeatable.  Stops on the economic stop, when the budget is
exhausted, or at the horizon T.  At the stop, the deployment chance constraint
P_deploy(unsafe | π_T) ≤ α_deploy is checked on the final policy from deployment evidence (the
world's deployment evaluation when it offers one) and logged as a final record with
``"deployment_check"``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import xarray as xr

from belief.candidates import CandidateSet
from belief.cvu import CVUSettings, cvu_for_state
from belief.decision import decide, decision_table
from belief.evidence import Evidence
from belief.fitting import BeliefFitter, FitSettings
from belief.functionals import Functional, parse_functional
from belief.risk import SafetyGate, deployment_check
from belief.scores import check_beta
from belief.state import State
from belief.weights import WeightRule, as_weight_rule

__all__ = ["CampaignResult", "CampaignSettings", "World", "run_campaign"]


class World(Protocol):
    """What the loop needs from a world (synthetic or real)."""

    candidates: CandidateSet

    @property
    def initial_policy(self) -> str: ...

    def execute(self, candidate_id: str, step: int) -> Any:
        """Run m at ``step``; returns an object with ``paired``, ``safety`` (DataFrames),
        ``cost`` (mapping resource → realised amount) and ``policy`` (the policy after)."""

    # Optional: ``deployment_evaluation(step, policy) -> DataFrame`` of ``deployment_safety``
    # rows; when present the loop runs it on the final policy at the stop.


@dataclass(frozen=True)
class CampaignSettings:
    """Settings of one campaign.

    Attributes
    ----------
    horizon : int
        T, the maximum number of steps.
    functional : str or Functional
    weights : WeightRule or mapping
    beta : float
    gate : SafetyGate
    fit : FitSettings
    seed : int
    cvu : CVUSettings
        Monte Carlo settings of CVU (computed when β > 0, before the horizon; exact refits
        where k̂ > 0.7, at most ``cvu.max_refits`` per candidate).
    alpha_deploy : float
        Ceiling of the deployment chance constraint P_deploy(unsafe | π_T) ≤ α_deploy, checked
        at the stop with the gate's δ and method (never mixed with execution events).
    """

    horizon: int = 6
    functional: str | Functional = "mean"
    weights: WeightRule | dict[str, float] | None = None
    beta: float = 0.0
    gate: SafetyGate = field(default_factory=SafetyGate)
    fit: FitSettings = field(default_factory=FitSettings)
    seed: int = 0
    stability_resamples: int = 200
    cvu: CVUSettings = field(default_factory=lambda: CVUSettings(max_refits=4))
    alpha_deploy: float = 0.05

    def __post_init__(self) -> None:
        parse_functional(self.functional)
        a = self.alpha_deploy
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a < 1:
            from belief.errors import InputError

            raise InputError("alpha_deploy", f"alpha_deploy must satisfy 0 < alpha_deploy < 1, "
                                             f"got {a!r}")
        check_beta(self.beta)
        if not isinstance(self.horizon, int) or self.horizon < 1:
            from belief.errors import InputError

            raise InputError("horizon", f"horizon must be an integer >= 1, got {self.horizon!r}")


@dataclass
class CampaignResult:
    """What a campaign produced.

    ``deployment_check`` is the result of :func:`belief.risk.deployment_check` on the final
    policy (pass/fail with both bounds and the reason).
    """

    decisions: list[xr.Dataset]
    evidence: Evidence
    budget: xr.DataArray
    policy: str
    history: list[str]
    stop_reason: str
    belief: xr.Dataset
    idata: xr.DataTree
    step_seconds: list[float]
    deployment_check: xr.Dataset | None = None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        return None if not np.isfinite(obj) else float(obj)
    return obj


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync, so a crash loses at most the record being written."""
    line = json.dumps(_jsonable(record), sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def run_campaign(world: World, settings: CampaignSettings, out: Path | None = None, *,
                 on_step: Callable[[int, xr.Dataset, Any], None] | None = None,
                 fitter: BeliefFitter | None = None) -> CampaignResult:
    """Run the closed loop for at most ``settings.horizon`` steps.

    Parameters
    ----------
    world : World
        Executes candidates (the synthetic world, or a manual one).
    settings : CampaignSettings
    out : Path, optional
        Folder for the campaign log (``campaign_log.jsonl``), per-step decision tables
        (``decisions/step_XXX.csv``), the evidence tables and the final belief.
    on_step : callable, optional
        Called as ``on_step(step, decision, outcome)`` after each step (progress display).
    fitter : BeliefFitter, optional
        Re-use an already compiled fitter.
    """
    candidates = world.candidates
    weights = as_weight_rule(settings.weights if settings.weights is not None
                             else getattr(world, "weight_values", None))
    fitter = fitter or BeliefFitter(candidates, settings.fit)
    evidence = Evidence(candidates)
    if hasattr(world, "initial_evidence"):
        evidence = evidence.append(**world.initial_evidence())
    budget = candidates.budget if candidates.budget is not None else world.initial_budget
    policy = world.initial_policy
    history: list[str] = []
    available = list(candidates.ids)
    decisions: list[xr.Dataset] = []
    step_seconds: list[float] = []
    log_path = None
    if out is not None:
        out = Path(out)
        (out / "decisions").mkdir(parents=True, exist_ok=True)
        log_path = out / "campaign_log.jsonl"
        log_path.unlink(missing_ok=True)
    stop_reason = f"horizon T = {settings.horizon} reached"
    idata = belief = None
    for step in range(settings.horizon):
        t0 = time.perf_counter()
        seed = int(np.random.default_rng([settings.seed, step]).integers(2**31))
        idata, belief = fitter.fit(evidence, policy, step, seed)
        state = State(step=step, budget=budget, policy=policy, belief=belief,
                      history=tuple(history), horizon=settings.horizon,
                      available=tuple(available))
        cvu = None
        if settings.beta > 0 and not state.is_terminal:
            from belief.refit import exact_refit

            cvu = cvu_for_state(state, candidates, functional=settings.functional,
                                weights=weights, gate=settings.gate,
                                settings=replace(settings.cvu, seed=seed),
                                refit=exact_refit(fitter, evidence, state, settings.cvu.trials,
                                                  seed, settings.cvu.refit_draws))
        decision = decide(state, candidates, functional=settings.functional, weights=weights,
                          beta=settings.beta, gate=settings.gate, cvu=cvu,
                          stability_resamples=settings.stability_resamples, seed=seed)
        decisions.append(decision)
        step_seconds.append(time.perf_counter() - t0)
        if out is not None:
            decision_table(decision).to_csv(out / "decisions" / f"step_{step:03d}.csv")
        if decision.attrs["stop"]:
            stop_reason = decision.attrs["stop_reason"]
            record = {"step": step, "policy": policy, "budget": _named(budget),
                      "chosen": None, "stop": True, "stop_reason": stop_reason,
                      "decision": _records(decision), "seed": seed}
            if log_path:
                append_record(log_path, record)
            if on_step:
                on_step(step, decision, None)
            break
        chosen = decision.attrs["chosen"]
        outcome = world.execute(chosen, step)
        evidence = evidence.append(paired=outcome.paired, safety=outcome.safety,
                                   gain_estimates=getattr(outcome, "gain_estimates", None))
        cost = np.array([float(outcome.cost.get(r, 0.0)) for r in budget["resource"].values])
        new_budget = budget - cost
        record = {"step": step, "policy": policy, "budget": _named(budget), "chosen": chosen,
                  "stop": False, "decision": _records(decision), "seed": seed,
                  "realised_cost": dict(zip(budget["resource"].values, cost, strict=True)),
                  "budget_after": _named(new_budget), "policy_after": outcome.policy,
                  "paired": outcome.paired.to_dict("records"),
                  "gain_estimates": getattr(outcome, "gain_estimates",
                                            pd.DataFrame()).to_dict("records"),
                  "safety": outcome.safety.to_dict("records"),
                  "flip_probability": decision.attrs["flip_probability"]}
        if hasattr(outcome, "true_gain"):
            record["true_gain"] = outcome.true_gain
        if log_path:
            append_record(log_path, record)
        budget = new_budget
        policy = outcome.policy
        history.append(chosen)
        if not candidates[chosen].repeatable:
            available.remove(chosen)
        if on_step:
            on_step(step, decision, outcome)
    else:
        # Horizon reached: refresh the belief on the last evidence for the final report.
        seed = int(np.random.default_rng([settings.seed, settings.horizon]).integers(2**31))
        idata, belief = fitter.fit(evidence, policy, settings.horizon, seed)
    # At the stop: the deployment chance constraint on π_T, from deployment evidence only.
    end_step = (int(decisions[-1].attrs["step"]) if decisions and decisions[-1].attrs["stop"]
                else settings.horizon)
    rows = None
    if hasattr(world, "deployment_evaluation"):
        rows = world.deployment_evaluation(end_step, policy)
        evidence = evidence.append(deployment_safety=rows)
    deployment = deployment_check(evidence, policy, settings.alpha_deploy, settings.gate.delta,
                                  settings.gate.method)
    if log_path:
        append_record(log_path, {"step": end_step, "record": "deployment_check",
                                 "policy": policy, "deployment_check": dict(deployment.attrs),
                                 "deployment_safety": [] if rows is None
                                 else rows.to_dict("records")})
    result = CampaignResult(decisions, evidence, budget, policy, history, stop_reason, belief,
                            idata, step_seconds, deployment)
    if out is not None:
        _write_outputs(out, result)
    return result


def _named(da: xr.DataArray) -> dict[str, float]:
    return {str(r): float(v) for r, v in zip(da["resource"].values, da.values, strict=True)}


def _records(decision: xr.Dataset) -> list[dict[str, Any]]:
    return decision_table(decision).reset_index().to_dict("records")


def _write_outputs(out: Path, result: CampaignResult) -> None:
    from belief.persistence import save_belief

    ev = out / "evidence"
    ev.mkdir(exist_ok=True)
    for name, table in result.evidence.tables().items():
        table.to_csv(ev / f"{name}.csv", index=False)
    save_belief(out / "belief.nc", result.belief, result.idata)
    summary = pd.DataFrame({"step": [int(d.attrs["step"]) for d in result.decisions],
                            "chosen": [d.attrs["chosen"] for d in result.decisions],
                            "flip_probability": [d.attrs["flip_probability"]
                                                 for d in result.decisions]})
    summary.to_csv(out / "choices.csv", index=False)
