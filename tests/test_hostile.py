"""Hostile input as a new user types it: every case is refused at the boundary with ONE line on
stderr naming the right thing (the file, table or column, flag, and the closest known name),
exit code 2, before any model is compiled or sampled, and nothing is written or clobbered.

Each case copies the shipped example (:func:`belief.inputs.example.example_paths`) to a temporary
folder, breaks one thing, and runs the CLI in-process (``belief.cli.main.main``).  The output
folder holds a file before the run, so that a clobbered or added file shows in the snapshot.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from belief.cli.main import main
from belief.inputs.example import example_paths


@dataclass
class Case:
    """A copy of the example to break: ``ev`` the evidence folder, ``cand`` its candidate file,
    ``out`` an output folder that already holds a file."""

    root: Path

    @property
    def ev(self) -> Path:
        return self.root / "ex" / "evidence"

    @property
    def cand(self) -> Path:
        return self.root / "ex" / "candidates.toml"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def edit(self, old: str, new: str, count: int = 1) -> None:
        """Replace ``old`` by ``new`` in the candidate file (``old`` must be there)."""
        text = self.cand.read_text()
        assert old in text, old
        self.cand.write_text(text.replace(old, new, count))

    def append(self, text: str) -> None:
        self.cand.write_text(self.cand.read_text() + "\n" + text + "\n")

    def table(self, name: str) -> pd.DataFrame:
        return pd.read_csv(self.ev / f"{name}.csv")

    def write(self, name: str, df: pd.DataFrame) -> None:
        df.to_csv(self.ev / f"{name}.csv", index=False)

    def fit(self, *extra: str, out: str | None = None) -> list[str]:
        return ["fit", str(self.ev), "--candidates", str(self.cand), "--out",
                str(self.out / "belief.nc") if out is None else out, *extra]

    def csv_layout(self) -> Path:
        """The example as replay's CSV layout (candidates.toml, steps.csv, the tables)."""
        folder = self.root / "layout"
        folder.mkdir()
        shutil.copy(self.cand, folder / "candidates.toml")
        for name in ("paired_evaluations", "gain_estimates"):
            shutil.copy(self.ev / f"{name}.csv", folder / f"{name}.csv")
        costs = self.table("costs")
        after = {0: "pi1", 1: "pi2"}
        steps = pd.DataFrame({"step": costs["step"], "candidate": costs["candidate"],
                              "policy": costs["policy"],
                              "policy_after": [after.get(int(s), p) for s, p in
                                               zip(costs["step"], costs["policy"],
                                                   strict=True)],
                              **{f"cost_{r}": costs[r] for r in ("real_h", "compute",
                                                                 "eng_h")}})
        steps.to_csv(folder / "steps.csv", index=False)
        return folder


def _ids_with(c: Case, bad: str) -> None:
    c.edit('id = "dr_1e6"', f'id = "{bad}"')


def _resource(c: Case, name: str) -> None:
    c.edit('resources = ["real_h", "compute", "eng_h"]', f'resources = ["{name}", "compute", '
                                                          '"eng_h"]')


def _parquet_datetime_step(table: str) -> Callable[[Case], None]:
    """``table`` as Parquet with its integer steps stored as timestamps (step n = n ns after
    the epoch: what a writer that typed the column as a timestamp leaves)."""
    def setup(c: Case) -> None:
        df = c.table(table)
        df["step"] = pd.to_datetime(df["step"], unit="ns")
        df.to_parquet(c.ev / f"{table}.parquet")
        (c.ev / f"{table}.csv").unlink()
    return setup


def _cost_row_twice(c: Case) -> None:
    df = c.table("costs")
    c.write("costs", pd.concat([df, df.iloc[[1]]], ignore_index=True))


def _column_renamed(table: str, old: str, new: str) -> Callable[[Case], None]:
    def setup(c: Case) -> None:
        c.write(table, c.table(table).rename(columns={old: new}))
    return setup


