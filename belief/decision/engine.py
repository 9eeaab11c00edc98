"""One allocation decision: scores, feasibility, argmax, stop, and decision stability.

:func:`decide` returns an ``xarray.Dataset`` over ``candidate`` (``.to_dataframe()`` gives the
table) with, for every candidate: φ(ΔJ), C_λ, U0, MV (and why it is undefined), CVU and its
status, Q, each feasibility test with its reason, and why it was excluded; attributes hold the
chosen m*, whether to stop and why, the functional, β, λ_t and the decision stability
Pr(argmax flips).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from belief.decision.functionals import Functional, parse_functional
from belief.decision.safety import SafetyGate
from belief.decision.scores import check_beta, marginal_value, net_utility, q_score, weighted_cost
from belief.decision.state import State
from belief.decision.weights import WeightRule, as_weight_rule, next_weights
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates
from belief.posterior.transfer import transfer_attrs

__all__ = ["argmax_or_stop", "budget_feasibility", "decide", "decision_stability",
           "decision_table"]

STOP = "(stop)"


def budget_feasibility(costs: xr.DataArray, budget: xr.DataArray) -> tuple[np.ndarray, list[str]]:
    """M^budget: ΔC_r(m) ≤ b_r for every resource r, with a reason naming the failing budgets."""
    over = (costs > budget + 1e-12).transpose("candidate", "resource").values
    resources = list(costs["resource"].values)
    reasons = []
    for i, row in enumerate(over):
        bad = [f"{r} needs {costs.values[i, j]:g} > {budget.values[j]:g} left"
               for j, r in enumerate(resources) if row[j]]
        reasons.append("over budget: " + "; ".join(bad) if bad else "within budget")
    return ~over.any(axis=1), reasons


def argmax_or_stop(q: np.ndarray, eligible: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """Index of the best eligible candidate with value > ``threshold`` along the last axis
    (first on ties; NaN never qualifies), −1 for stop."""
    masked = np.where(eligible & (q > threshold), q, -np.inf)
    best = masked.argmax(axis=-1)
    return np.where(np.isfinite(np.take_along_axis(masked, best[..., None], -1)[..., 0]),
                    best, -1)


def decision_stability(gain: np.ndarray, functional: Functional, c_lambda: np.ndarray,
                       bonus: np.ndarray, feasible: np.ndarray, chosen: int,
                       resamples: int = 200, seed: int = 0) -> float:
    """Pr(argmax Q flips) under a nonparametric bootstrap of the joint posterior draws.

    Scheme: draw ``resamples`` bootstrap replicates of the sample index (with replacement,
    the same index for every candidate so joint structure is kept), recompute φ(ΔJ) and
    Q = φ − C_λ + bonus (bonus = β·CVU held at its estimate; feasibility held fixed), and report
    the fraction of replicates whose argmax (or stop) differs from ``chosen`` (−1 = stop).
    A proxy for how much the decision rests on Monte Carlo noise, not a value.
    """
    rng = np.random.default_rng(seed)
    n = gain.shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    boot = gain[idx]  # (B, n, C)
    phi = functional(np.moveaxis(boot, 1, -1))  # (B, C)
    q = phi - c_lambda[None, :] + bonus[None, :]
    picks = argmax_or_stop(q, feasible[None, :])
    return float(np.mean(picks != chosen))


def decide(state: State, candidates: CandidateSet, *,
           functional: str | Functional = "mean",
           weights: WeightRule | Mapping[str, float] = None,
           beta: float = 0.0, gate: SafetyGate | None = None,
           cvu: xr.Dataset | None = None, stability_resamples: int = 200,
           seed: int = 0) -> xr.Dataset:
    """Score every candidate at state s_t and pick m*_t = argmax_{feasible} Q.

    Parameters
    ----------
    state : State
        s_t, with q_t in ``state.belief``.
    candidates : CandidateSet
    functional : str or Functional
        φ: ``"mean"``, ``"lcb:Q"`` or ``"cvar:A"``; the same φ is used in U0 and MV.
    weights : WeightRule or mapping
        λ rule (a mapping means fixed weights); λ_t = rule(b_t, s_t).
    beta : float
        β ≥ 0 in Q = U0 + β·CVU.
    gate : SafetyGate, optional
        Execution-safety gate (default: Clopper–Pearson, α_exec = 0.1, δ = 0.05).
    cvu : Dataset over ``candidate``, optional
        ``cvu`` (and optionally ``cvu_mcse``, ``pareto_k``, ``cvu_method``) from the CVU
        estimator; when absent CVU = 0 and is labelled "not computed".
    stability_resamples : int
        Bootstrap replicates for :func:`decision_stability` (0 to skip).

    Returns
    -------
    Dataset over ``candidate`` (``lambda_next_<resource>`` holds λ_{t+1} = λ(b_t − ΔC(m)) for
    the continuation); attributes ``chosen`` (id or ``"(stop)"``), ``stop`` (0/1),
    ``stop_reason``, ``functional``, ``beta``, ``lambda_<resource>``, ``flip_probability``;
    when q_t holds transfer draws, the current policy's ``delta_j_mean``, ``delta_j_lo90``,
    ``delta_j_hi90``, ``g_j_mean``, ``g_j_lo90``, ``g_j_hi90`` and ``delta_j_source`` (reported
    only: δ_J is not a value input).
    """
    fn = parse_functional(functional)
    beta = check_beta(beta)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError("seed", f"seed must be an integer >= 0, got {seed!r}")
    if weights is None:
        raise InputError("weights", "resource weights λ are required (a mapping resource→λ or "
                                    "a WeightRule)")
    rule = as_weight_rule(weights)
    gate = gate or SafetyGate()
    belief = state.belief
    ids = candidates.ids
    check_belief_candidates(belief, candidates)
    lam = rule(state.budget, state)
    costs = candidates.costs()
    budget = state.budget.sel(resource=costs["resource"])

    gain = belief["gain"].transpose("sample", "candidate")
    phi = xr.DataArray(fn(gain.values.T), dims="candidate", coords={"candidate": ids},
                       name="phi_gain")
    c_lambda = weighted_cost(costs, lam)
    u0 = net_utility(phi, c_lambda)
    mv, mv_reason = marginal_value(phi, c_lambda, belief["changes_policy"])

    available = np.ones(len(ids), bool) if state.available is None else np.isin(
        ids, list(state.available))
    budget_ok, budget_reason = budget_feasibility(costs, budget)
    safety = gate.evaluate(candidates, belief["executions"], belief["unsafe"],
                           belief.get("p_unsafe"))
    safe = safety["safe"].values.astype(bool)

    if state.is_terminal:
        cvu_vals = np.zeros(len(ids))
        cvu_status = "terminal step: CVU := 0, Q = U0"
    elif cvu is None:
        cvu_vals = np.zeros(len(ids))
        cvu_status = "not computed: CVU = 0 (Q = U0)"
    else:
        cvu_vals = cvu["cvu"].reindex(candidate=ids).values.astype(float)
        cvu_status = "estimated"
    cvu_da = xr.DataArray(cvu_vals, dims="candidate", coords={"candidate": ids}, name="cvu")
    q = q_score(u0, cvu_da, beta)

    feasible = available & budget_ok & safe
    pick = int(argmax_or_stop(q.values, feasible))
    chosen = ids[pick] if pick >= 0 else STOP
    if pick >= 0:
        stop, stop_reason = False, ""
    elif not (available & budget_ok).any():
        stop, stop_reason = True, "budget exhausted: no available candidate fits the budget"
    elif not feasible.any():
        stop, stop_reason = True, "no feasible candidate (unsafe or over budget)"
    else:
        stop, stop_reason = True, "economic stop: no feasible candidate has Q > 0"

    excluded = []
    for i in range(len(ids)):
        if i == pick:
            excluded.append("chosen")
        elif not available[i]:
            excluded.append("not available: executed and not repeatable")
        elif not budget_ok[i]:
            excluded.append(budget_reason[i])
        elif not safe[i]:
            excluded.append(str(safety["safe_reason"].values[i]))
        elif q.values[i] <= 0:
            excluded.append(f"economic stop: Q = {q.values[i]:.4g} <= 0")
        else:
            excluded.append(f"feasible, lower Q than {chosen}")

    flip = float("nan")
    if stability_resamples > 0:
        flip = decision_stability(gain.values, fn, c_lambda.values, beta * cvu_vals, feasible,
                                  pick, stability_resamples, seed)

    lam_next = next_weights(rule, budget, costs, state)
    ds = xr.Dataset(
        {
            "phi_gain": phi, "c_lambda": c_lambda, "u0": u0, "mv": mv, "mv_reason": mv_reason,
            "cvu": cvu_da, "q": q,
            **{f"cost_{r}": costs.sel(resource=r, drop=True) for r in costs["resource"].values},
            "available": ("candidate", available), "budget_ok": ("candidate", budget_ok),
            "budget_reason": ("candidate", np.array(budget_reason, dtype=object)),
            "safe": ("candidate", safe), "safe_reason": safety["safe_reason"],
            "p_exec_bound": safety["p_exec_bound"],
            "ucb_clopper_pearson": safety["ucb_clopper_pearson"],
            "ucb_posterior": safety["ucb_posterior"],
            "feasible": ("candidate", feasible),
            "chosen": ("candidate", np.arange(len(ids)) == pick),
            "excluded_reason": ("candidate", np.array(excluded, dtype=object)),
            **{f"lambda_next_{r}": lam_next.sel(resource=r, drop=True)
               for r in costs["resource"].values},
        },
        coords={"candidate": ids, "role": belief["role"], "lens": belief["lens"],
                "method": belief["method"]},
    )
    if cvu is not None and not state.is_terminal:
        for extra in ("cvu_mcse", "pareto_k", "pareto_k_bad", "n_refits", "cvu_method"):
            if extra in cvu:
                ds[extra] = cvu[extra].reindex(candidate=ids)
    ds.attrs.update({
        "step": int(state.step), "policy": state.policy, "chosen": chosen, "stop": int(stop),
        "stop_reason": stop_reason, "functional": str(fn), "beta": beta,
        "cvu_status": cvu_status, "weights_rule": rule.describe(),
        "flip_probability": flip, "alpha_exec": gate.alpha_exec, "delta": gate.delta,
        "safety_method": gate.method,
        "reliable": int(belief.attrs.get("reliable", 1)),
        "reliability_reason": str(belief.attrs.get("reliability_reason", "")),
        **{f"lambda_{r}": float(v) for r, v in zip(lam["resource"].values, lam.values,
                                                   strict=True)},
        **{f"budget_{r}": float(v) for r, v in zip(budget["resource"].values, budget.values,
                                                   strict=True)},
    })
    ds.attrs.update(transfer_attrs(belief, state.policy))
    return ds


def decision_table(decision: xr.Dataset) -> pd.DataFrame:
    """A compact table: candidate, φ(ΔJ), C_λ, U0, MV, CVU, Q, feasible, chosen, reason."""
    cols = ["phi_gain", "c_lambda", "u0", "mv", "cvu", "q", "feasible", "chosen",
            "excluded_reason"]
    return decision[cols].to_dataframe()[cols]
