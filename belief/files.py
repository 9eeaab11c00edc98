"""Files, written so that a crash never leaves a half-written one, and read with clear errors.

- :func:`atomic_write`: a temporary file in the same folder, fsync'ed and renamed over the
  target;
- :func:`read_file` / :func:`check_header`: one path for missing, unreadable, foreign-format
  and other-version files;
- :func:`netcdf_ready` and :func:`jsonable`: values made storable in netCDF and JSON.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import belief as _pkg
from belief.errors import InputError

__all__ = ["UNREADABLE", "atomic_write", "check_header", "jsonable", "netcdf_ready",
           "read_file"]

UNREADABLE = "not a readable {what} (truncated or not netCDF)"


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


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Write a file atomically: ``write(tmp)`` into a temporary file in the same folder, fsync,
    give it the usual permissions, and rename it over ``path``; a crash leaves the previous
    file (or none) and at worst a stray ``.<name>.*.tmp``, never a half-written ``path``."""
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
