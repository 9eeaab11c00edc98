"""Budget overruns in campaigns (issue 21): recorded with the decision-time probability, the
budget clamped at 0, the campaign stopped; the log rules and resume.

The fast tests run the session's compiled models on a world whose every execution costs 40×
its nominal amount (every candidate then overruns some resource of b_0 = (12, 300, 20)), with
known costs; the campaign with a cost posterior (one more compile) is slow.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from campaign_logs import log_records

from belief.campaign.log import read_log
from belief.campaign.loop import Campaign, CampaignSettings, settings_from_dict, settings_to_dict
from belief.campaign.overrun import decision_overrun, find_overrun
from belief.campaign.synthetic import SyntheticWorld
from belief.decision.engine import decision_table
from belief.decision.settings import CVUSettings
from belief.errors import InputError
from belief.posterior.fitter import FitSettings

FACTOR = 40.0
SETTINGS = CampaignSettings(horizon=3, seed=4, beta=0.0, fit=FitSettings(draws=200, tune=200),
                            stability_resamples=0, cvu=CVUSettings(n_outcomes=32, max_refits=0),
                            act_on_unreliable=True)


class RepairWorld(SyntheticWorld):
    """The synthetic world with every realised cost FACTOR × nominal (a certain overrun)."""

    def realised_cost(self, cand, step, k):
        return {r: FACTOR * v for r, v in cand.cost.items()}


@pytest.fixture(scope="module")
def overrun_run(tmp_path_factory, fitter):
    out = tmp_path_factory.mktemp("overrun")
    result = Campaign(RepairWorld(seed=4), SETTINGS, out, fitter).run()
    return out, result


def test_an_overrun_is_recorded_with_its_decision_time_probability_and_stops(overrun_run,
                                                                              world_candidates):
    out, result = overrun_run
    recs = log_records(out)
    step = next(r for r in recs if r["record"] == "step")
    chosen, b0 = step["chosen"], recs[0]["initial_budget"]
    nominal = world_candidates[chosen].cost
    over = {r for r in b0 if FACTOR * nominal[r] > b0[r]}
    assert over and set(step["overrun"]) == over  # every overrun resource, and only those
    for r in over:
        o = step["overrun"][r]
        assert o["realised"] == pytest.approx(FACTOR * nominal[r]) and o["budget_left"] == b0[r]
        assert o["probability"] == 0.0  # known costs: the feasible pick could not overrun
        assert step["budget_after"][r] == 0.0  # clamped
    for r in set(b0) - over:
        assert step["budget_after"][r] == pytest.approx(b0[r] - FACTOR * nominal[r])
    stop = recs[2]
    assert stop["record"] == "stop" and stop["step"] == 1 and stop["overrun"] == step["overrun"]
    assert result.stop_reason == stop["stop_reason"]
    assert result.stop_reason.startswith(f"budget overrun at step 0: {chosen!r}")
    for r in over:
        assert f"{r}: realised {FACTOR * nominal[r]:.4g} > {b0[r]:.4g} left" in result.stop_reason
    assert result.history == [chosen] and result.overrun["resources"] == step["overrun"]
    assert recs[-1]["record"] == "deployment_check"
    log = read_log(out)
    assert log.problem is None and log.finished
    costs = pd.read_csv(out / "evidence" / "costs.csv")
    assert costs.loc[0, "candidate"] == chosen


def test_a_logged_overrun_is_read_back_on_resume(overrun_run, fitter):
    out, result = overrun_run
    c = Campaign.resume(out, world=RepairWorld(seed=4), fitter=fitter)
    assert c.finished and c.stop_reason == result.stop_reason
    assert c.overrun == result.overrun
    np.testing.assert_allclose(c.budget.values, result.budget.values)
    assert list(c.costs_table()["candidate"]) == result.history


def test_a_crash_before_the_overrun_stop_record_is_repaired_on_resume(overrun_run, fitter,
                                                                       tmp_path):
    out, result = overrun_run
    recs = log_records(out)[:2]  # header and the overrun step: the stop record was never written
    (tmp_path / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert not read_log(tmp_path).finished
    c = Campaign.resume(tmp_path, world=RepairWorld(seed=4), fitter=fitter)
    assert c.finished and c.stop_reason == result.stop_reason
    log = read_log(tmp_path)
    assert log.problem is None and log.stop["overrun"] == recs[1]["overrun"]


@pytest.mark.parametrize("edit, rule", [
    (lambda s: s.pop("overrun"), "exceeds the budget that was left"),
    (lambda s: s["overrun"][next(iter(s["overrun"]))].update(realised=1.0),
     "does not match the realised cost"),
    (lambda s: s["overrun"][next(iter(s["overrun"]))].update(probability=1.5),
     "probability must be a number in [0, 1]"),
    (lambda s: s["budget_after"].update({next(iter(s["overrun"])): -5.0}),
     "is not max(budget − realised cost, 0)"),
])
def test_log_rules_of_an_overrun_record(overrun_run, tmp_path, edit, rule):
    out, _ = overrun_run
    recs = log_records(out)
    edit(recs[1])
    (tmp_path / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    log = read_log(tmp_path)
    assert log.problem.startswith("record 2: ") and rule in log.problem and not log.steps


def test_no_step_after_an_overrun(overrun_run, tmp_path):
    out, _ = overrun_run
    recs = log_records(out)
    later = dict(recs[1], step=1, budget=recs[1]["budget_after"])
    (tmp_path / "campaign_log.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [recs[0], recs[1], later]))
    assert "record 3: a step record after the budget overrun of step 0" in \
        read_log(tmp_path).problem


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_negative_or_non_finite_realised_costs_are_refused_naming_step_and_candidate(
        fitter, bad):
    from types import SimpleNamespace

    c = Campaign(SyntheticWorld(seed=1), SETTINGS, fitter=fitter)
    out = SimpleNamespace(candidate="dr_1e6", step=0, cost={"compute": bad}, policy="pi0",
                          tables=dict)
    with pytest.raises(InputError, match=r"^outcome, step 0, candidate 'dr_1e6': realised cost "
                                         r"must be a finite number >= 0"):
        c._update("dr_1e6", out)
    assert c.step_index == 0 and c.history == [] and c.costs_table().empty


def test_overrun_helpers_and_settings_round_trip():
    import xarray as xr

    budget = {"a": 2.0, "b": 5.0}
    assert find_overrun({"a": 2.0, "b": 6.0}, budget, {"a": 0.1, "b": 0.25}) == {
        "b": {"realised": 6.0, "budget_left": 5.0, "probability": 0.25}}
    assert find_overrun({"a": 2.0, "b": 5.0}, budget, None) == {}
    d = xr.Dataset({"overrun_a": ("candidate", [0.0, 0.3])}, coords={"candidate": ["x", "y"]})
    assert decision_overrun(d, "y", {"a": 1.0, "b": 9.0}, budget) == {"a": 0.3, "b": 1.0}
    s = CampaignSettings(eps_budget=0.05, heavy_tailed_costs=("real_h",),
                         fit=FitSettings(costs=True))
    back = settings_from_dict(settings_to_dict(s))
    assert back.eps_budget == 0.05 and back.heavy_tailed_costs == ("real_h",) and back.fit.costs
    assert back.decision().eps_budget == 0.05
    assert "eps_budget" not in settings_to_dict(CampaignSettings())  # old logs still resume
    with pytest.raises(InputError, match=r"^eps_budget: must be a finite number"):
        CampaignSettings(eps_budget=1.0)
    with pytest.raises(InputError, match=r"^heavy_tailed_costs: must be a tuple"):
        CampaignSettings(heavy_tailed_costs="real_h")


@pytest.mark.slow
def test_campaign_with_a_cost_posterior_reports_the_overrun_probability_of_its_decision(
        fitter, tmp_path):
    """fit.costs: the cost model is fitted at every step (its prior predictive at step 0) and
    the decision's chance constraint uses it; the overrun carries the chosen row's
    ``overrun_<r>`` of that decision's table."""
    settings = CampaignSettings(horizon=2, seed=4, fit=FitSettings(draws=200, tune=200,
                                                                   costs=True),
                                stability_resamples=0, act_on_unreliable=True,
                                cvu=CVUSettings(n_outcomes=32, max_refits=0), eps_budget=0.05,
                                heavy_tailed_costs=("real_h",))
    result = Campaign(RepairWorld(seed=4), settings, tmp_path, fitter).run()
    d = result.decisions[0]
    assert d.attrs["costs"].startswith("uncertain")
    table = decision_table(d)
    chosen = d.attrs["chosen"]
    step = log_records(tmp_path)[1]
    assert step["overrun"]
    for r, o in step["overrun"].items():
        assert o["probability"] == pytest.approx(float(table.loc[chosen, f"overrun_{r}"]))
        assert o["probability"] <= 0.05  # the pick passed the chance constraint
    assert (table.loc[table["feasible"].astype(bool),
                      [c for c in table.columns if c.startswith("overrun_")]] <= 0.05).all().all()
    assert result.stop_reason.startswith("budget overrun at step 0")
    # replay re-fits the cost model as the campaign did: the same C_λ = λᵀE[ΔC] at step 0
    # (with the known costs it would be λᵀc̃) and the same choice
    from belief.campaign.replay import replay

    tree = replay(tmp_path, fitter=fitter)
    np.testing.assert_allclose(tree["scores"]["c_lambda"].sel(step=0).values,
                               d["c_lambda"].values, rtol=1e-9)
    assert bool(tree["steps"]["agree"].sel(step=0))
    from belief.report.document import render_report
    from belief.workflow.belief_file import load

    fitted = load(tmp_path / "belief.nc")  # the campaign's belief file keeps the cost draws
    assert "cost" in fitted.belief
    text, figures = render_report(fitted, d, "md")
    assert "## Uncertain costs" in text and {"costs", "overrun"} <= set(figures)


