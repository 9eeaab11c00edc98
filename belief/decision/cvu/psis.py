"""CVU's importance estimator: PSIS reweighting of the joint draws, with control variates.

For J outcomes Y_j of m's experiment (draw indices i_j shared by every candidate: common
random numbers), the log-ratios log p(Y_j | θ_i) are Pareto-smoothed
(:func:`belief.decision.cvu.importance.psis`), every candidate's φ is the weighted functional
of its next-gain draws, G0_j = max(0, max_{c ∈ M'} φ_jc − C_λ'(c)), and

    E_Y[G0] ≈ (1/J) Σ_j (G0_j − β̂_{−f(j)}ᵀ Z_j),

the cross-fitted control-variate estimator with the martingale controls Z_j of
:mod:`belief.decision.cvu.preposterior` (exactly mean-zero under the raw weights; β̂ from a
least-squares fit on the other folds of outcomes); its standard error is that of the
adjusted values.  Without controls it is the plain mean.  G0_j is taken net of b_j, the
upward bias that the noise of the weighted functionals gives a maximum
beyond the bias that equally weighted draws give every other G0 of the decision
(:mod:`belief.decision.cvu.noise`; without ``noise_z`` the plug-in G0_j); an exact refit's
G0_j likewise, for its own draws.

An outcome's weights are *untrusted* when its log-likelihood row has NaN or +∞ (or no finite
value), when the smoothed weights are not finite, or when k̂ is above the threshold or NaN
(a NaN k̂ is what an outcome carried by one draw gives).  Untrusted outcomes are refit
exactly, largest k̂ first (NaN first), when a refit hook is given; the estimate is returned
only when every outcome with non-finite weights was refit, at most ``max_bad_share`` of the
outcomes remain untrusted and the median effective sample size of the weights is at least
``min_ess``.  Otherwise :func:`importance_estimate` returns the reason, and the caller uses
the regression estimator (:mod:`belief.decision.cvu.regression`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from belief.decision.cvu.estimate import Estimate
from belief.decision.cvu.importance import khat_threshold, psis_weights
from belief.decision.cvu.noise import Quantiles, WeightedFunctionals, noise_bias
from belief.decision.cvu.preposterior import (
    NextState,
    control_functions,
    control_variate_summary,
    control_variate_terms,
    influence,
    influence_levels,
    winners,
)
from belief.decision.functionals import (
    Functional,
    ReweightedColumns,
    column_order,
    weighted_column_quantiles,
    weighted_columns,
)
from belief.decision.settings import CVUSettings

__all__ = ["DrawsBootstrap", "OutcomeWeights", "Outcomes", "PSISOptions", "WeighedOutcomes",
           "draws_bootstrap", "importance_estimate", "refit_bounds", "refit_ranges"]


class OutcomeWeights:
    """The PSIS weights of one experiment's simulated outcomes, and the weighted functionals
    of next-gain draws under them, computed once per block of outcomes and shared by every
    estimate on the same outcomes (the CVU and its channel split,
    :mod:`belief.decision.cvu.channels`): the weights depend on the outcomes and the draws
    only, not on the next state.

    ``weights(y)`` is :func:`belief.decision.cvu.importance.psis_weights` of ``loglik(y)``;
    ``columns(functional, gain, smooth, y)`` is
    :func:`belief.decision.functionals.weighted_columns`, remembered for the same ``gain``
    array (the object, held here so that its identity cannot be reused), functional and
    outcomes; ``quantiles(gain, smooth, y, levels)`` the weighted quantiles of the columns
    (:func:`belief.decision.functionals.weighted_column_quantiles`) likewise.  The columns of
    each ``gain`` are sorted once; for an LCB, ``columns`` takes the quantiles its influence
    function needs (:func:`belief.decision.cvu.preposterior.influence_levels`) in the same pass.
    """

    def __init__(self, loglik: Callable[[np.ndarray], np.ndarray]) -> None:
        self.loglik = loglik
        self._weights: dict[bytes, tuple[np.ndarray, ...]] = {}
        self._columns: dict[tuple, np.ndarray] = {}
        self._quantiles: dict[tuple, np.ndarray] = {}
        self._gains: list[tuple[np.ndarray, np.ndarray]] = []  # (gain, its column order)

    @staticmethod
    def _key(y: np.ndarray) -> bytes:
        y = np.ascontiguousarray(y)
        return repr((y.shape, y.dtype.str)).encode() + y.tobytes()

    def weights(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(smoothed, raw, k̂, ok) of the outcomes ``y`` (read-only arrays)."""
        key = self._key(y)
        if key not in self._weights:
            out = psis_weights(np.asarray(self.loglik(y), float))
            for a in out:
                a.flags.writeable = False
            self._weights[key] = out
        return self._weights[key]

    def _order(self, gain: np.ndarray) -> np.ndarray:
        """:func:`belief.decision.functionals.column_order` of ``gain``, sorted once."""
        for g, order in self._gains:
            if g is gain:
                return order
        order = column_order(gain)
        order.flags.writeable = False
        self._gains.append((gain, order))
        return order

    def columns(self, functional: Functional, gain: np.ndarray, smooth: np.ndarray,
                y: np.ndarray) -> np.ndarray:
        """φ (J, C) of the columns of ``gain`` under ``smooth``, the weights of ``y``."""
        order = self._order(gain)
        key = (id(gain), str(functional), self._key(y))
        if key not in self._columns:
            if functional.quantile_level is not None:
                levels = (functional.quantile_level, *influence_levels(functional))
                values = self._column_quantiles(gain, smooth, key[2], levels, order)
                for level, v in zip(levels, values, strict=True):
                    v.flags.writeable = False
                    self._quantiles[(id(gain), level, key[2])] = v
                phi = values[0]
            else:
                phi = weighted_columns(functional, gain, smooth, order)
            phi.flags.writeable = False
            self._columns[key] = phi
        return self._columns[key]

    def quantiles(self, gain: np.ndarray, smooth: np.ndarray, y: np.ndarray,
                  levels: tuple[float, ...]) -> list[np.ndarray]:
        """The weighted quantiles (J, C) of the columns of ``gain`` under ``smooth``, the
        weights of ``y``, one array per level."""
        order = self._order(gain)
        ykey = self._key(y)
        missing = tuple(q for q in levels if (id(gain), q, ykey) not in self._quantiles)
        if missing:
            for q, v in zip(missing, self._column_quantiles(gain, smooth, ykey, missing, order),
                            strict=True):
                v.flags.writeable = False
                self._quantiles[(id(gain), q, ykey)] = v
        return [self._quantiles[(id(gain), q, ykey)] for q in levels]

    def _column_quantiles(self, gain: np.ndarray, smooth: np.ndarray, ykey: bytes,
                          levels: tuple[float, ...], order: np.ndarray) -> list[np.ndarray]:
        """:func:`belief.decision.functionals.weighted_column_quantiles` of ``gain`` at
        ``levels``, computed only for the columns that differ from an earlier gain array on
        the same outcomes whose quantiles at these levels are held (the channel split's next
        gains without m's order effects share every column m does not act on); the others
        are copied — the same values, since row j, column c of the quantiles depends on that
        row and column only."""
        for g, _ in self._gains:
            if g is gain or g.shape != gain.shape or not all(
                    (id(g), q, ykey) in self._quantiles for q in levels):
                continue
            same = np.array([np.array_equal(g[:, c], gain[:, c])
                             for c in range(gain.shape[1])])
            if not same.any():
                continue
            out = [self._quantiles[(id(g), q, ykey)].copy() for q in levels]
            diff = np.flatnonzero(~same)
            if diff.size:
                part = weighted_column_quantiles(gain[:, diff], smooth, levels, order[:, diff])
                for o, p in zip(out, part, strict=True):
                    o[:, diff] = p
            return out
        return weighted_column_quantiles(gain, smooth, levels, order)


