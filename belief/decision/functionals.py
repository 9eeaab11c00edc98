"""Decision functionals φ applied to posterior-predictive gain draws.

One functional is chosen per decision and used everywhere a gain is scored (U0, MV, and G0
inside CVU):

- ``mean``:     φ(X) = E_w[X] = Σ_i w_i x_i
- ``lcb(q)``:   φ(X) = F_w^{-1}(q) = min{x_i : Σ_{j: x_j ≤ x_i} w_j ≥ q}  (inverted-CDF quantile,
  the same definition as ``numpy.quantile(..., method="inverted_cdf")``)
- ``cvar(α)``:  φ(X) = (1/α) ∫_0^α F_w^{-1}(u) du, the mean of the lowest α fraction of the
  draws; the boundary draw enters with the part of its weight that lies inside the tail, so
  the value is defined even when the tail is a single draw (then it is the minimum).

Weights w default to uniform (1/n); CVU passes importance weights.  All functions reduce the
last axis and broadcast over the leading ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from belief.errors import InputError
from belief.validate import is_number

__all__ = ["Functional", "ReweightedColumns", "apply_functional", "cvar", "lcb", "mean",
           "parse_functional", "weighted_columns"]

KINDS = ("mean", "lcb", "cvar")


@dataclass(frozen=True)
class Functional:
    """A decision functional: ``kind`` in {mean, lcb, cvar} and its parameter.

    ``lcb`` takes the quantile level q (0 < q < 1); ``cvar`` the tail fraction α (0 < α ≤ 1).
    """

    kind: str = "mean"
    param: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError("functional", f"unknown functional {self.kind!r}; allowed: "
                                           "'mean', 'lcb:Q' with 0 < Q < 1, 'cvar:A' with "
                                           "0 < A <= 1")
        if self.kind == "mean":
            if self.param is not None:
                raise InputError("functional", "mean takes no parameter")
            return
        p = self.param
        if not (is_number(p) and np.isfinite(p)):
            raise InputError("functional", f"{self.kind} needs a finite parameter, got {p!r}")
        if self.kind == "lcb" and not 0 < p < 1:
            raise InputError("functional", f"lcb quantile q must satisfy 0 < q < 1, got {p}")
        if self.kind == "cvar" and not 0 < p <= 1:
            raise InputError("functional", f"cvar tail fraction α must satisfy 0 < α <= 1, "
                                           f"got {p}")

    def __str__(self) -> str:
        return self.kind if self.param is None else f"{self.kind}:{float(self.param)!r}"

    def __call__(self, draws: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """φ of ``draws`` along the last axis (optionally importance-weighted)."""
        return apply_functional(self, draws, weights)


def parse_functional(text: str | Functional) -> Functional:
    """Parse ``"mean"``, ``"lcb:0.1"`` or ``"cvar:0.2"``."""
    if isinstance(text, Functional):
        return text
    if not isinstance(text, str):
        raise InputError("functional", f"expected a string like 'mean', 'lcb:0.1', 'cvar:0.2', "
                                       f"got {text!r}")
    kind, sep, param = text.strip().partition(":")
    if not sep:
        return Functional(kind)
    try:
        value = float(param)
    except ValueError:
        raise InputError("functional", f"cannot parse parameter {param!r} of {kind!r}") from None
    return Functional(kind, value)


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
    return _lcb_sorted(*_sorted(*_normalised(draws, weights)), q)


def cvar(draws: np.ndarray, alpha: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Mean of the lowest α fraction: (1/α) Σ_i x_(i) · min(w_(i), max(0, α − W_(i−1)))."""
    return _cvar_sorted(*_sorted(*_normalised(draws, weights)), alpha)


def apply_functional(functional: Functional, draws: np.ndarray,
                     weights: np.ndarray | None = None) -> np.ndarray:
    """φ along the last axis: dispatch to :func:`mean`, :func:`lcb` or :func:`cvar`."""
    if functional.kind == "mean":
        return mean(draws, weights)
    if functional.kind == "lcb":
        return lcb(draws, functional.param, weights)
    return cvar(draws, functional.param, weights)


def weighted_columns(functional: Functional, draws: np.ndarray,
                     weights: np.ndarray) -> np.ndarray:
    """φ of every column of ``draws`` (S, C) under each row of ``weights`` (J, S) → (J, C).

    The same definitions as :func:`apply_functional` (same sorted-array kernels); the columns
    are sorted once and each weight row is gathered into each column's order, so LCB and CVaR
    cost O(J·C·S) after one sort — what the continuation value needs for J simulated outcomes.
    """
    w = weights / weights.sum(axis=-1, keepdims=True)
    if functional.kind == "mean":
        return w @ draws
    order = np.argsort(draws, axis=0, kind="stable")  # (S, C)
    xs = np.take_along_axis(draws, order, 0).T  # (C, S)
    ws = w[:, order.T]  # (J, C, S)
    if functional.kind == "lcb":
        return _lcb_sorted(xs, ws, functional.param)
    return _cvar_sorted(xs[None], ws, functional.param)


class ReweightedColumns:
    """φ of every column of ``draws`` (S, C) under many reweightings of the rows of ``base``
    (J, S): w_j ∝ base_j · v for draw weights v (S,) — the block bootstrap of the draws in
    :func:`belief.decision.cvu_psis.draws_bootstrap`.

    The same values, bit for bit, as ``weighted_columns(functional, draws, base * v)``; for
    ``lcb`` the columns are sorted and ``base`` is gathered into each column's order once (not
    per v), and the cumulative weights are summed in chunks, left to right as ``numpy.cumsum``
    does, only until each (row, column) reaches q — the q-quantile needs no weight above it.
    """

    def __init__(self, functional: Functional, draws: np.ndarray, base: np.ndarray,
                 chunk: int = 128) -> None:
        self.functional = functional
        self.draws = np.asarray(draws, dtype=float)
        self.base = np.asarray(base, dtype=float)
        self.chunk = int(chunk)
        if functional.kind == "lcb":
            order = np.argsort(self.draws, axis=0, kind="stable")  # (S, C)
            self.order_t = order.T  # (C, S)
            self.xs = np.take_along_axis(self.draws, order, 0).T  # (C, S)
            self.base_sorted = self.base[:, self.order_t]  # (J, C, S)

    def __call__(self, v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """φ of every column for the rows ``rows`` (boolean, J) of ``base`` reweighted by v
        → (rows.sum(), C)."""
        w = self.base[rows] * v[None, :]
        total = w.sum(axis=-1, keepdims=True)
        if self.functional.kind == "mean":
            return (w / total) @ self.draws
        if self.functional.kind == "cvar":
            return weighted_columns(self.functional, self.draws, w)
        base = self.base_sorted if rows.all() else self.base_sorted[rows]
        return self._lcb(base, v[self.order_t], total[:, 0])

    def _lcb(self, base: np.ndarray, v_sorted: np.ndarray, total: np.ndarray) -> np.ndarray:
        """:func:`_lcb_sorted` of ``base · v_sorted / total``, summing chunk by chunk."""
        n_j, n_c, n_s = base.shape
        q = self.functional.param * (1 - 1e-12)
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
