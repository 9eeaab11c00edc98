"""belief: a Bayesian belief-state engine for sim-to-real allocation under several budgets.

Data flows one way: evidence → models (PyMC posteriors) → belief state q_t (xarray) → decision.
Submodules are imported lazily so that ``import belief`` stays cheap (PyMC is loaded only when a
model is fitted).

From your own tables (details in :mod:`belief.workflow.belief_file`)::

    import belief

    fitted = belief.fit("evidence/", "candidates.toml")   # fit every model that has data
    fitted.save("belief.nc")                               # belief + posteriors + settings
    fitted = belief.load("belief.nc")                      # checked: version, settings, hashes
    decision = fitted.decide(functional="lcb:0.2")         # xarray.Dataset over candidate
    fitted.convergence()                                   # R-hat, ESS, divergences per model
    belief.write_report(fitted, decision, "report.html")

``belief.example_paths()`` gives the shipped example (evidence folder, candidate file).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # errors
    "InputError": "belief.errors",
    # inputs
    "Candidate": "belief.inputs.candidates",
    "CandidateSet": "belief.inputs.candidates",
    "load_candidates": "belief.inputs.candidate_file",
    "load_candidate_file": "belief.inputs.candidate_file",
    "make_budget": "belief.inputs.resources",
    "parse_budget": "belief.inputs.resources",
    "Evidence": "belief.inputs.evidence",
    "read_table": "belief.inputs.evidence",
    "read_evidence_dir": "belief.inputs.evidence_dir",
    "example_paths": "belief.inputs.example",
    # posterior
    "BeliefFitter": "belief.posterior.fitter",
    "FitSettings": "belief.posterior.fitter",
    "FittedBelief": "belief.workflow.fitted",
    "fit": "belief.workflow.fit",
    "load": "belief.workflow.belief_file",
    "save": "belief.workflow.belief_file",
    "check_file": "belief.workflow.belief_file",
    "decide_from": "belief.workflow.belief_file",
    # decision
    "State": "belief.decision.state",
    "decide": "belief.decision.engine",
    "decision_table": "belief.decision.engine",
    "Functional": "belief.decision.functionals",
    "parse_functional": "belief.decision.functional_registry",
    "FixedWeights": "belief.decision.weights",
    "ScarcityWeights": "belief.decision.weights",
    "SafetyGate": "belief.decision.safety",
    "CVUSettings": "belief.decision.settings",
    "DecisionSettings": "belief.decision.settings",
    "load_decision": "belief.decision.decision_file",
    "save_decision": "belief.decision.decision_file",
    # campaign
    "Campaign": "belief.campaign.loop",
    "CampaignSettings": "belief.campaign.loop",
    "SyntheticWorld": "belief.campaign.synthetic",
    "ManualWorld": "belief.campaign.manual",
    "replay": "belief.campaign.replay",
    # report
    "write_report": "belief.report.document",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'belief' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
