"""Shared fixtures: one compiled gains model per test session, small draws."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

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

from belief.campaign.synthetic import SyntheticWorld
from belief.posterior.fitter import BeliefFitter, FitSettings

FAST = FitSettings(draws=300, tune=300, chains=2, ess_min=100)
"""Short runs for tests of the code around sampling: 2 chains × 300 draws, so ESS ≥ 100 (the
field's 400 needs the default 4 chains); convergence itself is tested at the defaults."""


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
def example_belief_file(tmp_path_factory):
    """``belief fit`` on the shipped example data at the defaults (4 chains × 1000 draws, seed 0),
    once per session (read-only: tests that alter a belief file copy it first)."""
    from belief.cli.main import main
    from belief.inputs.example import example_paths

    evidence, candidates = example_paths()
    out = tmp_path_factory.mktemp("example-fit") / "belief.nc"
    code = main(["fit", str(evidence), "--candidates", str(candidates), "--out", str(out)])
    assert code == 0
    return out
