"""The peer rules in the campaign loop and in replay (one short campaign; the models are
compiled once per session, see conftest)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from campaign_logs import log_records

from belief.campaign.loop import Campaign, CampaignSettings
from belief.campaign.synthetic import SyntheticWorld
from belief.cli.main import main
from belief.decision.settings import CVUSettings
from belief.posterior.fitter import FitSettings

SETTINGS = CampaignSettings(horizon=3, seed=4, beta=0.0, fit=FitSettings(draws=200, tune=200),
                            stability_resamples=0, cvu=CVUSettings(n_outcomes=32, max_refits=0),
                            act_on_unreliable=True, allocation="ucb_bwk")


@pytest.fixture(scope="module")
def bwk_run(tmp_path_factory, fitter):
    out = tmp_path_factory.mktemp("bwk")
    result = Campaign(SyntheticWorld(seed=4), SETTINGS, out, fitter).run()
    return out, result


def test_ucb_bwk_campaign_logs_its_picks_and_replay_rederives_its_duals(bwk_run, fitter):
    """The duals are a function of the realised costs in the log: a replay with the same
    allocation and seed re-takes every logged choice."""
    from belief.campaign.replay import replay

    out, _ = bwk_run
    steps = [r for r in log_records(out) if r["record"] == "step"]
    assert steps and all(r["allocation"] == "ucb_bwk" for r in steps)
    tree = replay(out, fitter=fitter, seed=SETTINGS.seed, allocation="ucb_bwk")
    rows = tree["steps"].to_dataset()
    assert tree.attrs["allocation"] == "ucb_bwk"
    assert list(rows["logged"].values[:len(steps)]) == [r["chosen"] for r in steps]
    assert bool(rows["agree"].all())
    # the same log re-decided by another peer: its picks are that rule's (a stop or a
    # feasible candidate at every step)
    for rule, beta in (("ei_cost", None), ("pbgi", None), ("kg_cost", 1.0)):
        other = replay(out, fitter=fitter, seed=SETTINGS.seed, allocation=rule, beta=beta)
        assert other.attrs["allocation"] == rule
        o = other["steps"].to_dataset()
        assert o.sizes["step"] == rows.sizes["step"]
        feasible = other["scores"].to_dataset()["feasible"]
        for t, rec in zip(o["step"].values, o["recommended"].values, strict=True):
            assert rec == "(stop)" or bool(feasible.sel(step=t, candidate=rec)), (rule, t)
    # kg_cost decided with CVU: the scores hold it
    assert other.attrs["beta"] == 1.0


def test_replay_allocation_is_checked_before_any_fit(tmp_path, capsys):
    from belief.inputs.candidate_file import candidates_toml

    cands = SyntheticWorld().candidates
    (tmp_path / "candidates.toml").write_text(candidates_toml(cands))
    pd.DataFrame([{"step": 0, "candidate": cands.ids[0], "policy": "pi0", "policy_after": "pi0",
                   **{f"cost_{r}": 0.0 for r in cands.resources}}]).to_csv(
        tmp_path / "steps.csv", index=False)
    for bad, flag in (("ucb_bwk:2", "--allocation"), ("kg_cost", "--beta")):
        assert main(["replay", str(tmp_path), "--allocation", bad, "--beta", "0", "--out",
                     str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"belief: error: {flag}: "), err
        assert err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_demo_refuses_a_bad_peer_option_naming_the_flag(tmp_path, capsys):
    assert main(["demo", "--allocation", "ucb_bwk:0.2", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("belief: error: --allocation: ucb_bwk:q needs a UCB quantile")
    assert not (tmp_path / "d").exists()


def test_kg_cost_decides_with_cvu():
    s = replace(SETTINGS, allocation="kg_cost", beta=1.0)
    assert s.decision().beta == 1.0


@pytest.mark.parametrize("rule", ["ei_cost", "kg_cost", "ucb_bwk", "ucb_bwk:0.8", "pbgi"])
def test_demo_and_replay_flags_take_each_peer_rule(rule):
    """``belief demo --allocation RULE`` runs its campaign with RULE and ``belief replay
    --allocation RULE`` re-decides with it (the settings both build before any fit)."""
    from belief.cli.campaign import _replay_settings
    from belief.cli.demo import _settings
    from belief.cli.main import build_parser

    assert _settings(build_parser().parse_args(["demo", "--allocation", rule]))[0].allocation \
        == rule
    args = build_parser().parse_args(["replay", "log", "--out", "o", "--allocation", rule,
                                      "--beta", "1"])
    assert _replay_settings(args, CampaignSettings()).allocation == rule


@pytest.mark.parametrize("flags, flag, needle", [
    (["--allocation", "ei_cost:0.9"], "--allocation", "ei_cost takes no option"),
    (["--allocation", "pbgi:2"], "--allocation", "pbgi takes no option"),
    (["--allocation", "kg_cost:1"], "--allocation", "kg_cost takes no option"),
    (["--allocation", "ucb_bwk:1"], "--allocation", "ucb_bwk:q needs a UCB quantile"),
    (["--allocation", "ucb_bwk:x"], "--allocation", "ucb_bwk:q needs a UCB quantile"),
    (["--allocation", "kg_cost", "--beta", "0"], "--beta", "kg_cost allocation needs CVU"),
    (["--allocation", "kg_cost", "--continuation", "lookahead2"], "--continuation", ""),
])
def test_demo_refuses_each_bad_peer_setting_in_one_line(flags, flag, needle, tmp_path, capsys):
    assert main(["demo", *flags, "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"belief: error: {flag}: "), err
    assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "d").exists()
