"""Saving and loading a belief (and its posterior) as netCDF, atomically.

The file is a DataTree: ``/belief`` holds q_t, ``/posterior/<model>`` the fitted posteriors.
Writes go to a temporary file in the same folder, are fsync'ed, and renamed over the target,
so a crash never leaves a half-written belief.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import xarray as xr

import belief as _pkg
from belief.errors import InputError

__all__ = ["load_belief", "save_belief"]

FORMAT = "belief-netcdf-1"


def _clean(ds: xr.Dataset) -> xr.Dataset:
    """Make object/bool variables netCDF-friendly (strings stay strings)."""
    ds = ds.copy()
    for name, var in list(ds.variables.items()):
        if var.dtype == object:
            ds[name] = var.astype(str)
    return ds


def save_belief(path: str | Path, belief: xr.Dataset, idata: xr.DataTree | None = None) -> Path:
    """Write q_t (and the posterior tree) to ``path`` atomically."""
    path = Path(path)
    tree: dict[str, xr.Dataset] = {"belief": _clean(belief)}
    if idata is not None:
        for node in idata.subtree:
            if node.has_data and node.path != "/":
                tree[f"posterior{node.path}"] = _clean(node.to_dataset(inherit=False))
    dt = xr.DataTree.from_dict(tree)
    dt.attrs.update({"format": FORMAT, "belief_version": _pkg.__version__})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        dt.to_netcdf(tmp, engine="h5netcdf")
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_belief(path: str | Path) -> tuple[xr.Dataset, xr.DataTree | None]:
    """Read a file written by :func:`save_belief`; refuses other formats and versions."""
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "file not found")
    try:
        dt = xr.open_datatree(path, engine="h5netcdf").load()
    except Exception as err:
        raise InputError(str(path), f"not a readable belief file (truncated or not netCDF): "
                                    f"{type(err).__name__}") from None
    if dt.attrs.get("format") != FORMAT:
        raise InputError(str(path), f"not a belief file (format {dt.attrs.get('format')!r}, "
                                    f"expected {FORMAT!r})")
    if dt.attrs.get("belief_version") != _pkg.__version__:
        raise InputError(str(path), f"written by belief {dt.attrs.get('belief_version')}, this "
                                    f"is {_pkg.__version__}; re-fit with this version")
    if "belief" not in dt.children:
        raise InputError(str(path), "no /belief group")
    belief = dt["belief"].to_dataset()
    idata = dt["posterior"] if "posterior" in dt.children else None
    return belief, idata
