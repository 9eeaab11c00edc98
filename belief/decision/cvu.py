"""CVU: the Monte Carlo continuation value, by preposterior simulation and PSIS reweighting.

For a candidate m at state s_t::

    CVU(m | s_t) = E_Y[ G0(s_{t+1}^{m,Y}) ] − G0(s_{t+1}^∅),
    G0(s)        = max(0, max_{m' ∈ M^feasible(s)} U0(m' | s)),   U0 = φ(ΔJ) − λᵀΔC.

s_{t+1}^{m,Y} — beliefs updated by the outcome Y of m's experiment, budget b − ΔC(m), weights
λ_{t+1} = λ(b − ΔC(m)), m removed if it is not repeatable, the policy changed if m adapts it;
s_{t+1}^∅ — beliefs, budget, λ and policy unchanged.  ΔC(m) is charged once, in U0; CVU may be
negative.

Estimator (the engine's hard part):

1. draw J outcomes from the posterior predictive: pick draws i_j uniformly, Y_j ~ p(Y | θ_{i_j});
2. log-weights log w_ij = log p(Y_j | θ_i) for every joint draw i, Pareto-smoothed with ArviZ's
   PSIS (``arviz_stats``; k̂_j per outcome), self-normalised;
3. every candidate's φ-gain in s^{m,Y_j} is the *weighted* functional (mean, LCB or CVaR) of
   the joint draws of its next gain (after m's policy change, when m adapts the policy);
4. CVU ≈ (1/J) Σ_j G0_j − G0^∅, with Monte Carlo standard error sd(G0_j)/√J (the error of the
   J outcomes; the finite-S error of the posterior draws is not included).

Where k̂_j > 0.7 the importance weights cannot be trusted: if the caller supplies an exact refit
(``Experiment.refit``), those outcomes are recomputed from a refit of the model on the evidence
plus the simulated Y_j (slow, correct) and the candidate is marked ``psis+refit``.

s^∅ is the same for every candidate: the same step, beliefs, policy and candidate set, the
budget b_t (not deducted) and therefore λ_t = λ(b_t) even for a state-dependent λ rule, and no
background drift (the engine models none); so G0(s^∅) is one number per decision
(``g0_null``) and Q = U0 + β·CVU ranks candidates exactly as U0 + β·E_Y[G0(s^{m,Y})] does.

Safety feasibility in s_{t+1} is held at its current value (the execution-safety channel of CVU
is not modelled); the experiment of a candidate without an informative outcome (no model
predicts it) still changes budget, λ, the candidate set and the policy.  The experiments
themselves come from the models through :mod:`belief.posterior.experiments`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import xarray as xr
from arviz_stats.base import array_stats

from belief.decision.feasibility import Feasibility, affordable, feasibility
from belief.decision.functionals import Functional, weighted_columns
from belief.decision.scores import g0
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates
from belief.posterior.experiments import Experiment, experiments_from_belief

__all__ = ["continuation_value", "cvu_for_state", "psis"]


_PATCH_LOCK = threading.Lock()


@contextmanager
def _fast_psis_logsumexp() -> Iterator[None]:
    """Let ArviZ's PSIS use a plain-numpy logsumexp for 1-D inputs while inside the block.

    ``arviz_stats`` smooths one row at a time and calls ``scipy.special.logsumexp`` twice per
    row; on 2000-draw rows scipy's per-call array-API overhead (~0.1 ms) is most of PSIS's cost.
    For 1-D arrays without ``b``/``keepdims``/``return_sign`` the replacement computes the same
    m + log Σ exp(a − m) (tests check equality with the unpatched PSIS); anything else goes to
    scipy.  The patch is scoped and restored on exit.
    """
    from arviz_stats.base import diagnostics

    original = diagnostics.logsumexp

    def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
        arr = np.asarray(a)
        if arr.ndim == 1 and b is None and not keepdims and not return_sign and arr.size:
            m = arr.max()
            if np.isfinite(m):
                return m + np.log(np.exp(arr - m).sum())
        return original(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)

    with _PATCH_LOCK:
        diagnostics.logsumexp = logsumexp
        try:
            yield
        finally:
            diagnostics.logsumexp = original


def psis(loglik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed, self-normalised log-weights of log-likelihood rows (J, S) and k̂ (J,).

    ArviZ's ``psislw`` follows the LOO convention — it smooths exp(−ary) — so the importance
    log-ratios log p(Y_j | θ_i) go in negated.  r_eff = 1 (the draws are treated as
    independent).
    """
    with _fast_psis_logsumexp(), np.errstate(over="ignore", invalid="ignore"):
        return array_stats.psislw(-loglik, r_eff=1, axis=-1)