def _prior_model_misspelt(command: str) -> Callable[[Case], list[str]]:
    """``[priors.gainz]`` in the candidate file of ``manual`` or of replay's CSV layout: the
    commands that read a candidate file without fitting from it refuse it too."""
    def setup(c: Case) -> list[str]:
        c.append("[priors.gainz]\neffect_mu_sigma = 0.4")
        if command == "manual":
            return ["manual", "--candidates", str(c.cand), "--out", str(c.out / "camp")]
        layout = c.csv_layout()
        return ["replay", str(layout), "--out", str(c.out)]
    return setup


def _layout_column_renamed(c: Case) -> list[str]:
    layout = c.csv_layout()
    df = pd.read_csv(layout / "paired_evaluations.csv")
    df.rename(columns={"treated_policy": "treatd_policy"}).to_csv(
        layout / "paired_evaluations.csv", index=False)
    return ["replay", str(layout), "--out", str(c.out)]


def _past_link(c: Case) -> list[str]:
    link = c.root / "link"
    link.symlink_to(c.ev, target_is_directory=True)
    return c.fit("--past", str(link))


def _past_copy_twice(c: Case) -> list[str]:
    past = c.root / "past"
    shutil.copytree(c.ev, past)
    return c.fit("--past", f"{past},{past}/")