def _draw_influence(functional: Functional, nxt: NextState, won: np.ndarray,
                    smooth: np.ndarray, omega: np.ndarray, phi: np.ndarray,
                    g0_j: np.ndarray, quantiles: Quantiles
                    ) -> tuple[np.ndarray, np.ndarray]:
    """IF_i of E_Y[G0] and the variance of its Monte Carlo noise (module preposterior):
    IF_i = mean_j a_ij − mean_j G0_j, a_ij = S·ω_ij·(ψ_j(g_{i c*_j}) + G0_j), noise_i =
    var_j(a_ij)/J.  For the mean, ψ_j(x) = x − φ_j and both sums are matrix products.
    ``quantiles``: levels → the weighted quantiles (J, C) of every column of ``nxt.gain``
    under ``smooth`` (those of each outcome's winning column are read from them)."""
    n_j, n_s = omega.shape
    stop = won < 0
    col = np.where(stop, 0, won)
    phi_won = np.where(stop, 0.0, phi[np.arange(n_j), col])
    if functional.linear:
        # a_ij / S = ω_ij (g_{i c_j} 1[c_j ≠ stop] + v_j), v_j = G0_j − φ_j(c_j) 1[...];
        # only the columns that win some outcome enter
        cols, pos = np.unique(col[~stop], return_inverse=True)
        onehot = np.zeros((n_j, cols.size))
        onehot[np.flatnonzero(~stop), pos] = 1.0
        g = nxt.gain[:, cols]
        v = g0_j - phi_won
        first = ((omega.T @ onehot) * g).sum(axis=1) + omega.T @ v
        sq = omega.T**2
        second = (((sq @ onehot) * g**2).sum(axis=1)
                  + 2 * ((sq @ (onehot * v[:, None])) * g).sum(axis=1) + sq @ v**2)
        mean_a = n_s * first / n_j
        var_a = (n_s**2 * second / n_j - mean_a**2) * n_j / (n_j - 1)
    else:
        x = nxt.gain[:, col].T  # (J, S): the draws of each outcome's winning column
        psi = np.where(stop[:, None], 0.0,
                       influence(functional, x, phi_won, x, smooth,
                                 lambda qs: [v[np.arange(n_j), col] for v in quantiles(qs)]))
        a = n_s * omega * (psi + g0_j[:, None])
        mean_a, var_a = a.mean(axis=0), a.var(axis=0, ddof=1)
    return mean_a - g0_j.mean(), np.maximum(var_a, 0.0) / n_j


