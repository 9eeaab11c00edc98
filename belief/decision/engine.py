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
from dataclasses import dataclass

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

__all__ = ["STOP", "Bootstrap", "argmax_or_stop", "belief_cost_draws", "decide",
           "decision_stability", "decision_table", "gate_view"]

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


@dataclass(frozen=True)
class Bootstrap:
    """The stability bootstrap of :func:`decision_stability`: ``resamples`` replicates drawn
    with the generator seeded by ``seed``."""

    resamples: int = 200
    seed: int = 0


def decision_stability(gain: np.ndarray, functional: Functional, c_lambda: np.ndarray,
                       continuation: np.ndarray, feasible: np.ndarray, chosen: int,
                       bootstrap: Bootstrap = Bootstrap(),
                       continuation_se: np.ndarray | None = None) -> float:
    """Pr(argmax flips) under a bootstrap of the joint posterior draws and CVU's error.

    Scheme: draw ``bootstrap.resamples`` bootstrap replicates of the sample index (with replacement,
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
    rng = np.random.default_rng(bootstrap.seed)
    n = gain.shape[0]
    idx = rng.integers(0, n, size=(bootstrap.resamples, n))
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
    _check_settings(settings)
    seed = integer(seed, "seed", minimum=0)
    ids = candidates.ids
    sc = _scores(state, candidates, settings)
    feas = feasibility(state, candidates, settings.gate, sc.costs, sc.budget,
                       cost_draws=sc.cost_draws, chance=ChanceConstraint(settings.eps_budget))
    gate = gate_view(ids, feas, settings.gate)  # the decision's own gate variables
    if on_feasibility is not None:
        on_feasibility(gate)
    cvu, status = _cvu_dataset(state, settings, cvu, lambda: _estimate_cvu(
        state, candidates, settings, sc, feas, seed, experiments, refit))
    cv = _cvu_values(cvu, status, ids, sc.u0, feas.feasible)
    q = q_score(sc.u0, cv.values, settings.beta)  # NaN where CVU is NaN: never ranked (cv.ok)
    value = value_vs_stop(q, cv.g0_null if np.isfinite(cv.g0_null) else 0.0, settings.beta)
    pick = int(argmax_or_stop(value, feas.feasible & cv.ok))
    chosen = ids[pick] if pick >= 0 else STOP
    stop_reason = _stop_reason(pick, feas, cv.ok, cvu is not None)
    flip = _flip_probability(sc, cv, cvu is not None, feas.feasible, pick, settings, seed)
    reasons = _excluded_reasons(ids, pick, feas, value, q, cv.ok, chosen, cv.why)
    ranked = {Vars.cvu: cv.values, Vars.q: q, Vars.value_vs_stop: value}
    ds = _decision_dataset(ids, state.belief, sc, feas, gate, ranked, pick, reasons)
    _add_cvu_variables(ds, cvu, ids, cv)
    ds.attrs.update(_decision_attrs(state, settings, sc, cv, gate, flip, chosen, stop_reason))
    ds.attrs.update(_continuation_attrs(cvu))
    ds.attrs.update(transfer_attrs(state.belief, state.policy))
    return check_decision(ds, sc.resources, dtypes=False)


@dataclass(frozen=True)
class _Scores:
    """The per-candidate scores at s_t that need no CVU: the resources, the (expected) costs
    ΔC (C, R), the budget b_t, the λ rule and λ_t, the gain draws (S, C), φ(ΔJ), the cost
    draws (or None), C_λ, U0 and MV with its reason."""

    resources: list[str]
    costs: np.ndarray
    budget: np.ndarray
    lam_rule: Callable[[np.ndarray], np.ndarray]
    lam: np.ndarray
    gain: np.ndarray
    phi: np.ndarray
    cost_draws: np.ndarray | None
    c_lambda: np.ndarray
    u0: np.ndarray
    mv: np.ndarray
    mv_reason: np.ndarray


def _scores(state: State, candidates: CandidateSet, settings: DecisionSettings) -> _Scores:
    """φ(ΔJ), C_λ = λ_tᵀ E[ΔC], U0 = φ − C_λ and MV at s_t (module docstring)."""
    belief = state.belief
    check_belief_candidates(belief, candidates)
    resources = list(candidates.resources)
    costs = candidates.costs().values  # (C, R)
    budget = state.budget.sel(resource=resources).values.astype(float)
    lam_rule = settings.weights.bind(resources, state)  # λ checked against the resources once
    lam = lam_rule(budget)
    gain = belief["gain"].transpose("sample", "candidate").values
    phi = settings.functional(gain.T)
    cost_draws = belief_cost_draws(belief, resources)
    if cost_draws is None:
        c_lambda = weighted_cost(costs, lam)
    else:  # uncertain costs: E[λᵀΔC] = λᵀE[ΔC] (module docstring); E[ΔC] in the table, CVU
        costs = expected_cost(cost_draws)
        c_lambda = weighted_cost(costs, lam)
    u0 = net_utility(phi, c_lambda)
    mv, mv_reason = marginal_value(phi, c_lambda, belief["changes_policy"].values)
    return _Scores(resources, costs, budget, lam_rule, lam, gain, phi, cost_draws, c_lambda,
                   u0, mv, mv_reason)


def _check_settings(settings: DecisionSettings) -> None:
    """Raise InputError unless ``settings`` is a DecisionSettings with resource weights."""
    if not isinstance(settings, DecisionSettings):
        raise InputError("settings", f"expected DecisionSettings, got {type(settings).__name__}")
    if settings.weights is None:
        raise InputError("weights", "resource weights λ are required (a mapping resource→λ, a "
                                    "WeightRule or a callable)")


def _cvu_dataset(state: State, settings: DecisionSettings, cvu: xr.Dataset | None,
                 estimate: Callable[[], xr.Dataset]) -> tuple[xr.Dataset | None, str]:
    """The CVU the decision uses (None for CVU := 0) and its status: none at the terminal step
    or with β = 0, the given one, else ``estimate()`` for the feasible candidates."""
    if settings.is_terminal(state.step):
        return None, "terminal step: CVU := 0, Q = U0"
    if cvu is not None:
        return cvu, "given"
    if settings.beta <= 0:
        return None, "not computed (β = 0): CVU = 0, Q = U0"
    return estimate(), "estimated"


def _estimate_cvu(state: State, candidates: CandidateSet, settings: DecisionSettings,
                  sc: _Scores, feas: Feasibility, seed: int,
                  experiments: Mapping[str, Experiment] | None,
                  refit: Callable[[str, np.ndarray], np.ndarray] | None) -> xr.Dataset:
    """CVU at s_t for the feasible candidates (:func:`~belief.decision.cvu.cvu_for_state`),
    with decisive refits when the settings ask for them."""
    if experiments is None:  # built once: the second call re-uses the first's weights
        experiments = experiments_from_belief(state.belief, candidates, settings.cvu.trials,
                                              refit)
    memos: dict[str, OutcomeWeights] = {}

    def compute(defer: bool, only: Collection[str] | None) -> xr.Dataset:
        out = cvu_for_state(state, candidates, settings, experiments=experiments,
                            refit=refit, costs=None if sc.cost_draws is None else sc.costs,
                            cost_draws=sc.cost_draws,
                            scoring=Scoring(seed, feas, only, defer, memos))
        # keep the weights (2·J·S floats per candidate) only where a refit may follow
        for cid, n in zip(candidates.ids, out["n_deferred"].values, strict=True):
            if n == 0 or not defer:
                memos.pop(cid, None)
        return out

    if settings.cvu.decisive_refits:
        return decisive_cvu(compute, sc.u0, settings.beta, feas.feasible)
    return compute(False, None)


@dataclass(frozen=True)
class _CvuValues:
    """CVU per candidate as the decision uses it (0 where CVU is not computed or the
    candidate was not scored), G0(s^∅), CVU's standard error, why a CVU is NaN, whether it is
    finite, and the CVU status."""

    values: np.ndarray
    g0_null: float
    se: np.ndarray
    why: np.ndarray
    ok: np.ndarray
    status: str


def _cvu_values(cvu: xr.Dataset | None, status: str, ids: list[str], u0: np.ndarray,
                feasible: np.ndarray) -> _CvuValues:
    """CVU, G0(s^∅), its error and status per candidate from a CVU dataset (or zeros)."""
    if cvu is None:
        vals = np.zeros(len(ids))
        return _CvuValues(vals, 0.0, np.zeros(len(ids)), np.full(len(ids), "", dtype=object),
                          np.isfinite(vals), status)
    vals = cvu["cvu"].reindex(candidate=ids).values.astype(float)
    # G0(s^∅) = max(0, max_{m ∈ M^feasible} U0(m)) is exact from the decision's own U0 when a
    # given CVU does not carry it (a default of 0 would bring back the "Q > 0" stop)
    g0_null = float(cvu.attrs["g0_null"]) if "g0_null" in cvu.attrs else float(
        g0(u0, feasible))
    se, why = _cvu_errors(cvu, ids)
    if not np.isfinite(g0_null):  # G0(s^∅) itself failed: no CVU can be used
        vals = np.full(len(ids), np.nan)
        why = np.full(len(ids), "G0(s^∅) is not finite", dtype=object)
    # candidates CVU did not score (infeasible ones) carry no continuation
    vals = np.where(feasible | np.isfinite(vals), vals, 0.0)
    status = _cvu_status(status, ids, feasible, np.isfinite(vals), why)
    return _CvuValues(vals, g0_null, se, why, np.isfinite(vals), status)


def _stop_reason(pick: int, feas: Feasibility, cvu_ok: np.ndarray, with_cvu: bool) -> str:
    """Why the decision stops ("" when it picked a candidate: it stops iff ``pick`` < 0)."""
    if pick >= 0:
        return ""
    if not (feas.available & feas.affordable).any():
        return "budget exhausted: no available candidate fits the budget"
    if not feas.feasible.any():
        return "no feasible candidate (unsafe or over budget)"
    if not (feas.feasible & cvu_ok).any():
        return "no feasible candidate has an estimable CVU"
    label = "U0 + β·E[G0(s')]" if with_cvu else "U0"
    return (f"economic stop: no feasible candidate is worth more than "
            f"stopping ({label} <= 0 for every one)")


def _flip_probability(sc: _Scores, cv: _CvuValues, with_cvu: bool, feasible: np.ndarray,
                      pick: int, settings: DecisionSettings, seed: int) -> float:
    """:func:`decision_stability` of the decision, with CVU's error β·se when CVU is used
    (NaN when the settings ask for no resamples)."""
    if settings.stability_resamples <= 0:
        return float("nan")
    beta = settings.beta
    cont = (beta * (cv.values + cv.g0_null)) if with_cvu else np.zeros(len(cv.values))
    return decision_stability(sc.gain, settings.functional, sc.c_lambda,
                              np.nan_to_num(cont, nan=-np.inf), feasible & cv.ok, pick,
                              Bootstrap(settings.stability_resamples, seed),
                              continuation_se=beta * cv.se if with_cvu else None)


def _decision_dataset(ids: list[str], belief: xr.Dataset, sc: _Scores, feas: Feasibility,
                      gate: xr.Dataset, ranked: dict[str, np.ndarray], pick: int,
                      reasons: list[str]) -> xr.Dataset:
    """The decision's variables over ``candidate`` (without CVU's own) and its coordinates;
    ``ranked`` holds ``cvu``, ``q`` and ``value_vs_stop`` in that order."""
    resources, costs = sc.resources, sc.costs
    lam_next = next_weights(sc.lam_rule, sc.budget, costs)  # (C, R)
    cand = ("candidate",)
    V = Vars  # the names, declared with their meaning in belief.decision.schema
    ds = xr.Dataset(
        {
            V.phi_gain: (cand, sc.phi), V.c_lambda: (cand, sc.c_lambda), V.u0: (cand, sc.u0),
            V.mv: (cand, sc.mv), V.mv_reason: (cand, sc.mv_reason),
            **{name: (cand, v) for name, v in ranked.items()},
            **{per_resource(V.cost, r): (cand, costs[:, k]) for k, r in enumerate(resources)},
            V.available: gate[V.available], V.budget_ok: (cand, feas.affordable),
            V.budget_reason: (cand, np.array(feas.budget_reason, dtype=object)),
            V.safe: gate[V.safe], V.safe_reason: gate[V.safe_reason],
            V.p_exec_bound: feas.safety[V.p_exec_bound],
            V.ucb_anytime: gate[V.ucb_anytime],
            V.ucb_clopper_pearson: gate[V.ucb_clopper_pearson],
            V.ucb_posterior: gate[V.ucb_posterior], V.feasible: gate[V.feasible],
            V.chosen: (cand, np.arange(len(ids)) == pick),
            V.excluded_reason: (cand, np.array(reasons, dtype=object)),
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
    return ds


def _add_cvu_variables(ds: xr.Dataset, cvu: xr.Dataset | None, ids: list[str],
                       cv: _CvuValues) -> None:
    """Add CVU's standard error and the CVU variables the decision carries over (FROM_CVU),
    when there is a CVU."""
    if cvu is None:
        return
    ds[Vars.cvu_se] = (("candidate",), np.where(cv.ok, cv.se, np.nan))
    ds[Vars.cvu_se].attrs["long_name"] = ("CVU's standard error: outcome Monte Carlo error "
                                          "and the error of the finite posterior draws")
    for extra in FROM_CVU:
        if extra in cvu:
            ds[extra] = cvu[extra].reindex(candidate=ids)


def _decision_attrs(state: State, settings: DecisionSettings, sc: _Scores, cv: _CvuValues,
                    gate: xr.Dataset, flip: float, chosen: str,
                    stop_reason: str) -> dict[str, object]:
    """The decision's attributes: the step, π_t, the choice, whether to stop and why, φ, β,
    G0(s^∅), the CVU status, the λ rule, Pr(flip), the gate's, ε_budget, the cost kind, the
    horizon, the belief's reliability, λ_t and b_t per resource."""
    A, belief = Attrs, state.belief
    return {
        A.step: int(state.step), A.policy: state.policy, A.chosen: chosen,
        A.stop: int(bool(stop_reason)), A.stop_reason: stop_reason,
        A.functional: str(settings.functional), A.beta: settings.beta,
        A.g0_null: cv.g0_null, A.cvu_status: cv.status,
        A.weights_rule: settings.weights.describe(), A.flip_probability: flip,
        **gate.attrs,  # alpha_exec, delta, safety_method, safety_bound, safety_guarantee
        A.eps_budget: settings.eps_budget,
        A.costs: "uncertain (cost posterior draws)" if sc.cost_draws is not None else "known",
        A.horizon: -1 if settings.horizon is None else settings.horizon,
        A.reliable: int(belief.attrs.get("reliable", 1)),
        A.reliability_reason: str(belief.attrs.get("reliability_reason", "")),
        **{per_resource(A.lambda_, r): float(v)
           for r, v in zip(sc.resources, sc.lam, strict=True)},
        **{per_resource(A.budget, r): float(v)
           for r, v in zip(sc.resources, sc.budget, strict=True)},
    }


def _continuation_attrs(cvu: xr.Dataset | None) -> dict[str, object]:
    """A non-myopic continuation's attributes carried over from CVU (none for one step or
    without CVU)."""
    A, out = Attrs, {}
    if cvu is None or A.continuation not in cvu.attrs:
        return out
    out[A.continuation] = str(cvu.attrs[A.continuation])
    out[A.continuation_depth] = int(cvu.attrs[A.continuation_depth])
    if A.continuation_inner_outcomes in cvu.attrs:
        out[A.continuation_inner_outcomes] = int(cvu.attrs[A.continuation_inner_outcomes])
    for key in (A.continuation_used, A.continuation_reason):
        if key in cvu.attrs:
            out[key] = str(cvu.attrs[key])
    return out


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
