"""The information-relaxation bound on the small problems (belief/lab/small_bounds.py)
against the exact Bayes-optimal value of backward induction."""

from __future__ import annotations

import numpy as np
import pytest

from belief.errors import InputError
from belief.lab.small_bounds import relaxation_bound, relaxation_bounds
from belief.lab.small_problems import named_problems, perfect_information_value

N = 3000


@pytest.fixture(scope="module")
def problem():
    """diagnosis_or_direct: two latents, a pilot, a repeatable arm, horizon 4 — learning pays
    and the clairvoyant gains much from knowing θ (V_PI ≈ 1.7·V_Bayes)."""
    return {p.name: p for p in named_problems()}["diagnosis_or_direct"]


@pytest.fixture(scope="module")
def bounds(problem):
    specs = [("zero", "truth"), ("one_step", "mean"), ("lookahead2", "mean"),
             ("greedy", "mean"), ("bayes", "mean")]
    return dict(zip(specs, relaxation_bounds(problem, specs, scenarios=N, seed=1),
                    strict=True))


def test_penalised_bounds_lie_above_the_bayes_value(problem, bounds):
    """The true bound is ≥ V_Bayes; the estimate, a mean of N iid scenario maxima, falls below
    it by more than 4 standard errors with probability ≤ Φ(−4) ≈ 3e-5."""
    v = problem.bayes_value()
    for key in [("one_step", "mean"), ("lookahead2", "mean"), ("greedy", "mean"),
                ("zero", "truth")]:
        b = bounds[key]
        assert b.value + 4 * b.se >= v, key
        assert b.se > 0
    # and the approximations make it tight here: within 10 % of V_Bayes (up to 4 standard
    # errors of the Monte Carlo estimate)
    tight = bounds[("lookahead2", "mean")]
    assert tight.value <= 1.10 * v + 4 * tight.se


def test_exact_value_function_gives_the_bayes_value_in_every_scenario(problem, bounds):
    """V̂ = V and r_t = U0: Σ_t [U0_t + E V(s_{t+1}) − V(s_{t+1})] ≤ V(s_0), with equality on
    the Bayes-optimal policy's sequence — zero variance."""
    b = bounds[("bayes", "mean")]
    np.testing.assert_allclose(b.per_scenario, problem.bayes_value(), rtol=0, atol=1e-12)


def test_perfect_information_bound_matches_the_clairvoyant_value(problem, bounds):
    pi, pi_se = perfect_information_value(problem, draws=200_000, seed=2)
    b = bounds[("zero", "truth")]
    assert abs(b.value - pi) < 4 * np.hypot(b.se, pi_se)


def test_penalised_bound_is_below_the_perfect_information_bound(bounds):
    """Paired over the same scenarios: the mean of PI − penalised exceeds 4 of its standard
    errors (a one-sided check at Φ(−4))."""
    pi = bounds[("zero", "truth")].per_scenario
    for key in [("one_step", "mean"), ("lookahead2", "mean"), ("greedy", "mean")]:
        d = pi - bounds[key].per_scenario
        assert d.mean() - 4 * d.std(ddof=1) / np.sqrt(d.size) > 0, key


def test_bound_on_a_second_problem_and_its_interval():
    p = {q.name: q for q in named_problems()}["two_pilots_needed"]
    b = relaxation_bound(p, "one_step", scenarios=N, seed=3)
    lo, hi = b.interval()
    assert hi >= p.bayes_value() and lo < hi
    assert b.value_function == "one_step" and b.rewards == "mean"


@pytest.mark.parametrize(("kw", "table"), [({"value_function": "v2"}, "value_function"),
                                           ({"rewards": "median"}, "rewards"),
                                           ({"scenarios": 1}, "scenarios")])
def test_bad_settings_are_refused(problem, kw, table):
    with pytest.raises(InputError) as e:
        relaxation_bound(problem, **kw)
    assert e.value.table == table