@dataclass(frozen=True)
class Outcomes:
    """An experiment's simulated outcomes and how to weigh them.

    Attributes
    ----------
    y : ndarray (J, ...)
        Simulated outcomes (from draws chosen uniformly).
    loglik : callable Y → (J, S)
    refit : callable Y_j → next-gain draws (S', C), optional
        Exact posterior of one outcome.
    """

    y: np.ndarray
    loglik: Callable[[np.ndarray], np.ndarray]
    refit: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass(frozen=True)
class PSISOptions:
    """How :func:`importance_estimate` trusts, refits and reports (:class:`belief.decision.
    settings.CVUSettings` names them, :meth:`from_settings`).

    Attributes
    ----------
    k_threshold, max_refits, chunk, max_bad_share, min_ess, control_variates, refit_draws
        As in :class:`~belief.decision.settings.CVUSettings` (``refit_draws``: draws an
        exact refit makes at least, the margin of :func:`refit_ranges`).
    forced : bool
        Return an estimate even when the weights are untrusted (only outcomes with
        non-finite weights that were not refit make it fail).
    replicates, blocks : int
        The near tie's block bootstrap (:func:`draws_bootstrap`).
    draws_influence : bool
        Compute the influence of each draw (``if_draws``, ``if_noise``: the error of the
        draws); False leaves them None (an estimate whose draws error is not reported).
    defer_refits : bool
        With a ``refit`` hook: do not refit; the outcomes that would be refit keep their
        importance-weighted G0_j − b_j, clipped into their range (the middle of the range
        where the weights are not finite), and ``extra["bounds"]`` holds the range
        (low, high) of the estimate over every value their refits could give
        (:func:`refit_bounds`), ``extra["deferred"]`` their number
        (:mod:`belief.decision.cvu.decisive` refits only the candidates whose range can
        still change the choice).
    """

    k_threshold: float = 0.7
    max_refits: int = 16
    chunk: int = 64
    max_bad_share: float = 0.05
    min_ess: float = 100.0
    control_variates: bool = True
    forced: bool = False
    replicates: int = 64
    blocks: int = 32
    draws_influence: bool = True
    defer_refits: bool = False
    refit_draws: int = 250

    @classmethod
    def from_settings(cls, settings: CVUSettings, **changes: object) -> PSISOptions:
        """The options of ``settings`` (PSIS forced when its estimator is ``psis``)."""
        return cls(**{"k_threshold": settings.k_threshold, "max_refits": settings.max_refits,
                      "chunk": settings.chunk, "max_bad_share": settings.max_bad_share,
                      "min_ess": settings.min_ess,
                      "control_variates": settings.control_variates,
                      "forced": settings.estimator == "psis", "blocks": settings.draw_blocks,
                      "refit_draws": settings.refit_draws, **changes})


@dataclass
class _Weighed:
    """The outcomes' smoothed and raw weights, k̂, which have non-finite weights, and φ of
    every column under the weights (J rows each)."""

    smooth: np.ndarray
    omega: np.ndarray
    khat: np.ndarray
    nonfinite: np.ndarray
    phi: np.ndarray
    k_threshold: float
    quantiles: Quantiles


def _weigh(nxt: NextState, functional: Functional, out: Outcomes, opt: PSISOptions,
           memo: OutcomeWeights) -> tuple[_Weighed | None, str, dict]:
    """The weights of every outcome, chunk by chunk; the first chunk is a pilot that stops
    early (None, reason, diagnostics) when the study is clearly too informative."""
    gain, y = nxt.gain, out.y
    n_j, n_s = y.shape[0], gain.shape[0]
    w = _Weighed(np.empty((n_j, n_s)), np.empty((n_j, n_s)), np.full(n_j, np.nan),
                 np.zeros(n_j, bool), np.empty((n_j, gain.shape[1])),
                 khat_threshold(opt.k_threshold, n_s), None)
    blocks_j = [slice(start, min(start + opt.chunk, n_j))
                for start in range(0, n_j, opt.chunk)]
    got: dict[tuple[float, ...], list[np.ndarray]] = {}

    def quantiles(levels: tuple[float, ...]) -> list[np.ndarray]:
        """The weighted quantiles (J, C) of the columns of ``gain``, from the memo's blocks."""
        if levels not in got:
            parts = [memo.quantiles(gain, w.smooth[sl], y[sl], levels) for sl in blocks_j]
            got[levels] = [np.concatenate([p[k] for p in parts]) for k in range(len(levels))]
        return got[levels]

    w.quantiles = quantiles
    for sl in blocks_j:
        w.smooth[sl], w.omega[sl], w.khat[sl], ok = memo.weights(y[sl])
        w.nonfinite[sl] = ~ok
        w.phi[sl] = memo.columns(functional, gain, w.smooth[sl], y[sl])
        if sl.start == 0 and not opt.forced and n_j > opt.chunk:
            stop = _pilot(w, sl, ok, opt, n_j, out.refit is not None)
            if stop is not None:
                return None, *stop
    return w, "", {}


