"""CVU, the continuation value of a candidate, by preposterior simulation.

One problem (:class:`~belief.decision.cvu.problem.CVUProblem`: the state's draws, the
candidates, the settings, the feasibility and the simulated outcomes) goes in; the estimators
(:mod:`belief.decision.cvu.estimators`: PSIS with control variates and refits, regression,
the look-ahead and rollout continuations) score one candidate of it each, behind one
interface; :func:`continuation_value` assembles the dataset.  The modules:

- :mod:`.value` — CVU of every candidate (the entry points);
- :mod:`.problem` — the problem object and what every candidate's estimate shares;
- :mod:`.estimators` — the estimator interface and its implementations;
- :mod:`.psis`, :mod:`.importance`, :mod:`.preposterior` — PSIS weights, the control
  variates and the error of the draws;
- :mod:`.regression`, :mod:`.noise` — the regression estimator and the noise-bias correction;
- :mod:`.lookahead`, :mod:`.lookahead_regression` — the non-myopic continuations;
- :mod:`.channels`, :mod:`.safety`, :mod:`.decisive` — the split by channel, the
  execution-safety channel, deferred refits for the decisive candidates;
- :mod:`.estimate` — the estimate of one candidate.
"""

from belief.decision.cvu.problem import CVUProblem
from belief.decision.cvu.value import (
    CVUSettings,
    Experiment,
    Scoring,
    blas_threads,
    continuation_value,
    cvu_for_state,
)

__all__ = ["CVUProblem", "CVUSettings", "Experiment", "Scoring", "blas_threads",
           "continuation_value", "cvu_for_state"]
