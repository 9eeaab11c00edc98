"""``belief decide`` draws its figures in a second process (belief.report.figure_worker): the
files are those the command draws itself, a failed worker costs time and never a figure, and
a refused command leaves neither a worker nor its folder behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

import pytest

from belief.cli.main import main
from belief.report import figure_worker
from belief.report.figure_worker import FigureWorker

FAST_DECIDE = ["--cvu-outcomes", "64", "--functional", "lcb:0.2", "--alpha-exec", "0.1"]


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """Temporary folders (the worker's) made under a folder of this test only."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _failing_start(message: str):
    """FigureWorker.start replaced by a worker process that writes ``message`` to its log and
    exits 1 (as a worker whose import or drawing fails would)."""
    real = FigureWorker.start.__func__

    def start(cls, belief, candidates):
        worker = real(cls, belief, candidates)
        worker.proc.kill()
        worker.proc.wait()
        with open(f"{worker.folder}/worker.log", "wb") as log:
            worker.proc = subprocess.Popen(
                [sys.executable, "-c", f"import sys; sys.stderr.write({message!r}); "
                                       "sys.exit(1)"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
        return worker

    return classmethod(start)


def test_worker_figures_are_the_ones_drawn_in_process(example_belief_file, tmp_path, own_tmp,
                                                       monkeypatch, capsys):
    """The same PNG bytes from the worker and from the in-process fallback, the fallback
    says why it ran, and the worker's folder is removed either way."""
    by_worker = tmp_path / "worker"
    assert main(["decide", str(example_belief_file), "--out", str(by_worker),
                 *FAST_DECIDE]) == 0
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setattr(FigureWorker, "start", _failing_start("boom: no figures\n"))
    here = tmp_path / "here"
    assert main(["decide", str(example_belief_file), "--out", str(here), *FAST_DECIDE]) == 0
    err = capsys.readouterr().err
    assert "warning: the figure worker exited with 1: boom: no figures; drawing the figures " \
           "here" in err
    pngs = sorted(p.name for p in by_worker.glob("*.png"))
    assert {"gains.png", "order_effects.png", "q_decomposition.png", "safety.png"} <= set(pngs)
    assert pngs == sorted(p.name for p in here.glob("*.png"))
    for name in pngs:
        assert (by_worker / name).read_bytes() == (here / name).read_bytes(), name
    assert list(own_tmp.iterdir()) == []


def test_a_refused_decide_kills_its_worker_and_writes_nothing(example_belief_file, tmp_path,
                                                              own_tmp, monkeypatch, capsys):
    started = []
    real = FigureWorker.start.__func__

    killed = []

    def start(cls, belief, candidates):
        started.append(real(cls, belief, candidates))
        return started[-1]

    stop = FigureWorker._stop

    def recording_stop(self):
        proc = self.proc
        stop(self)
        if proc is not None:
            killed.append(proc.returncode)

    monkeypatch.setattr(FigureWorker, "start", classmethod(start))
    monkeypatch.setattr(FigureWorker, "_stop", recording_stop)
    out = tmp_path / "dec"
    assert main(["decide", str(example_belief_file), "--out", str(out), "--budget",
                 "real_h=ten,compute=1,eng_h=1"]) == 2
    assert "--budget" in capsys.readouterr().err
    assert len(started) == 1 and started[0].proc is None  # killed (close) and let go
    assert killed == [-signal.SIGKILL]
    assert not out.exists() and list(own_tmp.iterdir()) == []


def test_worker_without_a_decision_exits_3_and_removes_its_folder(example_belief_file,
                                                                  tmp_path):
    """A parent that gives up or is killed (the worker's input closes without a decision):
    the worker exits 3 and removes its folder (nobody else will)."""
    folder = tmp_path / "w"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-P", "-m", "belief.report.figure_worker",
                           str(example_belief_file), str(folder)], stdin=subprocess.DEVNULL,
                          capture_output=True, env={**os.environ,
                                                    "MPLBACKEND": "Agg"}, timeout=300)
    assert proc.returncode == 3, proc.stderr.decode()
    assert not folder.exists()


def test_a_worker_that_never_starts_is_reported_not_raised(monkeypatch, tmp_path, own_tmp):
    def refuse(*args, **kwargs):
        raise OSError("no processes left")

    monkeypatch.setattr(figure_worker.subprocess, "Popen", refuse)
    worker = FigureWorker.start("belief.nc", None)
    assert worker.finish(object()) is None
    assert worker.error == "the figure worker did not start: no processes left"
    worker.close()
    assert list(own_tmp.iterdir()) == []


def test_figure_order_is_the_order_decision_figures_always_had():
    from belief.report.document import figure_order

    shuffled = ["costs", "sensitivity_pi2", "safety", "overrun", "gains", "sensitivity_pi0",
                "q_decomposition", "order_effects", "extra"]
    assert figure_order(shuffled) == ["gains", "order_effects", "q_decomposition", "safety",
                                      "sensitivity_pi2", "sensitivity_pi0", "costs", "overrun",
                                      "extra"]


def test_a_decision_that_cannot_be_sent_stops_the_worker(example_belief_file, own_tmp):
    """``send`` failing (an unpicklable decision) is a worker failure, not the command's."""
    worker = FigureWorker.start(str(example_belief_file), None)
    proc = worker.proc
    worker.send(lambda: None)  # functions defined here do not pickle
    assert worker.proc is None and proc.returncode is not None
    assert worker.finish(object()) is None
    assert worker.error.startswith("the decision could not be sent to the figure worker")
    worker.close()
    assert list(own_tmp.iterdir()) == []


def test_one_core_draws_in_process_without_a_warning(example_belief_file, tmp_path, own_tmp,
                                                     monkeypatch, capsys):
    import belief.cli.statistician as statistician

    monkeypatch.setattr(statistician.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(FigureWorker, "start", None)  # never called on one core
    out = tmp_path / "one"
    assert main(["decide", str(example_belief_file), "--out", str(out), *FAST_DECIDE]) == 0
    assert "warning" not in capsys.readouterr().err
    assert (out / "gains.png").stat().st_size > 1000
    assert list(own_tmp.iterdir()) == []


@pytest.mark.slow  # a fit with the cost model: ~1–2 min with its compiles
def test_cost_figures_come_through_the_worker(tmp_path, monkeypatch, capsys):
    """With a cost posterior (``belief fit --costs``) the worker draws ``costs`` (from the
    belief) and ``overrun`` (from the decision), listed last, as decision_figures orders
    them."""
    from belief.inputs.example import example_paths

    evidence, candidates = example_paths()
    belief_file = tmp_path / "costs.nc"
    assert main(["fit", str(evidence), "--candidates", str(candidates), "--costs",
                 "--draws", "200", "--out", str(belief_file)]) == 0
    own_tmp = tmp_path / "tmp"  # the worker's temporary folders, from here on only
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    out = tmp_path / "dec"
    assert main(["decide", str(belief_file), "--out", str(out), "--epsilon-budget", "0.05",
                 *FAST_DECIDE]) == 0
    captured = capsys.readouterr()
    assert "figure worker" not in captured.err
    for name in ("costs", "overrun", "gains", "safety"):
        assert (out / f"{name}.png").stat().st_size > 1000, name
    wrote = captured.out.strip().splitlines()[-1]
    assert wrote.endswith(f"{out}/costs.png, {out}/overrun.png"), wrote
    assert list(own_tmp.iterdir()) == []


def test_the_executable_flushes_its_output_and_exit_code_before_its_fast_exit(
        example_belief_file, tmp_path):
    """``python -m belief.cli`` (the ``belief`` executable's ``run``) ends check/decide/report
    with os._exit: what they print to a pipe (block-buffered) still arrives, the files are
    there, and a refusal still exits 2 with its one line."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
           "MPLBACKEND": "Agg"}  # a pipe is block-buffered: only a flush gets the text out
    out = tmp_path / "decision"
    done = subprocess.run([sys.executable, "-m", "belief.cli", "decide",
                           str(example_belief_file), "--out", str(out), *FAST_DECIDE],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "recommendation:" in done.stdout and f"wrote {out}/decision.csv" in done.stdout
    assert (out / "decision.nc").is_file() and (out / "gains.png").is_file()
    refused = subprocess.run([sys.executable, "-m", "belief.cli", "decide",
                              str(tmp_path / "missing.nc"), "--out", str(tmp_path / "x")],
                             capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("belief: error:") and refused.stdout == ""
    assert not (tmp_path / "x").exists()
    # check's verdict is a plain print() (not rich, which flushes itself)
    done = subprocess.run([sys.executable, "-m", "belief.cli", "check",
                           str(example_belief_file), "--recompute"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "diagnostics recomputed" in done.stdout and "converged:" in done.stdout
