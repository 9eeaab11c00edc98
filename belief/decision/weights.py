"""Resource weights λ_t = λ(s_t): fixed, scarcity-driven, or any user callable.

A weight rule is called with the campaign state and returns a DataArray over ``resource``.
The continuation value uses λ_{t+1} = λ(s_{t+1}): call the rule on the next state (for example
with the budget after the action, ``rule.at_budget(b − ΔC)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["FixedWeights", "ScarcityWeights", "WeightRule", "as_weight_rule", "check_weights",
           "next_weights"]


def check_weights(lam: Mapping[str, float] | xr.DataArray, resources: list[str] | tuple[str, ...],
                  name: str = "weights") -> xr.DataArray:
    """Validate λ against the candidates' resources: every one given, none unknown, all ≥ 0."""
    values = ({str(r): float(v) for r, v in zip(lam["resource"].values, lam.values, strict=True)}
              if isinstance(lam, xr.DataArray) else dict(lam))
    resources = list(resources)
    unknown = [r for r in values if r not in resources]
    if unknown:
        raise InputError(name, f"λ names resource(s) {unknown} that the candidates do not use; "
                               f"allowed: {resources}")
    missing = [r for r in resources if r not in values]
    if missing:
        raise InputError(name, f"λ is missing resource(s) {missing}; give one weight for each of "
                               f"{resources}")
    out = []
    for r in resources:
        v = values[r]
        if isinstance(v, bool) or not isinstance(v, int | float | np.number) \
                or not np.isfinite(v) or v < 0:
            raise InputError(name, f"λ[{r}] must be a finite number >= 0, got {v!r}")
        out.append(float(v))
    return xr.DataArray(np.array(out), dims=("resource",), coords={"resource": resources},
                        name="lambda")


class WeightRule:
    """Base class of weight rules: ``rule(budget, state=None) → λ`` over ``resource``."""

    def __call__(self, budget: xr.DataArray, state: Any = None) -> xr.DataArray:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class FixedWeights(WeightRule):
    """λ_t = λ (constant)."""

    values: Mapping[str, float]

    def __call__(self, budget: xr.DataArray, state: Any = None) -> xr.DataArray:
        return check_weights(self.values, list(budget["resource"].values))

    def describe(self) -> str:
        return "fixed " + ", ".join(f"{k}={v:g}" for k, v in self.values.items())


@dataclass(frozen=True)
class ScarcityWeights(WeightRule):
    """λ_{t,r} = λ⁰_r · (b_{0,r} / max(b_{t,r}, f·b_{0,r}))^κ — weight rises as budget falls.

    At the start (b_t = b_0) the weights equal λ⁰; when a resource is half spent its weight is
    2^κ·λ⁰_r; the floor f (default 0.05) caps the rise at f^{−κ}.  A resource with b_{0,r} = 0
    keeps λ⁰_r.
    """

    base: Mapping[str, float]
    initial_budget: Mapping[str, float]
    kappa: float = 1.0
    floor: float = 0.05

    def __post_init__(self) -> None:
        if not np.isfinite(self.kappa) or self.kappa < 0:
            raise InputError("ScarcityWeights", f"kappa must be >= 0, got {self.kappa}")
        if not 0 < self.floor <= 1:
            raise InputError("ScarcityWeights", f"floor must be in (0, 1], got {self.floor}")

    def __call__(self, budget: xr.DataArray, state: Any = None) -> xr.DataArray:
        resources = list(budget["resource"].values)
        lam0 = check_weights(self.base, resources)
        b0 = check_weights(self.initial_budget, resources, name="ScarcityWeights.initial_budget")
        b = budget.astype(float)
        ratio = xr.where(b0 > 0, b0 / np.maximum(b, self.floor * b0).where(b0 > 0, 1.0), 1.0)
        return (lam0 * ratio**self.kappa).rename("lambda")

    def describe(self) -> str:
        return f"scarcity κ={self.kappa:g} from " + ", ".join(
            f"{k}={v:g}" for k, v in self.base.items())


@dataclass(frozen=True)
class CallableWeights(WeightRule):
    """Wrap a user callable ``fn(budget, state) → mapping or DataArray`` (validated each call)."""

    fn: Callable[..., Any]

    def __call__(self, budget: xr.DataArray, state: Any = None) -> xr.DataArray:
        return check_weights(self.fn(budget, state), list(budget["resource"].values),
                             name="weights (user callable)")

    def describe(self) -> str:
        return f"callable {getattr(self.fn, '__name__', repr(self.fn))}"


def as_weight_rule(weights: WeightRule | Mapping[str, float] | Callable[..., Any]) -> WeightRule:
    """A mapping becomes :class:`FixedWeights`, a callable :class:`CallableWeights`."""
    if isinstance(weights, WeightRule):
        return weights
    if isinstance(weights, Mapping):
        return FixedWeights(dict(weights))
    if callable(weights):
        return CallableWeights(weights)
    raise InputError("weights", f"expected a mapping resource→λ, a WeightRule or a callable, "
                                f"got {type(weights).__name__}")


def next_weights(rule: WeightRule, budget: xr.DataArray, costs: xr.DataArray,
                 state: Any = None) -> xr.DataArray:
    """λ_{t+1} per candidate: the rule applied to the budget after m, b_t − ΔC(m).

    Returns a DataArray over (``candidate``, ``resource``).  ``state`` is passed through (the
    next state's other components are unknown before the outcome; rules that need them should
    be called on the realised next state instead).
    """
    rows = [rule(budget - costs.sel(candidate=c), state) for c in costs["candidate"].values]
    return xr.concat(rows, dim=costs["candidate"]).rename("lambda_next")
