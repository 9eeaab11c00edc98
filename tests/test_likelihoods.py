"""The written-out binomial likelihood (models.likelihoods) equals the binomial pmf, and the
sampled gains model's log density is the stated Binomial(trials, logistic(η)) one."""

import numpy as np
import pytest
from scipy import stats

from belief.errors import InputError
from models.likelihoods import (
    binomial_logit_logp,
    binomial_logpmf,
    log_binomial_coefficient,
    normal_logpdf,
)


def test_log_binomial_coefficient_matches_exact_combinations():
    from math import comb, log

    n = np.array([0, 1, 5, 40, 200, 1000])
    k = np.array([0, 1, 2, 17, 0, 999])
    want = [log(comb(int(a), int(b))) for a, b in zip(n, k, strict=True)]
    np.testing.assert_allclose(log_binomial_coefficient(n, k), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("n", "k", "rule"), [
    ([3], [4], r"successes must lie in \[0, trials\]"),
    ([3], [-1], r"successes must lie in \[0, trials\]"),
    ([3.5], [1], "whole numbers"), ([3], [np.nan], "whole numbers")])
def test_log_binomial_coefficient_refuses_impossible_counts(n, k, rule):
    with pytest.raises(InputError, match=rule):
        log_binomial_coefficient(np.array(n), np.array(k))


def test_logit_kernel_equals_binomial_pmf_including_far_tails():
    import pytensor
    import pytensor.tensor as pt

    rng = np.random.default_rng(7)
    n = np.concatenate([[0, 0, 50, 50, 50, 50], rng.integers(1, 400, 40)])
    k = np.concatenate([[0, 0, 0, 50, 1, 49], rng.binomial(n[6:], 0.4)])
    eta = np.concatenate([[0.3, -40.0, -35.0, 35.0, 30.0, -30.0], rng.normal(0.0, 3.0, 40)])
    e = pt.dvector("eta")
    f = pytensor.function([e], binomial_logit_logp(k, n, e, log_binomial_coefficient(n, k)))
    got = f(eta)
    near = np.abs(eta) < 15.0  # scipy's pmf through p = logistic(η)
    want = stats.binom.logpmf(k[near], n[near], 1.0 / (1.0 + np.exp(-eta[near])))
    assert near.sum() >= 40
    np.testing.assert_allclose(got[near], want, rtol=1e-10, atol=1e-10)
    # far tails, where p rounds to 0 or 1: log p = −log(1 + e^−η), log(1 − p) = −log(1 + e^η)
    far = ~near
    tail = (log_binomial_coefficient(n[far], k[far]) - k[far] * np.log1p(np.exp(-eta[far]))
            - (n[far] - k[far]) * np.log1p(np.exp(eta[far])))
    # (k η − n softplus(η) cancels: absolute error up to ≈ n |η| ε ≈ 1e-12 here)
    np.testing.assert_allclose(got[far], tail, rtol=1e-12, atol=1e-10)
    assert np.all(np.isfinite(got))
    assert got[0] == 0.0 and got[1] == 0.0  # an empty slot adds nothing


def test_sampled_gains_model_log_density_is_the_binomial_one(world_candidates,
                                                            campaign_evidence):
    """At random points of the sampled model: the observed term equals Σ binom.logpmf over
    the slots with the model's own η, and it moves with the counts when they are swapped."""
    import pymc as pm

    from models.gains import GainsModel, encode_estimates

    ev, world = campaign_evidence
    model = GainsModel(world_candidates, max_policies=8)
    enc = model.encode(ev.paired, (world.policy,), ev.policy_evals)
    est = encode_estimates(None, enc, model.gain_ids, model.max_estimates, model.actors)
    assert enc.trials.sum() > 0 and 0 < enc.successes.sum() < enc.trials.sum()
    m = model.build(enc, est)
    obs = next(p for p in m.potentials if p.name == "obs")
    outs = m.replace_rvs_by_values([obs, m["policy_logit"]])
    f = m.compile_fn(outs, inputs=m.value_vars, on_unused_input="ignore")
    rng = np.random.default_rng(11)
    ip = m.initial_point()
    for _ in range(3):
        point = {name: v + rng.normal(0.0, 0.5, np.shape(v)) for name, v in ip.items()}
        lp, eta = f(point)
        want = stats.binom.logpmf(enc.successes, enc.trials, 1.0 / (1.0 + np.exp(-eta))).sum()
        assert lp == pytest.approx(want, rel=1e-10, abs=1e-9)
    # swapping the counts (as a re-fit does) changes the term to the new counts' pmf
    k2 = np.minimum(enc.trials, enc.successes + 3)
    with m:
        pm.set_data({"successes": k2, "log_binom": log_binomial_coefficient(enc.trials, k2)})
    f = m.compile_fn(outs, inputs=m.value_vars, on_unused_input="ignore")
    lp, eta = f(ip)
    want = stats.binom.logpmf(k2, enc.trials, 1.0 / (1.0 + np.exp(-eta))).sum()
    assert lp == pytest.approx(want, rel=1e-10, abs=1e-9)
    assert "log_binom" in model.data(enc, est)
    np.testing.assert_allclose(model.data(enc, est)["log_binom"],
                               log_binomial_coefficient(enc.trials, enc.successes))
    # every container of the compiled model is refreshed by a re-fit (GainsModel.data is what
    # fit hands to nutpie's with_data, which keeps the old value of a container not passed)
    containers = {v.name for v in m.data_vars}
    assert set(model.data(enc, est)) == containers


def test_normal_logpdf_equals_scipy_norm():
    """The decision path's normal density (no scipy.stats import) is scipy's to the last bit,
    broadcast, for array and scalar scales and integer values."""
    rng = np.random.default_rng(3)
    x, loc = rng.normal(size=(7, 1)), rng.normal(size=(1, 5))
    scale = rng.uniform(0.01, 3.0, size=(1, 5))
    np.testing.assert_array_equal(normal_logpdf(x, loc, scale),
                                  stats.norm.logpdf(x, loc, scale))
    np.testing.assert_array_equal(normal_logpdf(x, loc, 0.5), stats.norm.logpdf(x, loc, 0.5))
    xi = np.arange(-3, 4)[:, None]
    np.testing.assert_array_equal(normal_logpdf(xi, loc, scale),
                                  stats.norm.logpdf(xi, loc, scale))


def test_binomial_logpmf_equals_scipy_binom_at_the_edges():
    """log Binomial(k; n, p) equals scipy's to the last bit, including p = 0 and 1 (0·log 0 =
    0, −∞ where the count is impossible) and integer counts, and refuses a count outside
    [0, n]."""
    k = np.arange(13)[:, None]
    p = np.array([0.0, 1e-12, 0.03, 0.5, 0.97, 1.0 - 1e-12, 1.0])[None, :]
    np.testing.assert_array_equal(binomial_logpmf(k, 12, p), stats.binom.logpmf(k, 12, p))
    np.testing.assert_array_equal(binomial_logpmf(k.astype(float), np.int64(12), p),
                                  stats.binom.logpmf(k, 12, p))
    with pytest.raises(InputError, match="successes must lie"):
        binomial_logpmf(np.array([13]), 12, np.array([0.5]))
