"""Small conjugate problems: backward induction, the policies' exact values, the engine adapter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from belief.errors import InputError
from belief.lab.small_policies import (
    STOP,
    EngineQ,
    compare_policies,
    engine_cvu,
    exact_q_scores,
    plan_scores,
    policy_value,
    standard_policies,
    thompson_probabilities,
)
from belief.lab.small_problems import (
    Arm,
    SmallProblem,
    benchmark_problems,
    brute_force_value,
    named_problems,
    perfect_information_value,
    random_problem,
)


def two_arm(horizon: int = 3) -> SmallProblem:
    """A repeatable known-ish arm and a non-repeatable uncertain one, one budget."""
    return SmallProblem(
        "two_arm", priors=((2.0, 3.0), (1.0, 1.0)),
        arms=(Arm("a", 0, 0.2, 2, (1.0,), repeatable=True, decay=0.8),
              Arm("b", 1, 0.3, 3, (1.5,))),
        budget=(3.0,), weights=(0.05,), horizon=horizon)


@pytest.fixture(scope="module")
def problems():
    return benchmark_problems()


def test_backward_induction_equals_brute_force_on_two_arms():
    for horizon in (1, 2, 3, 4):
        p = two_arm(horizon)
        assert p.bayes_value() == pytest.approx(brute_force_value(p), abs=1e-12)


def test_backward_induction_equals_brute_force_on_the_named_and_random_problems():
    for p in [*named_problems(), *(random_problem(s) for s in range(4))]:
        assert p.bayes_value() == pytest.approx(brute_force_value(p), abs=1e-12), p.name


def test_hand_checked_pilot_value():
    """pilot_then_commit by hand: ft pays only after the 4-trial pilot shows y >= 3 successes
    (posterior mean (1 + y)/6, ft U0 = 0.3·mean − 0.17); P(y) = 1/5 under Beta(1, 1)."""
    p = named_problems()[0]
    expected = 0.2 * (0.3 * 4 / 6 - 0.17) + 0.2 * (0.3 * 5 / 6 - 0.17) - 0.0034
    assert p.bayes_value() == pytest.approx(expected, abs=1e-12)


def test_outcome_probabilities_are_beta_binomial():
    p = two_arm()
    s = p.initial
    out = p.outcomes(s, 1)
    assert sum(q for q, _ in out) == pytest.approx(1.0)
    # the predictive of 3 Bernoulli trials under Beta(1, 1) is uniform on {0, 1, 2, 3}
    assert [q for q, _ in out] == pytest.approx([0.25] * 4)
    # the posterior after y = 2 is Beta(3, 2)
    a, b = p.posterior(out[2][1])
    assert (a[1], b[1]) == (3.0, 2.0)
    assert p.budget_left(out[2][1])[0] == pytest.approx(1.5)
    assert not p.available(out[2][1])[1]


def test_every_policy_is_at_most_bayes_and_bayes_attains_it(problems):
    policies = standard_policies(lookahead=(1, 2), rollout=(1, 2))
    df = compare_policies(problems, policies)
    assert (df.value <= df.bayes + 1e-12).all()
    bayes = df[df.policy == "bayes"]
    assert np.allclose(bayes.value, bayes.bayes, atol=1e-12)
    # one-step look-ahead and a depth-1 rollout are the engine's formula q_exact
    for other in ("lookahead_1", "rollout_1"):
        a = df[df.policy == other].value.to_numpy()
        assert np.allclose(a, df[df.policy == "q_exact"].value.to_numpy(), atol=1e-12)


def test_one_step_q_is_bayes_optimal_at_horizon_two(problems):
    """At T = 2, V_1 = G0, so U0 + E G0 is Q*_2 and the DESIGN stop is Bayes's stop."""
    pols = standard_policies(lookahead=(), rollout=())
    for p in problems:
        p2 = replace(p, horizon=2)
        assert policy_value(p2, pols["q_exact"]) == pytest.approx(p2.bayes_value(), abs=1e-12)