def test_replay_of_an_overrun_campaign_stops_at_the_overrun_with_a_clamped_budget(overrun_run,
                                                                                   fitter):
    """The stop record an overrun writes is not a decision to stop: replay re-decides the one
    logged step only, and the budget after it is max(b_0 − ΔC, 0), as the campaign logged."""
    from belief.campaign.replay import replay

    out, _ = overrun_run
    recs = log_records(out)
    step = next(r for r in recs if r["record"] == "step")
    tree = replay(out, fitter=fitter)
    assert tree.attrs["n_steps"] == 1
    assert list(tree["steps"]["step"].values) == [0]
    after = tree["budget"]["budget"].sel(step=1)
    for r, v in step["budget_after"].items():
        assert float(after.sel(resource=r)) == pytest.approx(v)
    assert float(after.min()) == 0.0  # an overrun resource is clamped, never negative


def test_policy_runs_count_what_was_spent_not_the_clamped_budget():
    """many._spent: Σ realised ΔC per resource, so an overrun's full amount is counted (b_0 −
    b_t would stop at b_0 once the budget is clamped at 0)."""
    from types import SimpleNamespace

    from belief.campaign.many import _spent

    table = pd.DataFrame({"step": [0, 1], "candidate": ["x", "y"], "a": [2.0, 9.0],
                          "b": [1.0, 0.5], "policy": ["pi0", "pi1"]})
    campaign = SimpleNamespace(costs_table=lambda: table,
                               candidates=SimpleNamespace(resources=("a", "b")))
    np.testing.assert_array_equal(_spent(campaign), [11.0, 1.5])


