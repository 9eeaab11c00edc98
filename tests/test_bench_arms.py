"""The policy benchmark's arm flags refuse bad settings by name, before any campaign runs."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_policies.py"


@pytest.mark.parametrize("arm, needle", [
    ("x:nonsense=1", "FIELD one of"),
    ("x:noise_correction=maybe", "noise_correction takes true or false"),
    ("x:n_outcomes=1", "CVUSettings.n_outcomes: must be an integer >= 2"),
    ("x:estimator=exact", "CVUSettings.estimator"),
    ("x:n_outcomes=48.5", "n_outcomes takes an integer"),
])
def test_cvu_arm_refuses_bad_settings(arm, needle, tmp_path):
    last = _refused(["--cvu-arm", arm], tmp_path)
    assert "--cvu-arm" in last and needle in last, last


def test_arms_of_one_name_are_refused(tmp_path):
    """An arm named like a --continuations row would pool two settings under one name (run
    as the script, the one end-to-end refusal: exit 2, nothing written; the other refusals
    call its ``main`` in this process)."""
    out = tmp_path / "rows.json"
    res = subprocess.run([sys.executable, str(SCRIPT), "--continuations", "lookahead2",
                          "--cvu-arm", "lookahead2:noise_correction=false", "--policies", "",
                          "--world-list", "0", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "two rows named q_lookahead2" in last, last
    assert not out.exists()


CLAIRVOYANT = SCRIPT.parent / "bench_clairvoyant.py"


def test_clairvoyant_without_candidates_reports_a_fraction_of_v_star():
    """Removing options never raises the optimum; removing one no optimal plan uses keeps it."""
    res = subprocess.run([sys.executable, str(CLAIRVOYANT), "--world-list", "8", "--runs", "0",
                          "--without", "latency_probe", "--without", "sim_refresh",
                          "--without", "sim_refresh,cotrain,si_friction,ft_real_100"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    fractions = [float(line.split(":")[1].split()[0]) for line in res.stdout.splitlines()
                 if "without" in line]
    assert len(fractions) == 3
    assert fractions[0] == 1.0  # world 8's optimal plan runs no latency probe
    assert 1.0 > fractions[1] >= fractions[2] > 0.0  # its plan starts with sim_refresh


def test_clairvoyant_without_an_unknown_candidate_is_refused():
    res = subprocess.run([sys.executable, str(CLAIRVOYANT), "--world-list", "8", "--runs", "0",
                          "--without", "nope"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "--without nope: candidates must be among" in res.stderr.strip().splitlines()[-1]


def _refused(flags: list[str], tmp_path: Path, policies: str = "") -> str:
    """Run the policy benchmark's ``main`` with ``flags`` (in this process: a subprocess per
    refusal cost ~10 s of imports each): it must exit 2 and write nothing; its last error
    line."""
    out = tmp_path / "rows.json"
    argv, err = sys.argv, io.StringIO()
    sys.argv = [str(SCRIPT), *flags, "--policies", policies, "--world-list", "0", "--out",
                str(out)]
    try:
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            _bench_module().main()
    finally:
        sys.argv = argv
    assert exc.value.code == 2, err.getvalue()
    assert not out.exists()
    return err.getvalue().strip().splitlines()[-1]


@functools.cache
def _bench_module():
    """bench_policies.py loaded as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("bench_policies", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("flags, needle", [
    (["--stated-arm", "0"], "--stated-arm 0: the prior s.d. must be a finite number > 0"),
    (["--stated-arm", "-0.1"], "--stated-arm -0.1: the prior s.d. must be a finite number > 0"),
    (["--stated-arm", "nan"], "--stated-arm nan: the prior s.d. must be a finite number > 0"),
    (["--stated-sd", "0"], "--stated-sd 0: the prior s.d. must be a finite number > 0"),
    (["--stated-sd", "0.1", "--stated-arm", "0.2"], "--stated-sd states the order effects"),
    (["--stated-sd", "0.1", "--gains-arm", "no:order_effects=false"], "no order effects"),
    (["--past", "-1"], "--past -1: past campaigns per world must be an integer in [0, 16]"),
    (["--past", "17"], "--past 17: past campaigns per world must be an integer in [0, 16]"),
    (["--past", "2", "--from-json", "rows.json"], "--past runs campaigns: --from-json"),
])
def test_stated_flags_refuse_bad_settings(flags, needle, tmp_path):
    last = _refused(flags, tmp_path)
    assert needle in last, last


def test_truth_rule_maps_each_q_row_to_its_rule_on_the_truth():
    """The price-of-not-knowing table compares each Q row with the rule it uses, run on the
    truth: one-step Q (stated or not) is the depth-1 rollout, a rollout row its depth, the
    two-step look-ahead the best plan of three steps; rows of other beliefs or baselines none."""
    mod = _bench_module()
    assert mod.truth_rule("q") == mod.truth_rule("q_stated0.1") == ("rollout", 1)
    assert mod.truth_rule("q_rollout3+psis_stated0.1") == ("rollout", 3)
    assert mod.truth_rule("q_rollout2") == ("rollout", 2)
    assert mod.truth_rule("q_lookahead2+psis") == ("plan", 3)
    assert mod.truth_rule("q_rollout2+regression_stated0.1") == ("rollout", 2)
    assert mod.truth_rule("q_one_step") == ("rollout", 1)
    assert mod.truth_rule("q_past4") == mod.truth_rule("q_stated0.1_past4") == ("rollout", 1)
    assert mod.truth_rule("q_rollout3+psis_past4") == ("rollout", 3)
    for other in ("u0", "oracle", "q_no_order", "q_plugin", "q (Q > 0 stop)"):
        assert mod.truth_rule(other) is None  # by name alone: unknown
    # rows that record their continuation map by what they ran, whatever their name
    assert mod.truth_rule("q_no_order", "one_step", 1) == ("rollout", 1)
    assert mod.truth_rule("q_deep", "rollout", 3) == ("rollout", 3)
    assert mod.truth_rule("q_la", "lookahead2", 2) == ("plan", 3)
    for other in ("u0", "oracle", "q (Q > 0 stop)"):
        assert mod.truth_rule(other, "one_step", 1) is None


def test_clairvoyant_lookahead_and_rollout_flags():
    """--rollout prints Q's rule on the truth as a fraction of V* per world and over worlds;
    a depth < 1 or no noise runs is refused by flag name with exit 2."""
    res = subprocess.run([sys.executable, str(CLAIRVOYANT), "--world-list", "8", "--runs", "3",
                          "--rollout", "1", "--lookahead", "3"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    summary = [line for line in res.stdout.splitlines() if "on the truth:" in line
               and "bootstrap" in line]
    assert [line.split(" on the truth")[0] for line in summary] == ["plan depth 3",
                                                                      "rollout depth 1"]
    assert all(0.5 < float(line.split(": ")[1].split()[0]) < 1.2 for line in summary)
    for flags in (["--rollout", "0"], ["--lookahead", "2", "--runs", "0"], ["--rollout", "x"]):
        res = subprocess.run([sys.executable, str(CLAIRVOYANT), "--world-list", "8", *flags],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 2
        assert f"{flags[0]} " in res.stderr.strip().splitlines()[-1]


def test_campaign_seeds_and_world_means(capsys):
    """Several campaigns per world: seeds v, 1000 + v, …; the limit table averages each world's
    campaigns first and bootstraps worlds, so an unbalanced design (one campaign on world 0,
    three on world 1) gives the mean of the two world means, not of the four rows."""
    from belief.campaign.many import campaign_seed
    from belief.campaign.synthetic import SyntheticWorld
    from belief.errors import InputError
    from belief.lab.clairvoyant import clairvoyant_plan

    assert [campaign_seed(7, k) for k in range(3)] == [7, 1007, 2007]
    with pytest.raises(InputError, match="seeds"):
        campaign_seed(3, -1)
    mod = _bench_module()
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    rows, captured = [], {0: [0.2], 1: [0.5, 0.7, 0.9]}
    for v, caps in captured.items():
        w = SyntheticWorld.varied(v, seed=v)
        budget = dict(w.budget_values)
        v_star = clairvoyant_plan(w, 2, weights=weights, budget=budget).plan.value
        for k, c in enumerate(caps):
            rows.append({"variation": v, "seed": campaign_seed(v, k), "policy": "u0",
                         "horizon": 2, "budget_total": budget,
                         "budget_used": {r: 0.0 for r in budget}, "budget_used_fraction": 0.0,
                         "initial_success": w.initial_success,
                         "final_success": w.initial_success + c * v_star, "steps": 0,
                         "history": [], "gate_violations": 0, "unsafe_events": 0,
                         "step_seconds": [0.1], "trace": []})
    mod.summarise(rows, weights, "test", truth_runs=0)
    out = capsys.readouterr().out
    assert "1–3 campaigns per world" in out
    line = next(x for x in out.splitlines()[out.splitlines().index(next(
        x for x in out.splitlines() if x.startswith("against the limit"))):]
        if x.startswith("u0"))
    # V*−V [CI], V/V* [CI], min V/V*, …
    v_over_vstar, lo, hi, low = (float(t) for t in re.findall(r"-?\d+\.\d+", line)[3:7])
    assert v_over_vstar == pytest.approx((0.2 + 0.7) / 2, abs=1e-3)  # rows would give 0.575
    assert (lo, hi) == (pytest.approx(0.2, abs=1e-3), pytest.approx(0.7, abs=1e-3))
    assert low == pytest.approx(0.2, abs=1e-3)


def test_seeds_flag_is_refused_out_of_range(tmp_path):
    assert "--seeds 0" in _refused(["--seeds", "0"], tmp_path)


@pytest.mark.parametrize("value", ["1,x", "1,1", "-1", "1000"])
def test_campaign_list_is_refused_when_not_distinct_indices(tmp_path, value):
    assert f"--campaign-list {value}" in _refused(["--campaign-list", value], tmp_path)


@pytest.mark.parametrize("flags, needle", [
    (["--campaign-list", "1", "--seeds", "3"], "leave out --seeds"),
    (["--campaign-list", "1", "--from-json", "x.json"], "give one of them"),
    (["--show-steps", "3,x"], "--show-steps 3,x")])
def test_campaign_list_and_show_steps_refusals(tmp_path, flags, needle):
    assert needle in _refused(flags, tmp_path)


def test_from_json_refuses_a_campaign_given_twice(tmp_path):
    """A row without a seed (written before --seeds) is campaign k = 0, seed v: the same
    campaign as a row of seed v, so summarising both files would weigh it twice."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps([{"variation": 4, "policy": "q"}]))
    new.write_text(json.dumps([{"variation": 4, "seed": 1004, "policy": "q"},
                               {"variation": 4, "seed": 4, "policy": "q"}]))
    null = tmp_path / "null.json"  # a stored null seed is seed v too, as summarise reads it
    null.write_text(json.dumps([{"variation": 4, "seed": None, "policy": "q"}]))
    res = subprocess.run([sys.executable, str(SCRIPT), "--from-json", f"{old},{null}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and f"{null} row 0 repeats {old} row 0" in res.stderr
    res = subprocess.run([sys.executable, str(SCRIPT), "--from-json", f"{old},{new}"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert (f"{new} row 1 repeats {old} row 0: world 4, seed 4, policy q"
            in res.stderr.strip().splitlines()[-1])


def test_show_steps_prints_each_campaigns_table_best_first(capsys):
    """--show-steps: a world's campaigns step by step, feasible candidates ordered by their
    value against stopping, infeasible ones and other worlds left out, None printed as nan."""
    from belief.campaign.synthetic import SyntheticWorld
    from belief.lab.clairvoyant import clairvoyant_plan

    mod = _bench_module()
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    w = SyntheticWorld.varied(0, seed=0)
    budget = dict(w.budget_values)
    v_star = clairvoyant_plan(w, 2, weights=weights, budget=budget).plan.value
    a, b, c = "dr_1e6", "sim_refresh", "ft_real_100"
    table = {a: {"feasible": True, "u0": 0.01, "cvu": 0.02, "q": 0.03, "value_vs_stop": 0.04},
             b: {"feasible": True, "u0": -0.01, "cvu": None, "q": None,
                 "value_vs_stop": 0.05},
             "dr_1e7": {"feasible": True, "u0": -0.5, "cvu": 0.0, "q": -0.5,
                        "value_vs_stop": -0.5},
             "da_camera": {"feasible": True, "u0": 0.0, "cvu": 0.0, "q": 0.0,
                           "value_vs_stop": 0.0},
             "cotrain": {"feasible": True, "u0": None, "cvu": None, "q": None,
                         "value_vs_stop": None},
             c: {"feasible": False, "u0": 0.9, "cvu": 0.0, "q": 0.9, "value_vs_stop": 0.9}}
    rows = [{"variation": v, "seed": v, "policy": "q", "horizon": 2, "budget_total": budget,
             "budget_used": {r: 0.0 for r in budget}, "budget_used_fraction": 0.0,
             "initial_success": w.initial_success,
             "final_success": w.initial_success + 0.5 * v_star, "steps": 1,
             "history": [a], "gate_violations": 0, "unsafe_events": 0, "stop_reason": "",
             "step_seconds": [0.1],
             "trace": [{"step": 0, "chosen": a, "true_success_after": 0.4, "max_q": 0.03,
                        "max_value_vs_stop": 0.05, "candidates": table}]} for v in (0, 1)]
    rows[1]["budget_total"] = dict(SyntheticWorld.varied(1, seed=1).budget_values)
    rows[1]["budget_used"] = {r: 0.0 for r in rows[1]["budget_total"]}
    mod.summarise(rows, weights, "test", truth_runs=0, show_steps=[0])
    out = capsys.readouterr().out.split("\nworld 0: true logit gains")[1].splitlines()
    assert out[1].startswith("q, seed 0: V/V* 0.500")
    assert out[2] == f"  step 0: {a}, true J after 0.400"
    assert out[4].split() == [b, "-0.0100", "nan", "nan", "0.0500"]
    assert out[5].split() == [a, "0.0100", "0.0200", "0.0300", "0.0400"]
    # a value of exactly 0 sorts as 0 (above −0.5), one that is not finite last
    assert [x.split()[0] for x in out[6:]] == ["da_camera", "dr_1e7", "cotrain"]
    assert len(out) == 9  # c is not feasible; world 1 is not shown


def test_stop_rule_line_pairs_and_bootstraps_world_means(capsys):
    """The stop-rule line compares Q's campaigns with their prefixes under the former rule
    ('stop when no feasible Q > 0'); with an unbalanced design (one campaign on world 0, three
    on world 1) its difference is the mean of the two world means and its interval resamples
    worlds, so with two worlds its bounds are the two world means."""
    from belief.campaign.many import campaign_seed
    from belief.campaign.synthetic import SyntheticWorld

    mod = _bench_module()
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    # the gain of each campaign's single step, which the former rule (max Q ≤ 0) never takes
    gains = {0: [0.1], 1: [0.2, 0.2, 0.5]}
    rows = []
    for v, xs in gains.items():
        w = SyntheticWorld.varied(v, seed=v)
        budget = dict(w.budget_values)
        zero = {r: 0.0 for r in budget}
        for k, x in enumerate(xs):
            j = w.initial_success + x
            rows.append({"variation": v, "seed": campaign_seed(v, k), "policy": "q",
                         "horizon": 2, "budget_total": budget, "budget_used": zero,
                         "budget_used_fraction": 0.0, "initial_success": w.initial_success,
                         "final_success": j, "steps": 1, "history": ["dr_1e6"],
                         "gate_violations": 0, "unsafe_events": 0, "step_seconds": [0.1],
                         "trace": [{"step": 0, "chosen": "dr_1e6", "max_q": -0.01,
                                    "true_success_after": j, "spent_after": zero}]})
    # a stored row without a trace has no former-rule twin: it stays out of both sides
    rows.append({**rows[-1], "seed": campaign_seed(1, 3),
                 "final_success": rows[-1]["initial_success"] + 0.9})
    del rows[-1]["trace"]
    mod.summarise(rows, weights, "test", truth_runs=0)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("stop rule"))
    assert "steps 1.00 vs 0.00" in line
    diff, lo, hi = (float(t) for t in re.search(
        r"lower by (-?\d+\.\d+) \(90% CI over worlds \[(-?\d+\.\d+), (-?\d+\.\d+)\]",
        line).groups())
    assert diff == pytest.approx((0.1 + 0.3) / 2, abs=1e-4)  # campaigns would give 0.25
    assert (lo, hi) == (pytest.approx(0.1, abs=1e-4), pytest.approx(0.3, abs=1e-4))
    assert line.endswith("campaigns that differ: 4 of 4")


def test_learning_split_adds_up_to_the_gap_to_the_clairvoyant():
    """bench_small_problems' split: per problem 1 − V/V_PI = (1 − V_Bayes/V_PI) +
    (V_Bayes − V)/V_PI, averaged over problems (seeds averaged first); Bayes has no own part."""
    spec = importlib.util.spec_from_file_location(
        "bench_small_problems", SCRIPT.parent / "bench_small_problems.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pi = {"a": (0.10, 0.0), "b": (0.20, 0.0)}
    df = pd.DataFrame([
        {"problem": "a", "policy": "bayes", "value": 0.05, "bayes": 0.05},
        {"problem": "b", "policy": "bayes", "value": 0.15, "bayes": 0.15},
        {"problem": "a", "policy": "q", "value": 0.04, "bayes": 0.05},
        {"problem": "a", "policy": "q", "value": 0.02, "bayes": 0.05},  # a second seed
        {"problem": "b", "policy": "q", "value": 0.15, "bayes": 0.15}])
    split = mod.learning_split(df, pi, ["bayes", "q", "absent"], reps=200).set_index("policy")
    assert list(split.index) == ["bayes", "q"]
    # a: price 0.5; b: price 0.25 → mean 0.375 for every policy
    np.testing.assert_allclose(split.price, 0.375)
    np.testing.assert_allclose(split.loc["bayes", ["captured", "own", "share"]].astype(float),
                               [0.625, 0.0, 1.0])
    # q: a captures 0.03/0.1 = 0.3 (own 0.2), b 0.75 (own 0) → 0.525, own 0.1, share 0.375/0.475
    np.testing.assert_allclose(split.loc["q", ["captured", "own", "share"]].astype(float),
                               [0.525, 0.1, 0.375 / 0.475])
    lo, hi = split.loc["q", "captured_ci"]
    assert 0.3 <= lo <= 0.525 <= hi <= 0.75
    with pytest.raises(ValueError, match="V_PI must be > 0"):
        mod.learning_split(df, {"a": (0.0, 0.0), "b": (0.2, 0.0)}, ["q"])


def test_world_family_flag_rows_and_refusals(tmp_path):
    """``--family``: an unknown family is refused by the parser; rows record their family
    (rows written before families are ``varied``), and rows of two families are not
    summarised together (from JSON: one line, exit 2).  In the bench-test family the
    clairvoyant's V* is the varied world's: knowing P_exec it never runs the test."""
    from belief.campaign.synthetic import benchmark_world
    from belief.errors import InputError
    from belief.lab.clairvoyant import clairvoyant_plan

    assert "invalid choice: 'nope'" in _refused(["--family", "nope"], tmp_path)
    mod = _bench_module()
    assert mod._family([{"variation": 1}]) == "varied"
    assert mod._family([{"variation": 1, "family": "bench_test"}]) == "bench_test"
    with pytest.raises(InputError, match="world families bench_test, varied"):
        mod._family([{"variation": 1}, {"variation": 1, "family": "bench_test"}])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([{"variation": 4, "seed": 4, "policy": "q"}]))
    b.write_text(json.dumps([{"variation": 4, "seed": 4, "policy": "q",
                              "family": "bench_test"}]))  # the same campaign in each family
    last = _refused(["--from-json", f"{a},{b}"], tmp_path)
    assert "--from-json: rows of world families bench_test, varied" in last, last
    last = _refused(["--from-json", str(a), "--family", "bench_test"], tmp_path)
    assert "--family runs campaigns" in last, last
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    for v in (2, 9):
        plans = [clairvoyant_plan(benchmark_world(v, v, f), 8, weights=weights)
                 for f in ("varied", "bench_test")]
        assert plans[0].plan.value == pytest.approx(plans[1].plan.value, rel=1e-12)
        assert "ft_bench" not in plans[1].plan.sequence


def test_bench_test_family_summary_counts_tests_and_openings(capsys):
    """The bench-test family's summary counts, per policy, the campaigns that ran ft_bench,
    those that ran ft_real_100 after it, and ft_real_100 runs where V* uses it."""
    from belief.campaign.synthetic import benchmark_world

    mod = _bench_module()
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    rows = []
    for v, seed, hist in [(0, 0, ["ft_bench", "ft_real_100"]), (0, 1000, ["ft_real_100"]),
                          (5, 5, ["ft_real_100", "dr_1e6", "ft_bench"])]:
        w = benchmark_world(v, seed, "bench_test")
        budget = dict(w.budget_values)
        rows.append({"variation": v, "seed": seed, "policy": "u0", "horizon": 8,
                     "budget_total": budget, "budget_used": {r: 0.0 for r in budget},
                     "budget_used_fraction": 0.0, "initial_success": w.initial_success,
                     "final_success": w.initial_success, "steps": len(hist), "history": hist,
                     "gate_violations": 0, "unsafe_events": 0, "step_seconds": [0.1],
                     "trace": [], "family": "bench_test"})
    mod.summarise(rows, weights, "test", truth_runs=0)
    out = capsys.readouterr().out
    assert "test [world family bench_test]" in out
    # world 0's V* runs ft_real_100 at horizon 8, world 5's does not (see the family's test)
    assert "V* uses ft_real_100 in 1 of 2 worlds" in out
    line = next(x for x in out.splitlines() if x.startswith("u0 ") and " of " in x)
    # world 5's FT ran before its test: not "then FT"
    assert re.sub(r"\s+", " ", line).strip() == "u0 2 of 3 1 2 of 2", line


def _campaign(policy, v, seed, captured, decide=(1.0,), step=(5.0,)):
    return {"policy": policy, "variation": v, "seed": seed, "captured": captured,
            "decide_seconds": list(decide), "step_seconds": list(step)}


def test_peer_table_pairs_world_by_world_on_the_same_seeds():
    """Closed cases: a peer exactly 0.1 below Q in every world has the degenerate paired
    interval [−0.1, −0.1] (unpaired, the worlds' spread would make it wide); with world
    differences 0 and 1 the bootstrap mean takes 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4,
    so its 5 % and 95 % quantiles are 0 and 1; a campaign the default did not run (another
    seed) counts in the peer's V/V* but not in the pairing; "beats" needs 5 paired worlds;
    seconds are means over decisions."""
    mod = _bench_module()
    q = [0.1, 0.5, 0.9, 0.3, 0.7]
    rows = [_campaign("q", v, v, c, decide=(1.0, 3.0)) for v, c in enumerate(q)]
    rows += [_campaign("low", v, v, c - 0.1, decide=(2.0,), step=(4.0, 6.0))
             for v, c in enumerate(q)]
    # two worlds, two seeds each: world 0 differs by 0 and 0, world 1 by 2 and 0 (mean 1)
    rows += [_campaign("q", 10 + v, s, 0.0) for v in (0, 1) for s in (v, 1000 + v)]
    rows += [_campaign("two", 10, s, 0.0) for s in (0, 1000)]
    rows += [_campaign("two", 11, 1, 2.0), _campaign("two", 11, 1001, 0.0),
             _campaign("two", 11, 2001, 9.0)]  # seed 2001: Q has no twin there
    t = mod.peer_table(pd.DataFrame(rows), "q", ["q", "low", "two"])
    low = t.loc["low"]
    assert low["diff"] == pytest.approx(-0.1)
    assert (low.diff_lo, low.diff_hi) == pytest.approx((-0.1, -0.1))
    assert low.below and not low.above and low.paired_worlds == 5
    four = mod.peer_table(pd.DataFrame([r for r in rows if r["variation"] != 4]), "q")
    assert not four.loc["low"].below  # the same interval from 4 worlds is not called
    assert low.captured == pytest.approx(np.mean(q) - 0.1)
    assert (low.s_decision, low.decisions_per_s, low.s_step) == pytest.approx((2.0, 0.5, 5.0))
    two = t.loc["two"]
    assert two.paired_worlds == 2 and two["diff"] == pytest.approx(0.5)
    assert (two.diff_lo, two.diff_hi) == (0.0, 1.0)
    assert not two.below and not two.above
    assert two.captured == pytest.approx((0.0 + (2.0 + 0.0 + 9.0) / 3) / 2)
    assert np.isnan(t.loc["q", "diff"]) and t.loc["q", "s_decision"] == pytest.approx(
        (5 * (1.0 + 3.0) + 4 * 1.0) / 14)  # 10 decisions of five campaigns and 4 of 1 s


@pytest.mark.parametrize("rule, needle", [
    ("ucb_bwk:2", "--policies ucb_bwk:2: ucb_bwk:q needs a UCB quantile q with 0.5 < q < 1"),
    ("ei_cost:0.9", "--policies ei_cost:0.9: ei_cost takes no option"),
    ("pbgi:1", "--policies pbgi:1: pbgi takes no option"),
    ("kg_cost:x", "--policies kg_cost:x: kg_cost takes no option"),
])
def test_bench_refuses_a_bad_peer_rule_naming_the_flag(rule, needle, tmp_path):
    last = _refused([], tmp_path, policies=f"q,{rule}")
    assert needle in last, last
