"""Peer allocation rules: what a practitioner would use instead of Q, on the same draws.

Each rule reads the decision Dataset of :func:`belief.decision.engine.decide` (φ(ΔJ), C_λ,
``cost_<r>``, ``budget_<r>``, the feasible set, CVU when computed) and the belief q_t (the
joint gain draws ΔJ_s(m), s = 1…S, and, with the cost model, the cost draws), and is
restricted to the same feasible set (available ∩ M^budget ∩ M^safe) as every other allocation
(:mod:`belief.decision.allocation`).  A diagnosis has ΔJ = 0 in every draw.

The value in hand.  ΔJ(m) is the gain of m *over the current policy* π_t, and the campaign
moves to every adaptation it executes, so the best value in hand at a decision — the value of
stopping now — is 0 on the gain scale.  "best" below is this 0.

==========  =====================================================================================
rule        score, pick and stop (how the budgets enter)
==========  =====================================================================================
ei_cost     EI(m) = E[max(0, ΔJ(m) − best)] = (1/S) Σ_s max(0, ΔJ_s(m)) (best = 0), divided by
            C_λ(m) = λ_tᵀΔC(m) (BoTorch's ``InverseCostWeightedUtility``: utility / cost);
            argmax EI/C_λ; stop when no feasible EI(m) exceeds its cost C_λ(m) (EI/C_λ ≤ 1).
            Several budgets enter through the λ-weighted scalar cost only.
kg_cost     KG(m) = E_Y[W(s^{m,Y})] − W(s_t), W(s) = J(π_s) + G0(s), G0(s) = max(0, max_m'
            U0(m' | s)): the expected increase of the best net posterior mean (the value of the
            current policy plus the best one-step option, stopping included) that executing m
            and seeing Y brings — with φ = mean, KG(m) = φ(ΔJ(m)) + CVU(m), read from the
            decision (``phi_gain`` + ``cvu``, the engine's E_Y[G0(s^{m,Y})] − G0(s^∅));
            argmax KG/C_λ; stop when no feasible m is worth more than stopping in KG's own
            terms: doing m yields E[W(s^{m,Y})] − C_λ(m) = W(s_t) + KG(m) − C_λ(m), stopping
            yields J(π_t) = W(s_t) − G0(s^∅) (the best one-step option in W is not held until
            it is paid for), so stop when no KG(m) + G0(s^∅) > C_λ(m).  (The plain rule
            "stop when no KG exceeds its cost", KG/C_λ ≤ 1 ⇔ U0 + CVU ≤ 0, forfeits the last
            worthwhile action: KG(m*) = C_λ(m*) when nothing is worth doing after m*.)
            Needs CVU (β > 0, the one-step continuation); β only switches CVU on, it does
            not scale KG.  λ-weighted scalar cost.
ucb_bwk     the UCB-BwK / PrimalDualBwK rule (Agrawal & Devanur 2014; Badanidiyuru, Kleinberg &
            Slivkins 2013, Algorithm 2): argmax UCB(ΔJ(m)) / (vᵀ LCB(C̃(m))) over the d
            budgets *and the steps* (the horizon is a resource with budget T and consumption 1
            per step), with dual weights v updated multiplicatively per budget,
            v_{t+1,i} = v_{t,i}(1 + ε)^{c̃_{t,i}}, v_1 = 1, ε = √(ln d / B) (their
            Theorem 5.3), from the realised consumption c_t normalised so that one step uses
            at most 1 and every budget is B: c̃_i = c_i · B / b_{0,i}, B = min_i b_{0,i}/u_i,
            u_i = the largest nominal cost of resource i (1 for the steps).  UCB = the
            posterior q-quantile of ΔJ(m) (Bayesian UCB; q = 0.9 by default, ``ucb_bwk:q``),
            LCB = the (1 − q)-quantile of the cost draws (the known cost without them).
            Stop when no feasible candidate has UCB > 0 (BwK otherwise runs until a budget or
            the horizon is used up).  λ does not enter.
pbgi        the Pandora's-box Gittins index (Xie et al. 2024; Weitzman 1979): g(m) solving
            E[max(0, ΔJ(m) − g)] = C_λ(m) on the draws (``scipy.optimize.brentq``; g = max_s
            ΔJ_s(m) when C_λ(m) = 0); argmax g; stop when the largest index is ≤ best = 0.
            Since E[max(0, ΔJ − g)] decreases in g, g(m) > 0 ⇔ EI(m) > C_λ(m): the same stop
            as ei_cost, a different ranking.  λ-weighted scalar cost.
==========  =====================================================================================

Because v_{t,i} = (1 + ε)^{Σ_τ c̃_{τ,i}}, the duals are a function of the realised
consumption so far (the starting budget b_0 = b_t + spent, the step t and the horizon T): a
campaign, its resume and a replay re-derive them from the logged costs, with no state kept.
BKS update with the LCB of the chosen arm's consumption; with known costs it is the realised
one, and with the cost model the realised consumption is used (what the log holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from scipy.optimize import brentq

from belief.decision.engine import belief_cost_draws
from belief.errors import InputError

__all__ = ["PEER_POLICIES", "BwKDuals", "bwk_duals", "bwk_scores", "ei_scores",
           "expected_improvement", "gittins_index", "kg_scores", "parse_peer", "pbgi_scores"]

PEER_POLICIES = ("ei_cost", "kg_cost", "ucb_bwk", "pbgi")
DEFAULT_UCB_QUANTILE = 0.9
_FLOOR = 1e-300  # C_λ = 0: a positive utility per zero cost is a huge ratio, never 0/0


def parse_peer(name: str) -> tuple[str, dict[str, float]]:
    """(rule, options) of a peer allocation name: ``ei_cost``, ``kg_cost``, ``pbgi``,
    ``ucb_bwk`` or ``ucb_bwk:q`` (q in (0.5, 1): the UCB quantile); InputError naming
    ``allocation`` otherwise."""
    base, _, opt = str(name).partition(":")
    if base not in PEER_POLICIES:
        raise InputError("allocation", f"unknown peer rule {name!r}; allowed: "
                                       f"{list(PEER_POLICIES)}")
    if not opt:
        return base, ({"quantile": DEFAULT_UCB_QUANTILE} if base == "ucb_bwk" else {})
    if base != "ucb_bwk":
        raise InputError("allocation", f"{base} takes no option, got {name!r}")
    try:
        q = float(opt)
    except ValueError:
        q = float("nan")
    if not 0.5 < q < 1:
        raise InputError("allocation", f"ucb_bwk:q needs a UCB quantile q with 0.5 < q < 1, "
                                       f"got {opt!r}")
    return base, {"quantile": q}


def _gain_draws(belief: xr.Dataset | None, ids: list[str], rule: str) -> np.ndarray:
    if belief is None:
        raise InputError("allocation", f"{rule} needs the belief (the gain draws)")
    return belief["gain"].sel(candidate=ids).transpose("sample", "candidate").values


def expected_improvement(draws: np.ndarray, best: float = 0.0) -> np.ndarray:
    """EI = E[max(0, X − best)] per column of ``draws`` (S, C), the mean over draws."""
    return np.maximum(np.asarray(draws, float) - best, 0.0).mean(axis=0)


def _ratio(utility: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """utility / max(cost, floor): finite, and 0 where the utility is 0."""
    return np.asarray(utility, float) / np.maximum(np.asarray(cost, float), _FLOOR)


def ei_scores(decision: xr.Dataset, belief: xr.Dataset | None) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """(EI(m), EI(m)/C_λ(m)) with best = 0 (module docstring, ``ei_cost``)."""
    ids = list(decision["candidate"].values)
    ei = expected_improvement(_gain_draws(belief, ids, "ei_cost"))
    return ei, _ratio(ei, decision["c_lambda"].values)


def kg_scores(decision: xr.Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(KG(m) = φ(ΔJ(m)) + CVU(m), KG/C_λ, KG − C_λ + G0(s^∅): the value against stopping)
    from the decision (module docstring, ``kg_cost``).

    Refuses a decision without CVU (β = 0 before the last step) or with a non-myopic
    continuation (KG is one step deep).  A candidate whose CVU is NaN gets a NaN score (never
    picked)."""
    a = decision.attrs
    terminal = str(a.get("cvu_status", "")).startswith("terminal")
    if not terminal and ("cvu_status" not in a or str(a["cvu_status"]).startswith("not computed")):
        raise InputError("beta", "kg_cost needs CVU: decide with beta > 0")
    if str(a.get("continuation_used", a.get("continuation", "one_step"))) != "one_step":
        raise InputError("CVUSettings.continuation", "kg_cost needs the one-step CVU "
                                                     "(E_Y[G0(s^{m,Y})]): continuation "
                                                     "one_step")
    kg = decision["phi_gain"].values.astype(float) + decision["cvu"].values.astype(float)
    cost = decision["c_lambda"].values.astype(float)
    g0_null = 0.0 if terminal else float(a.get("g0_null", 0.0))
    return kg, _ratio(kg, cost), kg - cost + g0_null


