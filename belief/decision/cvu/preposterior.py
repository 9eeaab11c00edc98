"""What CVU's estimators share: the state after m, G0 of simulated beliefs, control variates
from the preposterior martingale, and the error of the finite set of posterior draws.

Notation: S joint draws θ_i (the empirical prior P̂_S, uniform on the draws), candidates c,
next-gain draws g_ic in s_{t+1}^{m,Y} (after m's policy change), U'_ic = g_ic − C_λ'(c) with
λ_{t+1} = λ(b − ΔC(m)), M' the candidates feasible in s_{t+1}, and an option "stop" worth 0.
For a simulated outcome Y with posterior weights ω_i(Y):

    G0(Y) = max(0, max_{c ∈ M'} φ_c(Y) − C_λ'(c)),   φ_c(Y) = φ of g_·c under ω(Y).

**Martingale.**  With Y drawn from the predictive of P̂_S and the raw weights ω_i(Y) =
p(Y | θ_i)/Σ_k p(Y | θ_k), E_Y[Σ_i ω_i(Y) f(θ_i)] = (1/S) Σ_i f(θ_i) for *every* function f of
the draws.  So Z_f(Y) = Σ_i ω_i(Y) f(θ_i) − f̄ has mean exactly 0 and is a control variate
for any φ.  :func:`control_functions` picks the f that track G0: the U' of the candidates
that win some outcome (the linear part, for φ = mean E_Y[E(ΔJ | Y)] = E(ΔJ)), and for each
contender o the "call" payoffs (d_o − t)_+ of its advantage d_o = U'_o − U'_o† over the
prior-best option o† at a few strikes t (the kink of the max), and the perfect-information
payoff max(0, max_o d_o).  :func:`control_variate_mean` is the regression estimator
(G0_j − β̂ᵀZ_j averaged, β̂ fitted on the other folds of outcomes) with its standard
error from the out-of-fold residuals (cross-fitted, so that nearly collinear controls cannot
bias it).

**Finite draws.**  Every estimator targets CVU under P̂_S; CVU under the true posterior
differs by the error of the S draws.  Its first-order (influence-function) expansion in the
mass of draw i is, for CVU = E_Y[G0(s^{m,Y})] − G0(s^∅),

    IF_i = E_Y[ S·ω_i(Y) · (ψ_{c*(Y)}(g_{i c*(Y)}; ω(Y)) + G0(Y)) ] − E_Y[G0] − ψ_{c†}(g⁰_{i c†}),

with c*(Y) the winner of G0(Y) (no term when stopping wins), c† that of G0(s^∅) and ψ the
influence function of φ under the weighted draws: x − φ for the mean, VaR − (VaR − x)_+/α − φ
for CVaR_α (Rockafellar–Uryasev), (q − 1[x ≤ VaR])/f(VaR) for the q-quantile (f from the
quantile spacing).  The variance of CVU from the draws is Var((1/S) Σ_i IF_i), estimated by
batch means over contiguous blocks of draws (so autocorrelated MCMC draws are handled)
after removing the Monte Carlo noise of the IF estimates themselves
(:func:`draws_variance`).  It does not remove the bias of G0's max over noisy estimates when
candidates tie (first order in the draws' error at an exact tie); the tests and the
benchmark measure it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from belief.decision.functionals import Functional, lcbs
from belief.decision.scores import g0

__all__ = ["NextState", "control_functions", "control_variate_mean", "control_variate_summary",
           "control_variate_terms", "draws_variance",
           "influence", "influence_levels", "winners"]

STOP = -1


@dataclass(frozen=True)
class NextState:
    """s_{t+1}^{m,·}: everything about the state after m except the simulated belief.

    Attributes
    ----------
    gain : ndarray (S, C)
        Next-gain draws g_ic (after m's policy change).
    c_lambda : ndarray (C,)
        C_λ'(c) = λ_{t+1}ᵀ ΔC(c).
    feasible : bool ndarray (C,)
        M^feasible(s_{t+1}) when it does not depend on the outcome.
    outcome_feasible : callable Y (J, ...) → bool (J, C), optional
        Feasibility in s_{t+1} as a function of the simulated outcome (a channel through
        which an outcome changes M'; None: ``feasible`` for every outcome).  Both estimators
        take the mask of their outcomes from :meth:`mask_for`; every function here
        broadcasts a (J, C) mask against (J, C).
    """

    gain: np.ndarray
    c_lambda: np.ndarray
    feasible: np.ndarray
    outcome_feasible: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def utility(self) -> np.ndarray:
        """U'_ic = g_ic − C_λ'(c), (S, C)."""
        return self.gain - self.c_lambda[None, :]

    def mask_for(self, y: np.ndarray) -> np.ndarray:
        """M' for the outcomes ``y``: (C,), or (J, C) when feasibility depends on Y."""
        if self.outcome_feasible is None:
            return self.feasible
        return np.asarray(self.outcome_feasible(y), bool) & self.feasible

    def g0(self, phi: np.ndarray, feasible: np.ndarray | None = None) -> np.ndarray:
        """G0 of every row of φ (J, C): max(0, max_{c ∈ M'} φ_c − C_λ'(c))."""
        f = self.feasible if feasible is None else feasible
        return g0(phi - self.c_lambda, f)


def winners(phi: np.ndarray, c_lambda: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Index of the option G0 takes in every row of φ (J, C): the best feasible candidate, or
    −1 when stopping (0) is at least as good."""
    u = np.where(feasible, phi - c_lambda, -np.inf)
    best = u.argmax(axis=-1)
    top = np.take_along_axis(u, best[..., None], -1)[..., 0]
    return np.where(top > 0, best, STOP)


def prior_best(utility: np.ndarray, feasible: np.ndarray) -> int:
    """o†: the option with the largest mean U' over the draws (−1 = stop)."""
    mean = np.where(np.asarray(feasible, bool).reshape(-1, utility.shape[1]).any(axis=0),
                    utility.mean(axis=0), -np.inf)
    best = int(mean.argmax())
    return best if mean[best] > 0 else STOP


def control_functions(utility: np.ndarray, omega_means: Callable[[np.ndarray], np.ndarray],
                      won: np.ndarray, feasible_any: np.ndarray, *, max_contenders: int = 4,
                      strikes: tuple[float, ...] = (0.25, 0.5, 0.75)) -> np.ndarray:
    """The functions f of the draws whose posterior means serve as control variates, (S, K).

    Parameters
    ----------
    utility : ndarray (S, C)
        U'_ic.
    omega_means : callable F (S, K) → (J, K)
        Posterior means Σ_i ω_ij F_ik under the raw weights (used to place the strikes).
    won : int ndarray (J,)
        Winner of G0 at every outcome (−1 = stop).
    feasible_any : bool (C,)
        Candidates feasible in s_{t+1} (in some outcome).
    max_contenders : int
        At most this many options other than o† (the most frequent winners) get calls.
    strikes : tuple of float
        Quantile levels of the preposterior advantage at which calls are placed (plus 0).
    """
    o_dag = prior_best(utility, feasible_any)
    u_dag = np.zeros(utility.shape[0]) if o_dag == STOP else utility[:, o_dag]
    opts, counts = np.unique(won, return_counts=True)
    rivals = [int(o) for o in opts[np.argsort(-counts, kind="stable")] if o != o_dag]
    rivals = rivals[:max_contenders]
    cols = [] if o_dag == STOP else [u_dag]
    adv = [(np.zeros_like(u_dag) if o == STOP else utility[:, o]) - u_dag for o in rivals]
    if adv:
        a = np.stack(adv, -1)  # (S, R) advantage over o†
        cols.extend(a.T)
        pre = omega_means(a)  # (J, R) preposterior means of the advantages
        for r in range(a.shape[1]):
            ts = np.unique(np.concatenate([[0.0], np.quantile(pre[:, r], strikes)]))
            cols.extend(np.maximum(a[:, r, None] - ts[None, :], 0.0).T)
        if a.shape[1] > 1:
            cols.append(np.maximum(a.max(axis=1), 0.0))
    if not cols:
        return np.zeros((utility.shape[0], 0))
    return np.stack(cols, -1)


_RIDGE = 1e-2  # ridge penalty per outcome on the standardised controls
_CUTOFF = 1e-3  # singular values below this fraction of the largest are dropped


def _fit_controls(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Ridge-regularised least-squares β of y on [1, z]: controls standardised, centred,
    directions with singular value below ``_CUTOFF`` of the largest dropped, and the others
    shrunk by s²/(s² + ``_RIDGE``·n).  The control functions are nearly collinear (calls at
    neighbouring strikes): an unregularised fit extrapolates along their differences with
    huge coefficients, whose adjusted values are heavy-tailed (unbiased, but a sample of J
    outcomes then understates their spread).  The penalty was chosen on normal–normal and
    gains-model cases by the calibration of the reported standard error against the spread
    over 40 seeds (``benchmarks/bench_cvu.py --calibration 40`` measures it).  Returns β for the
    unstandardised z (K,)."""
    scale = z.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    x = np.column_stack([np.ones(y.size), (z - z.mean(axis=0)) / scale])
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    keep = s > s.max() * _CUTOFF
    s, u, vt = s[keep], u[:, keep], vt[keep]
    coef = vt.T @ ((u.T @ y) * s / (s**2 + _RIDGE * y.size))
    return coef[1:] / scale


def control_variate_mean(values: np.ndarray, controls: np.ndarray, folds: int = 4,
                         max_controls: int | None = None) -> tuple[float, float, float]:
    """Cross-fitted control-variate estimate of E[values] with controls z of known mean 0.

    The outcomes are split into ``folds`` interleaved folds; for the outcomes of fold f the
    coefficients β̂_{−f} come from a (ridge-regularised, :func:`_fit_controls`) least-squares
    fit of values on [1, z] over the other folds, and

        â = (1/J) Σ_j (values_j − β̂_{−f(j)}ᵀ z_j),   se(â) = sd_j(values_j − β̂_{−f(j)}ᵀ z_j)/√J.

    Each adjusted value is unbiased for E[values] whatever β̂ is (E z = 0 and β̂_{−f} does not
    depend on fold f), so nearly collinear controls can only inflate the variance, which the
    out-of-fold residuals report honestly (an in-sample fit would bias â by O(K/J) and
    understate its error).  Returns (â, se(â), gain) with gain = var(values)/var(adjusted),
    the variance reduction.  Constant controls are dropped, and at most (J − J/folds)/4 are
    used (the first ones); without controls this is the plain mean and sd/√J.
    """
    y = np.asarray(values, float)
    return control_variate_summary(y, control_variate_terms(y, controls, folds, max_controls))


def control_variate_summary(values: np.ndarray, adjusted: np.ndarray
                            ) -> tuple[float, float, float]:
    """(â, se(â), gain) of :func:`control_variate_mean` from its adjusted values
    (:func:`control_variate_terms`): â = mean(adjusted), se = sd(adjusted)/√J and
    gain = var(values)/var(adjusted) (1 when no control was used)."""
    y, adjusted = np.asarray(values, float), np.asarray(adjusted, float)
    n = y.size
    plain_var = y.var(ddof=1) if n > 1 else np.nan
    var = adjusted.var(ddof=1) if n > 1 else np.nan
    if np.array_equal(adjusted, y):  # no control used
        return float(y.mean()), float(np.sqrt(plain_var / n)), 1.0
    gain = plain_var / var if var > 0 else np.inf
    return float(adjusted.mean()), float(np.sqrt(var / n)), float(gain)


def control_variate_terms(values: np.ndarray, controls: np.ndarray, folds: int = 4,
                          max_controls: int | None = None) -> np.ndarray:
    """The adjusted values values_j − β̂_{−f(j)}ᵀ z_j of :func:`control_variate_mean` (J,),
    whose mean is its estimate; ``values`` itself when no control is used.
    Two estimates on the same outcomes are paired through them: the Monte Carlo error of
    their difference is sd_j(a_j − b_j)/√J."""
    y = np.asarray(values, float)
    n = y.size
    z = np.asarray(controls, float).reshape(n, -1)
    keep = z.std(axis=0) > 1e-12 * (1.0 + np.abs(z).max(axis=0))
    z = z[:, keep]
    train = n - -(-n // folds)
    limit = train // 4 if max_controls is None else min(max_controls, train // 4)
    z = z[:, :max(0, limit)]
    if z.shape[1] == 0 or folds < 2 or train < 8:
        return y
    fold = np.arange(n) % folds
    adjusted = np.empty(n)
    for f in range(folds):
        out = fold == f
        beta = _fit_controls(y[~out], z[~out])
        adjusted[out] = y[out] - z[out] @ beta
    return adjusted


def influence(functional: Functional, x: np.ndarray, phi: np.ndarray, draws: np.ndarray,
              weights: np.ndarray | None,
              quantiles: Callable[[tuple[float, ...]], list[np.ndarray]] | None = None
              ) -> np.ndarray:
    """ψ(x; P_w): the influence function of φ under weighted draws, at the values ``x``.

    Parameters
    ----------
    x : ndarray (J, S)
        Values at which ψ is evaluated (row j: the draws of the column that matters for j).
    phi : ndarray (J,)
        φ of each row under its weights.
    draws, weights : ndarray (J, S)
        The weighted distribution of each row (weights None: uniform).

    quantiles : callable levels → [VaR(level) of each row], optional
        The rows' weighted quantiles (default ``lcbs(draws, levels, weights)``; a caller that
        has the columns sorted passes a faster one with the same values).

    Several columns at once: ``x`` (J, S, C) (or broadcastable to it), ``phi`` (J, C) and
    ``quantiles`` giving (J, C) arrays return ψ (J, S, C), column c equal to the one-column
    call on ``x[:, :, c]``, ``phi[:, c]`` (the same operations elementwise).

    ψ = x − φ (mean); VaR − (VaR − x)_+/α − φ (CVaR_α, lower tail); (q − 1[x ≤ VaR]) / f(VaR)
    (q-quantile, f = (q₊ − q₋)/(VaR(q₊) − VaR(q₋)) with q± = q ± min(q, 1 − q)/2).
    """
    if quantiles is None:
        def quantiles(levels: tuple[float, ...]) -> list[np.ndarray]:
            return lcbs(draws, levels, weights)

    x = np.asarray(x, float)
    phi = np.expand_dims(np.asarray(phi, float), 1)
    return functional.influence(x, phi, quantiles)


def influence_levels(functional: Functional) -> tuple[float, ...]:
    """The quantile levels :func:`influence` asks its ``quantiles`` for: (α,) for CVaR_α,
    (q − h, q + h) with h = min(q, 1 − q)/2 for the q-quantile, none for the mean
    (:meth:`belief.decision.functionals.Functional.influence_levels`)."""
    return functional.influence_levels()


def draws_variance(if_values: np.ndarray, noise: np.ndarray | None = None,
                   blocks: int = 32) -> float:
    """Var((1/S) Σ_i IF_i) by batch means over ``blocks`` contiguous blocks of draws.

    ``noise`` (S,) is the variance of the Monte Carlo error in each IF_i estimate; it is
    subtracted (block means of noisy IF values have variance Var_true + Σ_{i∈b} noise_i/L²).
    With fewer than 4 draws per block the draws are treated as independent.  The result is
    clipped at 0.
    """
    v = np.asarray(if_values, float)
    s = v.size
    nz = np.zeros(s) if noise is None else np.asarray(noise, float)
    b = blocks if s >= 4 * blocks else 1
    if b < 2:
        est = (v.var(ddof=1) - nz.mean()) / s
        return float(max(est, 0.0))
    length = s // b
    v, nz = v[: b * length].reshape(b, length), nz[: b * length].reshape(b, length)
    means = v.mean(axis=1)
    noise_mean = (nz.sum(axis=1) / length**2).mean()
    est = (means.var(ddof=1) - noise_mean) / b
    return float(max(est, 0.0))
