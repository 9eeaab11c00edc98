"""Saving and loading a belief (and its posterior) as netCDF, atomically.

The file is a DataTree: ``/belief`` holds q_t, ``/posterior/<model>`` the fitted posteriors.
Writes go to a temporary file in the same folder, are fsync'ed, and renamed over the target,
so a crash never leaves a half-written belief.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import xarray as xr

import belief as _pkg
from belief.errors import InputError

__all__ = ["atomic_write", "check_header", "load_belief", "load_tree", "read_file",
           "save_belief"]

FORMAT = "belief-netcdf-1"
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


def check_header(attrs: Mapping[str, Any], path: Path, *, fmt: str = FORMAT,
                 what: str = "belief file", redo: str = "re-fit with this version") -> None:
    """Refuse a file whose root ``format`` is not ``fmt`` or that another version wrote."""
    if attrs.get("format") != fmt:
        raise InputError(str(path), f"not a {what} (format {attrs.get('format')!r}, "
                                    f"expected {fmt!r})")
    if attrs.get("belief_version") != _pkg.__version__:
        raise InputError(str(path), f"written by belief {attrs.get('belief_version')}, this "
                                    f"is {_pkg.__version__}; {redo}")


def _clean(ds: xr.Dataset) -> xr.Dataset:
    """Make object/bool variables netCDF-friendly (strings stay strings)."""
    ds = ds.copy()
    for name, var in list(ds.variables.items()):
        if var.dtype == object:
            ds[name] = var.astype(str)
    return ds


def save_belief(path: str | Path, belief: xr.Dataset, idata: xr.DataTree | None = None, *,
                groups: Mapping[str, xr.Dataset] | None = None,
                attrs: Mapping[str, Any] | None = None) -> Path:
    """Write q_t (and the posterior tree) to ``path`` atomically.

    Parameters
    ----------
    path : str or Path
    belief : Dataset
        q_t, stored as ``/belief``.
    idata : DataTree, optional
        The fitted posteriors, stored under ``/posterior`` (every node with data or attributes,
        so model-level attributes such as priors survive).
    groups : mapping of str to Dataset, optional
        Further groups by path (e.g. ``"evidence/paired_evaluations"``).
    attrs : mapping, optional
        Further root attributes (netCDF-compatible values: str, int, float).
    """
    path = Path(path)
    tree: dict[str, xr.Dataset] = {"belief": _clean(belief)}
    if idata is not None:
        for node in idata.subtree:
            if (node.has_data or node.attrs) and node.path != "/":
                tree[f"posterior{node.path}"] = _clean(node.to_dataset(inherit=False))
    for name, ds in (groups or {}).items():
        tree[name] = _clean(ds)
    dt = xr.DataTree.from_dict(tree)
    dt.attrs.update(dict(attrs or {}))
    dt.attrs.update({"format": FORMAT, "belief_version": _pkg.__version__})
    return atomic_write(path, lambda tmp: dt.to_netcdf(tmp, engine="h5netcdf"))


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


def load_belief(path: str | Path) -> tuple[xr.Dataset, xr.DataTree | None]:
    """Read a file written by :func:`save_belief`; refuses other formats and versions."""
    dt = load_tree(path)
    belief = dt["belief"].to_dataset()
    idata = dt["posterior"] if "posterior" in dt.children else None
    return belief, idata


def load_tree(path: str | Path) -> xr.DataTree:
    """The whole tree of a file written by :func:`save_belief` (loaded into memory).

    Raises
    ------
    InputError
        When the file is missing, unreadable (truncated, not netCDF), not a belief file, written
        by another version of ``belief``, or has no ``/belief`` group.
    """
    path = Path(path)
    dt = read_file(path, lambda p: xr.open_datatree(p, engine="h5netcdf").load(),
                   UNREADABLE.format(what="belief file"))
    check_header(dt.attrs, path)
    if "belief" not in dt.children:
        raise InputError(str(path), "no /belief group")
    return dt
