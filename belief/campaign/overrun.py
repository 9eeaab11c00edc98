"""Budget overruns of a campaign: a realised cost above the budget that was left.

An executed action m at step t whose realised cost ΔC_r(m) exceeds the budget left b_t,r in
some resource r is an *overrun*.  It is recorded, not refused: per overrun resource the
realised cost, the budget left and the probability the belief gave it at decision time,

    p_r = Pr(ΔC_r(m) > b_t,r | q_t)

— the chosen row's ``overrun_<r>`` of the decision table when q_t held cost draws (the chance
constraint's estimate, :func:`belief.decision.feasibility.overrun_probability`), else the known
cost's 1[c̃_r(m) > b_t,r] (0 for a feasible pick).  The budget left is clamped at zero,
b_{t+1,r} = max(b_t,r − ΔC_r(m), 0), and the campaign stops (:mod:`belief.campaign.loop`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from belief.decision.schema import Vars, per_resource

__all__ = ["TOL", "check_overrun_record", "decision_overrun", "find_overrun", "overrun_reason"]

TOL = 1e-9
"""Tolerance of "exceeds the budget left" (the log's rule, :mod:`belief.campaign.log`)."""


def decision_overrun(decision: xr.Dataset, chosen: str, nominal: Mapping[str, float],
                     budget: Mapping[str, float]) -> dict[str, float]:
    """Pr(ΔC_r(m) > b_t,r) the decision gave the chosen candidate, per resource.

    The decision's ``overrun_<r>`` at ``chosen`` when it has one (cost draws in q_t); else
    1[c̃_r(m) > b_t,r + TOL] from the nominal (known) cost.
    """
    out = {}
    for r, b in budget.items():
        var = per_resource(Vars.overrun, r)
        if var in decision and chosen in decision["candidate"].values:
            out[r] = float(decision[var].sel(candidate=chosen))
        else:
            out[r] = float(float(nominal.get(r, 0.0)) > float(b) + TOL)
    return out


def find_overrun(cost: Mapping[str, float], budget: Mapping[str, float],
                 probability: Mapping[str, float | None] | None) -> dict[str, dict[str, Any]]:
    """The overrun resources {r: {"realised", "budget_left", "probability"}} (empty: none).

    ``probability`` is the decision-time Pr(ΔC_r(m) > b_t,r) per resource (None where it is
    not known, e.g. an outcome applied without its decision).
    """
    probability = probability or {}
    return {r: {"realised": float(cost[r]), "budget_left": float(b),
                "probability": (None if probability.get(r) is None
                                else float(probability[r]))}
            for r, b in budget.items() if float(cost[r]) > float(b) + TOL}


def overrun_reason(step: int, candidate: str, overrun: Mapping[str, Mapping[str, Any]]) -> str:
    """The stop reason of a campaign stopped by an overrun, naming every overrun resource."""
    parts = []
    for r, o in overrun.items():
        p = o.get("probability")
        ptxt = "not known" if p is None else f"{p:.3g}"
        parts.append(f"{r}: realised {o['realised']:.4g} > {o['budget_left']:.4g} left "
                     f"(Pr(overrun) at decision time = {ptxt})")
    return (f"budget overrun at step {step}: {candidate!r} consumed more than the budget left "
            f"({'; '.join(parts)}); the budget left is clamped at 0")


def check_overrun_record(rec: Mapping[str, Any], budget: Mapping[str, float],
                         cost: Mapping[str, float]) -> str | None:
    """Why a step record's ``overrun`` entry does not match its costs and budget (None: it
    does).  Every resource with cost > budget must be in it with those amounts and a
    probability in [0, 1] (or null), and no other resource."""
    over = {r for r in budget if cost[r] > budget[r] + TOL}
    entry = rec.get("overrun")
    if not over:
        return None if entry is None else "an overrun is recorded but no cost exceeds the budget"
    if not isinstance(entry, Mapping):
        r = sorted(over)[0]
        return (f"cost {r}={cost[r]:g} exceeds the budget that was left ({budget[r]:g}) and "
                "no overrun is recorded")
    if set(entry) != over:
        return (f"overrun names {sorted(entry)}, but the costs exceed the budget left in "
                f"{sorted(over)}")
    for r in sorted(over):
        o = entry[r]
        if not isinstance(o, Mapping) or not {"realised", "budget_left", "probability"} <= set(o):
            return f"overrun {r} must give realised, budget_left and probability"
        if not (np.isclose(o["realised"], cost[r]) and np.isclose(o["budget_left"], budget[r])):
            return f"overrun {r} does not match the realised cost and the budget left"
        p = o["probability"]
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float)
                              or not 0.0 <= p <= 1.0):
            return f"overrun {r}: probability must be a number in [0, 1] or null, got {p!r}"
    return None
