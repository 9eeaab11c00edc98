"""The closed loop, its log, resume (in-process and after a kill), replay, policies, Dask."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from campaign_logs import log_records

from belief.campaign.log import read_log
from belief.campaign.loop import Campaign, CampaignSettings
from belief.campaign.synthetic import SyntheticWorld
from belief.decision.engine import STOP
from belief.decision.functionals import Lcb
from belief.decision.settings import CVUSettings
from belief.decision.weights import FixedWeights
from belief.errors import InputError
from belief.posterior.fitter import FitSettings

FAST_FIT = FitSettings(draws=200, tune=200)
# short chains: the loop mechanics are tested acting on whatever the fit gives (the
# convergence gate has its own test below)
SETTINGS = CampaignSettings(horizon=2, seed=4, beta=1.0, fit=FAST_FIT, stability_resamples=50,
                            cvu=CVUSettings(n_outcomes=32, max_refits=0), act_on_unreliable=True)


@pytest.fixture(scope="session")
def full_run(tmp_path_factory, fitter):
    out = tmp_path_factory.mktemp("full")
    result = Campaign(SyntheticWorld(seed=4), SETTINGS, out, fitter).run()
    return out, result


def test_loop_dynamics_and_log(full_run, world_candidates):
    out, result = full_run
    recs = log_records(out)
    assert recs[0]["record"] == "header" and recs[-1]["record"] == "deployment_check"
    steps = [r for r in recs if r["record"] == "step"]
    assert [r["step"] for r in steps] == list(range(len(steps)))
    budget = recs[0]["initial_budget"]
    for r in steps:
        assert r["budget"] == budget  # b_t continues from b_{t−1} − ΔC
        assert {k: budget[k] - r["realised_cost"][k] for k in budget} == r["budget_after"]
        budget = r["budget_after"]
        table = pd.DataFrame(r["decision"]).set_index("candidate")
        assert table.loc[r["chosen"], "chosen"] and table.loc[r["chosen"], "feasible"]
        assert set(r["lambda"]) == {"real_h", "compute", "eng_h"}
    assert result.history == [r["chosen"] for r in steps]
    assert float(result.budget.sel(resource="compute")) == pytest.approx(budget["compute"])
    for r in steps:  # a non-repeatable candidate is never chosen twice
        if not world_candidates[r["chosen"]].repeatable:
            assert result.history.count(r["chosen"]) == 1
    assert result.deployment_check is not None
    assert (out / "choices.csv").exists() and (out / "belief.nc").exists()


def test_campaign_outputs_are_a_complete_belief_file_and_evidence_folder(full_run):
    """belief.nc carries candidates (b_0 as [budget]), evidence and realised costs: deciding
    from it continues where the campaign stopped; evidence/ + candidates.toml read back."""
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence_dir import read_evidence_dir
    from belief.workflow.belief_file import load

    out, result = full_run
    fitted = load(out / "belief.nc")
    budget, source = fitted.budget()
    assert "minus realised costs" in source
    np.testing.assert_allclose(budget.values, result.budget.values, rtol=0, atol=1e-9)
    assert result.history and fitted.history() == result.history
    done = {c for c in result.history if not fitted.candidate_set[c].repeatable}
    assert not done & set(fitted.available())
    decision = fitted.decide(beta=0.0, stability_resamples=20)
    assert decision.attrs["chosen"] not in done
    tables = read_evidence_dir(out / "evidence",
                                   load_candidate_file(out / "candidates.toml").candidates)
    assert tables.rows() == fitted.tables.rows() and len(tables.costs) == len(result.history)
    assert fitted.weights()[0].values == SyntheticWorld(seed=4).weight_values  # fixed λ → [weights]
    with pytest.raises(InputError, match="no fit settings"):
        fitted.decide(refit=True, stability_resamples=20)


def test_campaign_outputs_without_steps_or_fixed_weights(full_run, tmp_path):
    """A scarcity λ rule writes no [weights] (and says so); a campaign without steps has an
    empty, complete history even where other evidence names candidates."""
    import shutil

    from belief.campaign.loop import _write_outputs
    from belief.workflow.belief_file import load

    out, result = full_run
    shutil.copy(out / "campaign_log.jsonl", tmp_path / "campaign_log.jsonl")
    cands = load(out / "belief.nc").candidate_set
    _write_outputs(tmp_path, result, cands, {"kind": "scarcity", "kappa": 1.0})
    assert "pass --weights to belief decide" in (tmp_path / "candidates.toml").read_text()
    with pytest.raises(InputError, match="no resource weights"):
        load(tmp_path / "belief.nc").weights()
    log = log_records(out)
    (tmp_path / "campaign_log.jsonl").write_text(json.dumps(log[0]) + "\n")  # header only
    paired = result.evidence.paired
    assert len(paired)  # the evidence still names executed candidates …
    _write_outputs(tmp_path, result, cands, None)
    fitted = load(tmp_path / "belief.nc")
    assert fitted.history() == [] and fitted.available() == tuple(cands.ids)  # … costs decide
    assert pd.read_csv(tmp_path / "evidence" / "costs.csv").empty


def test_resume_in_process_gives_identical_log(full_run, fitter, tmp_path):
    out, _ = full_run
    part = tmp_path / "part"
    c = Campaign(SyntheticWorld(seed=4), SETTINGS, part, fitter)
    c.step()
    resumed = Campaign.resume(part, fitter=fitter)
    assert resumed.step_index == 1 and resumed.history == c.history
    resumed.run()
    assert log_records(part) == log_records(out)


def test_resume_refuses_other_settings_and_broken_records(full_run, fitter, tmp_path):
    out, _ = full_run
    with pytest.raises(InputError, match="settings differ"):
        Campaign.resume(out, settings=replace(SETTINGS, beta=0.5), fitter=fitter)
    broken = tmp_path / "broken"
    broken.mkdir()
    recs = log_records(out)
    recs[2]["step"] = 5
    (broken / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match=r"record 3: step 5 follows step 0: step 1 is missing"):
        Campaign.resume(broken, fitter=fitter)
    # a world changed after it was built cannot be rebuilt from its description
    recs = log_records(out)
    recs[0]["world"]["changed"] = True
    (broken / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match=r"campaign_log.jsonl, record 1 \(header\): the logged "
                                         r"synthetic world cannot be rebuilt"):
        Campaign.resume(broken, fitter=fitter)
    del recs[0]["world"]["changed"]
    recs[0]["world"]["seed"] = -1  # the field a rule names stays in the message
    (broken / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match=r"campaign_log.jsonl, record 1 \(header\): seed: "):
        Campaign.resume(broken, fitter=fitter)


def test_a_log_written_before_a_setting_existed_resumes_with_the_old_behaviour(
        full_run, fitter, tmp_path):
    """A header without the noise-correction fields (and without ``cvu.blas_threads``, a
    result-neutral field) was written before they existed: resumed without settings it runs
    the old behaviour (no correction), resumed with today's default settings it is refused
    as different, and with the correction off it is accepted; the restart check agrees.  A
    header with the correction on but without the regression field cannot say whether the
    regression estimator was corrected: it is refused, naming the field, by resume and by
    replay."""
    from belief.campaign.loop import same_campaign
    from belief.campaign.replay import replay

    out, _ = full_run
    recs = log_records(out)
    cvu = recs[0]["settings"]["cvu"]
    assert cvu["noise_correction"] is SETTINGS.cvu.noise_correction is True
    assert cvu["regression_noise_correction"] is True
    del cvu["regression_noise_correction"]
    del cvu["blas_threads"]
    between = _write(tmp_path / "between", recs)
    lacks = r"record 1 \(header\): the settings lack cvu.regression_noise_correction \("
    with pytest.raises(InputError, match=lacks):
        Campaign.resume(between, fitter=fitter)
    with pytest.raises(InputError, match=lacks + ".*replay it with explicit settings"):
        replay(between)
    del cvu["noise_correction"]
    old = _write(tmp_path / "old", recs)
    resumed = Campaign.resume(old, fitter=fitter)
    assert resumed.settings.cvu.noise_correction is False
    assert resumed.settings.cvu.blas_threads == SETTINGS.cvu.blas_threads
    assert resumed.history == Campaign.resume(out, fitter=fitter).history != []
    with pytest.raises(InputError, match="settings differ"):
        Campaign.resume(old, settings=SETTINGS, fitter=fitter)
    off = replace(SETTINGS, cvu=replace(SETTINGS.cvu, noise_correction=False,
                                        regression_noise_correction=False))
    assert Campaign.resume(old, settings=off, fitter=fitter).settings.cvu == off.cvu
    world = SyntheticWorld(seed=4)
    assert same_campaign(old, world, off) and not same_campaign(old, world, SETTINGS)


def test_a_log_written_with_the_old_default_gate_resumes_with_it(full_run, fitter, tmp_path):
    """A campaign of today's default gate logs ``anytime``; a log of the old default logs
    ``clopper_pearson`` and resumes (and decides its next steps) with it; a header without
    the gate's method ran Clopper–Pearson and resumes with it; resuming either with today's
    default settings is refused as different, and the restart check agrees."""
    from belief.campaign.loop import same_campaign
    from belief.decision.safety import SafetyGate

    out, _ = full_run
    recs = log_records(out)
    assert recs[0]["settings"]["gate"]["method"] == SETTINGS.gate.method == "anytime"
    recs[0]["settings"]["gate"]["method"] = "clopper_pearson"
    old = _write(tmp_path / "old", recs)
    resumed = Campaign.resume(old, fitter=fitter)
    assert resumed.settings.gate == SafetyGate(method="clopper_pearson")
    assert resumed.decision_settings.gate.method == "clopper_pearson"
    del recs[0]["settings"]["gate"]["method"]
    older = _write(tmp_path / "older", recs)
    assert Campaign.resume(older, fitter=fitter).settings.gate.method == "clopper_pearson"
    for folder in (old, older):
        with pytest.raises(InputError, match="settings differ"):
            Campaign.resume(folder, settings=SETTINGS, fitter=fitter)
    cp = replace(SETTINGS, gate=SafetyGate(method="clopper_pearson"))
    world = SyntheticWorld(seed=4)
    assert same_campaign(old, world, cp) and not same_campaign(old, world, SETTINGS)


@pytest.mark.parametrize("section, field", [("cvu", "estimator"), ("cvu", "min_ess"),
                                            ("fit", "max_escalations"), (None, "allocation")])
def test_a_log_without_a_field_whose_old_behaviour_is_unknown_is_refused(
        full_run, fitter, tmp_path, capsys, section, field):
    """A field whose default changed what a campaign does when it was added (and whose old
    behaviour this version cannot run) is not filled: resume with or without settings, and
    replay (the API without settings, the CLI even with flags: exit 2, one line, nothing
    written), refuse the log naming the field once; the restart check says it is another
    campaign."""
    from belief.campaign.loop import same_campaign
    from belief.campaign.replay import replay
    from belief.cli.main import main

    out, _ = full_run
    recs = log_records(out)
    del (recs[0]["settings"][section] if section else recs[0]["settings"])[field]
    old = _write(tmp_path / "old", recs)
    name = f"{section}.{field}" if section else field
    for settings in (None, SETTINGS):
        with pytest.raises(InputError, match=rf"settings lack {re.escape(name)} ") as err:
            Campaign.resume(old, settings=settings, fitter=fitter)
        assert str(err.value).count("record 1") == 1, err.value
    with pytest.raises(InputError, match=rf"settings lack {re.escape(name)} ") as err:
        replay(old)
    assert str(err.value).count("record 1") == 1, err.value
    capsys.readouterr()
    assert main(["replay", str(old), "--weights", "real_h=0.01,compute=0.0002,eng_h=0.004",
                 "--out", str(tmp_path / "replayed")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"settings lack {name} " in lines[0], lines
    assert not (tmp_path / "replayed").exists()
    assert not same_campaign(old, SyntheticWorld(seed=4), SETTINGS)


def _write(path: Path, recs: list[dict], tail: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "campaign_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + tail)
    return path


@pytest.mark.parametrize("edit, rule", [
    (lambda r: r[2].update(step=0), "record 3: step 0 is out of order (expected 1)"),
    (lambda r: r[1].update(chosen="teleport"), "record 2: decision names unknown candidate"),
    (lambda r: r[1]["realised_cost"].update(compute=1e6), "exceeds the budget that was left"),
    (lambda r: r[2]["budget"].update(compute=1.0), "does not follow from the previous record"),
])
def test_log_rules_name_record_and_rule(full_run, tmp_path, edit, rule):
    out, _ = full_run
    recs = log_records(out)
    edit(recs)
    log = read_log(_write(tmp_path / "log", recs))
    assert rule in log.problem
    bad_record = int(log.problem.split()[1].rstrip(":"))
    assert len(log.steps) == bad_record - 2  # nothing past the first broken record
    with pytest.raises(InputError, match=rule.split(":")[0]):
        read_log(tmp_path / "log", strict=True)


def test_truncated_tail_is_reported_and_cut_on_resume(full_run, fitter, tmp_path):
    out, _ = full_run
    recs = log_records(out)[:2]
    path = _write(tmp_path / "trunc", recs, tail=json.dumps(log_records(out)[2])[:40])
    log = read_log(path)
    assert "truncated final record" in log.problem and len(log.steps) == 1
    c = Campaign.resume(path, fitter=fitter)
    assert c.step_index == 1
    assert read_log(path).problem is None  # the broken tail was cut, earlier records intact
    assert log_records(path) == recs


def test_kill_mid_run_then_resume_matches_uninterrupted(tmp_path, fitter):
    """A `belief demo` process is killed after its first step; `--resume` finishes it."""
    args = ["--steps", "2", "--seed", "2", "--draws", "150", "--beta", "0",
            "--act-on-unreliable"]
    # the demo's models are the session's (conftest gives the CLI processes the tests'
    # NUMBA_OPT): compiled once here, the process loads them from the compiled-model cache
    fitter.gains._compiled()
    fitter.exec_risk._compiled()
    killed = tmp_path / "killed"
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "150"}
    proc = subprocess.Popen([sys.executable, "-m", "belief.cli.main", "demo", *args, "--out",
                             str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    log = killed / "campaign_log.jsonl"
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 2:
                break
            if proc.poll() is not None:
                pytest.fail(f"demo ended early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
    finally:  # killed after its first step, or (a failure above) not left running
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    n_before = len(read_log(killed).steps)
    assert n_before == 1  # killed after its first of two steps
    from belief.cli.main import main

    assert main(["demo", "--resume", str(killed)]) == 0
    whole = tmp_path / "whole"
    assert main(["demo", *args, "--out", str(whole)]) == 0
    strip = [{k: v for k, v in r.items() if k != "created"} for r in log_records(whole)]
    got = [{k: v for k, v in r.items() if k != "created"} for r in log_records(killed)]
    # Every choice, outcome, seed, count and string is identical; floats agree to 1e-6
    # relative or 1e-7 absolute: the killed run sampled in another process, and the compiled
    # sampler is not bitwise reproducible across processes (observed: 1e-8 absolute on φ, Q).
    _same(got, strip)


def _same(a, b, path="log"):
    """Recursive equality, floats to 1e-6 relative or 1e-7 absolute; raises naming the path."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), (path, sorted(set(a) ^ set(b)))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-7), (path, a, b)
    else:
        assert a == b, (path, a, b)
    return True


