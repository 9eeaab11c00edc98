"""The normal study whose EVSI has a closed form: the reference against which CVU's estimate
and its reported errors are checked (``benchmarks/bench_evsi_coverage.py``,
``tests/test_evsi_coverage.py``).

Two options (act on Δ, or do nothing), Δ ~ N(μ0, sd0²) as S draws, a study of n observations
with noise σ and no cost: CVU(observe) = EVSI(n) = s·(φ(u) − u·Φ(−u)),
s² = sd0⁴/(sd0² + σ²/n), u = |μ0|/s.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from belief.decision.cvu import CVUProblem, continuation_value
from belief.decision.functionals import Mean
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment

__all__ = ["evsi", "normal_study_cvu", "own_prior_evsi"]


def evsi(mu0: float, n: float, sd0: float = 1.0, sigma: float = 1.0) -> float:
    """Closed-form EVSI of the normal study: E[max(0, μ'(Y))] − max(0, μ0)."""
    s = np.sqrt(sd0**4 / (sd0**2 + sigma**2 / n))
    u = abs(mu0) / s
    return float(s * (stats.norm.pdf(u) - u * stats.norm.sf(u)))


def own_prior_evsi(delta: np.ndarray, se: float) -> float:
    """EVSI under the discrete prior of the draws ``delta``: ∫ max(0, Σ_i δ_i N(y; δ_i, se))
    dy / S − max(0, mean δ), by the rectangle rule on a grid of step ≤ se/8 (exact to
    rounding for a sum of Gaussians); each stretch of the grid sums over the draws within
    10·se of it (the others weigh < e^-50)."""
    d_sorted = np.sort(delta)
    lo, hi = d_sorted[0] - 9 * se, d_sorted[-1] + 9 * se
    ys = np.linspace(lo, hi, int(max(4001, (hi - lo) / se * 8)))
    total = 0.0
    for chunk in np.array_split(ys, max(1, ys.size // 400)):
        a, b = np.searchsorted(d_sorted, [chunk[0] - 10 * se, chunk[-1] + 10 * se])
        near = d_sorted[a:b]
        if near.size == 0:
            continue
        d = (chunk[:, None] - near[None, :]) / se
        total += np.maximum((np.exp(-0.5 * d * d) * near).sum(axis=1), 0.0).sum()
    total *= (ys[1] - ys[0]) / (delta.size * se * np.sqrt(2 * np.pi))
    return float(total - max(0.0, delta.mean()))


def normal_study_cvu(mu0: float, n: float, seed: int, n_draws: int = 4000,
                     **settings: object) -> dict:
    """CVU of the study on S = ``n_draws`` independent N(μ0, 1) draws (seed ``[7, seed]``),
    σ = 1, with ``CVUSettings(seed=seed, **settings)``: the estimate, ``cvu_mcse``,
    ``cvu_draws_se``, ``cvu_se``, the estimator used and EVSI under the draws' own prior."""
    delta = mu0 + np.random.default_rng([7, seed]).standard_normal(n_draws)
    se = 1.0 / np.sqrt(n)
    gain = np.stack([delta, np.zeros_like(delta)], -1)
    exp = Experiment(next_gain=gain,
                     simulate=lambda r, idx: delta[idx] + se * r.standard_normal(len(idx)),
                     loglik=lambda y: stats.norm.logpdf(y[:, None], delta[None, :], se))
    problem = CVUProblem(gain, {"o": exp}, ["a", "o"], np.zeros((2, 1)), np.ones(1),
                         lambda b: np.zeros(1), Mean(),
                         settings=CVUSettings(seed=seed, **settings))
    res = continuation_value(problem).sel(candidate="o")
    return {"cvu": float(res["cvu"]), "mcse": float(res["cvu_mcse"]),
            "draws_se": float(res["cvu_draws_se"]), "se": float(res["cvu_se"]),
            "own": own_prior_evsi(delta, se), "method": res["cvu_method"].item()}
