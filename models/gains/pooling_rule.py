"""How far one candidate's evidence moves the others: the pooling rule of the gains model,
computed exactly (:mod:`models.gains`, "What one lens's evidence does to the others").

The candidate effects are a sum of independent normal components given the scales
τ = (τ_lens, τ_method, τ_candidate, τ_exec)::

    θ_j = μ_0 + τ_lens z_{lens(j)} + τ_method z_{method(j)} + τ_candidate z_j,
    μ_0 ~ Normal(μ̄, σ_0²)      (μ̄ = effect_mu_mu, σ_0 = effect_mu_sigma)

and a summary-level estimate y of candidate m from a policy where m has not run (k = 0) is
y ~ Normal(θ_m, se² + τ_exec²).  When y is the only evidence about any θ, given τ::

    E[θ_j | y, τ] = μ̄ + w_j(τ) (y − μ̄),     w_j(τ) = C_j(τ) / V(τ),
    V(τ)   = σ_0² + τ_lens² + τ_method² + τ_candidate² + se² + τ_exec²   (y's prior variance)
    C_j(τ) = σ_0² + [lens(j) = lens(m)] τ_lens² + [method(j) = method(m)] τ_method²

(the covariance of θ_j and y: only the components they share), and, the scales being learned,
E[θ_j | y] = μ̄ + (y − μ̄) E[w_j(τ) | y] with p(τ | y) ∝ p(τ) Normal(y; μ̄, V(τ)).  So a
candidate of *another* lens moves by the share σ_0² / V of the surprise y − μ̄ only — what
the global mean μ_0 is a priori of a candidate's effect — and a surprising y is explained
mostly by large scales (it lowers E[w | y]); a candidate of the same lens moves by
(σ_0² + τ_lens²)/V, one of the same method by (σ_0² + τ_lens² + τ_method²)/V: always more.
With one lens observed, τ_lens is identified only through this one y, so its prior governs
the transfer.

:func:`pooling_weights` computes E[w_j(τ) | y] by importance sampling from the scale priors
(self-normalised, weights Normal(y; μ̄, V(τ))); :func:`transfer_bound` the largest move of
another lens's θ over every value of y.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.gains.spec import GainsPriors
from models.priors import ScalePrior

__all__ = ["PoolingWeights", "pooling_weights", "scale_prior_draws", "transfer_bound"]

SHARES = ("other_lens", "same_lens", "same_method")
"""The relations of a candidate j to the measured candidate m, by what θ_j shares with θ_m:
μ_0 only; μ_0 and the lens effect; μ_0, the lens and the method effects."""


def scale_prior_draws(prior: ScalePrior, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` independent draws of a scale prior τ (HalfNormal, HalfStudentT, HalfCauchy or
    Exponential, as :meth:`models.priors.ScalePrior.rv` defines them)."""
    p = prior.params
    if prior.family == "half_normal":
        return p["sigma"] * np.abs(rng.standard_normal(n))
    if prior.family == "half_student_t":
        return p["sigma"] * np.abs(rng.standard_t(p["nu"], n))
    if prior.family == "half_cauchy":
        return p["beta"] * np.abs(rng.standard_cauchy(n))
    if prior.family == "exponential":
        return rng.exponential(1.0 / p["lam"], n)
    raise ValueError(f"unknown scale family {prior.family!r}")


@dataclass(frozen=True)
class PoolingWeights:
    """E[w_j(τ) | y] for each relation of :data:`SHARES` (module docstring), with their Monte
    Carlo standard errors and the importance sample's effective size.

    Attributes
    ----------
    estimate, se : float
        The estimate y of the measured candidate and its standard error.
    weight, mcse : dict of str to float
        E[w_j | y] and its Monte Carlo s.e. per relation.
    ess : float
        Effective sample size (Σ w)² / Σ w² of the importance weights.
    """

    estimate: float
    se: float
    weight: dict[str, float]
    mcse: dict[str, float]
    ess: float

    def shift(self, relation: str, mu: float) -> float:
        """E[θ_j | y] − μ̄ for a candidate j in ``relation`` to the measured one."""
        return (self.estimate - mu) * self.weight[relation]


def _scales(priors: GainsPriors, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {name: scale_prior_draws(getattr(priors, f"tau_{name}"), rng, n) ** 2
            for name in ("lens", "method", "candidate", "exec")}


def pooling_weights(priors: GainsPriors, estimate: float, se: float, *, draws: int = 400_000,
                    seed: int = 0) -> PoolingWeights:
    """E[w_j(τ) | y] of the module docstring for one estimate y (± se) of a candidate m
    that has not run, when it is the only evidence about any candidate effect.

    Parameters
    ----------
    priors : GainsPriors
    estimate, se : float
        The estimate y (logit gain) and its standard error.
    draws : int
        Importance-sampling draws of the four scales from their priors.
    seed : int

    Returns
    -------
    PoolingWeights
    """
    rng = np.random.default_rng(seed)
    t2 = _scales(priors, rng, draws)
    s0 = priors.effect_mu_sigma**2
    v = s0 + t2["lens"] + t2["method"] + t2["candidate"] + se**2 + t2["exec"]
    logw = -0.5 * (estimate - priors.effect_mu_mu) ** 2 / v - 0.5 * np.log(v)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    shares = {"other_lens": s0 / v, "same_lens": (s0 + t2["lens"]) / v,
              "same_method": (s0 + t2["lens"] + t2["method"]) / v}
    weight, mcse = {}, {}
    for name, x in shares.items():
        m = float((w * x).sum())
        weight[name] = m
        mcse[name] = float(np.sqrt((w**2 * (x - m) ** 2).sum()))  # self-normalised IS s.e.
    return PoolingWeights(float(estimate), float(se), weight, mcse,
                          float(1.0 / (w**2).sum()))


def transfer_bound(priors: GainsPriors, se: float, *, span: float = 20.0, points: int = 801,
                   draws: int = 200_000, seed: int = 0) -> tuple[float, float]:
    """The largest move of another lens's θ, sup_y |y − μ̄| E[σ_0²/V(τ) | y], over a grid of
    y ∈ μ̄ ± ``span`` (common random numbers), and the y where it occurs.

    The scales being learned makes it finite: a y far from μ̄ is explained by large scales,
    so E[σ_0²/V | y] falls faster than |y − μ̄| grows (for the heavy-tailed default
    HalfStudentT(3) scales the move tends to 0 as |y| grows).
    """
    rng = np.random.default_rng(seed)
    t2 = _scales(priors, rng, draws)
    s0 = priors.effect_mu_sigma**2
    v = s0 + t2["lens"] + t2["method"] + t2["candidate"] + se**2 + t2["exec"]
    best, at = 0.0, priors.effect_mu_mu
    for d in np.linspace(-span, span, points):
        logw = -0.5 * d**2 / v - 0.5 * np.log(v)
        w = np.exp(logw - logw.max())
        move = abs(d) * float((w * (s0 / v)).sum() / w.sum())
        if move > best:
            best, at = move, priors.effect_mu_mu + d
    return best, float(at)
