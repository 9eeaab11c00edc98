"""Small conjugate allocation problems and their Bayes-optimal policy, by backward induction.

A small problem is the framework's allocation problem cut down until it can be solved exactly:
2–3 candidates, beta-binomial beliefs, one or two budgets, horizon 3–4, the option to stop.

Semantics (the framework's, with φ = mean):

- latent effectivenesses θ_l ~ Beta(a_l, b_l), independent a priori; several candidates may act
  on the same θ_l (siblings: news about one moves the belief about the other);
- candidate m acts on latent l(m).  Executing it adds the gain ΔJ = G_m · d_m^{k_m} · θ_{l(m)}
  to J (G_m = 0 for a diagnosis; k_m = earlier executions of m; d_m its diminishing-returns
  factor), costs ΔC(m) (a vector over the problem's resources), and shows the outcome of its
  experiment Y ~ Binomial(n_m, θ_{l(m)}) (an adaptation's paired evaluation, a diagnosis's
  pilot; n_m = 0: nothing observed);
- a non-repeatable candidate leaves after its execution; a candidate is feasible when it is
  available, ΔC(m) ≤ b (every resource) and a step is left (at most T executions);
- net value of a campaign = Σ realised gains − λᵀ(spent) (fixed λ), what every policy is
  scored on; its expectation given the belief at the time of each choice is Σ_t U0(m_t | s_t)
  (tower property), with U0(m | s) = φ[ΔJ(m) | s] − λᵀΔC(m) and φ = mean:
  φ[ΔJ(m) | s] = G_m d_m^{k_m} α_l / (α_l + β_l), the conjugate posterior Beta(α_l, β_l);
- the state s = (execution counts per candidate, successes per latent) is sufficient: it fixes
  the posterior, the budget left b − Σ counts·ΔC, the steps left T − Σ counts and the
  candidate set.

The Bayes-optimal value is the Bellman recursion over these states::

    V_τ(s) = max( 0,  max_{m feasible} U0(m | s) + Σ_y BetaBin(y; n_m, α_l, β_l) V_{τ−1}(s^{m,y}) ),
    V_0(s) = 0,

with τ the steps left; V_T(s_0) is the best expected net value of any adaptive policy (0 = stop
at once).  The truncated values V_d (d < τ) are the d-step look-ahead continuations
(V_1 = G0 = max(0, max U0): the engine's one-step CVU).  :func:`brute_force_value` recomputes
V_T independently — an expectimax over full histories (action, outcome, …) with the posterior
obtained by Gauss–Jacobi quadrature of prior × likelihood, no sufficient statistics and no
memo — and the tests check that the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from belief.errors import InputError

__all__ = ["Arm", "BeliefState", "SmallProblem", "benchmark_problems", "brute_force_value",
           "named_problems", "perfect_information_value", "random_problem"]


@dataclass(frozen=True)
class Arm:
    """A candidate of a small problem.

    Attributes
    ----------
    id : str
    latent : int
        Index of the θ_l it acts on and observes.
    gain : float
        G ≥ 0: an execution adds ΔJ = G·d^k·θ_l (0 for a diagnosis).
    trials : int
        n ≥ 0: its experiment shows Y ~ Binomial(n, θ_l).
    cost : tuple of float
        ΔC over the problem's resources (≥ 0).
    repeatable : bool
    decay : float
        d in (0, 1]: the k-th repeat gains d^k as much.
    """

    id: str
    latent: int
    gain: float
    trials: int
    cost: tuple[float, ...]
    repeatable: bool = False
    decay: float = 1.0

    @property
    def role(self) -> str:
        return "adaptation" if self.gain > 0 else "diagnosis"


class BeliefState(NamedTuple):
    """s = (executions per candidate, successes observed per latent)."""

    counts: tuple[int, ...]
    successes: tuple[int, ...]


@dataclass(frozen=True)
class SmallProblem:
    """A small conjugate allocation problem (module docstring for the semantics).

    Attributes
    ----------
    name : str
    priors : tuple of (a, b)
        Beta(a_l, b_l) per latent.
    arms : tuple of Arm
    budget : tuple of float
        b_0 per resource.
    weights : tuple of float
        λ per resource (fixed).
    horizon : int
        T, the most executions.
    resources : tuple of str
    note : str
        What the problem is for.
    """

    name: str
    priors: tuple[tuple[float, float], ...]
    arms: tuple[Arm, ...]
    budget: tuple[float, ...]
    weights: tuple[float, ...]
    horizon: int
    resources: tuple[str, ...] = ("real_h",)
    note: str = ""
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"small problem {self.name!r}"
        r = len(self.resources)
        if len(self.budget) != r or len(self.weights) != r:
            raise InputError(where, f"budget and weights need one value per resource {r}")
        if not self.arms:
            raise InputError(where, "at least one arm is required")
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) \
                or self.horizon < 1:
            raise InputError(where, f"horizon must be an integer >= 1, got {self.horizon!r}")
        for a, b in self.priors:
            if not (a > 0 and b > 0):
                raise InputError(where, f"Beta prior parameters must be > 0, got ({a}, {b})")
        for i, arm in enumerate(self.arms):
            if not 0 <= arm.latent < len(self.priors):
                raise InputError(where, f"arm {arm.id!r} acts on latent {arm.latent}, which "
                                        "has no prior", row=i)
            if len(arm.cost) != r or min(arm.cost) < 0:
                raise InputError(where, f"arm {arm.id!r} needs {r} costs >= 0", row=i)
            if arm.gain < 0 or arm.trials < 0 or not 0 < arm.decay <= 1:
                raise InputError(where, f"arm {arm.id!r}: gain >= 0, trials >= 0 and "
                                        "0 < decay <= 1 are required", row=i)

    # -- arrays --------------------------------------------------------------------------
    @cached_property
    def costs(self) -> np.ndarray:
        """ΔC, (C, R)."""
        return np.array([a.cost for a in self.arms], float)

    @cached_property
    def c_lambda(self) -> np.ndarray:
        """λᵀΔC per arm."""
        return self.costs @ np.array(self.weights, float)

    @property
    def ids(self) -> list[str]:
        return [a.id for a in self.arms]

    @property
    def initial(self) -> BeliefState:
        return BeliefState((0,) * len(self.arms), (0,) * len(self.priors))

    # -- the state -----------------------------------------------------------------------
    def posterior(self, s: BeliefState) -> tuple[np.ndarray, np.ndarray]:
        """(α_l, β_l) of every latent's Beta posterior."""
        trials = np.zeros(len(self.priors))
        for m, arm in enumerate(self.arms):
            trials[arm.latent] += s.counts[m] * arm.trials
        a = np.array([p[0] for p in self.priors]) + np.array(s.successes)
        b = np.array([p[1] for p in self.priors]) + trials - np.array(s.successes)
        return a, b

    def steps_left(self, s: BeliefState) -> int:
        return self.horizon - sum(s.counts)

    def budget_left(self, s: BeliefState) -> np.ndarray:
        return np.array(self.budget, float) - np.array(s.counts) @ self.costs

    def available(self, s: BeliefState) -> np.ndarray:
        """Still in the candidate set (repeatable, or not yet executed)."""
        return np.array([a.repeatable or s.counts[m] == 0 for m, a in enumerate(self.arms)])

    def feasible(self, s: BeliefState) -> np.ndarray:
        """Available, within every budget, and a step left."""
        if self.steps_left(s) < 1:
            return np.zeros(len(self.arms), bool)
        fits = (self.costs <= self.budget_left(s) + 1e-12).all(axis=1)
        return self.available(s) & fits

    def gain_scale(self, s: BeliefState) -> np.ndarray:
        """G_m · d_m^{k_m}: ΔJ(m) = gain_scale · θ_{l(m)} for the next execution."""
        return np.array([a.gain * a.decay ** s.counts[m] for m, a in enumerate(self.arms)])

    def mean_gain(self, s: BeliefState) -> np.ndarray:
        """φ[ΔJ(m) | s] with φ = mean."""
        a, b = self.posterior(s)
        lat = [arm.latent for arm in self.arms]
        return self.gain_scale(s) * (a / (a + b))[lat]

    def u0(self, s: BeliefState) -> np.ndarray:
        """U0(m | s) = φ[ΔJ(m) | s] − λᵀΔC(m)."""
        return self.mean_gain(s) - self.c_lambda

    def outcomes(self, s: BeliefState, m: int) -> list[tuple[float, BeliefState]]:
        """(probability, next state) for every outcome y of m's experiment (beta-binomial)."""
        arm = self.arms[m]
        a, b = self.posterior(s)
        counts = (*s.counts[:m], s.counts[m] + 1, *s.counts[m + 1:])
        ys = np.arange(arm.trials + 1)
        pmf = stats.betabinom.pmf(ys, arm.trials, a[arm.latent], b[arm.latent])
        out = []
        for y, p in zip(ys, pmf, strict=True):
            succ = list(s.successes)
            succ[arm.latent] += int(y)
            out.append((float(p), BeliefState(counts, tuple(succ))))
        return out

    def g0(self, s: BeliefState) -> float:
        """G0(s) = max(0, max_{m feasible} U0(m | s)) (0 when no step is left)."""
        f = self.feasible(s)
        return float(max(0.0, self.u0(s)[f].max())) if f.any() else 0.0

    # -- backward induction ----------------------------------------------------------------
    def value(self, s: BeliefState, steps: int | None = None) -> float:
        """V_τ(s) with τ = min(steps, steps left) (default: all steps left): the Bayes-optimal
        expected net value from s; ``steps = d`` gives the d-step look-ahead value."""
        tau = self.steps_left(s) if steps is None else min(int(steps), self.steps_left(s))
        return max(0.0, float(self.q_values(s, tau).max(initial=0.0)))

    def q_values(self, s: BeliefState, steps: int | None = None) -> np.ndarray:
        """Q*_τ(m | s) = U0(m | s) + E_y V_{τ−1}(s^{m,y}) per arm (−inf where infeasible)."""
        tau = self.steps_left(s) if steps is None else min(int(steps), self.steps_left(s))
        key = (s, tau)
        if key not in self._memo:
            q = np.full(len(self.arms), -np.inf)
            if tau >= 1:
                u0 = self.u0(s)
                for m in np.flatnonzero(self.feasible(s)):
                    q[m] = u0[m] + sum(p * self.value(s2, tau - 1)
                                       for p, s2 in self.outcomes(s, int(m)) if p > 0)
            self._memo[key] = q
        return self._memo[key]

    def bayes_value(self) -> float:
        """V_T(s_0): the Bayes-optimal expected net value."""
        return self.value(self.initial)

    def n_states(self) -> int:
        """Belief states (× steps) the backward induction has solved so far."""
        return len(self._memo)