# -- replay -------------------------------------------------------------------------------

def test_replay_same_settings_agrees_and_regret_is_nonnegative(full_run, fitter):
    from belief.campaign.replay import replay

    out, result = full_run
    tree = replay(out, fitter=fitter, seed=SETTINGS.seed)
    steps = tree["steps"].to_dataset()
    assert steps.sizes["step"] == len(result.history) + (result.stop_reason.startswith(
        "economic") or result.stop_reason.startswith("budget"))
    assert bool(steps["agree"].all()) and np.allclose(steps["regret"], 0.0)
    averse = replay(out, fitter=fitter, seed=SETTINGS.seed, functional="cvar:.2", beta=0.0)
    assert averse.attrs["functional"] == "cvar:0.2"  # the canonical string, as decisions say
    s2 = averse["steps"].to_dataset()
    scores = averse["scores"].to_dataset()
    assert scores["q"].dims == ("step", "candidate")
    for t in s2["step"].values:  # regret = max(0, best feasible Q) − Q(logged), from the scores
        q = scores["q"].sel(step=t)
        best = max(0.0, float(q.where(scores["feasible"].sel(step=t).astype(bool)).max()))
        logged = str(s2["logged"].sel(step=t).values)
        q_logged = float(q.sel(candidate=logged)) if logged in q["candidate"] else 0.0
        row = s2.sel(step=t)
        if bool(row["logged_feasible"]):
            assert float(row["regret"]) == pytest.approx(best - q_logged, abs=1e-12)
            assert (float(row["regret"]) > 1e-12) == (not bool(row["agree"]))
    assert averse["budget"].to_dataset()["budget"].sizes["step"] == len(result.history) + 1


