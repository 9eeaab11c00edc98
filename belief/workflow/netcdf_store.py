"""The netCDF layout of a belief file: q_t as ``/belief``, the posterior tree under
``/posterior``, further groups by path and root attributes, stamped with the file format and
the package version and written atomically; read back only when format and version match.

:mod:`belief.workflow.belief_file` (save, load, check of a whole
:class:`~belief.workflow.fitted.FittedBelief`) and :meth:`FittedBelief.save` both write
through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xarray as xr

import belief as _pkg
from belief.errors import InputError
from belief.files import UNREADABLE, atomic_write, check_header, netcdf_ready, read_file

__all__ = ["FORMAT", "load_belief", "load_tree", "save_belief"]

FORMAT = "belief-netcdf-1"


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
    tree: dict[str, xr.Dataset] = {"belief": netcdf_ready(belief)}
    if idata is not None:
        for node in idata.subtree:
            if (node.has_data or node.attrs) and node.path != "/":
                tree[f"posterior{node.path}"] = netcdf_ready(node.to_dataset(inherit=False))
    for name, ds in (groups or {}).items():
        tree[name] = netcdf_ready(ds)
    dt = xr.DataTree.from_dict(tree)
    dt.attrs.update(dict(attrs or {}))
    dt.attrs.update({"format": FORMAT, "belief_version": _pkg.__version__})
    return atomic_write(path, lambda tmp: dt.to_netcdf(tmp, engine="h5netcdf"))


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
    check_header(dt.attrs, path, fmt=FORMAT)
    if "belief" not in dt.children:
        raise InputError(str(path), "no /belief group")
    return dt
