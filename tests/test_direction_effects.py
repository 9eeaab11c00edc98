"""Diagnoses that measure a mismatch direction (``targets`` with ``measurement_se``; issue 16):
validation, the ``direction_estimates`` table, the direction effect ξ_k in the gains model on
hand-built data, its simulate/loglik, and the CVU of such a diagnosis on a hand-built belief
against the exact normal–normal value.  No sampler compile."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit, logit

from belief.errors import InputError
from belief.inputs.candidates import Candidate, CandidateSet
from belief.inputs.evidence import Evidence
from models import gains as gains_module
from models.gains import GainsModel, GainsPriors

ETA = float(logit(0.3))
THETA_A, THETA_B, XI_SD, SE, S = 0.2, 0.2, 0.5, 0.2, 4000


def _candidates(se: float | None = SE) -> CandidateSet:
    return CandidateSet((
        Candidate("a", "adaptation", "data", "DR", {"eng_h": 0.0}, changes_policy=True,
                  targets=("latency",)),
        Candidate("b", "adaptation", "representation", "DA", {"eng_h": 0.0},
                  changes_policy=True, targets=("camera",)),
        Candidate("probe", "diagnosis", "model", "probe", {"eng_h": 0.1},
                  targets=("latency",), measurement_se=se),
    ))


def test_measures_needs_a_diagnosis_with_measurement_se_and_a_targeting_adaptation():
    assert _candidates()["probe"].measures == ("latency",)
    assert _candidates(None)["probe"].measures == ()  # targets only label it
    assert _candidates()["a"].measures == ()  # an adaptation measures nothing
    bad = _candidates().candidates
    with pytest.raises(InputError, match=r"measures direction 'friction'.*no adaptation"):
        CandidateSet((*bad[:2], replace(bad[2], targets=("friction",))))
    with pytest.raises(InputError, match="needs measurement_se > 0"):
        CandidateSet((*bad[:2], replace(bad[2], measurement_se=-1.0)))


def test_direction_estimates_table_is_validated():
    cands = _candidates()
    row = {"step": 0, "candidate": "probe", "direction": "latency", "estimate": 0.1, "se": 0.2}
    ev = Evidence(cands).append(direction_estimates=pd.DataFrame([row]))
    assert len(ev.direction_estimates) == 1
    with pytest.raises(InputError, match="does not measure direction 'camera'"):
        Evidence(cands).append(direction_estimates=pd.DataFrame([{**row,
                                                                  "direction": "camera"}]))
    with pytest.raises(InputError, match="measures no direction"):
        Evidence(cands).append(direction_estimates=pd.DataFrame([{**row, "candidate": "a"}]))
    with pytest.raises(InputError, match="se"):
        Evidence(cands).append(direction_estimates=pd.DataFrame([{**row, "se": 0.0}]))


def test_no_measured_direction_leaves_the_model_unchanged():
    model = GainsModel(_candidates(None))
    assert model.directions == []
    assert "xi" not in [v.name for v in model.build().free_RVs + model.build().deterministics]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_generative_model_adds_xi_to_every_targeting_candidate_and_measures_it():
    """θ_a = (pooled) + ξ_latency, θ_b unchanged, on every prior draw; the direction
    estimates' log density is Σ_e log N(y_e | ξ_{k_e}, se_e) (hand-computed) up to the
    constant −½ log 2π per row."""
    import pymc as pm

    model = GainsModel(_candidates(), GainsPriors(order_effects=False), max_policies=3)
    assert model.directions == ["latency"]
    rows = pd.DataFrame([{"direction": "latency", "estimate": 0.4, "se": 0.2},
                         {"direction": "latency", "estimate": 0.1, "se": 0.3}])
    dirs = gains_module.encode_directions(rows, model.directions,
                                          model.max_direction_estimates)
    gen = model.build_generative(directions=dirs)
    with gen:
        prior = pm.sample_prior_predictive(draws=200, random_seed=3,
                                           var_names=["effect", "method_effect", "xi",
                                                      "z_candidate", "tau_candidate"])
    pr = prior["prior"]
    xi = pr["xi"].values[0, :, 0]
    # direction_sd; 4 s.e. of an s.d. from 200 draws (1/√(2·200) = 0.05 relative)
    assert np.std(xi) == pytest.approx(0.2, rel=0.2)
    base = (pr["method_effect"].values[0] + pr["tau_candidate"].values[0][:, None]
            * pr["z_candidate"].values[0])
    eff = pr["effect"].values[0]
    np.testing.assert_allclose(eff[:, 0], base[:, 0] + xi, atol=1e-10)
    np.testing.assert_allclose(eff[:, 1], base[:, 1], atol=1e-10)
    import pytensor

    pot = next(p for p in gen.potentials if p.name == "direction_estimates")
    value = gen.rvs_to_values[gen["xi"]]
    fn = pytensor.function([value], gen.replace_rvs_by_values([pot])[0],
                           on_unused_input="ignore")
    for x in (-0.3, 0.0, 0.25):
        want = stats.norm.logpdf(0.4, x, 0.2) + stats.norm.logpdf(0.1, x, 0.3) \
            + np.log(2 * np.pi)
        assert float(fn(np.array([x]))) == pytest.approx(want, abs=1e-10)


def _draws(xi: np.ndarray) -> xr.Dataset:
    """Joint gains draws: θ_a = THETA_A + ξ, θ_b = THETA_B, no run-to-run noise."""
    n = len(xi)
    theta = np.stack([THETA_A + xi, np.full(n, THETA_B)], -1)
    zeros = np.zeros((n, 2))
    return xr.Dataset(
        {"gains_eta": ("sample", np.full(n, ETA)),
         "gains_theta": (("sample", "candidate"), theta),
         "gains_tau": ("sample", np.zeros(n)), "gains_rho": ("sample", np.ones(n)),
         "gains_repeats": ("candidate", np.zeros(2)),
         "gains_z_now": (("sample", "candidate"), zeros),
         "gains_z_next": (("sample", "candidate"), zeros),
         "gains_xi": (("sample", "measured_direction"), xi[:, None])},
        coords={"candidate": ["a", "b"], "measured_direction": ["latency"]})


def test_simulate_and_loglik_of_a_direction_measurement():
    xi = np.array([-0.5, 0.0, 0.7])
    d = _draws(xi)
    y = np.array([[0.1], [0.6]])
    got = gains_module.loglik_direction(d, ["latency"], SE, y)
    np.testing.assert_allclose(got, stats.norm.logpdf(y, xi[None, :], SE))
    sim = gains_module.simulate_direction(d, ["latency"], SE, np.random.default_rng(0),
                                          np.repeat([2], 20000))
    assert sim.shape == (20000, 1)
    assert abs(sim.mean() - 0.7) < 4 * SE / np.sqrt(20000)
    assert abs(sim.std() / SE - 1) < 0.02


def _state(xi: np.ndarray):
    from belief.decision.state import State
    from belief.inputs.resources import make_budget
    from belief.posterior.belief_state import make_belief

    cands = _candidates()
    draws = _draws(xi)
    gain = gains_module.gain_from_draws(draws).reindex(candidate=cands.ids, fill_value=0.0)
    belief = make_belief(gain, cands, step=0, policy="pi0", model_draws=draws)
    budget = make_budget({r: 10.0 for r in cands.resources}, cands.resources)
    return cands, State(step=0, budget=budget, policy="pi0", belief=belief)


def _exact_cvu() -> float:
    """E_y[max(0, E[g_a | y], g_b)] − max(0, E[g_a], g_b): ξ ~ N(0, XI_SD²), y | ξ ~ N(ξ, SE²),
    ξ | y ~ N(v y / SE², v), v = 1 / (1/XI_SD² + 1/SE²); Gauss–Hermite in both."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()

    def mean_gain(mu, sd):
        return float(w @ expit(ETA + THETA_A + mu + sd * x)) - expit(ETA)

    g_b = expit(ETA + THETA_B) - expit(ETA)
    v = 1.0 / (1.0 / XI_SD**2 + 1.0 / SE**2)
    ys = np.sqrt(XI_SD**2 + SE**2) * x
    after = np.array([max(0.0, mean_gain(v * y / SE**2, np.sqrt(v)), g_b) for y in ys])
    return float(w @ after) - max(0.0, mean_gain(0.0, XI_SD), g_b)


