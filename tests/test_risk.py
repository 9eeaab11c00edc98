from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats

from belief.campaign.loop import CampaignSettings
from belief.campaign.synthetic import SyntheticWorld
from belief.decision.safety import (
    SafetyGate,
    clopper_pearson_upper,
    deployment_check,
    posterior_upper,
)
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.evidence import Evidence
from belief.inputs.tables import validate_deployment


def test_matches_scipy_exact_interval():
    delta = 0.05
    for n in (1, 5, 20, 50, 137):
        for k in range(0, n):
            ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * delta,
                                                     method="exact")
            assert clopper_pearson_upper(k, n, delta) == pytest.approx(ci.high, abs=1e-8)


def test_edge_cases():
    assert clopper_pearson_upper(0, 0) == 1.0
    assert clopper_pearson_upper(7, 7) == 1.0
    with pytest.raises(InputError, match="exceeds"):
        clopper_pearson_upper(3, 2)
    with pytest.raises(InputError, match=">= 0"):
        clopper_pearson_upper(-1, 2)
    with pytest.raises(InputError, match="delta"):
        clopper_pearson_upper(1, 2, delta=1.5)


@pytest.mark.parametrize("n", [5, 20, 50])
def test_exact_coverage(n):
    delta = 0.05
    ks = np.arange(n + 1)
    ucb = clopper_pearson_upper(ks, np.full_like(ks, n), delta)
    for p in np.linspace(0.001, 0.999, 199):
        coverage = stats.binom.pmf(ks, n, p)[ucb >= p].sum()
        assert coverage >= 1 - delta - 1e-12


def test_rule_of_three():
    for n in (30, 50, 100, 300):
        assert clopper_pearson_upper(0, n, 0.05) == pytest.approx(3 / n, rel=0.10)


# -- bad input names the table, the row and the rule -----------------------------------------


def test_bad_counts_name_the_row():
    with pytest.raises(InputError, match=r"^safety_events, row b: unsafe count k exceeds n"):
        clopper_pearson_upper([1, 5], [2, 3], rows=["a", "b"])
    with pytest.raises(InputError, match=r"^safety_events, row 1: counts must be >= 0"):
        clopper_pearson_upper([0, -1], [2, 3])
    with pytest.raises(InputError, match=r"^safety_events, row 0: unsafe count k must be an "
                                         r"integer"):
        clopper_pearson_upper([0.5], [2])
    with pytest.raises(InputError, match=r"^deployment_safety: unsafe count k exceeds"):
        clopper_pearson_upper(4, 3, table="deployment_safety")


@pytest.mark.parametrize("value", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_levels_outside_unit_interval_are_refused(value):
    with pytest.raises(InputError, match=r"^delta: delta must satisfy 0 < delta < 1"):
        clopper_pearson_upper(1, 10, delta=value)
    with pytest.raises(InputError, match=r"^alpha_exec: alpha_exec must satisfy"):
        SafetyGate(alpha_exec=value)
    with pytest.raises(InputError, match=r"^delta: "):
        SafetyGate(delta=value)
    with pytest.raises(InputError, match=r"^alpha_deploy: alpha_deploy must satisfy"):
        deployment_check((100, 0), "pi0", alpha_deploy=value)
    with pytest.raises(InputError, match=r"^delta: "):
        deployment_check((100, 0), "pi0", delta=value)
    with pytest.raises(InputError, match=r"^alpha_deploy: "):
        CampaignSettings(alpha_deploy=value)


def test_gate_names_the_candidate_with_bad_counts():
    cs = candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": [
        {"id": "arm_probe", "role": "diagnosis", "lens": "model", "method": "p", "cost": {},
         "drives_hardware": True, "hardware_group": "arm"}]})
    n = xr.DataArray([3], dims="candidate", coords={"candidate": ["arm_probe"]})
    with pytest.raises(InputError, match=r"^safety_events, row arm_probe: unsafe count k "
                                         r"exceeds"):
        SafetyGate().evaluate(cs, n, n + 1)


