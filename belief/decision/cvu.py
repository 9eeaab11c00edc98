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

Safety feasibility in s_{t+1} is held at its current value (the execution-safety channel of CVU
is not modelled); the experiment of a candidate without an informative outcome (no model
predicts it) still changes budget, λ, the candidate set and the policy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import xarray as xr
from arviz_stats.base import array_stats

from belief.decision.functionals import Functional, parse_functional
from belief.decision.safety import SafetyGate
from belief.decision.scores import g0
from belief.decision.state import State
from belief.decision.weights import WeightRule, as_weight_rule
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.belief_state import check_belief_candidates

__all__ = ["CVUSettings", "Experiment", "continuation_value", "cvu_for_state",
           "experiments_from_belief", "psis", "weighted_phi"]


@dataclass(frozen=True)
class Experiment:
    """What executing m once would show, for the CVU engine.

    Attributes
    ----------
    next_gain : ndarray (S, C)
        Joint draws of every candidate's predictive gain in the state after m (aligned with the
        belief's samples; equal to the current gains when m does not change the policy).
    simulate : callable (rng, idx) → Y, optional
        Outcomes of m's experiment under the draws ``idx`` (shape (J, ...)); None when m has no
        outcome any model predicts (then only budget, λ, candidate set and policy change).
    loglik : callable Y → ndarray (J, S), optional
        log p(Y_j | θ_i) for every outcome j and joint draw i.
    refit : callable Y_j → ndarray (S', C), optional
        Exact next-gain draws after refitting the models on the evidence plus Y_j.
    """

    next_gain: np.ndarray
    simulate: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None
    loglik: Callable[[np.ndarray], np.ndarray] | None = None
    refit: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass(frozen=True)
