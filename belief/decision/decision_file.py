"""Decisions on disk: a decision Dataset as an atomically written netCDF file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

import belief as _pkg
from belief.files import UNREADABLE, atomic_write, check_header, netcdf_ready, read_file

__all__ = ["DECISION_FORMAT", "load_decision", "save_decision"]

DECISION_FORMAT = "belief-decision-1"


def save_decision(path: str | Path, decision: xr.Dataset) -> Path:
    """Write a decision Dataset to netCDF atomically (read back with :func:`load_decision`)."""
    ds = netcdf_ready(decision)
    ds.attrs = {k: (int(v) if isinstance(v, bool | np.bool_) else v)
                for k, v in decision.attrs.items()}
    ds.attrs.update({"format": DECISION_FORMAT, "belief_version": _pkg.__version__})
    return atomic_write(Path(path), lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def load_decision(path: str | Path) -> xr.Dataset:
    """Read a decision written by :func:`save_decision` (``belief decide``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "decision.nc"
    ds = read_file(path, lambda p: xr.open_dataset(p, engine="h5netcdf").load(),
                   UNREADABLE.format(what="decision file"))
    check_header(ds.attrs, path, fmt=DECISION_FORMAT, what="decision file", redo="decide again")
    return ds