def test_lookahead_of_the_full_depth_is_bayes(problems):
    for p in problems[:8]:
        pol = standard_policies(lookahead=(p.horizon - 1,), rollout=())
        assert policy_value(p, pol[f"lookahead_{p.horizon - 1}"]) == pytest.approx(
            p.bayes_value(), abs=1e-12)


def test_thompson_probabilities_match_sampling():
    """Quadrature probabilities against 40 000 posterior draws; tolerance 4 binomial standard
    errors √(p(1 − p)/n) (plus 1e-3 for probabilities near 0)."""
    for p in (two_arm(), named_problems()[4], named_problems()[5], random_problem(18)):
        s = p.initial
        probs = thompson_probabilities(p, s)
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-8)
        rng = np.random.default_rng(5)
        a, b = p.posterior(s)
        n = 40_000
        theta = rng.beta(a, b, size=(n, len(a)))
        v = theta[:, [arm.latent for arm in p.arms]] * p.gain_scale(s) - p.c_lambda
        v = np.where(p.feasible(s), v, -np.inf)
        pick = np.where(v.max(1) > 0, v.argmax(1), STOP)
        for m in [*range(len(p.arms)), STOP]:
            freq = float(np.mean(pick == m))
            q = probs.get(m, 0.0)
            assert abs(freq - q) < 4 * np.sqrt(q * (1 - q) / n) + 1e-3, (p.name, m)


def test_engine_cvu_is_unbiased_for_the_exact_one_step_cvu():
    """Mean of the engine's CVU over 16 seeds (draws, outcomes) against the exact one-step
    CVU, within 4 standard errors sd/√16 of the seeds.  Problems without a tie at G0(s^∅):
    with a tie, the finite-S max in G0 is biased (see the benchmark report)."""
    for p in (named_problems()[0], named_problems()[4]):
        s = p.initial
        scores, g0 = exact_q_scores(p, s)
        exact = scores - g0 - p.u0(s)
        vals = np.array([engine_cvu(p, s, draws=1000, n_outcomes=128, seed=k)["cvu"]
                         for k in range(16)])
        se = vals.std(0, ddof=1) / 4
        ok = p.feasible(s)
        assert (np.abs(vals.mean(0) - exact)[ok] <= 4 * se[ok] + 1e-9).all(), p.name


def test_engine_policy_is_deterministic_and_shares_its_cache():
    p = named_problems()[0]
    cache: dict = {}
    e1 = EngineQ(draws=500, n_outcomes=64, seed=3, cache=cache)
    v1 = policy_value(p, e1)
    e2 = EngineQ(draws=500, n_outcomes=64, seed=3, stop="q>0", cache=cache)
    policy_value(p, e2)
    assert e1.calls > 0 and e2.calls == 0
    assert policy_value(p, EngineQ(draws=500, n_outcomes=64, seed=3)) == v1
    # the engine finds the pilot's value (U0(pilot) < 0 but Q > 0)
    assert next(iter(e1(p, p.initial))) == 1


def test_the_q_positive_stop_forfeits_a_last_worthwhile_action():
    """One adaptation worth doing once, nothing after it: Q(m) = E G0(s^m) = 0, so a
    'Q > 0' stop stops; the DESIGN stop (U0 + E G0 > 0) runs it."""
    p = SmallProblem("once", priors=((8.0, 2.0),), arms=(Arm("m", 0, 0.2, 1, (1.0,)),),
                     budget=(5.0,), weights=(0.1,), horizon=3)
    pols = standard_policies(lookahead=(), rollout=())
    assert policy_value(p, pols["q_exact"]) == pytest.approx(0.2 * 0.8 - 0.1)
    assert policy_value(p, pols["q_exact_q>0"]) == 0.0