#: name → (what breaks it: a function of the Case that returns argv (or None: ``fit``), the
#: words the one line must contain)
CASES: dict[str, tuple[Callable[[Case], list[str] | None], tuple[str, ...]]] = {
    # 1. typos accepted silently
    "unknown table [budgte]": (lambda c: c.edit("\n[budget]\n", "\n[budgte]\n"),
                               ("candidates.toml", "budgte", "did you mean", "budget")),
    "unknown table [weigths]": (lambda c: c.edit("\n[weights]\n", "\n[weigths]\n"),
                                ("candidates.toml", "weigths", "did you mean", "weights")),
    "unknown key in [campaign]": (
        lambda c: c.edit("resources = [", "resorces = ["),
        ("candidates.toml", "[campaign]", "resorces", "did you mean", "resources")),
    "unknown key in [[candidate]]": (
        lambda c: c.edit("cost = { real_h = 1.0", "cots = { real_h = 1.0"),
        ("candidates.toml", "cots", "did you mean", "cost")),
    "unknown key in [budget]": (
        lambda c: c.edit("compute = 300.0", "compte = 300.0"),
        ("candidates.toml", "[budget]", "compte", "did you mean", "compute")),
    "unknown key in [weights]": (
        lambda c: c.edit("eng_h = 0.004", "eng_hh = 0.004"),
        ("candidates.toml", "[weights]", "eng_hh", "did you mean", "eng_h")),
    "unknown key in [[interaction]]": (
        lambda c: c.append('[[interaction]]\nfrom = "sim_refresh"\nto = "dr_1e6"\nmean = 0.1\n'
                           'sdd = 0.05'),
        ("[[interaction]]", "sdd", "did you mean", "sd")),
    "unknown prior model, manual": (_prior_model_misspelt("manual"),
                                    ("candidates.toml", "gainz", "did you mean", "gains")),
    "unknown prior model, replay": (_prior_model_misspelt("replay"),
                                    ("candidates.toml", "gainz", "did you mean", "gains")),
    "unknown prior model": (
        lambda c: c.append("[priors.gainz]\neffect_mu_sigma = 0.4"),
        ("candidates.toml", "gainz", "did you mean", "gains")),
    "unknown prior name": (
        lambda c: c.append('[priors.gains]\ntau_lense = { family = "half_normal", sigma = 1 }'),
        ("candidates.toml", "[priors.gains]", "tau_lense", "did you mean", "tau_lens")),
    "unknown key of a scale prior": (
        lambda c: c.append('[priors.gains]\ntau_lens = { family = "half_normal", sigm = 1 }'),
        ("[priors.gains]", "tau_lens", "sigm", "did you mean", "sigma")),
    "misspelt evidence column": (
        _column_renamed("paired_evaluations", "treated_policy", "treatd_policy"),
        ("paired_evaluations.csv", "treatd_policy", "did you mean", "treated_policy")),
    "misspelt optional column": (
        _column_renamed("gain_estimates", "source", "sorce"),
        ("gain_estimates.csv", "sorce", "did you mean", "source")),
    "misspelt costs column": (
        _column_renamed("costs", "eng_h", "eng_hh"),
        ("costs.csv", "eng_hh", "did you mean", "eng_h")),
    "misspelt column of replay's CSV layout": (_layout_column_renamed,
                                                ("paired_evaluations.csv", "treatd_policy",
                                                 "did you mean", "treated_policy")),
    "misspelt table file": (
        lambda c: [(c.ev / "safety_events.csv").rename(c.ev / "safety_event.csv"), None][1],
        ("safety_event.csv", "did you mean", "safety_events")),
    "id with a trailing space": (lambda c: _ids_with(c, "dr_1e6 "),
                                 ("candidates.toml", "'dr_1e6 '", "whitespace")),
    "id with a newline": (lambda c: _ids_with(c, "dr\\n1e6"),
                          ("candidates.toml", "dr\\n1e6", "control character")),
    "id with a comma": (lambda c: _ids_with(c, "dr,1e6"),
                        ("candidates.toml", "'dr,1e6'", "','")),
    "resource with a comma": (lambda c: _resource(c, "real,h"),
                              ("candidates.toml", "[campaign] resources", "'real,h'", "','")),
    "resource with '='": (lambda c: _resource(c, "real=h"),
                          ("candidates.toml", "[campaign] resources", "'real=h'", "'='")),
    "resource with spaces": (lambda c: _resource(c, " real_h"),
                             ("candidates.toml", "[campaign] resources", "whitespace")),
    "policy with a leading space": (
        lambda c: c.write("policy_evaluations",
                          c.table("policy_evaluations").assign(policy=" pi0")),
        ("policy_evaluations.csv", "policy", "' pi0'", "whitespace")),
    "parquet step as datetimes": (_parquet_datetime_step("paired_evaluations"),
                                  ("paired_evaluations.parquet", "step", "datetime")),
    "parquet costs step as datetimes": (_parquet_datetime_step("costs"),
                                        ("costs.parquet", "step", "datetime")),
    # 2. double counting
    "--past the same folder twice": (_past_copy_twice, ("--past", "twice")),
    "--past the evidence folder itself": (lambda c: c.fit("--past", str(c.ev)),
                                          ("--past", "evidence folder")),
    "--past a link to the evidence folder": (_past_link, ("--past", "evidence folder")),
    "costs.csv row twice": (_cost_row_twice, ("costs.csv", "duplicate", "row 1")),
    "replay --past the replayed log": (
        lambda c: ["replay", str(c.csv_layout()), "--past", str(c.root / "layout"), "--out",
                   str(c.out)],
        ("--past", "replayed")),
    # 3. finite but absurd numbers, paths
    "interaction mean 1e300": (
        lambda c: c.append('[[interaction]]\nfrom = "sim_refresh"\nto = "dr_1e6"\nmean = 1e300'
                           '\nsd = 0.05'),
        ("[[interaction]]", "mean", "1e+300", "10")),
    "interaction sd 1e300": (
        lambda c: c.append('[[interaction]]\nfrom = "sim_refresh"\nto = "dr_1e6"\nmean = 0.1\n'
                           'sd = 1e300'),
        ("[[interaction]]", "sd", "1e+300", "[0.001, 10]")),
    "interaction sd 1e-300": (
        lambda c: c.append('[[interaction]]\nfrom = "sim_refresh"\nto = "dr_1e6"\nmean = 0.1\n'
                           'sd = 1e-300'),
        ("[[interaction]]", "sd", "1e-300", "[0.001, 10]")),
    "prior scale 1e308": (
        lambda c: c.append('[priors.gains]\ntau_lens = { family = "half_normal", sigma = 1e308'
                           ' }'),
        ("[priors.gains]", "tau_lens", "1e+308", "[0.001, 100]")),
    "prior location 1e300": (
        lambda c: c.append("[priors.gains]\neffect_mu_sigma = 1e300"),
        ("[priors.gains]", "effect_mu_sigma", "1e+300", "[0.001, 100]")),
    "fit --seed 2**64": (lambda c: c.fit("--seed", str(2**64)), ("--seed", "2**63")),
    "fit --seed -1": (lambda c: c.fit("--seed", "-1"), ("--seed",)),
    "fit --out a 300-character name": (lambda c: c.fit(out=str(c.out / ("b" * 300 + ".nc"))),
                                       ("--out", "too long")),
    "fit --out under /proc": (lambda c: c.fit(out="/proc/belief.nc"), ("--out", "/proc")),
    "fit --out ''": (lambda c: c.fit(out=""), ("--out", "empty")),
    "report --gate with a given --decision": (
        lambda c: ["report", str(c.root / "belief.nc"), "--decision", str(c.root / "dec"),
                   "--gate", "posterior", "--out", str(c.out / "r.html")],
        ("--gate", "--decision", "would not change")),
    "report --alpha-exec with a given --decision": (
        lambda c: ["report", str(c.root / "belief.nc"), "--decision", str(c.root / "dec"),
                   "--alpha-exec", "0.2", "--out", str(c.out / "r.html")],
        ("--alpha-exec", "--decision")),
    "decide --out ''": (lambda c: ["decide", str(c.root / "belief.nc"), "--out", ""],
                        ("--out", "empty")),
    "decide --cvu-outcomes 1e9": (
        lambda c: ["decide", str(c.root / "belief.nc"), "--cvu-outcomes", "1000000000",
                   "--out", str(c.out)],
        ("--cvu-outcomes", "GB")),
    # 4. settings without effect
    "[[interaction]] with order_effects = false": (
        lambda c: c.append('[priors.gains]\norder_effects = false\n\n[[interaction]]\n'
                           'from = "sim_refresh"\nto = "dr_1e6"\nmean = 0.1\nsd = 0.05'),
        ("[[interaction]]", "order_effects = false")),
    "method pair matching no pair": (
        lambda c: c.append('[[interaction]]\nfrom_method = "SI"\nto_method = "SI"\nmean = 0.1\n'
                           'sd = 0.05'),
        ("[[interaction]]", "line", "no candidate pair")),
    "fit --chains 1": (lambda c: c.fit("--chains", "1"), ("--chains", "R-hat")),
    "fit --step before the evidence": (lambda c: c.fit("--step", "0"),
                                       ("--step", "0", "step 2")),
    # 6. messages
    "resources = [] blamed on [campaign]": (
        lambda c: c.edit('resources = ["real_h", "compute", "eng_h"]', "resources = []"),
        ("candidates.toml", "[campaign] resources")),
    "[[interaction]] error names its line": (
        lambda c: c.append('[[interaction]]\nfrom = "nobody"\nto = "dr_1e6"\nmean = 0.1\n'
                           'sd = 0.05'),
        ("[[interaction]]", "line", "nobody")),
}


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


