"""Resource vectors: budgets b over named resources, and the ``name=number`` form of the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.names import closest
from belief.validate import is_number

__all__ = ["make_budget", "parse_assignments", "parse_budget", "resource_vector"]


def resource_vector(values: Mapping[str, float] | xr.DataArray | np.ndarray | list[float],
                    resources: Iterable[str], table: str, *, what: str = "amount",
                    name: str = "budget") -> xr.DataArray:
    """A non-negative vector over named resources, checked once (budgets b and weights λ).

    ``values`` is a mapping resource → number, a DataArray over ``resource``, or a sequence in
    the order of ``resources``.  Every resource must be given, none may be unknown, and every
    entry must be a finite number ≥ 0; errors name ``table``, the resource and the rule.
    """
    resources = [str(r) for r in resources]
    if isinstance(values, xr.DataArray):
        values = {str(r): v for r, v in zip(values["resource"].values, values.values.tolist(),
                                            strict=True)}
    elif not isinstance(values, Mapping):
        seq = list(np.asarray(values, dtype=object).ravel())
        if len(seq) != len(resources):
            raise InputError(table, f"expected {len(resources)} {what}s, one per resource "
                                    f"{resources}, got {len(seq)}")
        values = dict(zip(resources, seq, strict=True))
    unknown = [r for r in values if r not in resources]
    if unknown:
        near = closest(unknown[0], resources)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise InputError(table, f"unknown resource(s) {unknown}{hint}; resources are "
                                f"{resources}")
    missing = [r for r in resources if r not in values]
    if missing:
        raise InputError(table, f"missing resource(s) {missing}; give every one of {resources}")
    amounts = []
    for r in resources:
        v = values[r]
        if not is_number(v) or not np.isfinite(v):
            raise InputError(table, f"{what} of {r} must be a finite number, got {v!r}", row=r)
        if v < 0:
            raise InputError(table, f"{what} of {r} must be >= 0, got {v}", row=r)
        amounts.append(float(v))
    return xr.DataArray(np.array(amounts), dims=("resource",), coords={"resource": resources},
                        name=name)


def make_budget(values: Mapping[str, float] | xr.DataArray | np.ndarray,
                resources: Iterable[str], table: str = "budget") -> xr.DataArray:
    """A budget b as a DataArray over ``resource`` (see :func:`resource_vector`)."""
    return resource_vector(values, resources, table, what="amount", name="budget")


def parse_assignments(text: str, table: str, what: str = "amount") -> dict[str, float]:
    """Parse ``"name=number,name=number"`` into a mapping (the ``--budget``/``--weights`` form)."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        name, sep, amount = part.partition("=")
        if not sep:
            raise InputError(table, f"cannot parse {part!r}: expected resource={what}")
        if name.strip() in values:
            raise InputError(table, f"resource {name.strip()!r} is given twice")
        try:
            values[name.strip()] = float(amount)
        except ValueError:
            raise InputError(table, f"cannot parse {what} {amount!r} of {name.strip()!r}: "
                                    "expected a number") from None
    return values


def parse_budget(text: str, resources: Iterable[str], table: str = "--budget") -> xr.DataArray:
    """Parse ``"real_h=20,compute=400,eng_h=30"`` into a budget DataArray."""
    return make_budget(parse_assignments(text, table), resources, table=table)
