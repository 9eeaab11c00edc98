"""The anytime-valid safety gate: the confidence sequence of ``anytime_upper``, the gate's
methods by name, the flag that picks them, and what a campaign log keeps of them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from belief.cli.main import main
from belief.decision.safety import (
    METHODS,
    SafetyGate,
    anytime_upper,
    clopper_pearson_spending_upper,
    clopper_pearson_upper,
    deployment_check,
    deployment_method,
    mixture_log_martingale,
)
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet


def test_bound_is_one_without_data_or_with_every_outcome_unsafe():
    assert anytime_upper(0, 0)[()] == 1.0
    assert anytime_upper([0, 5], [0, 5]).tolist() == [1.0, 1.0]
    assert anytime_upper(0, 0, one_sided=False)[()] == 1.0


@pytest.mark.parametrize("n", [1, 7, 40, 300])
@pytest.mark.parametrize("one_sided", [True, False])
def test_bound_is_monotone_in_k_above_the_rate_and_within_bounds(n, one_sided):
    ks = np.arange(n + 1)
    u = anytime_upper(ks, n, 0.05, one_sided=one_sided)
    assert np.all(np.diff(u) >= 0) and np.all(u >= ks / n) and np.all(u <= 1)
    # the root: the martingale reaches 1/δ at the bound (away from 1, where log(1 − p0) is too
    # steep for the root's tolerance on p0 to fix log M)
    inner = u < 0.999
    logm = mixture_log_martingale(u[inner], ks[inner], n, one_sided=one_sided)
    np.testing.assert_allclose(logm, np.log(20.0), atol=1e-6)
    # decreasing in n at fixed k, increasing as δ falls
    assert anytime_upper(0, n + 10)[()] < anytime_upper(0, n)[()]
    assert np.all(anytime_upper(ks, n, 0.01, one_sided=one_sided) >= u)


def test_bound_is_vectorised_and_the_one_sided_mixture_is_tighter():
    k = np.array([[0, 1, 3], [2, 10, 40]])
    n = np.array([[30, 30, 30], [200, 200, 200]])
    u = anytime_upper(k, n)
    assert u.shape == (2, 3)
    np.testing.assert_allclose(u[1, 2], anytime_upper(40, 200)[()])
    assert np.all(u <= anytime_upper(k, n, one_sided=False))
    # an anytime bound pays for every look: above the one-look bound, below α-spending's
    assert np.all(u > clopper_pearson_upper(k, n))
    assert np.all(u < clopper_pearson_spending_upper(k, n))


def test_bound_refuses_bad_counts_levels_and_mixtures():
    with pytest.raises(InputError, match="exceeds n"):
        anytime_upper(3, 2)
    with pytest.raises(InputError, match="delta"):
        anytime_upper(1, 10, delta=1.0)
    with pytest.raises(InputError, match="mixture"):
        anytime_upper(1, 10, mixture=(0.0, 9.0))
    with pytest.raises(InputError, match="row b"):
        anytime_upper([1, 5], [2, 3], rows=["a", "b"])


def _miss_over_looks(bound, p: float, size: int, looks: int, reps: int, seed: int) -> float:
    """Share of campaigns in which the bound falls below the true p at some look."""
    rng = np.random.default_rng(seed)
    k = np.cumsum(rng.binomial(size, p, size=(reps, looks)), axis=1)
    n = np.broadcast_to(size * np.arange(1, looks + 1), k.shape)
    pairs, inverse = np.unique(np.stack([k.ravel(), n.ravel()]), axis=1, return_inverse=True)
    ucb = bound(pairs[0], pairs[1])[inverse.ravel()].reshape(k.shape)
    return float((ucb < p).any(axis=1).mean())


@pytest.mark.parametrize("p", [0.03, 0.1, 0.3])
def test_anytime_bound_covers_over_every_look_where_clopper_pearson_does_not(p):
    """Pr(∃ look: UCB_n < p) ≤ δ over 30 looks of 10 executions (4000 campaigns, fixed seed):
    the tolerance is 3 Monte Carlo standard errors at δ, √(δ(1 − δ)/4000) ≈ 0.0034.  The
    one-look Clopper–Pearson bound read at the same looks misses far more often (at p = 0.1
    and 0.3)."""
    delta, reps = 0.05, 4000
    tol = 3 * np.sqrt(delta * (1 - delta) / reps)
    miss = _miss_over_looks(lambda k, n: anytime_upper(k, n, delta), p, 10, 30, reps, seed=7)
    assert miss <= delta + tol, miss
    if p >= 0.1:
        cp = _miss_over_looks(lambda k, n: clopper_pearson_upper(k, n, delta), p, 10, 30, reps,
                              seed=7)
        assert cp > delta + tol, cp


def _cands() -> CandidateSet:
    from belief.inputs.candidates import candidates_from_dict

    return candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": [
        {"id": "hw", "role": "diagnosis", "lens": "model", "method": "p", "cost": {},
         "drives_hardware": True, "hardware_group": "arm"},
        {"id": "sim", "role": "diagnosis", "lens": "model", "method": "p", "cost": {}}]})


def test_the_gate_decides_with_the_anytime_bound_by_default_and_names_it():
    cands = _cands()
    n = xr.DataArray([60, 0], coords={"candidate": ["hw", "sim"]}, dims="candidate")
    k = xr.DataArray([0, 0], coords={"candidate": ["hw", "sim"]}, dims="candidate")
    gate = SafetyGate()
    assert gate.method == "anytime" and METHODS == ("anytime", "clopper_pearson", "posterior")
    ds = gate.evaluate(cands, n, k)
    assert float(ds["p_exec_bound"][0]) == float(ds["ucb_anytime"][0]) == pytest.approx(
        anytime_upper(0, 60)[()])
    # 0/60: both open the gate (CP 0.049, anytime 0.065)
    assert bool(ds["safe"][0]) and ds.attrs["guarantee"] == "frequentist, anytime: over every look"
    assert str(ds["safe_reason"].values[0]).startswith("anytime UCB 0.0")
    cp = SafetyGate(method="clopper_pearson").evaluate(cands, n, k)
    assert float(cp["p_exec_bound"][0]) == float(cp["ucb_clopper_pearson"][0])
    assert cp.attrs["guarantee"] == "frequentist, one look"
    assert SafetyGate(method="posterior").guarantee == "Bayesian credible bound, not frequentist"
    # 0/30: the one-look CP bound (0.095) opens the gate, the anytime bound (0.128) does not
    n2 = n.copy(data=[30, 0])
    assert bool(SafetyGate(method="clopper_pearson").evaluate(cands, n2, k)["safe"][0])
    assert not bool(SafetyGate().evaluate(cands, n2, k)["safe"][0])


@pytest.mark.parametrize("kwargs, rule", [
    ({"method": "wald"}, "method must be one of ['anytime', 'clopper_pearson', 'posterior']"),
    ({"delta": 0.0}, "delta must satisfy 0 < delta < 1"),
    ({"alpha_exec": 1.0}, "alpha_exec must satisfy 0 < alpha_exec < 1"),
])
def test_the_gate_refuses_bad_settings(kwargs, rule):
    with pytest.raises(InputError, match=rule.replace("[", r"\[").replace("]", r"\]")):
        SafetyGate(**kwargs)


def test_the_deployment_check_stays_one_look_clopper_pearson():
    assert deployment_method("anytime") == deployment_method("clopper_pearson") == \
        "clopper_pearson"
    assert deployment_method("posterior") == "posterior"
    with pytest.raises(InputError, match="one look: no anytime bound"):
        deployment_check((100, 1), "pi0", method="anytime")


def test_cvu_simulates_the_next_look_with_the_gates_bound():
    from belief.decision.cvu.safety import next_gate

    for method in ("anytime", "clopper_pearson"):
        gate = SafetyGate(method=method)
        after = next_gate(gate, 40, 1, 20, None)
        np.testing.assert_allclose(after, gate.count_bound(1 + np.arange(21), 60))


@pytest.mark.parametrize("argv", [
    ["demo", "--gate", "wald"],
    ["demo", "--gate", "clopper-pearson"],
])
def test_demo_refuses_a_bad_gate_in_one_line_naming_the_flag(argv, tmp_path, capsys):
    out = tmp_path / "d"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("belief: error: --gate: method must be one of ['anytime', "
                          "'clopper_pearson', 'posterior']") and err.count("\n") == 1, err
    assert not out.exists()


def test_manual_and_replay_refuse_a_bad_gate_naming_the_flag(tmp_path, capsys):
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.candidate_file import candidates_toml

    toml = tmp_path / "candidates.toml"
    toml.write_text(candidates_toml(SyntheticWorld().candidates))
    logs = tmp_path / "logs"
    logs.mkdir()
    for argv in (["manual", "--candidates", str(toml), "--gate", "ucb", "--out",
                  str(tmp_path / "m")],
                 ["replay", str(logs), "--gate", "ucb", "--out", str(tmp_path / "r")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("belief: error: --gate: method must be one of") and \
            err.count("\n") == 1, err
    assert not (tmp_path / "m").exists() and not (tmp_path / "r").exists()


def test_the_gate_flag_sets_the_campaign_gate():
    import argparse

    from belief.cli.demo import _settings

    base = dict(steps=None, seed=None, out=None, draws=None, functional=None, allocation=None,
                beta=None, act_on_unreliable=False, costs=None, eps_budget=None,
                heavy_tailed_costs=None)
    assert _settings(argparse.Namespace(**base, gate=None))[0].gate.method == "anytime"
    assert _settings(argparse.Namespace(**base, gate="clopper_pearson"))[0].gate.method == \
        "clopper_pearson"


def test_a_header_with_the_old_default_or_without_a_method_keeps_clopper_pearson():
    """The settings a log's header records: a log of the old default names clopper_pearson
    and keeps it; a header without the gate's method (before it was recorded) ran
    Clopper–Pearson and is read so; today's default is anytime."""
    from belief.campaign.loop import (
        CampaignSettings,
        header_settings,
        logged_settings,
        settings_to_dict,
    )

    today = settings_to_dict(CampaignSettings(weights={"real_h": 1.0}))
    assert today["gate"]["method"] == "anytime"
    old = json.loads(json.dumps(today))
    old["gate"]["method"] = "clopper_pearson"
    assert header_settings({"settings": old}, "log").gate.method == "clopper_pearson"
    del old["gate"]["method"]
    assert logged_settings(old)["gate"]["method"] == "clopper_pearson"
    assert header_settings({"settings": old}, "log").gate == SafetyGate(
        method="clopper_pearson")


