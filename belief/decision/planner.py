"""An open-loop planner on the belief: the best plan of the steps left, valued under q_t without
learning, re-planned at every step (model-predictive control).

The one-step Q = U0 + β·CVU looks one execution ahead; the framework's claim is that the value
of an intervention depends on what runs before and after it.  This planner looks at whole
plans.  At state s_t it takes the gains model's decision draws of q_t (:mod:`models.gains`,
"Decision draws").  To order a plan it uses the posterior means of the *logit increments*:
the next execution of adaptation m after a plan prefix with execution counts c adds

    μ_m(c) = E[θ_m ρ^{k_m + c_m}] + E[Σ_{a ∈ h} γ_{a→m}] + Σ_{a ∉ h : c_a > 0} E[γ_{a→m}]

to the policy's logit (k_m the repeats of m so far, h the actors already in the history, an
actor joining it once: :func:`models.gains.draws.state_after`); a model update adds nothing
itself and joins the history; a diagnosis adds nothing.  μ_m(c) depends on the prefix only
through c, so for every count vector c and every first execution f the order of c that starts
with f and has the largest summed mean increment is found by a dynamic programme like that of
:mod:`belief.lab.clairvoyant` (one value per first execution),

    S*_f(e_f) = μ_f(0),   S*_f(c) = max_{m : c_m > 0, c − e_m ≥ e_f} S*_f(c − e_m) + μ_m(c − e_m),

over every count vector within the budget b_t (nominal costs ΔC), the steps left and each
candidate's repeat cap, on the candidates feasible at s_t (the safety gate and the budget of
the decision; a candidate closed now stays closed in the plan).  Each such order is then valued
on the joint draws, not at the means: with S_i(c) the same order's summed increment in draw i
(θ_i ρ_i^k and γ_i in place of their means, so E_i S_i(c) = S*_f(c)),

    V(c) = (1/D) Σ_i E_Z[logistic(η_i + S_i(c) + τ_i √n_a(c) Z)] − (1/D) Σ_i logistic(η_i)
           − λᵀ ΔC(c),

with η_i, τ_i draw i's current logit and run-to-run noise s.d., n_a(c) the number of
adaptations in c, Z ~ N(0, 1) (Gauss–Hermite) and D ≤ 256 joint draws spread evenly over q_t
(every quantity here, the means included, is taken over the same D draws).  V is the exact
expected net value of executing that sequence open loop under q_t: averaging the logistic over
the draws matters — an uncertain adaptation's expected gain is not the gain at its mean effect
(measured on a campaign's belief: si_friction with θ s.d. 0.93 on the logit scale, +0.034 in J
averaged over the draws, −0.001 at the mean).  The planner executes the first candidate of the
(count vector, first execution) pair with the largest V and stops when the empty plan is best
(V ≤ 0 for every other); :func:`first_step_values` gives the best V of each first execution,
whose maximum is the plan's V.  Only the order after the first execution is chosen at the
means (it matters only through γ: an order with a larger mean increment can have a smaller V
when its γ are more uncertain), so the plan is the best over count vectors and first
executions, not over every order.  Memory grows with the widest layer of the programme times
D (the draws of older layers are dropped); time with the (count vector, first) pairs.

Costs and weights are those of s_t: the nominal (expected) ΔC against b_t — not the
chance constraint of uncertain costs, which the decision's feasibility at s_t applies to the
first step only — and λ(b_t) held fixed along the plan (a scarcity rule would raise λ as the
budget falls; the re-planning at every step picks that up one step late).

What it is and is not.  It is the open-loop optimum over count vectors and first executions
(each in the order of largest mean increment after its first), valued on the draws; it never
pays to learn (a diagnosis or an uncertain order effect is worth only its mean effect on the
plan, not the decisions it could change — that is CVU's job), and it is re-planned after every
outcome, so the executed sequence adapts.  With one step left it is U0-greedy under the mean
functional, up to how U0 and V are computed: V of one execution averages D ≤ 256 draws with the
run-to-run noise integrated by quadrature, U0 averages every draw with its sampled noise.
Measured against the clairvoyant planner in ``benchmarks/bench_policies.py``
(``--policies plan``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import xarray as xr
from scipy.special import expit

from belief.errors import InputError

__all__ = ["BeliefPlan", "PlanInputs", "expected_success", "first_step_values", "hermite_nodes",
           "plan_on_belief"]

_NODES = 16  # Gauss–Hermite nodes of E[logistic(x + sd Z)]: error < 1e-6 for sd ≤ 2
_DRAWS = 256  # joint draws (spread evenly over q_t) that every quantity of the plan is taken on


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
        S*, the summed mean logit increments of the plan (the mean over the draws of S_i).
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


def _increments(belief: xr.Dataset, ids: list[str], adapt: np.ndarray, cap: np.ndarray,
                pick: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """(base, gamma) on the draws ``pick``: ``base[m]`` (D, cap_m) = θ_m ρ^{k_m + k} +
    offset_m of the k-th further execution of m (zeros for non-adaptations), ``gamma``
    (C, C, D) = γ_{a→m} of an actor a that is not yet in the history (0 otherwise), by
    candidate index."""
    n_c, n_d = len(ids), pick.size
    gain_ids = [str(c) for c in belief["gains_theta"]["candidate"].values]
    theta = np.asarray(belief["gains_theta"].values, float)[pick]  # (D, G)
    rho = np.asarray(belief["gains_rho"].values, float)[pick]  # (D,)
    reps = np.asarray(belief["gains_repeats"].values, float)  # (G,)
    offset = (np.asarray(belief["gains_offset"].values, float)[pick]
              if "gains_offset" in belief else np.zeros_like(theta))
    base: list[np.ndarray] = []
    for i, m in enumerate(ids):
        if not adapt[i] or m not in gain_ids:
            base.append(np.zeros((n_d, max(int(cap[i]), 1))))
            continue
        j = gain_ids.index(m)
        k = reps[j] + np.arange(max(int(cap[i]), 1))
        base.append(theta[:, j, None] * rho[:, None] ** k[None, :] + offset[:, j, None])
    gamma = np.zeros((n_c, n_c, n_d))
    if "gains_gamma" in belief:
        actors = [str(a) for a in belief["actor"].values]
        draws = np.asarray(belief["gains_gamma"].transpose("sample", ...).values,
                           float)[pick]  # (D, A, G)
        done = np.asarray(belief["gains_history"].values, float) > 0
        for ia, a in enumerate(actors):
            if a not in ids or done[ia]:
                continue
            for i, m in enumerate(ids):
                if adapt[i] and m in gain_ids and m != a:
                    gamma[ids.index(a), i] = draws[:, ia, gain_ids.index(m)]
    return base, gamma


@dataclass(frozen=True)
class PlanInputs:
    """What the planner plans with besides q_t, by candidate in the order of ``ids``.

    Attributes
    ----------
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
    """

    costs: np.ndarray
    budget: np.ndarray
    weights: np.ndarray
    feasible: np.ndarray
    adapts: np.ndarray
    repeatable: np.ndarray
    steps: int


def plan_on_belief(belief: xr.Dataset, ids: Sequence[str], inputs: PlanInputs, *,
                   max_states: int = 200_000) -> BeliefPlan:
    """The best open-loop plan at q_t (module docstring).

    Parameters
    ----------
    belief : Dataset
        q_t with the gains model's decision draws (``gains_eta``, ``gains_theta``,
        ``gains_tau``, ``gains_rho``, ``gains_repeats``; with order effects ``gains_gamma``,
        ``gains_history``, ``gains_offset``).
    ids : sequence of str
        The candidates, in the order of the arrays of ``inputs``.
    inputs : PlanInputs
        Costs, b_t, λ, the feasible set, which candidates adapt and repeat, the steps left.
    max_states : int
        Refuse a problem with more count vectors than this (the programme is exhaustive).

    Returns
    -------
    BeliefPlan
    """
    p = _Problem.build(belief, ids, inputs)
    best, pairs, value = _first_step_programme(p, max_states)
    if not pairs or not (value > 0).any():  # the empty plan (V = 0 exactly) wins ties
        return BeliefPlan((), 0.0, 0.0, len(best))
    i = int(np.argmax(value))
    c, f = pairs[i]
    s_mean = float(best[c][0][f])
    seq = []
    while any(c):
        m = int(best[c][1][f])
        seq.append(ids[m])
        c = (*c[:m], c[m] - 1, *c[m + 1:])
    return BeliefPlan(tuple(seq[::-1]), float(value[i]), s_mean, len(best))


def first_step_values(belief: xr.Dataset, ids: Sequence[str], inputs: PlanInputs, *,
                      max_states: int = 200_000) -> np.ndarray:
    """V_plan(m): the value of the best open-loop plan that *starts* with m, for every
    candidate m (module docstring; same parameters as :func:`plan_on_belief`).

    One dynamic programme carries, for every count vector c, the largest summed mean
    increment of the orders of c that start with m, for every m at once (μ depends on the
    prefix only through its counts, so fixing the first execution keeps the recursion exact):

        S*_m(e_m) = μ_m(0),
        S*_m(c) = max_{a : c_a > 0, c − e_a ≥ e_m} S*_m(c − e_a) + μ_a(c − e_a),

    each such order is valued on the draws, V_m(c), and V_plan(m) = max_{c ≥ e_m} V_m(c).
    max_m V_plan(m) is the value of :func:`plan_on_belief`'s plan when that plan is not to
    stop.

    Returns
    -------
    ndarray (C,)
        V_plan(m); NaN for a candidate that cannot run first (not feasible, over the budget
        alone, or no steps left).
    """
    p = _Problem.build(belief, ids, inputs)
    _, pairs, value = _first_step_programme(p, max_states)
    out = np.full(p.n_c, np.nan)
    if pairs:
        np.fmax.at(out, np.array([f for _, f in pairs]), value)
    return out


def _first_step_programme(p: _Problem, max_states: int
                          ) -> tuple[dict, list[tuple[tuple[int, ...], int]], np.ndarray]:
    """The dynamic programme of :func:`first_step_values`: ``best[c]`` = (S*_m(c) for every
    first m (−inf: no order of c starts with m), the last execution of that order), the
    (count vector, first) pairs that exist, and V of each pair's order on the draws.

    The draws S_i of a pair's order are kept for one layer only (the next layer extends them)
    and valued layer by layer in chunks, so memory grows with the widest layer, not with the
    whole programme."""
    zero = (0,) * p.n_c
    best: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    pairs: list[tuple[tuple[int, ...], int]] = []
    values: list[np.ndarray] = []
    draws: dict[tuple[tuple[int, ...], int], np.ndarray] = {}  # S_i, this layer's pairs
    for m in (p.moves(zero) if p.steps > 0 else ()):
        s = np.full(p.n_c, -np.inf)
        s[m] = p.mu(zero, m)
        c = (*zero[:m], 1, *zero[m + 1:])
        best[c] = (s, np.full(p.n_c, m))
        draws[c, m] = p.increment(zero, m)
    layer = list(best)
    for step in range(p.steps):
        pairs.extend(draws)
        values.append(p.value_of(draws))
        if step == p.steps - 1:
            break
        nxt: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        for c in layer:
            for m in p.moves(c):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                s = best[c][0] + p.mu(c, m)
                if c2 not in nxt:
                    nxt[c2] = (s, np.full(p.n_c, m))
                else:
                    cur, last = nxt[c2]
                    better = s > cur
                    nxt[c2] = (np.where(better, s, cur), np.where(better, m, last))
        new: dict[tuple[tuple[int, ...], int], np.ndarray] = {}
        increments: dict[tuple[tuple[int, ...], int], np.ndarray] = {}
        for c2, (s, last) in nxt.items():
            for f in np.flatnonzero(np.isfinite(s)):
                m = int(last[f])
                c = (*c2[:m], c2[m] - 1, *c2[m + 1:])
                if (c, m) not in increments:
                    increments[c, m] = p.increment(c, m)
                new[c2, int(f)] = draws[c, int(f)] + increments[c, m]
        draws = new
        best.update(nxt)
        layer = list(nxt)
        p.check_size(len(best), max_states)
    return best, pairs, (np.concatenate(values) if values else np.zeros(0))


@dataclass(frozen=True)
class _Problem:
    """The planner's inputs, validated once: caps, costs, the increments on the D joint draws
    (``base[m]`` (D, cap_m), ``gamma`` (C, C, D)) and their means (``base_mean``,
    ``gamma_mean``), η and τ on the same draws."""

    n_c: int
    steps: int
    costs: np.ndarray
    budget: np.ndarray
    weights: np.ndarray
    adapt: np.ndarray
    cap: np.ndarray
    base: list[np.ndarray]
    gamma: np.ndarray
    base_mean: list[np.ndarray]
    gamma_mean: np.ndarray
    eta: np.ndarray
    tau: np.ndarray

    @classmethod
    def build(cls, belief: xr.Dataset, ids: Sequence[str], inputs: PlanInputs) -> _Problem:
        ids = [str(m) for m in ids]
        costs, budget, weights, steps = (inputs.costs, inputs.budget, inputs.weights,
                                         inputs.steps)
        feasible, adapts, repeatable = inputs.feasible, inputs.adapts, inputs.repeatable
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
        eta = np.asarray(belief["gains_eta"].values, float)
        tau = np.asarray(belief["gains_tau"].values, float)
        pick = np.linspace(0, eta.size - 1, min(_DRAWS, eta.size)).round().astype(int)
        base, gamma = _increments(belief, ids, adapt, cap, pick)
        if not all(np.isfinite(x).all() for x in (eta[pick], tau[pick], gamma, *base)):
            raise InputError("planner", "the belief's decision draws (gains_eta, gains_tau, "
                                        "gains_theta, gains_rho, gains_gamma, gains_offset) "
                                        "must be finite")
        return cls(n_c, int(steps), costs, np.asarray(budget, float),
                   np.asarray(weights, float), adapt, cap, base, gamma,
                   [b.mean(0) for b in base], gamma.mean(-1), eta[pick], tau[pick])

    @property
    def n_draws(self) -> int:
        return self.eta.size

    def moves(self, c: tuple[int, ...]) -> list[int]:
        """The candidates that may run after a prefix with counts c (cap and budget)."""
        spent = np.array(c) @ self.costs
        return [m for m in range(self.n_c) if c[m] < self.cap[m]
                and not (spent + self.costs[m] > self.budget + 1e-9).any()]

    def mu(self, c: tuple[int, ...], m: int) -> float:
        """μ_m(c), the mean logit increment of m after a prefix with counts c."""
        if not self.adapt[m]:
            return 0.0
        on = np.array(c) > 0
        return float(self.base_mean[m][c[m]] + self.gamma_mean[on, m].sum())

    def increment(self, c: tuple[int, ...], m: int) -> np.ndarray:
        """The same increment in every draw, (D,) (mean: :meth:`mu`)."""
        if not self.adapt[m]:
            return np.zeros(self.n_draws)
        on = np.array(c) > 0
        return self.base[m][:, c[m]] + self.gamma[on, m].sum(0)

    def value_of(self, draws: dict[tuple[tuple[int, ...], int], np.ndarray],
                 chunk: int = 2048) -> np.ndarray:
        """V of every (count vector, first) pair of ``draws`` (its S_i), in chunks of rows."""
        keys = list(draws)
        out = np.empty(len(keys))
        for lo in range(0, len(keys), chunk):
            part = keys[lo:lo + chunk]
            out[lo:lo + len(part)] = self.value(np.array([c for c, _ in part], dtype=float),
                                                np.array([draws[k] for k in part]))
        return out

    def value(self, counts: np.ndarray, s: np.ndarray) -> np.ndarray:
        """V(c) of every row, from the summed increments S_i (K, D) (module docstring)."""
        n_a = counts[:, self.adapt].sum(1)
        j0 = float(expit(self.eta).mean())
        ej = expected_success(self.eta[None, :] + s,
                              self.tau[None, :] * np.sqrt(n_a)[:, None], _NODES).mean(-1)
        ej[n_a == 0] = j0  # no adaptation: the policy is unchanged, exactly (no quadrature)
        return ej - j0 - counts @ self.costs @ self.weights

    def check_size(self, n: int, max_states: int) -> None:
        """Refuse a programme with more than ``max_states`` count vectors."""
        if n > max_states:
            raise InputError("planner", f"more than {max_states} count vectors (steps "
                                        f"{self.steps}, {self.n_c} candidates): lower the "
                                        "horizon")