def _csv_layout(folder: Path, full_run) -> Path:
    out, _ = full_run
    recs = log_records(out)
    folder.mkdir()
    from belief.inputs.candidate_file import candidates_toml

    (folder / "candidates.toml").write_text(candidates_toml(SyntheticWorld().candidates))
    steps = [r for r in recs if r["record"] == "step"]
    pd.DataFrame([{"step": r["step"], "candidate": r["chosen"], "policy": r["policy"],
                   "policy_after": r["policy_after"],
                   **{f"cost_{k}": v for k, v in r["realised_cost"].items()}}
                  for r in steps]).to_csv(folder / "steps.csv", index=False)
    paired = [row for r in steps for row in r["outcome"].get("paired", [])]
    pd.DataFrame(paired).to_csv(folder / "paired_evaluations.csv", index=False)
    (folder / "initial").mkdir()
    for name, rows in recs[0]["initial_evidence"].items():
        pd.DataFrame(rows).to_csv(folder / "initial" / f"{name}.csv", index=False)
    return folder


def test_replay_accepts_the_plain_csv_layout_and_reports_broken_records(full_run, fitter,
                                                                         tmp_path):
    from belief.campaign.replay import load_campaign

    folder = _csv_layout(tmp_path / "csv", full_run)
    camp = load_campaign(folder)
    assert camp.problem is None and len(camp.steps) == len(full_run[1].history)
    steps = pd.read_csv(folder / "steps.csv")
    # a cost above the budget left is an overrun, recorded as the campaign records it: the
    # step is kept, the budget after it clamped at 0, the probability unknown (no decision)
    bad = steps.copy()
    last = len(bad) - 1
    bad.loc[last, "cost_compute"] = 1e9
    bad.to_csv(folder / "steps.csv", index=False)
    camp = load_campaign(folder)
    assert camp.problem is None and len(camp.steps) == len(bad)
    left = float(camp.budget_before(last).sel(resource="compute"))
    assert camp.steps[last]["overrun"] == {"compute": {"realised": 1e9, "budget_left": left,
                                                       "probability": None}}
    assert all(rec["overrun"] is None for rec in camp.steps[:last])
    assert float(camp.budget_before(len(bad)).sel(resource="compute")) == 0.0
    assert camp.overrun() == (f"step {last}: compute = 1e+09 > {left:g} left (Pr at decision "
                              "unknown)")
    if last > 0:  # a row after an overrun is a broken record, as in the log
        bad = steps.copy()
        bad.loc[0, "cost_compute"] = 1e9
        bad.to_csv(folder / "steps.csv", index=False)
        camp = load_campaign(folder)
        assert "record 2: a step after the budget overrun of step 0" in camp.problem
        assert len(camp.steps) == 1 and camp.steps[0]["overrun"]
    bad = steps.copy()
    bad.loc[0, "candidate"] = "nope"
    bad.to_csv(folder / "steps.csv", index=False)
    assert "record 1: decision names unknown candidate 'nope'" in load_campaign(folder).problem
    bad = steps.drop(index=0)
    bad.to_csv(folder / "steps.csv", index=False)
    assert "step 0 is missing" in load_campaign(folder).problem


