"""Sensitivity runs: validation, the sensitivity model, per-policy reports and prioritisation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from belief.campaign.synthetic import SyntheticWorld
from belief.errors import InputError
from belief.inputs.evidence import Evidence
from belief.inputs.tables import validate_sensitivity
from belief.posterior.sensitivity import (
    PolicyConditionalError,
    compare_sensitivities,
    prioritise,
    sensitivity_report,
    sensitivity_reports,
)


def runs(n: int = 4, **override) -> pd.DataFrame:
    """A small valid binomial sweep of one policy over friction and latency."""
    df = pd.DataFrame({"step": 0, "policy": "pi0", "eval_protocol": "pick_place_v1",
                       "xi_friction": [0.0, 0.3, 0.0, 0.3][:n],
                       "xi_latency": [0.0, 0.0, 40.0, 40.0][:n],
                       "successes": [30, 28, 27, 10][:n], "trials": 50})
    for col, (row, value) in override.items():
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
    return df


# -- validation -----------------------------------------------------------------------------
def test_valid_sweep_is_kept_with_its_directions(world_candidates):
    out = validate_sensitivity(runs(), world_candidates)
    assert [c for c in out.columns if c.startswith("xi_")] == ["xi_friction", "xi_latency"]
    assert out["successes"].dtype.kind == "i"


@pytest.mark.parametrize("override, row, rule", [
    ({"successes": (2, 51)}, 2, "outcome out of range: successes (51) exceed trials (50)"),
    ({"trials": (1, 0)}, 1, "outcome out of range: trials must be >= 1"),
    ({"successes": (3, -1)}, 3, "successes must be >= 0"),
    ({"xi_latency": (1, np.nan)}, 1, "xi_latency must be a finite number"),
    ({"eval_protocol": (2, "other")}, 2, "differs from the campaign's shared protocol"),
    ({"successes": (1, np.nan), "trials": (1, np.nan)}, 1, "outcome missing"),
])
def test_bad_rows_name_table_row_and_rule(world_candidates, override, row, rule):
    with pytest.raises(InputError) as err:
        validate_sensitivity(runs(**override), world_candidates)
    assert str(err.value).startswith(f"sensitivity_runs, row {row}: ")
    assert rule in str(err.value)


def test_missing_xi_columns(world_candidates):
    df = runs().drop(columns=["xi_friction", "xi_latency"])
    with pytest.raises(InputError, match=r"sensitivity_runs: missing ξ columns: no column named "
                                         r"xi_<direction>"):
        validate_sensitivity(df, world_candidates)


def test_constant_xi_column_carries_no_information(world_candidates):
    df = runs().assign(xi_camera=0.5)
    with pytest.raises(InputError, match=r"sensitivity_runs, row 0: xi_camera is constant "
                                         r"\(0.5\) in every row: .*no information about "
                                         r"S_camera"):
        validate_sensitivity(df, world_candidates)
    two = pd.concat([runs(), runs().assign(policy="pi_dr", xi_latency=20.0)], ignore_index=True)
    with pytest.raises(InputError, match=r"row 4: xi_latency is constant \(20\) over the runs "
                                         r"of policy 'pi_dr': no information about "
                                         r"S_latency\(pi_dr\)"):
        validate_sensitivity(two, world_candidates)


def test_mixed_outcome_families_refused(world_candidates):
    df = runs(successes=(2, np.nan), trials=(2, np.nan))
    df["mean"] = [np.nan, np.nan, 0.4, np.nan]
    with pytest.raises(InputError, match=r"sensitivity_runs, row 2: mixed outcome families in "
                                         r"one table: row 0 is binomial, this row is normal"):
        validate_sensitivity(df, world_candidates)
    both = runs().assign(mean=0.4)
    with pytest.raises(InputError, match=r"row 0: row has values for both outcome families"):
        validate_sensitivity(both, world_candidates)


def test_normal_family_and_its_range(world_candidates):
    df = runs().drop(columns=["successes", "trials"]).assign(mean=[1.0, 0.8, 0.7, 0.1],
                                                             se=0.05)
    out = validate_sensitivity(df, world_candidates)
    assert list(out.columns[-4:]) == ["mean", "se", "xi_friction", "xi_latency"]
    with pytest.raises(InputError, match=r"row 1: outcome out of range: se must be >= 0"):
        validate_sensitivity(df.assign(se=[0.1, -0.1, 0.1, 0.1]), world_candidates)
    # appending a normal table to binomial evidence mixes families: refused, nothing kept
    ev = Evidence(world_candidates).append(sensitivity_runs=runs())
    with pytest.raises(InputError, match="mixed outcome families"):
        ev.append(sensitivity_runs=df)
    assert len(ev.sensitivity) == 4


def test_policy_interface_must_match_the_campaign(world_candidates):
    cands = dataclasses.replace(world_candidates, policy_interface="arm7_v2")
    validate_sensitivity(runs().assign(policy_interface="arm7_v2"), cands)
    df = runs().assign(policy_interface=["arm7_v2", "arm7_v2", "arm7_v3", "arm7_v2"])
    with pytest.raises(InputError, match=r"sensitivity_runs, row 2: policy_interface 'arm7_v3' "
                                         r"differs from the campaign's policy interface "
                                         r"'arm7_v2': .*not the same function π"):
        validate_sensitivity(df, cands)
    # without a declared interface the column is kept but not checked
    assert "policy_interface" in validate_sensitivity(df, world_candidates)


def test_evidence_keeps_sweeps_through_append_and_until(world_candidates, sweep_evidence):
    assert len(sweep_evidence.sensitivity) == 54
    assert len(sweep_evidence.until(0).sensitivity) == 0
    assert set(sweep_evidence.tables()) >= {"sensitivity_runs", "transfer_evaluations"}


# -- model and report -----------------------------------------------------------------------
def test_fit_states_standardisation_and_units(sensitivity_fit):
    post = sensitivity_fit["posterior"]
    assert set(post["S"].dims) == {"chain", "draw", "direction", "policy"}
    assert list(post["policy"].values) == ["pi0", "pi_dr"]
    assert list(post["pair"].values) == ["friction×latency", "friction×camera",
                                         "latency×camera"]
    assert "xi_scale_latency" in sensitivity_fit.attrs
    assert "per s.d. of ξ_k" in post["S"].attrs["units"]
    assert "standardisation" in sensitivity_fit.attrs
    const = sensitivity_fit["constant_data"]
    np.testing.assert_allclose(const["xi_center"].values, [0.15, 20.0, 0.5])
    np.testing.assert_allclose(const["xi_scale"].values,
                               np.sqrt(2 / 3) * np.array([0.15, 20.0, 0.5]))


def test_report_ranks_directions_within_a_policy(sensitivity_fit):
    reports = sensitivity_reports(sensitivity_fit)
    assert set(reports) == {"pi0", "pi_dr"}
    r0 = reports["pi0"]
    assert r0.ranking["p_most_influential"].sum() == pytest.approx(1.0)
    assert list(r0.ranking["rank"]) == [1, 2, 3]
    assert set(r0.directions[:2]) == {"friction", "latency"}
    assert reports["pi_dr"].directions[0] == "camera"
    assert (r0.ranking["S_lo"] <= r0.ranking["S_mean"]).all()
    syn = r0.synergy.loc["friction×latency"]
    assert syn["p_synergy"] > 0.9 and syn["p_gamma_negative"] > 0.9
    assert r0.draws["S"].dims == ("sample", "direction")
    assert isinstance(r0.reliable, bool) and r0.reliability_reason  # convergence is reported
    with pytest.raises(InputError, match="policy 'pi9' has no sensitivity runs"):
        sensitivity_report(sensitivity_fit, "pi9")


def test_cross_policy_comparison_is_refused_with_the_reason(sensitivity_fit):
    reports = sensitivity_reports(sensitivity_fit)
    with pytest.raises(PolicyConditionalError, match=r"policy-conditional.*S_k\(π1\) and "
                                                     r"S_k\(π2\) are not comparable") as err:
        compare_sensitivities(reports["pi0"], reports["pi_dr"])
    assert isinstance(err.value, InputError)
    same = compare_sensitivities(reports["pi0"], sensitivity_report(sensitivity_fit, "pi0"))
    assert same.shape == (3, 6)


def test_prioritisation_narrows_the_candidate_set(sensitivity_fit, world_candidates):
    reports = sensitivity_reports(sensitivity_fit)
    p_dr = prioritise(reports["pi_dr"], world_candidates)
    assert p_dr.directions == ["camera"]
    assert {"da_camera", "ft_real_100", "cotrain"} <= set(p_dr.worth_scoring)
    assert "si_friction" not in p_dr.worth_scoring
    assert "not among the top directions" in p_dr.table.loc["dr_1e7", "reason"]
    p0 = prioritise(reports["pi0"], world_candidates)
    assert set(p0.directions) == {"friction", "latency"}
    assert "da_camera" not in p0.worth_scoring
    assert len(p_dr.worth_scoring) < len(p0.worth_scoring) < len(world_candidates)
    with pytest.raises(InputError, match="coverage must be in"):
        prioritise(reports["pi0"], world_candidates, coverage=0)


def test_synergy_partner_joins_the_top_set(sensitivity_fit, world_candidates):
    r0 = sensitivity_report(sensitivity_fit, "pi0")
    p = prioritise(r0, world_candidates, coverage=0.01)  # only the top direction by coverage
    assert set(p.directions) == {"friction", "latency"}
    partner = p.directions[1]
    assert p.table.loc["latency_probe" if partner == "latency" else "si_friction",
                       "worth_scoring"]


def test_world_sweep_is_the_documented_grid():
    sweep = SyntheticWorld(seed=1).sensitivity_sweep()
    assert len(sweep) == 54 and (sweep["trials"] == 50).all()
    assert sorted(sweep["xi_latency"].unique()) == [0.0, 20.0, 40.0]
    truth = SyntheticWorld().sensitivity_truth()
    assert truth["gamma"].sel(pair="friction×latency") == pytest.approx(-1.5 / 6)