@pytest.fixture
def case(tmp_path) -> Case:
    c = Case(tmp_path)
    ev, cand = example_paths()
    shutil.copytree(ev, c.ev)
    shutil.copy(cand, c.cand)
    c.out.mkdir()
    (c.out / "keep.txt").write_text("an earlier run's file")
    (tmp_path / "belief.nc").write_bytes(b"not read: the refusal comes first")
    return c


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_refused_in_one_line(name, case, capsys, no_compute):
    setup, needles = CASES[name]
    argv = setup(case) or case.fit()
    before = snapshot(case.root)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (code, err, captured.out[-2000:])
    assert "\n" not in err and ": error: " in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert snapshot(case.root) == before, "a file was written or changed"


def test_a_valid_id_is_still_accepted(case):
    """The id rules refuse only what they name: dots, dashes, slashes and unicode pass."""
    from belief.inputs.candidate_file import load_candidate_file

    _ids_with(case, "dr-1e6.v2/ü")
    assert "dr-1e6.v2/ü" in load_candidate_file(case.cand).candidates.ids


def test_the_closest_name_is_offered_only_when_there_is_one(case, capsys, no_compute):
    case.edit("\n[budget]\n", "\n[zzzzzz]\n")
    code = main(case.fit())
    err = capsys.readouterr().err
    assert code == 2 and "zzzzzz" in err and "did you mean" not in err
    assert re.search(r"known.*budget", err), err