def _pilot(w: _Weighed, sl: slice, ok: np.ndarray, opt: PSISOptions, n_j: int,
           can_refit: bool) -> tuple[str, dict] | None:
    """The first chunk is a pilot: (reason, diagnostics) to stop early when it already
    shows, by more than two standard errors, more untrusted outcomes than refits and the
    tolerated share can absorb, or a median ESS below min_ess; None to go on."""
    n_p = sl.stop - sl.start
    first = float((~ok | ~(w.khat[sl] <= w.k_threshold)).mean())
    allowed = opt.max_bad_share + (opt.max_refits / n_j if can_refit else 0.0)
    ess_p = float(np.median(np.where(ok, 1.0 / (w.smooth[sl] ** 2).sum(axis=1), 1.0)))
    diag = {"pareto_k": _max_k(w.khat[sl]), "bad_share": first, "ess": ess_p}
    if first - 2 * np.sqrt(first * (1 - first) / n_p) > allowed:
        return (f"informative study: {first:.0%} of the first {n_p} outcomes "
                f"have untrusted weights (k̂ > {w.k_threshold:g} or NaN)"), diag
    if ess_p < opt.min_ess and not can_refit:
        return (f"informative study: median effective sample size of the "
                f"weights {ess_p:.0f} < {opt.min_ess:g} in the first {n_p} "
                "outcomes"), diag
    return None


@dataclass
class _Triage:
    """Which outcomes are untrusted, which of them are refit (largest k̂ first, NaN first),
    the median ESS of those that keep their weights, and the diagnostics."""

    untrusted: np.ndarray
    to_refit: np.ndarray
    ess_med: float
    diag: dict
    reason: str = ""  # non-empty: use the regression estimator instead


def _triage(w: _Weighed, opt: PSISOptions, can_refit: bool) -> _Triage:
    """The outcomes to refit and whether the estimate can be trusted without regression."""
    n_j = w.khat.shape[0]
    untrusted = w.nonfinite | ~(w.khat <= w.k_threshold)
    ess = np.where(w.nonfinite, 1.0, 1.0 / (w.smooth**2).sum(axis=1))  # rows are normalised
    bad = np.flatnonzero(untrusted)
    order = bad[np.argsort(-np.where(np.isnan(w.khat[bad]) | w.nonfinite[bad], np.inf,
                                     w.khat[bad]), kind="stable")]
    n_refit_max = min(order.size, opt.max_refits) if can_refit else 0
    remaining = order.size - n_refit_max
    # informativeness from the outcomes that keep their importance weights
    kept = np.ones(n_j, bool)
    kept[order[:n_refit_max]] = False
    ess_med = float(np.median(ess[kept])) if kept.any() else np.inf
    diag = {"pareto_k": _max_k(w.khat), "bad_share": float(untrusted.mean()),
            "ess": float(np.median(ess))}
    t = _Triage(untrusted, order[:n_refit_max], ess_med, diag)
    if not opt.forced:
        if remaining > opt.max_bad_share * n_j:
            t.reason = (f"{order.size / n_j:.0%} of the outcomes have untrusted weights "
                        f"(k̂ > {w.k_threshold:g}, NaN, or non-finite weights)"
                        + (f"; at most {opt.max_refits} exact refits" if can_refit
                           else "; no exact refits"))
        elif ess_med < opt.min_ess:
            t.reason = (f"informative study: median effective sample size of the weights "
                        f"{ess_med:.0f} < {opt.min_ess:g}")
    return t


@dataclass
class _Values:
    """G0_j of every outcome (the weighted one, a refit's, or a deferred one's), the winner
    c*_j, the noise bias per antithetic pair, which were refit or deferred, and the deferred
    outcomes' ranges."""

    feas: np.ndarray
    g0_j: np.ndarray
    won: np.ndarray
    pairs: np.ndarray
    refit_done: np.ndarray
    deferred: np.ndarray
    ranges: np.ndarray | None = None


def _outcome_values(nxt: NextState, functional: Functional, out: Outcomes, w: _Weighed,
                    to_refit: np.ndarray, opt: PSISOptions,
                    noise_z: np.ndarray | None) -> _Values:
    """G0_j under the weights, net of the noise bias, with the refits done or deferred."""
    n_j = w.khat.shape[0]
    feas = np.broadcast_to(nxt.mask_for(out.y), w.phi.shape)
    pairs = (noise_bias(functional, nxt.gain,
                        WeightedFunctionals(w.phi, w.smooth, w.quantiles), nxt.c_lambda, feas,
                        noise_z).pairs
             if noise_z is not None else np.zeros((n_j, 1)))
    v = _Values(feas, nxt.g0(w.phi, feas), winners(w.phi, nxt.c_lambda, feas), pairs,
                np.zeros(n_j, bool), np.zeros(n_j, bool))
    if opt.defer_refits:  # the outcomes a refit would replace keep their value, and its range
        v.deferred[to_refit] = True
        _defer(nxt, functional, v, opt.refit_draws)
        return v
    for j in to_refit:
        _refit_one(nxt, functional, out, v, int(j), noise_z)
    return v


