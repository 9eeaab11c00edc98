"""belief: a Bayesian belief-state engine for sim-to-real allocation under several budgets.

Data flows one way: evidence → models (PyMC posteriors) → belief state q_t (xarray) → decision.
Submodules are imported lazily so that ``import belief`` stays cheap (PyMC is loaded only when a
model is fitted).
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
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'belief' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
