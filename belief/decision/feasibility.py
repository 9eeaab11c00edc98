"""The feasible set M_t^feasible = M^safe ∩ M^budget (∩ the candidates still available).

- M^budget = {m : ΔC_r(m) ≤ b_{t,r} for every resource r};
- M^safe   = {m : UCB_{1−δ}[P_exec(unsafe | s_t, m)] ≤ α_exec} (:class:`SafetyGate`; trivially
  true for candidates that do not drive hardware);
- available: a non-repeatable candidate leaves the set once executed.

Computed once per decision (:func:`feasibility`) and handed to CVU, which applies the same
budget rule to the budget after m (:func:`affordable`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from belief.decision.safety import SafetyGate
from belief.decision.state import State
from belief.inputs.candidates import CandidateSet

__all__ = ["Feasibility", "affordable", "budget_reasons", "feasibility"]

_TOL = 1e-12


def affordable(costs: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """M^budget as a mask: ΔC_r(m) ≤ b_r for every resource r; costs (..., C, R), budget
    (..., R) broadcast."""
    return (np.asarray(costs) <= np.asarray(budget)[..., None, :] + _TOL).all(axis=-1)


def budget_reasons(costs: np.ndarray, budget: np.ndarray, resources: list[str]) -> list[str]:
    """Why each candidate is (not) within the budget, naming the failing resources."""
    reasons = []
    for row in np.asarray(costs, dtype=float):
        bad = [f"{r} needs {c:g} > {b:g} left"
               for r, c, b in zip(resources, row, budget, strict=True) if c > b + _TOL]
        reasons.append("over budget: " + "; ".join(bad) if bad else "within budget")
    return reasons


@dataclass(frozen=True)
class Feasibility:
    """The feasibility tests of one decision, over the candidates in set order.

    Attributes
    ----------
    available, affordable, safe : bool arrays (C,)
    budget_reason : list of str
    safety : Dataset
        The gate's bounds and reasons (:meth:`SafetyGate.evaluate`).
    """

    available: np.ndarray
    affordable: np.ndarray
    safe: np.ndarray
    budget_reason: list[str]
    safety: xr.Dataset

    @property
    def feasible(self) -> np.ndarray:
        """M_t^feasible as a mask."""
        return self.available & self.affordable & self.safe


def feasibility(state: State, candidates: CandidateSet, gate: SafetyGate,
                costs: np.ndarray, budget: np.ndarray) -> Feasibility:
    """Every feasibility test at s_t (costs (C, R) and budget (R,) in the set's resource order)."""
    ids = candidates.ids
    available = (np.ones(len(ids), bool) if state.available is None
                 else np.isin(ids, list(state.available)))
    belief = state.belief
    safety = gate.evaluate(candidates, belief["executions"], belief["unsafe"],
                           belief.get("p_unsafe"))
    return Feasibility(available, affordable(costs, budget), safety["safe"].values.astype(bool),
                       budget_reasons(costs, budget, list(candidates.resources)), safety)