def _defer(nxt: NextState, functional: Functional, v: _Values, refit_draws: int) -> None:
    """The deferred outcomes' ranges into ``v.ranges``, their G0_j − b_j clipped into them."""
    deferred = v.deferred
    v.ranges = ranges = refit_ranges(nxt, v.feas[deferred], refit_draws, functional)
    unknown = deferred & ~(np.isfinite(v.g0_j) & np.isfinite(v.pairs).all(axis=1))
    v.g0_j[unknown] = ranges.mean(axis=1)[unknown[deferred]]  # no weights to read it from
    v.pairs[unknown] = 0.0
    # the weighted G0_j − b_j into the refit's range (a noise bias from weights of low ESS
    # can exceed the refit's margin): the estimate then lies inside its bounds
    b = v.pairs[deferred].mean(axis=1)
    v.g0_j[deferred] = np.clip(v.g0_j[deferred] - b, ranges[:, 0], ranges[:, 1]) + b


def _refit_one(nxt: NextState, functional: Functional, out: Outcomes, v: _Values, j: int,
               noise_z: np.ndarray | None) -> None:
    """Outcome j's G0_j, winner and noise bias from its exact refit (kept when the refit's
    draws are not finite)."""
    exact = np.asarray(out.refit(out.y[j]), float)
    if exact.ndim != 2 or not np.isfinite(exact).all():
        return
    feas = v.feas
    phi_j = functional(exact.T)
    v.g0_j[j] = float(nxt.g0(phi_j[None, :], feas[j][None, :])[0])
    v.won[j] = winners(phi_j[None, :], nxt.c_lambda, feas[j][None, :])[0]
    v.refit_done[j] = True
    if noise_z is not None:  # the refit's own draws, equally weighted
        equal = WeightedFunctionals(phi_j[None, :],
                                    np.full((1, exact.shape[0]), 1.0 / exact.shape[0]))
        v.pairs[j] = noise_bias(functional, exact, equal, nxt.c_lambda, feas[j], noise_z,
                                reference=nxt.gain).pairs[0]


def _reason(t: _Triage, v: _Values, opt: PSISOptions, still: int,
            controls: tuple[bool, bool], k_threshold: float) -> tuple[str, str]:
    """The estimate's method (``psis``, ``+cv``, ``+refit``, ``+bounded``) and reason;
    ``controls``: (some control variate entered, the controls could be used)."""
    n_j, n_refits, n_deferred = v.g0_j.shape[0], int(v.refit_done.sum()), int(v.deferred.sum())
    used, cv_ok = controls
    method = "psis+cv" if used else "psis"
    if n_refits:
        method += "+refit"
    if n_deferred:
        method += "+bounded"
    parts = []
    if n_refits:
        parts.append(f"{n_refits} outcome(s) with untrusted weights refit exactly")
    if n_deferred:
        parts.append(f"{n_deferred} outcome(s) with untrusted weights not refit (bounded)")
    if still:
        parts.append(f"{still} of {n_j} outcomes kept with k̂ > {k_threshold:g} "
                     f"(≤ {opt.max_bad_share:.0%} allowed)")
    if opt.control_variates and not cv_ok:
        parts.append("no control variates: some outcomes have no importance weights")
    reason = "; ".join(parts) or "weights trusted for every outcome"
    if opt.forced and (still > opt.max_bad_share * n_j or t.ess_med < opt.min_ess):
        reason = "PSIS forced by the settings: " + reason + f"; median ESS {t.ess_med:.0f}"
    return method, reason


def _checked(w: _Weighed, t: _Triage, v: _Values, opt: PSISOptions
             ) -> tuple[tuple[Estimate | None, str, dict] | None, int]:
    """(the early answer or None to go on, the outcomes still untrusted): outcomes with
    non-finite weights that were not refit fail a forced estimate (and send any other to
    regression), and so do too many untrusted outcomes left after the refits."""
    n_j, n_refits = v.g0_j.shape[0], int(v.refit_done.sum())
    broken = w.nonfinite & ~v.refit_done & ~v.deferred
    if broken.any():
        return ((Estimate.failed(f"{int(broken.sum())} outcome(s) with non-finite importance "
                                 "weights (NaN or +inf log-likelihood) were not refit",
                                 n_outcomes=n_j, n_refits=n_refits, **t.diag)
                 if opt.forced else None,
                 f"{int(broken.sum())} outcome(s) have non-finite importance weights",
                 t.diag), 0)
    still = int((t.untrusted & ~v.refit_done & ~v.deferred).sum())
    if not opt.forced and still > opt.max_bad_share * n_j:  # refits that failed leave too many
        return (None, (f"{still} of {n_j} outcomes keep untrusted weights after "
                       f"{n_refits} exact refits"), t.diag), still
    return None, still