def continuation_value(gain_now: np.ndarray, experiments: Mapping[str, Experiment],
                       candidate_ids: list[str], costs: np.ndarray, budget: np.ndarray,
                       weights: Callable[[np.ndarray], np.ndarray], functional: Functional,
                       *, available: np.ndarray | None = None,
                       repeatable: np.ndarray | None = None, safe: np.ndarray | None = None,
                       feasible: np.ndarray | None = None,
                       settings: CVUSettings | None = None) -> xr.Dataset:
    """CVU(m) for every candidate in ``experiments`` from arbitrary joint draws.

    Parameters
    ----------
    gain_now : ndarray (S, C)
        Joint draws of every candidate's gain at s_t (= at s_{t+1}^∅).
    experiments : mapping candidate id → Experiment
    candidate_ids : list of str
        Column labels of the gain arrays (C).
    costs : ndarray (C, R)
        ΔC of every candidate.
    budget : ndarray (R,)
        b_t.
    weights : callable b → λ (R,)
        The bound weight rule (:meth:`belief.decision.weights.WeightRule.bind`): λ_t =
        weights(b_t), λ_{t+1} = weights(b_t − ΔC(m)).
    functional : Functional
        φ, the decision's functional.
    available, repeatable, safe : bool arrays (C,), optional
        Candidate set at s_t, which candidates stay after execution, and the safety gate
        (held fixed into s_{t+1}); default all True.
    feasible : bool array (C,), optional
        M_t^feasible, when the caller has it (the decision entry point); default
        available ∧ safe ∧ M^budget(b_t).
    settings : CVUSettings

    Returns
    -------
    Dataset over ``candidate``: ``cvu``, ``cvu_mcse``, ``pareto_k`` (max k̂ over outcomes),
    ``pareto_k_bad`` (fraction of outcomes with k̂ > threshold), ``n_refits`` and ``cvu_method``
    (``psis``, ``psis+refit``, ``no outcome``); attribute ``g0_null`` = G0(s^∅).
    """
    settings = settings or CVUSettings()
    gain_now = np.asarray(gain_now, dtype=float)
    n_s, n_c = gain_now.shape
    ones = np.ones(n_c, bool)
    available = ones if available is None else np.asarray(available, bool)
    repeatable = ones if repeatable is None else np.asarray(repeatable, bool)
    safe = ones if safe is None else np.asarray(safe, bool)
    costs = np.asarray(costs, float)
    budget = np.asarray(budget, float)

    lam_now = np.asarray(weights(budget), float)
    phi_now = functional(gain_now.T)
    feasible_now = (available & safe & affordable(costs, budget) if feasible is None
                    else np.asarray(feasible, bool))
    g0_null = float(g0(phi_now - costs @ lam_now, feasible_now))

    out = {k: np.full(n_c, np.nan) for k in ("cvu", "cvu_mcse", "pareto_k", "pareto_k_bad")}
    n_refits = np.zeros(n_c, int)
    method = np.array([""] * n_c, dtype=object)
    for c, cid in enumerate(candidate_ids):
        exp = experiments.get(cid)
        if exp is None:
            method[c] = "not computed"
            continue
        b_next = budget - costs[c]
        c_lam_next = costs @ np.asarray(weights(b_next), float)
        avail_next = available.copy()
        if not repeatable[c]:
            avail_next[c] = False
        feasible_next = avail_next & safe & affordable(costs, b_next)
        next_gain = np.asarray(exp.next_gain, float)
        if exp.simulate is None:
            g0_next = g0(functional(next_gain.T) - c_lam_next, feasible_next)
            out["cvu"][c], out["cvu_mcse"][c] = float(g0_next) - g0_null, 0.0
            method[c] = "no outcome"
            continue
        # one stream per candidate (its CVU does not depend on which others are scored);
        # the same draw indices for every candidate (common random numbers)
        rng = np.random.default_rng([settings.seed, 101, c])
        idx = np.random.default_rng([settings.seed, 100]).integers(0, n_s, settings.n_outcomes)
        y = exp.simulate(rng, idx)
        g0_j = np.empty(settings.n_outcomes)
        khat = np.empty(settings.n_outcomes)
        for start in range(0, settings.n_outcomes, settings.chunk):
            sl = slice(start, start + settings.chunk)
            lw, khat[sl] = psis(exp.loglik(y[sl]))
            w = np.exp(lw - lw.max(axis=-1, keepdims=True))
            phi = weighted_columns(functional, next_gain, w)
            g0_j[sl] = g0(phi - c_lam_next[None, :], feasible_next[None, :])
        bad = np.flatnonzero(khat > settings.k_threshold)
        method[c] = "psis"
        if bad.size and exp.refit is not None:
            for j in bad[np.argsort(-khat[bad])][: settings.max_refits]:
                exact = np.asarray(exp.refit(y[j]), float)
                g0_j[j] = g0(functional(exact.T) - c_lam_next, feasible_next)
                n_refits[c] += 1
            method[c] = "psis+refit" if n_refits[c] == bad.size else "psis+partial refit"
        out["cvu"][c] = g0_j.mean() - g0_null
        out["cvu_mcse"][c] = g0_j.std(ddof=1) / np.sqrt(g0_j.size)
        out["pareto_k"][c] = khat.max()
        out["pareto_k_bad"][c] = bad.size / khat.size
    return xr.Dataset(
        {**{k: ("candidate", v) for k, v in out.items()}, "n_refits": ("candidate", n_refits),
         "cvu_method": ("candidate", method)},
        coords={"candidate": candidate_ids},
        attrs={"g0_null": g0_null, "n_outcomes": settings.n_outcomes,
               "k_threshold": settings.k_threshold, "functional": str(functional)})