def gittins_index(draws: np.ndarray, cost: float) -> float:
    """The Pandora's-box Gittins index g of one candidate: E[max(0, X − g)] = cost on the draws.

    f(g) = (1/S) Σ_s max(0, x_s − g) − cost is continuous and strictly decreasing where it is
    positive.  Below min(x), f = mean(x) − g − cost, so when mean(x) − cost ≤ min(x) the root
    is g = mean(x) − cost exactly; otherwise it lies in (min(x), max(x)) (f(min x) > 0,
    f(max x) = −cost < 0) and :func:`scipy.optimize.brentq` finds it.  cost ≤ 0 gives
    g = max(x) (the smallest g with f = 0).
    """
    x = np.asarray(draws, float).ravel()
    if cost <= 0:
        return float(x.max())
    lo, hi = float(x.min()), float(x.max())
    if float(x.mean()) - cost <= lo:
        return float(x.mean()) - cost

    def f(g: float) -> float:
        return float(np.maximum(x - g, 0.0).mean()) - cost

    if f(lo) <= 0:  # mean(x) − cost exceeds min(x) by rounding only: the root is min(x)
        return lo
    return float(brentq(f, lo, hi, xtol=1e-12, rtol=4 * np.finfo(float).eps))


def pbgi_scores(decision: xr.Dataset, belief: xr.Dataset | None) -> np.ndarray:
    """g(m) per candidate (NaN where not feasible), module docstring ``pbgi``."""
    ids = list(decision["candidate"].values)
    gain = _gain_draws(belief, ids, "pbgi")
    cost = decision["c_lambda"].values.astype(float)
    feasible = decision["feasible"].values.astype(bool)
    return np.array([gittins_index(gain[:, i], cost[i]) if feasible[i] else np.nan
                     for i in range(len(ids))])