def _summary(nxt: NextState, functional: Functional, w: _Weighed, t: _Triage, v: _Values,
             opt: PSISOptions, still: int) -> tuple[Estimate, np.ndarray, np.ndarray]:
    """The control-variate estimate of E_Y[G0] over the G0_j − b_j, with the influence of
    the draws; returns (estimate, controls Z, b_j)."""
    # the controls' mean is 0 only if every outcome has its raw weights: an outcome whose
    # likelihood is undefined (refit instead) has none, so the controls are then left out
    cv_ok = opt.control_variates and not w.nonfinite.any()
    if cv_ok:
        omega = w.omega
        funcs = control_functions(nxt.utility, lambda f: omega @ f, v.won, v.feas.any(axis=0))
        z = omega @ funcs - funcs.mean(axis=0)
    else:
        z = np.zeros((v.g0_j.shape[0], 0))
    bias = v.pairs.mean(axis=1)
    terms = control_variate_terms(v.g0_j - bias, z)  # pairs estimates on these outcomes
    value, mcse, gain_cv = control_variate_summary(v.g0_j - bias, terms)
    if_draws, if_noise = (_draw_influence(functional, nxt, v.won, w.smooth, w.omega, w.phi,
                                          v.g0_j, w.quantiles)
                          if opt.draws_influence and not (v.deferred & w.nonfinite).any()
                          else (None, None))
    method, reason = _reason(t, v, opt, still, (z.shape[1] > 0, cv_ok), w.k_threshold)
    est = Estimate(value, mcse, method, reason, if_draws=if_draws, if_noise=if_noise,
                   n_outcomes=v.g0_j.shape[0], n_refits=int(v.refit_done.sum()),
                   cv_gain=gain_cv, terms=np.array(terms, float), **t.diag)
    return est, z, bias


def _noise_extra(est: Estimate, v: _Values, z: np.ndarray, bias: np.ndarray) -> None:
    """The noise-bias correction's mean, pairs and error into ``est`` (its error added to the
    MCSE), and the plug-in estimate for the continuations' V(s^∅)."""
    p = v.pairs.mean(0)  # the correction's own error, over the antithetic pairs
    corr_mcse = float(p.std(ddof=1) / np.sqrt(p.size)) if p.size > 1 else 0.0
    est.extra.update(noise_bias=float(bias.mean()), noise_pairs=p, correction_mcse=corr_mcse)
    est.mcse = float(np.hypot(est.mcse, corr_mcse))
    plain = control_variate_summary(v.g0_j, control_variate_terms(v.g0_j, z))
    est.extra["plugin_g0"] = (plain[0], plain[1])  # for the continuations' V(s^∅)


@dataclass(frozen=True)
class DrawsBootstrap:
    """The block bootstrap of the draws' error in :func:`importance_estimate`.

    Attributes
    ----------
    g0_null : callable v (S,) → G0(s^∅) under draw weights v
    rng : Generator, optional
        The bootstrap's stream (default ``np.random.default_rng(0)``).
    if_null : ndarray (S,), optional
        The influence of each draw on G0(s^∅): the bootstrap is then run only when the
        influence-function error of CVU is unreliable; None: always.
    """

    g0_null: Callable[[np.ndarray], float]
    rng: np.random.Generator | None = None
    if_null: np.ndarray | None = None


def importance_estimate(nxt: NextState, functional: Functional, outcomes: Outcomes,
                        options: PSISOptions | None = None, *,
                        noise_z: np.ndarray | None = None,
                        bootstrap: DrawsBootstrap | None = None,
                        memo: OutcomeWeights | None = None,
                        ) -> tuple[Estimate | None, str, dict]:
    """E_Y[G0(s^{m,Y})] by PSIS with control variates, or the reason it cannot be trusted.

    Parameters
    ----------
    nxt : NextState
    functional : Functional
    outcomes : Outcomes
        The simulated outcomes, their log-likelihood and the exact refit.
    options : PSISOptions, optional
        Thresholds, refits, forcing, deferral (default ``PSISOptions()``).
    noise_z : ndarray (K/2, C), optional
        :func:`belief.decision.cvu.noise.noise_draws`: subtract from each G0_j its excess
        noise bias b_j (:func:`belief.decision.cvu.noise.noise_bias`); the mean of the b_j is
        ``extra["noise_bias"]``, their values per antithetic pair ``extra["noise_pairs"]``
        (K/2,), whose standard error ``extra["correction_mcse"]`` is added to the MCSE in
        quadrature, the plug-in estimate and its MCSE ``extra["plugin_g0"]``.  None: the
        plug-in G0_j.
    bootstrap : DrawsBootstrap, optional
        When given, the error of the draws is also estimated by a block bootstrap of
        ``bootstrap.g0_null`` (:func:`draws_bootstrap`, ``options.replicates`` replicates over
        ``options.blocks`` blocks, on ``bootstrap.rng``) and stored in
        ``extra["draws_sd_bootstrap"]`` — used where G0(s^∅) is a near tie, where the
        influence-function error misses the kink of the max.  With ``bootstrap.if_null``
        (the influence of each draw on G0(s^∅)) only when the influence-function error of
        CVU, of IF_i = if_draws_i − if_null_i, is unreliable (:func:`noisy_influence`).
    memo : OutcomeWeights, optional
        The weights (and weighted functionals) of these outcomes, shared with other
        estimates on them; by default computed here from ``outcomes.loglik``.  It must have
        been built from this ``loglik`` (ValueError otherwise).

    Returns
    -------
    (estimate or None, reason, diagnostics): None with the reason when the caller should use
    the regression estimator; diagnostics hold ``pareto_k`` (max k̂, NaN counted as ∞),
    ``bad_share`` (share of untrusted outcomes before refits) and ``ess`` (median ESS).
    """
    opt = options or PSISOptions()
    if memo is not None and memo.loglik is not outcomes.loglik:
        raise ValueError("importance_estimate: memo holds the weights of another loglik")
    memo = memo or OutcomeWeights(outcomes.loglik)
    w, reason, diag = _weigh(nxt, functional, outcomes, opt, memo)
    if w is None:
        return None, reason, diag
    t = _triage(w, opt, outcomes.refit is not None)
    if t.reason:
        return None, t.reason, t.diag
    v = _outcome_values(nxt, functional, outcomes, w, t.to_refit, opt, noise_z)
    early, still = _checked(w, t, v, opt)
    if early is not None:
        return early
    est, z, bias = _summary(nxt, functional, w, t, v, opt, still)
    if noise_z is not None:
        _noise_extra(est, v, z, bias)
    if v.deferred.any():
        est.extra["deferred"] = int(v.deferred.sum())
        est.extra["bounds"] = refit_bounds(v.g0_j - bias, z, v.deferred, v.ranges)
    b = bootstrap
    if b is not None and not w.nonfinite.any() and (
            b.if_null is None or est.if_draws is None
            or noisy_influence(est.if_draws - b.if_null, est.if_noise, opt.blocks)):
        est.extra["draws_sd_bootstrap"] = draws_bootstrap(
            functional, nxt, WeighedOutcomes(v.feas, w.smooth, w.omega, v.g0_j, v.refit_done),
            b.g0_null, b.rng or np.random.default_rng(0), opt.replicates, opt.blocks)
    return est, est.reason, t.diag


