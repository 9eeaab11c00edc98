"""Resource weights λ_t = λ(s_t): fixed, scarcity-driven, or any user callable.

A rule's numbers are validated once, when it is built.  A decision then *binds* the rule to the
candidates' resources once (:meth:`WeightRule.bind`: the resource names are matched, and the
rule becomes a plain function b ↦ λ on arrays in that order); λ_t = λ(b_t) and every
λ_{t+1} = λ(b_t − ΔC(m)) of the continuation are evaluated through that function without further
checks.  Calling a rule on a budget DataArray (``rule(budget)``) binds and evaluates in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.resources import parse_assignments, resource_vector
from belief.validate import real

__all__ = ["CallableWeights", "FixedWeights", "ScarcityWeights", "WeightRule", "as_weight_rule",
           "next_weights"]

BoundRule = Callable[[np.ndarray], np.ndarray]


class WeightRule:
    """Base class of weight rules λ(s): subclasses implement :meth:`bind`."""

    def bind(self, resources: tuple[str, ...] | list[str], state: Any = None) -> BoundRule:
        """This rule as a function of the budget array b (ordered as ``resources``) → λ."""
        raise NotImplementedError

    def __call__(self, budget: xr.DataArray, state: Any = None) -> xr.DataArray:
        """λ(b) as a DataArray over ``resource`` (binds, then evaluates)."""
        resources = [str(r) for r in budget["resource"].values]
        lam = self.bind(resources, state)(np.asarray(budget.values, dtype=float))
        return xr.DataArray(lam, dims=("resource",), coords={"resource": resources},
                            name="lambda")

    def describe(self) -> str:
        return type(self).__name__


def _matched(vector: xr.DataArray, resources: list[str] | tuple[str, ...], label: str
             ) -> np.ndarray:
    """The entries of ``vector`` in the order of ``resources`` (names must match exactly)."""
    have = [str(r) for r in vector["resource"].values]
    want = [str(r) for r in resources]
    unknown = [r for r in have if r not in want]
    if unknown:
        raise InputError(label, f"λ names resource(s) {unknown} that the candidates do not use; "
                                f"allowed: {want}")
    missing = [r for r in want if r not in have]
    if missing:
        raise InputError(label, f"λ is missing resource(s) {missing}; give one weight for each "
                                f"of {want}")
    return vector.sel(resource=want).values.astype(float)


@dataclass(frozen=True, init=False)
class FixedWeights(WeightRule):
    """λ_t = λ (constant), validated at construction.

    Parameters
    ----------
    values : mapping resource → λ, DataArray over ``resource``, or a sequence
        Finite and ≥ 0.
    resources : sequence of str, optional
        Names of a sequence ``values`` (required then).
    """

    vector: xr.DataArray = field(compare=False)
    values: dict[str, float]

    def __init__(self, values: Mapping[str, float] | xr.DataArray | Any,
                 resources: tuple[str, ...] | list[str] | None = None,
                 name: str = "weights") -> None:
        if isinstance(values, FixedWeights):
            vec = values.vector
        elif isinstance(values, Mapping | xr.DataArray):
            keys = ([str(r) for r in values["resource"].values]
                    if isinstance(values, xr.DataArray) else [str(k) for k in values])
            vec = resource_vector(values, keys, name, what="λ", name="lambda")
        else:
            if resources is None:
                raise InputError(name, "λ given as a sequence needs the resource names "
                                       "(resources=...)")
            vec = resource_vector(values, resources, name, what="λ", name="lambda")
        object.__setattr__(self, "vector", vec)
        object.__setattr__(self, "values", {str(r): float(v) for r, v in
                                            zip(vec["resource"].values, vec.values, strict=True)})

    @classmethod
    def parse(cls, text: str, table: str = "--weights") -> FixedWeights:
        """λ from ``"real_h=0.01,compute=0.0002,eng_h=0.004"`` (the ``--weights`` form)."""
        return cls(parse_assignments(text, table, what="weight"), name=table)

    def bind(self, resources: tuple[str, ...] | list[str], state: Any = None) -> BoundRule:
        lam = _matched(self.vector, resources, "weights")
        lam.flags.writeable = False
        return lambda budget: lam

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
        real(self.kappa, "ScarcityWeights.kappa", minimum=0.0)
        real(self.floor, "ScarcityWeights.floor", minimum=0.0, maximum=1.0, open_min=True)
        object.__setattr__(self, "_lam0", FixedWeights(self.base, name="ScarcityWeights.base"))
        object.__setattr__(self, "_b0", FixedWeights(self.initial_budget,
                                                     name="ScarcityWeights.initial_budget"))

    def bind(self, resources: tuple[str, ...] | list[str], state: Any = None) -> BoundRule:
        lam0 = _matched(self._lam0.vector, resources, "weights")
        b0 = _matched(self._b0.vector, resources, "ScarcityWeights.initial_budget")
        kappa, floor = float(self.kappa), float(self.floor)
        positive = b0 > 0

        def rule(budget: np.ndarray) -> np.ndarray:
            b = np.asarray(budget, dtype=float)
            ratio = np.ones_like(b0)
            ratio[positive] = b0[positive] / np.maximum(b[positive], floor * b0[positive])
            return lam0 * ratio**kappa

        return rule

    def describe(self) -> str:
        return f"scarcity κ={self.kappa:g} from " + ", ".join(
            f"{k}={v:g}" for k, v in self.base.items())


@dataclass(frozen=True)
class CallableWeights(WeightRule):
    """Wrap a user callable ``fn(budget DataArray, state) → mapping or DataArray``; its output
    is validated on every call (the rule is the user's code)."""

    fn: Callable[..., Any]

    def bind(self, resources: tuple[str, ...] | list[str], state: Any = None) -> BoundRule:
        names = [str(r) for r in resources]

        def rule(budget: np.ndarray) -> np.ndarray:
            b = xr.DataArray(np.asarray(budget, dtype=float), dims=("resource",),
                             coords={"resource": names})
            out = self.fn(b, state)
            return resource_vector(out, names, "weights (user callable)", what="λ").values

        return rule

    def describe(self) -> str:
        return f"callable {getattr(self.fn, '__name__', repr(self.fn))}"


def as_weight_rule(weights: WeightRule | Mapping[str, float] | xr.DataArray | Callable[..., Any]
                   ) -> WeightRule:
    """A mapping or DataArray becomes :class:`FixedWeights`, a callable
    :class:`CallableWeights`; a rule is returned as is."""
    if isinstance(weights, WeightRule):
        return weights
    if isinstance(weights, Mapping | xr.DataArray):
        return FixedWeights(weights)
    if callable(weights):
        return CallableWeights(weights)
    raise InputError("weights", f"expected a mapping resource→λ, a WeightRule or a callable, "
                                f"got {type(weights).__name__}")


def next_weights(rule: BoundRule, budget: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """λ_{t+1} per candidate: the bound rule at the budget after m, b_t − ΔC(m) → (C, R)."""
    return np.stack([rule(budget - c) for c in np.asarray(costs, dtype=float)])
