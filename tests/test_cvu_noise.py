"""The noise bias of G0 under importance weights (belief.decision.cvu.noise): its covariance
against direct formulas, the bias of a maximum of tied noisy values against numerical
integration, and the corrected PSIS estimator against the closed-form EVSI over draw sets."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from belief.decision.cvu import CVUProblem, continuation_value
from belief.decision.cvu.noise import (
    WeightedFunctionals,
    noise_bias,
    noise_covariance,
    noise_draws,
)
from belief.decision.cvu.preposterior import influence
from belief.decision.functionals import Cvar, Lcb, Mean, weighted_columns
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment


def _weights(rng, n_j, n_s):
    w = rng.exponential(size=(n_j, n_s)) ** 3
    return w / w.sum(axis=1, keepdims=True)


def test_mean_covariance_is_the_delta_method_variance():
    rng = np.random.default_rng(1)
    gain = rng.normal(size=(500, 4))
    w = _weights(rng, 7, 500)
    phi = w @ gain
    v = noise_covariance(Mean(), gain, phi, w)
    for j in range(7):
        d = gain - phi[j]
        np.testing.assert_allclose(v[j], (w[j, :, None] * d).T @ (w[j, :, None] * d),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("functional", [Lcb(0.2), Cvar(0.3)])
def test_other_functionals_use_their_influence_function(functional):
    rng = np.random.default_rng(2)
    gain = rng.normal(size=(400, 3))
    w = _weights(rng, 5, 400)
    phi = weighted_columns(functional, gain, w)
    v = noise_covariance(functional, gain, phi, w, chunk=2)  # chunks must not matter
    psi = np.stack([influence(functional, np.broadcast_to(gain[:, c], (5, 400)), phi[:, c],
                              np.broadcast_to(gain[:, c], (5, 400)), w) for c in range(3)], -1)
    np.testing.assert_allclose(v, np.einsum("js,jsc,jsd->jcd", w**2, psi, psi), rtol=1e-9)


@pytest.mark.parametrize("n_c", [1, 10, 12])
def test_quantile_covariance_by_patterns_and_by_products_agree(n_c):
    """The q-quantile's V_j summed per pattern of indicators (≤ 10 columns) or as a product
    of weighted indicators (more): both equal Σ_i w̃² ψ ψᵀ with ψ from influence()."""
    functional = Lcb(0.2)
    rng = np.random.default_rng(9)
    gain = rng.normal(size=(300, n_c))
    gain[:, 0] = np.round(gain[:, 0], 1)  # ties at the quantile
    w = _weights(rng, 6, 300)
    phi = weighted_columns(functional, gain, w)
    v = noise_covariance(functional, gain, phi, w, chunk=4)
    psi = np.stack([influence(functional, np.broadcast_to(gain[:, c], (6, 300)), phi[:, c],
                              np.broadcast_to(gain[:, c], (6, 300)), w) for c in range(n_c)],
                   -1)
    np.testing.assert_allclose(v, np.einsum("js,jsc,jsd->jcd", w**2, psi, psi), rtol=1e-9,
                               atol=1e-300)


@pytest.mark.parametrize("functional", [Mean(), Lcb(0.2),
                                        Cvar(0.3)])
def test_noise_covariance_is_the_spread_of_weighted_functionals_over_draw_sets(functional):
    """The delta-method covariance against the spread of the weighted functional over 1600
    independent draw sets (S = 2000 correlated normal gains, weights of an informative
    likelihood exp(g_0): ESS ≈ 740; the tilted columns stay normal).  The quantile's influence
    uses the density as a finite difference over q ± min(q, 1 − q)/2, which for a normal
    under-states the density, so its variance is expected too large by exactly
    (f(z_q) (z_{q+h} − z_{q−h}) / 2h)² (≈ 1.12 at q = 0.2); the others are expected at 1.
    Tolerance: 4 standard errors of a sample variance from 1600 sets, √(2/1600) relative,
    and of a sample correlation, (1 − r²)/√1600."""
    rng = np.random.default_rng(5)
    n_s, reps = 2000, 1600
    chol = np.array([[1.0, 0.5], [0.0, 0.9]])
    vals, preds = [], []
    for _ in range(reps):
        g = rng.normal(size=(n_s, 2)) @ chol
        w = np.exp(g[:, 0] - g[:, 0].max())
        w = (w / w.sum())[None, :]
        phi = weighted_columns(functional, g, w)
        vals.append(phi[0])
        preds.append(noise_covariance(functional, g, phi, w)[0])
    emp, pred = np.cov(np.array(vals).T), np.mean(preds, axis=0)
    expect = 1.0
    if functional.kind == "lcb":
        q = functional.param
        h = 0.5 * min(q, 1 - q)
        expect = (stats.norm.pdf(stats.norm.ppf(q))
                  * (stats.norm.ppf(q + h) - stats.norm.ppf(q - h)) / (2 * h)) ** 2
    ratio = np.diag(pred) / np.diag(emp)
    assert np.all(np.abs(ratio / expect - 1) < 4 * np.sqrt(2 / reps)), (ratio, expect)
    r_emp = emp[0, 1] / np.sqrt(emp[0, 0] * emp[1, 1])
    r_pred = pred[0, 1] / np.sqrt(pred[0, 0] * pred[1, 1])
    assert abs(r_emp - r_pred) < 4 * (1 - r_emp**2) / np.sqrt(reps), (r_emp, r_pred)


@pytest.mark.parametrize("k, sigma", [(1, 0.05), (5, 0.05), (3, 0.2)])
def test_bias_of_tied_noisy_maxima_matches_integration(k, sigma):
    """k columns tied at 0 with independent noise of sd σ (equal weights; a reference without
    noise): b = E[max(0, max_c σ Z_c)] = ∫_0^∞ 1 − Φ(t/σ)^k dt.  Tolerance: 4 standard errors
    of the mean over the antithetic pairs (each pair's mean has sd ≤ sd(max))."""
    n_s = 10_000
    rng = np.random.default_rng(3)
    gain = rng.standard_normal((n_s, k))
    gain = (gain - gain.mean(0)) / gain.std(0) * sigma * np.sqrt(n_s)  # V = σ² I
    w = np.full((1, n_s), 1.0 / n_s)
    draws = 4096
    b = noise_bias(Mean(), gain, WeightedFunctionals(np.zeros((1, k)), w), np.zeros(k),
                   np.ones(k, bool), noise_draws(4, k, draws), reference=np.zeros((10, k))).b
    exact = integrate.quad(lambda t: 1 - stats.norm.cdf(t / sigma) ** k, 0, 20 * sigma)[0]
    z = np.random.default_rng(5).standard_normal((100_000, k))
    sd = np.maximum(sigma * z.max(axis=1), 0).std()
    assert abs(b[0] - exact) < 4 * sd / np.sqrt(draws / 2), (b[0], exact)


def test_bias_is_the_excess_over_equal_weights():
    """No feasible column: 0; a clear winner: 0; equal weights (the noise every other G0 of a
    decision carries): 0 up to rounding; concentrated weights: > 0."""
    rng = np.random.default_rng(6)
    gain = rng.normal(size=(2000, 3)) * 0.1
    w = _weights(rng, 4, 2000)
    phi = w @ gain
    fn = Mean()
    z = noise_draws(7, 3)
    none = noise_bias(fn, gain, WeightedFunctionals(phi, w), np.zeros(3), np.zeros(3, bool),
                      z).b
    assert np.array_equal(none, np.zeros(4))
    far = phi + np.array([5.0, 0.0, 0.0])  # column 0 wins by ~100 noise sd's
    assert np.abs(noise_bias(fn, gain, WeightedFunctionals(far, w), np.zeros(3),
                             np.ones(3, bool), z).b).max() < 1e-12
    flat = np.full((4, 2000), 1 / 2000)
    assert np.abs(noise_bias(fn, gain, WeightedFunctionals(flat @ gain, flat), np.zeros(3),
                             np.ones(3, bool), z).b).max() < 1e-12
    tied = np.zeros((4, 3))
    assert (noise_bias(fn, gain, WeightedFunctionals(tied, w), np.zeros(3), np.ones(3, bool),
                       z).b > 0).all()


def _normal_draws(mu0, sd0, n, seed):
    q = stats.norm.ppf((np.arange(n) + 0.5) / n)
    return mu0 + sd0 * np.random.default_rng(seed).permutation(q)


def _observe_with_competitors(draw_set, n, competitors, informative=True, iid=False,
                              **settings):
    """CVU of a normal study of Δ ~ N(0, 1) (n observations, σ = 1) beside "act on Δ" and
    ``competitors`` candidates the study does not inform (their gains N(0, 1), prior mean
    exactly 0): E_Y[G0] = E[max(0, μ'(Y))] = the EVSI closed form."""
    s = 4000
    se = 1 / np.sqrt(n)
    if iid:
        rng = np.random.default_rng(7000 + draw_set)
        delta, others = rng.normal(size=s), rng.normal(size=(s, competitors))
    else:
        delta = _normal_draws(0.0, 1.0, s, 1000 + draw_set)
        others = np.stack([_normal_draws(0.0, 1.0, s, 2000 + 100 * draw_set + k)
                           for k in range(competitors)], -1)
    gain = np.column_stack([delta, others, np.zeros(s)])
    ids = ["act", *[f"o{k}" for k in range(competitors)], "observe"]
    exp = Experiment(next_gain=gain,
                     simulate=lambda rng, idx: delta[idx] + se * rng.standard_normal(len(idx)),
                     loglik=(lambda y: stats.norm.logpdf(y[:, None], delta[None, :], se))
                     if informative else (lambda y: np.zeros((len(y), s))))
    out = continuation_value(CVUProblem(
        gain, {"observe": exp}, ids, np.zeros((len(ids), 1)), np.ones(1),
                             lambda b: np.zeros(1), Mean(),
                             settings=CVUSettings(n_outcomes=256, seed=draw_set, **settings)))
    return out.sel(candidate="observe")


def _own_prior_value(draw_set, n, competitors):
    """The closed form under the iid draws' own prior (means δ̄ and ō_k, sd of δ): the
    posterior mean of Δ is N(δ̄, s²) over outcomes, s² = sd⁴/(sd² + 1/n), the others keep
    their means: E[max(a, μ')] − max(0, δ̄, a), a = max(0, max_k ō_k)."""
    rng = np.random.default_rng(7000 + draw_set)
    delta, others = rng.normal(size=4000), rng.normal(size=(4000, competitors))
    m, sd = delta.mean(), delta.std()
    s = np.sqrt(sd**4 / (sd**2 + 1 / n))
    a = max(0.0, others.mean(axis=0).max())
    d = (m - a) / s
    return a + s * (stats.norm.pdf(d) + d * stats.norm.cdf(d)) - max(0.0, m, a)


def _se(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / np.sqrt(x.size))


def _assert_biased_and_corrected(plug: np.ndarray, corr: np.ndarray) -> None:
    """Errors against the truth over independent draw sets: the plug-in is biased upward by
    more than 4 s.e., the correction lowers it by more than 4 s.e. of the paired difference,
    and the corrected value is not below the truth by more than 3 s.e."""
    assert plug.mean() > 4 * _se(plug), plug
    assert (plug - corr).mean() > 4 * _se(plug - corr), (plug, corr)
    assert corr.mean() > -3 * _se(corr), corr


@pytest.mark.parametrize("iid, sets", [(False, 8), (True, 16)])
def test_correction_removes_part_of_the_bias_and_never_overshoots(iid, sets):
    """Over 8 draw sets (stratified: the draws' own prior has exactly the prior's means, so
    the closed form is the truth for every set; the bias is a property of the finite draws,
    so the mean error over draw sets is what is tested, its standard error from their
    spread): the plug-in PSIS estimate is biased upward by more than 4 s.e.; the corrected
    one is lower by more than 4 s.e. of the paired difference, and not below the truth by
    more than 3 s.e.  Independent draws (16 sets): the same against the closed form under
    each set's own prior."""
    n = 30
    s = np.sqrt(1 / (1 + 1 / n))
    plug, corr = [], []
    for r in range(sets):
        exact = _own_prior_value(r, n, 5) if iid else s / np.sqrt(2 * np.pi)  # EVSI at 0
        a = _observe_with_competitors(r, n, 5, iid=iid, noise_correction=False)
        b = _observe_with_competitors(r, n, 5, iid=iid)
        assert a["cvu_method"].item() == b["cvu_method"].item() == "psis+cv"
        assert np.isnan(float(a["cvu_noise_bias"])) and float(b["cvu_noise_bias"]) > 0
        plug.append(float(a["cvu"]) - exact)
        corr.append(float(b["cvu"]) - exact)
    _assert_biased_and_corrected(np.array(plug), np.array(corr))


def test_a_study_that_teaches_nothing_is_worth_nothing():
    """Equal weights for every outcome: the corrected CVU is 0 like the plug-in (the
    correction is an excess over the equal-weight noise that G0(s^∅) carries too)."""
    for correction in (True, False):
        res = _observe_with_competitors(0, 30, 5, informative=False,
                                        noise_correction=correction)
        assert res["cvu_method"].item().startswith("psis"), res["cvu_method"].item()
        assert abs(float(res["cvu"])) < 1e-12, float(res["cvu"])


def test_without_control_variates_the_shift_is_the_reported_bias():
    a = _observe_with_competitors(0, 30, 3, noise_correction=False, control_variates=False)
    b = _observe_with_competitors(0, 30, 3, control_variates=False)
    np.testing.assert_allclose(float(a["cvu"]) - float(b["cvu"]), float(b["cvu_noise_bias"]),
                               rtol=1e-9)


def test_quantiles_of_several_levels_equal_one_level_at_a_time():
    from belief.decision.functionals import lcbs, weighted_column_quantiles

    rng = np.random.default_rng(9)
    gain = rng.normal(size=(300, 3))
    w = _weights(rng, 4, 300)
    both = weighted_column_quantiles(gain, w, (0.1, 0.35))
    for q, got in zip((0.1, 0.35), both, strict=True):
        direct = np.stack([lcbs(gain[:, c][None].repeat(4, 0), (q,), w)[0]
                           for c in range(3)], -1)
        np.testing.assert_array_equal(got, direct)


def test_look_ahead_decisions_stay_plug_in():
    """A two-step look-ahead is not corrected, nor is V(s^∅) built from the one-step
    estimates: the same CVU with the correction on or off (it was raised by the one-step
    correction entering V(s^∅) only)."""
    on = _observe_with_competitors(0, 30, 3, continuation="lookahead2", inner_outcomes=8)
    off = _observe_with_competitors(0, 30, 3, continuation="lookahead2", inner_outcomes=8,
                                    noise_correction=False)
    assert on["cvu_method"].item().endswith("+lookahead2"), on["cvu_method"].item()
    assert float(on["cvu"]) == float(off["cvu"])


def test_fitted_covariance_is_the_spread_of_fitted_values_over_repeated_fits():
    """The cluster-robust covariance of least-squares fitted values (draws as clusters of R
    replicates that share their gains) against the covariance of the fitted values over 800
    independent repetitions of the whole simulation.  Tolerance: 4 standard errors of a
    sample variance from 800 repetitions (√(2/800) relative) plus 3 % for the sandwich's
    own small-sample bias (p/S = 1 %)."""
    from belief.decision.cvu.noise import fitted_covariance

    rng = np.random.default_rng(11)
    n_s, reps, n_rep = 200, 4, 800
    x0 = np.array([1.0, 0.8])
    fitted, predicted = [], []
    for _ in range(n_rep):
        g = rng.normal(size=(n_s, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
        t = np.tile(g[:, 0], reps) + rng.normal(size=reps * n_s)  # replicate-major
        x = np.column_stack([np.ones_like(t), t])
        y = np.tile(g, (reps, 1))
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        fitted.append(x0 @ coef)
        big = fitted_covariance(x, y - x @ coef, reps)
        predicted.append(np.einsum("p,pcqd,q->cd", x0, big, x0))
    emp = np.cov(np.array(fitted).T)
    pred = np.mean(predicted, axis=0)
    tol = 4 * np.sqrt(2 / n_rep) + 0.03
    np.testing.assert_allclose(np.diag(pred), np.diag(emp), rtol=tol)
    corr_emp = emp[0, 1] / np.sqrt(emp[0, 0] * emp[1, 1])
    corr_pred = pred[0, 1] / np.sqrt(pred[0, 0] * pred[1, 1])
    assert abs(corr_emp - corr_pred) < 4 * (1 - corr_emp**2) / np.sqrt(n_rep), (corr_emp,
                                                                               corr_pred)


def test_fitted_covariance_of_a_spline_design_depends_only_on_its_column_space():
    """Fitted values, and so their covariance, depend only on the design's column space.  A
    two-component summary with 6 knots (36 columns whose raw scales differ by orders of
    magnitude, condition number ~10⁷): the least-squares fit and the cluster-robust V_n at
    50 rows equal those of an orthonormal basis of the same space to 1e-6 (a cut-off on the
    raw XᵀX drops directions the fit keeps and under-states V_n by ~20 %)."""
    from belief.decision.cvu.noise import fitted_covariance
    from belief.decision.cvu.regression import least_squares, spline_design

    rng = np.random.default_rng(3)
    n_s, reps = 500, 4
    g = np.tile(rng.normal(size=(n_s, 3)), (reps, 1))  # replicate-major
    t = np.column_stack([g[:, 0] + 0.5 * rng.normal(size=g.shape[0]),
                         g[:, 1] + rng.normal(size=g.shape[0])])
    x = spline_design(t, 6)
    assert x.shape[1] == 36 and np.linalg.cond(x) > 1e6
    coef, rank = least_squares(x, g)
    assert rank == 36
    u, _, _ = np.linalg.svd(x / np.sqrt((x**2).mean(axis=0)), full_matrices=False)
    q = u * np.sqrt(x.shape[0])
    np.testing.assert_allclose(x @ coef, q @ (q.T @ g) / x.shape[0], atol=1e-6)
    resid = g - x @ coef
    rows = rng.choice(x.shape[0], 50, replace=False)
    v_x = np.einsum("np,pcqd,nq->ncd", x[rows], fitted_covariance(x, resid, reps), x[rows])
    v_q = np.einsum("np,pcqd,nq->ncd", q[rows], fitted_covariance(q, resid, reps), q[rows])
    np.testing.assert_allclose(v_x, v_q, rtol=1e-6, atol=1e-12 * np.abs(v_q).max())


def test_the_subsampled_regression_noise_bias_and_its_error_are_calibrated():
    """The regression noise bias on 40 problems (2-D summary, 4 knots, N = 2400 outcomes),
    estimated on a subsample (cap = 64: 256 screened, 64 bootstrapped) against all N: the
    subsample's errors average to 0 within 3 s.e., and their root mean square matches the
    reported ``se_rows``: Σd²/Σse² within the 99.9 % interval of χ²₄₀/40 (the errors of
    skewed b_n are not normal, so only the scale is tested, not each z)."""
    from scipy import stats

    from belief.decision.cvu.noise import LocationFit, fitted_noise_bias
    from belief.decision.cvu.regression import least_squares, spline_design

    d, se = [], []
    for r in range(40):
        rng = np.random.default_rng(500 + r)
        n_s, reps, n_c = 300, 8, 4
        gain = rng.normal(size=(n_s, n_c)) * 0.1 + np.linspace(0, 0.01, n_c)
        g = np.tile(gain, (reps, 1))  # replicate-major
        x = spline_design(g[:, :2] + 0.1 * rng.normal(size=(g.shape[0], 2)), 4)
        fitted = x @ least_squares(x, g)[0]
        z = noise_draws(r, n_c)
        args = (LocationFit(x, g - fitted, reps), gain, fitted, np.ones(n_c, bool), z)
        full = fitted_noise_bias(*args, cap=10**6)
        sub = fitted_noise_bias(*args, cap=64)
        assert full.se_rows == 0 and sub.se_rows > 0 and full.b > 0
        d.append(sub.b - full.b)
        se.append(sub.se_rows)
    d, se = np.array(d), np.array(se)
    assert abs(d.mean()) < 3 * d.std(ddof=1) / np.sqrt(d.size), d
    ratio = (d**2).sum() / (se**2).sum()
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], d.size) / d.size
    assert lo < ratio < hi, (ratio, lo, hi)


def test_regression_correction_removes_part_of_the_bias_and_never_overshoots():
    """The regression estimator (forced) on 16 independent draw sets, n = 30: its fitted
    values' noise biases the plug-in upward by more than 4 s.e.; the corrected estimate is
    lower by more than 4 s.e. of the paired difference, and not below the truth by more than
    3 s.e. (the closed form under each set's own prior)."""
    plug, corr = [], []
    for r in range(16):
        exact = _own_prior_value(r, 30, 5)
        a = _observe_with_competitors(r, 30, 5, iid=True, noise_correction=False,
                                      estimator="regression")
        b = _observe_with_competitors(r, 30, 5, iid=True, estimator="regression")
        assert a["cvu_method"].item() == b["cvu_method"].item() == "regression"
        plug.append(float(a["cvu"]) - exact)
        corr.append(float(b["cvu"]) - exact)
        assert float(b["cvu_noise_bias"]) > 0
        np.testing.assert_allclose(float(a["cvu"]) - float(b["cvu"]),
                                   float(b["cvu_noise_bias"]), rtol=1e-9)
    _assert_biased_and_corrected(np.array(plug), np.array(corr))


def _unrelated(r: int, **flags) -> tuple[float, float, float]:
    """CVU, its MCSE and the noise bias of observing an outcome independent of every gain
    (6 near-tied candidates, 4000 draws; regression, as the study has no likelihood)."""
    s = 4000
    rng = np.random.default_rng(7000 + r)
    gain = np.column_stack([rng.normal(size=(s, 6)), np.zeros(s)])
    ids = ["act", *[f"o{k}" for k in range(5)], "observe"]
    exp = Experiment(next_gain=gain, loglik=None,
                     simulate=lambda rng, idx: rng.standard_normal(len(idx)))
    out = continuation_value(CVUProblem(gain, {"observe": exp}, ids, np.zeros((7, 1)), np.ones(1),
                             lambda b: np.zeros(1), Mean(),
                             settings=CVUSettings(n_outcomes=256, seed=r, **flags)))
    res = out.sel(candidate="observe")
    assert res["cvu_method"].item() == "regression"
    return float(res["cvu"]), float(res["cvu_mcse"]), float(res["cvu_noise_bias"])


def test_regression_on_an_outcome_unrelated_to_the_gains_is_worth_nothing_on_average():
    """An outcome independent of every gain: the regression's fitted values are pure fitting
    noise, which the plug-in reads as information (CVU > 0 on average); the corrected mean
    over 16 draw sets is within 3 s.e. of 0, and the correction is more than 4 s.e. of the
    paired difference."""
    plug = np.array([_unrelated(r, noise_correction=False)[0] for r in range(16)])
    corr = np.array([_unrelated(r)[0] for r in range(16)])
    assert abs(corr.mean()) < 3 * _se(corr), corr
    assert (plug - corr).mean() > 4 * _se(plug - corr), (plug, corr)


def test_the_regression_correction_has_its_own_switch_and_error():
    """``regression_noise_correction=False`` (or ``noise_correction=False``) leaves the
    regression estimate at its plug-in value, bit for bit; with both on it is lower by the
    reported ``cvu_noise_bias`` and its MCSE is the plug-in's and the correction's in
    quadrature, so strictly larger."""
    on = _unrelated(0)
    off = _unrelated(0, regression_noise_correction=False)
    none = _unrelated(0, noise_correction=False)
    assert off[:2] == none[:2]
    assert on[2] > 0 and on[0] == pytest.approx(off[0] - on[2], rel=1e-9)
    assert on[1] > off[1]


@pytest.mark.parametrize("functional", [Lcb(0.2), Cvar(0.3),
                                        Mean()])
def test_influence_of_several_columns_is_each_columns_influence(functional):
    """influence() on (J, S, C) with (J, C) values and quantiles: column c is exactly the
    one-column call (noise_covariance computes every column at once)."""
    from belief.decision.functionals import weighted_column_quantiles

    rng = np.random.default_rng(5)
    gain = rng.normal(size=(300, 4))
    w = rng.dirichlet(np.ones(300), size=6)
    phi = rng.normal(size=(6, 4))

    def quantiles(levels):
        return weighted_column_quantiles(gain, w, levels)

    every = influence(functional, gain[None, :, :], phi, None, None, quantiles)
    assert every.shape == (6, 300, 4)
    for c in range(4):
        x = np.broadcast_to(gain[:, c], (6, 300))
        one = influence(functional, x, phi[:, c], x, w,
                        lambda levels, c=c: [v[:, c] for v in quantiles(levels)])
        np.testing.assert_array_equal(every[:, :, c], one)
