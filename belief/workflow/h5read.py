"""A direct h5py reader for the flat groups of a belief file, equal to xarray's.

``read_group(path, group)`` returns what ``xr.open_dataset(path, group=group,
engine="h5netcdf").load()`` returns for the groups that :mod:`belief.workflow.belief_file`
writes (q_t, the evidence tables, the stored sensitivity draws), about ten times faster: xarray
through h5netcdf makes some thirty HDF5 look-ups per variable, this reader one pass over the
group.  It decodes exactly what those groups use, as xarray does:

- dimensions from the netCDF-4 dimension ids (``_Netcdf4Coordinates``, ``_Netcdf4Dimid``) of the
  group's dimension scales; a scale without a variable only names its dimension;
- coordinates: the dimension variables and the names in a variable's or the group's
  ``coordinates`` attribute;
- a NaN ``_FillValue`` on a float variable (nothing to mask: NaN stays NaN), ``dtype = "bool"``
  on an int8 variable (→ bool), variable-length strings (→ numpy unicode, as xarray returns
  them);
- attributes without the netCDF/HDF5 bookkeeping, one-element arrays as scalars.

Anything else — another fill value, scale/offset, time units, a dimension defined in a parent
group, an unknown dtype — raises :class:`Unsupported`, and the caller reads the group with
xarray (``tests/test_fast_paths.py`` compares the two).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["Unsupported", "read_group"]

_HIDDEN = {"_Netcdf4Coordinates", "_Netcdf4Dimid", "CLASS", "NAME", "REFERENCE_LIST",
           "DIMENSION_LIST", "_nc3_strict", "_NCProperties"}
_DECODED = {"_FillValue", "coordinates"}
_REFUSED = {"scale_factor", "add_offset", "missing_value", "_Unsigned", "calendar",
            "_Encoding", "valid_range", "valid_min", "valid_max", "flag_values"}
_NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable"


class Unsupported(Exception):
    """The group uses something this reader does not decode (read it with xarray)."""


def _attr(value: Any) -> Any:
    if isinstance(value, bytes | np.bytes_):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SO":
            raise Unsupported("array of strings as an attribute")
        if value.size == 1:
            return value.reshape(-1)[0]
    return value


def read_group(path: str | Path, group: str) -> xr.Dataset:
    """The group ``group`` of the netCDF-4 file ``path``, loaded (see the module docstring)."""
    import h5py

    with h5py.File(path, "r") as f:
        g = f[group]
        if not isinstance(g, h5py.Group):
            raise Unsupported(f"/{group} is not a group")
        items = [(name, obj) for name, obj in g.items() if isinstance(obj, h5py.Dataset)]
        dim_names: dict[int, str] = {}
        for name, ds in items:
            if ds.attrs.get("CLASS") == b"DIMENSION_SCALE":
                if "_Netcdf4Dimid" not in ds.attrs:
                    raise Unsupported(f"dimension scale {name} without an id")
                dim_names[int(ds.attrs["_Netcdf4Dimid"])] = name
        variables: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, Any]]] = {}
        coord_names: set[str] = set()
        for name, ds in items:
            raw = dict(ds.attrs)
            if str(_attr(raw.get("NAME", ""))).startswith(_NOT_A_VARIABLE):
                continue  # a dimension without a coordinate variable
            if _REFUSED & raw.keys() or "since" in str(_attr(raw.get("units", ""))):
                raise Unsupported(f"{name}: encoded values")
            if "_Netcdf4Coordinates" in raw:
                ids = [int(i) for i in np.atleast_1d(raw["_Netcdf4Coordinates"])]
            elif ds.ndim == 0:
                ids = []
            else:
                raise Unsupported(f"{name}: no dimension ids")
            if len(ids) != ds.ndim or any(i not in dim_names for i in ids):
                raise Unsupported(f"{name}: dimension outside the group")
            dims = tuple(dim_names[i] for i in ids)
            data = _values(name, ds, raw)
            attrs = {k: _attr(v) for k, v in raw.items()
                     if k not in _HIDDEN and k not in _DECODED
                     and not (k == "dtype" and data.dtype == bool)}
            if "coordinates" in raw:
                coord_names.update(str(_attr(raw["coordinates"])).split())
            variables[name] = (dims, data, attrs)
        group_attrs = {k: _attr(v) for k, v in g.attrs.items() if k not in _HIDDEN}
        # CF: coordinates no data variable names are listed in the group's own attribute
        if "coordinates" in group_attrs:
            coord_names.update(str(group_attrs.pop("coordinates")).split())
    coord_names.update(n for n, (dims, _, _) in variables.items() if dims == (n,))
    missing = coord_names - variables.keys()
    if missing:
        raise Unsupported(f"coordinates {sorted(missing)} are not variables")
    data_vars = {n: v for n, v in variables.items() if n not in coord_names}
    coords = {n: v for n, v in variables.items() if n in coord_names}
    return xr.Dataset(data_vars, coords=coords, attrs=group_attrs)


def _values(name: str, ds: Any, raw: dict[str, Any]) -> np.ndarray:
    """The decoded values of one variable (module docstring)."""
    kind = ds.dtype.kind
    fill = raw.get("_FillValue")
    if kind == "O":
        import h5py

        if h5py.check_string_dtype(ds.dtype) is None or fill is not None:
            raise Unsupported(f"{name}: object values that are not strings")
        values = ds.asstr()[()]
        return np.array(values.tolist() if isinstance(values, np.ndarray) else values,
                        dtype=str)
    if kind not in "fiub":
        raise Unsupported(f"{name}: dtype {ds.dtype}")
    values = ds[()]
    values = np.asarray(values)
    if fill is not None:
        f = np.asarray(fill).reshape(-1)
        if kind != "f" or f.size != 1 or not np.isnan(f[0]):
            raise Unsupported(f"{name}: fill value {fill!r}")
    if _attr(raw.get("dtype", "")) == "bool":
        if kind not in "iu" or fill is not None:
            raise Unsupported(f"{name}: bool stored as {ds.dtype}")
        return values.astype(bool)
    return values
