"""The one decision entry point: scores, feasibility, CVU, argmax, the stop, and its stability.

:func:`decide` is called by every caller (the notebook API, the CLI, the campaign loop, replay,
the benchmarks) with a state s_t, the candidates and one validated
:class:`~belief.decision.settings.DecisionSettings`.  It returns an ``xarray.Dataset`` over
``candidate`` (``.to_dataframe()`` gives the table) with, for every candidate: φ(ΔJ), C_λ, U0,
MV (and why it is undefined), CVU and its status, Q, the value against stopping, each
feasibility test with its reason, and why it was excluded; attributes hold the chosen m*,
whether to stop and why, the settings, λ_t and the decision stability Pr(argmax flips).

The rule::

    Q(m)            = U0(m) + β·CVU(m),   CVU(m) = E_Y[G0(s^{m,Y})] − G0(s^∅)
    value_vs_stop(m) = Q(m) + β·G0(s^∅) = U0(m) + β·E_Y[G0(s^{m,Y})]
    m*              = argmax_{m ∈ M^feasible} Q(m)
    stop            ⇔ no feasible m has value_vs_stop(m) > 0

The stop compares doing m now and continuing with stopping (value 0), not with waiting: s^∅ still
offers m*, so G0(s^∅) ≥ U0(m*) and "stop when no Q > 0" would forfeit a worthwhile last action.
G0(s^∅) is one number per decision (s^∅ keeps b_t, λ_t, π_t and q_t for every candidate), so the
ranking by Q and by value_vs_stop is the same.  Without CVU (β = 0, or at the horizon where
CVU := 0) value_vs_stop = U0.

Uncertain costs.  When q_t holds joint predictive cost draws ``cost`` (sample, candidate,
resource; ``belief fit --costs``, :mod:`models.costs`)::

    C_λ(m)    = E[λ_tᵀ ΔC(m)] = (1/S) Σ_s λ_tᵀ ΔC(m)^(s)
    U0(m)     = φ[ΔJ(m)] − E[λ_tᵀ ΔC(m)]
    M^budget  = {m : Pr(ΔC_r(m) > b_t,r) ≤ ε_budget for every resource r}

Cost enters every functional through its expectation: φ = mean, lcb:Q and cvar:A act on the
gain ΔJ only, and the risk of a cost overrun is carried by the chance constraint, not by φ (a
quantile of gain − cost would need the joint law of gain and cost, which the models do not
relate, and would charge the cost's spread a second time beside the chance constraint; for
φ = mean both readings agree).  The table shows Pr(ΔC_r(m) > b_t,r) per resource
(``overrun_<resource>``) and E[ΔC_r(m)] (``cost_<resource>``).  CVU's budget dynamics use the
expected cost: s^{m,Y} has b_t − E[ΔC(m)], λ_{t+1} = λ(b_t − E[ΔC(m)]), the continuation's
C_λ is E[λ_{t+1}ᵀΔC], and its budget test is E[ΔC_r(m')] ≤ b_{t+1,r} (per-draw budget paths
are not followed).  Without cost draws, or with draws all equal to the known cost and
ε_budget = 0, everything is the known-cost rule above exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import numpy as np
import pandas as pd
import xarray as xr

from belief.decision.cvu import Scoring, cvu_for_state
from belief.decision.cvu.decisive import decisive_cvu
from belief.decision.cvu.psis import OutcomeWeights
from belief.decision.feasibility import ChanceConstraint, Feasibility, feasibility
from belief.decision.functionals import Functional, resampled
from belief.decision.safety import SafetyGate
from belief.decision.schema import (
    FROM_CVU,
    Attrs,
    Vars,
    check_decision,
    per_resource,
    table_columns,
)
from belief.decision.scores import (
    expected_cost,
    g0,
    marginal_value,
    net_utility,
    q_score,
    value_vs_stop,
    weighted_cost,
)
from belief.decision.settings import DecisionSettings
from belief.decision.state import State
from belief.decision.weights import next_weights
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates
from belief.posterior.experiments import Experiment, experiments_from_belief
from belief.posterior.transfer import transfer_attrs
from belief.validate import integer

__all__ = ["STOP", "argmax_or_stop", "belief_cost_draws", "decide", "decision_stability",
           "decision_table", "gate_view"]

STOP = "(stop)"


def argmax_or_stop(q: np.ndarray, eligible: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """Index of the best eligible candidate with value > ``threshold`` along the last axis
    (first on ties; NaN never qualifies), −1 for stop."""
    masked = np.where(eligible & (q > threshold), q, -np.inf)
    best = masked.argmax(axis=-1)
    return np.where(np.isfinite(np.take_along_axis(masked, best[..., None], -1)[..., 0]),
                    best, -1)


def belief_cost_draws(belief: xr.Dataset, resources: list[str]) -> np.ndarray | None:
    """q_t's joint predictive cost draws as an array (S, C, R) in the set's resource order, or
    None when the belief has none (known costs)."""
    if "cost" not in belief:
        return None
    da = belief["cost"]
    got = [str(r) for r in da["resource"].values]
    if sorted(got) != sorted(resources):
        raise InputError("belief", f"cost draws over resources {got}; the candidate set has "
                                   f"{resources}")
    return np.ascontiguousarray(da.sel(resource=resources)
                                .transpose("sample", "candidate", "resource").values, float)


def decision_stability(gain: np.ndarray, functional: Functional, c_lambda: np.ndarray,
                       continuation: np.ndarray, feasible: np.ndarray, chosen: int,
                       resamples: int = 200, seed: int = 0,
                       continuation_se: np.ndarray | None = None) -> float:
    """Pr(argmax flips) under a bootstrap of the joint posterior draws and CVU's error.

    Scheme: draw ``resamples`` bootstrap replicates of the sample index (with replacement,
    the same index for every candidate so joint structure is kept), recompute φ(ΔJ) and the
    value against stopping U0 + ``continuation`` (continuation = β·E_Y[G0(s^{m,Y})] at its
    estimate, plus, when ``continuation_se`` is given, an independent N(0, se²) error per
    candidate and replicate — CVU's Monte Carlo error, β·se; feasibility held fixed), and
    report the fraction of replicates whose argmax (or stop) differs from ``chosen`` (−1 =
    stop).  A proxy for how much the decision rests on Monte Carlo noise, not a value.

    A ranked (``feasible``) candidate whose ``continuation_se`` is NaN has an unknown CVU
    error: the result is then NaN, never computed as if that error were 0 (which would
    understate Pr(flip)).
    """
    if continuation_se is not None:
        se_all = np.asarray(continuation_se, float)
        if np.isnan(se_all[np.asarray(feasible, bool)]).any():
            return float("nan")
    rng = np.random.default_rng(seed)
    n = gain.shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    phi = resampled(functional, gain, idx)  # (B, C): functional(gain[idx]) per resample
    value = phi - c_lambda[None, :] + continuation[None, :]
    if continuation_se is not None:
        se = np.nan_to_num(np.asarray(continuation_se, float), nan=0.0)
        value = value + se[None, :] * rng.standard_normal(value.shape)
    picks = argmax_or_stop(value, feasible[None, :])
    return float(np.mean(picks != chosen))


def _excluded_reasons(ids: list[str], pick: int, feas: Feasibility, value: np.ndarray,
                      q: np.ndarray, cvu_ok: np.ndarray, chosen: str,
                      cvu_why: np.ndarray) -> list[str]:
    reasons = []
    for i in range(len(ids)):
        if i == pick:
            reasons.append("chosen")
        elif not feas.available[i]:
            reasons.append("not available: executed and not repeatable")
        elif not feas.affordable[i]:
            reasons.append(feas.budget_reason[i])
        elif not feas.safe[i]:
            reasons.append(str(feas.safety["safe_reason"].values[i]))
        elif not cvu_ok[i]:
            reasons.append(f"not ranked: CVU could not be estimated ({cvu_why[i]})")
        elif value[i] <= 0:
            reasons.append(f"economic stop: U0 + β·E[G0] = {value[i]:.4g} <= 0 (stopping "
                           "is worth more)")
        else:
            reasons.append(f"feasible, lower Q ({q[i]:.4g}) than {chosen}")
    return reasons


def _cvu_errors(cvu: xr.Dataset, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """CVU's total standard error per candidate (``cvu_se``, else the root sum of squares of
    ``cvu_mcse`` and ``cvu_draws_se`` that are present; 0 when none is) and why a CVU is NaN
    (``cvu_reason`` when given)."""
    def get(name: str, fill: object) -> np.ndarray:
        if name in cvu:
            return cvu[name].reindex(candidate=ids).values
        return np.full(len(ids), fill, dtype=object if isinstance(fill, str) else float)

    if "cvu_se" in cvu:
        se = get("cvu_se", 0.0).astype(float)
    else:
        se = np.sqrt(np.nan_to_num(get("cvu_mcse", 0.0).astype(float)) ** 2
                     + np.nan_to_num(get("cvu_draws_se", 0.0).astype(float)) ** 2)
    why = np.array([w if isinstance(w, str) and w else "CVU is NaN, no reason given"
                    for w in get("cvu_reason", "")], dtype=object)
    return se, why


def _cvu_status(base: str, ids: list[str], relevant: np.ndarray, cvu_ok: np.ndarray,
                why: np.ndarray) -> str:
    """``base`` ("estimated" or "given"), or the candidates whose CVU is NaN and why."""
    bad = [i for i in range(len(ids)) if relevant[i] and not cvu_ok[i]]
    if not bad:
        return base
    listed = "; ".join(f"{ids[i]} ({why[i]})" for i in bad)
    return (f"{base} except for {len(bad)} feasible candidate(s) whose CVU could not be "
            f"estimated and which are not ranked: {listed}")


def decide(state: State, candidates: CandidateSet, settings: DecisionSettings, *,
           seed: int = 0, cvu: xr.Dataset | None = None,
           experiments: Mapping[str, Experiment] | None = None,
           refit: Callable[[str, np.ndarray], np.ndarray] | None = None,
           on_feasibility: Callable[[xr.Dataset], None] | None = None) -> xr.Dataset:
    """Score every candidate at state s_t and pick m*_t = argmax_{feasible} Q, or stop.

    Parameters
    ----------
    state : State
        s_t, with q_t in ``state.belief``.
    candidates : CandidateSet
    settings : DecisionSettings
        φ, the λ rule, β, the safety gate, the CVU settings, the horizon and the stability
        bootstrap, validated when they were built.
    seed : int
        Seeds CVU's outcomes and the stability bootstrap.
    cvu : Dataset over ``candidate``, optional
        A CVU computed elsewhere (``cvu``; optionally its errors ``cvu_se`` or ``cvu_mcse`` and
        ``cvu_draws_se``, ``cvu_method``, ``cvu_reason``, ``pareto_k`` and the attribute
        ``g0_null``); by default, when β > 0 and the step is not terminal, CVU is computed
        here for the feasible candidates.  A feasible candidate whose CVU is NaN is never
        ranked (its Q is NaN): its ``excluded_reason`` and the ``cvu_status`` say why.
    experiments : mapping id → Experiment, optional
        CVU's experiments (default: from the gains model's draws in q_t).
    refit : callable (m, Y) → next-gain draws, optional
        Exact refits for CVU where PSIS k̂ is too high: with ``settings.cvu.refit_scope``
        ``decisive`` (and the one-step continuation) only for the candidates that could
        still be chosen (:mod:`belief.decision.cvu.decisive`; ``n_deferred`` counts the
        outcomes left bounded, ``cvu_low`` and ``cvu_high`` bound their CVU).
    on_feasibility : callable Dataset → None, optional
        Called once the feasible set is known, before CVU, with :func:`gate_view` of it (the
        variables of the returned decision that it holds, with the same values): ``belief
        decide`` has the figures that need no more drawn while CVU runs.

    Returns
    -------
    Dataset over ``candidate`` (``lambda_next_<resource>`` holds λ_{t+1} = λ(b_t − ΔC(m)));
    variables ``phi_gain``, ``c_lambda``, ``u0``, ``mv``, ``cvu``, ``q``, ``value_vs_stop``,
    the feasibility tests and ``excluded_reason``; with CVU also ``cvu_se`` (its standard
    error: the outcomes' Monte Carlo error and the error of the posterior draws), ``cvu_mcse``,
    ``cvu_draws_se``, ``cvu_method`` (the estimator), ``cvu_noise_bias`` (the mean noise bias
    of G0 that the PSIS or regression estimator removed, :mod:`belief.decision.cvu.noise`;
    NaN for other estimators) and ``cvu_reason`` when known (with a
    non-myopic ``settings.cvu.continuation`` also ``cvu_continuation``, ``cvu_bias_bound``
    and ``cvu_inner_bad_share``, and the attributes ``continuation``,
    ``continuation_depth`` and ``continuation_inner_outcomes``; ``g0_null`` is then V(s^∅));
    attributes ``chosen`` (id or ``"(stop)"``), ``stop`` (0/1), ``stop_reason``,
    ``functional``, ``beta``, ``g0_null``, ``cvu_status``, ``lambda_<resource>``,
    ``flip_probability`` (under posterior resampling and CVU's error, β·cvu_se per candidate);
    when q_t holds transfer draws, the current policy's δ_J and G_J summaries (reported only:
    δ_J is not a value input).
    """
    if not isinstance(settings, DecisionSettings):
        raise InputError("settings", f"expected DecisionSettings, got {type(settings).__name__}")
    if settings.weights is None:
        raise InputError("weights", "resource weights λ are required (a mapping resource→λ, a "
                                    "WeightRule or a callable)")
    seed = integer(seed, "seed", minimum=0)
    belief = state.belief
    ids = candidates.ids
    check_belief_candidates(belief, candidates)
    resources = list(candidates.resources)
    costs = candidates.costs().values  # (C, R)
    budget = state.budget.sel(resource=resources).values.astype(float)
    lam_rule = settings.weights.bind(resources, state)  # λ checked against the resources once
    lam = lam_rule(budget)
    fn, beta = settings.functional, settings.beta

    gain = belief["gain"].transpose("sample", "candidate").values
    phi = fn(gain.T)
    cost_draws = belief_cost_draws(belief, resources)
    if cost_draws is None:
        c_lambda = weighted_cost(costs, lam)
    else:  # uncertain costs: E[λᵀΔC] = λᵀE[ΔC] (module docstring); E[ΔC] in the table, CVU
        costs = expected_cost(cost_draws)
        c_lambda = weighted_cost(costs, lam)
    u0 = net_utility(phi, c_lambda)
    mv, mv_reason = marginal_value(phi, c_lambda, belief["changes_policy"].values)

    feas = feasibility(state, candidates, settings.gate, costs, budget, cost_draws=cost_draws,
                       chance=ChanceConstraint(settings.eps_budget))
    feasible = feas.feasible
    gate = gate_view(ids, feas, settings.gate)  # the decision's own gate variables
    if on_feasibility is not None:
        on_feasibility(gate)
    terminal = settings.is_terminal(state.step)
    if terminal:
        cvu = None
        cvu_status = "terminal step: CVU := 0, Q = U0"
    elif cvu is None and beta > 0:
        if experiments is None:  # built once: the second call re-uses the first's weights
            experiments = experiments_from_belief(belief, candidates, settings.cvu.trials, refit)
        memos: dict[str, OutcomeWeights] = {}

        def compute(defer: bool, only: Collection[str] | None) -> xr.Dataset:
            out = cvu_for_state(state, candidates, settings, experiments=experiments,
                                refit=refit, costs=None if cost_draws is None else costs,
                                cost_draws=cost_draws,
                                scoring=Scoring(seed, feas, only, defer, memos))
            # keep the weights (2·J·S floats per candidate) only where a refit may follow
            for cid, n in zip(ids, out["n_deferred"].values, strict=True):
                if n == 0 or not defer:
                    memos.pop(cid, None)
            return out

        cvu = (decisive_cvu(compute, u0, beta, feasible) if settings.cvu.decisive_refits
               else compute(False, None))
        cvu_status = "estimated"
    elif cvu is None:
        cvu_status = "not computed (β = 0): CVU = 0, Q = U0"
    else:
        cvu_status = "given"
    if cvu is None:
        cvu_vals, g0_null = np.zeros(len(ids)), 0.0
        cvu_se, cvu_why = np.zeros(len(ids)), np.full(len(ids), "", dtype=object)
    else:
        cvu_vals = cvu["cvu"].reindex(candidate=ids).values.astype(float)
        # G0(s^∅) = max(0, max_{m ∈ M^feasible} U0(m)) is exact from the decision's own U0 when a
        # given CVU does not carry it (a default of 0 would bring back the "Q > 0" stop)
        g0_null = float(cvu.attrs["g0_null"]) if "g0_null" in cvu.attrs else float(
            g0(u0, feasible))
        cvu_se, cvu_why = _cvu_errors(cvu, ids)
        if not np.isfinite(g0_null):  # G0(s^∅) itself failed: no CVU can be used
            cvu_vals = np.full(len(ids), np.nan)
            cvu_why = np.full(len(ids), "G0(s^∅) is not finite", dtype=object)
        # candidates CVU did not score (infeasible ones) carry no continuation
        cvu_vals = np.where(feasible | np.isfinite(cvu_vals), cvu_vals, 0.0)
        cvu_status = _cvu_status(cvu_status, ids, feasible, np.isfinite(cvu_vals), cvu_why)
    cvu_ok = np.isfinite(cvu_vals)
    q = q_score(u0, cvu_vals, beta)  # NaN where CVU is NaN: never ranked (cvu_ok)
    value = value_vs_stop(q, g0_null if np.isfinite(g0_null) else 0.0, beta)

    pick = int(argmax_or_stop(value, feasible & cvu_ok))
    chosen = ids[pick] if pick >= 0 else STOP
    if pick >= 0:
        stop, stop_reason = False, ""
    elif not (feas.available & feas.affordable).any():
        stop, stop_reason = True, "budget exhausted: no available candidate fits the budget"
    elif not feasible.any():
        stop, stop_reason = True, "no feasible candidate (unsafe or over budget)"
    elif not (feasible & cvu_ok).any():
        stop, stop_reason = True, "no feasible candidate has an estimable CVU"
    else:
        label = "U0 + β·E[G0(s')]" if cvu is not None else "U0"
        stop, stop_reason = True, (f"economic stop: no feasible candidate is worth more than "
                                   f"stopping ({label} <= 0 for every one)")

    flip = float("nan")
    if settings.stability_resamples > 0:
        cont = (beta * (cvu_vals + g0_null)) if cvu is not None else np.zeros(len(ids))
        flip = decision_stability(gain, fn, c_lambda, np.nan_to_num(cont, nan=-np.inf),
                                  feasible & cvu_ok, pick, settings.stability_resamples, seed,
                                  continuation_se=beta * cvu_se if cvu is not None else None)

    lam_next = next_weights(lam_rule, budget, costs)  # (C, R)
    cand = ("candidate",)
    V, A = Vars, Attrs  # the names, declared with their meaning in belief.decision.schema
    ds = xr.Dataset(
        {
            V.phi_gain: (cand, phi), V.c_lambda: (cand, c_lambda), V.u0: (cand, u0),
            V.mv: (cand, mv), V.mv_reason: (cand, mv_reason),
            V.cvu: (cand, cvu_vals), V.q: (cand, q), V.value_vs_stop: (cand, value),
            **{per_resource(V.cost, r): (cand, costs[:, k]) for k, r in enumerate(resources)},
            V.available: gate[V.available], V.budget_ok: (cand, feas.affordable),
            V.budget_reason: (cand, np.array(feas.budget_reason, dtype=object)),
            V.safe: gate[V.safe], V.safe_reason: gate[V.safe_reason],
            V.p_exec_bound: feas.safety[V.p_exec_bound],
            V.ucb_anytime: gate[V.ucb_anytime],
            V.ucb_clopper_pearson: gate[V.ucb_clopper_pearson],
            V.ucb_posterior: gate[V.ucb_posterior], V.feasible: gate[V.feasible],
            V.chosen: (cand, np.arange(len(ids)) == pick),
            V.excluded_reason: (cand, np.array(
                _excluded_reasons(ids, pick, feas, value, q, cvu_ok, chosen, cvu_why),
                dtype=object)),
            **{per_resource(V.lambda_next, r): (cand, lam_next[:, k])
               for k, r in enumerate(resources)},
        },
        coords={"candidate": ids, "role": belief["role"], "lens": belief["lens"],
                "method": belief["method"]},
    )
    ds[V.value_vs_stop].attrs["long_name"] = ("value of doing m now and continuing, against "
                                              "stopping: U0 + β·E_Y[G0(s^{m,Y})]")
    if feas.overrun is not None:
        for k, r in enumerate(resources):
            ds[per_resource(V.overrun, r)] = (cand, feas.overrun[:, k])
            ds[per_resource(V.overrun, r)].attrs["long_name"] = f"Pr(ΔC_{r}(m) > b_t,{r})"
            ds[per_resource(V.cost, r)].attrs["long_name"] = (f"E[ΔC_{r}(m)] under the cost "
                                                              "posterior")
    if cvu is not None:
        ds[V.cvu_se] = (cand, np.where(cvu_ok, cvu_se, np.nan))
        ds[V.cvu_se].attrs["long_name"] = ("CVU's standard error: outcome Monte Carlo error and "
                                           "the error of the finite posterior draws")
        for extra in FROM_CVU:
            if extra in cvu:
                ds[extra] = cvu[extra].reindex(candidate=ids)
    ds.attrs.update({
        A.step: int(state.step), A.policy: state.policy, A.chosen: chosen, A.stop: int(stop),
        A.stop_reason: stop_reason, A.functional: str(fn), A.beta: beta,
        A.g0_null: g0_null, A.cvu_status: cvu_status,
        A.weights_rule: settings.weights.describe(), A.flip_probability: flip,
        **gate.attrs,  # alpha_exec, delta, safety_method, safety_bound, safety_guarantee
        A.eps_budget: settings.eps_budget,
        A.costs: "uncertain (cost posterior draws)" if cost_draws is not None else "known",
        A.horizon: -1 if settings.horizon is None else settings.horizon,
        A.reliable: int(belief.attrs.get("reliable", 1)),
        A.reliability_reason: str(belief.attrs.get("reliability_reason", "")),
        **{per_resource(A.lambda_, r): float(v) for r, v in zip(resources, lam, strict=True)},
        **{per_resource(A.budget, r): float(v) for r, v in zip(resources, budget, strict=True)},
    })
    if cvu is not None and A.continuation in cvu.attrs:  # a non-myopic continuation
        ds.attrs[A.continuation] = str(cvu.attrs[A.continuation])
        ds.attrs[A.continuation_depth] = int(cvu.attrs[A.continuation_depth])
        if A.continuation_inner_outcomes in cvu.attrs:
            ds.attrs[A.continuation_inner_outcomes] = int(
                cvu.attrs[A.continuation_inner_outcomes])
        for key in (A.continuation_used, A.continuation_reason):
            if key in cvu.attrs:
                ds.attrs[key] = str(cvu.attrs[key])
    ds.attrs.update(transfer_attrs(belief, state.policy))
    return check_decision(ds, resources, dtypes=False)


def gate_view(ids: list[str], feas: Feasibility, gate: SafetyGate) -> xr.Dataset:
    """The feasible set and the safety gate as the decision holds them: ``available``,
    ``feasible``, ``safe``, ``safe_reason``, ``ucb_anytime``, ``ucb_clopper_pearson``,
    ``ucb_posterior`` over ``candidate``, attributes ``alpha_exec``, ``delta``,
    ``safety_method``, ``safety_bound`` (the deciding bound's name) and ``safety_guarantee``
    (what it guarantees: over every look, one look, or a credible bound)."""
    cand = ("candidate",)
    V, A = Vars, Attrs
    return xr.Dataset(
        {V.available: (cand, feas.available), V.feasible: (cand, feas.feasible),
         V.safe: (cand, feas.safe), V.safe_reason: feas.safety[V.safe_reason],
         V.ucb_anytime: feas.safety[V.ucb_anytime],
         V.ucb_clopper_pearson: feas.safety[V.ucb_clopper_pearson],
         V.ucb_posterior: feas.safety[V.ucb_posterior]},
        coords={"candidate": ids},
        attrs={A.alpha_exec: gate.alpha_exec, A.delta: gate.delta, A.safety_method: gate.method,
               A.safety_bound: gate.label, A.safety_guarantee: gate.guarantee})


def decision_table(decision: xr.Dataset) -> pd.DataFrame:
    """A compact table: candidate, φ(ΔJ), C_λ, U0, MV, CVU, its split by channel (own, order,
    safety: :mod:`belief.decision.cvu.channels`, when computed), Q, value against stopping, the
    overrun probability per resource (with cost draws), feasible, chosen, reason."""
    cols = table_columns(decision)  # belief.decision.schema.TABLE_COLUMNS
    return decision[cols].to_dataframe()[cols]