def test_csv_layout_reads_model_updates_and_direction_estimates(full_run, tmp_path):
    """The CSV layout's evidence tables include ``model_updates`` and ``direction_estimates``
    (a measured direction used to be dropped silently); an explicit model update is not
    counted twice."""
    from belief.campaign.replay import load_campaign
    from belief.inputs.candidate_file import candidates_toml

    folder = _csv_layout(tmp_path / "csv", full_run)
    (folder / "candidates.toml").write_text(
        candidates_toml(SyntheticWorld.with_latency_probe().candidates))
    policy = pd.read_csv(folder / "steps.csv")["policy"].iloc[0]
    pd.DataFrame([{"step": 0, "candidate": "latency_probe", "direction": "latency",
                   "estimate": 0.31, "se": 0.1, "policy": policy}]).to_csv(
        folder / "direction_estimates.csv", index=False)
    pd.DataFrame([{"step": 0, "candidate": "sim_refresh"}]).to_csv(
        folder / "model_updates.csv", index=False)
    camp = load_campaign(folder)
    assert camp.problem is None
    ev = camp.evidence_before(1)
    assert ev.direction_estimates[["candidate", "direction", "estimate"]].values.tolist() == [
        ["latency_probe", "latency", 0.31]]
    assert ev.model_updates["candidate"].tolist() == ["sim_refresh"]
    assert len(camp.evidence_before(0).direction_estimates) == 0


