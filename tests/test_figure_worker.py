"""``belief decide`` draws its figures in a second process (belief.report.figure_worker): the
files are those the command draws itself, a failed worker costs time and never a figure, and
a refused command leaves neither a worker nor its folder behind."""

from __future__ import annotations

import os
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

    def start(cls, belief, candidates):
        started.append(real(cls, belief, candidates))
        return started[-1]

    monkeypatch.setattr(FigureWorker, "start", classmethod(start))
    out = tmp_path / "dec"
    assert main(["decide", str(example_belief_file), "--out", str(out), "--budget",
                 "real_h=ten,compute=1,eng_h=1"]) == 2
    assert "--budget" in capsys.readouterr().err
    assert len(started) == 1 and started[0].proc.poll() is not None
    assert not out.exists() and list(own_tmp.iterdir()) == []


def test_worker_without_a_decision_exits_3_and_lists_nothing(example_belief_file, tmp_path):
    """A parent that gives up (closes the worker's input without a decision): the worker
    drew only the belief's own figures and answers nothing."""
    folder = tmp_path / "w"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-m", "belief.report.figure_worker",
                           str(example_belief_file), str(folder)], stdin=subprocess.DEVNULL,
                          capture_output=True, env={**os.environ,
                                                    "MPLBACKEND": "Agg"}, timeout=300)
    assert proc.returncode == 3, proc.stderr.decode()
    names = {p.name for p in folder.iterdir()}
    assert "figures.json" not in names and "gains.png" not in names
    assert "order_effects.png" in names


def test_a_worker_that_never_starts_is_reported_not_raised(monkeypatch, tmp_path, own_tmp):
    def refuse(*args, **kwargs):
        raise OSError("no processes left")

    monkeypatch.setattr(figure_worker.subprocess, "Popen", refuse)
    worker = FigureWorker.start("belief.nc", None)
    assert worker.finish(object()) is None
    assert worker.error == "the figure worker did not start: no processes left"
    worker.close()
    assert list(own_tmp.iterdir()) == []
