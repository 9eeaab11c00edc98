"""Allocation policies behind one interface, all restricted to the same feasible set.

A policy picks the next candidate (or stops) from the decision Dataset of
:func:`belief.decision.engine.decide` — which already carries φ(ΔJ), C_λ, U0, MV, Q and the
feasibility of every candidate — plus the belief (for sampling) or the world (for the oracle):

=============  ===============================================================================
name           rule
=============  ===============================================================================
q              argmax Q = U0 + β·CVU over feasible candidates; stop when none is worth
               more than stopping, U0 + β·E[G0(s')] <= 0 (the engine, :mod:`engine`)
u0             argmax U0 (β = 0, myopic); stop when no U0 > 0
mv             argmax MV = φ(ΔJ)/C_λ over feasible adaptations; stop when no MV > 1 (U0 > 0)
thompson       one joint posterior draw s: argmax ΔJ_s(m) − C_λ(m); stop when none > 0
round_robin    cycle through the candidates in file order, taking the next feasible one;
               stop only when nothing is feasible (spends the budget)
oracle         knows the world's truth: argmax E[ΔJ(m) | world] − C_λ(m); stop when none > 0
plan           the first candidate of the best open-loop plan on the belief over the steps left
               (valued on the joint draws, no learning; :mod:`belief.decision.planner`),
               re-planned every step; stop when the empty plan is best
plan_voi       argmax V_plan(m) + β·VOI(m): the value of the best open-loop plan that starts
               with m (:func:`belief.decision.planner.first_step_values`) plus β
               times the expected value of m's sample information for the next decision,
               VOI(m) = E_Y[G0(s^{m,Y})] − G0(s̄^m) (``cvu_voi``, :mod:`belief.decision.cvu`);
               stop when no feasible candidate's score is > 0 (VOI 0 where the decision has
               no CVU: the last step, β = 0; refused for a decision whose CVU used a
               non-myopic continuation, which has no VOI)
ei_cost        peer: expected improvement per unit cost, argmax E[max(0, ΔJ)]/C_λ; stop when
               no EI exceeds its cost (:mod:`belief.decision.peers`)
kg_cost        peer: knowledge gradient per unit cost, argmax KG/C_λ, KG = φ(ΔJ) + CVU; stop
               when no KG + G0(s^∅) > C_λ (needs CVU: β > 0)
ucb_bwk        peer: UCB-BwK, argmax UCB(ΔJ) / (vᵀ LCB of the normalised costs), duals v over
               the budgets and the steps; ``ucb_bwk:q`` sets the UCB quantile (default 0.9)
pbgi           peer: the Pandora's-box Gittins index g, E[max(0, ΔJ − g)] = C_λ; stop when
               no index is > 0
=============  ===============================================================================

``plan_voi`` joins the two non-myopic parts that ``q`` and ``plan`` each have one of: the plan
values the order of several executions under q_t without learning (it never pays to learn),
VOI values what m's outcome teaches (only for the next decision, as CVU does; CVU's other part,
the mean shift of s_{t+1}, is the plan's first step already, so it is not counted twice).  A
candidate whose CVU failed gets VOI 0 (the plan alone).  It is a heuristic, not a Bayes-optimal
policy: the information value is one step deep and added to an open-loop plan value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from belief.decision.engine import STOP, argmax_or_stop
from belief.decision.peers import (
    PEER_POLICIES,
    bwk_scores,
    ei_scores,
    kg_scores,
    parse_peer,
    pbgi_scores,
)
from belief.errors import InputError

if TYPE_CHECKING:
    from belief.decision.planner import PlanInputs

__all__ = ["POLICIES", "USES_CVU", "Choice", "choose"]

POLICIES = ("q", "u0", "mv", "thompson", "round_robin", "oracle", "plan", "plan_voi",
            *PEER_POLICIES)
USES_CVU = frozenset({"q", "plan_voi", "kg_cost"})
"""The policies whose decision needs CVU (the campaign's β); the others decide with β = 0."""


@dataclass(frozen=True)
class Choice:
    """A policy's pick: a candidate id or :data:`belief.decision.engine.STOP`, and why."""

    candidate: str
    reason: str

    @property
    def stop(self) -> bool:
        return self.candidate == STOP


def check_policy(name: str) -> str:
    """Validate an allocation-policy name (a peer rule may carry its option, ``ucb_bwk:q``)."""
    if isinstance(name, str) and name.partition(":")[0] in PEER_POLICIES:
        parse_peer(name)
        return name
    if name not in POLICIES:
        raise InputError("allocation", f"unknown allocation policy {name!r}; allowed: "
                                       f"{list(POLICIES)}")
    return name


def _argmax(values: np.ndarray, ok: np.ndarray, ids: list[str], threshold: float,
            label: str) -> Choice:
    i = int(argmax_or_stop(values, ok, threshold))
    if i < 0:
        return Choice(STOP, f"stop: no feasible candidate has {label} > {threshold:g}")
    return Choice(ids[i], f"argmax {label} = {values[i]:.4g}")


def choose(name: str, decision: xr.Dataset, *, belief: xr.Dataset | None = None,
           world: Any = None, history: tuple[str, ...] = (),
           rng: np.random.Generator | None = None, candidates: Any = None,
           spent: Mapping[str, float] | None = None) -> Choice:
    """The pick of allocation policy ``name`` at this decision.

    Parameters
    ----------
    name : str
        One of :data:`POLICIES`.
    decision : Dataset
        From :func:`belief.decision.engine.decide` (for ``q`` computed with the campaign's β and
        CVU, for the others β = 0 is enough).
    belief : Dataset
        q_t (``thompson`` samples one joint draw of ``gain``).
    world : object with ``expected_gain(m)``
        Needed by ``oracle``.
    history : tuple of str
        Candidates executed so far (``round_robin`` continues after the last one).
    rng : Generator
        For ``thompson``.
    candidates : CandidateSet
        For ``plan`` and ``plan_voi`` (which candidates change the policy, which may repeat);
        they also read the decision's ``cost_<r>``, ``budget_<r>``, ``lambda_<r>``, ``step`` and
        ``horizon``; ``ucb_bwk`` reads the nominal costs.
    spent : mapping resource → float
        The realised consumption so far (``ucb_bwk``: its duals, b_0 = b_t + spent).
    """
    check_policy(name)
    if name.partition(":")[0] in PEER_POLICIES:
        return _peer(name, decision, belief, candidates, spent)
    ids = list(decision["candidate"].values)
    feasible = decision["feasible"].values.astype(bool)
    if name == "q":
        return Choice(decision.attrs["chosen"], decision.attrs.get("stop_reason") or "argmax Q")
    if name == "u0":
        return _argmax(decision["u0"].values, feasible, ids, 0.0, "U0")
    if name == "mv":
        return _argmax(decision["mv"].values, feasible, ids, 1.0, "MV")  # NaN MV never wins
    if name == "thompson":
        if belief is None or rng is None:
            raise InputError("allocation", "thompson needs the belief and a random generator")
        s = int(rng.integers(belief.sizes["sample"]))
        net = belief["gain"].isel(sample=s).sel(candidate=ids).values - decision["c_lambda"].values
        return _argmax(net, feasible, ids, 0.0, f"sampled net gain (draw {s})")
    if name == "round_robin":
        if not feasible.any():
            return Choice(STOP, "stop: no feasible candidate")
        start = (ids.index(history[-1]) + 1) if history and history[-1] in ids else 0
        for k in range(len(ids)):
            i = (start + k) % len(ids)
            if feasible[i]:
                return Choice(ids[i], "next feasible in turn")
    if name == "plan":
        return _plan(decision, belief, candidates, ids, feasible)
    if name == "plan_voi":
        return _plan_voi(decision, belief, candidates, ids, feasible)
    # oracle
    truth = [None if world is None else world.expected_gain(c) for c in ids]
    if any(g is None for g in truth):
        raise InputError("allocation", "oracle needs a world that knows its truth "
                                       "(expected_gain)")
    true_gain = np.array(truth, dtype=float)
    return _argmax(true_gain - decision["c_lambda"].values, feasible, ids, 0.0, "true U0")


def _plan_inputs(decision: xr.Dataset, belief: xr.Dataset | None, candidates: Any,
                 ids: list[str], feasible: np.ndarray, name: str) -> PlanInputs:
    """The planner's inputs from the decision and the candidate set."""
    from belief.decision.planner import PlanInputs

    if belief is None or candidates is None:
        raise InputError("allocation", f"{name} needs the belief and the candidate set")
    a = decision.attrs
    horizon = int(a.get("horizon", -1))
    if horizon < 0:
        raise InputError("allocation", f"{name} needs a horizon (the steps left to plan over)")
    res = list(candidates.resources)
    return PlanInputs(
        costs=np.stack([decision[f"cost_{r}"].values for r in res], -1),
        budget=np.array([a[f"budget_{r}"] for r in res], float),
        weights=np.array([a[f"lambda_{r}"] for r in res], float), feasible=feasible,
        adapts=np.array([candidates[m].changes_policy for m in ids]),
        repeatable=np.array([candidates[m].repeatable for m in ids]),
        steps=max(horizon - int(a["step"]), 0))


def _plan(decision: xr.Dataset, belief: xr.Dataset | None, candidates: Any, ids: list[str],
          feasible: np.ndarray) -> Choice:
    from belief.decision.planner import plan_on_belief

    plan = plan_on_belief(belief, ids, _plan_inputs(decision, belief, candidates, ids,
                                                    feasible, "plan"))
    if plan.first is None:
        return Choice(STOP, f"stop: the best plan on the belief is to stop (V {plan.value:.4g})")
    return Choice(plan.first, f"first of the best plan {' → '.join(plan.sequence)} "
                              f"(V {plan.value:.4g})")


def _plan_voi(decision: xr.Dataset, belief: xr.Dataset | None, candidates: Any,
              ids: list[str], feasible: np.ndarray) -> Choice:
    from belief.decision.planner import first_step_values

    beta = float(decision.attrs.get("beta", 0.0))
    used = str(decision.attrs.get("continuation_used", "one_step"))
    if beta > 0 and used != "one_step":
        raise InputError("allocation", "plan_voi needs the one-step CVU's value of "
                                       "information (cvu_voi): decide with the one_step "
                                       "continuation")
    v_plan = first_step_values(belief, ids, _plan_inputs(decision, belief, candidates, ids,
                                                         feasible, "plan_voi"))
    voi = (np.nan_to_num(decision["cvu_voi"].values.astype(float), nan=0.0)
           if "cvu_voi" in decision else np.zeros(len(ids)))  # no CVU (last step, β = 0)
    score = v_plan + beta * voi
    i = int(argmax_or_stop(score, feasible, 0.0))  # NaN (cannot start) never qualifies
    if i < 0:
        return Choice(STOP, "stop: no feasible candidate has V_plan + β·VOI > 0")
    return Choice(ids[i], f"argmax V_plan + β·VOI = {v_plan[i]:.4g} + {beta:g}·{voi[i]:.4g}")


def _peer(name: str, decision: xr.Dataset, belief: xr.Dataset | None, candidates: Any,
          spent: Mapping[str, float] | None) -> Choice:
    """The pick of a peer rule (:mod:`belief.decision.peers`)."""
    rule, opts = parse_peer(name)
    ids = list(decision["candidate"].values)
    feasible = decision["feasible"].values.astype(bool)
    if rule == "ei_cost":
        _ei, ratio = ei_scores(decision, belief)
        return _argmax(ratio, feasible, ids, 1.0, "EI/C_λ")
    if rule == "kg_cost":
        _kg, ratio, versus_stop = kg_scores(decision)
        ok = feasible & (np.nan_to_num(versus_stop, nan=-np.inf) > 0)
        if not ok.any():
            return Choice(STOP, "stop: no feasible candidate has KG + G0(s^∅) > C_λ (none is "
                                "worth more than stopping)")
        i = int(np.argmax(np.where(ok, ratio, -np.inf)))
        return Choice(ids[i], f"argmax KG/C_λ = {ratio[i]:.4g}")
    if rule == "pbgi":
        return _argmax(np.nan_to_num(pbgi_scores(decision, belief), nan=-np.inf), feasible, ids,
                       0.0, "Gittins index")
    _ucb, ratio, duals = bwk_scores(decision, belief, candidates, spent, opts["quantile"])
    pick = _argmax(ratio, feasible, ids, 0.0, "UCB(ΔJ)/vᵀLCB(c̃)")
    v = ", ".join(f"{r} {w:.3g}" for r, w in zip(duals.resources, duals.weights, strict=True))
    return Choice(pick.candidate, f"{pick.reason} (duals {v}; ε {duals.epsilon:.3g})")