def _jacobi(a: float, b: float, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Nodes θ and weights of ∫_0^1 f(θ) θ^{a−1}(1−θ)^{b−1} dθ (Gauss–Jacobi, exact for
    polynomial f of degree ≤ 2n − 1)."""
    x, w = special.roots_jacobi(n, b - 1.0, a - 1.0)  # weight (1−x)^(b−1) (1+x)^(a−1)
    return (1 + x) / 2, w / 2 ** (a + b - 1)


def brute_force_value(problem: SmallProblem, nodes: int = 64) -> float:
    """V_T(s_0) by expectimax over full histories, independent of :meth:`SmallProblem.value`.

    Every history h = ((m_1, y_1), …) is carried whole; the posterior of each latent is
    prior × Π_i Binomial(y_i | n_i, θ) integrated by Gauss–Jacobi quadrature (exact: the
    likelihood is a polynomial in θ of degree Σ n_i < 2·nodes); P(y | h, m) = E[Binomial(y |
    n_m, θ) | h] and E[θ | h] the same way; the budget, candidate set and decay are recomputed
    from h.  Exponential in the horizon: for tests on small problems.
    """
    quad = [_jacobi(a, b, nodes) for a, b in problem.priors]
    costs = problem.costs
    budget = np.array(problem.budget, float)

    def lik(history, lat, theta):
        out = np.ones_like(theta)
        for m, y in history:
            arm = problem.arms[m]
            if arm.latent == lat:
                out = out * stats.binom.pmf(y, arm.trials, theta)
        return out

    def best(history) -> float:
        done = [m for m, _ in history]
        if len(done) >= problem.horizon:
            return 0.0
        spent = sum((costs[m] for m in done), np.zeros(len(budget)))
        value = 0.0  # stop
        for m, arm in enumerate(problem.arms):
            if (not arm.repeatable and m in done) or (spent + costs[m] > budget + 1e-12).any():
                continue
            theta, w = quad[arm.latent]
            post = w * lik(history, arm.latent, theta)
            post = post / post.sum()
            k = done.count(m)
            q = arm.gain * arm.decay ** k * float(post @ theta) - float(
                costs[m] @ np.array(problem.weights))
            for y in range(arm.trials + 1):
                p = float(post @ stats.binom.pmf(y, arm.trials, theta))
                if p > 0:
                    q += p * best((*history, (m, y)))
            value = max(value, q)
        return value

    return best(())


def perfect_information_value(problem: SmallProblem, draws: int = 200_000,
                              seed: int = 0) -> tuple[float, float]:
    """The clairvoyant's value on a small problem: E_θ[max_plan Σ G d^k θ − λᵀΔC].

    Knowing θ, the order of a plan does not matter (gains are additive and do not interact),
    so the best plan is the best feasible count vector c (budget, horizon, repeats):
    value(c | θ) = Σ_m G_m θ_{l(m)} Σ_{k < c_m} d_m^k − Σ_m c_m λᵀΔC(m).  The expectation over
    the prior is Monte Carlo with ``draws`` draws (``default_rng([seed, 18_002])``); returns
    (value, Monte Carlo standard error sd/√draws).  V_PI ≥ V_Bayes: the gap is the price of
    learning.
    """
    layers = [[(0,) * len(problem.arms)]]
    costs, budget = problem.costs, np.array(problem.budget, float)
    for _ in range(problem.horizon):
        nxt = {}
        for c in layers[-1]:
            for m, arm in enumerate(problem.arms):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                if (arm.repeatable or c2[m] <= 1) and (np.array(c2) @ costs
                                                       <= budget + 1e-12).all():
                    nxt[c2] = None
        layers.append(list(nxt))
    plans = np.array([c for layer in layers for c in layer])
    coef = np.zeros((len(plans), len(problem.priors)))
    for m, arm in enumerate(problem.arms):
        coef[:, arm.latent] += arm.gain * np.array(
            [sum(arm.decay ** k for k in range(n)) for n in plans[:, m]])
    rng = np.random.default_rng([seed, 18_002])
    theta = np.column_stack([rng.beta(a, b, draws) for a, b in problem.priors])
    best = (theta @ coef.T - plans @ problem.c_lambda).max(axis=1)
    return float(best.mean()), float(best.std(ddof=1) / np.sqrt(draws))


# -- the problems -------------------------------------------------------------------------
def named_problems() -> list[SmallProblem]:
    """Hand-built problems, each for one thing the engine claims to value."""
    return [
        SmallProblem(
            "pilot_then_commit",
            priors=((1.0, 1.0),),
            arms=(Arm("ft", 0, 0.30, 0, (5.0,)), Arm("pilot", 0, 0.0, 4, (0.1,))),
            budget=(12.0,), weights=(0.034,), horizon=3,
            note="pure information: U0(ft) < 0 at the prior; a zero-gain pilot (4 trials) "
                 "can open it"),
        SmallProblem(
            "two_pilots_needed",
            priors=((4.0, 6.0),),
            arms=(Arm("ft", 0, 1.0, 0, (4.8,)), Arm("pilot", 0, 0.0, 1, (0.005,),
                                                    repeatable=True)),
            budget=(10.0,), weights=(0.1,), horizon=4,
            note="one 1-trial pilot never flips the decision (one-step CVU = 0); two can"),
        SmallProblem(
            "budget_binds",
            priors=((20.0, 10.0), (1.0, 1.0)),
            arms=(Arm("known", 0, 0.20, 2, (2.0, 10.0), repeatable=True, decay=0.8),
                  Arm("unknown", 1, 0.30, 2, (2.0, 30.0), repeatable=True, decay=0.8)),
            budget=(4.5, 100.0), weights=(0.01, 0.002), horizon=3,
            resources=("real_h", "compute"),
            note="two budgets; real_h allows two executions of the three steps"),
        SmallProblem(
            "explore_a_repeatable_arm",
            priors=((50.0, 50.0), (1.0, 1.0)),
            arms=(Arm("known", 0, 0.20, 2, (1.0,), repeatable=True),
                  Arm("new", 1, 0.20, 2, (1.0,), repeatable=True)),
            budget=(10.0,), weights=(0.08,), horizon=4,
            note="bandit: what is learnt about 'new' pays on every later step"),
        SmallProblem(
            "siblings",
            priors=((2.0, 2.0),),
            arms=(Arm("dr_small", 0, 0.10, 2, (0.0, 10.0), repeatable=True),
                  Arm("dr_large", 0, 0.35, 2, (0.0, 80.0)),
                  Arm("probe", 0, 0.0, 3, (0.5, 0.0))),
            budget=(2.0, 120.0), weights=(0.01, 0.0021), horizon=3,
            resources=("real_h", "compute"),
            note="three candidates on one latent: the cheap one informs the large one"),
        SmallProblem(
            "diagnosis_or_direct",
            priors=((1.0, 2.0), (3.0, 3.0)),
            arms=(Arm("ft", 0, 0.40, 2, (3.0,)), Arm("pilot", 0, 0.0, 3, (0.3,)),
                  Arm("dr", 1, 0.12, 2, (1.0,), repeatable=True, decay=0.7)),
            budget=(5.0,), weights=(0.04,), horizon=4,
            note="a pilot on ft competes with a safe repeatable dr for the same budget"),
    ]


def random_problem(seed: int) -> SmallProblem:
    """A random small problem (``default_rng([seed, 18_000])``).

    2 or 3 arms; each adaptation on its own latent with a Beta(a, b) prior, a, b ~ U(0.5, 4);
    with probability 1/2 the third arm is a diagnosis (gain 0, 2–6 trials) on the first
    adaptation's latent; gains G ~ U(0.1, 0.4), evaluation trials 1–4, repeatable with
    probability 1/2 (decay 1 or 0.8); costs set so that U0 at the prior mean is
    G·E[θ]·(1 − U(0.6, 1.4)) (diagnoses: λᵀΔC ~ U(0.003, 0.02)); one resource (λ = 0.01 per
    unit) or two (λ = (0.01, 0.002), the cost split at random); budgets allowing 1.5–4
    executions of the average arm; horizon 3 or 4.
    """
    rng = np.random.default_rng([seed, 18_000])
    n_res = int(rng.integers(1, 3))
    weights = (0.01,) if n_res == 1 else (0.01, 0.002)
    lam = np.array(weights)
    n_arms = int(rng.integers(2, 4))
    with_diag = n_arms == 3 and rng.uniform() < 0.5
    n_adapt = n_arms - int(with_diag)
    priors = tuple((float(rng.uniform(0.5, 4)), float(rng.uniform(0.5, 4)))
                   for _ in range(n_adapt))
    arms = []

    def split(c_lambda: float) -> tuple[float, ...]:
        share = np.array([1.0]) if n_res == 1 else rng.dirichlet([1.0, 1.0])
        return tuple(float(v) for v in share * c_lambda / lam)

    for i in range(n_adapt):
        g = float(rng.uniform(0.1, 0.4))
        mean = priors[i][0] / sum(priors[i])
        c_lam = g * mean * float(rng.uniform(0.6, 1.4))
        rep = bool(rng.uniform() < 0.5)
        arms.append(Arm(f"a{i}", i, g, int(rng.integers(1, 5)), split(c_lam), repeatable=rep,
                        decay=float(rng.choice([1.0, 0.8])) if rep else 1.0))
    if with_diag:
        arms.append(Arm("diag", 0, 0.0, int(rng.integers(2, 7)),
                        split(float(rng.uniform(0.003, 0.02))),
                        repeatable=bool(rng.uniform() < 0.5)))
    mean_cost = np.mean([a.cost for a in arms], axis=0)
    budget = tuple(float(v) for v in mean_cost * rng.uniform(1.5, 4.0, n_res))
    return SmallProblem(f"random_{seed}", priors, tuple(arms), budget, weights,
                        int(rng.integers(3, 5)), ("real_h", "compute")[:n_res],
                        note="random family (random_problem docstring)")


def benchmark_problems(n_random: int = 18, min_value: float = 0.005,
                       seeds: Sequence[int] | None = None) -> list[SmallProblem]:
    """The named problems plus the first ``n_random`` random ones whose Bayes-optimal value is
    ≥ ``min_value`` (a problem where nothing is worth doing has no fraction to report; the
    filter is on V_Bayes only, never on how any policy does)."""
    out = named_problems()
    seed = 0
    kept = 0
    while kept < n_random and (seeds is None or seed < len(seeds)):
        p = random_problem(seed if seeds is None else seeds[seed])
        seed += 1
        if p.bayes_value() >= min_value:
            out.append(p)
            kept += 1
    return out
