"""Decision functionals φ applied to posterior-predictive gain draws.

One functional is chosen per decision and used everywhere a gain is scored (U0, MV, and G0
inside CVU).  Each functional is a type (a subclass of :class:`Functional`) that owns its
formula over weighted and unweighted draws and what CVU needs of it (its influence function,
its noise relative to the mean's, its fast paths); the types are found by name in
:data:`belief.decision.functional_registry.REGISTRY`.  The built-in ones:

- :class:`Mean`, ``mean``:  φ(X) = E_w[X] = Σ_i w_i x_i
- :class:`Lcb`, ``lcb:q``:  φ(X) = F_w^{-1}(q) = min{x_i : Σ_{j: x_j ≤ x_i} w_j ≥ q}
  (inverted-CDF quantile, the same definition as ``numpy.quantile(...,
  method="inverted_cdf")``)
- :class:`Cvar`, ``cvar:α``:  φ(X) = (1/α) ∫_0^α F_w^{-1}(u) du, the mean of the lowest α
  fraction of the draws; the boundary draw enters with the part of its weight that lies
  inside the tail, so the value is defined even when the tail is a single draw (then it is
  the minimum).

Weights w default to uniform (1/n); CVU passes importance weights.  All functions reduce the
last axis and broadcast over the leading ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from belief.errors import InputError
from belief.validate import is_number

__all__ = [
    "Cvar",
    "Functional",
    "Lcb",
    "Mean",
    "ReweightedColumns",
    "SortedColumns",
    "apply_functional",
    "column_lcbs",
    "column_order",
    "cvar",
    "lcb",
    "lcbs",
    "mean",
    "resampled",
    "weighted_column_quantiles",
    "weighted_columns",
]

Quantiles = Callable[[tuple[float, ...]], list[np.ndarray]]
"""levels → the weighted quantiles of the rows (or columns) at those levels, one array each."""


@dataclass(frozen=True)
class Functional:
    """A decision functional φ of the gain draws: one subclass per functional.

    A subclass sets the class attributes ``kind`` (its registered name), ``syntax`` (how it
    is written, e.g. ``"lcb:Q"``) and ``rule`` (its parameter's range, for messages and help),
    checks its ``param`` in :meth:`check`, and implements :meth:`apply` (φ along the last axis
    under optional weights) and :meth:`influence` (ψ, what CVU's draw-level error and noise
    corrections need).  Everything else has a generic default; the optional fast paths are
    announced by ``linear`` (φ is the weighted mean, so sums over draws are matrix
    products), :attr:`quantile_level` (φ is a weighted quantile, computed with the influence
    function's quantiles in one pass) and ``order_statistic`` (φ is read from the sorted
    draws and their weights by :meth:`of_sorted`).

    ``str(φ)`` is the text :func:`belief.decision.functional_registry.parse_functional` reads
    back (``"mean"``, ``"lcb:0.2"``).
    """

    kind: ClassVar[str] = ""
    syntax: ClassVar[str] = ""
    rule: ClassVar[str] = ""
    linear: ClassVar[bool] = False
    order_statistic: ClassVar[bool] = False

    param: float | None = None

    def __post_init__(self) -> None:
        if type(self) is Functional:
            raise TypeError("Functional is the base type; use a registered functional "
                            "(parse_functional('mean'), Lcb(0.1), …)")
        self.check()

    def check(self) -> None:
        """Refuse a parameter outside the functional's range (:class:`InputError`)."""
        if self.param is not None:
            raise InputError("functional", f"{self.kind} takes no parameter")

    def _finite_param(self) -> float:
        p = self.param
        if not (is_number(p) and np.isfinite(p)):
            raise InputError("functional", f"{self.kind} needs a finite parameter, got {p!r}")
        return float(p)

    def __str__(self) -> str:
        return self.kind if self.param is None else f"{self.kind}:{float(self.param)!r}"

    def __call__(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """φ of ``draws`` along the last axis (optionally importance-weighted)."""
        return self.apply(draws, weights)

    @property
    def quantile_level(self) -> float | None:
        """The level q when φ is the weighted q-quantile, else None."""
        return None

    def apply(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """φ along the last axis of ``draws`` under ``weights`` (None: uniform)."""
        raise NotImplementedError

    def columns(self, draws: np.ndarray, weights: np.ndarray,
                order: np.ndarray | None = None) -> np.ndarray:
        """φ of every column of ``draws`` (S, C) under each row of ``weights`` (J, S) → (J, C)
        (``order``: :func:`column_order` of ``draws``, used by the sorted fast paths)."""
        w = weights / weights.sum(axis=-1, keepdims=True)
        x = np.asarray(draws, dtype=float).T  # (C, S)
        return self.apply(x[None, :, :], w[:, None, :])

    def of_sorted(self, xs: np.ndarray, ws: np.ndarray) -> np.ndarray:
        """φ from values sorted along the last axis and their normalised weights (only for
        an ``order_statistic`` functional)."""
        raise NotImplementedError(f"{self.kind} is not an order statistic")

    def resampled(self, draws: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """φ of every column of ``draws`` (S, C) over bootstrap resamples ``idx`` (B, n) of
        its rows → (B, C) (see :func:`resampled`)."""
        return self(np.moveaxis(np.asarray(draws, dtype=float)[idx], 1, -1))

    def location_scale(self, loc: np.ndarray, scale: np.ndarray, z: np.ndarray) -> np.ndarray:
        """φ(loc_nc + scale_nc·ε_c) (N, C) for ε_c distributed as the N draws of column c of
        ``z`` (N, C): loc + scale·φ(ε_c), which holds for a φ that is translation-equivariant
        and positively homogeneous (mean, quantiles, CVaR; a functional that is not
        overrides it).  The regression estimator of CVU's location–scale form."""
        k_eps = self(z.T)  # φ of each column's standardised residuals
        return loc + scale * k_eps[None, :]

    def influence_levels(self) -> tuple[float, ...]:
        """The quantile levels :meth:`influence` asks its ``quantiles`` for."""
        return ()

    def influence(self, x: np.ndarray, phi: np.ndarray, quantiles: Quantiles) -> np.ndarray:
        """ψ(x; P_w), the influence function of φ at the values ``x`` (J, S[, C]), with
        ``phi`` (J, 1[, C]) the rows' φ and ``quantiles`` their weighted quantiles
        (:func:`belief.decision.cvu.preposterior.influence` prepares the arguments)."""
        raise NotImplementedError

    def noise_ratio(self, draws: np.ndarray) -> float:
        """A generous ratio of φ's Monte Carlo noise sd to that of the mean of the same
        draws (S, C) (the largest over their columns)."""
        return 1.0


@dataclass(frozen=True)
class Mean(Functional):
    """φ(X) = E_w[X] = Σ_i w_i x_i; ψ(x) = x − φ."""

    kind: ClassVar[str] = "mean"
    syntax: ClassVar[str] = "mean"
    linear: ClassVar[bool] = True

    def apply(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return mean(draws, weights)

    def columns(self, draws: np.ndarray, weights: np.ndarray,
                order: np.ndarray | None = None) -> np.ndarray:
        w = weights / weights.sum(axis=-1, keepdims=True)
        return w @ draws

    def resampled(self, draws: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """(counts @ draws)/n: each draw times how often the resample drew it."""
        x = np.asarray(draws, dtype=float)
        return (_resample_counts(idx, x.shape[0]) @ x) / idx.shape[1]

    def influence(self, x: np.ndarray, phi: np.ndarray, quantiles: Quantiles) -> np.ndarray:
        return x - phi


@dataclass(frozen=True)
class Lcb(Functional):
    """φ(X) = F_w^{-1}(q), the inverted-CDF q-quantile (0 < q < 1);
    ψ(x) = (q − 1[x ≤ VaR]) / f(VaR), f = (q₊ − q₋)/(VaR(q₊) − VaR(q₋)) with
    q± = q ± min(q, 1 − q)/2."""

    kind: ClassVar[str] = "lcb"
    syntax: ClassVar[str] = "lcb:Q"
    rule: ClassVar[str] = "0 < Q < 1"
    order_statistic: ClassVar[bool] = True

    param: float | None = None

    def check(self) -> None:
        p = self._finite_param()
        if not 0 < p < 1:
            raise InputError("functional", f"lcb quantile q must satisfy 0 < q < 1, got {p}")

    @property
    def quantile_level(self) -> float | None:
        return self.param

    def apply(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return lcb(draws, self.param, weights)

    def columns(self, draws: np.ndarray, weights: np.ndarray,
                order: np.ndarray | None = None) -> np.ndarray:
        return weighted_column_quantiles(draws, weights, (self.param,), order)[0]

    def of_sorted(self, xs: np.ndarray, ws: np.ndarray) -> np.ndarray:
        return _lcb_sorted(xs, ws, self.param)

    def resampled(self, draws: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The quantile's position k (the same in every resample) found once; its value is
        the sorted draw whose cumulative count first exceeds k."""
        x = np.asarray(draws, dtype=float)
        n_b, n = idx.shape
        n_s = x.shape[0]
        counts = _resample_counts(idx, n_s)
        order = np.argsort(x, axis=0, kind="stable")  # (S, C)
        xs = np.take_along_axis(x, order, 0)
        w = np.full((1, n), 1.0 / n)  # the weights of :func:`_normalised` without weights
        out = np.empty((n_b, x.shape[1]))
        k = int(np.minimum((np.cumsum(w, axis=-1) < self.param * (1 - 1e-12)).sum(), n - 1))
        # the running counts pass k near position k·S/n: sum the first ``head`` sorted draws
        # and the whole column only for the resamples that had not passed k by then (integer
        # counts: the same positions as one full running sum)
        head = min(n_s, int(k * n_s / n + 8 * np.sqrt(k + 1) + 64))
        for c in range(x.shape[1]):
            cum = np.cumsum(counts[:, order[:head, c]], axis=1)  # (B, head)
            pos = (cum <= k).sum(axis=1)
            late = np.flatnonzero(cum[:, -1] <= k)
            if late.size:
                full = np.cumsum(counts[np.ix_(late, order[:, c])], axis=1)
                pos[late] = (full <= k).sum(axis=1)
            out[:, c] = xs[pos, c]
        return out

    def influence_levels(self) -> tuple[float, ...]:
        """(q − h, q + h) with h = min(q, 1 − q)/2."""
        q = self.param
        h = 0.5 * min(q, 1 - q)
        return (q - h, q + h)

    def influence(self, x: np.ndarray, phi: np.ndarray, quantiles: Quantiles) -> np.ndarray:
        q = self.param
        h = 0.5 * min(q, 1 - q)
        lo, hi = quantiles(self.influence_levels())
        with np.errstate(divide="ignore", invalid="ignore"):
            dens = np.expand_dims(np.where(hi > lo, 2 * h / (hi - lo), np.inf), 1)
            # ψ takes two values per row, (q − 1)/f below VaR and q/f above (0 where f is
            # not finite): computed per row and selected, the same numbers as
            # (q − 1[x ≤ VaR])/f
            below = np.where(np.isfinite(dens), (q - 1.0) / dens, 0.0)
            above = np.where(np.isfinite(dens), q / dens, 0.0)
        return np.where(x <= phi, below, above)

    def noise_ratio(self, draws: np.ndarray) -> float:
        """The normal-theory √(q(1 − q))/pdf(z_q), at least 1."""
        from statistics import NormalDist

        q = float(self.param)
        return max(1.0, np.sqrt(q * (1 - q)) / NormalDist().pdf(NormalDist().inv_cdf(q)))


@dataclass(frozen=True)
class Cvar(Functional):
    """φ(X) = (1/α) ∫_0^α F_w^{-1}(u) du, the mean of the lowest α fraction (0 < α ≤ 1);
    ψ(x) = VaR − (VaR − x)_+/α − φ (lower tail)."""

    kind: ClassVar[str] = "cvar"
    syntax: ClassVar[str] = "cvar:A"
    rule: ClassVar[str] = "0 < A <= 1"
    order_statistic: ClassVar[bool] = True

    param: float | None = None

    def check(self) -> None:
        p = self._finite_param()
        if not 0 < p <= 1:
            raise InputError("functional", f"cvar tail fraction α must satisfy 0 < α <= 1, "
                                           f"got {p}")

    def apply(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return cvar(draws, self.param, weights)

    def columns(self, draws: np.ndarray, weights: np.ndarray,
                order: np.ndarray | None = None) -> np.ndarray:
        w = weights / weights.sum(axis=-1, keepdims=True)
        if order is None:
            order = column_order(draws)  # (S, C)
        xs = np.take_along_axis(draws, order, 0).T  # (C, S)
        # CVaR's sums are pairwise, and their order follows the memory layout: kept as it was
        return _cvar_sorted(xs[None], w[:, order.T], self.param)

    def of_sorted(self, xs: np.ndarray, ws: np.ndarray) -> np.ndarray:
        return _cvar_sorted(xs, ws, self.param)

    def resampled(self, draws: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The sorted resample of a column is its sorted draws, each repeated as often as it
        was drawn, with the same weights 1/n at every position."""
        x = np.asarray(draws, dtype=float)
        n_b, n = idx.shape
        n_s = x.shape[0]
        counts = _resample_counts(idx, n_s)
        order = np.argsort(x, axis=0, kind="stable")  # (S, C)
        xs = np.take_along_axis(x, order, 0)
        w = np.full((1, n), 1.0 / n)  # the weights of :func:`_normalised` without weights
        out = np.empty((n_b, x.shape[1]))
        ws = np.broadcast_to(w, (n_b, n))
        for c in range(x.shape[1]):
            rep = np.repeat(np.broadcast_to(xs[:, c], (n_b, n_s)).ravel(),
                            counts[:, order[:, c]].ravel()).reshape(n_b, n)
            out[:, c] = _cvar_sorted(rep, ws, self.param)
        return out

    def influence_levels(self) -> tuple[float, ...]:
        """(α,): the VaR at the tail's edge."""
        return (self.param,)

    def influence(self, x: np.ndarray, phi: np.ndarray, quantiles: Quantiles) -> np.ndarray:
        var = np.expand_dims(quantiles(self.influence_levels())[0], 1)
        return var - np.maximum(var - x, 0.0) / self.param - phi

    def noise_ratio(self, draws: np.ndarray) -> float:
        """2/√α."""
        return 2.0 / np.sqrt(float(self.param))


def _resample_counts(idx: np.ndarray, n_s: int) -> np.ndarray:
    """How often each of ``n_s`` rows is drawn in each resample of ``idx`` (B, n) → (B, S)."""
    n_b = idx.shape[0]
    return np.bincount((idx + n_s * np.arange(n_b)[:, None]).ravel(),
                       minlength=n_b * n_s).reshape(n_b, n_s)


def _normalised(draws: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(draws, dtype=float)
    if weights is None:
        w = np.full(x.shape, 1.0 / x.shape[-1])
    else:
        w = np.broadcast_to(np.asarray(weights, dtype=float), x.shape)
        w = w / w.sum(axis=-1, keepdims=True)
    return x, w


def _sorted(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(x, axis=-1, kind="stable")
    return np.take_along_axis(x, order, -1), np.take_along_axis(w, order, -1)


def _lcb_sorted(xs: np.ndarray, ws: np.ndarray, q: float) -> np.ndarray:
    """Inverted-CDF q-quantile of sorted values ``xs`` with normalised weights ``ws``."""
    cw = np.cumsum(ws, axis=-1)
    # first index whose cumulative weight reaches q (guarding against round-off at the top)
    idx = np.minimum((cw < q * (1 - 1e-12)).sum(axis=-1), xs.shape[-1] - 1)
    return np.take_along_axis(np.broadcast_to(xs, ws.shape), idx[..., None], -1)[..., 0]


def _first_reaching(ws: np.ndarray, q: float, chunk: int = 256) -> np.ndarray:
    """``np.minimum((np.cumsum(ws, -1) < q).sum(-1), S − 1)`` (the index :func:`_lcb_sorted`
    takes), summing left to right in chunks — the same running sums — and only until each row
    has reached q (a running sum of weights ≥ 0 does not come back below it)."""
    return _first_reaching_levels(ws, (q,), chunk)[0]


def _first_reaching_levels(ws: np.ndarray, qs: tuple[float, ...], chunk: int = 256
                           ) -> list[np.ndarray]:
    """:func:`_first_reaching` at every threshold of ``qs`` from one pass of running sums,
    each row summed until it has reached the largest (the same running sums, so the same
    indices as one pass per threshold)."""
    shape, n_s = ws.shape[:-1], ws.shape[-1]
    flat = ws.reshape(-1, n_s)
    n_q = len(qs)
    idx = np.full((n_q, flat.shape[0]), n_s - 1)
    found = np.zeros((n_q, flat.shape[0]), bool)
    active = np.arange(flat.shape[0])
    carry = np.zeros(flat.shape[0])
    start = 0
    while active.size and start < n_s:
        stop = min(n_s, start + chunk)
        part = flat[active, start:stop]
        part[:, 0] += carry[active]  # continue the running sum exactly where it stopped
        cw = np.cumsum(part, axis=-1)
        all_done = np.ones(active.size, bool)
        for k, q in enumerate(qs):
            below = (cw < q).sum(axis=-1)
            done = below < stop - start
            new = done & ~found[k, active]
            idx[k, active[new]] = np.minimum(start + below[new], n_s - 1)
            found[k, active[new]] = True
            all_done &= found[k, active]
        carry[active] = cw[:, -1]
        active = active[~all_done]
        start = stop
    return [i.reshape(shape) for i in idx]


def _cvar_sorted(xs: np.ndarray, ws: np.ndarray, alpha: float) -> np.ndarray:
    """(1/α) Σ_i x_(i) · min(w_(i), max(0, α − W_(i−1))) on sorted values."""
    before = np.cumsum(ws, axis=-1) - ws
    portion = np.minimum(ws, np.clip(alpha - before, 0.0, None))
    return (xs * portion).sum(axis=-1) / portion.sum(axis=-1)


def mean(draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Weighted mean along the last axis: Σ w_i x_i."""
    x, w = _normalised(draws, weights)
    return (x * w).sum(axis=-1)


def lcb(draws: np.ndarray, q: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Weighted q-quantile along the last axis (inverted-CDF definition)."""
    if weights is None:
        value = _uniform_lcb(np.asarray(draws, dtype=float), q)
        if value is not None:
            return value
    return _lcb_sorted(*_sorted(*_normalised(draws, weights)), q)


def _uniform_lcb(x: np.ndarray, q: float) -> np.ndarray | None:
    """:func:`lcb` with uniform weights by selection instead of a sort: the position k whose
    running sum of the weights 1/n first reaches q is the same in every row (the same sums
    :func:`_lcb_sorted` takes), and the k-th smallest value is what the stable sort puts
    there.  Rows whose selected value is 0 or NaN, whose bits the order of equal values could
    change (−0.0 and 0.0, NaN payloads), are sorted as :func:`lcb` sorts them; None (the
    caller sorts) for 1-D draws, no draws or a level per row (``q`` an array)."""
    n = x.shape[-1] if x.ndim else 0
    if n == 0 or x.ndim < 2 or np.ndim(q):
        return None
    w = np.full(n, 1.0 / n)  # the weights _normalised gives every row
    k = int(np.minimum((np.cumsum(w) < q * (1 - 1e-12)).sum(), n - 1))
    value = np.partition(x, k, axis=-1)[..., k].copy()  # not a view of the whole copy
    redo = np.isnan(value) | (value == 0)
    if redo.any():
        value[redo] = _lcb_sorted(*_sorted(*_normalised(x[redo], None)), q)
    return value


def lcbs(draws: np.ndarray, qs: tuple[float, ...],
         weights: np.ndarray | None = None) -> list[np.ndarray]:
    """:func:`lcb` at several levels q with one sort: ``[lcb(draws, q, weights) for q in qs]``
    bit for bit."""
    xs, ws = _sorted(*_normalised(draws, weights))
    return [_lcb_sorted(xs, ws, q) for q in qs]


def column_lcbs(draws: np.ndarray, col: np.ndarray, qs: tuple[float, ...],
                weights: np.ndarray) -> list[np.ndarray]:
    """:func:`lcbs` of row j = column ``col[j]`` of ``draws`` (S, C) under weights (J, S):
    ``lcbs(draws[:, col].T, qs, weights)`` bit for bit, sorting each column once (not each
    row: the stable order of a row is that of its column)."""
    x = np.asarray(draws, dtype=float)
    col = np.asarray(col)
    _, w = _normalised(np.empty((col.size, x.shape[0])), weights)
    out = [np.empty(col.size) for _ in qs]
    for c in np.unique(col):
        rows = np.flatnonzero(col == c)
        order = np.argsort(x[:, c], kind="stable")
        xs, ws = x[order, c], w[rows][:, order]
        for k, q in enumerate(qs):
            out[k][rows] = _lcb_sorted(xs, ws, q)
    return out


def cvar(draws: np.ndarray, alpha: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Mean of the lowest α fraction: (1/α) Σ_i x_(i) · min(w_(i), max(0, α − W_(i−1)))."""
    return _cvar_sorted(*_sorted(*_normalised(draws, weights)), alpha)


def apply_functional(functional: Functional, draws: np.ndarray,
                     weights: np.ndarray | None = None) -> np.ndarray:
    """φ along the last axis: the functional's own :meth:`Functional.apply`."""
    return functional.apply(draws, weights)


def column_order(draws: np.ndarray) -> np.ndarray:
    """The stable ascending order of every column of ``draws`` (S, C), the ``order`` that
    :func:`weighted_columns` and :func:`weighted_column_quantiles` accept (a subset of its
    columns is the order of the same columns of ``draws``)."""
    return np.argsort(draws, axis=0, kind="stable")


def weighted_columns(functional: Functional, draws: np.ndarray,
                     weights: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """φ of every column of ``draws`` (S, C) under each row of ``weights`` (J, S) → (J, C).

    The same definitions as :func:`apply_functional` (same sorted-array kernels); the columns
    are sorted once and each weight row is gathered into each column's order, so LCB and CVaR
    cost O(J·C·S) after one sort — what the continuation value needs for J simulated outcomes.
    ``order``: :func:`column_order` of ``draws``, when the caller has it (the same values).
    """
    return functional.columns(draws, weights, order)


def weighted_column_quantiles(draws: np.ndarray, weights: np.ndarray,
                              levels: tuple[float, ...],
                              order: np.ndarray | None = None) -> list[np.ndarray]:
    """VaR_q (the LCB(q) of :func:`lcb`) of every column of ``draws`` (S, C) under each row of
    ``weights`` (J, S), one (J, C) array per level q, the columns sorted and the weights
    gathered once for all levels, and their running sums taken once, up to the largest level
    (``order``: :func:`column_order` of ``draws``, when the caller has it).  Row j, column c
    depends on that row and column only: a subset of the rows or columns gives the same values
    there."""
    w = weights / weights.sum(axis=-1, keepdims=True)
    if order is None:
        order = column_order(draws)  # (S, C)
    xs = np.take_along_axis(draws, order, 0).T  # (C, S)
    # (J, C, S) C-ordered, where the running sum is faster (``w[:, order.T]`` is not; a
    # running sum is sequential in either layout, so the values are the same), summed only
    # until q is reached
    ws = np.take(w, order.T, axis=1)
    idx = _first_reaching_levels(ws, tuple(q * (1 - 1e-12) for q in levels))
    return [np.take_along_axis(np.broadcast_to(xs, ws.shape), i[..., None], -1)[..., 0]
            for i in idx]


class SortedColumns:
    """φ of every column of ``draws`` (S, C) under many draw weights v (S,), sorted once:
    ``SortedColumns(φ, draws)(v)`` is ``apply_functional(φ, draws.T, v)`` bit for bit (the
    same stable order, the same normalised weights gathered into it, the same kernels)."""

    def __init__(self, functional: Functional, draws: np.ndarray) -> None:
        self.functional = functional
        self.x = np.ascontiguousarray(np.asarray(draws, dtype=float).T)  # (C, S)
        if functional.order_statistic:
            self.order = np.argsort(self.x, axis=-1, kind="stable")
            self.xs = np.take_along_axis(self.x, self.order, -1)

    def __call__(self, v: np.ndarray | None = None) -> np.ndarray:
        if not self.functional.order_statistic or v is None:
            return apply_functional(self.functional, self.x, v)
        _, w = _normalised(self.x[:1], v)  # every row of the broadcast weights is this one
        return self.functional.of_sorted(self.xs, w[0][self.order])


def resampled(functional: Functional, draws: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """φ of every column of ``draws`` (S, C) over bootstrap resamples ``idx`` (B, n) of its
    rows → (B, C): ``functional(np.moveaxis(draws[idx], 1, -1))`` (bit for bit for ``lcb``
    and ``cvar``; to rounding for ``mean``), without building or sorting each resample.

    Under uniform weights the sorted resample of a column is its sorted draws, each repeated
    as often as it was drawn, with the same weights 1/n at every position; so for ``lcb``
    the quantile's position k (the same in every resample) is found once and its value is
    the sorted draw whose cumulative count first exceeds k, and for ``cvar`` the sorted
    resample is built by repetition.  ``mean`` is (counts @ draws)/n, the resample counts of
    each draw times its value.
    """
    x = np.asarray(draws, dtype=float)
    idx = np.asarray(idx)
    if idx.ndim != 2 or idx.size == 0:
        return functional(np.moveaxis(x[idx], 1, -1))
    return functional.resampled(x, idx)


class ReweightedColumns:
    """φ of every column of ``draws`` (S, C) under many reweightings of the rows of ``base``
    (J, S): w_j ∝ base_j · v for draw weights v (S,) — the block bootstrap of the draws in
    :func:`belief.decision.cvu.psis.draws_bootstrap`.

    The same values, bit for bit, as ``weighted_columns(functional, draws, base * v)``; for
    ``lcb`` the columns are sorted and ``base`` is gathered into each column's order once (not
    per v), and the cumulative weights are summed in chunks, left to right as ``numpy.cumsum``
    does, only until each (row, column) reaches q — the q-quantile needs no weight above it.

    With ``block`` (a block index per draw) and v constant on the blocks — the block
    bootstrap — ``lcb`` locates each crossing of q from per-block prefix sums
    (:class:`_BlockPrefix`, O(J·C·(S/L/8 + 8)·B + J·C·L) per v instead of O(J·C·S)), sums only
    the segment of L sorted draws that holds it, and falls back to the sequential sum wherever
    the two orders of summation could disagree (:meth:`_lcb_blocks`): still bit for bit.
    """

    def __init__(self, functional: Functional, draws: np.ndarray, base: np.ndarray,
                 chunk: int = 128, block: np.ndarray | None = None) -> None:
        self.functional = functional
        self.draws = np.asarray(draws, dtype=float)
        self.base = np.asarray(base, dtype=float)
        self.chunk = int(chunk)
        self.exact_pairs = 0  # (row, column) pairs the block path handed to the exact sum
        self._prefix: _BlockPrefix | None = None
        self.level = functional.quantile_level
        if self.level is not None:
            order = np.argsort(self.draws, axis=0, kind="stable")  # (S, C)
            self.order_t = np.ascontiguousarray(order.T)  # (C, S)
            self.xs = np.ascontiguousarray(np.take_along_axis(self.draws, order, 0).T)
            if block is None:
                # (J, C, S), C-ordered: fancy indexing returns another layout, and reshaping
                # that copied all of it on every call
                self.base_sorted = np.ascontiguousarray(self.base[:, self.order_t])
            else:
                self._prefix = _BlockPrefix(self.base, self.order_t, block)

    def row_totals(self, v: np.ndarray) -> np.ndarray:
        """Σ_i base_ji v_i (J,) — from per-block sums when v is constant on the blocks
        (positive exactly where ``(base * v).sum(axis=1)`` is; the value to rounding)."""
        if self._prefix is not None and self._prefix.constant_on_blocks(v):
            return self._prefix.totals(v)
        return self.base @ v

    def __call__(self, v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """φ of every column for the rows ``rows`` (boolean, J) of ``base`` reweighted by v
        → (rows.sum(), C)."""
        if self._prefix is not None and self._prefix.constant_on_blocks(v):
            return self._lcb_blocks(v, rows)
        w = (self.base if rows.all() else self.base[rows]) * v[None, :]
        total = w.sum(axis=-1, keepdims=True)
        if self.level is None:
            return weighted_columns(self.functional, self.draws, w)
        if self._prefix is not None:  # v not constant on the blocks
            base = self.base[rows][:, self.order_t]
        else:
            base = self.base_sorted if rows.all() else self.base_sorted[rows]
        return self._lcb(base, v[self.order_t], total[:, 0])

    def _lcb_blocks(self, v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """:meth:`_lcb` for draw weights v constant on the blocks, without summing every
        weight below q: the segment of sorted draws where the running sum crosses q is located
        from per-block prefix sums (:class:`_BlockPrefix`), and only that segment is summed.

        These sums are in another order than the sequential ``numpy.cumsum`` of :meth:`_lcb`,
        so each (row, column) is accepted only when its running sums just before and at the
        crossing are more than ``_GUARD`` (relative to the row's total) from q — far above the
        rounding error of either order, ~S·ε — and the index is then the one the sequential sum
        gives (the running sums increase); the others (sums within ``_GUARD`` of q: ties, or q
        hit exactly) are summed sequentially as :meth:`_lcb` does.  The result is therefore the
        same, bit for bit."""
        pre = self._prefix
        n_c, n_s = self.xs.shape
        q = self.level * (1 - 1e-12)
        jj = np.flatnonzero(rows)
        total = pre.totals(v)[jj]  # ≈ Σ_i base_ji v_i (only to locate q)
        thr = (q * total)[:, None]  # (J', 1)
        start, before, run = pre.segment(v, jj, thr)  # (J', C), (J', C), (J', C, L)
        length = run.shape[-1]
        local = np.minimum((run < thr[..., None]).sum(axis=-1), n_s - 1 - start)  # (J', C)
        last = local == n_s - 1 - start  # the index S − 1: no test above it
        at = np.take_along_axis(run, np.minimum(local, length - 1)[..., None], -1)[..., 0]
        prev = np.where(local > 0, np.take_along_axis(
            run, np.maximum(local - 1, 0)[..., None], -1)[..., 0], before)
        tol = _GUARD * total[:, None]
        idx = start + local
        sure = (((idx == 0) | (prev < thr - tol))
                & (last | ((local < length) & (at >= thr + tol))))
        if not sure.all():  # the sequential sum, as :meth:`_lcb` does, for the others
            bj, bc = np.nonzero(~sure)
            self.exact_pairs += bj.size
            rows_b = jj[bj]
            w = self.base[rows_b] * v[None, :]
            tot = w.sum(axis=-1)  # as __call__ and weighted_columns sum it
            order = self.order_t[bc]
            ws = np.take_along_axis(self.base[rows_b], order, -1) * v[order] / tot[:, None]
            idx[bj, bc] = np.minimum((np.cumsum(ws, axis=-1) < q).sum(axis=-1), n_s - 1)
        return self.xs[np.arange(n_c)[None, :], idx]

    def _lcb(self, base: np.ndarray, v_sorted: np.ndarray, total: np.ndarray) -> np.ndarray:
        """:func:`_lcb_sorted` of ``base · v_sorted / total``, summing chunk by chunk."""
        n_j, n_c, n_s = base.shape
        q = self.level * (1 - 1e-12)
        flat = base.reshape(n_j * n_c, n_s)
        j_of, c_of = np.divmod(np.arange(n_j * n_c), n_c)
        idx = np.full(n_j * n_c, n_s - 1)
        active = np.arange(n_j * n_c)
        carry = np.zeros(n_j * n_c)
        start = 0
        while active.size and start < n_s:
            stop = min(n_s, start + self.chunk)
            ws = (flat[active, start:stop] * v_sorted[c_of[active], start:stop]
                  / total[j_of[active], None])
            ws[:, 0] += carry[active]  # continue the running sum exactly where it stopped
            cw = np.cumsum(ws, axis=-1)
            below = (cw < q).sum(axis=-1)  # cw is non-decreasing: the first index ≥ q
            done = below < stop - start
            idx[active[done]] = np.minimum(start + below[done], n_s - 1)
            carry[active] = cw[:, -1]
            active = active[~done]
            start = stop
        idx = idx.reshape(n_j, n_c)
        return np.take_along_axis(np.broadcast_to(self.xs, (n_j, n_c, n_s)), idx[..., None],
                                  -1)[..., 0]


_GUARD = 1e-9  # relative distance from q below which the block path sums sequentially


class _BlockPrefix:
    """Per-block running sums of sorted weights, for draw weights v that are constant on
    blocks of draws (v_i = P_{b(i)}, the block bootstrap):

        Σ_{k < (g+1)L} base_(k) v_(k) = Σ_b P_b · A_{g,b},
        A_{g,b} = Σ_{k < (g+1)L, b(k) = b} base_(k),

    for every (row, column) in the column's sorted order and every segment of L sorted draws.
    For one v the running sum at every ``group``-th segment end is one matrix–vector product
    (coarse), then at the segment ends of the coarse segment that crosses the threshold, and
    the weights of the one segment that crosses it are gathered and summed."""

    def __init__(self, base: np.ndarray, order_t: np.ndarray, block: np.ndarray,
                 length: int = 64, group: int = 8) -> None:
        (n_j, n_s), n_c = base.shape, order_t.shape[0]
        self.block = np.asarray(block, dtype=np.intp)
        if self.block.shape != (n_s,) or (self.block < 0).any():
            raise ValueError("block must hold a non-negative block index per draw")
        n_b = self.n_blocks = int(self.block.max()) + 1 if n_s else 1
        # the first draw of each block, to read P from v (an empty block keeps P = 0)
        firsts = np.full(n_b, -1)
        firsts[self.block[::-1]] = np.arange(n_s)[::-1]
        self.firsts = firsts
        length = self.length = max(1, min(n_s, int(length)))
        n_g = self.n_seg = -(-n_s // length)
        self.group = max(1, int(group))
        self.shape = (n_j, n_c)
        # sorted position → draw, padded with the index S: a draw of weight 0 (base_ext)
        self.order_pad = np.full((n_c, n_g * length), n_s, dtype=np.intp)
        self.order_pad[:, :n_s] = order_t
        self.base_ext = np.zeros((n_j, n_s + 1))
        self.base_ext[:, :n_s] = base
        seg_of = np.empty((n_c, n_s), dtype=np.intp)  # segment of each draw, per column
        np.put_along_axis(seg_of, order_t, np.arange(n_s)[None, :] // length, -1)
        key_c = seg_of * n_b + self.block[None, :]  # (C, S) in [0, G·B)
        rows = np.arange(n_j)[:, None] * (n_g * n_b)
        prefix = np.empty((n_j, n_c, n_g, n_b))
        for c in range(n_c):
            sums = np.bincount((rows + key_c[c]).ravel(), weights=base.ravel(),
                               minlength=n_j * n_g * n_b).reshape(n_j, n_g, n_b)
            np.cumsum(sums, axis=1, out=prefix[:, c])
        self.fine = prefix.reshape(n_j * n_c * n_g, n_b)
        self.block_sums = prefix[:, 0, -1, :].copy()  # Σ_{i in b} base_ji (J, B)
        ends = np.minimum((np.arange(-(-n_g // self.group)) + 1) * self.group - 1, n_g - 1)
        self.coarse = np.ascontiguousarray(prefix[:, :, ends]).reshape(-1, n_b)
        self.n_coarse = ends.size

    def constant_on_blocks(self, v: np.ndarray) -> bool:
        """Whether v (S,) is one value per block (the path is exact only then)."""
        return bool(np.array_equal(v, self.p_of(v)[self.block]))

    def p_of(self, v: np.ndarray) -> np.ndarray:
        return np.where(self.firsts >= 0, v[np.maximum(self.firsts, 0)], 0.0)

    def totals(self, v: np.ndarray) -> np.ndarray:
        """Σ_i base_ji v_i = Σ_b P_b Σ_{i in b} base_ji for every row (J,), from the block
        sums: > 0 exactly when some base_ji v_i > 0 (every term is ≥ 0)."""
        return self.block_sums @ self.p_of(v)

    def segment(self, v: np.ndarray, jj: np.ndarray, thr: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For rows ``jj`` and thresholds ``thr`` (J', 1): the first sorted position of the
        segment where Σ base·v first reaches thr (the last segment if never), the running
        sum before it, and the running sums over it (J', C, L) — all approximate sums."""
        n_j, n_c = self.shape
        n_g, grp, length = self.n_seg, self.group, self.length
        p = self.p_of(v)
        pair = jj[:, None] * n_c + np.arange(n_c)  # (J', C)
        coarse = (self.coarse @ p).reshape(n_j, n_c, self.n_coarse)[jj]
        s1 = np.minimum((coarse < thr[..., None]).sum(axis=-1), self.n_coarse - 1)
        fine_g = np.minimum(s1[..., None] * grp + np.arange(grp), n_g - 1)  # (J', C, grp)
        fine = self.fine[(pair[..., None] * n_g + fine_g).ravel()] @ p
        k2 = (fine.reshape(fine_g.shape) < thr[..., None]).sum(axis=-1)
        seg = np.minimum(s1 * grp + k2, n_g - 1)
        before = (self.fine[(pair * n_g + np.maximum(seg - 1, 0)).ravel()] @ p
                  ).reshape(seg.shape)
        before[seg == 0] = 0.0
        start = seg * length
        at = (np.arange(n_c) * (n_g * length) + start)[..., None] + np.arange(length)
        draw = self.order_pad.take(at)  # (J', C, L)
        v_ext = np.append(v, 0.0)
        vals = self.base_ext.take(jj[:, None, None] * self.base_ext.shape[1] + draw)
        vals *= v_ext.take(draw)
        run = np.cumsum(vals, axis=-1)
        run += before[..., None]
        return start, before, run
