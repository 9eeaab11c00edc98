"""The sparse option of the order-effect prior (issue 16): e ~ Laplace(0, σ_e/√2) — its change
of variables, its validation, its exact prior draws and its generative prior."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.errors import InputError
from models.gains import GainsModel, GainsPriors
from models.priors import priors_from_dict

LAPLACE = GainsPriors(gamma_prior="laplace", gamma_sd=0.3)


def _laplace_cdf(x: np.ndarray) -> np.ndarray:
    return stats.laplace.cdf(x, scale=LAPLACE.gamma_sd / np.sqrt(2.0))


def test_laplace_quantile_of_normal_is_the_laplace_quantile_of_phi():
    """T(z) = F₁⁻¹(Φ(z)) for the Laplace of s.d. 1, finite far in the tails, and its
    derivative is φ(z)/p₁(T(z)) (checked against PyTensor's gradient)."""
    import pytensor
    import pytensor.tensor as pt

    from models.priors import laplace_quantile_of_normal

    z = pt.dvector("z")
    t = laplace_quantile_of_normal(z)
    fn = pytensor.function([z], [t, pytensor.grad(t.sum(), z)])
    zs = np.array([-6.0, -2.0, -0.3, 0.4, 1.5, 5.0])
    got, grad = fn(zs)
    b1 = 1 / np.sqrt(2.0)
    np.testing.assert_allclose(got, stats.laplace.ppf(stats.norm.cdf(zs), scale=b1),
                               rtol=1e-9)
    np.testing.assert_allclose(grad, stats.norm.pdf(zs) / stats.laplace.pdf(got, scale=b1),
                               rtol=1e-9)
    far, _ = fn(np.array([-40.0, 40.0]))
    assert np.isfinite(far).all() and far[0] < -500 < 500 < far[1]


def test_laplace_potential_is_its_density_plus_the_jacobian():
    """logp(z) = log Laplace(x | μ, sd/√2) + log f + log T'(z + c), x = μ + f T(z + c),
    c = T⁻¹((m − μ)/f), m = (sd² P x̂ + μ)/(sd² P + 1), f = sd/√(sd² P + 1); z = 0 gives
    x = m; without data (P = 0) the potential is log φ(z)."""
    import pymc as pm

    from models.priors import whitened_laplace

    sd, mu = 0.3, np.array([0.0, -0.1, 0.2])
    prec, xhat = np.array([0.0, 9.0, 40.0]), np.array([0.0, 0.4, -0.3])
    with pm.Model() as model:
        pm.Deterministic("x", whitened_laplace("g", mu, sd, prec, prec * xhat, shape=3))
    logp = model.compile_logp(jacobian=False)
    get_x = model.compile_fn(model["x"], inputs=[model["z_g"]], on_unused_input="ignore")
    denom = sd**2 * prec + 1.0
    f = sd / np.sqrt(denom)
    m = (sd**2 * prec * xhat + mu) / denom
    b1 = 1 / np.sqrt(2.0)
    c = stats.norm.ppf(stats.laplace.cdf((m - mu) / f, scale=b1))
    np.testing.assert_allclose(get_x({"z_g": np.zeros(3)}), m, rtol=1e-9)
    for z in (np.array([0.2, -1.0, 0.7]), np.array([-2.5, 1.7, -0.1])):
        t = stats.laplace.ppf(stats.norm.cdf(z + c), scale=b1)
        xs = get_x({"z_g": z})
        np.testing.assert_allclose(xs, mu + f * t, rtol=1e-9)
        log_dt = stats.norm.logpdf(z + c) - stats.laplace.logpdf(t, scale=b1)
        want = np.sum(stats.laplace.logpdf(xs, mu, sd / np.sqrt(2.0)) + np.log(f) + log_dt)
        np.testing.assert_allclose(logp({"z_g": z}), want, rtol=1e-9)
        # the element without data: exactly the standard normal in z
        np.testing.assert_allclose(
            stats.laplace.logpdf(xs[0], mu[0], sd / np.sqrt(2.0)) + np.log(f[0]) + log_dt[0],
            stats.norm.logpdf(z[0]), rtol=1e-9)


def test_normal_quantile_of_laplace_inverts_the_laplace_quantile_of_normal():
    import pytensor
    import pytensor.tensor as pt

    from models.priors import laplace_quantile_of_normal, normal_quantile_of_laplace

    z = pt.dvector("z")
    fn = pytensor.function([z], normal_quantile_of_laplace(laplace_quantile_of_normal(z)))
    zs = np.array([-7.0, -1.2, -1e-6, 0.0, 0.3, 4.0, 8.0])
    np.testing.assert_allclose(fn(zs), zs, rtol=1e-7, atol=1e-12)


def test_bad_gamma_prior_is_refused_naming_the_table_and_the_allowed_values():
    with pytest.raises(InputError) as err:
        priors_from_dict(GainsPriors, {"gamma_prior": "horseshoe"},
                         "candidates.toml [priors.gains]")
    assert "candidates.toml [priors.gains]" in str(err.value)
    assert "gamma_prior must be one of ['normal', 'laplace']" in str(err.value)


def test_laplace_prior_reads_from_the_candidate_file_and_round_trips():
    pr = priors_from_dict(GainsPriors, {"gamma_prior": "laplace", "gamma_sd": 0.3},
                          "candidates.toml [priors.gains]")
    assert pr == LAPLACE and GainsPriors(**pr.as_dict()) == pr
    assert GainsPriors().gamma_prior == "normal"


def test_uninformed_gamma_are_exact_laplace_draws(world_candidates):
    """An ungrouped uninformed pair is drawn from Laplace(0, σ_e/√2): a Kolmogorov–Smirnov test
    against its CDF at a fixed seed (8,000 draws; the normal of the same s.d. is rejected by the
    same test), independently across pairs."""
    model = GainsModel(world_candidates, LAPLACE, max_policies=6)
    n, groups = len(model.pairs), len(model.gamma_groups)
    chains, draws = 4, 2000
    rng = np.random.default_rng(0)
    post = xr.Dataset(
        {"gamma": (("chain", "draw", "pair"), rng.standard_normal((chains, draws, n))),
         "z_gamma_group": (("chain", "draw", "g"), rng.standard_normal((chains, draws,
                                                                          groups)))},
        coords={"pair": [f"{a}→{m}" for a, m in model.pairs]})
    out = model._gamma_from_prior(xr.DataTree.from_dict({"posterior": post}),
                                  np.zeros(n, dtype=bool), np.random.default_rng(1))
    lone = np.flatnonzero((model.pair_group < 0) & ~model.pair_stated)
    assert len(lone) >= 2
    x = out["posterior"]["gamma"].values[..., lone[0]].ravel()
    assert stats.kstest(x, _laplace_cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.norm(0.0, LAPLACE.gamma_sd).cdf).pvalue < 1e-6
    y = out["posterior"]["gamma"].values[..., lone[1]].ravel()
    assert abs(np.corrcoef(np.abs(x), np.abs(y))[0, 1]) < 4 / np.sqrt(x.size)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_generative_prior_of_gamma_is_the_laplace(world_candidates):
    """The generator of SBC draws e from the Laplace: γ of an ungrouped pair (KS at a fixed
    seed over 400 draws × the ungrouped pairs; the normal of the same s.d. is rejected)."""
    import pymc as pm

    model = GainsModel(world_candidates, LAPLACE, max_policies=4)
    gen = model.build_generative()
    with gen:
        prior = pm.sample_prior_predictive(draws=400, random_seed=3, var_names=["gamma"])
    g = prior["prior"]["gamma"].values[0]
    lone = np.flatnonzero((model.pair_group < 0) & ~model.pair_stated)
    x = g[:, lone].ravel()
    assert stats.kstest(x, _laplace_cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.norm(0.0, LAPLACE.gamma_sd).cdf).pvalue < 1e-6


def test_stated_pairs_stay_normal_beside_laplace_pairs():
    """With ``gamma_prior = "laplace"`` a stated pair keeps its stated Normal(mean, sd) (the normal
    whitening) and the actor's other pairs are Laplace: without data (P = 0) their
    potentials are the standard normal's in z, γ_stated = mean + sd z and
    γ_laplace = μ + σ_e T(z); the exact draws of the stated pair are Normal(mean, sd)."""
    from belief.inputs.candidate_file import parse_candidate_text
    from tests.test_order_effects import TOML

    text = TOML + '[[interaction]]\nfrom = "upd"\nto = "d2"\nmean = -0.1\nsd = 0.05\n'
    cands = parse_candidate_text(text, "c.toml").candidates
    model = GainsModel(cands, LAPLACE)
    assert "upd" in model.actors
    stated = model.pairs.index(("upd", "d2"))
    lap = model.pairs.index(("upd", "d1"))
    assert model.pair_stated[stated] and not model.pair_stated[lap]
    pm_model = model.build()
    free = {v.name for v in pm_model.value_vars}
    assert {"z_gamma_pairs", "z_gamma_pairs_lap"} <= free
    normal = np.flatnonzero(model.pair_stated)  # the normal pairs, in pair order
    laplace = np.flatnonzero(~model.pair_stated)
    rng = np.random.default_rng(4)
    point = {v.name: rng.normal(size=pm_model.initial_point()[v.name].shape)
             for v in pm_model.value_vars}
    graphs = pm_model.replace_rvs_by_values([pm_model["gamma"],
                                             pm_model["gamma_pairs_prior"],
                                             pm_model["gamma_pairs_lap_prior"]])
    outs = pm_model.compile_fn(graphs, inputs=pm_model.value_vars,
                               on_unused_input="ignore")(point)
    gamma, pot_n, pot_l = (np.asarray(o) for o in outs)
    z_n, z_l = point["z_gamma_pairs"], point["z_gamma_pairs_lap"]
    np.testing.assert_allclose(pot_n, -0.5 * np.sum(z_n**2), rtol=1e-12)
    np.testing.assert_allclose(pot_l, np.sum(stats.norm.logpdf(z_l)), rtol=1e-12)
    np.testing.assert_allclose(gamma[stated], -0.1 + 0.05 * z_n[normal == stated][0],
                               rtol=1e-12)
    t = stats.laplace.ppf(stats.norm.cdf(z_l[laplace == lap][0]), scale=1 / np.sqrt(2.0))
    grouped = model.pair_group[lap] >= 0
    g = point["z_gamma_group"][model.pair_group[lap]] if grouped else 0.0
    np.testing.assert_allclose(gamma[lap], LAPLACE.gamma_group_sd * g * grouped
                               + LAPLACE.gamma_sd * t, rtol=1e-9)
    # exact draws of the stated pair: Normal(−0.1, 0.05), the Laplace pair's: the Laplace
    n = len(model.pairs)
    post = xr.Dataset({"gamma": (("chain", "draw", "pair"), rng.normal(size=(4, 2000, n)))},
                      coords={"pair": [f"{a}→{m}" for a, m in model.pairs]})
    if model.gamma_groups:
        post["z_gamma_group"] = (("chain", "draw", "g"),
                                 rng.normal(size=(4, 2000, len(model.gamma_groups))))
    out = model._gamma_from_prior(xr.DataTree.from_dict({"posterior": post}),
                                  np.zeros(n, dtype=bool), np.random.default_rng(5))
    x = out["posterior"]["gamma"].values[..., stated].ravel()
    assert stats.kstest(x, stats.norm(-0.1, 0.05).cdf).pvalue > 1e-3
