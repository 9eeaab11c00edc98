"""Decisions on disk: a decision Dataset as an atomically written netCDF file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

import belief as _pkg
from belief.errors import InputError

DECISION_FORMAT = "belief-decision-1"


def save_decision(path: str | Path, decision: xr.Dataset) -> Path:
    """Write a decision Dataset to netCDF atomically (read back with :func:`load_decision`)."""
    from belief.persistence import _clean

    ds = _clean(decision)
    ds.attrs = {k: (int(v) if isinstance(v, bool | np.bool_) else v)
                for k, v in decision.attrs.items()}
    ds.attrs.update({"format": DECISION_FORMAT, "belief_version": _pkg.__version__})
    from belief.persistence import atomic_write

    return atomic_write(Path(path), lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def load_decision(path: str | Path) -> xr.Dataset:
    """Read a decision written by :func:`save_decision` (``belief decide``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "decision.nc"
    if not path.exists():
        raise InputError(str(path), "file not found")
    try:
        ds = xr.open_dataset(path, engine="h5netcdf").load()
    except Exception as err:
        raise InputError(str(path), f"not a readable decision file (truncated or not netCDF): "
                                    f"{type(err).__name__}") from None
    if ds.attrs.get("format") != DECISION_FORMAT:
        raise InputError(str(path), f"not a decision file (format {ds.attrs.get('format')!r})")
    if ds.attrs.get("belief_version") != _pkg.__version__:
        raise InputError(str(path), f"written by belief {ds.attrs.get('belief_version')}, this "
                                    f"is {_pkg.__version__}; decide again")
    return ds
