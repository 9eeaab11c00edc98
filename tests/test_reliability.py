"""Determinism (same seed → identical beliefs, decisions, logs; serial or Dask) and crash
safety (a writer killed mid-write leaves the previous state loadable)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import xarray as xr

from belief.campaign.log import read_log
from belief.campaign.synthetic import SyntheticWorld


def test_same_seed_same_belief_and_decision(fitter, campaign_evidence, world_candidates):
    from belief.decision.engine import decide
    from belief.decision.settings import DecisionSettings
    from belief.decision.state import State

    ev, world = campaign_evidence
    _, a = fitter.fit(ev, world.policy, 4, seed=21)
    _, b = fitter.fit(ev, world.policy, 4, seed=21)
    xr.testing.assert_identical(a, b)
    _, c = fitter.fit(ev, world.policy, 4, seed=22)
    assert not a["gain"].equals(c["gain"])
    state = State(step=4, budget=world.initial_budget, policy=world.policy, belief=a)
    d1 = decide(state, world_candidates, DecisionSettings(weights=world.weight_values), seed=3)
    d2 = decide(state.with_(belief=b), world_candidates,
                DecisionSettings(weights=world.weight_values), seed=3)
    xr.testing.assert_identical(d1, d2)


def test_policy_runs_identical_serial_and_on_dask(fitter):
    from belief.campaign.loop import CampaignSettings, settings_to_dict
    from belief.campaign.many import run_policies
    from belief.posterior.fitter import FitSettings

    s = settings_to_dict(CampaignSettings(horizon=1, fit=FitSettings(draws=150, tune=150),
                                          stability_resamples=20, act_on_unreliable=True,
                                          weights={"real_h": 0.01, "compute": 0.0002,
                                                   "eng_h": 0.004}))
    serial = run_policies([5], ["u0", "thompson"], s)
    dask = run_policies([5], ["u0", "thompson"], s, workers=1, threads=True)

    def strip(rows):
        return [{k: v for k, v in r.items()
                 if k not in ("seconds", "step_seconds", "decide_seconds")}  # wall times
                for r in rows]

    assert strip(serial) == strip(dask)
    assert [r["policy"] for r in serial] == ["u0", "thompson"]
    # every step's table (Thompson picks by a draw, not by Q): the chosen candidate is
    # feasible and the best feasible Q is the one the trace records
    from belief.campaign.synthetic import SyntheticWorld

    for r in serial:
        for t in r["trace"]:
            table = t["candidates"]
            assert set(table) == set(SyntheticWorld.varied(5).candidates.ids)
            assert t["chosen"] not in table or table[t["chosen"]]["feasible"]
            assert max(x["q"] if x["q"] is not None else -np.inf
                       for x in table.values() if x["feasible"]) == pytest.approx(
                t["max_q"], abs=1e-12)


WRITER = textwrap.dedent("""
    import os
    import sys
    import time
    import numpy as np
    import xarray as xr
    from belief.workflow.belief_file import save_belief
    from belief.posterior.belief_state import make_belief
    from belief.campaign.synthetic import SyntheticWorld

    cands = SyntheticWorld().candidates
    path, where = sys.argv[1], sys.argv[2]
    state = {"saves": 0}

    def hang(note):  # the third save stops here and waits for the kill
        if state["saves"] >= 2:
            print(note, flush=True)
            time.sleep(600)

    if where == "data":  # killed with half the data of the temporary file written
        original = xr.DataTree.to_netcdf

        def to_netcdf(self, tmp, *a, **kw):
            original(self, tmp, *a, **kw)
            if state["saves"] >= 2:
                os.truncate(tmp, os.path.getsize(tmp) // 2)
            hang("inside")

        xr.DataTree.to_netcdf = to_netcdf
    else:  # killed with the temporary file complete, before the rename
        rename = os.replace

        def replace(src, dst):
            hang("inside")
            rename(src, dst)

        os.replace = replace
    rng = np.random.default_rng(0)
    i = 0
    while True:
        # only adaptations have an immediate gain (make_belief refuses one elsewhere)
        mask = np.array([c.changes_policy for c in cands], float)
        gain = xr.DataArray((rng.normal(size=(20_000, len(cands))) + i) * mask,
                            dims=("sample", "candidate"), coords={"candidate": cands.ids})
        belief = make_belief(gain, cands, step=i, policy=f"pi{i}")
        save_belief(path, belief)
        state["saves"] += 1
        print(i, flush=True)
        i += 1
""")


@pytest.mark.parametrize("where", ["data", "rename"])
def test_killed_belief_writer_leaves_the_last_complete_belief(tmp_path, where):
    """A process killed inside ``save_belief`` (half of the temporary file written, or all of
    it but not yet renamed) leaves the last completed belief, whole and loadable, and a stray
    temporary file; the writer is stopped at that point by a hook and killed there, so the
    kill always lands inside a write (no timing)."""
    from belief.workflow.belief_file import load_belief

    path = tmp_path / "belief.nc"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), where],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        deadline = time.time() + 120
        while "inside" not in lines and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(proc.stderr.read()[-2000:])
            lines.append(line.strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert lines == ["0", "1", "inside"]
    assert any(tmp_path.glob(".belief.nc.*.tmp"))  # the third save was interrupted
    belief, _ = load_belief(path)  # never half-written
    assert belief.attrs["step"] == 1  # the last completed save
    adapt = [c.id for c in SyntheticWorld().candidates if c.changes_policy]
    gain = belief["gain"].sel(candidate=adapt)  # the saved draws of that step, whole
    np.testing.assert_allclose(float(gain.mean()) - 1, 0.0, atol=0.01)


LOGGER = textwrap.dedent("""
    import sys
    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.log import append_record
    from belief.campaign.synthetic import SyntheticWorld

    c = Campaign(SyntheticWorld(), CampaignSettings(), sys.argv[1])   # writes the header
    i = 0
    while True:
        append_record(c.log_path, {"record": "deployment_check", "step": i,
                                   "padding": "x" * 2_000_000})
        print(i, flush=True)
        i += 1
""")


def test_killed_log_writer_loses_at_most_the_record_being_written(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", LOGGER, str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = -1
    try:
        deadline = time.time() + 120
        while written < 3 and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(proc.stderr.read()[-2000:])
            written = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    path = tmp_path / "campaign_log.jsonl"
    lines = path.read_bytes().split(b"\n")
    complete = [json.loads(x) for x in lines[:-1]]  # every line with an end is a whole record
    assert complete[0]["record"] == "header"
    assert [r["step"] for r in complete[1:]] == list(range(len(complete) - 1))
    assert len(complete) - 1 >= written + 1  # every acknowledged record is intact
    tail = lines[-1]  # at most the record being written is lost (a partial line, no newline)
    if tail:
        with pytest.raises(ValueError):
            json.loads(tail)
    # the reader sees the header and the first record whatever happened after them
    log = read_log(tmp_path)
    assert log.header["record"] == "header" and log.deployment is not None
    assert os.path.getsize(path) >= log.good_bytes