@dataclass(frozen=True)
class BwKDuals:
    """The PrimalDualBwK dual weights at one decision (module docstring, ``ucb_bwk``).

    Attributes
    ----------
    resources : tuple of str
        The budgets, then ``"steps"``.
    initial : ndarray
        b_0 per resource (T for the steps).
    unit : ndarray
        u_i, the largest one-step consumption (1 for the steps); a resource no candidate
        consumes has u_i = 0 and is left out of d and B.
    B : float
        min_i b_{0,i} / u_i over the consumed resources.
    epsilon : float
        √(ln d / B), at most 1 − 1e-12 (the algorithm's ε ∈ (0, 1)); 0 when d = 1.
    weights : ndarray
        v_t = (1 + ε)^{Σ_τ c̃_τ} (0 for an unconsumed resource: it never binds).
    """

    resources: tuple[str, ...]
    initial: np.ndarray
    unit: np.ndarray
    B: float
    epsilon: float
    weights: np.ndarray

    def normalised(self, consumption: np.ndarray) -> np.ndarray:
        """c̃_i = c_i · B / b_{0,i} (0 for an unconsumed resource)."""
        used = self.unit > 0
        out = np.zeros(np.shape(consumption), float)
        out[..., used] = (np.asarray(consumption, float)[..., used] * self.B
                          / self.initial[used])
        return out


