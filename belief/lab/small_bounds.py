"""An information-relaxation upper bound on the Bayes-optimal value of a small problem.

On a :class:`~belief.lab.small_problems.SmallProblem` the truth θ is drawn from the
belief's own prior, so the Bayes-optimal value V_Bayes = V_T(s_0) is the best expected net
value of any non-anticipative policy.  Relaxing non-anticipativity (Brown, Smith & Sun 2010;
for sequential exploration Brown & Smith 2013) gives, for any function V̂ of the belief state,

    V_Bayes ≤ E[ max_{plans a_0, a_1, …} Σ_t ( r_t − z_t ) ],
    z_t = V̂(s_{t+1}) − E[ V̂(s_{t+1}) | s_t, a_t ],

where the inner maximisation sees one *scenario* — θ and the outcome of every execution — and
ranges over every feasible sequence of executions (any length: stopping is allowed), s_t is
the belief state the sequence reaches in that scenario and E[· | s_t, a_t] the beta-binomial
predictive of s_t.  z_t has mean zero given what a policy knows at t (the next outcome's law
given the history is that predictive), so the policy's own sequence scores its value in
expectation, and the maximum can only be larger.  The penalty charges the clairvoyant for
good news it steers towards: V̂(s_{t+1}) above its expectation.  (With the opposite sign the
penalty is also zero-mean and the bound also valid, but it rewards good news instead of
charging it: far from tight.)

Rewards.  ``rewards="truth"``: r_t = G_m d^k θ_{l(m)} − λᵀΔC(m), the realised net value given θ.
``rewards="mean"``: r_t = U0(a_t | s_t), its conditional expectation given the policy's
information — replacing r_t by it is itself a zero-mean penalty (r_t − U0), so the bound
stays valid, and with V̂ = V (the exact value function) every scenario's maximum is V_Bayes
exactly: Σ_t [U0_t + E V(s_{t+1}) − V(s_{t+1})] ≤ Σ_t [V(s_t) − V(s_{t+1})] = V(s_0), with
equality along the Bayes-optimal policy.  V̂ = 0 with ``rewards="truth"`` is the
perfect-information (clairvoyant) bound E_θ[max_plan Σ r_t(θ)]
(:func:`belief.lab.small_problems.perfect_information_value`).

Value approximations V̂ (:data:`VALUE_FUNCTIONS`): ``zero``; ``one_step`` V̂ = G0(s) = max(0,
max_m U0(m | s)) (V_1, the engine's one-step value); ``lookahead2`` V_2 (two steps of
backward induction); ``greedy`` the expected net value of U0-greedy (with its stop) for the
steps left (the myopic policy's value function); ``bayes`` the exact V (for checks).

Scenarios (common random numbers).  Scenario j draws θ^j from the prior and, for every arm m
and its k-th execution (k < the most executions the problem allows), an outcome
Y^j_{m,k} ~ Binomial(n_m, θ^j_{l(m)}) (``default_rng([seed, 18_003])``).  The belief state a
sequence reaches depends only on its execution counts c (successes = Σ of the outcomes of the
executions done), so the inner maximisation is a backward recursion over count vectors,
W(c) = max(0, max_{m feasible at c} [r(m | c) − z(m | c) + W(c + e_m)]), vectorised over the
scenarios.  Every V̂ and reward form uses the same scenarios, so differences between bounds
are paired.  The estimate is the mean over scenarios, its Monte Carlo standard error
sd/√N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from belief.errors import InputError
from belief.lab.small_problems import BeliefState, SmallProblem

__all__ = ["VALUE_FUNCTIONS", "Bound", "greedy_value", "relaxation_bound", "relaxation_bounds"]

VALUE_FUNCTIONS = ("zero", "one_step", "lookahead2", "greedy", "bayes")
REWARDS = ("mean", "truth")


@dataclass(frozen=True)
class Bound:
    """One information-relaxation bound: its estimate, Monte Carlo standard error, the
    per-scenario maxima (for paired comparisons), the value function and the reward form."""

    value: float
    se: float
    per_scenario: np.ndarray
    value_function: str
    rewards: str

    def interval(self, z: float = 1.6449) -> tuple[float, float]:
        """value ± z·se (default a 90 % interval)."""
        return self.value - z * self.se, self.value + z * self.se


def greedy_value(problem: SmallProblem, s: BeliefState, memo: dict) -> float:
    """R(s): the expected net value of U0-greedy for the steps left from s (argmax U0 over the
    feasible arms, first on ties; stop when no U0 > 0)."""
    if s not in memo:
        f = problem.feasible(s)
        u0 = problem.u0(s)
        if not f.any() or u0[f].max() <= 0:
            memo[s] = 0.0
        else:
            m = int(np.flatnonzero(f)[np.argmax(u0[f])])
            memo[s] = float(u0[m] + sum(p * greedy_value(problem, s2, memo)
                                        for p, s2 in problem.outcomes(s, m) if p > 0))
    return memo[s]


def _value_function(problem: SmallProblem, name: str) -> Callable[[BeliefState], float]:
    if name == "zero":
        return lambda s: 0.0
    if name == "one_step":
        return problem.g0
    if name == "lookahead2":
        return lambda s: problem.value(s, 2)
    if name == "bayes":
        return problem.value
    if name == "greedy":
        memo: dict = {}
        return lambda s: greedy_value(problem, s, memo)
    raise InputError("value_function", f"unknown value approximation {name!r}; allowed: "
                                       f"{list(VALUE_FUNCTIONS)}")


def _count_vectors(problem: SmallProblem) -> list[tuple[int, ...]]:
    """Every count vector a sequence of feasible executions can reach (feasibility depends on
    the counts only), the empty one first."""
    seen = {problem.initial.counts}
    frontier = [problem.initial.counts]
    zero_succ = problem.initial.successes
    while frontier:
        nxt = []
        for c in frontier:
            for m in np.flatnonzero(problem.feasible(BeliefState(c, zero_succ))):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                if c2 not in seen:
                    seen.add(c2)
                    nxt.append(c2)
        frontier = nxt
    return sorted(seen, key=lambda c: (sum(c), c))


def _scenarios(problem: SmallProblem, n: int, seed: int, most: list[int]
               ) -> tuple[np.ndarray, list[np.ndarray]]:
    """θ (n, L) from the prior and the outcomes Y[m] (n, most_m) of each arm's executions."""
    rng = np.random.default_rng([seed, 18_003])
    theta = np.column_stack([rng.beta(a, b, n) for a, b in problem.priors])
    ys = [rng.binomial(arm.trials, theta[:, [arm.latent]], size=(n, max(k, 1)))
          for arm, k in zip(problem.arms, most, strict=True)]
    return theta, ys


