"""Transfer evaluations: validation, the δ_J model, and δ_J / G_J in the belief and the decision."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from belief.campaign.synthetic import SyntheticWorld
from belief.decision.engine import decide
from belief.decision.settings import DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.tables import validate_transfer
from belief.posterior.transfer import transfer_attrs


def evals(**override) -> pd.DataFrame:
    df = pd.DataFrame({"step": 0, "policy": ["pi0", "pi_dr"], "eval_protocol": "pick_place_v1",
                       "sim_successes": [55, 50], "sim_trials": 100,
                       "real_successes": [30, 42], "real_trials": 100})
    for col, (row, value) in override.items():
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
    return df


def normal_evals() -> pd.DataFrame:
    return pd.DataFrame({"step": 0, "policy": ["a", "b", "c"], "eval_protocol": "pick_place_v1",
                         "sim_mean": [120.0, 100.0, 90.0], "sim_se": 2.0,
                         "real_mean": [80.0, 95.0, 99.0], "real_se": 3.0})


# -- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("override, row, rule", [
    ({"real_successes": (1, 101)}, 1, "outcome out of range: real_successes (101) exceed "
                                      "real_trials (100)"),
    ({"sim_trials": (0, 0)}, 0, "outcome out of range: sim_trials must be >= 1"),
    ({"eval_protocol": (1, "pick_place_v2")}, 1, "differs from the campaign's shared protocol "
                                                 "'pick_place_v1'"),
    ({"policy": (1, None)}, 1, "policy is missing"),
])
def test_bad_rows_name_table_row_and_rule(world_candidates, override, row, rule):
    with pytest.raises(InputError) as err:
        validate_transfer(evals(**override), world_candidates)
    assert str(err.value).startswith(f"transfer_evaluations, row {row}: ")
    assert rule in str(err.value)


def test_mixed_families_and_normal_range(world_candidates):
    mixed = pd.concat([evals(), normal_evals()], ignore_index=True)
    with pytest.raises(InputError, match=r"transfer_evaluations, row 2: mixed outcome families "
                                         r"in one table: row 0 is binomial, this row is "
                                         r"normal"):
        validate_transfer(mixed, world_candidates)
    ok = validate_transfer(normal_evals(), world_candidates)
    assert "sim_successes" not in ok
    bad = normal_evals()
    bad.loc[2, "real_se"] = 0.0
    with pytest.raises(InputError, match=r"row 2: outcome out of range: real_se must be > 0"):
        validate_transfer(bad, world_candidates)
    missing = evals().drop(columns=["real_trials"])
    with pytest.raises(InputError, match=r"missing required column\(s\) \['real_trials'\]"):
        validate_transfer(missing, world_candidates)


def test_interface_rules(world_candidates):
    df = evals().assign(sim_interface=["v2", "v2"], real_interface=["v2", "v3"])
    with pytest.raises(InputError, match=r"transfer_evaluations, row 1: sim_interface 'v2' "
                                         r"differs from real_interface 'v3': the policy is not "
                                         r"the same function in sim and real, so δ_J"):
        validate_transfer(df, world_candidates)
    cands = dataclasses.replace(world_candidates, policy_interface="v2")
    with pytest.raises(InputError, match=r"row 1: policy_interface 'v1' differs from the "
                                         r"campaign's policy interface 'v2'"):
        validate_transfer(evals().assign(policy_interface=["v2", "v1"]), cands)
    validate_transfer(evals().assign(policy_interface=["v2", None]), cands)  # unstated: ok


def test_campaign_policy_interface_from_toml():
    doc = {"campaign": {"eval_protocol": "E", "policy_interface": "arm7_obs_v2"},
           "candidate": [{"id": "a", "role": "diagnosis", "lens": "model", "method": "m"}]}
    assert candidates_from_dict(doc).policy_interface == "arm7_obs_v2"
    doc["campaign"]["policy_interface"] = ""
    with pytest.raises(InputError, match="policy_interface must be a non-empty string"):
        candidates_from_dict(doc)
    assert candidates_from_dict({"candidate": doc["candidate"]}).policy_interface is None


# -- model ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def transfer_fit(fitter, world_candidates):
    """Decisive data: real clearly worse for ``worse``, clearly better for ``better``."""
    from belief.inputs.evidence import Evidence

    df = pd.DataFrame({"step": 0, "policy": ["worse", "better", "same"],
                       "eval_protocol": "pick_place_v1", "sim_successes": [160, 60, 100],
                       "sim_trials": 200, "real_successes": [60, 150, 100], "real_trials": 200})
    ev = Evidence(world_candidates).append(transfer_evaluations=df)
    return fitter.fit_transfer(ev, "pi_new", seed=3)


def test_sign_convention_and_g_j(transfer_fit):
    post = transfer_fit["posterior"]
    mean = post["delta_j"].mean(("chain", "draw")).to_series()
    assert mean["worse"] < -0.3  # real worse than sim (0.80 → 0.30): negative
    assert mean["better"] > 0.3  # real better than sim (0.30 → 0.75): positive, not a "gap"
    assert SyntheticWorld().true_delta_j("pi_ft") > 0 > SyntheticWorld().true_delta_j("pi0")
    np.testing.assert_allclose(post["g_j"], abs(post["delta_j"]))
    np.testing.assert_allclose(post["delta_j"], post["j_real"] - post["j_sim"])
    assert "positive when real is better" in transfer_fit.attrs["sign"]
    assert transfer_fit["constant_data"]["rows"].sel(policy="pi_new") == 0


def test_normal_family_reports_in_j_units(fitter, world_candidates):
    from belief.inputs.evidence import Evidence

    ev = Evidence(world_candidates).append(transfer_evaluations=normal_evals())
    dt = fitter.fit_transfer(ev, seed=1)
    mean = dt["posterior"]["delta_j"].mean(("chain", "draw")).to_series()
    assert dt.attrs["family"] == "normal"
    assert mean["a"] < -20 and mean["c"] > 0  # −40 and +9 in J units, pooled


# -- belief and decision ------------------------------------------------------------------------
def test_delta_j_joins_belief_and_decision(fitter, campaign_evidence, tmp_path):
    ev, world = campaign_evidence
    ev = ev.append(transfer_evaluations=SyntheticWorld().transfer_evaluations())
    idata, belief = fitter.fit(ev, world.policy, step=4, seed=11)
    assert "transfer" in idata.children
    assert belief["delta_j"].dims == ("sample", "transfer_policy")
    assert belief.sizes["sample"] == belief["gain"].sizes["sample"]
    assert set(belief["transfer_policy"].values) == {"pi0", "pi_dr", "pi_ft", world.policy}
    np.testing.assert_allclose(belief["g_j"], abs(belief["delta_j"]))
    attrs = transfer_attrs(belief, "pi0")
    assert attrs["delta_j_lo90"] < attrs["delta_j_mean"] < attrs["delta_j_hi90"] < 0
    assert attrs["delta_j_source"] == "1 sim/real evaluation(s) of pi0"
    state = State(step=4, budget=world.initial_budget, policy=world.policy, belief=belief)
    settings = DecisionSettings(weights=world.weight_values, stability_resamples=0)
    decision = decide(state, world.candidates, settings)
    assert decision.attrs["delta_j_source"].startswith("pooled prediction")
    for key in ("delta_j_mean", "delta_j_lo90", "delta_j_hi90", "g_j_mean", "g_j_lo90",
                "g_j_hi90", "delta_j_reliable"):
        assert key in decision.attrs
    g_now = belief["g_j"].sel(transfer_policy=world.policy).values  # the current policy's G_J
    assert decision.attrs["g_j_lo90"] == pytest.approx(np.quantile(g_now, 0.05))
    assert decision.attrs["g_j_hi90"] == pytest.approx(np.quantile(g_now, 0.95))
    # δ_J is reported, not scored: the scores do not depend on it
    plain = decide(State(step=4, budget=world.initial_budget, policy=world.policy,
                         belief=belief.drop_vars(["delta_j", "g_j"])), world.candidates,
                   settings)
    np.testing.assert_array_equal(decision["q"].values, plain["q"].values)
    assert "delta_j_mean" not in plain.attrs
    # q_t with transfer draws survives the netCDF round trip
    from belief.workflow.belief_file import load_belief, save_belief

    back, _ = load_belief(save_belief(tmp_path / "belief.nc", belief, idata))
    np.testing.assert_allclose(back["delta_j"], belief["delta_j"])
    assert list(back["transfer_rows"].values) == list(belief["transfer_rows"].values)
