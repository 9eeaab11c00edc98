"""The sim-proxy model (:mod:`models.sim_proxy`) and the ``sim_paired_evaluations`` table.

Statistical tolerances are Monte Carlo errors: a posterior mean is compared within 4 MCSE
(ArviZ's ``mcse`` of the mean and of the sd, from the effective sample size), two independent
fits within 4 √(MCSE₁² + MCSE₂²).
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.tables import validate_paired, validate_sim_paired
from models.priors import ScalePrior
from models.sim_proxy import SimProxyModel, SimProxyPriors, synthetic_paired

PROTOCOL = "pick_place_v1"
LENSES = ("data", "model", "optimization")


def candidate_set(n_per_lens: int = 4, lenses=LENSES):
    cands = [{"id": f"{lens[:3]}{j}", "role": "adaptation", "lens": lens,
              "method": f"m{j % 2}", "cost": {"real_h": 1.0}}
             for lens in lenses for j in range(n_per_lens)]
    cands.append({"id": "diag", "role": "diagnosis", "lens": "model", "method": "probe",
                  "cost": {"compute": 1.0}})
    return candidates_from_dict({"campaign": {"eval_protocol": PROTOCOL}, "candidate": cands})


# -- (d) the table -----------------------------------------------------------------------------
def sim_table(**override) -> pd.DataFrame:
    df = pd.DataFrame({"step": 0, "candidate": ["dat0", "mod1"], "policy": "pi0",
                       "eval_protocol": PROTOCOL, "control_successes": [40, 41],
                       "control_trials": 100, "treated_successes": [55, 47],
                       "treated_trials": 100})
    for col, (row, value) in override.items():
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
    return df


@pytest.mark.parametrize("override, row, rule", [
    ({"eval_protocol": (1, "pick_place_v2")}, 1,
     "eval_protocol 'pick_place_v2' differs from the campaign's shared protocol "
     "'pick_place_v1'"),
    ({"treated_successes": (0, 101)}, 0, "treated_successes (101) exceed treated_trials (100)"),
    ({"candidate": (1, "nope")}, 1, "unknown candidate 'nope'"),
    ({"candidate": (0, "diag")}, 0, "candidate 'diag' has role 'diagnosis'"),
    ({"control_trials": (1, -3)}, 1, "control_trials must be >= 0"),
    ({"policy": (0, None)}, 0, "policy is missing"),
])
def test_bad_sim_rows_refused_in_one_line(override, row, rule):
    with pytest.raises(InputError) as err:
        validate_sim_paired(sim_table(**override), candidate_set())
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"sim_paired_evaluations, row {row}: "), msg
    assert rule in msg


def test_sim_table_has_the_real_tables_columns_and_rules():
    cs = candidate_set()
    ok = validate_sim_paired(sim_table(), cs)
    assert list(ok.columns) == list(validate_paired(sim_table(), cs).columns)
    with pytest.raises(InputError, match=r"^sim_paired_evaluations: missing required column"):
        validate_sim_paired(sim_table().drop(columns="treated_trials"), cs)
    with pytest.raises(InputError, match=r"^sim_paired_evaluations, row 1: exact duplicate"):
        validate_sim_paired(pd.concat([sim_table().iloc[:1]] * 2, ignore_index=True), cs)


# -- (a) known calibration: the posterior of θ against a numerical reference -----------------
def reference_posterior(y_r, se_r, y_s, se_s, cal, mu0, sd0, tau_sd):
    """Mean and sd of θ for one candidate with summary estimates in both domains.

    With one candidate every pooling level has one member, so θ ~ N(μ0_mu, sd0² + s²) with
    s² = τ_lens² + τ_method² + τ_candidate² = tau_sd² · χ²₃ (three HalfNormal(tau_sd)).  Given
    (a, b, σ), θ^sim integrates out: y_s ~ N(a + b θ, σ² + se_s²), so the likelihood of θ is
    normal with precision L = 1/se_r² + b²/(σ² + se_s²) about ŷ.  Conjugate given s², then a
    1-D integral over the χ²₃ law of s²/tau_sd².
    """
    a, b, sig = cal
    lam = 1 / se_r**2 + b**2 / (sig**2 + se_s**2)
    yhat = (y_r / se_r**2 + b * (y_s - a) / (sig**2 + se_s**2)) / lam

    def parts(u):
        v = sd0**2 + tau_sd**2 * u
        w = stats.chi2.pdf(u, 3) * stats.norm.pdf(yhat, mu0, np.sqrt(v + 1 / lam))
        m = (mu0 / v + yhat * lam) / (1 / v + lam)
        var = 1 / (1 / v + lam)
        return w, m, var

    z = integrate.quad(lambda u: parts(u)[0], 0, np.inf)[0]
    mean = integrate.quad(lambda u: parts(u)[0] * parts(u)[1], 0, np.inf)[0] / z
    second = integrate.quad(lambda u: parts(u)[0] * (parts(u)[2] + parts(u)[1] ** 2),
                            0, np.inf)[0] / z
    return mean, np.sqrt(second - mean**2)


@pytest.mark.slow  # compiles a model variant: minutes on a new machine
def test_known_calibration_posterior_matches_the_numerical_reference():
    cs = candidate_set(1, ("data",))
    tau = ScalePrior("half_normal", sigma=0.3)
    priors = SimProxyPriors(tau_lens=tau, tau_method=tau, tau_candidate=tau)
    cal = (0.1, 0.8, 0.2)
    model = SimProxyModel(cs, priors, max_policies=1, calibration={"data": cal})
    real = pd.DataFrame({"candidate": ["dat0"], "estimate": [0.5], "se": [0.4]})
    sim = pd.DataFrame({"candidate": ["dat0", "dat0"], "estimate": [0.95, 0.85],
                        "se": [0.1 * np.sqrt(2)] * 2})  # combined: 0.9 ± 0.1
    idata = model.fit(real_estimates=real, sim_estimates=sim, draws=1500, seed=3)
    assert int(idata["sample_stats"]["diverging"].sum()) == 0
    theta = idata["posterior"]["theta"].sel(candidate="dat0")
    ref_mean, ref_sd = reference_posterior(0.5, 0.4, 0.9, 0.1, cal, 0.2, 0.4, 0.3)
    mc = az.mcse(idata, var_names=["theta"], method="mean")["theta"].sel(candidate="dat0")
    mc_sd = az.mcse(idata, var_names=["theta"], method="sd")["theta"].sel(candidate="dat0")
    assert abs(float(theta.mean()) - ref_mean) < 4 * float(mc), (float(theta.mean()), ref_mean)
    assert abs(float(theta.std()) - ref_sd) < 4 * float(mc_sd), (float(theta.std()), ref_sd)
    # the sim estimate moved θ: the real-only reference is far outside the error
    real_only, _ = reference_posterior(0.5, 0.4, 0.0, 1e6, (0.0, 0.0, 1.0), 0.2, 0.4, 0.3)
    assert abs(real_only - ref_mean) > 20 * float(mc)


# -- (b), (c) learned calibration ---------------------------------------------------------------
FEW = ("dat3", "mod3", "opt3")
"""Candidates with few real trials in the worlds below (the others calibrate the simulator)."""


def world(seed: int, slope: float | None, resid: float, real_trials: int, sim_trials: int,
          few_trials: int | None = None):
    """Real gains of 12 candidates, their sim gains 0.1 + slope·θ + resid·ε (with slope None:
    drawn independently of θ, a useless simulator), one real and one sim paired table.  With
    ``few_trials`` the candidates of :data:`FEW` have that many real trials per arm."""
    rng = np.random.default_rng(seed)
    cs = candidate_set()
    ids = [c.id for c in cs if c.changes_policy]
    theta = dict(zip(ids, rng.normal(0.3, 0.5, len(ids)), strict=True))
    if slope is None:
        sim = dict(zip(ids, rng.normal(0.3, 0.5, len(ids)), strict=True))
    else:
        sim = {m: 0.1 + slope * g + resid * rng.normal() for m, g in theta.items()}
    few = FEW if few_trials is not None else ()
    real = pd.concat([
        synthetic_paired({m: g for m, g in theta.items() if m not in few}, -0.4, real_trials,
                         rng, eval_protocol=PROTOCOL),
        synthetic_paired({m: theta[m] for m in few}, -0.4, few_trials or 0, rng,
                         eval_protocol=PROTOCOL, step=1)], ignore_index=True)
    real = validate_paired(real, cs)
    simt = validate_sim_paired(synthetic_paired(sim, 0.3, sim_trials, rng,
                                                eval_protocol=PROTOCOL), cs)
    return cs, theta, real, simt


def converged(idata, calibration: bool = True) -> tuple[float, float, int]:
    names = ["theta", "theta_sim", "eta_real", *(["a", "b", "sigma"] if calibration else [])]
    s = az.summary(idata, var_names=names)
    return (float(s["r_hat"].max()), float(min(s["ess_bulk"].min(), s["ess_tail"].min())),
            int(idata["sample_stats"]["diverging"].sum()))


def moments(idata):
    th = idata["posterior"]["theta"]
    return (th.mean(("chain", "draw")).to_numpy(), th.std(("chain", "draw")).to_numpy(),
            az.mcse(idata, var_names=["theta"], method="mean")["theta"].to_numpy(),
            az.mcse(idata, var_names=["theta"], method="sd")["theta"].to_numpy())


@pytest.fixture(scope="module")
def learned_model():
    return SimProxyModel(candidate_set(), max_policies=1)


@pytest.mark.slow  # compiles a model variant: minutes on a new machine
def test_known_useless_simulator_gives_the_real_only_posterior():
    """With b_l = 0 known, sim data are independent of θ: the real-only posterior exactly (a
    check that no path — baselines, pooling, geometry — leaks sim information into θ)."""
    model = SimProxyModel(candidate_set(), max_policies=1,
                          calibration={lens: (0.1, 0.0, 0.5) for lens in LENSES})
    _, _, real, sim = world(11, None, 0.0, 60, 400)
    with_sim = model.fit(real, sim, seed=5)
    alone = model.fit(real, None, seed=6)
    rhat, ess, div = converged(with_sim, calibration=False)
    assert rhat <= 1.01 and ess >= 400 and div == 0, (rhat, ess, div)
    m1, s1, e1, f1 = moments(with_sim)
    m0, s0, e0, f0 = moments(alone)
    assert np.all(np.abs(m1 - m0) < 4 * np.hypot(e1, e0)), (m1 - m0) / np.hypot(e1, e0)
    assert np.all(np.abs(s1 - s0) < 4 * np.hypot(f1, f0)), (s1 - s0) / np.hypot(f1, f0)


@pytest.mark.slow  # compiles a model variant: minutes on a new machine
def test_learned_useless_simulator_barely_moves_the_real_gain(learned_model):
    """A simulator whose gains are independent of the real ones, calibration learned from 12
    candidates: the slope's 90 % interval holds 0 and θ's posterior stays close to the
    real-only one.  Not within Monte Carlo error: with 12 candidates b is known only to
    ± 0.3, and the model rightly keeps the information E[b²]/σ² that is left (a few % of θ's
    precision here); it vanishes as the candidates evaluated in both domains grow (the
    known-b = 0 test above is the limit).  Measured with these seeds: sd ratios 0.96–1.01,
    mean |shift| 0.11 posterior sd (max 0.23).  Bounds: the issue's "no more than 5 % more
    real trials" (trials ∝ 1/sd², so mean sd ratio ≤ √1.05), no more than 10 % narrower for
    any candidate, and shifts of 0.25 sd on average."""
    _, _, real, sim = world(11, None, 0.0, 60, 400)
    with_sim = learned_model.fit(real, sim, seed=5)
    alone = learned_model.fit(real, None, seed=6)
    rhat, ess, div = converged(with_sim)
    assert rhat <= 1.01 and ess >= 400 and div == 0, (rhat, ess, div)
    m1, s1, _, _ = moments(with_sim)
    m0, s0, _, _ = moments(alone)
    assert np.mean(s1 / s0) <= np.sqrt(1.05) and np.all(s1 / s0 > 0.9), s1 / s0
    assert np.mean(np.abs(m1 - m0) / s0) < 0.25, (m1 - m0) / s0
    b = with_sim["posterior"]["b0"].to_numpy().ravel()
    assert np.quantile(b, 0.05) < 0 < np.quantile(b, 0.95)


@pytest.mark.slow  # compiles a model variant: minutes on a new machine
def test_well_calibrated_simulator_narrows_the_real_gain(learned_model):
    """9 candidates with 150 real trials per arm calibrate a good simulator (b = 1, σ = 0.1);
    the 3 with 15 real trials gain most: their posterior sd falls by more than a quarter."""
    _, theta, real, sim = world(12, 1.0, 0.1, 150, 1000, few_trials=15)
    with_sim = learned_model.fit(real, sim, seed=7)
    alone = learned_model.fit(real, None, seed=8)
    rhat, ess, div = converged(with_sim)
    assert rhat <= 1.01 and ess >= 400 and div == 0, (rhat, ess, div)
    m1, s1, _, f1 = moments(with_sim)
    m0, s0, _, f0 = moments(alone)
    few = np.isin(learned_model.gain_ids, FEW)
    assert np.all(s1[few] + 4 * np.hypot(f1, f0)[few] < 0.75 * s0[few]), s1 / s0
    truth = np.array([theta[c] for c in learned_model.gain_ids])
    assert np.mean((m1 - truth)[few] ** 2) < np.mean((m0 - truth)[few] ** 2)
