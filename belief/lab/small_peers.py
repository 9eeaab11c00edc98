"""The peer allocation rules on the small conjugate problems, exactly (no draws).

The rules of :mod:`belief.decision.peers` with the posterior quantities of a
:class:`~belief.lab.small_problems.SmallProblem` computed in closed form, as stationary
policies s → pick that :func:`belief.lab.small_policies.policy_value` values exactly.
On a small problem ΔJ(m) = G_m d^{k_m} θ_{l(m)} = g_m θ with θ ~ Beta(α, β) (α, β of s), so:

===========  =================================================================================
rule         score (stop)
===========  =================================================================================
ei_cost      EI(m) = E[max(0, g_m θ)] = g_m α/(α+β) (gains are ≥ 0 here, so EI = φ);
             argmax EI/C_λ (stop when no EI > C_λ, i.e. no U0 > 0)
kg_cost      KG(m) = φ(m) + CVU(m), CVU(m) = Σ_y P(y | s, m) G0(s^{m,y}) − G0(s) (0 at the last
             step, where G0(s) is taken as 0 in the stop); argmax KG/C_λ (stop when no
             KG + G0(s) > C_λ); ``kg_cost_plain`` stops when no KG > C_λ instead
pbgi         g(m) solving E[max(0, g_m θ − g)] = C_λ(m): for g ∈ [0, g_m),
             E[(g_m θ − g)^+] = g_m [μ (1 − I_t(α+1, β)) − t (1 − I_t(α, β))], t = g/g_m,
             μ = α/(α+β), I the regularised incomplete beta (brentq on t); for g < 0 it is
             g_m μ − g, so g = g_m μ − C_λ when g_m μ ≤ C_λ (a diagnosis: g = −C_λ);
             argmax g (stop when no g > 0)
ucb_bwk      argmax UCB / (vᵀ c̃(m)) with UCB = g_m · BetaPPF(q; α, β), the known costs, the
             steps as a resource (budget T, one per step) and the duals
             v = (1 + ε)^{Σ c̃} of :func:`belief.decision.peers.bwk_duals` from the counts
             (spent = counts · ΔC); stop when no UCB > 0
===========  =================================================================================

Ties split evenly, as in :mod:`belief.lab.small_policies`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from scipy import special, stats
from scipy.optimize import brentq

from belief.decision.peers import DEFAULT_UCB_QUANTILE, bwk_duals
from belief.lab.small_problems import BeliefState, SmallProblem

__all__ = ["STOP", "beta_gittins_index", "kg_versus_stop", "peer_policies", "peer_scores"]

STOP = -1
_FLOOR = 1e-300


def _pick(scores: np.ndarray, feasible: np.ndarray, threshold: float,
          tol: float = 1e-12) -> dict[int, float]:
    """argmax over feasible candidates with score > threshold (+tol), exact ties (within
    tol) split evenly; stop when none qualifies."""
    ok = feasible & (scores > threshold + tol)
    if not ok.any():
        return {STOP: 1.0}
    masked = np.where(ok, scores, -np.inf)
    best = np.flatnonzero(masked >= masked.max() - tol * max(1.0, abs(masked.max())))
    return {int(m): 1.0 / best.size for m in best}


def beta_gittins_index(scale: float, a: float, b: float, cost: float) -> float:
    """g solving E[max(0, scale·θ − g)] = cost for θ ~ Beta(a, b) (module docstring)."""
    mean = a / (a + b)
    if scale <= 0 or scale * mean <= cost:
        return scale * mean - cost
    if cost <= 0:
        return scale  # the largest value of scale·θ

    def excess(t: float) -> float:  # E[(θ − t)^+] − cost/scale
        return (mean * (1 - special.betainc(a + 1, b, t)) - t * (1 - special.betainc(a, b, t))
                - cost / scale)

    return scale * float(brentq(excess, 0.0, 1.0, xtol=1e-14))


def kg_versus_stop(problem: SmallProblem, s: BeliefState) -> np.ndarray:
    """KG(m) − C_λ(m) + G0(s) per arm (−inf where infeasible): KG's value of m against
    stopping (at the last step U0)."""
    f = problem.feasible(s)
    out = np.full(len(problem.arms), -np.inf)
    u0 = problem.u0(s)
    for m in np.flatnonzero(f):
        out[m] = u0[m] + (sum(p * problem.g0(s2) for p, s2 in problem.outcomes(s, int(m))
                              if p > 0) if problem.steps_left(s) > 1 else 0.0)
    return out


def peer_scores(problem: SmallProblem, s: BeliefState, rule: str,
                quantile: float = DEFAULT_UCB_QUANTILE) -> np.ndarray:
    """The rule's score per arm at s (−inf where infeasible); module docstring."""
    f = problem.feasible(s)
    scale = problem.gain_scale(s)
    a, b = problem.posterior(s)
    lat = [arm.latent for arm in problem.arms]
    cl = problem.c_lambda
    phi = problem.mean_gain(s)
    out = np.full(len(problem.arms), -np.inf)
    for m in np.flatnonzero(f):
        if rule == "ei_cost":
            out[m] = phi[m] / max(cl[m], _FLOOR)
        elif rule == "kg_cost":
            cvu = 0.0
            if problem.steps_left(s) > 1:
                cvu = sum(p * problem.g0(s2) for p, s2 in problem.outcomes(s, int(m))
                          if p > 0) - problem.g0(s)
            out[m] = (phi[m] + cvu) / max(cl[m], _FLOOR)
        elif rule == "pbgi":
            out[m] = beta_gittins_index(scale[m], a[lat[m]], b[lat[m]], cl[m])
        elif rule == "ucb_bwk":
            out[m] = scale[m] * stats.beta.ppf(quantile, a[lat[m]], b[lat[m]])
        else:
            raise ValueError(f"unknown peer rule {rule!r}")
    if rule == "ucb_bwk":
        costs = problem.costs
        counts = np.array(s.counts, float)
        duals = bwk_duals(np.append(problem.budget, problem.horizon),
                          np.append(costs.max(axis=0), 1.0),
                          np.append(counts @ costs, counts.sum()),
                          (*problem.resources, "steps"))
        denom = duals.normalised(np.column_stack([costs, np.ones(len(problem.arms))])) \
            @ duals.weights
        ucb = out.copy()
        out = np.where(np.isfinite(ucb) & (ucb > 0), ucb / denom, np.where(f, 0.0, -np.inf))
    return out


def peer_policies(quantile: float = DEFAULT_UCB_QUANTILE
                  ) -> dict[str, Callable[[SmallProblem, BeliefState], Mapping[int, float]]]:
    """``ei_cost``, ``kg_cost``, ``kg_cost_plain``, ``pbgi``, ``ucb_bwk`` as small-problem
    policies."""
    thresholds = {"ei_cost": 1.0, "kg_cost": 1.0, "pbgi": 0.0, "ucb_bwk": 0.0}

    def make(rule: str):
        def policy(p: SmallProblem, s: BeliefState) -> dict[int, float]:
            return _pick(peer_scores(p, s, rule, quantile), p.feasible(s), thresholds[rule])
        return policy

    def kg(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        ok = p.feasible(s) & (kg_versus_stop(p, s) > 1e-12)
        return _pick(peer_scores(p, s, "kg_cost"), ok, -np.inf)

    out = {rule: make(rule) for rule in thresholds}
    out["kg_cost_plain"] = out.pop("kg_cost")
    out["kg_cost"] = kg
    return out
