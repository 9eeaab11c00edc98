"""A certainty-equivalent planner on the belief: the best plan under the posterior means of the
gains, re-planned at every step (model-predictive control).

The one-step Q = U0 + β·CVU looks one execution ahead; the framework's claim is that the value
of an intervention depends on what runs before and after it.  This planner looks at whole
plans.  At state s_t it takes the gains model's decision draws of q_t (:mod:`models.gains`,
"Decision draws") and replaces every unknown of the *logit increments* by its posterior mean:
the next execution of adaptation m after a plan prefix with execution counts c adds

    μ_m(c) = E[θ_m ρ^{k_m + c_m}] + E[Σ_{a ∈ h} γ_{a→m}] + Σ_{a ∉ h : c_a > 0} E[γ_{a→m}]

to the policy's logit (k_m the repeats of m so far, h the actors already in the history, an
actor joining it once: :func:`models.gains.draws.state_after`); a model update adds nothing
itself and joins the history; a diagnosis adds nothing.  The expected net value of a plan with
counts c and summed increments S is

    V(c, S) = E_q[logistic(η + S + τ √n_a(c) Z)] − E_q[logistic(η)] − λᵀ ΔC(c),

with η, τ the belief's draws of the current logit and the run-to-run noise s.d., n_a(c) the
number of adaptations in c and Z ~ N(0, 1) (Gauss–Hermite).  V is increasing in S for fixed
c, and μ_m(c) depends on the prefix only through c, so the best order of a count vector is
found by the dynamic programme of :mod:`belief.campaign.clairvoyant`,

    S*(c) = max_{m : c_m > 0} S*(c − e_m) + μ_m(c − e_m),   S*(0) = 0,

over every count vector within the budget b_t (nominal costs ΔC), the steps left and each
candidate's repeat cap, on the candidates feasible at s_t (the safety gate and the budget of
the decision; a candidate closed now stays closed in the plan).  The planner executes the first
candidate of the best plan and stops when the empty plan is best (V ≤ 0 for every other).

Costs and weights are those of s_t: the nominal (expected) ΔC against b_t — not the
chance constraint of uncertain costs, which the decision's feasibility at s_t applies to the
first step only — and λ(b_t) held fixed along the plan (a scarcity rule would raise λ as the
budget falls; the re-planning at every step picks that up one step late).

What it is and is not.  It is exact for its objective (the open-loop optimum under the
posterior means of θ ρ^k and γ); it is *certainty-equivalent*: it never pays to learn (a
diagnosis or an uncertain order effect is worth only its mean, not the decisions it could
change — that is CVU's job), and it is re-planned after every outcome, so the executed
sequence adapts.  It is the non-myopic counterpart of U0-greedy: with one step left it is
U0-greedy under the mean functional, up to the certainty equivalence (the posterior mean of the
logit increment inside the logistic, where U0 averages the logistic over the draws).  Measured
against the clairvoyant planner in ``benchmarks/bench_policies.py`` (``--policies plan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import xarray as xr
from scipy.special import expit

from belief.errors import InputError

__all__ = ["BeliefPlan", "expected_success", "first_step_values", "hermite_nodes",
           "plan_on_belief"]

_NODES = 16  # Gauss–Hermite nodes of E[logistic(x + sd Z)]: error < 1e-6 for sd ≤ 2
_DRAWS = 256  # draws of (η, τ) for the value; the increments use every draw


@dataclass(frozen=True)
class BeliefPlan:
    """The planner's best plan at a state.

    Attributes
    ----------
    sequence : tuple of str
        Candidates in execution order (empty: stop now).
    value : float
        V of the plan (module docstring).
    logit_gain : float
        S, the summed posterior-mean logit increments.
    n_states : int
        Count vectors visited by the dynamic programme.
    """

    sequence: tuple[str, ...]
    value: float
    logit_gain: float
    n_states: int

    @property
    def first(self) -> str | None:
        """The candidate to execute now, or None (stop)."""
        return self.sequence[0] if self.sequence else None


@cache
def hermite_nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes x and weights w (normalised to sum 1) for E[f(Z)], Z ~ N(0, 1):
    E[f(Z)] ≈ Σ_i w_i f(x_i) (read-only arrays, computed once per n)."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    x.flags.writeable = w.flags.writeable = False
    return x, w


def expected_success(eta: np.ndarray | float, sd: np.ndarray | float,
                     nodes: int = 64) -> np.ndarray:
    """E[logistic(η + sd·Z)], Z ~ N(0, 1), by Gauss–Hermite quadrature (broadcasts η, sd)."""
    x, w = hermite_nodes(nodes)
    eta, sd = np.broadcast_arrays(np.asarray(eta, float), np.asarray(sd, float))
    return (expit(eta[..., None] + sd[..., None] * x) * w).sum(-1)


def _increments(belief: xr.Dataset, ids: list[str], adapt: np.ndarray, cap: np.ndarray
                ) -> tuple[list[np.ndarray], np.ndarray]:
    """(base, gamma): ``base[m][k]`` = E[θ_m ρ^{k_m + k}] + E[offset_m] for the
    k-th further execution of m (k < cap_m; zeros for non-adaptations), ``gamma`` (C, C) the
    posterior mean E[γ_{a→m}] of an actor a that is not yet in the history (0 otherwise), by
    candidate index."""
    n_c = len(ids)
    gain_ids = [str(c) for c in belief["gains_theta"]["candidate"].values]
    theta = np.asarray(belief["gains_theta"].values, float)  # (S, G)
    rho = np.asarray(belief["gains_rho"].values, float)  # (S,)
    reps = np.asarray(belief["gains_repeats"].values, float)  # (G,)
    offset = (np.asarray(belief["gains_offset"].values, float) if "gains_offset" in belief
              else np.zeros_like(theta))
    base: list[np.ndarray] = []
    for i, m in enumerate(ids):
        if not adapt[i] or m not in gain_ids:
            base.append(np.zeros(max(int(cap[i]), 1)))
            continue
        j = gain_ids.index(m)
        k = reps[j] + np.arange(max(int(cap[i]), 1))
        base.append((theta[:, j, None] * rho[:, None] ** k[None, :]).mean(0)
                    + offset[:, j].mean())
    gamma = np.zeros((n_c, n_c))
    if "gains_gamma" in belief:
        actors = [str(a) for a in belief["actor"].values]
        mean = np.asarray(belief["gains_gamma"].mean("sample").values, float)  # (A, G)
        done = np.asarray(belief["gains_history"].values, float) > 0
        for ia, a in enumerate(actors):
            if a not in ids or done[ia]:
                continue
            for i, m in enumerate(ids):
                if adapt[i] and m in gain_ids and m != a:
                    gamma[ids.index(a), i] = mean[ia, gain_ids.index(m)]
    return base, gamma


def plan_on_belief(belief: xr.Dataset, ids: Sequence[str], *, costs: np.ndarray,
                   budget: np.ndarray, weights: np.ndarray, feasible: np.ndarray,
                   adapts: np.ndarray, repeatable: np.ndarray, steps: int,
                   max_states: int = 200_000) -> BeliefPlan:
    """The certainty-equivalent best plan at q_t (module docstring).

    Parameters
    ----------
    belief : Dataset
        q_t with the gains model's decision draws (``gains_eta``, ``gains_theta``,
        ``gains_tau``, ``gains_rho``, ``gains_repeats``; with order effects ``gains_gamma``,
        ``gains_history``, ``gains_offset``).
    ids : sequence of str
        The candidates, in the order of the arrays below.
    costs : ndarray (C, R)
        Nominal ΔC per candidate and resource (≥ 0).
    budget, weights : ndarray (R,)
        b_t and λ.
    feasible : bool ndarray (C,)
        Feasible at s_t (safety gate, budget, availability); the others are left out.
    adapts, repeatable : bool ndarray (C,)
        Whether a candidate changes the policy, and whether it may run more than once.
    steps : int
        Executions left (the horizon minus the step), ≥ 0.
    max_states : int
        Refuse a problem with more count vectors than this (the programme is exhaustive).

    Returns
    -------
    BeliefPlan
    """
    p = _Problem.build(belief, ids, costs, budget, weights, feasible, adapts, repeatable, steps)
    zero = (0,) * p.n_c
    best: dict[tuple[int, ...], tuple[float, int]] = {zero: (0.0, -1)}
    layer = [zero]
    for _ in range(p.steps):
        nxt: dict[tuple[int, ...], tuple[float, int]] = {}
        for c in layer:
            for m in p.moves(c):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                s = best[c][0] + p.mu(c, m)
                if c2 not in nxt or (s, -m) > (nxt[c2][0], -nxt[c2][1]):
                    nxt[c2] = (s, m)
        best.update(nxt)
        layer = list(nxt)
        p.check_size(len(best), max_states)
    keys = list(best)
    counts = np.array(keys, dtype=float)
    s_star = np.array([best[k][0] for k in keys])
    value = p.value(counts, s_star)  # the empty plan first, at exactly 0: a tie (a free plan
    # of model updates and diagnoses with λ = 0) stops
    i = int(np.argmax(value))
    c, seq = keys[i], []
    while best[c][1] >= 0:
        m = best[c][1]
        seq.append(ids[m])
        c = (*c[:m], c[m] - 1, *c[m + 1:])
    return BeliefPlan(tuple(seq[::-1]), float(value[i]), float(s_star[i]), len(keys))


def first_step_values(belief: xr.Dataset, ids: Sequence[str], *, costs: np.ndarray,
                      budget: np.ndarray, weights: np.ndarray, feasible: np.ndarray,
                      adapts: np.ndarray, repeatable: np.ndarray, steps: int,
                      max_states: int = 200_000) -> np.ndarray:
    """V_plan(m): the value of the certainty-equivalent best plan that *starts* with m, for
    every candidate m (module docstring; same parameters as :func:`plan_on_belief`).

    One dynamic programme carries, for every count vector c, the best summed increment of the
    orderings of c that start with m, for every m at once (μ depends on the prefix only
    through its counts, so fixing the first execution keeps the recursion exact):

        S*_m(e_m) = μ_m(0),
        S*_m(c) = max_{a : c_a > 0, c − e_a ≥ e_m} S*_m(c − e_a) + μ_a(c − e_a),

    and V_plan(m) = max_{c ≥ e_m} V(c, S*_m(c)).  max_m V_plan(m) is the value of
    :func:`plan_on_belief`'s plan when that plan is not to stop.

    Returns
    -------
    ndarray (C,)
        V_plan(m); NaN for a candidate that cannot run first (not feasible, over the budget
        alone, or no steps left).
    """
    p = _Problem.build(belief, ids, costs, budget, weights, feasible, adapts, repeatable, steps)
    zero = (0,) * p.n_c
    best: dict[tuple[int, ...], np.ndarray] = {}
    for m in (p.moves(zero) if p.steps > 0 else ()):
        s = np.full(p.n_c, -np.inf)
        s[m] = p.mu(zero, m)
        best[(*zero[:m], 1, *zero[m + 1:])] = s
    layer = list(best)
    for _ in range(p.steps - 1):
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for c in layer:
            for m in p.moves(c):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                s = best[c] + p.mu(c, m)
                nxt[c2] = s if c2 not in nxt else np.maximum(nxt[c2], s)
        best.update(nxt)
        layer = list(nxt)
        p.check_size(len(best), max_states)
    out = np.full(p.n_c, np.nan)
    if not best:
        return out
    keys = list(best)
    s_all = np.array([best[k] for k in keys])  # (K, C): −inf where the ordering cannot start
    counts = np.array(keys, dtype=float)
    row, first = np.nonzero(np.isfinite(s_all))
    value = p.value(counts[row], s_all[row, first])
    np.fmax.at(out, first, value)
    return out


@dataclass(frozen=True)
class _Problem:
    """The planner's inputs, validated once: caps, costs, the posterior-mean increments."""

    n_c: int
    steps: int
    costs: np.ndarray
    budget: np.ndarray
    weights: np.ndarray
    adapt: np.ndarray
    cap: np.ndarray
    base: list[np.ndarray]
    gamma: np.ndarray
    eta: np.ndarray
    tau: np.ndarray

    @classmethod
    def build(cls, belief: xr.Dataset, ids: Sequence[str], costs: np.ndarray,
              budget: np.ndarray, weights: np.ndarray, feasible: np.ndarray,
              adapts: np.ndarray, repeatable: np.ndarray, steps: int) -> _Problem:
        ids = [str(m) for m in ids]
        n_c = len(ids)
        costs = np.asarray(costs, float).reshape(n_c, -1)
        if (costs < 0).any():
            raise InputError("planner", "the planner needs costs >= 0")
        if isinstance(steps, bool) or int(steps) != steps or steps < 0:
            raise InputError("planner", f"steps left must be an integer >= 0, got {steps!r}")
        feasible = np.asarray(feasible, bool)
        adapt = np.asarray(adapts, bool)
        cap = np.where(feasible, np.where(np.asarray(repeatable, bool), int(steps),
                                          min(1, int(steps))), 0)
        base, gamma = _increments(belief, ids, adapt, cap)
        eta = np.asarray(belief["gains_eta"].values, float)
        tau = np.asarray(belief["gains_tau"].values, float)
        pick = np.linspace(0, eta.size - 1, min(_DRAWS, eta.size)).round().astype(int)
        return cls(n_c, int(steps), costs, np.asarray(budget, float),
                   np.asarray(weights, float), adapt, cap, base, gamma, eta[pick], tau[pick])

    def moves(self, c: tuple[int, ...]) -> list[int]:
        """The candidates that may run after a prefix with counts c (cap and budget)."""
        spent = np.array(c) @ self.costs
        return [m for m in range(self.n_c) if c[m] < self.cap[m]
                and not (spent + self.costs[m] > self.budget + 1e-9).any()]

    def mu(self, c: tuple[int, ...], m: int) -> float:
        """μ_m(c), the posterior-mean logit increment of m after a prefix with counts c."""
        if not self.adapt[m]:
            return 0.0
        on = np.array(c) > 0
        return float(self.base[m][c[m]] + self.gamma[on, m].sum())

    def value(self, counts: np.ndarray, s: np.ndarray) -> np.ndarray:
        """V(c, S) of every row (module docstring)."""
        n_a = counts[:, self.adapt].sum(1)
        j0 = float(expit(self.eta).mean())
        ej = expected_success(self.eta[None, :] + s[:, None],
                              self.tau[None, :] * np.sqrt(n_a)[:, None], _NODES).mean(-1)
        ej[n_a == 0] = j0  # no adaptation: the policy is unchanged, exactly (no quadrature)
        return ej - j0 - counts @ self.costs @ self.weights

    def check_size(self, n: int, max_states: int) -> None:
        """Refuse a programme with more than ``max_states`` count vectors."""
        if n > max_states:
            raise InputError("planner", f"more than {max_states} count vectors (steps "
                                        f"{self.steps}, {self.n_c} candidates): lower the "
                                        "horizon")