def test_a_diagnosis_measuring_an_uncertain_relevant_direction_earns_cvu():
    """ξ uncertain: CVU(probe) > 0 at many MCSEs and equal to the exact normal–normal value
    within 4 MCSE (ξ's draws are its N(0, 0.5²) quantiles, so their sampling error is
    negligible); ξ known: CVU(probe) = 0."""
    from belief.decision.cvu import cvu_for_state
    from belief.decision.settings import CVUSettings, DecisionSettings
    from belief.posterior.experiments import experiments_from_belief

    settings = DecisionSettings(weights={"real_h": 0.0, "compute": 0.0, "eng_h": 0.0},
                                beta=1.0, cvu=CVUSettings(n_outcomes=2000, seed=7))
    rng = np.random.default_rng(0)
    xi = rng.permutation(stats.norm.ppf((np.arange(S) + 0.5) / S, 0.0, XI_SD))
    cands, state = _state(xi)
    exps = experiments_from_belief(state.belief, cands)
    assert exps["probe"].simulate is not None
    ds = cvu_for_state(state, cands, settings, experiments=exps)
    probe = ds.sel(candidate="probe")
    exact = _exact_cvu()
    cvu, se = float(probe["cvu"]), float(probe["cvu_se"])
    assert exact > 0.005
    assert cvu > 5 * se > 0
    assert abs(cvu - exact) < 4 * se, (cvu, exact, se)
    cands, known = _state(np.full(S, 0.3))
    ds = cvu_for_state(known, cands, settings,
                       experiments=experiments_from_belief(known.belief, cands))
    assert abs(float(ds.sel(candidate="probe")["cvu"])) < 1e-12