def refit_ranges(nxt: NextState, feasible: np.ndarray, refit_draws: int,
                 functional: Functional) -> np.ndarray:
    """The values (low, high) that an exact refit's bias-corrected G0_j − b_j is taken to
    reach, for outcomes with the feasible sets ``feasible`` (K, C): (K, 2).

    An exact refit is p(θ | D, Y_j) ∝ p(θ | D) p(Y_j | θ): its support is that of q_t, so
    every functional of it (mean, quantile, lower-tail mean) of column c lies in
    [ess inf, ess sup] of c under q_t.  That interval is read as the range of the S next-gain
    draws (a sample's range lies inside the support, so this is where the rule is not a proof:
    a refit concentrated beyond q_t's most extreme draw escapes it; a draw's functional is
    nowhere near that in practice), and

        G0_j ∈ [max(0, max_{c ∈ M'_j} min_i g_ic − C_λ'(c)),
                max(0, max_{c ∈ M'_j} max_i g_ic − C_λ'(c))].

    The refit's noise-bias correction b_j is the difference of two terms, each between 0 and
    E_z max_c |(L z)_c| ≤ √(2 ln 2C')·σ_max for C' feasible columns whose functionals have
    noise sd at most σ_max; with a refit's sd no larger than q_t's, ``refit_draws`` effective
    draws and κ the functional's noise ratio to the mean's
    (:meth:`belief.decision.functionals.Functional.noise_ratio`),
    σ_max ≤ κ·max_c sd_c/√refit_draws, the margin added on both sides.
    """
    gain = nxt.gain
    feas = np.asarray(feasible, bool).reshape(-1, gain.shape[1])
    low = np.where(feas, gain.min(axis=0) - nxt.c_lambda, -np.inf).max(axis=1)
    high = np.where(feas, gain.max(axis=0) - nxt.c_lambda, -np.inf).max(axis=1)
    n_feas = np.maximum(feas.sum(axis=1), 1)
    sd = np.where(feas, gain.std(axis=0), 0.0).max(axis=1)
    margin = (np.sqrt(2 * np.log(2 * n_feas)) * functional.noise_ratio(gain) * sd
              / np.sqrt(refit_draws))
    return np.stack([np.maximum(low, 0.0) - margin, np.maximum(high, 0.0) + margin], -1)


def refit_bounds(values: np.ndarray, controls: np.ndarray, deferred: np.ndarray,
                 ranges: np.ndarray) -> tuple[float, float]:
    """The range of the control-variate estimate mean_j(v_j − β̂_{−f(j)}ᵀ z_j) when the
    values v_j of the ``deferred`` outcomes may take any value in ``ranges`` (K, 2) and the
    controls stay as they are.

    The estimate is linear in v (β̂ is a least-squares fit of v on fixed controls), so it
    moves by Σ_j a_j (v'_j − v_j) with a_j read off one unit step of each deferred v_j, and its
    extremes over the box are at its corners: low = est + Σ_j min(a_j (l_j − v_j),
    a_j (h_j − v_j)), high likewise with max.  (Which rivals the controls are built on follows
    the winners of the outcomes; a refit that changes the most frequent winners changes the
    controls, an effect of the order of the MCSE that the range does not cover.)
    """
    v = np.asarray(values, float)
    base = float(np.mean(control_variate_terms(v, controls)))
    low = high = base
    for k, j in enumerate(np.flatnonzero(deferred)):
        step = v.copy()
        step[j] += 1.0
        a = float(np.mean(control_variate_terms(step, controls))) - base
        ends = a * (ranges[k] - v[j])
        low, high = low + float(ends.min()), high + float(ends.max())
    return low, high


@dataclass(frozen=True)
class WeighedOutcomes:
    """What the draws bootstrap reads of the outcomes: the feasible sets ``feas`` (C,) or
    (J, C), the smoothed weights ``smooth`` and raw weights ``omega`` (J, S), the values
    ``g0_j`` (J,), and which outcomes were refit exactly (``exact``, (J,), kept at their
    value)."""

    feas: np.ndarray
    smooth: np.ndarray
    omega: np.ndarray
    g0_j: np.ndarray
    exact: np.ndarray


