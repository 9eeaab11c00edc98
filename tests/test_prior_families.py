"""Scale-prior families (HalfNormal, HalfStudentT, HalfCauchy, Exponential): their densities,
a posterior with a known answer for each, the ``[priors]`` section of candidate files, and the
errors for anything else."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize

from belief.errors import InputError
from belief.inputs.candidate_file import parse_candidate_text
from belief.workflow.fit import model_priors
from models.exec_risk import ExecRiskPriors
from models.gains import GainsPriors
from models.priors import SCALE_FAMILIES, ScalePrior, scale_prior

FAMILIES = {"half_normal": ScalePrior("half_normal", sigma=0.3),
            "half_student_t": ScalePrior("half_student_t", nu=3.0, sigma=1.0),
            "half_cauchy": ScalePrior("half_cauchy", beta=0.1),
            "exponential": ScalePrior("exponential", lam=0.5)}

# y_i ~ Normal(0, τ²), i = 1..3: weak data, so the prior shapes the posterior of τ
Y = np.array([0.31, -0.52, 0.12])


def test_every_family_is_covered():
    assert set(FAMILIES) == set(SCALE_FAMILIES)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_logpdf_matches_pymc(family):
    """ScalePrior.rv is the distribution ScalePrior.logpdf describes (PyMC's parameter names:
    Exponential's lam is a rate)."""
    import pymc as pm

    prior = FAMILIES[family]
    with pm.Model():
        tau = prior.rv("tau")
    grid = np.array([0.01, 0.1, 0.3, 0.7, 1.5, 4.0])
    got = np.array([pm.logp(tau, x).eval() for x in grid])
    # PyMC and scipy evaluate the special functions to ~1e-7 relative
    np.testing.assert_allclose(got, prior.logpdf(grid), rtol=1e-6, atol=1e-9)
    assert prior.median() == pytest.approx(
        optimize.brentq(lambda t: integrate.quad(lambda u: np.exp(prior.logpdf(u)), 0, t)[0]
                         - 0.5, 1e-9, 50.0), rel=1e-6)


def _quadrature(prior: ScalePrior) -> tuple[float, float]:
    """Posterior mean of τ and P(τ ≤ 0.3 | y) by quadrature:
    p(τ | y) ∝ p(τ) τ^{−n} exp(−Σy²/(2τ²))."""
    s, n = float((Y**2).sum()), len(Y)

    def logpost(t):
        return prior.logpdf(t) - n * np.log(t) - s / (2 * t**2)

    peak = max(logpost(t) for t in np.linspace(0.05, 3.0, 600))

    def dens(t):
        return np.exp(logpost(t) - peak) if t > 0 else 0.0

    z = integrate.quad(dens, 0, np.inf, limit=200)[0]
    mean = integrate.quad(lambda t: t * dens(t), 0, np.inf, limit=200)[0] / z
    below = integrate.quad(dens, 0, 0.3, limit=200)[0] / z
    return mean, below


def test_families_give_different_posteriors():
    """The case discriminates: the four quadrature posterior means differ by more than the
    sampling tolerance used below (≈ 0.02)."""
    means = sorted(_quadrature(p)[0] for p in FAMILIES.values())
    assert min(np.diff(means)) > 0.02


@pytest.mark.parametrize("family", list(FAMILIES))
def test_posterior_matches_quadrature(family):
    """NUTS on τ ~ family, y ~ Normal(0, τ) against the exact posterior.

    Tolerance: 4 Monte Carlo standard errors (ArviZ's MCSE of the mean; for P(τ ≤ 0.3) the
    binomial s.e. √(p(1 − p)/ESS_bulk) of the indicator), so a correct sampler fails with
    probability < 1e-4 per check.
    """
    import arviz_stats as az
    import pymc as pm

    prior = FAMILIES[family]
    with pm.Model() as model:
        tau = prior.rv("tau")
        pm.Normal("y", 0.0, tau, observed=Y)
        idata = pm.sample(draws=1000, tune=500, chains=4, random_seed=7, progressbar=False,
                          nuts_sampler="nutpie", target_accept=0.9)
    post = idata["posterior"]["tau"]
    exact_mean, exact_below = _quadrature(prior)
    mcse = float(az.mcse(idata, var_names=["tau"], method="mean")["tau"])
    assert abs(float(post.mean()) - exact_mean) < 4 * mcse, (family, float(post.mean()),
                                                              exact_mean, mcse)
    ess = float(az.ess(idata, var_names=["tau"], method="bulk")["tau"])
    below = float((post <= 0.3).mean())
    assert abs(below - exact_below) < 4 * np.sqrt(exact_below * (1 - exact_below) / ess)
    _ = model


# -- the [priors] section and the Python API -----------------------------------------------------
TOML = """
[campaign]
eval_protocol = "E"

[[candidate]]
id = "a"
role = "adaptation"
lens = "data"
method = "DR"
cost = {}
"""


def _file(priors: str):
    return parse_candidate_text(TOML + "\n" + priors, "c.toml")


def test_priors_section_reaches_every_model():
    cfile = _file("""
[priors.gains]
tau_lens = { family = "half_cauchy", beta = 0.25 }
tau_method = { family = "exponential", lam = 4.0 }
tau_candidate = { family = "half_student_t", nu = 5, sigma = 0.3 }
tau_exec = { family = "half_normal", sigma = 0.1 }
effect_mu_sigma = 0.3
gamma_prior = "laplace"

[priors.exec_risk]
sigma_group = { family = "half_student_t", nu = 3, sigma = 1.0 }

[priors.transfer]
shift_tau = 0.5

[priors.sensitivity]
S_tau = { family = "exponential", lam = 1.0 }
""")
    pri = model_priors(cfile)
    g = pri["gains"]
    assert g.tau_lens == ScalePrior("half_cauchy", beta=0.25)
    assert g.tau_method.describe() == "Exponential(lam=4)"
    assert (g.tau_candidate.nu, g.tau_candidate.sigma) == (5.0, 0.3)
    assert g.tau_exec == ScalePrior("half_normal", sigma=0.1) and g.effect_mu_sigma == 0.3
    assert g.gamma_prior == "laplace" and GainsPriors().gamma_prior == "normal"
    assert pri["exec_risk"].sigma_group.family == "half_student_t"
    assert pri["exec_risk"].sigma_candidate == ExecRiskPriors().sigma_candidate  # default kept
    assert pri["transfer"].shift_tau == ScalePrior("half_normal", sigma=0.5)  # number: default
    assert pri["sensitivity"].S_tau == ScalePrior("exponential", lam=1.0)
    # the Python API wins over the file
    over = model_priors(cfile, {"gains": {"tau_lens": {"family": "half_normal", "sigma": 1.0}}})
    assert over["gains"].tau_lens == ScalePrior("half_normal", sigma=1.0)
    assert model_priors(None, {"gains": GainsPriors(tau_exec=0.3)})["gains"].tau_exec.sigma == 0.3
    # as_dict round-trips (what a belief file stores)
    assert GainsPriors(**g.as_dict()) == g


@pytest.mark.parametrize(("text", "rule"), [
    ('[priors.gains]\ntau_lens = { family = "gamma", sigma = 1 }',
     r"c\.toml \[priors\.gains\]: tau_lens: unknown family 'gamma'; allowed: "
     r'\{family = "half_normal", sigma = …\}; \{family = "half_student_t", nu = …, sigma = …\}; '
     r'\{family = "half_cauchy", beta = …\}; \{family = "exponential", lam = …\}'),
    ('[priors.gains]\ntau_lens = { family = "half_cauchy", sigma = 1 }',
     r"\[priors\.gains\]: tau_lens: family 'half_cauchy' takes \['beta'\], not sigma"),
    ('[priors.gains]\ntau_lens = { family = "half_student_t", sigma = 1 }',
     r"\[priors\.gains\]: tau_lens: family 'half_student_t' needs nu"),
    ('[priors.gains]\ntau_exec = { family = "exponential", lam = -1 }',
     r"\[priors\.gains\]: tau_exec: lam of 'exponential' must be a finite number > 0"),
    ('[priors.gains]\ntau_exec = "wide"', r"\[priors\.gains\]: tau_exec must be finite, got "
                                          r"'wide'; allowed: a number > 0"),
    ('[priors.gains]\ntau_exec = { sigma = 1 }', r"\[priors\.gains\]: tau_exec: no family"),
    ("[priors.gains]\nlens_sigma = 0.5", r"\[priors\.gains\]: unknown prior 'lens_sigma'; "
                                         r"allowed: \['baseline_mu'"),
    ("[priors.gains]\neffect_mu_sigma = -1", r"\[priors\.gains\]: effect_mu_sigma must be > 0"),
    ('[priors.gains]\ngamma_prior = "horseshoe"',
     r"\[priors\.gains\]: gamma_prior must be one of \['normal', 'laplace'\], got 'horseshoe'"),
])
def test_bad_priors_name_the_key_and_the_allowed_values(text, rule):
    with pytest.raises(InputError, match=rule):
        model_priors(_file(text))


def test_bad_priors_sections_are_refused():
    """A table of no registered model is refused naming the file, the closest model and every
    one (the registry's names), when the priors are read (a fit) — the candidate file's loader
    checks only the section's shape (it sits below the models)."""
    with pytest.raises(InputError, match=r"c\.toml \[priors\]: unknown model 'gain' \(did you "
                                         r"mean 'gains'\?\); known: \['gains', 'exec_risk', "
                                         r"'transfer', 'sensitivity', 'costs', "
                                         r"'sim_proxy'\]"):
        model_priors(_file("[priors.gain]\ntau_lens = 0.5"))
    with pytest.raises(InputError, match=r"\[priors\]: must hold tables"):
        parse_candidate_text("priors = 3\n" + TOML, "c.toml")


def test_scale_prior_api_errors():
    with pytest.raises(InputError, match="unknown family"):
        ScalePrior("lognormal", sigma=1.0)
    with pytest.raises(InputError, match="needs sigma"):
        ScalePrior("half_normal")
    assert scale_prior(0.5, "exponential", "t", "x") == ScalePrior("exponential", lam=2.0)
    assert FAMILIES["exponential"].scale == 2.0
    assert FAMILIES["exponential"].scaled(2.0) == ScalePrior("exponential", lam=0.25)


def test_fit_command_refuses_bad_priors_and_writes_nothing(tmp_path, capsys):
    from pathlib import Path

    import belief
    from belief.cli.main import main

    src = tmp_path / "c.toml"
    example = Path(belief.__file__).parent / "data" / "example"
    text = (example / "candidates.toml").read_text(encoding="utf-8")
    src.write_text(text + '\n[priors.gains]\ntau_lens = { family = "cauchy", beta = 1 }\n')
    out = tmp_path / "b.nc"
    code = main(["fit", f"{example}/evidence", "--candidates", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "[priors.gains]: tau_lens: unknown family 'cauchy'; allowed:" in err[0]
    assert not out.exists()
