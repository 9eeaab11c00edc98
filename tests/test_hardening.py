"""Hardening (issue 19): the campaign commands, every output path, signals, duplicated evidence
and the messages a user reads — one test (or a few) per numbered item of the issue.

Commands run in-process (``belief.cli.main.main``) so that the compiled models are shared with
the session; the two tests about Ctrl-C and a second process use real processes.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from campaign_logs import log_records
from scipy import stats

from belief.campaign.log import read_log
from belief.campaign.loop import Campaign, CampaignSettings
from belief.campaign.synthetic import SyntheticWorld
from belief.cli.main import main
from belief.errors import InputError
from belief.inputs.example import example_paths
from belief.posterior.fitter import BeliefFitter, FitSettings

matplotlib.use("Agg")

EVIDENCE, CANDIDATES = example_paths()
TINY = CampaignSettings(horizon=2, seed=5, beta=0.0, fit=FitSettings(draws=150, tune=150),
                        stability_resamples=20, act_on_unreliable=True)


# -- shared fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, world_candidates):
    """A finished two-step campaign (log, decisions, evidence, belief.nc) on the synthetic
    world; its models are the session's compiled ones."""
    out = tmp_path_factory.mktemp("tiny") / "run"
    fitter = BeliefFitter(world_candidates, TINY.fit)
    Campaign(SyntheticWorld(seed=5), TINY, out, fitter).run()
    return out


@pytest.fixture(scope="module")
def tiny_decision(tiny_run, tmp_path_factory):
    """``belief decide`` on the campaign's belief.nc (β = 0: no CVU)."""
    out = tmp_path_factory.mktemp("decision") / "d"
    assert main(["decide", str(tiny_run / "belief.nc"), "--beta", "0", "--out", str(out)]) == 0
    return out


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a hash of its bytes and its mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
    return out