def test_perfect_information_bounds_bayes(problems):
    for p in problems[:6]:
        v, se = perfect_information_value(p, draws=50_000)
        assert v + 4 * se >= p.bayes_value()


def test_random_problems_are_seeded_and_valid():
    assert random_problem(3) == random_problem(3)
    assert random_problem(3) != random_problem(4)
    for s in range(30):
        p = random_problem(s)
        assert 2 <= len(p.arms) <= 3 and p.horizon in (3, 4)


def test_bad_problems_are_refused():
    with pytest.raises(InputError, match="latent 2"):
        SmallProblem("x", priors=((1.0, 1.0),), arms=(Arm("a", 2, 0.1, 1, (1.0,)),),
                     budget=(1.0,), weights=(0.1,), horizon=2)
    with pytest.raises(InputError, match="Beta prior"):
        SmallProblem("x", priors=((0.0, 1.0),), arms=(Arm("a", 0, 0.1, 1, (1.0,)),),
                     budget=(1.0,), weights=(0.1,), horizon=2)
    with pytest.raises(InputError, match="costs"):
        SmallProblem("x", priors=((1.0, 1.0),), arms=(Arm("a", 0, 0.1, 1, (1.0, 2.0)),),
                     budget=(1.0,), weights=(0.1,), horizon=2)
    with pytest.raises(InputError, match="horizon"):
        SmallProblem("x", priors=((1.0, 1.0),), arms=(Arm("a", 0, 0.1, 1, (1.0,)),),
                     budget=(1.0,), weights=(0.1,), horizon=0)


def _open_loop_best(problem, s, first):
    """Brute force: the best expected value of a fixed sequence that starts with ``first``,
    every execution valued by the posterior means of s (no learning)."""
    a, b = problem.posterior(s)
    mean = (a / (a + b))[[arm.latent for arm in problem.arms]]
    best = -np.inf

    def walk(counts, total, depth):
        nonlocal best
        best = max(best, total)
        st = s._replace(counts=counts)
        for m in np.flatnonzero(problem.feasible(st)):
            u = problem.gain_scale(st)[m] * mean[m] - problem.c_lambda[m]
            walk((*counts[:m], counts[m] + 1, *counts[m + 1:]), total + u, depth + 1)

    st = s
    if problem.feasible(st)[first]:
        u = problem.gain_scale(st)[first] * mean[first] - problem.c_lambda[first]
        walk((*s.counts[:first], s.counts[first] + 1, *s.counts[first + 1:]), u, 1)
    return best


def test_the_plan_scores_are_the_best_open_loop_plans_and_voi_is_nonnegative(problems):
    """V_plan(m) against enumerating every sequence starting with m (posterior means of s
    held fixed), at s_0 and after one outcome; VOI = plan_voi − plan ≥ 0 (Jensen, exact
    here) and 0 at the last step."""
    for prob in problems[:8]:
        states = [prob.initial]
        f0 = np.flatnonzero(prob.feasible(prob.initial))
        states += [s2 for _, s2 in prob.outcomes(prob.initial, int(f0[0]))][:3]
        for s in states:
            v = plan_scores(prob, s, voi=False)
            w = plan_scores(prob, s, voi=True)
            for m in range(len(prob.arms)):
                assert v[m] == pytest.approx(_open_loop_best(prob, s, m), abs=1e-12), \
                    (prob.name, s, m)
            ok = np.isfinite(v)
            assert (w[ok] - v[ok] >= -1e-12).all(), prob.name
            if prob.steps_left(s) <= 1:
                assert np.allclose(w[ok], v[ok], atol=1e-12)


def test_stop_when_nothing_is_feasible():
    p = replace(two_arm(), budget=(0.5,))
    assert p.bayes_value() == 0.0
    assert thompson_probabilities(p, p.initial) == {STOP: 1.0}
    assert stats.betabinom.pmf(0, 0, 1, 1) == 1.0  # a zero-trial experiment shows nothing