def test_a_measuring_diagnosis_round_trips_through_the_candidate_file():
    from belief.inputs.candidate_file import candidates_toml, parse_candidate_text

    cands = _candidates()
    back = parse_candidate_text(candidates_toml(cands), "c.toml").candidates
    assert back["probe"].measures == ("latency",) and back["probe"].measurement_se == SE


@pytest.mark.slow
def test_fitted_xi_is_conjugate_before_any_targeting_candidate_runs():
    """In ``SyntheticWorld.with_latency_probe`` after one probe: no step informs θ yet, so
    ξ_latency | y ~ N(y σ²/(σ² + se²), 1/(1/σ² + 1/se²)) exactly (σ = direction_sd); the fit
    (4 × 1000, converged) gives it within 4 MCSE of the mean and 10 % of the sd, and q_t's
    experiment of the probe simulates one measurement per draw."""
    from belief.campaign.synthetic import SyntheticWorld
    from belief.posterior.experiments import experiments_from_belief
    from belief.posterior.fitter import BeliefFitter

    world = SyntheticWorld.with_latency_probe(seed=1)
    ev = Evidence(world.candidates).append(**world.initial_evidence())
    out = world.execute("latency_probe", 0)
    ev = ev.append(**out.tables())
    y = float(ev.direction_estimates["estimate"].iloc[0])
    idata, belief = BeliefFitter(world.candidates).fit(ev, world.policy, 1, seed=0)
    assert belief.attrs["reliability_reason"] == "converged"
    xi = idata["gains"]["posterior"]["xi"].sel(direction="latency").values.ravel()
    sd0, se = GainsPriors().direction_sd, 0.1
    v = 1.0 / (1.0 / sd0**2 + 1.0 / se**2)
    assert abs(xi.mean() - v * y / se**2) < 4 * np.sqrt(v / 400)
    assert xi.std() == pytest.approx(np.sqrt(v), rel=0.1)
    sim = experiments_from_belief(belief, world.candidates)["latency_probe"].simulate(
        np.random.default_rng(0), np.arange(7))
    assert sim.shape == (7, 1)