def refused(capsys, argv, *needles):
    """Run the CLI; expect exit code 2 and one line on stderr naming every needle."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "\n" not in err and ": error: " in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# -- 1. Ctrl-C -------------------------------------------------------------------------------------
def test_ctrl_c_during_sampling_raises_instead_of_returning_a_short_trace(fitter,
                                                                          campaign_evidence):
    """nutpie catches SIGINT and returns the draws made so far; the sampling helper must let the
    interrupt through (before the fix a short trace came back as if it were the fit)."""
    ev, world = campaign_evidence
    fitter.gains._compiled()  # compiled before the timer starts
    # a test run started in the background (`cmd &`, nohup) inherits SIGINT ignored, and
    # Python then installs no handler: give this test the interactive default explicitly
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main_id = threading.main_thread().ident
    timer = threading.Timer(0.7, signal.pthread_kill, (main_id, signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fitter.gains.fit(ev.paired, world.policy, policy_evals=ev.policy_evals,
                             draws=200_000, tune=1000, chains=2, seed=0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 30  # 200 000 draws take minutes: it stopped at once


def _interactive_sigint() -> None:
    """In the child before exec: SIGINT back to its default, as in an interactive shell (a
    child of a test run started with `&` or nohup would inherit it ignored, and Python would
    then install no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_demo_with_exit_130_and_a_resumable_log(tmp_path, fitter):
    """A real `belief demo` process gets SIGINT while it fits: it stops within seconds with exit
    code 130, one line on stderr, no traceback, no half-written file, and a log that resumes."""
    # The demo's two models are the session's (same candidates and priors; conftest gives the
    # CLI processes the tests' NUMBA_OPT): compiled here once for the session, the process
    # loads them from the compiled-model cache instead of compiling them a second time.
    fitter.gains._compiled()
    fitter.exec_risk._compiled()
    out = tmp_path / "run"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "belief.cli.main", "demo", "--steps", "3",
                             "--draws", "3000", "--beta", "0", "--act-on-unreliable", "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=_interactive_sigint)
    try:
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.time() + 400
        while not any("compiled in" in line for line in seen):
            assert proc.poll() is None, proc.stderr.read()
            assert time.time() < deadline, "the demo did not compile in time"
            time.sleep(0.05)
        time.sleep(1.0)  # into the first fit (3000 draws x 2 chains, plus the 2x/4x refits)
        proc.send_signal(signal.SIGINT)
        t0 = time.time()
        code = proc.wait(timeout=60)
        stopped_after = time.time() - t0
    finally:
        if proc.poll() is None:  # a failed check above: no demo left running after the test
            proc.kill()
            proc.wait()
    err = proc.stderr.read().strip()
    assert code == 130, err
    assert stopped_after < 30, stopped_after
    assert err.count("\n") == 0 and err.startswith("belief: interrupted (Ctrl-C)"), err
    assert f"belief demo --resume {out}" in err and "Traceback" not in err
    log = read_log(out)
    assert log.problem is None and log.stop is None and log.deployment is None
    assert not [p for p in out.rglob("*") if p.name.endswith((".tmp", ".stage"))]
    assert len(list((out / "decisions").glob("step_*.csv"))) <= len(log.steps) + 1
    assert not (out / "belief.nc").exists()  # the final outputs are written at the end only
    resumed = Campaign.resume(out)
    assert resumed.step_index == len(log.steps) and not resumed.finished
    resumed.release()


@pytest.mark.parametrize("given", [None, "2"])
def test_the_belief_command_compiles_at_numba_level_1_unless_numba_opt_is_set(given,
                                                                              monkeypatch):
    """``belief`` sets NUMBA_OPT=1 before its command runs (the tests' CLI processes get the
    in-process level 3 from conftest instead, so this default is checked here)."""
    import belief.cli.main as cli

    if given is None:
        monkeypatch.delenv("NUMBA_OPT", raising=False)
    else:
        monkeypatch.setenv("NUMBA_OPT", given)
    seen = []
    monkeypatch.setattr(cli, "main", lambda: seen.append(os.environ.get("NUMBA_OPT")) or 0)
    monkeypatch.setattr(sys, "argv", ["belief"])  # no command: the ordinary exit
    with pytest.raises(SystemExit) as exit_:
        cli.run()
    assert exit_.value.code == 0
    assert seen == ["1" if given is None else given]


# -- 2. demo --out ---------------------------------------------------------------------------------
def test_demo_refuses_a_folder_that_is_not_this_campaigns(tmp_path, tiny_run, capsys,
                                                          no_compute):
    mine = tmp_path / "mine"
    (mine / "evidence").mkdir(parents=True)
    (mine / "candidates.toml").write_text("# my own candidates\n")
    (mine / "evidence" / "paired_evaluations.csv").write_text("my,data\n1,2\n")
    (mine / "belief.nc").write_bytes(b"my belief")
    before = snapshot(mine)
    refused(capsys, ["demo", "--out", str(mine)], "--out", "not empty", "--overwrite")
    assert snapshot(mine) == before
    other = tmp_path / "other"
    shutil.copytree(tiny_run, other)  # a campaign of another world (seed 5) and settings
    before = snapshot(other)
    refused(capsys, ["demo", "--out", str(other)], "another campaign", "--resume",
            "--overwrite")
    assert snapshot(other) == before


def test_demo_restarts_its_own_campaign_and_overwrites_only_when_told(tmp_path, capsys):
    args = ["demo", "--steps", "1", "--seed", "3", "--draws", "100", "--beta", "0",
            "--act-on-unreliable"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "candidates.toml").write_text("# mine")
    assert main([*args, "--out", str(mine), "--overwrite"]) == 0  # told: files replaced
    assert (mine / "notes.txt").read_text() == "keep me"  # ... only those with its names
    assert "[[candidate]]" in (mine / "candidates.toml").read_text()
    first = (mine / "campaign_log.jsonl").read_text()
    (mine / "decisions" / "step_007.csv").write_text("stale\n")  # a step of an earlier run
    capsys.readouterr()
    assert main([*args, "--out", str(mine)]) == 0  # the same campaign: it starts again
    assert "holds this same campaign: starting it again" in capsys.readouterr().out
    assert (mine / "campaign_log.jsonl").read_text() == first
    assert not (mine / "decisions" / "step_007.csv").exists()  # what it owns is cleared first
    assert (mine / "notes.txt").read_text() == "keep me"


# -- 3. unwritable outputs -------------------------------------------------------------------------
@pytest.fixture
def paths(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "rep_files").write_text("a file where the figures' folder would go")
    return SimpleNamespace(root=tmp_path, file=afile, folder=folder, under=afile / "sub",
                           under_nc=afile / "b.nc", under_html=afile / "r.html",
                           md=tmp_path / "rep.md")


@pytest.mark.parametrize("case", [
    ("fit", "folder", "is a folder, expected a file name"),
    ("fit", "under_nc", "is a file, not a folder"),
    ("decide", "file", "is a file, expected a folder"),
    ("decide", "under", "is a file, not a folder"),
    ("report", "folder", "is a folder, expected a file name"),
    ("report", "md", "rep_files is a file, expected a folder"),
    ("report", "under_html", "is a file, not a folder"),
    ("demo", "file", "is a file, expected a folder"),
    ("demo", "under", "is a file, not a folder"),
    ("replay", "file", "is a file, expected a folder"),
    ("manual", "under", "is a file, not a folder"),
], ids=lambda c: f"{c[0]}-{c[1]}")
def test_unwritable_outputs_are_refused_before_any_work(case, paths, tiny_run, capsys,
                                                        no_compute, monkeypatch):
    command, kind, needle = case
    if command in ("decide", "report"):  # the belief is never even read
        monkeypatch.setattr("belief.workflow.belief_file.load", lambda *a, **k: 1 / 0)
    target = str(getattr(paths, kind))
    argv = {"fit": ["fit", str(EVIDENCE), "--candidates", str(CANDIDATES), "--out", target],
            "decide": ["decide", str(tiny_run / "belief.nc"), "--out", target],
            "report": ["report", str(tiny_run / "belief.nc"), "--out", target],
            "demo": ["demo", "--out", target],
            "replay": ["replay", str(tiny_run), "--out", target],
            "manual": ["manual", "--candidates", str(CANDIDATES), "--out", target]}[command]
    before = snapshot(paths.root)
    refused(capsys, argv, "--out", needle)
    assert snapshot(paths.root) == before


def test_a_folder_without_write_permission_is_refused(paths, tiny_run, capsys, no_compute,
                                                      monkeypatch):
    """A read-only folder (simulated through access(2): the tests may run as root, for whom
    every folder is writable)."""
    real = os.access
    ro = str(paths.folder)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (False if str(p) == ro and
                                                              mode & os.W_OK else
                                                              real(p, mode, **kw)))
    refused(capsys, ["fit", str(EVIDENCE), "--candidates", str(CANDIDATES), "--out",
                     str(paths.folder / "b.nc")], "--out", "cannot write in", ro)
    refused(capsys, ["decide", str(tiny_run / "belief.nc"), "--out", str(paths.folder)],
            "--out", "cannot write in")
    refused(capsys, ["demo", "--out", str(paths.folder / "new")], "--out", "cannot write in")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_a_read_only_folder_is_refused(paths, capsys, no_compute):
    paths.folder.chmod(0o555)
    try:
        refused(capsys, ["demo", "--out", str(paths.folder / "x")], "--out", "cannot write")
    finally:
        paths.folder.chmod(0o755)