def draws_bootstrap(functional: Functional, nxt: NextState, outcomes: WeighedOutcomes,
                    g0_null: Callable[[np.ndarray], float], rng: np.random.Generator,
                    replicates: int = 64, blocks: int = 32) -> float:
    """sd of CVU over a block bootstrap of the draws, by reweighting (no new outcomes).

    Replicate b gives every contiguous block of draws a Poisson(1) weight v_i (the same
    within a block, so autocorrelated draws are resampled together).  Under the reweighted
    empirical prior the posterior of outcome j has weights ∝ v_i w̃_ij, the outcome's
    predictive density changes by r_j = Σ_i v_i ω_ij / mean(v) (E_Y r = 1), so

        CVU_b = Σ_j r_j G0_b(Y_j) / Σ_j r_j − G0(s^∅; v),

    with exactly refit outcomes kept at their value.  Unlike the influence function this
    follows the max in G0 across a near tie.
    """
    feas, smooth, omega, g0_j, exact = (outcomes.feas, outcomes.smooth, outcomes.omega,
                                        outcomes.g0_j, outcomes.exact)
    n_j, n_s = omega.shape
    b = min(blocks, n_s)
    block = np.minimum(np.arange(n_s) * b // n_s, b - 1)
    cols = np.flatnonzero(np.asarray(feas, bool).reshape(-1, nxt.gain.shape[1]).any(axis=0))
    if functional.linear:
        # the weighted mean from per-block sums (v is constant on the blocks): Σ_i w̃_ij v_i
        # g_ic = Σ_b v_b Σ_{i∈b} w̃_ij g_ic, likewise the totals and r_j (to rounding)
        onehot = np.zeros((n_s, b))
        onehot[np.arange(n_s), block] = 1.0
        w_b = smooth @ onehot  # (J, B)
        a_b = np.stack([(smooth * nxt.gain[:, c]) @ onehot for c in cols], -1)  # (J, B, C')
        o_b = omega @ onehot
        size = onehot.sum(axis=0)
        columns = None
    else:  # sorted once; v is constant on the blocks (ReweightedColumns' block path)
        columns = ReweightedColumns(functional, nxt.gain[:, cols], smooth, block=block)
    vals = np.empty(replicates)
    for k in range(replicates):
        v_b = rng.poisson(1.0, b).astype(float)
        if v_b.sum() == 0:
            v_b[:] = 1.0
        v = v_b[block]
        phi = np.full((n_j, nxt.gain.shape[1]), -np.inf)
        if columns is None:
            total = w_b @ v_b
            ok = total > 0
            phi[np.ix_(ok, cols)] = (np.einsum("jbc,b->jc", a_b[ok], v_b)
                                     / total[ok, None])
            r = o_b @ v_b / (size @ v_b / n_s)
        else:
            # Σ_i w̃_ij v_i > 0 ⇔ some w̃_ij v_i > 0 (all terms ≥ 0): from per-block sums
            ok = columns.row_totals(v) > 0
            phi[np.ix_(ok, cols)] = columns(v, ok)  # = weighted_columns(φ, gain[:, cols], w[ok])
            r = omega @ v / v.mean()
        g = np.where(exact | ~ok, g0_j, nxt.g0(phi, feas))
        vals[k] = float((r * g).sum() / r.sum()) - g0_null(v)
    return float(vals.std(ddof=1))


NOISY_SHARE = 0.2
"""Share of the block means' variance of the influence values that their own Monte Carlo
noise may take before the influence-function error of the draws is called unreliable."""


def noisy_influence(if_values: np.ndarray, noise: np.ndarray | None, blocks: int) -> bool:
    """Whether the influence-function error of the draws
    (:func:`belief.decision.preposterior.draws_variance`) is unreliable: the Monte Carlo noise
    of the IF_i, which it subtracts from the variance of their block means, is at least
    :data:`NOISY_SHARE` of that variance (or the variance is 0).  Each IF_i is a weighted
    average over the J outcomes (``_draw_influence``); a draw in a tail the outcomes rarely
    reach gets a heavy-tailed one, and the subtraction then leaves an error of the draws that
    is far too small, down to 0 — measured on the normal study at n = 1 and 10
    (``benchmarks/bench_evsi_coverage.py``)."""
    v = np.asarray(if_values, float)
    s = v.size
    b = blocks if s >= 4 * blocks else s
    length = s // b
    means = v[: b * length].reshape(b, length).mean(axis=1)
    total = float(means.var(ddof=1)) if b > 1 else 0.0
    if noise is None:
        return not total > 0
    nz = np.asarray(noise, float)[: b * length].reshape(b, length)
    noise_mean = float((nz.sum(axis=1) / length**2).mean())
    return not total > 0 or noise_mean >= NOISY_SHARE * total


def _max_k(khat: np.ndarray) -> float:
    """Max k̂ with NaN counted as +∞ (a failed fit is worse than any k̂)."""
    k = np.where(np.isnan(khat), np.inf, khat)
    return float(k.max()) if k.size else np.nan