def test_posterior_upper_is_the_sample_quantile():
    rng = np.random.default_rng(1)
    draws = xr.DataArray(rng.beta(2, 50, size=(4000, 2)), dims=("sample", "candidate"),
                         coords={"candidate": ["a", "b"]})
    got = posterior_upper(draws, 0.05)
    np.testing.assert_array_equal(got.values, np.quantile(draws.values, 0.95, axis=0,
                                                          method="inverted_cdf"))
    assert got.dims == ("candidate",)


def test_posterior_gate_now_and_after_a_study_use_one_quantile():
    """The gate of s_t and CVU's gate of s_{t+1} take the same (1 − δ)-quantile: with
    uniform weights (a study that teaches nothing of the cell) next_gate gives the bound of
    now exactly, even on few draws where the linear and inverted-CDF quantiles differ."""
    from belief.decision.cvu.safety import next_gate

    p = np.random.default_rng(7).beta(1, 30, size=50)
    now = float(posterior_upper(xr.DataArray(p, dims="sample"), 0.05))
    after = next_gate(SafetyGate(method="posterior", delta=0.05), 0, 0, 0, p)
    assert after.shape == (1,) and after[0] == now
    assert now != float(np.quantile(p, 0.95))  # the case where the two definitions differ


# -- the deployment chance constraint ----------------------------------------------------------


def test_deployment_check_pass_and_fail():
    ok = deployment_check((400, 4), "pi3", alpha_deploy=0.05, delta=0.05)
    cp = stats.beta.ppf(0.95, 5, 396)
    assert float(ok["ucb_clopper_pearson"]) == pytest.approx(cp, abs=1e-12)
    assert float(ok["ucb_posterior"]) == pytest.approx(stats.beta.ppf(0.95, 5, 397), abs=1e-12)
    assert float(ok["p_deploy_bound"]) == float(ok["ucb_clopper_pearson"])
    assert bool(ok["passed"]) and ok.attrs["passed"] == 1
    assert ok.attrs["reason"].startswith("pass: CP UCB_0.95 0.0")
    assert "4/400 unsafe deployment trials of policy 'pi3'" in ok.attrs["reason"]
    bad = deployment_check((400, 20), "pi3", alpha_deploy=0.05, delta=0.05)
    assert not bool(bad["passed"]) and bad.attrs["reason"].startswith("fail: CP UCB_0.95")
    assert "> α_deploy 0.05" in bad.attrs["reason"]
    # the posterior (uniform prior) bound is a little below CP: it can decide differently
    n, k = next((n, k) for n in range(20, 400) for k in range(4) if stats.beta.ppf(
        0.95, k + 1, n - k + 1) <= 0.05 < stats.beta.ppf(0.95, k + 1, n - k))
    cp_says = deployment_check((n, k), "pi3", 0.05, 0.05, "clopper_pearson")
    post_says = deployment_check((n, k), "pi3", 0.05, 0.05, "posterior")
    assert not bool(cp_says["passed"]) and bool(post_says["passed"])
    assert post_says.attrs["reason"].startswith("pass: posterior (Beta(1, 1) prior)")
    none = deployment_check((0, 0), "pi9")
    assert not bool(none["passed"]) and float(none["ucb_clopper_pearson"]) == 1.0
    assert none.attrs["reason"].startswith("fail: no deployment trials of policy 'pi9'")
    # a posterior bound can pass on a confident prior alone: the reason says so, not "fail"
    prior_only = deployment_check((0, 0), "pi9", 0.05, 0.05, "posterior", prior=(1.0, 200.0))
    assert bool(prior_only["passed"]) and float(prior_only["p_deploy_bound"]) <= 0.05
    assert prior_only.attrs["reason"].startswith("pass: no deployment trials of policy 'pi9'")
    assert "<= α_deploy 0.05, from the prior alone" in prior_only.attrs["reason"]