def bwk_duals(initial: np.ndarray, unit: np.ndarray, spent: np.ndarray,
              resources: tuple[str, ...]) -> BwKDuals:
    """The duals v_t after consuming ``spent`` (cumulative, per resource, steps last) from
    ``initial`` b_0, with one-step maxima ``unit`` (the three arrays over ``resources``)."""
    initial, unit = np.asarray(initial, float), np.asarray(unit, float)
    spent = np.asarray(spent, float)
    used = unit > 0
    if np.any(initial[used] <= 0):
        bad = [r for r, b, u in zip(resources, initial, used, strict=True) if u and b <= 0]
        raise InputError("budget", f"ucb_bwk needs a positive starting budget for every "
                                   f"consumed resource; {bad} start at 0")
    d = int(used.sum())
    big_b = float(np.min(initial[used] / unit[used]))
    eps = min(float(np.sqrt(np.log(d) / big_b)), 1 - 1e-12) if d > 1 else 0.0
    duals = BwKDuals(tuple(resources), initial, unit, big_b, eps, np.zeros(len(unit)))
    total = duals.normalised(spent)
    weights = np.where(used, (1 + eps) ** total, 0.0)
    return BwKDuals(tuple(resources), initial, unit, big_b, eps, weights)


def bwk_scores(decision: xr.Dataset, belief: xr.Dataset | None, candidates: Any,
               spent: Mapping[str, float] | None, quantile: float
               ) -> tuple[np.ndarray, np.ndarray, BwKDuals]:
    """(UCB of ΔJ, UCB / vᵀLCB(C̃), the duals) per candidate (module docstring, ``ucb_bwk``).

    ``spent`` is the realised consumption so far per resource (b_0 = b_t + spent); the
    steps used are the decision's ``step`` and the horizon T its ``horizon``."""
    if candidates is None or spent is None:
        raise InputError("allocation", "ucb_bwk needs the candidate set and the realised "
                                       "costs so far")
    ids = list(decision["candidate"].values)
    a = decision.attrs
    horizon = int(a.get("horizon", -1))
    if horizon < 1:
        raise InputError("horizon", "ucb_bwk needs a horizon (the steps are one of its "
                                    "budgets)")
    res = list(candidates.resources)
    missing = [r for r in res if r not in spent]
    if missing:
        raise InputError("allocation", f"ucb_bwk: the realised costs name no {missing}")
    budget = np.array([a[f"budget_{r}"] for r in res], float)
    used = np.array([float(spent[r]) for r in res])
    nominal = candidates.costs().sel(candidate=ids, resource=res).values.astype(float)
    duals = bwk_duals(np.append(budget + used, horizon),
                      np.append(nominal.max(axis=0), 1.0),
                      np.append(used, int(a["step"])), (*res, "steps"))
    gain = _gain_draws(belief, ids, "ucb_bwk")
    ucb = np.quantile(gain, quantile, axis=0)
    draws = belief_cost_draws(belief, res)
    lcb = (np.stack([decision[f"cost_{r}"].values for r in res], -1).astype(float)
           if draws is None else np.quantile(draws, 1 - quantile, axis=0))
    lcb = np.column_stack([lcb, np.ones(len(ids))])  # one step of the horizon
    denom = duals.normalised(lcb) @ duals.weights
    return ucb, _ratio(ucb, denom), duals
