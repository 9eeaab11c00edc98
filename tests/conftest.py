"""Shared fixtures: one compiled gains model per test session, small draws."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")
# The compiled-model cache (models/compile_cache.py) of this session: a fresh temporary folder,
# shared with the CLI subprocesses the tests start, never the user's own cache.  Under
# pytest-xdist the controller makes it and removes it at exit; its workers inherit it through
# the environment, so a model compiled by one worker is loaded by the other.
# A developer may keep one test cache across runs with BELIEF_TEST_CACHE_DIR (never removed).
if os.environ.get("BELIEF_TEST_CACHE_DIR"):
    os.environ["BELIEF_CACHE_DIR"] = os.environ["BELIEF_TEST_CACHE_DIR"]
elif os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("BELIEF_TEST_CACHE_OWNER"):
    os.environ["BELIEF_CACHE_DIR"] = os.environ["BELIEF_TEST_CACHE_OWNER"]
else:
    os.environ["BELIEF_CACHE_DIR"] = tempfile.mkdtemp(prefix="belief-test-cache-")
    os.environ["BELIEF_TEST_CACHE_OWNER"] = os.environ["BELIEF_CACHE_DIR"]
    atexit.register(shutil.rmtree, os.environ["BELIEF_CACHE_DIR"], ignore_errors=True)
# The `belief` command compiles at numba's optimisation level 1 unless NUMBA_OPT is set
# (belief.cli.main.run), and the level is part of the compiled-model cache's key: the CLI
# processes the tests start (`belief demo` interrupted or killed) would share no compiled model
# with the in-process fits and compile each model a second time.  They get the in-process level
# instead, numba's own default 3, so a model is compiled once per session whichever process
# needs it first (the in-process level is unchanged: 3 is what numba uses when it is unset).
# That the command defaults to level 1 is tested on `run` itself (tests/test_hardening.py).
os.environ.setdefault("NUMBA_OPT", "3")
# A folder of this session shared by its processes, for the results of expensive read-only
# session fixtures: under pytest-xdist each worker computes a session fixture itself, so the
# first worker that needs one computes it here (under a lock) and the other reads it.  Made by
# the controller (or the single process of `-n 0`) and removed at its exit; the workers inherit
# it through the environment.
if not (os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("BELIEF_TEST_SESSION_DIR")):
    os.environ["BELIEF_TEST_SESSION_DIR"] = tempfile.mkdtemp(prefix="belief-test-session-")
    atexit.register(shutil.rmtree, os.environ["BELIEF_TEST_SESSION_DIR"], ignore_errors=True)

from belief.campaign.synthetic import SyntheticWorld
from belief.posterior.fitter import BeliefFitter, FitSettings

FAST = FitSettings(draws=300, tune=300, chains=2, ess_min=100)
"""Short runs for tests of the code around sampling: 2 chains × 300 draws, so ESS ≥ 100 (the
field's 400 needs the default 4 chains); convergence itself is tested at the defaults."""


@contextlib.contextmanager
def session_lock(name: str):
    """An exclusive lock named ``name`` among the processes of this session, held for the
    block (released when it ends or the process dies); none where there is no ``flock``."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock, each process computes for itself
        yield
        return
    with open(Path(os.environ["BELIEF_TEST_SESSION_DIR"]) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def session_shared(name: str):
    """The folder ``name`` in the session's shared folder (made if missing), held under
    :func:`session_lock`: the first process that needs a result computes it there, the others
    wait for it and read it."""
    with session_lock(name):
        folder = Path(os.environ["BELIEF_TEST_SESSION_DIR"]) / name
        if "fcntl" not in sys.modules:  # no lock: this process's own folder
            folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=folder.parent))
        folder.mkdir(exist_ok=True)
        yield folder


def _compile_once_per_session() -> None:
    """Wrap ``models.compile_cache.compile_model`` for the test session (its result is
    unchanged):

    - in an xdist worker, one process of the session compiles a given model while the others
      wait for its cache entry (a lock named by the model's cache key).  Without it, workers
      that start on files needing the same model (the session's gains model, first of all)
      compile it side by side, one core each, and both write the same entry; the waiting
      process now finds the entry and loads it (a hit, as it would be had it come later).  The
      key is then computed twice (≈ 0.5 s for the gains model), so a single process (``-n 0``),
      which waits for nobody, skips this;
    - every compile (a cache miss, or a compile without the cache) is recorded with its model,
      its seconds and the test that asked for it, for the session's summary (see
      :func:`pytest_terminal_summary`): which tests pay the cold compiles (those of the test
      processes; the CLI processes and notebook kernels the tests start are not counted).
    """
    import functools
    import hashlib
    import time

    from models import compile_cache

    compile_model = compile_cache.compile_model
    record = Path(os.environ["BELIEF_TEST_SESSION_DIR"]) / "compiles.tsv"
    parallel = bool(os.environ.get("PYTEST_XDIST_WORKER"))

    def compiles() -> int:
        return compile_cache.stats["miss"] + compile_cache.stats["uncached"]

    def recorded(model, label):
        before, t0 = compiles(), time.perf_counter()
        compiled = compile_model(model, label)
        if compiles() > before:
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
            with open(record, "a") as f:  # one short line: appends do not interleave
                f.write(f"{time.perf_counter() - t0:.1f}\t{label or '?'}\t{test}\n")
        return compiled

    @functools.wraps(compile_model)
    def wrapped(model, label=None):
        folder = compile_cache.cache_dir()
        if not parallel or folder is None:
            return recorded(model, label)
        try:
            key = compile_cache.model_key(model)
        except Exception:  # not cacheable: compile_model says why and compiles it anyway
            return recorded(model, label)
        if (folder / f"{key}{compile_cache.SUFFIX}").exists():
            return recorded(model, label)
        name = hashlib.sha256(f"{folder}\0{key}".encode()).hexdigest()[:32]
        with session_lock(f"compile-{name}"):
            return recorded(model, label)

    compile_cache.compile_model = wrapped


_compile_once_per_session()


def pytest_terminal_summary(terminalreporter):
    """The session's model compiles (cache misses), slowest first, with the tests that paid
    them (in the controller, or the single process of ``-n 0``)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = Path(os.environ["BELIEF_TEST_SESSION_DIR"]) / "compiles.tsv"
    try:
        rows = [line.split("\t") for line in path.read_text().splitlines()]
    except OSError:
        return
    rows = sorted((r for r in rows if len(r) == 3), key=lambda r: -float(r[0]))
    if not rows:
        return
    total = sum(float(r[0]) for r in rows)
    terminalreporter.write_sep("=", f"{len(rows)} model compiles (cache misses), {total:.0f} s")
    for seconds, label, test in rows[:15]:
        terminalreporter.write_line(f"{float(seconds):7.1f} s  {label:<18} {test}")


@pytest.fixture(scope="session")
def world_candidates():
    return SyntheticWorld(seed=0).candidates


@pytest.fixture(scope="session")
def fitter(world_candidates):
    """A BeliefFitter on the world's candidates; compiled once for the whole session."""
    return BeliefFitter(world_candidates, FAST)


@pytest.fixture(scope="session")
def campaign_evidence(world_candidates):
    """Evidence from a short scripted run of the synthetic world (no fitting involved)."""
    from belief.inputs.evidence import Evidence

    world = SyntheticWorld(seed=3)
    init = world.initial_evidence()
    ev = Evidence(world_candidates).append(policy_evals=init["policy_evaluations"],
                                           safety=init["safety_events"])
    for step, m in enumerate(["dr_1e7", "si_friction", "dr_1e6", "ft_real_100"]):
        out = world.execute(m, step)
        ev = ev.append(paired=out.paired, safety=out.safety)
    return ev, world


@pytest.fixture(scope="session")
def fitted(fitter, campaign_evidence):
    """(idata, belief) fitted on ``campaign_evidence`` at the world's current policy."""
    ev, world = campaign_evidence
    return fitter.fit(ev, world.policy, step=4, seed=11)


@pytest.fixture(scope="session")
def exec_flat_model():
    """Execution-risk model of one hardware candidate with the flat (Beta(1, 1)) prior."""
    from belief.inputs.candidates import candidates_from_dict
    from models.exec_risk import ExecRiskModel, ExecRiskPriors

    cs = candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": [
        {"id": "solo", "role": "diagnosis", "lens": "model", "method": "probe", "cost": {},
         "drives_hardware": True, "hardware_group": "rig"}]})
    return ExecRiskModel(cs, ExecRiskPriors.flat())


