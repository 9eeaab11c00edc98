"""The policy benchmark's arm flags refuse bad settings by name, before any campaign runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_policies.py"


@pytest.mark.parametrize("arm, needle", [
    ("x:nonsense=1", "FIELD one of"),
    ("x:noise_correction=maybe", "noise_correction takes true or false"),
    ("x:n_outcomes=1", "CVUSettings.n_outcomes: must be an integer >= 2"),
    ("x:estimator=exact", "CVUSettings.estimator"),
])
def test_cvu_arm_refuses_bad_settings(arm, needle, tmp_path):
    out = tmp_path / "rows.json"
    res = subprocess.run([sys.executable, str(SCRIPT), "--cvu-arm", arm, "--policies", "",
                          "--world-list", "0", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert "--cvu-arm" in last and needle in last, last
    assert not out.exists()
