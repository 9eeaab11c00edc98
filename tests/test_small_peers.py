"""The peer rules on the small problems (belief/lab/small_peers.py): the closed forms
agree with the draw-based rules of belief/decision/peers.py, and their exact values are at
most the Bayes-optimal value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from belief.decision.peers import gittins_index
from belief.lab.small_peers import beta_gittins_index, peer_policies, peer_scores
from belief.lab.small_policies import policy_value
from belief.lab.small_problems import named_problems


@pytest.mark.parametrize(("scale", "a", "b", "cost"), [(0.3, 1.0, 1.0, 0.05), (1.0, 4.0, 6.0, 0.1),
                                                       (0.4, 1.0, 2.0, 0.01)])
def test_beta_gittins_index_matches_the_draws(scale, a, b, cost):
    """The closed form against the root on 400 000 draws; the draws' root moves by the EI's
    standard error over |dEI/dg| = P(X > g): 4 of those."""
    x = scale * np.random.default_rng(7).beta(a, b, 400_000)
    g = beta_gittins_index(scale, a, b, cost)
    se = np.maximum(x - g, 0).std() / np.sqrt(x.size) / max((x > g).mean(), 1e-3)
    assert abs(gittins_index(x, cost) - g) < 4 * se
    # below zero when the mean gain does not pay the cost: g = scale·μ − cost
    assert beta_gittins_index(scale, a, b, 2 * scale) == pytest.approx(
        scale * a / (a + b) - 2 * scale)


def test_peer_policies_are_valued_and_bounded_by_bayes():
    pols = peer_policies()
    assert set(pols) == {"ei_cost", "kg_cost", "kg_cost_plain", "pbgi", "ucb_bwk"}
    for p in named_problems():
        v_bayes = p.bayes_value()
        for name, pol in pols.items():
            assert policy_value(p, pol) <= v_bayes + 1e-12, (p.name, name)


def test_kg_plain_stop_forfeits_the_last_worthwhile_action():
    """pilot_then_commit: after a good pilot, ft is worth doing (U0 > 0) and nothing follows
    it, so KG(ft) = C_λ(ft) exactly: the plain rule stops, kg_cost executes ft."""
    p = {q.name: q for q in named_problems()}["pilot_then_commit"]
    pols = peer_policies()
    assert pols["kg_cost"](p, p.initial) == {1: 1.0}  # the pilot first (KG/C ≈ 6.5)
    from belief.lab.small_problems import BeliefState

    good = BeliefState((0, 1), (4,))  # 4 of 4 pilot trials succeeded
    assert p.u0(good)[0] > 0
    assert peer_scores(p, good, "kg_cost")[0] == pytest.approx(1.0)
    assert pols["kg_cost"](p, good) == {0: 1.0}
    assert pols["kg_cost_plain"](p, good) == {-1: 1.0}
    assert stats.betabinom.pmf(4, 4, 1, 1) == pytest.approx(0.2)