def test_the_report_shows_the_deciding_bound_over_the_looks():
    """One row per step with safety events, counts summed up to it, the gate's bound; the
    posterior gate has no path from counts."""
    import pandas as pd

    from belief.report.document import gate_path

    events = pd.DataFrame({"step": [0, 0, 2, 3], "candidate": ["a", "b", "a", "a"],
                           "executions": [40, 10, 20, 20], "unsafe": [1, 0, 0, 1]})
    attrs = {"safety_method": "anytime", "alpha_exec": 0.1, "delta": 0.05}
    path = gate_path(events, ["a", "b"], attrs)
    assert list(path.index) == [0, 2, 3]
    assert path.loc[2, "a"] == f"1/60: {anytime_upper(1, 60)[()]:.3f}"
    assert path.loc[3, "a"] == f"2/80: {anytime_upper(2, 80)[()]:.3f}"
    assert path.loc[3, "b"] == f"0/10: {anytime_upper(0, 10)[()]:.3f}"
    cp = gate_path(events, ["a"], {**attrs, "safety_method": "clopper_pearson"})
    assert cp.loc[3, "a"] == f"2/80: {clopper_pearson_upper(2, 80)[()]:.3f}"
    assert gate_path(events, ["a"], {**attrs, "safety_method": "posterior"}).empty