# -- refusals that need a fitted belief ------------------------------------------------------------
@pytest.mark.slow
def test_epsilon_budget_without_cost_draws_is_refused(example_belief_file, tmp_path, capsys):
    out = tmp_path / "d"
    code = main(["decide", str(example_belief_file), "--epsilon-budget", "0.1", "--out",
                 str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "--epsilon-budget" in err and "no cost draws" in err and "--costs" in err, err
    assert not out.exists()


# -- what the engine did instead of what was asked -------------------------------------------------
def test_a_continuation_that_fell_back_is_said_in_one_line():
    from belief.cli.statistician import continuation_note

    why = "rollout of depth 3 not used for any candidate: beyond two steps it needs weights"
    note = continuation_note({"continuation": "rollout", "continuation_depth": 3,
                              "continuation_used": "one_step", "continuation_reason": why})
    assert "\n" not in note and "--continuation rollout" in note and "one_step" in note
    assert why in note
    assert continuation_note({"continuation": "rollout", "continuation_depth": 2,
                              "continuation_used": "rollout(d=2)"}) == ""
    assert continuation_note({}) == ""  # one_step asked: nothing to say


# -- messages --------------------------------------------------------------------------------------
def test_the_csv_layout_of_replay_takes_the_weights_of_its_candidate_file(case):
    from belief.campaign.replay import load_campaign
    from belief.inputs.candidate_file import load_candidate_file

    camp = load_campaign(case.csv_layout())
    assert camp.settings is not None and camp.settings.weights is not None
    assert dict(camp.settings.weights.values) == load_candidate_file(case.cand).weights


def test_recompute_differences_show_plain_numbers():
    import numpy as np

    from belief.errors import InputError
    from belief.posterior.diagnostics import DIAGNOSTIC_COLUMNS
    from belief.workflow.derived import Derived, compare_diagnostics

    index = pd.MultiIndex.from_tuples([("gains", "mu0")], names=["model", "variable"])
    row = {c: np.float64(1.0) for c in [*DIAGNOSTIC_COLUMNS, "chains", "draws"]}
    a = pd.DataFrame([row], index=index)
    b = a.copy()
    b.loc[("gains", "mu0"), "rhat"] = np.float64(1.0001)
    with pytest.raises(InputError) as err:
        compare_diagnostics(Derived(a, {}, {}), Derived(b, {}, {}), "belief.nc")
    assert "np.float64" not in str(err.value) and "stored 1.0, recomputed 1.0001" in str(
        err.value)


# -- belief/files.py: durability -------------------------------------------------------------------
def _events(monkeypatch) -> list[str]:
    """Record every os.replace and every fsync of a folder, in order."""
    import os
    import stat

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append("fsync folder")
        return real_fsync(fd)

    def replace(src, dst):
        events.append(f"replace {Path(dst).name}")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def test_a_commit_fsyncs_the_folder_after_its_renames(tmp_path, monkeypatch):
    from belief.files import OutputSet, atomic_write

    events = _events(monkeypatch)
    with OutputSet(tmp_path, "t") as out:
        out.write("a.txt", lambda p: Path(p).write_text("a"))
        out.write("b.txt", lambda p: Path(p).write_text("b"))
    last = max(i for i, e in enumerate(events) if e in ("replace a.txt", "replace b.txt"))
    assert "fsync folder" in events[last + 1:], events
    events.clear()
    atomic_write(tmp_path / "c.txt", lambda p: Path(p).write_text("c"))
    assert events == ["replace c.txt", "fsync folder"], events


def test_a_replace_that_fails_part_way_leaves_no_staged_file(tmp_path, monkeypatch):
    import os

    from belief.files import OutputSet

    (tmp_path / "b.txt").write_text("the earlier b")
    out = OutputSet(tmp_path, "t")
    out.write("a.txt", lambda p: Path(p).write_text("a"))
    out.write("b.txt", lambda p: Path(p).write_text("b"))
    real = os.replace

    def replace(src, dst):
        if Path(dst).name == "b.txt":
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError):
        out.commit()
    monkeypatch.setattr(os, "replace", real)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".stage")]
    assert (tmp_path / "b.txt").read_text() == "the earlier b"
    assert set(out.owned()) == {"a.txt", "b.txt"}  # the next run knows what may be stale


