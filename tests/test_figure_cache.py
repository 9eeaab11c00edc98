"""The figure cache (belief.report.figure_cache): the figures a belief file alone determines
are drawn once and copied afterwards; the key follows the file, the plotting code, the
versions and the style; a damaged entry is ignored with a warning and drawn again, never used;
entries are written whole; old entries are pruned."""

from __future__ import annotations

import hashlib
import json
import threading

import matplotlib
import pytest

import belief
from belief.cli.main import main
from belief.report import figure_cache
from belief.report.figure_cache import FigureCacheWarning, figure_key, lookup, store

FAST_DECIDE = ["--cvu-outcomes", "64", "--functional", "lcb:0.2", "--alpha-exec", "0.1"]
PNG = b"\x89PNG\r\n\x1a\n" + b"fake image body"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache root of this test only (inherited by the figure worker's process)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("BELIEF_CACHE_DIR", str(root))
    monkeypatch.delenv("BELIEF_FIGURE_CACHE", raising=False)
    return root / "figures"


def test_the_key_follows_the_file_the_dpi_the_version_and_the_style(tmp_path, monkeypatch):
    a, b = tmp_path / "a.nc", tmp_path / "b.nc"
    a.write_bytes(b"one belief")
    b.write_bytes(b"another belief")
    key = figure_key(a, 110)
    assert key == figure_key(a, 110)
    assert len({key, figure_key(b, 110), figure_key(a, 100)}) == 3
    with matplotlib.rc_context({"lines.linewidth": 3.5}):
        assert figure_key(a, 110) != key
    monkeypatch.setattr(belief, "__version__", belief.__version__ + ".dev1")
    assert figure_key(a, 110) != key
    monkeypatch.undo()
    monkeypatch.setattr(figure_cache, "SOURCES", figure_cache.SOURCES[:-1])
    assert figure_key(a, 110) != key  # the plotting code is in the key
    monkeypatch.undo()
    assert figure_key(a, 110, b) != key  # and the candidate file the command was given
    assert figure_key(a, 110, b) != figure_key(b, 110, a)


def test_entries_round_trip_and_damaged_ones_are_ignored_with_a_warning(cache):
    key = "k" * 64
    assert lookup(key) is None  # nothing there: no warning
    store(key, {"gains": PNG, "order": PNG + b"2"}, [("belief.x", "UserWarning", "drawn")])
    hit = lookup(key)
    assert hit.figures == {"gains": PNG, "order": PNG + b"2"}
    assert list(hit.figures) == ["gains", "order"]
    assert hit.warnings == [("belief.x", "UserWarning", "drawn")]
    assert [p.name for p in cache.iterdir()] == [key]  # no temporary folder left
    (cache / key / "order.png").write_bytes(PNG[:5])  # truncated
    with pytest.warns(FigureCacheWarning, match="does not match its checksum"):
        assert lookup(key) is None
    assert not (cache / key).exists()  # removed, to be drawn again
    store(key, {"gains": PNG}, [])
    (cache / key / "figures.json").write_text("{not json")
    with pytest.warns(FigureCacheWarning, match="ignored"):
        assert lookup(key) is None
    store(key, {"gains": PNG}, [])
    (cache / key / "gains.png").unlink()
    with pytest.warns(FigureCacheWarning):
        assert lookup(key) is None


def test_a_manifest_naming_a_file_outside_its_entry_is_ignored(cache):
    key = "e" * 64
    store(key, {"gains": PNG}, [])
    manifest = json.loads((cache / key / "figures.json").read_text())
    manifest["figures"] = ["../../escape"]
    manifest["sha256"] = {"../../escape": hashlib.sha256(PNG).hexdigest()}
    (cache / key / "figures.json").write_text(json.dumps(manifest))
    with pytest.warns(FigureCacheWarning, match="not a figure's file name"):
        assert lookup(key) is None


def test_no_home_folder_means_no_cache(monkeypatch):
    from pathlib import Path

    monkeypatch.delenv("BELIEF_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert figure_cache.cache_dir() is None
    assert lookup("f" * 64) is None
    store("f" * 64, {"gains": PNG}, [])  # nothing to write to, nothing raised


def test_figures_of_a_file_replaced_while_they_were_drawn_are_not_stored(
        example_belief_file, tmp_path, cache, monkeypatch):
    import os
    import shutil

    from belief.report import document, figure_worker

    path = tmp_path / "belief.nc"
    shutil.copyfile(example_belief_file, path)
    real = document.belief_figures

    def drawing_while_replaced(fitted):
        figs = real(fitted)
        os.utime(path, ns=(1, 1))  # another process wrote the file meanwhile
        return figs

    monkeypatch.setattr(document, "belief_figures", drawing_while_replaced)
    folder = tmp_path / "worker"
    folder.mkdir()
    def save(figs):
        for name in figs:
            (folder / f"{name}.png").write_bytes(PNG)

    fitted, replayed = figure_worker._belief_figures(str(path), None, str(folder), save, [])
    assert fitted is not None and replayed == []
    assert (folder / "order_effects.png").is_file()
    assert not cache.exists() or list(cache.iterdir()) == []
    fitted, _ = figure_worker._belief_figures(str(path), None, str(folder), save, [])
    monkeypatch.undo()
    assert len(list(cache.iterdir())) == 1  # an unchanged file's figures are stored


def test_the_cache_can_be_turned_off(cache, monkeypatch):
    monkeypatch.setenv("BELIEF_FIGURE_CACHE", "0")
    assert figure_cache.cache_dir() is None
    store("k" * 64, {"gains": PNG}, [])
    assert lookup("k" * 64) is None and not cache.exists()


def test_the_least_recently_used_entries_are_pruned(cache, monkeypatch):
    import os

    monkeypatch.setattr(figure_cache, "MAX_ENTRIES", 2)
    for i, key in enumerate(("a" * 64, "b" * 64)):
        store(key, {"f": PNG}, [])
        os.utime(cache / key, (1000 + i, 1000 + i))
    assert lookup("a" * 64) is not None  # used: now the most recent
    store("c" * 64, {"f": PNG}, [])
    assert sorted(p.name[0] for p in cache.iterdir()) == ["a", "c"]
    old_tmp, new_tmp = cache / ".x.old.tmp", cache / ".y.new.tmp"
    old_tmp.mkdir()
    new_tmp.mkdir()
    os.utime(old_tmp, (1000, 1000))  # a writer killed long ago; the other is writing now
    store("d" * 64, {"f": PNG}, [])
    assert not old_tmp.exists() and new_tmp.exists()


def test_entries_filled_at_once_by_several_writers_stay_whole(cache):
    key = "d" * 64
    figures = {f"fig{i}": PNG + bytes([i]) * 50_000 for i in range(4)}
    start = threading.Barrier(8)

    def write():
        start.wait()
        store(key, figures, [])

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert lookup(key).figures == figures
    assert [p.name for p in cache.iterdir()] == [key]


def test_decide_copies_the_belief_figures_from_the_cache(example_belief_file, tmp_path, cache):
    """The second decide on a belief copies its belief figures from the cache (an entry
    whose order_effects.png was replaced, consistently with its manifest, gives that file);
    a damaged entry is reported and the figures drawn again (the same bytes as the first)."""
    first = tmp_path / "first"
    assert main(["decide", str(example_belief_file), "--out", str(first), *FAST_DECIDE]) == 0
    (entry,) = list(cache.iterdir())
    manifest = json.loads((entry / "figures.json").read_text())
    assert "order_effects" in manifest["figures"]
    assert "gains" not in manifest["figures"]  # a decision's figure is never cached
    for name in manifest["figures"]:
        assert (entry / f"{name}.png").read_bytes() == (first / f"{name}.png").read_bytes()
    marked = PNG + b"from the cache"
    (entry / "order_effects.png").write_bytes(marked)
    manifest["sha256"]["order_effects"] = hashlib.sha256(marked).hexdigest()
    (entry / "figures.json").write_text(json.dumps(manifest))
    second = tmp_path / "second"
    assert main(["decide", str(example_belief_file), "--out", str(second), *FAST_DECIDE,
                 "--beta", "0"]) == 0
    assert (second / "order_effects.png").read_bytes() == marked
    (entry / "order_effects.png").write_bytes(b"damaged")
    third = tmp_path / "third"
    with pytest.warns(FigureCacheWarning, match="ignored"):
        assert main(["decide", str(example_belief_file), "--out", str(third),
                     *FAST_DECIDE]) == 0
    assert (third / "order_effects.png").read_bytes() == \
        (first / "order_effects.png").read_bytes()
    assert (entry / "order_effects.png").read_bytes() == \
        (first / "order_effects.png").read_bytes()  # drawn again and stored again


def test_a_worker_whose_belief_figures_are_cached_does_not_read_the_belief(
        example_belief_file, tmp_path, cache, monkeypatch):
    """On a cache hit the figure worker draws the decision's figures from what the command
    sent with the decision (belief_view) and never loads the belief file: the same PNGs."""
    import io
    import pickle
    import sys
    from types import SimpleNamespace

    from belief.report import figure_worker
    from belief.workflow import belief_file

    first = tmp_path / "first"
    assert main(["decide", str(example_belief_file), "--out", str(first), *FAST_DECIDE]) == 0
    fitted = belief_file.load(example_belief_file)
    gates = []
    decision = fitted.decide(functional="lcb:0.2", cvu_outcomes=64,
                             on_feasibility=gates.append)  # β = 1: CVU computed after
    (gate,) = gates  # what decide sends before CVU: the decision's own values
    assert list(gate["candidate"].values) == list(decision["candidate"].values)
    for name in gate.data_vars:
        assert gate[name].reset_coords(drop=True).equals(
            decision[name].reset_coords(drop=True)), name  # NaN equal to NaN
    assert all(gate.attrs[k] == decision.attrs[k] for k in gate.attrs)
    payload = (pickle.dumps({"gate": gate, "belief": figure_worker.belief_view(fitted)})
               + pickle.dumps({"decision": decision}))

    def no_load(*args, **kwargs):
        raise AssertionError("the worker read the belief file")

    monkeypatch.setattr(belief_file, "load", no_load)
    folder = tmp_path / "worker"
    folder.mkdir()
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(payload)))
    assert figure_worker.main([str(example_belief_file), str(folder)]) == 0
    answer = json.loads((folder / "figures.json").read_text())
    assert {"gains", "order_effects", "safety", "q_decomposition"} <= set(answer["figures"])
    for name in ("order_effects", "gains", "safety"):
        assert (folder / f"{name}.png").read_bytes() == (first / f"{name}.png").read_bytes()
    first_message = len(pickle.dumps({"gate": gate,
                                      "belief": figure_worker.belief_view(fitted)}))
    # the parent gave up after the gate, or died while writing the decision: exit 3
    for cut in (first_message, first_message + 100):
        truncated = tmp_path / f"no-decision-{cut}"
        truncated.mkdir()
        monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(payload[:cut])))
        assert figure_worker.main([str(example_belief_file), str(truncated)]) == 3
        assert not truncated.exists()