# -- 4. duplicated evidence ------------------------------------------------------------------------
def test_duplicate_rows_are_refused_unless_run_ids_tell_them_apart(world_candidates):
    from belief.decision.safety import clopper_pearson_upper
    from belief.inputs.evidence import Evidence

    row = pd.DataFrame([{"step": 0, "candidate": "si_friction", "executions": 70,
                         "unsafe": 2}])
    twice = pd.concat([row, row])
    with pytest.raises(InputError, match=r"^safety_events \(new rows\), row 1: exact duplicate "
                                         r"of row 0 .*run_id"):
        Evidence(world_candidates).append(safety=twice)
    once = Evidence(world_candidates).append(safety=row)
    with pytest.raises(InputError, match=r"^safety_events, row 1: exact duplicate of row 0"):
        once.append(safety=row)  # the same rows appended again
    two_runs = Evidence(world_candidates).append(safety=twice.assign(run_id=["a", "b"]))
    n, k = two_runs.safety_counts()
    i = world_candidates.index("si_friction")
    assert (n[i], k[i]) == (140, 4)
    # what was at stake: the bound of 2/70 (0.087) would have fallen to that of 4/140 (0.064)
    assert clopper_pearson_upper(2, 70)[()] == pytest.approx(0.0872, abs=1e-4)
    assert clopper_pearson_upper(4, 140)[()] == pytest.approx(0.0642, abs=1e-4)
    with pytest.raises(InputError, match=r"row 1: run_id 'a' is also on row 0"):
        Evidence(world_candidates).append(safety=twice.assign(run_id=["a", "a"]))
    paired = pd.DataFrame([{"step": 1, "candidate": "dr_1e6", "policy": "pi0",
                            "eval_protocol": "pick_place_v1", "control_successes": 30,
                            "control_trials": 100, "treated_successes": 40,
                            "treated_trials": 100, "treated_policy": "pi1"}])
    with pytest.raises(InputError, match=r"^paired_evaluations \(new rows\), row 1: exact "
                                         "duplicate of row 0"):
        Evidence(world_candidates).append(paired=pd.concat([paired, paired]))


def test_fit_refuses_a_duplicated_csv_row_naming_its_line(tmp_path, capsys, no_compute):
    folder = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, folder)
    safety = pd.read_csv(folder / "safety_events.csv")
    pd.concat([safety, safety.iloc[[2]]]).to_csv(folder / "safety_events.csv", index=False)
    n = len(safety)
    refused(capsys, ["fit", str(folder), "--candidates", str(CANDIDATES), "--out",
                     str(tmp_path / "b.nc")], "safety_events.csv",
            f"row {n} (line {n + 2} of the file)", "exact duplicate of row 2", "run_id")
    assert not (tmp_path / "b.nc").exists()


# -- 5. belief manual ----------------------------------------------------------------------------
def test_manual_prompt_refuses_nan_costs_and_reports_the_end_of_input():
    from belief.campaign.manual import ManualWorld, prompt_outcome
    from belief.inputs.candidate_file import load_candidate_file

    cfile = load_candidate_file(CANDIDATES)  # the example: same candidates, with a [budget]
    world = ManualWorld(cfile.candidates, weights=cfile.weights)
    answers = iter(["nan", "inf", "0.5", "", ""])  # two refused costs, then real_h = 0.5
    said: list[str] = []
    ask = prompt_outcome(input_fn=lambda prompt: next(answers), print_fn=said.append)
    out = ask(world, "sim_refresh", 0)
    assert out.cost["real_h"] == 0.5 and all(np.isfinite(v) for v in out.cost.values())
    assert sum("expected a finite number >= 0" in s for s in said) == 2

    def eof(prompt):
        raise EOFError

    with pytest.raises(InputError, match=r"^manual input: realised cost real_h: the input "
                                         "ended before an answer"):
        prompt_outcome(input_fn=eof)(world, "sim_refresh", 0)
    with pytest.raises(InputError, match="realised cost must be a finite number >= 0"):
        world.outcome("sim_refresh", 0, cost={"real_h": float("nan")})
    campaign = Campaign(world, CampaignSettings(horizon=2), fitter=None)
    bad = SimpleNamespace(candidate="sim_refresh", step=0, cost={"real_h": float("nan")},
                          policy="pi0", tables=dict)
    with pytest.raises(InputError, match="realised cost must be a finite number"):
        campaign._update("sim_refresh", bad)


def test_manual_takes_initial_evidence_says_why_hardware_is_blocked_and_stops_on_eof(
        tmp_path, capsys, monkeypatch):
    def eof(prompt=""):
        raise EOFError

    monkeypatch.setattr("builtins.input", eof)
    # cheap λ: an adaptation is worth doing at step 0, so the loop asks for its outcome
    # (4 chains × 100 draws cannot reach ESS ≥ 400: acting on that belief is allowed here)
    base = ["manual", "--candidates", str(CANDIDATES), "--steps", "2", "--draws", "100",
            "--beta", "0", "--weights", "real_h=0.001,compute=0.00001,eng_h=0.0001",
            "--act-on-unreliable"]
    bare = tmp_path / "bare"
    refused(capsys, [*base, "--out", str(bare)], "manual input", "the input ended")
    # no bench runs: nothing says why the hardware candidates are never feasible -- now it does
    table = pd.read_csv(bare / "decisions" / "step_000.csv", index_col=0)
    assert "no execution-safety data (0/0 unsafe)" in table.loc["latency_probe",
                                                               "excluded_reason"]
    log = read_log(bare)
    assert log.problem is None and not log.steps  # the step was not applied
    bench = tmp_path / "bench"
    bench.mkdir()
    pd.DataFrame([{"step": 0, "candidate": "latency_probe", "executions": 40, "unsafe": 0,
                   "policy": "pi0"}]).to_csv(bench / "safety_events.csv", index=False)
    with_bench = tmp_path / "with_bench"
    refused(capsys, [*base, "--evidence", str(bench), "--out", str(with_bench)],
            "the input ended")
    header = read_log(with_bench).header
    assert header["initial_evidence"]["safety_events"][0]["executions"] == 40
    table = pd.read_csv(with_bench / "decisions" / "step_000.csv", index_col=0)
    assert bool(table.loc["latency_probe", "feasible"])  # 0/40 unsafe: CP UCB 0.072 <= 0.1


