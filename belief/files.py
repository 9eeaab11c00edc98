"""Files, written so that a crash never leaves a half-written one, and read with clear errors.

- :func:`atomic_write`: a temporary file in the same folder, fsync'ed and renamed over the
  target;
- :func:`read_file` / :func:`check_header`: one path for missing, unreadable, foreign-format
  and other-version files;
- :func:`netcdf_ready` and :func:`jsonable`: values made storable in netCDF and JSON;
- :func:`writable_file` / :func:`writable_folder`: an output path checked *before* any work,
  so an unwritable ``--out`` is one line and exit code 2, not a traceback after the compute;
- :class:`OutputSet`: the set of files one command writes, staged and then committed as one
  unit (under a folder lock, with a manifest of the files it owns, so a re-run or a concurrent
  run never leaves another run's stale files behind);
- :func:`hold_folder`: an exclusive lock on a folder, reentrant within a thread, excluding
  other threads and processes (a campaign holds its folder for its whole run);
  :func:`deferred_interrupt` delays Ctrl-C over a commit;
- :func:`dataset_digest`: the SHA-256 of a Dataset's content (which belief a decision came
  from).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import belief as _pkg
from belief.errors import InputError


def _dask_array_only_when_loaded() -> None:
    """Stop xarray importing ``dask.array`` (and with it scipy.fft, scipy.sparse, …: ~0.3–0.6 s)
    and ``dask.base`` the first time it builds a variable.  xarray asks "is this a dask
    array?" of every array it wraps, and answers by importing dask.array when dask is
    installed (a dependency here, for :mod:`belief.campaign.many`).  No array can be a dask
    array before dask.array is imported, so the answer is read from ``sys.modules``: the same
    answer, without the import.  Left as is when xarray's private cache is not where it was
    (xarray then imports dask.array)."""
    import sys

    try:
        from xarray.namedarray import pycompat
    except ImportError:  # pragma: no cover - xarray moved it
        return
    cache = getattr(pycompat, "_cached_duck_array_modules", None)
    base = getattr(pycompat, "DuckArrayModule", None)
    if not isinstance(cache, dict) or base is None or "dask" in cache:
        return

    class DaskWhenLoaded(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self._real = None

        def _get(self, name: str) -> Any:
            if self._real is None:
                self._real = base("dask")
            return getattr(self._real, name)

        @property
        def type(self) -> tuple[type, ...]:  # type: ignore[override]
            mod = sys.modules.get("dask.array")
            if mod is None or not hasattr(mod, "Array"):
                return ()
            return self._get("type")

        module = property(lambda self: self._get("module"))
        version = property(lambda self: self._get("version"))
        available = property(lambda self: self._get("available"))

    cache["dask"] = DaskWhenLoaded()

    # "is x a dask collection?" imports dask.base (dask.config, jinja2, …) for every array;
    # dask answers False without a callable __dask_graph__, so that is asked first
    from xarray.core import utils as core_utils
    from xarray.namedarray import utils as named_utils

    original = getattr(named_utils, "is_dask_collection", None)
    if original is None or getattr(original, "_belief_quick", False):
        return

    def is_dask_collection(x: object) -> bool:
        if isinstance(x, type) or not callable(getattr(x, "__dask_graph__", None)):
            return False  # what dask.base.is_dask_collection answers first
        return bool(original(x))

    is_dask_collection._belief_quick = True  # type: ignore[attr-defined]
    is_dask_collection.__doc__ = original.__doc__
    for module in (named_utils, core_utils):
        if getattr(module, "is_dask_collection", None) is original:
            module.is_dask_collection = is_dask_collection


def _dask_scheduler_only_when_loaded() -> None:
    """Stop xarray importing ``dask`` and ``dask.distributed`` (~0.3 s) on every netCDF write
    to ask "which dask scheduler runs?" (``xarray.backends.locks.get_dask_scheduler``; it
    decides whether to close the file between chunk writes and which write lock to take).
    Without dask imported no dask array, client or scheduler exists in the process, and
    xarray's answer for that case (``None``: no dask scheduler; a threading lock, no
    autoclose) is returned without the import.  Left as is when the function is not where
    it was."""
    import sys

    try:
        from xarray.backends import locks, writers
    except ImportError:  # pragma: no cover - xarray moved them
        return
    original = getattr(locks, "get_dask_scheduler", None)
    if original is None or getattr(original, "_belief_quick", False):
        return

    def get_dask_scheduler(get: Any = None, collection: Any = None) -> str | None:
        if "dask" not in sys.modules:
            return None
        return original(get, collection)

    get_dask_scheduler._belief_quick = True  # type: ignore[attr-defined]
    get_dask_scheduler.__doc__ = original.__doc__
    for module in (locks, writers):
        if getattr(module, "get_dask_scheduler", None) is original:
            module.get_dask_scheduler = get_dask_scheduler


# No supported xarray option asks "is dask loaded?" instead of importing it (xarray 2026.9);
# these two shims do, and give xarray's own answers (tests/test_hostile.py checks both with
# dask loaded and not).  BELIEF_XARRAY_SHIMS=0 turns them off.
if os.environ.get("BELIEF_XARRAY_SHIMS", "1").strip().lower() not in ("0", "false", "no", "off"):
    _dask_array_only_when_loaded()
    _dask_scheduler_only_when_loaded()

__all__ = ["UNREADABLE", "DamagedManifestWarning", "OutputSet", "atomic_write", "check_header",
           "dataset_digest", "deferred_interrupt", "fsync_folder", "hold_folder", "jsonable",
           "netcdf_ready", "read_file", "writable_file", "writable_folder"]

UNREADABLE = "not a readable {what} (truncated or not netCDF)"


class DamagedManifestWarning(UserWarning):
    """An :class:`OutputSet` manifest that cannot be read (see :meth:`OutputSet.owned`)."""


def read_file[T](path: Path, read: Callable[[Path], T], problem: str) -> T:
    """``read(path)``, with a missing file or any failure of ``read`` (a truncated or foreign
    file) turned into an :class:`InputError` naming the file, ``problem`` and the error type."""
    if not path.exists():
        raise InputError(str(path), "file not found")
    try:
        return read(path)
    except Exception as err:
        raise InputError(str(path), f"{problem}: {type(err).__name__}") from None


def check_header(attrs: Mapping[str, Any], path: Path, *, fmt: str,
                 what: str = "belief file", redo: str = "re-fit with this version") -> None:
    """Refuse a file whose root ``format`` is not ``fmt`` or that another version wrote."""
    if attrs.get("format") != fmt:
        raise InputError(str(path), f"not a {what} (format {attrs.get('format')!r}, "
                                    f"expected {fmt!r})")
    if attrs.get("belief_version") != _pkg.__version__:
        raise InputError(str(path), f"written by belief {attrs.get('belief_version')}, this "
                                    f"is {_pkg.__version__}; {redo}")


def netcdf_ready(ds: xr.Dataset) -> xr.Dataset:
    """Make object/bool variables netCDF-friendly (strings stay strings)."""
    ds = ds.copy()
    for name, var in list(ds.variables.items()):
        if var.dtype == object:
            ds[name] = var.astype(str)
    return ds


def fsync_folder(folder: str | Path) -> None:
    """fsync a folder, so that a rename or removal in it survives a power loss (POSIX: a
    renamed file's data is durable after its fsync, the new name after its folder's).  A file
    system that cannot fsync a folder (EINVAL, EBADF, EACCES) is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EBADF, errno.EACCES, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Write a file atomically: ``write(tmp)`` into a temporary file in the same folder, fsync,
    give it the usual permissions, rename it over ``path`` and fsync the folder; a crash
    leaves the previous file (or none) and at worst a stray ``.<name>.*.tmp``, never a
    half-written ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
        fsync_folder(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def jsonable(obj: Any) -> Any:
    """Convert numpy scalars, tuples and non-finite floats into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    return obj


# -- output paths, checked before any work -------------------------------------------------------
def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest existing ancestor."""
    here = path
    while not os.path.lexists(here) and here != here.parent:
        here = here.parent
    return here


def _probe(folder: Path, option: str) -> None:
    """Refuse a folder in which this process cannot create files (``access(2)`` with the
    effective ids: a permission bit, an ACL or a read-only mount), without touching it."""
    effective = os.access in os.supports_effective_ids
    if not os.access(folder, os.W_OK | os.X_OK, effective_ids=effective):
        raise InputError(option, f"cannot write in {folder}: permission denied or a "
                                 "read-only file system")


def _parents_are_folders(path: Path, option: str) -> Path:
    """The nearest existing ancestor of ``path``'s parent, refusing one that is a file."""
    anc = _nearest_existing(path.parent if str(path.parent) else Path("."))
    if not anc.is_dir():
        raise InputError(option, f"cannot create {path}: {anc} is a file, not a folder")
    return anc


PSEUDO_FILE_SYSTEMS = ("/proc", "/sys", "/dev")
"""Kernel file systems: a write there is not a file (and may change the system); refused."""


def _plain_path(path: str | Path, option: str) -> Path:
    """Refuse an empty name, a name longer than the file system takes (each part at most
    ``NAME_MAX``, 255 on Linux; the whole at most ``PATH_MAX``, 4096) and a path under a
    kernel pseudo file system (:data:`PSEUDO_FILE_SYSTEMS`), before any work."""
    text = os.fspath(path)
    if not str(text).strip():
        raise InputError(option, "empty file name: give a path")
    path = Path(text)
    anc = _nearest_existing(path.absolute())
    try:
        name_max = os.pathconf(anc if anc.is_dir() else anc.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise InputError(option, f"file name too long: {part[:40]}… has "
                                     f"{len(os.fsencode(part))} bytes, at most {name_max} here")
    if len(os.fsencode(str(path.absolute()))) >= 4096:
        raise InputError(option, "path too long: at most 4095 bytes")
    real = os.path.realpath(path)
    for root in PSEUDO_FILE_SYSTEMS:
        if real == root or real.startswith(root + os.sep):
            raise InputError(option, f"{path} is under {root}, a kernel file system, not a "
                                     "place for output files")
    return path


def writable_file(path: str | Path, option: str,
                  suffixes: tuple[str, ...] | None = None) -> Path:
    """An output file name that can be written, checked before any work is done.

    Refused (:class:`~belief.errors.InputError` naming ``option``): an existing folder or
    non-regular file, a suffix not in ``suffixes``, a parent path through a file, and a folder
    in which this process may not create files; an empty name, a name too long for the file
    system and a path under a kernel file system (``/proc``, ``/sys``, ``/dev``).  The check
    touches nothing.
    """
    path = _plain_path(path, option)
    if path.is_dir():
        raise InputError(option, f"{path} is a folder, expected a file name")
    if os.path.lexists(path) and not path.is_file():
        raise InputError(option, f"{path} exists and is not a regular file")
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(option, f"{path}: expected a {' or '.join(suffixes)} file")
    _probe(_parents_are_folders(path, option), option)
    return path


def writable_folder(path: str | Path, option: str) -> Path:
    """An output folder that exists and is writable, or can be created; checked before any
    work (see :func:`writable_file`)."""
    path = _plain_path(path, option)
    if os.path.lexists(path) and not path.is_dir():
        raise InputError(option, f"{path} is a file, expected a folder")
    if path.is_dir():
        _probe(path, option)
    else:
        _probe(_parents_are_folders(path, option), option)
    return path


# -- a folder lock, reentrant within one thread ---------------------------------------------------
_HELD: dict[str, list[Any]] = {}  # real path → [fd (None while being taken), holders, thread]
_HELD_CHANGED = threading.Condition(threading.Lock())


@contextlib.contextmanager
def hold_folder(path: str | Path, what: str = "folder", *,
                blocking: bool = True) -> Iterator[None]:
    """Hold an exclusive lock (``flock``) on folder ``path`` while the block runs.

    Reentrant within a thread (a campaign that holds its folder can commit its outputs into
    it); another thread of this process, or another process, waits (``blocking``) or is
    refused with an InputError naming ``what``.  The lock dies with the process, so a killed
    run never leaves a stale lock.
    """
    key = acquire_folder(path, what, blocking=blocking)
    try:
        yield
    finally:
        release_folder(key)


def _busy(path: str | Path, what: str, who: str) -> InputError:
    return InputError(str(path), f"{who} is using this {what}; wait for it to finish or "
                                 "choose another folder")


def acquire_folder(path: str | Path, what: str = "folder", *, blocking: bool = True) -> str:
    """Take the lock of :func:`hold_folder` (returns the key for :func:`release_folder`).
    ``path`` is a folder, or a lock file (created when missing, never removed)."""
    key = os.path.realpath(path)
    me = threading.get_ident()
    with _HELD_CHANGED:
        while key in _HELD and _HELD[key][2] != me:  # another thread of this process
            if not blocking:
                raise _busy(path, what, "another thread of this process")
            _HELD_CHANGED.wait()
        if key in _HELD:
            _HELD[key][1] += 1
            return key
        _HELD[key] = [None, 1, me]  # taken by this thread; the flock is taken outside
    try:
        fd = os.open(key, os.O_RDONLY if os.path.isdir(key) else os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise _busy(path, what, "another belief process") from None
            raise
    except BaseException:
        with _HELD_CHANGED:
            del _HELD[key]
            _HELD_CHANGED.notify_all()
        raise
    with _HELD_CHANGED:
        _HELD[key][0] = fd
    return key


def release_folder(key: str) -> None:
    """Release one hold of :func:`acquire_folder` (the lock goes with the last one; any
    thread may release a hold, e.g. a campaign object collected in another thread)."""
    with _HELD_CHANGED:
        entry = _HELD.get(key)
        if entry is None or entry[0] is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _HELD[key]
            os.close(entry[0])  # closing the descriptor releases the flock
            _HELD_CHANGED.notify_all()


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Delay Ctrl-C (SIGINT) until the block is done, then raise KeyboardInterrupt: a commit
    of several files is never cut in half by an interrupt (outside the main thread, or
    without a Python SIGINT handler, the block runs unprotected)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


# -- a set of output files, committed as one unit --------------------------------------------------
class OutputSet:
    """The files one command writes into ``folder``, staged first and committed as one unit.

    ``write(name, fn)`` stages ``fn(tmp)`` into a temporary file next to its target (nothing
    visible changes).  :meth:`commit` — called when a ``with`` block ends without an error —
    takes the owner's lock (:func:`hold_folder` on ``.belief-<owner>.lock``), and then:
    records the union of the files it owned before and the new ones in its manifest, renames
    every staged file over its target
    (each rename atomic), removes the files of the previous set that this one does not have
    (e.g. the figure of a policy that is no longer fitted), and records the new set.  Ctrl-C is
    held back over the commit; a crash inside it leaves a manifest that still names every file
    the command owns, so the next run removes the stale ones.  An error or Ctrl-C before the
    commit removes the staged files and leaves the folder as it was.

    The manifest ``.belief-<owner>.json`` and the lock ``.belief-<owner>.lock`` are per owner
    (``decide``, ``replay``, ``campaign``, ``report-<name>``): commands that share a folder do
    not remove each other's files, and commit without waiting for each other.
    """

    def __init__(self, folder: str | Path, owner: str) -> None:
        self.folder = Path(folder)
        self.owner = owner
        self.manifest = self.folder / f".belief-{owner}.json"
        self.lock = self.folder / f".belief-{owner}.lock"
        self._staged: dict[str, Path] = {}

    def write(self, name: str, write: Callable[[str], Any]) -> Path:
        """Stage file ``name`` (relative to the folder): ``write(tmp)`` writes it."""
        target = self.folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.stage"
        try:
            write(str(tmp))
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        old = self._staged.pop(name, None)
        if old is not None and old.exists():
            old.unlink()
        self._staged[name] = tmp
        return target

    def owned(self) -> list[str]:
        """The files of the last committed set (from the manifest; [] without one).

        A manifest that cannot be read as one (not JSON, no list of names: edited or damaged
        by hand; this class replaces it atomically) is reported with a
        :class:`DamagedManifestWarning` naming it — the files it named are then not removed
        as stale — and is replaced at the next commit."""
        try:
            text = self.manifest.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as err:
            self._damaged(f"cannot be read ({type(err).__name__})")
            return []
        try:
            doc = json.loads(text)
        except ValueError:
            self._damaged("is not JSON")
            return []
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(files, list):
            self._damaged("has no list of files")
            return []
        return [f for f in files if isinstance(f, str) and ".." not in Path(f).parts
                and not Path(f).is_absolute()]

    def _damaged(self, why: str) -> None:
        import warnings

        warnings.warn(f"{self.manifest} {why}: the files of the earlier {self.owner} run are "
                      "not known, so stale ones are not removed; the manifest is rewritten "
                      "at the next commit", DamagedManifestWarning, stacklevel=3)

    def _record(self, files: list[str]) -> None:
        text = json.dumps({"owner": self.owner, "files": sorted(files)}, indent=1)
        atomic_write(self.manifest, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    def commit(self) -> list[Path]:
        """Move the staged files into place as one unit (see the class docstring)."""
        names = sorted(self._staged)
        self.folder.mkdir(parents=True, exist_ok=True)
        with hold_folder(self.lock, "output folder"), deferred_interrupt():
            before = self.owned()
            self._record(sorted(set(before) | set(names)))
            try:
                for name in names:
                    os.replace(self._staged[name], self.folder / name)
                    del self._staged[name]
            finally:  # a replace that failed part-way leaves no staged file behind
                self.discard()
                for parent in {(self.folder / n).parent for n in names}:
                    fsync_folder(parent)
            for name in set(before) - set(names):
                stale = self.folder / name
                if stale.is_file() or stale.is_symlink():
                    stale.unlink()
            self._record(names)
        return [self.folder / n for n in names]

    def discard(self) -> None:
        """Remove the staged files (nothing visible changes)."""
        for tmp in self._staged.values():
            if tmp.exists():
                tmp.unlink()
        self._staged.clear()

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def dataset_digest(ds: xr.Dataset) -> str:
    """SHA-256 of a Dataset's variables (names, dims, values) — the same after a netCDF round
    trip, different as soon as one draw differs.  Numbers are hashed as float64, text as
    UTF-8; attributes are left out (they describe, the draws are the belief)."""
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds[name].variable
        h.update(f"{name}{var.dims}{var.shape}".encode())
        values = np.asarray(var.values)
        if values.dtype.kind in "biuf":
            h.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
        else:
            h.update("\x1f".join(map(str, values.ravel().tolist())).encode("utf-8"))
    return h.hexdigest()