def test_remaining_budget_clamps_an_overspent_resource_at_zero_and_says_so():
    """b_t = max(b_0 − Σ realised, 0), as the campaign clamps it after an overrun; the budget's
    ``overspent`` attribute names the resource with the amounts (empty otherwise)."""
    from belief.inputs.candidates import candidates_from_dict
    from belief.inputs.costs import remaining_budget

    cs = candidates_from_dict({"campaign": {"eval_protocol": "E", "resources": ["a", "b"]},
                               "budget": {"a": 10.0, "b": 5.0},
                               "candidate": [{"id": "x", "role": "adaptation", "lens": "data",
                                              "method": "m", "cost": {"a": 4.0, "b": 1.0}}]})
    costs = pd.DataFrame({"step": [0, 1], "candidate": ["x", "x"], "a": [4.0, 9.5],
                          "b": [1.0, 1.0]})
    b = remaining_budget(cs, costs)
    assert b.sel(resource="a") == 0.0 and b.sel(resource="b") == 3.0
    assert b.attrs["overspent"] == "a: spent 13.5 > budget 10"
    assert remaining_budget(cs, costs.iloc[:1]).attrs["overspent"] == ""


def test_decide_on_an_overrun_campaigns_belief_file_clamps_the_budget(overrun_run):
    """``belief decide`` on the belief.nc of a campaign that overran needs no --budget: the
    overspent resources are at 0 (nothing that costs them fits), and budget_source says why."""
    from belief.workflow.belief_file import load

    out, result = overrun_run
    fitted = load(out / "belief.nc")
    decision = fitted.decide(beta=0.0, stability_resamples=0)
    over = list(result.overrun["resources"])
    for r in over:
        assert decision.attrs[f"budget_{r}"] == 0.0
    assert "overrun, clamped at 0 as in the campaign: " in decision.attrs["budget_source"]
    assert all(f"{r}: spent " in decision.attrs["budget_source"] for r in over)


