"""The feasible set M_t^feasible = M^safe ∩ M^budget (∩ the candidates still available).

- M^budget = {m : ΔC_r(m) ≤ b_{t,r} for every resource r} with known costs (:func:`affordable`);
  with uncertain costs (joint predictive draws of ΔC, :mod:`models.costs`) the chance
  constraint M^budget = {m : Pr(ΔC_r(m) ≤ b_{t,r}) ≥ 1 − ε_budget for every r}
  (:class:`ChanceConstraint`, :func:`overrun_probability`); with known costs and ε_budget = 0
  the two are the same rule;
- M^safe   = {m : UCB_{1−δ}[P_exec(unsafe | s_t, m)] ≤ α_exec} (:class:`SafetyGate`; trivially
  true for candidates that do not drive hardware);
- available: a non-repeatable candidate leaves the set once executed.

Computed once per decision (:func:`feasibility`) and handed to CVU, which applies the same
budget rule to the budget after m (:class:`BudgetRule`: :func:`affordable` with known costs,
the chance constraint on the same cost draws with uncertain ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from belief.decision.safety import SafetyGate
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.validate import real

__all__ = ["BudgetRule", "ChanceConstraint", "Feasibility", "affordable", "budget_reasons",
           "chance_reasons", "feasibility", "overrun_probability"]

_TOL = 1e-12


def affordable(costs: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """M^budget as a mask: ΔC_r(m) ≤ b_r for every resource r; costs (..., C, R), budget
    (..., R) broadcast."""
    return (np.asarray(costs) <= np.asarray(budget)[..., None, :] + _TOL).all(axis=-1)


def overrun_probability(cost_draws: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Pr(ΔC_r(m) > b_r) per (candidate, resource), the fraction of draws that overrun.

    Pr(ΔC_r(m) > b_r) ≈ (1/S) Σ_s 1[ΔC_r(m)^(s) > b_r] (with the same tolerance as
    :func:`affordable`, so known costs give exactly 0 or 1).

    Parameters
    ----------
    cost_draws : array (S, C, R)
        Joint predictive draws of ΔC (sample, candidate, resource).
    budget : array (..., R)
        b (leading axes broadcast, e.g. one budget per state after m).

    Returns
    -------
    array (..., C, R)
    """
    draws = np.asarray(cost_draws, dtype=float)
    b = np.asarray(budget, dtype=float)[..., None, None, :]
    return (draws > b + _TOL).mean(axis=-3)


@dataclass(frozen=True)
class ChanceConstraint:
    """M^budget as a chance constraint: Pr(ΔC_r(m) ≤ b_r) ≥ 1 − ε_budget for every resource.

    Equivalently max_r Pr(ΔC_r(m) > b_r) ≤ ε_budget (the form evaluated, so that k/S ≤ ε is
    exact in floating point).  With known costs (every draw the same) and ε_budget = 0 this is
    exactly :func:`affordable`.

    Parameters
    ----------
    eps_budget : float
        ε_budget ∈ [0, 1).

    Raises
    ------
    InputError
        Naming ``eps_budget`` when it is not a number in [0, 1).
    """

    eps_budget: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "eps_budget", real(self.eps_budget, "eps_budget", minimum=0.0,
                                                    maximum=1.0, open_max=True))

    def evaluate(self, cost_draws: np.ndarray,
                 budget: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask (..., C), overrun probability (..., C, R)) for draws (S, C, R), budget (..., R)."""
        overrun = overrun_probability(cost_draws, budget)
        return (overrun <= self.eps_budget).all(axis=-1), overrun


@dataclass(frozen=True, eq=False)
class BudgetRule:
    """M^budget as a function of the budget b, one rule for s_t and every state CVU looks at.

    Known costs (``draws`` None): :func:`affordable` (ΔC_r(m) ≤ b_r for every r).  Uncertain
    costs: the chance constraint of the decision on the same joint predictive draws (S, C, R),
    max_r Pr(ΔC_r(m) > b_r) ≤ ε_budget (:class:`ChanceConstraint`).  CVU evaluates it at the
    budget after m, b − E[ΔC(m)]; with the expected-cost test there instead, a candidate the
    chance constraint excludes now could pass after m and credit m with opening it.

    Attributes
    ----------
    costs : ndarray (C, R)
        Known or expected costs (used without draws).
    draws : ndarray (S, C, R) or None
    chance : ChanceConstraint
    """

    costs: np.ndarray
    draws: np.ndarray | None = None
    chance: ChanceConstraint = ChanceConstraint()

    def __call__(self, budget: np.ndarray) -> np.ndarray:
        """The mask (…, C) at budget(s) b (…, R)."""
        if self.draws is None:
            return affordable(self.costs, budget)
        return self.chance.evaluate(self.draws, budget)[0]


def chance_reasons(overrun: np.ndarray, eps_budget: float, resources: list[str],
                   budget: np.ndarray) -> list[str]:
    """Why each candidate is (not) within the budget under the chance constraint."""
    reasons = []
    for row in np.asarray(overrun, dtype=float):
        bad = [f"Pr({r} > {b:g} left) = {p:.3g} > eps_budget {eps_budget:g}"
               for r, p, b in zip(resources, row, budget, strict=True) if p > eps_budget]
        reasons.append("over budget: " + "; ".join(bad) if bad else
                       f"within budget (Pr(overrun) <= {eps_budget:g} for every resource)")
    return reasons


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
    overrun : array (C, R) or None
        Pr(ΔC_r(m) > b_r) when the budget test used cost draws (the chance constraint), else
        None (known costs).
    """

    available: np.ndarray
    affordable: np.ndarray
    safe: np.ndarray
    budget_reason: list[str]
    safety: xr.Dataset
    overrun: np.ndarray | None = None

    @property
    def feasible(self) -> np.ndarray:
        """M_t^feasible as a mask."""
        return self.available & self.affordable & self.safe


def feasibility(state: State, candidates: CandidateSet, gate: SafetyGate,
                costs: np.ndarray, budget: np.ndarray, cost_draws: np.ndarray | None = None,
                chance: ChanceConstraint | None = None) -> Feasibility:
    """Every feasibility test at s_t (costs (C, R) and budget (R,) in the set's resource order).

    Without ``cost_draws`` the budget test is :func:`affordable` on the known ``costs``; with
    joint predictive draws (S, C, R) of ΔC it is the chance constraint ``chance`` (default
    ε_budget = 0: no draw may overrun), and the overrun probability per (candidate, resource)
    is kept.
    """
    ids = candidates.ids
    available = (np.ones(len(ids), bool) if state.available is None
                 else np.isin(ids, list(state.available)))
    belief = state.belief
    safety = gate.evaluate(candidates, belief["executions"], belief["unsafe"],
                           belief.get("p_unsafe"))
    resources = list(candidates.resources)
    safe = safety["safe"].values.astype(bool)
    if cost_draws is None:
        return Feasibility(available, affordable(costs, budget), safe,
                           budget_reasons(costs, budget, resources), safety)
    draws = np.asarray(cost_draws, dtype=float)
    if draws.ndim != 3 or draws.shape[1:] != (len(ids), len(resources)):
        raise InputError("cost_draws", f"expected draws over (sample, candidate, resource) = "
                                       f"(S, {len(ids)}, {len(resources)}), got shape "
                                       f"{draws.shape}")
    chance = ChanceConstraint() if chance is None else chance
    mask, overrun = chance.evaluate(draws, budget)
    return Feasibility(available, mask, safe,
                       chance_reasons(overrun, chance.eps_budget, resources, budget), safety,
                       overrun)