class CVUSettings:
    """Monte Carlo settings of CVU.

    Attributes
    ----------
    n_outcomes : int
        J, simulated outcomes per candidate.
    k_threshold : float
        Pareto k̂ above which an outcome's weights are not trusted (0.7).
    max_refits : int
        At most this many exact refits per candidate (outcomes with the largest k̂ first).
    chunk : int
        Outcomes processed at once (bounds memory at ~chunk·C·S floats for LCB/CVaR).
    trials : int
        Trials per arm of a simulated paired evaluation.
    refit_draws : int
        Draws (and tuning steps) per chain of an exact refit.
    seed : int
    """

    n_outcomes: int = 256
    k_threshold: float = 0.7
    max_refits: int = 16
    chunk: int = 64
    trials: int = 100
    refit_draws: int = 250
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.n_outcomes, int) or self.n_outcomes < 2:
            raise InputError("CVUSettings", f"n_outcomes must be an integer >= 2, got "
                                            f"{self.n_outcomes!r}")
        for name in ("chunk", "trials", "refit_draws"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError("CVUSettings", f"{name} must be an integer >= 1, got {v!r}")
        if isinstance(self.max_refits, bool) or not isinstance(self.max_refits, int) \
                or self.max_refits < 0:
            raise InputError("CVUSettings", f"max_refits must be an integer >= 0, got "
                                            f"{self.max_refits!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError("CVUSettings", f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.k_threshold, int | float) or not np.isfinite(self.k_threshold):
            raise InputError("CVUSettings", f"k_threshold must be finite, got "
                                            f"{self.k_threshold}")


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


def weighted_phi(functional: Functional, draws: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """φ of every column of ``draws`` (S, C) under each row of ``weights`` (J, S) → (J, C).

    Same definitions as :mod:`belief.decision.functionals`; the columns are sorted once and the
    weights gathered into each column's order, so LCB and CVaR cost O(J·C·S) after one sort.
    """
    w = weights / weights.sum(axis=-1, keepdims=True)
    if functional.kind == "mean":
        return w @ draws
    order = np.argsort(draws, axis=0, kind="stable")  # (S, C)
    xs = np.take_along_axis(draws, order, 0).T  # (C, S)
    ws = w[:, order.T]  # (J, C, S)
    cw = np.cumsum(ws, axis=-1)
    if functional.kind == "lcb":
        idx = np.minimum((cw < functional.param * (1 - 1e-12)).sum(-1), xs.shape[-1] - 1)
        return np.take_along_axis(np.broadcast_to(xs, ws.shape), idx[..., None], -1)[..., 0]
    portion = np.minimum(ws, np.clip(functional.param - (cw - ws), 0.0, None))
    return (xs[None] * portion).sum(-1) / portion.sum(-1)


def continuation_value(gain_now: np.ndarray, experiments: Mapping[str, Experiment],
                       candidate_ids: list[str], costs: np.ndarray, budget: np.ndarray,
                       weights: Callable[[np.ndarray], np.ndarray], functional: Functional,
                       *, available: np.ndarray | None = None,
                       repeatable: np.ndarray | None = None, safe: np.ndarray | None = None,
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
        The weight rule as a function of the budget (λ_t = weights(b_t), λ_{t+1} =
        weights(b_t − ΔC(m))).
    functional : Functional
        φ, the decision's functional.
    available, repeatable, safe : bool arrays (C,), optional
        Candidate set at s_t, which candidates stay after execution, and the safety gate
        (held fixed into s_{t+1}); default all True.
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
    feasible_now = available & safe & (costs <= budget + 1e-12).all(axis=1)
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
        feasible_next = avail_next & safe & (costs <= b_next + 1e-12).all(axis=1)
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
            phi = weighted_phi(functional, next_gain, w)
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


def experiments_from_belief(belief: xr.Dataset, candidates: CandidateSet, trials: int = 100,
                            refit: Callable[[str, np.ndarray], np.ndarray] | None = None
                            ) -> dict[str, Experiment]:
    """The experiment of every candidate, from the gains model's joint draws kept in q_t.

    - adaptation m: a paired evaluation (``trials`` per arm) of π versus π' = π + m; the next
      gains are those from π' (:func:`models.gains.next_gain`);
    - diagnosis informing adaptations: one logit-gain estimate per informed candidate with the
      diagnosis' ``measurement_se``; the policy is unchanged;
    - anything else: no predicted outcome (budget, λ and the candidate set still change).
    """
    from models import gains

    if "gains_eta" not in belief:
        raise InputError("belief", "CVU needs the gains model's joint draws (gains_*) in q_t; "
                                   "build the belief with BeliefFitter")
    draws = belief[list(gains.DRAW_VARS)]
    gain_now = gains.gain_from_draws(draws).values
    exps: dict[str, Experiment] = {}
    for c in candidates:
        do_refit = (lambda y, m=c.id: refit(m, y)) if refit is not None else None
        if c.changes_policy:
            exps[c.id] = Experiment(
                next_gain=gains.next_gain(draws, c.id).values,
                simulate=lambda rng, idx, m=c.id: gains.simulate(draws, m, rng, idx, trials),
                loglik=lambda y, m=c.id: gains.loglik(draws, m, y, trials),
                refit=do_refit)
        elif c.informs:
            def sim(rng, idx, c=c):
                return np.stack([gains.simulate_estimate(draws, t, c.measurement_se, rng, idx)
                                 for t in c.informs], -1)

            def ll(y, c=c):
                return sum(gains.loglik_estimate(draws, t, c.measurement_se, y[:, k])
                           for k, t in enumerate(c.informs))

            exps[c.id] = Experiment(next_gain=gain_now, simulate=sim, loglik=ll, refit=do_refit)
        else:
            exps[c.id] = Experiment(next_gain=gain_now)
    return exps


def cvu_for_state(state: State, candidates: CandidateSet, *,
                  functional: str | Functional = "mean",
                  weights: WeightRule | Mapping[str, float], gate: SafetyGate | None = None,
                  settings: CVUSettings | None = None,
                  refit: Callable[[str, np.ndarray], np.ndarray] | None = None) -> xr.Dataset:
    """CVU of every available candidate at ``state`` (pass the result to ``decide(cvu=...)``).

    Uses the same functional, weight rule and safety gate as the decision; ``refit(m, Y)``
    (from :class:`belief.posterior.fitter.BeliefFitter`) enables the exact fallback where k̂ > 0.7.
    """
    fn = parse_functional(functional)
    rule = as_weight_rule(weights)
    settings = settings or CVUSettings()
    gate = gate or SafetyGate()
    belief = state.belief
    ids = candidates.ids
    check_belief_candidates(belief, candidates)
    costs = candidates.costs()
    budget = state.budget.sel(resource=costs["resource"])
    resources = list(costs["resource"].values)

    def lam(b: np.ndarray) -> np.ndarray:
        da = xr.DataArray(b, dims="resource", coords={"resource": resources})
        return rule(da, state).values

    available = np.ones(len(ids), bool) if state.available is None else np.isin(
        ids, list(state.available))
    safe = gate.evaluate(candidates, belief["executions"], belief["unsafe"],
                         belief.get("p_unsafe"))["safe"].values.astype(bool)
    exps = experiments_from_belief(belief, candidates, settings.trials, refit)
    affordable = (costs <= state.budget.sel(resource=costs["resource"]) + 1e-12).all(
        "resource").values
    # Q only matters where the candidate is feasible now: the others are not scored
    exps = {k: v for k, v in exps.items()
            if available[ids.index(k)] and safe[ids.index(k)] and affordable[ids.index(k)]}
    repeatable = np.array([c.repeatable for c in candidates])
    gain_now = belief["gain"].transpose("sample", "candidate").values
    return continuation_value(gain_now, exps, ids, costs.values, budget.values, lam, fn,
                              available=available, repeatable=repeatable, safe=safe,
                              settings=settings)