def cvu_for_state(state: State, candidates: CandidateSet, settings: DecisionSettings, *,
                  seed: int | None = None, feas: Feasibility | None = None,
                  experiments: Mapping[str, Experiment] | None = None,
                  refit: Callable[[str, np.ndarray], np.ndarray] | None = None) -> xr.Dataset:
    """CVU of every feasible candidate at ``state`` under the decision's settings.

    Parameters
    ----------
    state : State
        s_t; q_t must hold the gains model's joint draws unless ``experiments`` are given.
    candidates : CandidateSet
    settings : DecisionSettings
        φ, the λ rule, the gate and the CVU settings of the decision.
    seed : int, optional
        Seed of the simulated outcomes (default ``settings.cvu.seed``).
    feas : Feasibility, optional
        The decision's feasibility (computed here when absent).
    experiments : mapping id → Experiment, optional
        Default: :func:`belief.posterior.experiments.experiments_from_belief`.
    refit : callable (m, Y) → next-gain draws, optional
        Exact refits where k̂ > ``settings.cvu.k_threshold``
        (:func:`belief.posterior.refit.exact_refit`).
    """
    belief = state.belief
    check_belief_candidates(belief, candidates)
    ids = candidates.ids
    costs = candidates.costs().values
    budget = state.budget.sel(resource=list(candidates.resources)).values.astype(float)
    if feas is None:
        feas = feasibility(state, candidates, settings.gate, costs, budget)
    if experiments is None:
        experiments = experiments_from_belief(belief, candidates, settings.cvu.trials, refit)
    # Q only matters where the candidate is feasible now: the others are not scored
    exps = {k: v for k, v in experiments.items() if feas.feasible[ids.index(k)]}
    cvu_settings = settings.cvu if seed is None else replace(settings.cvu, seed=int(seed))
    return continuation_value(
        belief["gain"].transpose("sample", "candidate").values, exps, ids, costs, budget,
        settings.weights.bind(candidates.resources, state), settings.functional,
        available=feas.available, repeatable=np.array([c.repeatable for c in candidates]),
        safe=feas.safe, feasible=feas.feasible, settings=cvu_settings)
