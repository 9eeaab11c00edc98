"""CVU, the continuation value of a candidate, by preposterior simulation (:mod:`.value`)."""

from belief.decision.cvu.value import (
    CVUSettings,
    Experiment,
    blas_threads,
    continuation_value,
    cvu_for_state,
    psis,
)

__all__ = ["CVUSettings", "Experiment", "blas_threads", "continuation_value", "cvu_for_state",
           "psis"]
