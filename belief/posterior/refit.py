"""Exact refits on simulated outcomes: the slow, correct fallback of CVU where k̂ > 0.7.

For an outcome Y of candidate m, the evidence is extended by the row(s) m's experiment would
have produced, the gains model is re-sampled (compiled model re-used), and the next-gain draws
are read at the state after m — the same quantities the importance-weighted estimate targets.
A refit reads only the posterior variables the decision draws need (``fit(light=True)``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import numpy as np
import pandas as pd

from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.posterior.fitter import BeliefFitter
from models.gains import gain_from_draws

__all__ = ["exact_refit", "refit_seed", "simulated_rows"]


class AtStep(Protocol):
    """Where the refit is anchored: the step t and the policy π_t (a decision ``State``)."""

    step: int
    policy: str


def simulated_rows(candidates: CandidateSet, state: AtStep, m: str, y: np.ndarray,
                   trials: int) -> tuple[dict[str, pd.DataFrame], str]:
    """Evidence rows of m's experiment with outcome ``y``, and the policy afterwards."""
    c = candidates[m]
    base = {"step": state.step, "policy": state.policy,
            "eval_protocol": candidates.eval_protocol}
    if c.changes_policy:
        new_policy = f"{state.policy}+{m}~sim"
        row = {**base, "candidate": m, "control_successes": int(y[0]), "control_trials": trials,
               "treated_successes": int(y[1]), "treated_trials": trials,
               "treated_policy": new_policy}
        return {"paired": pd.DataFrame([row])}, new_policy
    rows = [{**base, "candidate": t, "estimate": float(y[k]), "se": float(c.measurement_se),
             "source": m} for k, t in enumerate(c.informs)]
    out = {"gain_estimates": pd.DataFrame(rows)}
    if c.measures:  # the outcome's columns after the informed candidates' (experiments.py)
        n = len(c.informs)
        out["direction_estimates"] = pd.DataFrame([
            {"step": state.step, "candidate": m, "direction": k, "estimate": float(y[n + i]),
             "se": float(c.measurement_se), "policy": state.policy}
            for i, k in enumerate(c.measures)])
    return out, state.policy


def exact_refit(fitter: BeliefFitter, evidence: Evidence, state: AtStep, trials: int = 100,
                seed: int = 0, draws: int | None = None
                ) -> Callable[[str, np.ndarray], np.ndarray]:
    """A ``refit(m, y) → next-gain draws (S, C)`` closure for
    :func:`belief.decision.cvu.cvu_for_state`.

    ``draws`` (default: the fitter's) sets draws and tuning steps per chain of each refit.
    A refit's seeds are a function of ``seed``, m and Y (:func:`refit_seed`), not of the
    order of the calls: the refit of an outcome is the same whichever other outcomes or
    candidates are refit (:mod:`belief.decision.cvu.decisive` refits only some).
    """
    candidates = fitter.candidates
    s = fitter.settings
    n_draws = draws or s.draws

    def refit(m: str, y: np.ndarray) -> np.ndarray:
        y = np.atleast_1d(y)
        rows, policy = simulated_rows(candidates, state, m, y, trials)
        ev = evidence.append(**rows)
        key = refit_seed(seed, m, y)
        tables = fitter.gains_tables(ev)  # stacked with the past campaigns, if any
        paired = tables.pop("paired")
        idata = fitter.gains.fit(paired, policy, **tables, draws=n_draws,
                                 tune=max(n_draws, 200),
                                 chains=s.chains, seed=key, light=True)
        draws = fitter.gains.decision_draws(idata, policy, np.random.default_rng([seed, key]))
        return gain_from_draws(draws).reindex(candidate=candidates.ids, fill_value=0.0).values

    return refit


def refit_seed(seed: int, m: str, y: np.ndarray) -> int:
    """The sampler seed of the refit of candidate m on outcome ``y``: a 32-bit integer from
    ``seed``, m and the outcome's values (CRC-32 of each)."""
    y = np.ascontiguousarray(np.asarray(y, float))
    entropy = [int(seed), zlib.crc32(m.encode()), zlib.crc32(y.tobytes())]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])
