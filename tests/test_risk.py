from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from belief.errors import InputError
from belief.risk import clopper_pearson_upper


def test_matches_scipy_exact_interval():
    delta = 0.05
    for n in (1, 5, 20, 50, 137):
        for k in range(0, n):
            ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * delta,
                                                     method="exact")
            assert clopper_pearson_upper(k, n, delta) == pytest.approx(ci.high, abs=1e-8)


def test_edge_cases():
    assert clopper_pearson_upper(0, 0) == 1.0
    assert clopper_pearson_upper(7, 7) == 1.0
    with pytest.raises(InputError, match="exceeds"):
        clopper_pearson_upper(3, 2)
    with pytest.raises(InputError, match=">= 0"):
        clopper_pearson_upper(-1, 2)
    with pytest.raises(InputError, match="delta"):
        clopper_pearson_upper(1, 2, delta=1.5)


@pytest.mark.parametrize("n", [5, 20, 50])
def test_exact_coverage(n):
    delta = 0.05
    ks = np.arange(n + 1)
    ucb = clopper_pearson_upper(ks, np.full_like(ks, n), delta)
    for p in np.linspace(0.001, 0.999, 199):
        coverage = stats.binom.pmf(ks, n, p)[ucb >= p].sum()
        assert coverage >= 1 - delta - 1e-12


def test_rule_of_three():
    for n in (30, 50, 100, 300):
        assert clopper_pearson_upper(0, n, 0.05) == pytest.approx(3 / n, rel=0.10)