def test_manual_says_which_hardware_candidates_have_no_safety_data(tmp_path, capsys,
                                                                  monkeypatch):
    from belief.cli.campaign import cmd_manual

    monkeypatch.setattr("belief.campaign.loop.Campaign.decide_next",
                        lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
    bench = tmp_path / "bench"
    bench.mkdir()
    pd.DataFrame([{"step": 0, "candidate": "latency_probe", "executions": 40,
                   "unsafe": 0}]).to_csv(bench / "safety_events.csv", index=False)
    args = SimpleNamespace(candidates=str(CANDIDATES), evidence=str(bench),
                           out=str(tmp_path / "m"), overwrite=False, resume=False, steps=None,
                           policy=None, weights=None, beta=None, draws=None, seed=None)
    with pytest.raises(KeyboardInterrupt):
        cmd_manual(args)
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("note"))
    assert "si_friction" in note and "latency_probe" not in note
    assert "upper bound is 1 > α_exec" in note


def test_manual_refuses_a_folder_as_candidate_file(tmp_path, capsys, no_compute):
    refused(capsys, ["manual", "--candidates", str(tmp_path), "--out", str(tmp_path / "m")],
            "is a folder, expected a TOML file")
    assert not (tmp_path / "m").exists()


# -- 6. belief replay ------------------------------------------------------------------------------
def _write_log(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_replay_refuses_a_log_broken_at_its_first_step_or_header(tiny_run, tmp_path, capsys,
                                                                 no_compute):
    recs = log_records(tiny_run)
    first = [recs[0], {**recs[1], "step": 5}, *recs[2:]]
    log = _write_log(tmp_path / "first" / "campaign_log.jsonl", first)
    refused(capsys, ["replay", str(log), "--out", str(tmp_path / "o1")], "nothing to replay",
            "record 2", "step 0 is missing")
    header = [{**recs[0], "settings": {**recs[0]["settings"], "horizon": "abc"}}, *recs[1:]]
    log = _write_log(tmp_path / "head" / "campaign_log.jsonl", header)
    refused(capsys, ["replay", str(log), "--out", str(tmp_path / "o2")],
            "record 1 (header): unusable settings: horizon: must be an integer")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_replay_of_a_folder_goes_on_after_a_bad_log(tiny_run, tmp_path, capsys):
    recs = log_records(tiny_run)
    logs = tmp_path / "logs"
    _write_log(logs / "good.jsonl", recs)
    _write_log(logs / "bad.jsonl", [recs[0], {**recs[1], "step": 5}])
    out = tmp_path / "out"
    code = main(["replay", str(logs), "--out", str(out), "--draws", "100"])
    text = capsys.readouterr().out
    assert code == 2
    assert "bad: not replayed" in text and "nothing to replay" in text
    assert "good: 2 steps" in text and "wrote 1 of 2 replays" in text
    assert (out / "good.nc").exists() and not (out / "bad.nc").exists()


# -- 7. --draws 0 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["demo", "manual", "replay"])
def test_draws_zero_is_refused_before_compiling(command, tiny_run, tmp_path, capsys,
                                                no_compute):
    out = tmp_path / "out"
    argv = {"demo": ["demo", "--out", str(out)],
            "manual": ["manual", "--candidates", str(CANDIDATES), "--out", str(out)],
            "replay": ["replay", str(tiny_run), "--out", str(out)]}[command]
    refused(capsys, [*argv, "--draws", "0"], "--draws: must be an integer >= 1, got 0")
    assert not out.exists()
    with pytest.raises(InputError, match=r"^FitSettings.draws: must be an integer >= 1"):
        FitSettings(draws=0)


def test_draws_flag_sets_tuning_to_min_of_draws_and_500():
    from belief.posterior.fitter import DEFAULT_DRAWS, DEFAULT_TUNE

    assert (FitSettings().draws, FitSettings().tune) == (DEFAULT_DRAWS, DEFAULT_TUNE) == (1000, 500)
    assert (FitSettings.for_draws(None).draws, FitSettings.for_draws(None).tune) == (1000, 500)
    assert (FitSettings.for_draws(200).draws, FitSettings.for_draws(200).tune) == (200, 200)
    assert FitSettings.for_draws(3000).tune == 500
    assert FitSettings.for_draws(3000, tune=2000).tune == 2000
    assert FitSettings.for_draws(100, chains=2).chains == 2
    with pytest.raises(InputError, match=r"^--draws: must be an integer >= 1, got 0"):
        FitSettings.for_draws(0)


def test_settings_whose_draws_cannot_reach_the_ess_threshold_warn_once():
    with pytest.warns(UserWarning, match=r"4 chains × 50 draws = 200 < the ESS threshold 400"):
        FitSettings(draws=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FitSettings(draws=100)                           # 400 draws: can pass
        FitSettings(draws=50, chains=2, ess_min=100)


# -- 8. repeated keys ------------------------------------------------------------------------------
def test_repeated_keys_are_refused(tiny_run, tmp_path, capsys, no_compute):
    belief_nc = str(tiny_run / "belief.nc")
    refused(capsys, ["decide", belief_nc, "--budget", "real_h=10,real_h=1,compute=1,eng_h=1",
                     "--out", str(tmp_path / "d")], "--budget", "'real_h' is given twice")
    refused(capsys, ["decide", belief_nc, "--weights", "real_h=1,compute=1,compute=2,eng_h=1",
                     "--out", str(tmp_path / "d")], "--weights", "'compute' is given twice")
    refused(capsys, ["replay", str(tiny_run), "--weights", "real_h=1,real_h=1",
                     "--out", str(tmp_path / "r")], "--weights", "given twice")
    refused(capsys, ["manual", "--candidates", str(CANDIDATES), "--weights",
                     "eng_h=1,eng_h=1", "--out", str(tmp_path / "m")], "--weights",
            "given twice")
    toml = tmp_path / "c.toml"
    toml.write_text(CANDIDATES.read_text().replace("[weights]", "[weights]\nreal_h = 5"))
    refused(capsys, ["manual", "--candidates", str(toml), "--out", str(tmp_path / "m")],
            "not a valid TOML file")
    assert not any((tmp_path / n).exists() for n in ("d", "r", "m"))


# -- 9. report --decision --------------------------------------------------------------------------
def test_report_refuses_a_decision_made_from_another_belief(tiny_run, tiny_decision, tmp_path,
                                                            capsys):
    from belief.files import dataset_digest
    from belief.workflow.belief_file import load

    fitted = load(tiny_run / "belief.nc")
    decision = xr.open_dataset(tiny_decision / "decision.nc", engine="h5netcdf")
    assert decision.attrs["belief_sha256"] == dataset_digest(fitted.belief)
    other = load(tiny_run / "belief.nc")
    other.belief["gain"][0, 3] += 1e-6  # another belief: same candidates, policy and step
    other.save(tmp_path / "other.nc")
    assert dataset_digest(load(tmp_path / "other.nc").belief) != dataset_digest(fitted.belief)
    refused(capsys, ["report", str(tmp_path / "other.nc"), "--decision", str(tiny_decision),
                     "--out", str(tmp_path / "r.html")], "--decision", "another belief")
    assert not (tmp_path / "r.html").exists()
    assert main(["report", str(tiny_run / "belief.nc"), "--decision", str(tiny_decision),
                 "--out", str(tmp_path / "ok.html")]) == 0


# -- 10. one set of outputs, one campaign per folder -----------------------------------------------
def test_an_output_set_replaces_the_last_one_whole(tmp_path):
    from belief.files import OutputSet

    (tmp_path / "user.txt").write_text("not ours")
    with OutputSet(tmp_path, "decide") as o:
        for name in ("decision.csv", "gains.png", "sensitivity_pi1.png"):
            o.write(name, lambda tmp, name=name: Path(tmp).write_text(f"run 1 {name}"))
    with OutputSet(tmp_path, "decide") as o:
        for name in ("decision.csv", "gains.png"):
            o.write(name, lambda tmp, name=name: Path(tmp).write_text(f"run 2 {name}"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".belief-decide.json", ".belief-decide.lock", "decision.csv", "gains.png",
                     "user.txt"]
    assert (tmp_path / "gains.png").read_text() == "run 2 gains.png"
    before = snapshot(tmp_path)
    with pytest.raises(KeyboardInterrupt), OutputSet(tmp_path, "decide") as o:
        o.write("decision.csv", lambda tmp: Path(tmp).write_text("run 3"))
        raise KeyboardInterrupt  # Ctrl-C before the commit: nothing changes
    assert snapshot(tmp_path) == before


def _commit_loop(folder: str, tag: str, names: list[str], rounds: int) -> None:
    from belief.files import OutputSet

    for i in range(rounds):
        with OutputSet(folder, "decide") as o:
            for name in names:
                o.write(name, lambda tmp, i=i: Path(tmp).write_text(f"{tag} {i}"))


def test_concurrent_runs_into_one_folder_leave_one_whole_set(tmp_path):
    """Two processes write their sets of files into the same folder at once, many times: the
    folder always ends with exactly one run's set, never a mixture or a stale figure."""
    ctx = multiprocessing.get_context("spawn")  # fork of a threaded process may deadlock
    a = ["decision.csv", "decision.nc", "gains.png", "sensitivity_pi1.png"]
    b = ["decision.csv", "decision.nc", "gains.png", "q_decomposition.png"]
    procs = [ctx.Process(target=_commit_loop, args=(str(tmp_path), tag, names, 40))
             for tag, names in (("A", a), ("B", b))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert files in (sorted(a), sorted(b))
    tags = {(tmp_path / f).read_text() for f in files}
    assert len(tags) == 1  # every file from the same commit
    manifest = json.loads((tmp_path / ".belief-decide.json").read_text())
    assert sorted(manifest["files"]) == files


def test_decide_removes_the_figures_of_an_earlier_run(tiny_run, tmp_path):
    out = tmp_path / "d"
    argv = ["decide", str(tiny_run / "belief.nc"), "--beta", "0", "--out", str(out)]
    assert main(argv) == 0
    manifest = out / ".belief-decide.json"
    record = json.loads(manifest.read_text())
    # as if the earlier run's belief had sensitivity runs of policy pi7
    (out / "sensitivity_pi7.png").write_bytes(b"an earlier run's figure")
    manifest.write_text(json.dumps({**record, "files": [*record["files"],
                                                        "sensitivity_pi7.png"]}))
    assert main(argv) == 0
    assert not (out / "sensitivity_pi7.png").exists()
    assert sorted(json.loads(manifest.read_text())["files"]) == sorted(record["files"])


def test_a_second_process_cannot_run_a_campaign_in_a_folder_in_use(tmp_path, fitter):
    folder = tmp_path / "busy"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(folder)!r}, os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match="another belief process is using this campaign "
                                             "folder"):
            Campaign(SyntheticWorld(seed=5), TINY, folder, fitter)
        assert list(folder.iterdir()) == []
    finally:
        holder.kill()
        holder.wait()


# -- 11. the decision and risk layer ---------------------------------------------------------------
def test_a_gain_for_a_diagnosis_is_refused(world_candidates):
    from belief.decision.engine import decide
    from belief.decision.settings import DecisionSettings
    from belief.decision.state import State
    from belief.inputs.resources import make_budget
    from belief.posterior.belief_state import make_belief

    ids = world_candidates.ids
    gain = xr.DataArray(np.zeros((50, len(ids))), dims=("sample", "candidate"),
                        coords={"candidate": ids})
    gain.loc[:, "latency_probe"] = 5.0  # a diagnosis scored as if it changed the policy
    with pytest.raises(InputError, match=r"^gain, row latency_probe: gain of 'latency_probe' "
                                         "must be 0: a diagnosis does not change the policy"):
        make_belief(gain, world_candidates, step=0, policy="pi0")
    belief = make_belief(gain * 0, world_candidates, step=0, policy="pi0")
    belief["gain"] = gain  # supplied directly to the decision layer
    state = State(0, make_budget({"real_h": 9, "compute": 99, "eng_h": 9},
                                 world_candidates.resources), "pi0", belief)
    with pytest.raises(InputError, match="gain of 'latency_probe' must be 0"):
        decide(state, world_candidates, DecisionSettings(weights={"real_h": 1, "compute": 0,
                                                                  "eng_h": 0}))


def test_clopper_pearson_lower_and_two_sided_bounds():
    from belief.decision.safety import (
        clopper_pearson_interval,
        clopper_pearson_lower,
        clopper_pearson_upper,
    )

    k = np.array([0, 1, 2, 7, 30, 30])
    n = np.array([30, 30, 70, 20, 30, 31])
    for delta in (0.05, 0.1):
        lo, hi = clopper_pearson_interval(k, n, 1 - 2 * delta)
        for i in range(len(k)):
            ci = stats.binomtest(int(k[i]), int(n[i])).proportion_ci(1 - 2 * delta, "exact")
            assert (lo[i], hi[i]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        # the one-sided bounds at 1 − δ are the ends of the two-sided interval at 1 − 2δ
        np.testing.assert_allclose(clopper_pearson_lower(k, n, delta), lo, atol=1e-12)
        np.testing.assert_allclose(clopper_pearson_upper(k, n, delta), hi, atol=1e-12)
        # and mirror images: LCB(k, n) = 1 − UCB(n − k, n)
        np.testing.assert_allclose(clopper_pearson_lower(k, n, delta),
                                   1 - clopper_pearson_upper(n - k, n, delta), atol=1e-12)
    assert clopper_pearson_lower(0, 10)[()] == 0.0
    lo, hi = clopper_pearson_interval(0, 0)
    assert (lo[()], hi[()]) == (0.0, 1.0)
    with pytest.raises(InputError, match="exceeds n"):
        clopper_pearson_interval(3, 2)


def test_population_risk_on_the_probability_scale(fitted, tiny_run):
    from models.exec_risk import population_risk

    idata, _ = fitted
    node = idata["exec_risk"]
    pop = population_risk(node, seed=1)
    post = node["posterior"]

    def flat(name):
        return post[name].transpose("chain", "draw", ...).values.reshape(
            post.sizes["chain"] * post.sizes["draw"], -1)

    # one hardware group ("arm"): its level is merged into μ_0 (models.pooling), and μ_0 is
    # drawn from its exact conditional given m = group_logit: standardised, it is N(0, 1)
    assert "mu0" not in post.data_vars and list(pop["hw_group"].values) == ["arm"]
    a, s0 = float(node.attrs["prior_mu0_mu"]), float(node.attrs["prior_mu0_sigma"])
    m, s2 = flat("group_logit")[:, 0], flat("sigma_group")[:, 0] ** 2
    shrink = s0**2 / (s0**2 + s2)
    z = (stats.logistic.ppf(pop["p_typical"].values) - (a + shrink * (m - a))) / np.sqrt(
        shrink * s2)
    n = z.size
    assert pop.sizes["sample"] == n
    assert abs(z.mean()) < 4 / np.sqrt(n) and abs(z.std() - 1) < 4 / np.sqrt(2 * n)
    for name in ("p_new_candidate", "p_new_group"):
        assert ((pop[name] > 0) & (pop[name] < 1)).all()
    # a new candidate adds σ_cand·z (and new hardware σ_group·z): wider than the typical one
    width = {n: float(np.subtract(*np.quantile(pop[n].values, [0.95, 0.05])))
             for n in ("p_typical", "p_new_group")}
    assert width["p_new_group"] > width["p_typical"]
    from belief.workflow.belief_file import load

    table = load(tiny_run / "belief.nc").exec_risk_summary()
    assert "new candidate on new hardware" in table.loc["population"].index
    cands = table.loc["candidate"]
    assert (cands["CP low"] <= cands["CP high"]).all() and (cands["q5"] < cands["q95"]).all()


# -- messages and output ---------------------------------------------------------------------------
def test_cli_errors_name_the_flag_not_the_attribute(tiny_run, tmp_path, capsys, no_compute):
    out = str(tmp_path / "o")
    refused(capsys, ["demo", "--functional", "median", "--out", out], "--functional:")
    refused(capsys, ["demo", "--beta", "-1", "--out", out], "--beta:")
    refused(capsys, ["demo", "--steps", "0", "--out", out], "--steps:")
    refused(capsys, ["demo", "--allocation", "best", "--out", out], "--allocation:")
    refused(capsys, ["replay", str(tiny_run), "--alpha-exec", "2", "--out", out],
            "--alpha-exec:")
    refused(capsys, ["replay", str(tiny_run), "--weights", "gpu=1", "--out", out], "--weights:",
            "'gpu'")
    toml = tmp_path / "c.toml"  # the example without its [weights] table
    lines = CANDIDATES.read_text().splitlines()
    at = lines.index("[weights]")
    toml.write_text("\n".join(lines[:at] + lines[at + 4:]) + "\n")
    refused(capsys, ["manual", "--candidates", str(toml), "--out", out], "--weights:",
            "resource weights λ are required")
    err = refused(capsys, ["demo", "--steps", "x", "--out", out], "--steps", "invalid int")
    assert err.startswith("belief demo: error:")
    # the loop's refusal to act on an unreliable belief names --act-on-unreliable: see
    # test_campaign.py::test_loop_refuses_to_act_on_an_unreliable_belief


def test_toml_errors_name_the_candidate_and_its_line(tmp_path):
    from belief.inputs.candidate_file import load_candidate_file, load_candidates

    text = CANDIDATES.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == 'id = "dr_1e6"')
    header = max(i for i in range(at) if lines[i].strip() == "[[candidate]]") + 1
    bad = tmp_path / "c.toml"
    bad.write_text(text.replace('lens = "data"', 'lens = "vision"', 1))
    for load in (load_candidate_file, load_candidates):
        with pytest.raises(InputError, match=rf"\[\[candidate\]\] 'dr_1e6' \(line {header}\): "
                                             "lens must be one of") as err:
            load(bad)
        assert "row" not in str(err.value)


def test_resume_says_what_it_ignores_and_a_finished_campaign_needs_no_compile(
        tiny_run, tmp_path, capsys, no_compute):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert main(["demo", "--resume", str(run), "--steps", "9", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "ignored with --resume: --steps 9, --seed 4" in out
    assert "horizon T = 2" in out and "already finished" in out and "nothing to do" in out


def test_the_decision_table_in_a_pipe_fits_and_wide_is_not_squeezed(tiny_run, tiny_decision):
    import io

    from belief.decision.decision_file import load_decision
    from belief.report.tables import COMPACT_WIDTH, PIPE_WIDTH, console, decision_rich_table

    decision = load_decision(tiny_decision)
    reasons = [str(r) for r in decision["excluded_reason"].values]
    longest = max(reasons, key=len)
    buf = io.StringIO()  # not a terminal: the compact table in COMPACT_WIDTH columns
    console(buf).print(decision_rich_table(decision, "step 2"))
    text = [line.rstrip() for line in buf.getvalue().splitlines()]
    table = text[:text.index("reasons in full:")]
    assert max(map(len, table)) <= COMPACT_WIDTH
    for cid in decision["candidate"].values:  # one line per candidate
        assert sum(line.startswith(f"{cid} ") for line in table) == 1
    assert len(longest) > 60 and f"  {decision['candidate'].values[reasons.index(longest)]}: " \
        f"{longest}" in text  # a reason cut in the table is written in full below it
    buf = io.StringIO()  # --wide: every column, reasons whole, ASCII rules
    console(buf).print(decision_rich_table(decision, "step 2", wide=True))
    text = buf.getvalue().splitlines()
    assert max(map(len, text)) > 80 and max(map(len, text)) <= PIPE_WIDTH
    assert any(longest in line for line in text)  # whole, on one line
    for cid in decision["candidate"].values:  # one line per candidate
        assert sum(line.startswith(f"| {cid} ") for line in text) == 1


def test_the_reports_tables_use_the_terminal_labels_and_explain_mv(tiny_run, tiny_decision):
    from belief.decision.decision_file import load_decision
    from belief.report.document import render_report
    from belief.workflow.belief_file import load

    text, _ = render_report(load(tiny_run / "belief.nc"), load_decision(tiny_decision), "md")
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| candidate | φ(ΔJ)"))
    assert header == ("| candidate | φ(ΔJ) | C_λ | U0 | CVU ± error | Q | vs stop | feasible | "
                      "reason |")  # what a decision needs; the rest in the details
    details = next(line for line in lines if line.startswith("| candidate | role"))
    for label in ("MV", "P_exec UCB"):  # β = 0: no CVU estimator or errors
        assert f"| {label} |" in details
    assert "phi_gain" not in text and "c_lambda" not in text
    assert "MV = φ(ΔJ) / C_λ" in text and "efficiency reading only" in text
    assert "new candidate on new hardware" in text and "CP 90% interval" in text


def test_the_report_shows_the_range_of_a_cvu_left_bounded(tiny_run, tiny_decision):
    """Where untrusted outcomes were left unrefit (``n_deferred`` > 0) the table gains the
    range of CVU their refits could give, and the text says what ``+bounded`` means."""
    from belief.decision.decision_file import load_decision
    from belief.report.document import render_report
    from belief.workflow.belief_file import load

    fitted, d = load(tiny_run / "belief.nc"), load_decision(tiny_decision)

    def header(decision):
        text, _ = render_report(fitted, decision, "md")
        return text, next(line for line in text.splitlines()
                          if line.startswith("| candidate | role"))

    text, plain = header(d.assign(n_deferred=("candidate", np.zeros(d.sizes["candidate"], int))))
    assert "| CVU ≥ |" not in plain and "+bounded: such outcomes left unrefit" in text
    n = np.zeros(d.sizes["candidate"], int)
    n[0] = 2
    _, bounded = header(d.assign(n_deferred=("candidate", n), cvu_low=d["cvu"] - 0.01,
                                 cvu_high=d["cvu"] + 0.01))
    assert "| CVU ≥ |" in bounded and "| CVU ≤ |" in bounded


def _decision(u0, cvu, beta=1.0, feasible=None, reasons=None, ucb=None):
    ids = [f"m{i}" for i in range(len(u0))]
    feasible = np.ones(len(ids), bool) if feasible is None else np.asarray(feasible)
    q = np.asarray(u0) + beta * np.asarray(cvu)
    return xr.Dataset({
        "u0": ("candidate", np.asarray(u0, float)), "cvu": ("candidate", np.asarray(cvu, float)),
        "q": ("candidate", q), "feasible": ("candidate", feasible),
        "available": ("candidate", np.ones(len(ids), bool)),
        "chosen": ("candidate", np.arange(len(ids)) == 0),
        "safe": ("candidate", feasible),
        "safe_reason": ("candidate", reasons or ["no hardware: P_exec = 0"] * len(ids)),
        "ucb_clopper_pearson": ("candidate", ucb if ucb is not None else np.zeros(len(ids))),
        "ucb_posterior": ("candidate", np.full(len(ids), np.nan))},
        coords={"candidate": ids}, attrs={"beta": beta, "alpha_exec": 0.1, "delta": 0.05,
                                          "safety_method": "clopper_pearson"})


def test_q_decomposition_shows_u0_and_cvu_side_by_side_when_their_signs_differ():
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_q_decomposition

    ax = plot_q_decomposition(_decision([0.05, -0.02, 0.04], [-0.10, 0.05, 0.02]))
    bars = [b for b in ax.patches if b.get_width() != 0 and b.get_facecolor()[3] > 0]

    def spans(b):
        x0, x1 = sorted((b.get_x(), b.get_x() + b.get_width()))
        return x0, x1, b.get_y(), b.get_y() + b.get_height()

    for u0, cvu in [(0.05, -0.10), (-0.02, 0.05)]:  # opposite signs: both bars fully visible
        b_u0 = next(b for b in bars if np.isclose(b.get_width(), u0))
        b_cvu = next(b for b in bars if np.isclose(b.get_width(), cvu))
        (_, _, y0, y1), (_, _, z0, z1) = spans(b_u0), spans(b_cvu)
        assert y1 <= z0 + 1e-9 or z1 <= y0 + 1e-9  # no vertical overlap: side by side
        assert np.isclose(b_cvu.get_x(), 0.0)  # from 0, not from the end of U0
    same = next(b for b in bars if np.isclose(b.get_width(), 0.02))
    assert np.isclose(same.get_x(), 0.04)  # same signs: stacked, ending at Q
    plt.close(ax.figure)


def test_safety_plot_marks_no_data_and_its_legend_covers_no_bar():
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_safety_bounds

    reasons = ["unsafe: no execution-safety data (0/0 unsafe): CP UCB 1.000 > α_exec 0.1",
               "CP UCB 0.072 <= α_exec 0.1 (0/40 unsafe)",
               "unsafe: CP UCB 0.101 > α_exec 0.1 (2/60 unsafe)"]
    d = _decision([0, 0, 0], [0, 0, 0], feasible=[False, True, False], reasons=reasons,
                  ucb=np.array([1.0, 0.072, 0.101]))
    ax = plot_safety_bounds(d)
    fig = ax.figure
    fig.tight_layout()
    fig.canvas.draw()
    assert any(t.get_text() == "no data (0/0)" for t in ax.texts)
    legend = ax.get_legend().get_window_extent()
    for bar in ax.patches:
        assert not legend.overlaps(bar.get_window_extent())
    plt.close(fig)


def test_sensitivity_axis_label_is_not_clipped():
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_sensitivity

    ranking = pd.DataFrame({"S_mean": [0.8, -0.3], "S_lo": [0.5, -0.6], "S_hi": [1.1, 0.0],
                            "p_most_influential": [0.9, 0.1]},
                           index=pd.Index(["friction", "latency"], name="direction"))
    # a campaign's policy names grow with its lineage (treated_policy = policy+candidate)
    for policy in ("pi0", "pi0+dr_1e6+si_friction", "pi0+dr_1e6+si_friction+da_camera+ft_real"):
        report = SimpleNamespace(ranking=ranking, policy=policy, link="logit", prob=0.9)
        ax = plot_sensitivity(report)
        fig = ax.figure
        fig.tight_layout()
        fig.canvas.draw()
        box = fig.bbox
        for text in (ax.xaxis.label, ax.title):
            extent = text.get_window_extent()
            assert box.x0 <= extent.x0 and extent.x1 <= box.x1, (policy, text.get_text())
            assert box.y0 <= extent.y0 and extent.y1 <= box.y1, (policy, text.get_text())
        plt.close(fig)


def test_gains_plot_marks_unavailable_and_infeasible_candidates(tiny_run, tiny_decision):
    import matplotlib.pyplot as plt

    from belief.decision.decision_file import load_decision
    from belief.report.plots import plot_gains
    from belief.workflow.belief_file import load

    fitted = load(tiny_run / "belief.nc")
    decision = load_decision(tiny_decision)
    ax = plot_gains(fitted.belief, decision=decision)
    labels = {t.get_text() for t in ax.get_yticklabels()}
    for cid, avail, feas in zip(decision["candidate"].values, decision["available"].values,
                                decision["feasible"].values, strict=True):
        want = cid if feas else f"{cid} ({'infeasible' if avail else 'unavailable'})"
        assert want in labels, (want, labels)
    assert not decision["available"].values.all()  # the campaign executed non-repeatables
    plt.close(ax.figure)


def test_replay_figures_have_integer_step_ticks(tiny_run, tmp_path):
    import matplotlib.pyplot as plt

    from belief.campaign.replay import plot_replay, replay

    tree = replay(tiny_run, fitter=BeliefFitter(SyntheticWorld(seed=5).candidates,
                                                FitSettings(draws=100, tune=100)))
    fig = plot_replay(tree)
    fig.canvas.draw()
    for ax in fig.axes:
        ticks = ax.get_xticks()
        assert len(ticks) and np.allclose(ticks, np.round(ticks))
    plt.close(fig)
