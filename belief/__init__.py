"""belief: a Bayesian belief-state engine for sim-to-real allocation under several budgets.

Data flows one way: evidence → models (PyMC posteriors) → belief state q_t (xarray) → decision.
Submodules are imported lazily so that ``import belief`` stays cheap (PyMC is loaded only when a
model is fitted).

From your own tables (details in :mod:`belief.api`)::

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
    "InputError": "belief.errors",
    "Candidate": "belief.candidates",
    "CandidateSet": "belief.candidates",
    "load_candidates": "belief.candidates",
    "make_budget": "belief.candidates",
    "parse_budget": "belief.candidates",
    "Evidence": "belief.evidence",
    "read_table": "belief.evidence",
    "FittedBelief": "belief.api",
    "fit": "belief.api",
    "load": "belief.api",
    "save": "belief.api",
    "decide_from": "belief.api",
    "read_evidence_dir": "belief.api",
    "write_report": "belief.report",
    "example_paths": "belief.example",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'belief' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
