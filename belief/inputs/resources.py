"""Resource vectors: budgets b over named resources, and the ``name=number`` form of the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["make_budget", "parse_assignments", "parse_budget"]


def make_budget(values: Mapping[str, float], resources: Iterable[str],
                table: str = "budget") -> xr.DataArray:
    """A budget b as a DataArray over ``resource``.

    Every resource must be given, none may be unknown, and amounts must be finite and ≥ 0.
    """
    resources = list(resources)
    unknown = [r for r in values if r not in resources]
    if unknown:
        raise InputError(table, f"unknown resource(s) {unknown}; resources are {resources}")
    missing = [r for r in resources if r not in values]
    if missing:
        raise InputError(table, f"missing resource(s) {missing}; give every one of {resources}")
    amounts = []
    for r in resources:
        v = values[r]
        if isinstance(v, bool) or not isinstance(v, int | float | np.number) or not np.isfinite(v):
            raise InputError(table, f"amount of {r} must be a finite number, got {v!r}", row=r)
        if v < 0:
            raise InputError(table, f"amount of {r} must be >= 0, got {v}", row=r)
        amounts.append(float(v))
    return xr.DataArray(np.array(amounts), dims=("resource",), coords={"resource": resources},
                        name="budget")


def parse_assignments(text: str, table: str, what: str = "amount") -> dict[str, float]:
    """Parse ``"name=number,name=number"`` into a mapping (the ``--budget``/``--weights`` form)."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        name, sep, amount = part.partition("=")
        if not sep:
            raise InputError(table, f"cannot parse {part!r}: expected resource={what}")
        try:
            values[name.strip()] = float(amount)
        except ValueError:
            raise InputError(table, f"cannot parse {what} {amount!r} of {name.strip()!r}: "
                                    "expected a number") from None
    return values


def parse_budget(text: str, resources: Iterable[str], table: str = "--budget") -> xr.DataArray:
    """Parse ``"real_h=20,compute=400,eng_h=30"`` into a budget DataArray."""
    return make_budget(parse_assignments(text, table), resources, table=table)
