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