def relaxation_bounds(problem: SmallProblem, specs: list[tuple[str, str]], *,
                      scenarios: int = 4000, seed: int = 0) -> list[Bound]:
    """The bounds of every (value function, reward form) in ``specs`` on the same scenarios
    (module docstring)."""
    scenarios = int(scenarios)
    if scenarios < 2:
        raise InputError("scenarios", f"at least 2 scenarios are needed, got {scenarios}")
    for vf, rw in specs:
        _value_function(problem, vf)
        if rw not in REWARDS:
            raise InputError("rewards", f"unknown reward form {rw!r}; allowed: {list(REWARDS)}")
    counts = _count_vectors(problem)
    n_arms, n_lat = len(problem.arms), len(problem.priors)
    most = [max(c[m] for c in counts) for m in range(n_arms)]
    theta, ys = _scenarios(problem, scenarios, seed, most)
    cum = [np.concatenate([np.zeros((scenarios, 1), int), np.cumsum(y, axis=1)], axis=1)
           for y in ys]  # cum[m][:, k]: successes of m's first k executions

    def successes(c: tuple[int, ...]) -> np.ndarray:
        out = np.zeros((scenarios, n_lat), int)
        for m, arm in enumerate(problem.arms):
            out[:, arm.latent] += cum[m][:, c[m]]
        return out

    succ = {c: successes(c) for c in counts}
    lat = [arm.latent for arm in problem.arms]
    results = []
    for vf, rw in specs:
        vhat = _value_function(problem, vf)
        w: dict[tuple[int, ...], np.ndarray] = {}
        for c in reversed(counts):
            s_c = succ[c]
            keys, inverse = np.unique(s_c, axis=0, return_inverse=True)
            inverse = inverse.ravel()
            states = [BeliefState(c, tuple(int(v) for v in k)) for k in keys]
            best = np.zeros(scenarios)
            feasible = problem.feasible(states[0])
            for m in np.flatnonzero(feasible):
                c2 = (*c[:m], c[m] + 1, *c[m + 1:])
                if rw == "mean":
                    r = np.array([problem.u0(s)[m] for s in states])[inverse]
                else:
                    r = (problem.gain_scale(states[0])[m] * theta[:, lat[m]]
                         - problem.c_lambda[m])
                if vf == "zero":
                    z = 0.0
                else:
                    expect = np.array([sum(p * vhat(s2) for p, s2 in problem.outcomes(s, m)
                                           if p > 0) for s in states])[inverse]
                    k2, inv2 = np.unique(succ[c2], axis=0, return_inverse=True)
                    after = np.array([vhat(BeliefState(c2, tuple(int(v) for v in k)))
                                      for k in k2])[inv2.ravel()]
                    z = after - expect
                best = np.maximum(best, r - z + w[c2])
            w[c] = best
        top = w[counts[0]]
        results.append(Bound(float(top.mean()), float(top.std(ddof=1) / np.sqrt(scenarios)),
                             top, vf, rw))
    return results


def relaxation_bound(problem: SmallProblem, value_function: str = "greedy",
                     rewards: str = "mean", *, scenarios: int = 4000, seed: int = 0) -> Bound:
    """One information-relaxation bound on V_Bayes (module docstring).

    Parameters
    ----------
    problem : SmallProblem
    value_function : str
        V̂ of the penalty, one of :data:`VALUE_FUNCTIONS` (``zero``: no penalty).
    rewards : {"mean", "truth"}
        r_t = U0(a_t | s_t) or the realised net value given θ.
    scenarios : int
        N, the Monte Carlo scenarios (θ and every outcome).
    seed : int

    Returns
    -------
    Bound with the mean over scenarios of max_plan Σ_t (r_t − z_t) and its standard error.
    """
    return relaxation_bounds(problem, [(value_function, rewards)], scenarios=scenarios,
                             seed=seed)[0]
