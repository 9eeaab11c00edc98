from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy import stats

from belief.cli.main import main
from belief.workflow.belief_file import load_belief


def test_demo_end_to_end_small(tmp_path):
    out = tmp_path / "demo"
    code = main(["demo", "--steps", "3", "--seed", "1", "--draws", "200", "--act-on-unreliable",
                 "--out", str(out)])
    assert code == 0
    records = [json.loads(line) for line in (out / "campaign_log.jsonl").read_text().splitlines()]
    header = records.pop(0)
    assert header["record"] == "header" and header["settings"]["horizon"] == 3
    final = records.pop()  # the deployment chance constraint on π_T, checked at the stop
    assert final["record"] == "deployment_check" and final["policy"] == records[-1].get(
        "policy_after", records[-1]["policy"])
    check = final["deployment_check"]
    k = check["unsafe"]
    assert check["trials"] == 400 and 0 <= k <= 400
    assert check["ucb_clopper_pearson"] == pytest.approx(stats.beta.ppf(0.95, k + 1, 400 - k))
    assert check["passed"] == int(check["ucb_clopper_pearson"] <= 0.05)  # the default method
    assert check["reason"].startswith(("pass", "fail")) and "α_deploy 0.05" in check["reason"]
    assert (out / "evidence" / "deployment_safety.csv").exists()
    assert [r["step"] for r in records] == list(range(len(records)))
    assert 1 <= len(records) <= 3
    assert {r["record"] for r in records} <= {"step", "stop"}
    for r in records:
        if r["record"] == "step":
            spent = {k: r["budget"][k] - r["budget_after"][k] for k in r["budget"]}
            assert spent == r["realised_cost"]
            table = pd.read_csv(out / "decisions" / f"step_{r['step']:03d}.csv")
            assert table.loc[table["chosen"], "candidate"].tolist() == [r["chosen"]]
            assert table.loc[table["chosen"], "feasible"].all()
    belief, _idata = load_belief(out / "belief.nc")
    assert belief["gain"].dims == ("sample", "candidate")
    assert (out / "evidence" / "paired_evaluations.csv").exists()


def test_demo_rejects_bad_functional(tmp_path, capsys):
    code = main(["demo", "--steps", "1", "--functional", "median", "--out", str(tmp_path)])
    assert code == 2
    assert "unknown functional 'median'" in capsys.readouterr().err


@pytest.mark.parametrize("flags, rule", [
    (["--costs", "--epsilon-budget", "1.0"], "--epsilon-budget: must be a finite number with "
                                             "0 <= value < 1, got 1.0"),
    (["--costs", "--epsilon-budget", "nan"], "--epsilon-budget: must be a finite number"),
    (["--epsilon-budget", "0.05"], "--epsilon-budget: acts on the cost posterior: give --costs"),
    (["--costs", "--heavy-tailed-costs", "gpu"], "--heavy-tailed-costs: names ['gpu'], not "
                                                 "resources of the candidates"),
    (["--heavy-tailed-costs", "real_h"], "--heavy-tailed-costs: shapes the cost posterior"),
])
def test_campaign_cost_flags_are_checked_once_before_anything_runs(flags, rule, tmp_path,
                                                                   capsys):
    """demo and manual: one line naming the flag, exit 2, nothing written."""
    toml = tmp_path / "candidates.toml"
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.candidate_file import candidates_toml

    toml.write_text(candidates_toml(SyntheticWorld().candidates))
    for argv in (["demo", *flags, "--out", str(tmp_path / "d")],
                 ["manual", "--candidates", str(toml), *flags, "--out", str(tmp_path / "m")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"belief: error: {rule}") and err.count("\n") == 1, err
    assert not (tmp_path / "d").exists() and not (tmp_path / "m").exists()


def test_campaign_cost_flags_set_the_campaign_settings():
    """--stochastic-costs gives the demo's world stochastic costs; --costs, --epsilon-budget
    and --heavy-tailed-costs are FitSettings.costs, eps_budget and heavy_tailed_costs."""
    from belief.cli.demo import _settings
    from belief.cli.main import build_parser

    args = build_parser().parse_args(["demo", "--stochastic-costs", "--costs",
                                      "--epsilon-budget", "0.05",
                                      "--heavy-tailed-costs", "real_h"])
    settings, _ = _settings(args)
    assert args.stochastic_costs and settings.fit.costs
    assert settings.eps_budget == 0.05 and settings.heavy_tailed_costs == ("real_h",)
    plain, _ = _settings(build_parser().parse_args(["demo"]))
    assert not plain.fit.costs and plain.eps_budget == 0.0 and plain.heavy_tailed_costs == ()


def test_replay_epsilon_budget_is_checked_before_any_fit(tmp_path, capsys):
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.candidate_file import candidates_toml

    cands = SyntheticWorld().candidates
    (tmp_path / "candidates.toml").write_text(candidates_toml(cands))
    pd.DataFrame([{"step": 0, "candidate": cands.ids[0], "policy": "pi0", "policy_after": "pi0",
                   **{f"cost_{r}": 0.0 for r in cands.resources}}]).to_csv(
        tmp_path / "steps.csv", index=False)
    assert main(["replay", str(tmp_path), "--epsilon-budget", "1.5", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("belief: error: --epsilon-budget: must be a finite number with 0 <= ")
    assert not (tmp_path / "o").exists()