def test_deployment_check_uses_deployment_events_only(world_candidates):
    ev = Evidence(world_candidates)
    ev = ev.append(safety=pd.DataFrame([{"step": 0, "candidate": "ft_real_100",
                                         "executions": 10, "unsafe": 9, "policy": "pi0"}]))
    check = deployment_check(ev, "pi0")
    assert int(check["trials"]) == 0 and not bool(check["passed"])  # execution events unused
    ev = ev.append(deployment_safety=pd.DataFrame([
        {"step": 1, "policy": "pi0", "trials": 200, "unsafe": 1},
        {"step": 2, "policy": "pi0", "trials": 200, "unsafe": 0},
        {"step": 2, "policy": "pi1", "trials": 50, "unsafe": 40}]))
    check = deployment_check(ev, "pi0", alpha_deploy=0.05)
    assert (int(check["trials"]), int(check["unsafe"])) == (400, 1) and bool(check["passed"])
    n, k = ev.safety_counts()  # deployment events never reach the execution-safety counts
    assert k.sum() == 9 and n.sum() == 10
    with pytest.raises(InputError, match=r"^deployment check: method must be one of"):
        deployment_check(ev, "pi0", method="bayes")
    with pytest.raises(InputError, match=r"^deployment check: prior must be"):
        deployment_check(ev, "pi0", prior=(0.0, 1.0))
    with pytest.raises(InputError, match=r"^deployment_safety: unsafe count k exceeds"):
        deployment_check((3, 4), "pi0")


GOOD_DEPLOY = {"step": 3, "policy": "pi3", "trials": 400, "unsafe": 2}


@pytest.mark.parametrize("bad, rule", [
    ({"unsafe": 401}, r"unsafe \(401\) exceeds trials \(400\)"),
    ({"trials": -1, "unsafe": 0}, r"trials must be >= 0 \(negative count -1\)"),
    ({"unsafe": -2}, r"unsafe must be >= 0"),
    ({"unsafe": 1.5}, r"unsafe must be an integer count"),
    ({"step": -1}, r"step must be >= 0"),
    ({"policy": ""}, r"policy is missing"),
    ({"trials": None}, r"trials is missing or not finite"),
])
def test_deployment_table_rules(world_candidates, bad, rule):
    rows = pd.DataFrame([GOOD_DEPLOY, {**GOOD_DEPLOY, **bad}])
    with pytest.raises(InputError, match=rf"^deployment_safety, row 1: {rule}"):
        validate_deployment(rows, world_candidates)
    with pytest.raises(InputError, match=rf"^deployment_safety \(new rows\), row 1: {rule}"):
        Evidence(world_candidates).append(deployment_safety=rows)


def test_deployment_table_columns_and_round_trip(world_candidates):
    with pytest.raises(InputError, match=r"^deployment_safety: missing required column\(s\) "
                                         r"\['trials'\]"):
        validate_deployment(pd.DataFrame([{"step": 0, "policy": "pi0", "unsafe": 0}]),
                            world_candidates)
    ev = Evidence(world_candidates).append(deployment=pd.DataFrame([GOOD_DEPLOY]))
    assert ev.deployment_counts("pi3") == (400, 2) and ev.deployment_counts("pi0") == (0, 0)
    assert "deployment_safety" in ev.tables()
    assert ev.until(3).deployment.empty and len(ev.until(4).deployment) == 1
    again = Evidence.from_tables(world_candidates, ev.tables())
    assert again.deployment.equals(ev.deployment)


def test_world_deployment_risk_and_rows():
    w = SyntheticWorld(seed=4)
    assert w.true_p_deploy() == pytest.approx(0.01)
    w.execute("ft_real_100", 0)
    w.execute("ft_real_100", 1)
    odds = 0.01 / 0.99 * 2.0 ** 2
    assert w.true_p_deploy() == pytest.approx(odds / (1 + odds))
    assert w.true_p_deploy("pi0") == pytest.approx(0.01)
    rows = w.deployment_evaluation(2)
    assert list(rows.columns) == ["step", "policy", "trials", "unsafe"]
    assert rows["policy"].tolist() == [w.policy] and rows["trials"].tolist() == [400]
    assert rows.equals(w.deployment_evaluation(2))  # deterministic for (seed, step, history)
