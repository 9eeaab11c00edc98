"""Simulation-based calibration of the sim-proxy model (:func:`models.sbc.sim_proxy_case`).

As tests/test_sbc.py: N = 100 replications (prior draw → simulated real and sim paired counts →
posterior, 2 chains × 300 draws after 300 tuning, thinned at stride 6 to L = 99 draws), ranks
of 7 scalar quantities, Pearson χ² on 10 equiprobable rank bins (9 df) per quantity, family-wise
level α = 0.01 with a Bonferroni split (each quantity at α / 7).  The seed is fixed, so the
outcome is deterministic; over seeds a correct model fails with probability ≤ α.

The generator is the model written out level by level and centred; the fitting model is the
production one (merged pooling levels, data-informed non-centring of θ through the current
calibration), so a wrong change of variables would show as non-uniform ranks.  The test must
*fail* when the fitting model's prior of the calibration slope b_0 is four times too narrow:
the proof that N replications can detect a mis-specified calibration prior.
"""

from __future__ import annotations

import pytest

from models.sbc import rank_uniformity, run_sbc, scaled_priors, sim_proxy_case
from models.sim_proxy import TARGET_ACCEPT, SimProxyPriors

ALPHA = 0.01
N_SIMS = 100
SEED = 2026


def _report(out) -> None:
    print(f"\n{out.attrs['model']}: N={out.attrs['n_sims']}, L={out.attrs['n_draws']}, "
          f"p_adj={out.attrs['p_adjusted']:.3g}, divergent fits {out.attrs['divergent_fits']}")
    for q in out["quantity"].values:
        print(f"  {q:>16}: chi2={out['chi2'].sel(quantity=q).item():7.1f} "
              f"p={out['p_value'].sel(quantity=q).item():.3g}")


@pytest.mark.slow
def test_sbc_of_the_sim_proxy_model():
    case = sim_proxy_case()
    assert case.target_accept == TARGET_ACCEPT
    assert set(case.outcomes.values()) == {"real_ctrl_k", "real_trt_k", "sim_ctrl_k",
                                           "sim_trt_k"}
    result = run_sbc(case, N_SIMS, seed=SEED)
    out = rank_uniformity(result, alpha=ALPHA)
    _report(out)
    assert out.attrs["n_sims"] == N_SIMS and len(out["quantity"]) == 7
    assert out.attrs["passed"], (
        f"sim_proxy fails SBC: Bonferroni-adjusted p {out.attrs['p_adjusted']:.3g} < {ALPHA}")


@pytest.mark.slow
def test_sbc_detects_a_too_narrow_calibration_slope_prior():
    priors = SimProxyPriors()
    case = sim_proxy_case(priors, scaled_priors(priors, "b_sigma", 0.25),
                          name="sim_proxy, fit b_sigma ÷ 4")
    out = rank_uniformity(run_sbc(case, N_SIMS, seed=SEED), alpha=ALPHA)
    _report(out)
    assert not out.attrs["passed"], (
        f"SBC with N={N_SIMS} does not detect {out.attrs['model']}: adjusted p "
        f"{out.attrs['p_adjusted']:.3g} >= {ALPHA}")