def test_policy_run_fits_with_the_gains_priors_it_is_given(monkeypatch):
    """many.policy_run's ``gains`` overrides reach the campaign's fitter (the policy
    benchmark's ``--gains-arm``: a belief change before/after in one run); without them the
    campaign builds its default fitter."""
    import belief.campaign.loop as loop
    from belief.campaign.loop import CampaignSettings, settings_to_dict
    from belief.campaign.many import policy_run

    seen = []

    class Stop(Exception):
        pass

    def capture(world, settings, out=None, fitter=None, **kw):
        seen.append(fitter)
        raise Stop

    monkeypatch.setattr(loop, "Campaign", capture)
    s = settings_to_dict(CampaignSettings(horizon=1, weights={"real_h": 0.01, "compute": 0.0,
                                                              "eng_h": 0.0}))
    with pytest.raises(Stop):
        policy_run((3, "u0", s, 1.0, {"order_effects": False, "gamma_sd": 0.5}))
    with pytest.raises(Stop):
        policy_run((3, "u0", s, 1.0, {}))
    assert seen[0].gains_priors.order_effects is False and seen[0].gains_priors.gamma_sd == 0.5
    assert seen[1] is None


def test_policy_run_fits_on_the_past_campaigns_it_is_given(monkeypatch):
    """many.policy_run's ``past`` (the policy benchmark's ``--past K``) reaches the campaign's
    fitter as K past campaigns of the same world: every adaptation run once each, in
    different orders, the same history for every campaign seed of a world."""
    import belief.campaign.loop as loop
    from belief.campaign.loop import CampaignSettings, settings_to_dict
    from belief.campaign.many import policy_run

    seen = []

    class Stop(Exception):
        pass

    def capture(world, settings, out=None, fitter=None, **kw):
        seen.append((world, fitter))
        raise Stop

    monkeypatch.setattr(loop, "Campaign", capture)
    s = settings_to_dict(CampaignSettings(horizon=1, weights={"real_h": 0.01, "compute": 0.0,
                                                              "eng_h": 0.0}))
    for seed in (3, 1003):
        with pytest.raises(Stop):
            policy_run((3, "u0", s, 1.0, {}, 0.0, seed, 2))
    with pytest.raises(Stop):
        policy_run((3, "u0", s, 1.0, {}, 0.0, 3, 0))
    (w1, f1), (_, f2), (_, f0) = seen
    assert f0 is None and len(f1.past) == len(f2.past) == 2
    assert f1.gains.campaigns == 2  # the gains model has a campaign level
    adaptations = sorted(c.id for c in w1.candidates if c.role == "adaptation")
    orders = [list(c.evidence.paired.sort_values("step")["candidate"]) for c in f1.past]
    assert all(sorted(o) == adaptations for o in orders) and orders[0] != orders[1]
    for a, b in zip(f1.past, f2.past, strict=True):  # one history per world
        pd.testing.assert_frame_equal(a.evidence.paired, b.evidence.paired)
    assert w1.history == [] and w1.seed == 3  # scripting the past left the world as it was


@pytest.mark.parametrize("k", [-1, 1.5, True, "2"])
def test_random_past_campaigns_refuse_a_bad_count(k, tmp_path):
    from belief.campaign.scripted import random_past_campaigns
    from belief.campaign.synthetic import SyntheticWorld

    with pytest.raises(InputError, match=r"past.*integer >= 0"):
        random_past_campaigns(SyntheticWorld.varied(1), k, tmp_path)
    assert not any(tmp_path.iterdir())