@pytest.mark.parametrize("text", ["{not json", '{"files": "a.txt"}', "[1, 2]"])
def test_a_damaged_manifest_is_reported_and_replaced(tmp_path, text):
    from belief.files import DamagedManifestWarning, OutputSet

    out = OutputSet(tmp_path, "t")
    out.manifest.write_text(text)
    with pytest.warns(DamagedManifestWarning, match=r"\.belief-t\.json"):
        assert out.owned() == []
    with pytest.warns(DamagedManifestWarning), OutputSet(tmp_path, "t") as again:
        again.write("a.txt", lambda p: Path(p).write_text("a"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OutputSet(tmp_path, "t").owned() == ["a.txt"]


def test_the_folder_lock_excludes_other_threads_of_the_process(tmp_path):
    import threading

    from belief.errors import InputError
    from belief.files import acquire_folder, hold_folder, release_folder

    held, go, order = threading.Event(), threading.Event(), []

    def holder():
        with hold_folder(tmp_path):
            with hold_folder(tmp_path):  # reentrant within its thread
                held.set()
                go.wait(10)
                order.append("holder releases")

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(10)
    with pytest.raises(InputError, match="another thread of this process"):
        acquire_folder(tmp_path, blocking=False)

    def waiter():
        key = acquire_folder(tmp_path)  # blocks until the holder is done
        order.append("waiter holds")
        release_folder(key)

    w = threading.Thread(target=waiter)
    w.start()
    w.join(0.3)
    assert w.is_alive() and order == []  # still waiting
    go.set()
    t.join(10)
    w.join(10)
    assert order == ["holder releases", "waiter holds"]


_SHIM_PROBE = """
import os, sys, tempfile
import numpy as np
import belief.files
import xarray as xr
ds = xr.Dataset({"a": ("x", np.arange(3.0))})
ds = ds + 1
ds.to_netcdf(os.path.join(tempfile.mkdtemp(), "a.nc"))
print("dask" in sys.modules, float(ds.a.sum()))
import dask.array as da
z = xr.DataArray(da.zeros(4, chunks=2))
from xarray.namedarray.pycompat import is_chunked_array
print(is_chunked_array(z.variable._data), z.chunks is not None)
"""


@pytest.mark.parametrize("shims", ["1", "0"])
def test_the_xarray_shims_keep_dask_unloaded_and_give_xarrays_answers(shims):
    """No supported xarray option avoids the import of dask for every array; the shims of
    belief.files do, and a dask array is still a dask array once dask is loaded.  With
    BELIEF_XARRAY_SHIMS=0 xarray loads dask itself (what the shims avoid)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "BELIEF_XARRAY_SHIMS": shims}
    done = subprocess.run([sys.executable, "-c", _SHIM_PROBE], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    first, second = done.stdout.split("\n")[:2]
    assert first == ("False 6.0" if shims == "1" else "True 6.0"), done.stdout
    assert second == "True True", done.stdout


def test_cvu_outcomes_that_cannot_fit_in_memory_are_refused_with_the_estimate():
    from belief.cli.statistician import _outcomes_fit_in_memory
    from belief.errors import InputError

    _outcomes_fit_in_memory(256, 4000, workers=2, available=10**9)  # 33 MB: fine
    with pytest.raises(InputError, match=r"--cvu-outcomes.*about 3\.2 GB.*1\.0 GB available"):
        _outcomes_fit_in_memory(50_000, 4000, workers=1, available=10**9)
    with pytest.raises(InputError, match="at most 1048576"):
        _outcomes_fit_in_memory(2**20 + 1)
