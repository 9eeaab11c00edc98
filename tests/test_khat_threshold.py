"""The PSIS k̂ threshold follows the number of draws reweighted (min(1 − 1/log10 S, cap))."""

from __future__ import annotations

import numpy as np
import pytest

from belief.decision.importance import khat_threshold, psis


@pytest.mark.parametrize(("n", "expected"), [(2000, 1 - 1 / np.log10(2000)),
                                             (500, 1 - 1 / np.log10(500)),
                                             (100, 0.5), (10**9, 0.7)])
def test_threshold_is_the_sample_size_rule_capped(n, expected):
    assert khat_threshold(0.7, n) == pytest.approx(expected)
    assert khat_threshold(0.7, n) <= 0.7


def test_a_smaller_cap_wins_and_one_draw_is_never_trusted():
    assert khat_threshold(0.5, 2000) == 0.5
    assert khat_threshold(0.7, 1) == -np.inf


def test_a_heavy_tail_between_the_rule_and_0_7_is_not_trusted_at_small_s():
    # log-ratios of a Pareto tail with shape k = 0.66: trusted under the old fixed 0.7, not
    # under the rule at S = 200 (0.565); the estimate of k̂ varies, so check on many rows
    rng = np.random.default_rng(4)
    s = 200
    logr = 0.66 * np.log(rng.pareto(1 / 0.66, size=(400, s)) + 1.0)
    _, khat = psis(logr)
    share_rule = float(np.mean(~(khat <= khat_threshold(0.7, s))))
    share_fixed = float(np.mean(~(khat <= 0.7)))
    assert share_rule > share_fixed