def test_replay_cli_never_tracebacks_on_malformed_files(tmp_path, capsys):
    from belief.cli.main import main

    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\xffnot json\n")
    assert main(["replay", str(junk), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "first record must be" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_replay_folder_serial_equals_dask(full_run, fitter, tmp_path):
    from belief.campaign import many

    out, _ = full_run
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(2):
        (folder / f"c{i}.jsonl").write_text((out / "campaign_log.jsonl").read_text())
    kwargs = {"fitter": fitter, "seed": 1, "beta": 0.0}
    serial = many.replay_folder(folder, **kwargs)
    dask = many.replay_folder(folder, workers=1, threads=True, **kwargs)
    assert list(serial) == list(dask) == ["c0", "c1"]
    for name in serial:
        xr.testing.assert_identical(serial[name]["scores"].to_dataset(),
                                    dask[name]["scores"].to_dataset())


# -- policies -----------------------------------------------------------------------------

def _decision(u0, mv, feasible, c_lambda=None):
    ids = [f"m{i}" for i in range(len(u0))]
    c = np.ones(len(u0)) * 0.01 if c_lambda is None else np.asarray(c_lambda)
    return xr.Dataset({"u0": ("candidate", np.asarray(u0, float)),
                       "mv": ("candidate", np.asarray(mv, float)),
                       "c_lambda": ("candidate", c), "feasible": ("candidate", feasible)},
                      coords={"candidate": ids}, attrs={"chosen": ids[0], "stop_reason": ""})


def test_policies_choose_within_feasible_and_stop():
    from belief.decision.allocation import choose

    d = _decision([0.05, 0.2, 0.1], [5.0, 2.0, 9.0], np.array([True, False, True]))
    assert choose("u0", d).candidate == "m2"  # m1 has the best U0 but is infeasible
    assert choose("mv", d).candidate == "m2"
    assert choose("round_robin", d, history=("m0",)).candidate == "m2"
    assert choose("round_robin", d, history=("m2",)).candidate == "m0"
    d2 = _decision([-0.1, -0.2, -0.3], [0.5, np.nan, 0.2], np.array([True, True, True]))
    assert choose("u0", d2).stop and choose("mv", d2).stop
    assert not choose("round_robin", d2).stop  # spends the budget regardless of value

    class Oracle:
        def expected_gain(self, m):
            return {"m0": 0.02, "m1": 0.5, "m2": 0.3}[m]

    assert choose("oracle", d, world=Oracle()).candidate == "m2"
    belief = xr.Dataset({"gain": (("sample", "candidate"), np.array([[0.0, 1.0, 0.5]] * 4))},
                        coords={"candidate": ["m0", "m1", "m2"]})
    pick = choose("thompson", d, belief=belief, rng=np.random.default_rng(0))
    assert pick.candidate == "m2"
    none = _decision([0.1], [2.0], np.array([False]))
    for name in ("u0", "mv", "round_robin", "oracle"):
        assert choose(name, none, world=Oracle()).candidate == STOP
    with pytest.raises(InputError, match="unknown allocation policy"):
        choose("greedy", d)


def test_a_baseline_policy_runs_the_loop(fitter):
    s = replace(SETTINGS, allocation="round_robin", beta=0.0, horizon=2)
    result = Campaign(SyntheticWorld(seed=4), s, None, fitter).run()
    assert len(result.history) == 2
    assert result.decisions[0].attrs["allocation"] == "round_robin"
    assert result.decisions[0].attrs["chosen"] == result.history[0]


# -- manual world -------------------------------------------------------------------------

def test_manual_world_from_a_script(fitter, world_candidates, tmp_path):
    from belief.campaign.manual import ManualWorld

    def ask(world, m, step):
        c = world.candidates[m]
        kw = {}
        if c.changes_policy:
            kw.update(control=(30, 100), treated=(40, 100))
        if c.drives_hardware:
            kw["unsafe"] = (0, 10)
        if c.informs:
            kw["estimates"] = {t: 0.3 for t in c.informs}
        return world.outcome(m, step, **kw)

    init = SyntheticWorld(seed=0).initial_evidence()
    world = ManualWorld(world_candidates, "pi0", init, ask=ask)
    s = replace(SETTINGS, horizon=2, beta=0.0,
                weights=SyntheticWorld().weight_values)
    result = Campaign(world, s, tmp_path / "manual", fitter).run()
    assert len(result.history) >= 1
    recs = log_records(tmp_path / "manual")
    assert recs[0]["world"] == {"kind": "manual"}
    with pytest.raises(InputError, match="give the paired evaluation"):
        world.outcome("dr_1e6", 5)


# -- convergence gating -------------------------------------------------------------------

def test_loop_refuses_to_act_on_an_unreliable_belief(fitter, tmp_path):
    tiny = replace(SETTINGS, beta=0.0, horizon=2, fit=FitSettings(draws=15, tune=15),
                   act_on_unreliable=False)
    # no shared fitter: the campaign builds one with the tiny settings (compiles are shared)
    result = Campaign(SyntheticWorld(seed=4), tiny, tmp_path / "gate").run()
    assert result.history == []
    assert result.stop_reason.startswith("refusing to act on an unreliable belief")
    assert "--act-on-unreliable" in result.stop_reason  # the flag a CLI user types
    d = result.decisions[0]
    assert d.attrs["reliable"] == 0 and d.attrs["chosen"] == STOP
    # escalated to the limit, and every attempt recorded (BeliefFitter.fit_model)
    assert result.belief.attrs["gains_attempts"] == 1 + tiny.fit.max_escalations
    assert result.belief.attrs["gains_escalation"].count("attempt") == tiny.fit.max_escalations
    stop = [r for r in log_records(tmp_path / "gate") if r["record"] == "stop"]
    assert stop and stop[0]["stop_reason"].startswith("refusing")
    told = Campaign(SyntheticWorld(seed=4), replace(tiny, act_on_unreliable=True)).run()
    assert len(told.history) >= 1
    assert told.decisions[0].attrs["reliable"] == 0


def test_manual_outcome_then_apply_moves_the_world_and_checks_the_step(fitter, world_candidates,
                                                                      tmp_path):
    """The documented notebook flow: decide, build the outcome, apply; twice."""
    from belief.campaign.manual import ManualWorld

    init = SyntheticWorld(seed=0).initial_evidence()
    world = ManualWorld(world_candidates, "pi0", init)
    s = replace(SETTINGS, horizon=3, beta=0.0, allocation="round_robin",
                weights=SyntheticWorld().weight_values)
    c = Campaign(world, s, tmp_path / "nb", fitter)
    for _ in range(2):
        d = c.decide_next()
        assert not c.record_decision(d)
        m = d.attrs["chosen"]
        cand = world_candidates[m]
        kw = {"control": (30, 100), "treated": (35, 100)} if cand.changes_policy else {}
        if cand.drives_hardware:
            kw["unsafe"] = (0, 10)
        if cand.informs:
            kw["estimates"] = {t: 0.2 for t in cand.informs}
        with pytest.raises(InputError, match="the outcome is for step"):
            c.apply(d, world.outcome(m, c.step_index + 1, **kw))
        c.apply(d, world.outcome(m, c.step_index, **kw))
    assert world.policy == c.policy
    log = read_log(tmp_path / "nb")
    assert log.problem is None and len(log.steps) == 2
    assert [r["policy"] for r in log.steps][1] == log.steps[0]["policy_after"]
    with pytest.raises(InputError, match="a campaign log exists here"):
        Campaign(world, s, tmp_path / "nb", fitter)


def test_manual_uses_the_candidate_files_weights(tmp_path):
    """``belief manual`` without ``--weights`` takes λ from the file's ``[weights]``, as
    ``belief decide`` does; ``--weights`` wins when given."""
    import argparse

    from belief.cli.campaign import manual_campaign
    from belief.inputs.candidate_file import candidates_toml

    world = SyntheticWorld()
    toml = tmp_path / "c.toml"
    toml.write_text(candidates_toml(world.candidates, {"real_h": 0.02, "compute": 0.0003,
                                                       "eng_h": 0.005}))
    args = argparse.Namespace(out=str(tmp_path / "m"), resume=False, candidates=str(toml),
                              policy="pi0", steps=3, beta=1.0, seed=0, draws=50,
                              weights=None, evidence=None, overwrite=False)
    _, campaign = manual_campaign(args)
    assert campaign.settings.weights.values == {"real_h": 0.02, "compute": 0.0003,
                                                "eng_h": 0.005}
    args.out, args.weights = str(tmp_path / "m2"), "real_h=1,compute=2,eng_h=3"
    _, campaign = manual_campaign(args)
    assert campaign.settings.weights.values == {"real_h": 1.0, "compute": 2.0, "eng_h": 3.0}


def test_manual_fits_with_the_candidate_files_priors_and_a_resume_keeps_them(tmp_path):
    """``belief manual`` takes the candidate file's ``[priors.<model>]`` tables into the
    campaign's settings (its fitter fits with them), the log header records them, and the
    settings read back from it have them; priors that do not build are refused at once."""
    import argparse

    from belief.campaign.loop import campaign_fitter, settings_from_dict, settings_to_dict
    from belief.cli.campaign import manual_campaign
    from belief.inputs.candidate_file import candidates_toml

    world = SyntheticWorld()
    toml = tmp_path / "c.toml"
    toml.write_text(candidates_toml(world.candidates, {"real_h": 0.02, "compute": 0.0003,
                                                       "eng_h": 0.005},
                                    priors={"gains": {"effect_mu_sigma": 0.3}}))
    args = argparse.Namespace(out=str(tmp_path / "m"), resume=False, candidates=str(toml),
                              policy="pi0", steps=3, beta=1.0, seed=0, draws=50,
                              weights=None, evidence=None, overwrite=False)
    _, campaign = manual_campaign(args)
    assert campaign.settings.priors["gains"]["effect_mu_sigma"] == 0.3
    assert campaign.fitter.priors_of("gains").effect_mu_sigma == 0.3
    assert campaign.fitter.priors_of("exec_risk") == type(campaign.fitter.priors_of(
        "exec_risk"))()  # a model not named keeps its defaults
    logged = settings_to_dict(campaign.settings)
    back = settings_from_dict(json.loads(json.dumps(logged)))
    assert back == campaign.settings
    assert campaign_fitter(None, world.candidates, back).priors_of("gains") \
        == campaign.fitter.priors_of("gains")
    assert "priors" not in settings_to_dict(CampaignSettings())  # old logs still resume
    with pytest.raises(InputError, match=r"priors\['gains'\].*effect_mu_sigma"):
        CampaignSettings(priors={"gains": {"effect_mu_sigma": -1.0}})
    with pytest.raises(InputError, match=r"gain"):
        CampaignSettings(priors={"gainz": {}})


def test_campaign_settings_are_parsed_once_and_refuse_bad_values():
    s = CampaignSettings(functional="lcb:.2", weights={"real_h": 1, "compute": 1, "eng_h": 1})
    assert s.functional == Lcb(0.2) and isinstance(s.weights, FixedWeights)
    for bad, match in [({"horizon": 0}, r"^horizon: must be an integer >= 1"),
                       ({"beta": -1.0}, r"^beta: must be a finite number >= 0"),
                       ({"functional": "max"}, r"^functional: unknown functional 'max'"),
                       ({"seed": 1.5}, r"^seed: must be an integer"),
                       ({"seed": 10**400}, r"^seed: must be an integer"),  # not OverflowError
                       ({"beta": 10**400}, r"^beta: must be a finite number"),
                       ({"horizon": 10**5000}, r"^horizon: must be an integer.*16610 bits"),
                       ({"allocation": "greedy"}, r"^allocation: unknown allocation policy"),
                       ({"alpha_deploy": 1.0}, r"^alpha_deploy: must be a finite number with 0")]:
        with pytest.raises(InputError, match=match):
            CampaignSettings(**bad)


def test_the_policies_that_use_cvu_keep_beta_and_the_others_decide_without_it():
    """q and plan_voi decide with the campaign's β (CVU computed); the baselines with β = 0 —
    in a campaign's settings and in a benchmark run of many campaigns (policy_run)."""
    from belief.campaign.many import policy_settings
    from belief.decision.allocation import POLICIES, USES_CVU

    for p in POLICIES:
        beta = CampaignSettings(beta=0.7, allocation=p).decision().beta
        assert beta == (0.7 if p in USES_CVU else 0.0), p
        run = policy_settings(CampaignSettings(beta=0.7), p)
        assert run.allocation == p and run.beta == (0.7 if p in USES_CVU else 0.0), p