# -- sensitivity and transfer (issue 6) --------------------------------------------------------
@pytest.fixture(scope="session")
def sweep_evidence(world_candidates):
    """Evidence with one sensitivity sweep and the transfer evaluations of the default world."""
    from belief.inputs.evidence import Evidence

    world = SyntheticWorld(seed=0)
    return Evidence(world_candidates).append(sensitivity_runs=world.sensitivity_sweep(),
                                             transfer_evaluations=world.transfer_evaluations())


@pytest.fixture(scope="session")
def sensitivity_fit(fitter, sweep_evidence):
    """The sensitivity model fitted on one sweep (binomial; compiled once per session)."""
    return fitter.fit_sensitivity(sweep_evidence, seed=5)


@pytest.fixture
def no_compute(monkeypatch):
    """Fail loudly if a command starts compiling or sampling (its refusal came too late)."""
    import models.exec_risk
    import models.gains
    import models.sampling
    import models.transfer

    def boom(*args, **kwargs):
        raise AssertionError("compiled or sampled before the refusal")

    monkeypatch.setattr(models.sampling, "sample", boom)
    for model in (models.gains.GainsModel, models.exec_risk.ExecRiskModel,
                  models.transfer.TransferModel):
        monkeypatch.setattr(model, "_compiled", boom)


# -- the shipped example through the CLI (issue 20) ------------------------------------------
@pytest.fixture(scope="session")
def example_belief_file():
    """``belief fit`` on the shipped example data at the defaults (4 chains × 1000 draws, seed 0),
    once per session, shared by the xdist workers (read-only: tests that alter a belief file
    copy it first)."""
    from belief.cli.main import main
    from belief.inputs.example import example_paths

    evidence, candidates = example_paths()
    with session_shared("example-fit") as folder:
        out = folder / "belief.nc"
        if not out.exists():  # not yet fitted by another worker of this session
            code = main(["fit", str(evidence), "--candidates", str(candidates), "--out",
                         str(out)])
            assert code == 0
    return out
