"""The priors of the gains model (:class:`GainsPriors`) and the allowed values of its settings.

The model itself is stated in :mod:`models.gains`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from belief.errors import InputError
from models.priors import (
    ScalePrior,
    check_priors,
    priors_as_dict,
)

__all__ = [
    "GAMMA_PRIORS",
    "LEVELS",
    "GainsPriors",
]


LEVELS = ("lens", "method", "candidate")
GAMMA_PRIORS = ("normal", "laplace")
"""The allowed laws of an order effect's own deviation e (``GainsPriors.gamma_prior``)."""


@dataclass(frozen=True)
class GainsPriors:
    """Priors of the gains model (logit scale).

    Attributes
    ----------
    baseline_mu, baseline_sigma : float
        Normal prior of a root policy's logit success probability.
    effect_mu_mu, effect_mu_sigma : float
        Normal prior of the global mean logit gain μ_0 (the default expects interventions to
        help a little: mean 0.2 on the logit scale, about +4 points at J = 0.3).
    tau_lens, tau_method, tau_candidate : ScalePrior
        Priors of the pooling scales (a number v means HalfStudentT(ν = 3, σ = v)).
    tau_exec : ScalePrior
        Prior of the run-to-run scale (a number v means HalfNormal(v)).
    repeat_alpha, repeat_beta : float
        Beta prior of the diminishing-returns factor ρ (mean 0.75 by default).
    order_effects : bool
        Whether the step mean carries the order effects γ_{a→m} (:mod:`models.gains`, "Order
        effects").  On by default; ``GainsPriors(order_effects=False)`` or
        ``[priors.gains] order_effects = false`` gives the model without them.
    gamma_group_sd, gamma_sd : float
        Default prior of an order effect without a stated prior: γ_{a→m} = g_{M(a)→M(m)} + e,
        g ~ Normal(0, gamma_group_sd) shared by the candidate pairs of a method pair (when it
        holds ≥ 2 of them), e ~ Normal(0, gamma_sd): sd ≈ 0.255 logit, a shrinkage prior
        centred at "no interaction" (:mod:`models.gains`: why not a heavy-tailed one).
    gamma_prior : {"normal", "laplace"}
        The law of e: Normal(0, gamma_sd) (default) or the sparse ``"laplace"``,
        e ~ Laplace(0, gamma_sd/√2) — the same s.d., peaked at "no interaction", exponential
        tails (:mod:`models.gains`, "The sparse option").  Stated pairs keep their stated
        normal; ignored when ``order_effects`` is false.
    direction_sd : float
        Prior sd of a direction effect ξ_k ~ Normal(0, direction_sd) (:mod:`models.gains`,
        "Direction effects"; only directions a diagnosis measures have one).
    """

    baseline_mu: float = 0.0
    baseline_sigma: float = 1.5
    effect_mu_mu: float = 0.2
    effect_mu_sigma: float = 0.4
    tau_lens: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    tau_method: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    tau_candidate: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    tau_exec: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.2))
    repeat_alpha: float = 6.0
    repeat_beta: float = 2.0
    order_effects: bool = True
    gamma_group_sd: float = 0.05
    gamma_sd: float = 0.25
    gamma_prior: str = "normal"
    direction_sd: float = 0.2

    SCALES: ClassVar[dict[str, str]] = {
        "tau_lens": "half_student_t", "tau_method": "half_student_t",
        "tau_candidate": "half_student_t", "tau_exec": "half_normal"}

    def __post_init__(self) -> None:
        if not isinstance(self.order_effects, bool):
            raise InputError("GainsPriors", f"order_effects must be true or false, got "
                                            f"{self.order_effects!r}")
        if self.gamma_prior not in GAMMA_PRIORS:
            raise InputError("GainsPriors", f"gamma_prior must be one of {list(GAMMA_PRIORS)}, "
                                            f"got {self.gamma_prior!r}")
        check_priors(self, locations=("baseline_mu", "effect_mu_mu"), scales=self.SCALES,
                     skip=("order_effects", "gamma_prior"))

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)
