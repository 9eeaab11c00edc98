"""On-disk cache of the figures a saved belief alone determines.

``belief decide`` writes, besides the figures of its decision, those of the belief it read
(:func:`belief.report.document.belief_figures`: ``order_effects``, ``sensitivity_<policy>``,
``costs``).  Deciding again on the same belief — under another functional, β or budget —
drew them again (≈ 0.3 s of CPU in a warm decide, on the core CVU wants).  The figure worker
(:mod:`belief.report.figure_worker`) now draws them once per belief file and copies them
afterwards.

Key: the SHA-256 of the belief file's bytes (and of the candidate file the command was given,
which supplies a bare belief file's resources), belief's and matplotlib's versions, the DPI, the
source of the modules that draw or tabulate these figures (:data:`SOURCES`) and matplotlib's
rcParams — a new fit, a change of that code, of matplotlib or of the user's style gives a new
key.  Figures drawn from a file that changed while they were drawn are not stored.

Storage: ``<cache root>/figures/<key>/`` (the root of the compiled-model cache,
:func:`models.compile_cache.cache_root`): ``figures.json`` (the stems in order, each PNG's
SHA-256, and the warnings their drawing raised, replayed on a hit) and one PNG per stem.  An
entry is written into a temporary folder and renamed into place, so a reader sees a whole entry
or none; of two processes filling the same entry one rename wins and the other folder is
removed.  An entry that does not match its manifest (a PNG missing, truncated or changed, an
unreadable manifest, a stem that is not a plain file name) is ignored with a
:class:`FigureCacheWarning`, removed and drawn again, never used; an entry removed by another
process while it was read is a plain miss.  At most :data:`MAX_ENTRIES` entries are kept (the
least recently used are removed when one is written, with temporary folders older than an hour
that a killed writer left).  ``BELIEF_FIGURE_CACHE=0`` turns the cache off, and a cache folder
that cannot be found or read is no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_ENTRIES", "SOURCES", "CachedFigures", "FigureCacheWarning", "cache_dir",
           "figure_key", "lookup", "store"]

MAX_ENTRIES = 32
"""Entries kept; writing one more removes the least recently used."""

SOURCES = ("report/plots.py", "report/cost_plots.py", "report/document.py",
           "report/figure_worker.py", "report/tables.py", "posterior/order_effects.py",
           "posterior/sensitivity.py")
"""The modules of :mod:`belief` (paths in the package) whose source is part of the key."""

_STEM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_STALE_TMP = 3600.0  # seconds after which a writer's temporary folder is taken as abandoned

_MANIFEST = "figures.json"
_FORMAT = 1


class FigureCacheWarning(UserWarning):
    """A figure-cache entry was ignored (damaged or incomplete) and its figures drawn again."""


@dataclass(frozen=True)
class CachedFigures:
    """A cache hit: PNG bytes by stem (in drawing order) and the warnings drawing them raised,
    as (module, class name, message)."""

    figures: dict[str, bytes]
    warnings: list[tuple[str, str, str]]


def cache_dir() -> Path | None:
    """``<cache root>/figures``, or None when ``BELIEF_FIGURE_CACHE=0``."""
    if os.environ.get("BELIEF_FIGURE_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    from belief.posterior.registry import cache_root

    try:
        return cache_root() / "figures"
    except RuntimeError:  # no home folder to put it in
        return None


def figure_key(belief_path: str | Path, dpi: int, candidates: str | Path | None = None) -> str:
    """SHA-256 (hex) of the belief file's bytes, the ``candidates`` file's (when given), the
    versions, ``dpi``, :data:`SOURCES` and matplotlib's rcParams (module docstring)."""
    import matplotlib

    import belief

    h = hashlib.sha256()
    for path in (belief_path, candidates):
        h.update(b"\0file\0")
        if path is not None:
            with open(path, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    h.update(block)
    h.update(f"\0{_FORMAT}\0{belief.__version__}\0{matplotlib.__version__}\0{dpi}\0".encode())
    package = Path(belief.__file__).parent
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (package / name).read_bytes())
    h.update(repr(sorted((k, repr(v)) for k, v in matplotlib.rcParams.items())).encode())
    return h.hexdigest()


def lookup(key: str) -> CachedFigures | None:
    """The entry ``key``, or None (no cache, no entry, or a damaged entry: removed, with a
    :class:`FigureCacheWarning`)."""
    root = cache_dir()
    folder = None if root is None else root / key
    try:
        if folder is None or not folder.is_dir():
            return None
    except OSError:  # a cache folder that cannot be read: no cache
        return None
    try:
        manifest = json.loads((folder / _MANIFEST).read_text("utf-8"))
        if manifest["format"] != _FORMAT or manifest["key"] != key:
            raise ValueError("another format or key")
        figures = {}
        for name in manifest["figures"]:
            if not isinstance(name, str) or not _STEM.fullmatch(name):
                raise ValueError(f"{name!r} is not a figure's file name")
            data = (folder / f"{name}.png").read_bytes()
            if hashlib.sha256(data).hexdigest() != manifest["sha256"][name]:
                raise ValueError(f"{name}.png does not match its checksum")
            figures[str(name)] = data
        recorded = [(str(m), str(c), str(t)) for m, c, t in manifest["warnings"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        if isinstance(err, FileNotFoundError) and not folder.exists():
            return None  # removed by another process meanwhile (pruned): a miss
        warnings.warn(f"figure cache entry {folder} ignored ({err}); drawing the figures again",
                      FigureCacheWarning, stacklevel=2)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    try:
        os.utime(folder)  # recently used
    except OSError:
        pass
    return CachedFigures(figures, recorded)


def store(key: str, figures: dict[str, bytes],
          recorded: list[tuple[str, str, str]]) -> None:
    """Write the entry ``key`` (atomically; an existing entry is kept) and keep at most
    :data:`MAX_ENTRIES`.  A cache that cannot be written is left alone (the figures were
    drawn; nothing is lost)."""
    root = cache_dir()
    if root is None:
        return
    tmp = root / f".{key}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.mkdir(parents=True)
        for name, data in figures.items():
            (tmp / f"{name}.png").write_bytes(data)
        (tmp / _MANIFEST).write_text(json.dumps({
            "format": _FORMAT, "key": key, "figures": list(figures),
            "sha256": {n: hashlib.sha256(d).hexdigest() for n, d in figures.items()},
            "warnings": [list(w) for w in recorded]}), "utf-8")
        try:
            os.rename(tmp, root / key)  # fails when another process put the entry first
        except OSError:
            pass
        _prune(root)
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(root: Path) -> None:
    """Remove the least recently used entries beyond :data:`MAX_ENTRIES`, and temporary
    folders older than an hour (a writer killed while writing)."""
    entries = []
    now = time.time()
    for path in root.iterdir():
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if path.name.startswith("."):
            if path.name.endswith(".tmp") and now - mtime > _STALE_TMP:
                shutil.rmtree(path, ignore_errors=True)
        elif path.is_dir():
            entries.append((mtime, path))
    for _, path in sorted(entries)[:max(len(entries) - MAX_ENTRIES, 0)]:
        shutil.rmtree(path, ignore_errors=True)
