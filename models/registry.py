"""The engine's models by name: each model's priors type, the field of
:class:`belief.posterior.fitter.BeliefFitter` that holds its priors, and how a belief file
written before the model's priors were stored reads them.  The workflow (the fit settings,
save/load checks, the fitter rebuilt for exact refits) iterates over :data:`MODELS` instead of
naming the models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from models.costs import CostPriors
from models.exec_risk import ExecRiskPriors
from models.gains import GainsPriors
from models.sensitivity import SensitivityPriors
from models.transfer import TransferPriors

__all__ = ["MODELS", "ModelEntry", "prior_classes"]


@dataclass(frozen=True)
class ModelEntry:
    """One model: ``name`` (its key in the fit settings' ``priors`` and the belief file's
    ``/posterior/<name>``), its ``priors`` type, the fitter's ``fitter_field`` holding them,
    and for older belief files ``optional`` (the file may store no priors for it: the type's
    defaults) and ``stored_defaults`` (values of fields a file may lack)."""

    name: str
    priors: type
    fitter_field: str
    optional: bool = False
    stored_defaults: Mapping[str, Any] = field(default_factory=dict)

    def stored_priors(self, stored: Mapping[str, Any]) -> Any:
        """The priors object from a belief file's ``priors`` setting (KeyError when a
        required model's entry is missing, TypeError when a field is not this version's)."""
        entry = stored.get(self.name, {}) if self.optional else stored[self.name]
        return self.priors(**{**self.stored_defaults, **entry})


MODELS: tuple[ModelEntry, ...] = (
    # beliefs written before the order effects have none (and store no flag)
    ModelEntry("gains", GainsPriors, "gains_priors", stored_defaults={"order_effects": False}),
    ModelEntry("exec_risk", ExecRiskPriors, "exec_risk_priors"),
    ModelEntry("transfer", TransferPriors, "transfer_priors"),
    ModelEntry("sensitivity", SensitivityPriors, "sensitivity_priors"),
    ModelEntry("costs", CostPriors, "cost_priors", optional=True),  # older beliefs: none
)


def prior_classes() -> dict[str, type]:
    """Model name → its priors type."""
    return {m.name: m.priors for m in MODELS}
