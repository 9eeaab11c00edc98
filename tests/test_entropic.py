"""The entropic risk measure φ_θ(X) = −(1/θ)·log E[exp(−θX)] (``entropic:θ``).

Monte Carlo tolerances: for n draws the estimate is φ̂ = −(1/θ)·log M̂ with M̂ the (weighted)
mean of f_i = exp(−θ x_i); by the delta method sd(φ̂) ≈ sd(M̂)/(θ·M), with
sd(M̂) = sd(f)/√n unweighted and √(Σ_i w_i²(f_i − M̂)²)/Σ_i w_i weighted (the ratio
estimator).  For X ~ N(μ, σ²), sd(f)/M = √(exp(θ²σ²) − 1), so sd(φ̂) = √(exp(θ²σ²) − 1)/(θ√n)
unweighted.  The tests allow 4 such sd's (a false alarm about once in 16,000 runs; the seeds
are fixed) and check the sd is small enough that a wrong formula (e.g. the mean, off by θσ²/2)
would fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.decision.engine import decide
from belief.decision.entropic import Entropic
from belief.decision.functional_registry import REGISTRY, parse_functional
from belief.decision.functionals import weighted_columns
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from belief.posterior.experiments import Experiment


def closed_form(mu: float, sigma: float, theta: float) -> float:
    """φ_θ of N(μ, σ²): −(1/θ)·log exp(−θμ + θ²σ²/2) = μ − θσ²/2."""
    return mu - theta * sigma**2 / 2


@pytest.mark.parametrize("mu, sigma, theta", [(0.3, 1.0, 0.5), (-0.1, 0.4, 3.0),
                                              (0.05, 0.1, 20.0)])
def test_unweighted_matches_the_normal_closed_form(mu, sigma, theta):
    n = 200_000
    x = np.random.default_rng(7).normal(mu, sigma, n)
    sd = np.sqrt(np.expm1(theta**2 * sigma**2)) / (theta * np.sqrt(n))
    assert 4 * sd < theta * sigma**2 / 2  # the mean (θ → 0) would fail
    assert abs(float(Entropic(theta)(x)) - closed_form(mu, sigma, theta)) < 4 * sd


@pytest.mark.parametrize("theta", [0.5, 2.0])
def test_importance_weighted_matches_the_closed_form_of_the_target(theta):
    """Draws of a wide proposal N(0, 1.5²) weighted by p/q to the target N(μ, σ²)."""
    mu, sigma, n = 0.4, 0.8, 200_000
    x = np.random.default_rng(11).normal(0.0, 1.5, n)
    w = stats.norm.pdf(x, mu, sigma) / stats.norm.pdf(x, 0.0, 1.5)
    got = float(Entropic(theta)(x, w))
    f = np.exp(-theta * x)
    m = (w * f).sum() / w.sum()
    sd = np.sqrt((w**2 * (f - m) ** 2).sum()) / w.sum() / (theta * m)
    assert 4 * sd < theta * sigma**2 / 2
    assert abs(got - closed_form(mu, sigma, theta)) < 4 * sd
    # the weights' scale does not matter; zero weights drop their draws
    assert Entropic(theta)(x, 3.0 * w) == pytest.approx(got, rel=1e-12)
    keep = np.arange(n) % 3 == 0
    assert Entropic(theta)(x, np.where(keep, w, 0.0)) == pytest.approx(
        float(Entropic(theta)(x[keep], w[keep])), rel=1e-12)


def test_limits_order_and_stability():
    x = np.random.default_rng(3).normal(size=(4, 500))
    assert np.allclose(Entropic(1e-8)(x), x.mean(axis=-1), atol=1e-6)  # θ → 0: the mean
    assert np.allclose(Entropic(1e4)(x), x.min(axis=-1), atol=2e-3)  # θ → ∞: the minimum
    assert (Entropic(0.5)(x) <= x.mean(axis=-1)).all()  # Jensen
    assert (Entropic(2.0)(x) <= Entropic(0.5)(x)).all()  # more averse, lower
    big = np.array([1000.0, 1001.0])  # exp(−θx) underflows without the log-sum-exp
    assert Entropic(10.0)(big) == pytest.approx(1000.0 + (np.log(2) - np.log1p(np.exp(-10))) / 10,
                                                rel=1e-14)


def test_columns_and_the_generic_paths_agree_with_the_formula():
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(300, 4)) * [1, 2, 0.5, 30]  # the last column: θ·range ≫ 745
    w = rng.exponential(size=(6, 300))
    w[0, draws[:, 3] < 40] = 0.0  # row 0 weighs only the top of column 3: an underflow
    fn = Entropic(15.0)
    got = weighted_columns(fn, draws, w)
    want = np.array([[float(fn(draws[:, c], w[j])) for c in range(4)] for j in range(6)])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert np.isfinite(got).all()


def test_influence_function_is_the_derivative_along_a_point_mass():
    rng = np.random.default_rng(9)
    x = rng.normal(size=400)
    fn, eps = Entropic(1.5), 1e-6
    phi = float(fn(x))
    for point in (-2.0, 0.0, 1.0):
        w = np.append(np.full(x.size, (1 - eps) / x.size), eps)
        numeric = (float(fn(np.append(x, point), w)) - phi) / eps
        psi = float(fn.influence(np.array([[point]]), np.array([[phi]]), lambda q: [])[0, 0])
        assert numeric == pytest.approx(psi, rel=1e-4, abs=1e-6)


def test_location_scale_form_is_the_functional_of_the_shifted_draws():
    rng = np.random.default_rng(2)
    z = rng.standard_normal((50, 3))
    loc, scale = rng.normal(size=(7, 3)), rng.uniform(0.1, 2.0, (7, 3))
    fn = Entropic(0.8)
    got = fn.location_scale(loc, scale, z)
    want = np.array([[float(fn(loc[n, c] + scale[n, c] * z[:, c])) for c in range(3)]
                     for n in range(7)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # many distinct scales (a heteroscedastic fit): h_c read off its spline, to ~1e-9
    loc, scale = rng.normal(size=(3000, 3)), rng.uniform(0.1, 2.0, (3000, 3))
    got = fn.location_scale(loc, scale, z)
    rows = rng.choice(3000, 40, replace=False)
    want = np.array([[float(fn(loc[n, c] + scale[n, c] * z[:, c])) for c in range(3)]
                     for n in rows])
    np.testing.assert_allclose(got[rows], want, rtol=1e-9, atol=1e-9)


def test_the_registry_knows_it_and_refuses_a_bad_theta():
    assert "entropic" in REGISTRY.names
    assert parse_functional("entropic:0.5") == Entropic(0.5)
    assert parse_functional(str(Entropic(0.25))) == Entropic(0.25)
    for bad, rule in [("entropic:0", "θ > 0"), ("entropic:-1", "θ > 0"),
                      ("entropic", "needs a finite parameter"), ("entropic:inf", "finite")]:
        with pytest.raises(InputError, match=rule):
            parse_functional(bad)
    assert "'entropic:θ' with θ > 0" in REGISTRY.describe()


@pytest.mark.parametrize("sigma, method", [(1.0, "psis+cv"), (0.01, "regression+ls")])
def test_cvu_with_the_entropic_functional_matches_the_normal_closed_form(sigma, method):
    """A free observation of Δ ~ N(μ0, sd0²) with noise σ: the posterior after Y is normal
    with variance v² and mean μ(Y) ~ N(μ0, s²) over Y, so φ_θ = μ(Y) − θv²/2 and
    E_Y[G0] = E[max(0, μ + c)] = (μ0 + c)Φ((μ0 + c)/s) + s·φ((μ0 + c)/s), c = −θv²/2;
    CVU = E_Y[G0] − max(0, μ0 − θ·sd0²/2).  Computed inside ``decide``: by PSIS for a
    weak observation, by the location–scale regression for an informative one."""
    mu0, sd0, theta, n_draws = 0.1, 1.0, 0.5, 4000
    q = stats.norm.ppf((np.arange(n_draws) + 0.5) / n_draws)
    delta = mu0 + sd0 * np.random.default_rng(12345).permutation(q)
    campaign = {"eval_protocol": "E", "resources": ["r"]}
    cs = candidates_from_dict({"campaign": campaign, "candidate": [
        {"id": "act", "role": "adaptation", "lens": "model", "method": "A",
         "cost": {"r": 0.0}},
        {"id": "observe", "role": "diagnosis", "lens": "data", "method": "B",
         "cost": {"r": 0.0}}]})
    gain = xr.DataArray(np.stack([delta, np.zeros_like(delta)], -1), dims=("sample", "candidate"),
                        coords={"candidate": cs.ids})
    state = State(step=0, budget=make_budget({"r": 1.0}, ["r"]), policy="pi0",
                  belief=make_belief(gain, cs, step=0, policy="pi0"))
    exp = Experiment(next_gain=gain.values,
                     simulate=lambda rng, idx: delta[idx] + sigma * rng.standard_normal(len(idx)),
                     loglik=lambda y: stats.norm.logpdf(y[:, None], delta[None, :], sigma))
    settings = DecisionSettings(weights={"r": 1.0}, functional="entropic:0.5", beta=1.0,
                                horizon=4, cvu=CVUSettings(n_outcomes=512, seed=3))
    d = decide(state, cs, settings, experiments={"observe": exp}, seed=0)
    cvu, se = float(d["cvu"].sel(candidate="observe")), float(d["cvu_se"].sel(candidate="observe"))
    assert np.isfinite(cvu) and np.isfinite(se) and se > 0
    v2 = 1 / (1 / sd0**2 + 1 / sigma**2)
    s = np.sqrt(sd0**4 / (sd0**2 + sigma**2))
    m = mu0 - theta * v2 / 2
    exact = (m * stats.norm.cdf(m / s) + s * stats.norm.pdf(m / s)
             - max(0.0, closed_form(mu0, sd0, theta)))
    assert exact > 10 * se  # the test can tell a CVU of 0 from the right one
    assert abs(cvu - exact) < 4 * se + 0.002  # + the error of the 4000 stratified draws
    assert d["cvu_method"].sel(candidate="observe").item() == method
    assert d.attrs["functional"] == "entropic:0.5"
    assert float(d["u0"].sel(candidate="act")) == pytest.approx(
        float(Entropic(theta)(delta)), rel=1e-12)
