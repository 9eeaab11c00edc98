"""Parameter recovery (slow): sensitivities, synergy and transfer delta from the synthetic world."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from belief.campaign.synthetic import SyntheticWorld
from belief.inputs.evidence import Evidence
from belief.inputs.tables import validate_transfer
from belief.lab.calibration import binomial_interval
from belief.posterior.sensitivity import sensitivity_report
from models.sensitivity import SensitivityModel
from models.transfer import TransferModel

pytestmark = pytest.mark.slow

SEEDS = range(10)
DRAWS = {"draws": 1000, "tune": 1000, "chains": 2}


def _inside(da, truth, prob=0.9):
    lo = da.quantile((1 - prob) / 2, ("chain", "draw"))
    hi = da.quantile((1 + prob) / 2, ("chain", "draw"))
    return (lo <= truth) & (truth <= hi)


@pytest.fixture(scope="module")
def sweep_fits():
    """One default sweep per seed (the demo's sample size: 27 settings × 2 policies × 50)."""
    model = SensitivityModel(("friction", "latency", "camera"))
    out = []
    for seed in SEEDS:
        world = SyntheticWorld(seed=seed)
        ev = Evidence(world.candidates).append(sensitivity_runs=world.sensitivity_sweep())
        out.append((world, model.fit(ev.sensitivity, seed=seed, **DRAWS)))
    return out


def test_true_sensitivities_and_synergies_inside_their_90pct_intervals(sweep_fits):
    s_hits = g_hits = s_total = g_total = 0
    for world, idata in sweep_fits:
        truth = world.sensitivity_truth()
        post = idata["posterior"]
        s_in = _inside(post["S"], truth["S"].sel(policy=post["policy"]))
        g_in = _inside(post["gamma"], truth["gamma"].sel(pair=post["pair"]))
        s_hits, s_total = s_hits + int(s_in.sum()), s_total + s_in.size
        g_hits, g_total = g_hits + int(g_in.sum()), g_total + g_in.size
    rate = (s_hits + g_hits) / (s_total + g_total)
    print(f"sensitivity recovery: S {s_hits}/{s_total}, γ {g_hits}/{g_total} inside 90% "
          f"intervals ({rate:.1%})")
    # nominal 90 %; ≥ 80 % of 90 intervals is > 3 binomial s.e. below nominal
    assert rate >= 0.8
    # each part separately: nominal 90 % inside the exact 99 % interval of its hit rate
    assert binomial_interval(s_hits, s_total, 0.99)[1] >= 0.9
    assert binomial_interval(g_hits, g_total, 0.99)[1] >= 0.9


def test_friction_latency_synergy_detected_at_demo_sample_size(sweep_fits):
    p = [sensitivity_report(idata, "pi0").synergy.loc["friction×latency", "p_synergy"]
         for _, idata in sweep_fits]
    null = [sensitivity_report(idata, "pi0").synergy.loc["friction×camera", "p_synergy"]
            for _, idata in sweep_fits]
    print(f"P(synergy friction×latency) over seeds: min {min(p):.3f}, mean {np.mean(p):.3f}; "
          f"friction×camera (no synergy): mean {np.mean(null):.3f}")
    assert min(p) > 0.9
    # synergy needs γ on the side of S_k + S_l, so P(synergy) ≤ that posterior sign
    # probability, which is about Uniform(0, 1) over seeds when γ = 0: more values above 0.9
    # than the 99 % quantile of Binomial(10, 0.1) would be false detections (measured mean 0.21)
    assert sum(q > 0.9 for q in null) <= stats.binom.ppf(0.99, len(null), 0.1)
    reliable = [sensitivity_report(idata, "pi0").reliable for _, idata in sweep_fits]
    print(f"converged fits: {sum(reliable)}/{len(reliable)}")
    assert sum(reliable) >= 0.8 * len(reliable)


def test_most_influential_direction_recovered(sweep_fits):
    for _, idata in sweep_fits:
        assert sensitivity_report(idata, "pi_dr").directions[0] == "camera"
        assert set(sensitivity_report(idata, "pi0").directions[:2]) == {"friction", "latency"}


def test_normal_family_recovery():
    """Normal outcomes (mean, se) from known raw coefficients; coverage of S and γ."""
    model = SensitivityModel(("a", "b"), family="normal")
    grid = list(itertools.product([0.0, 1.0, 2.0], [0.0, 10.0, 20.0]))
    truth = {"p": (5.0, 1.0, -0.05), "q": (3.0, 0.2, -0.15)}  # (α, β_a, β_b) raw units
    gamma_raw, noise_sd, se = -0.04, 0.3, 0.2
    hits = total = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        rows = []
        for pol, (a, ba, bb) in truth.items():
            for _rep in range(2):
                for xa, xb in grid:
                    mu = a + ba * xa + bb * xb + gamma_raw * xa * xb
                    rows.append({"step": 0, "policy": pol, "eval_protocol": "E", "xi_a": xa,
                                 "xi_b": xb, "mean": mu + rng.normal(0, np.hypot(noise_sd, se)),
                                 "se": se})
        df = pd.DataFrame(rows)
        idata = model.fit(df, seed=seed, **DRAWS)
        c = idata["constant_data"]["xi_center"].values
        s = idata["constant_data"]["xi_scale"].values
        for pol, (_a, ba, bb) in truth.items():
            true_s = [s[0] * (ba + gamma_raw * c[1]), s[1] * (bb + gamma_raw * c[0])]
            hits += int(_inside(idata["posterior"]["S"].sel(policy=pol), np.array(true_s)).sum())
            total += 2
        hits += int(_inside(idata["posterior"]["gamma"], s[0] * s[1] * gamma_raw).sum())
        total += 1
    print(f"normal-family recovery: {hits}/{total} inside 90% intervals")
    assert hits / total >= 0.75


def test_transfer_delta_recovery_and_sign():
    model = TransferModel()
    hits = total = 0
    signs = []
    for seed in SEEDS:
        world = SyntheticWorld(seed=seed)
        df = validate_transfer(world.transfer_evaluations(), world.candidates)
        idata = model.fit(df, seed=seed, thin=4, **DRAWS)
        post = idata["posterior"]
        for p in world.transfer_truth:
            hits += bool(_inside(post["delta_j"].sel(policy=p), world.true_delta_j(p)))
            total += 1
        # sign convention: δ_J = J_real − J_sim, negative for pi0 (real worse), positive for
        # pi_ft (real better)
        signs.append((float(post["delta_j"].sel(policy="pi0").mean()) < 0,
                      float((post["delta_j"].sel(policy="pi0") < 0).mean()) > 0.95,
                      float(post["delta_j"].sel(policy="pi_ft").mean()) > 0))
    mean_pi0, sure_pi0, mean_ft = np.mean(signs, axis=0)
    print(f"transfer recovery: {hits}/{total} true δ_J inside 90% intervals; mean δ_J(pi0) < 0 "
          f"in {mean_pi0:.0%} of seeds (Pr > 0.95 in {sure_pi0:.0%}); mean δ_J(pi_ft) > 0 in "
          f"{mean_ft:.0%}")
    assert hits / total >= 0.8
    assert mean_pi0 == 1.0 and sure_pi0 >= 0.8 and mean_ft >= 0.8
