"""The experiments of the candidates, for CVU: what executing m once would show.

Built from the models' joint draws kept in q_t (the gains model's ``gains_*`` variables): a
paired evaluation for an adaptation, a summary-level gain estimate for a diagnosis that
``informs`` adaptations, nothing for the others.  The decision layer
(:mod:`belief.decision.cvu`) consumes :class:`Experiment` objects and knows
nothing about the models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet

__all__ = ["Experiment", "experiments_from_belief", "safety_outcome"]


@dataclass(frozen=True)
class Experiment:
    """What executing m once would show, for the CVU engine.

    Attributes
    ----------
    next_gain : ndarray (S, C)
        Joint draws of every candidate's predictive gain in the state after m (aligned with the
        belief's samples; equal to the current gains when m does not change the policy).
    simulate : callable (rng, idx) → Y, optional
        Outcomes of m's experiment under the draws ``idx`` (shape (J, ...)); None when m has no
        outcome any model predicts (then only budget, λ, candidate set and policy change).
    loglik : callable Y → ndarray (J, S), optional
        log p(Y_j | θ_i) for every outcome j and joint draw i.
    refit : callable Y_j → ndarray (S', C), optional
        Exact next-gain draws after refitting the models on the evidence plus Y_j.
    after : callable gains (S, C) → gains (S, C), optional
        The gains after executing m from *any* state with the given gain draws (used by the
        non-myopic continuations of CVU for the second and later steps); None: m's change at
        s_t is added, ``gains + next_gain − gains at s_t``.
    safe_next : callable Y → bool ndarray (J, C), optional
        The safety gate M^safe(s_{t+1}) after each outcome (the execution-risk channel of
        CVU, :mod:`belief.decision.cvu.safety`); None: the gate of s_t is held fixed.
    safety_note : str
        What the execution-risk channel does for this experiment (empty without one).
    next_gain_no_order : ndarray (S, C), optional
        ``next_gain`` without the order effects γ_{m→·} that m creates on later candidates
        (m left out of the history); None when m creates none (then identical to
        ``next_gain``).  Used only to split CVU by channel
        (:mod:`belief.decision.cvu.channels`).
    then : callable () → mapping candidate id → Experiment, optional
        Every candidate's experiment in the state after m (on the same samples, so importance
        weights carry over; its ``next_gain`` columns are the gains after m then c), built
        lazily and cached; those experiments have their own ``then``.  The non-myopic
        continuations of CVU use it for the second and later steps
        (:mod:`belief.decision.cvu.lookahead`); None: c's experiment at s_t and ``after``.
    """

    next_gain: np.ndarray
    simulate: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None
    loglik: Callable[[np.ndarray], np.ndarray] | None = None
    refit: Callable[[np.ndarray], np.ndarray] | None = None
    after: Callable[[np.ndarray], np.ndarray] | None = None
    safe_next: Callable[[np.ndarray], np.ndarray] | None = None
    safety_note: str = ""
    next_gain_no_order: np.ndarray | None = None
    then: Callable[[], Mapping[str, Experiment]] | None = None


def experiments_from_belief(belief: xr.Dataset, candidates: CandidateSet, trials: int = 100,
                            refit: Callable[[str, np.ndarray], np.ndarray] | None = None,
                            seed: int = 0) -> dict[str, Experiment]:
    """The experiment of every candidate, from the gains model's joint draws kept in q_t.

    - adaptation m: a paired evaluation (``trials`` per arm) of π versus π' = π + m; the next
      gains are those from π' (:func:`models.gains.next_gain`);
    - diagnosis informing adaptations: one logit-gain estimate per informed candidate with the
      diagnosis' ``measurement_se``; a diagnosis that measures directions (``targets`` with
      ``measurement_se``, q_t holding ``gains_xi``): one measurement y_k ~ N(ξ_k, se²) per
      direction after those (:func:`models.gains.simulate_direction`); the policy is
      unchanged;
    - model update: no predicted outcome, but it joins the history, so every later candidate's
      gain carries its order effects γ_{m→·} (:func:`models.gains.next_gain`, ``adapts``
      False): its CVU is what that shift is worth;
    - anything else: no predicted outcome (budget, λ and the candidate set still change).

    With order effects in q_t, an adaptation or model update that is an actor not yet in the
    history also gets ``next_gain_no_order`` (its next gains without γ_{m→·}), for the split
    of CVU by channel.

    Every experiment's ``then`` gives the experiments of the state after it, built the same
    way from :func:`models.gains.state_after` (m's policy change, repeat count and order
    effects; lazily, cached, recursively), without refit hook or channel split (a step that
    leaves the draws unchanged — a diagnosis, or an actor already in the history — returns
    these depth-0 experiments, hook included; the look-ahead reads neither).  The fresh
    run-to-run noise of the state d executions ahead is drawn from ``default_rng([seed, d])``:
    the same for every path of the same depth (common random numbers across candidates), and
    the same for every CVU seed (the CVU engine passes none): like ``z_now``/``z_next`` it is
    a fixed part of the draws, not re-drawn by ``CVUSettings.seed``, and ``cvu_mcse`` does not
    count it.
    """
    from models import gains

    if "gains_eta" not in belief:
        raise InputError("belief", "CVU needs the gains model's joint draws (gains_*) in q_t; "
                                   "build the belief with BeliefFitter")
    draws = belief[gains.decision_vars(belief)]
    return _experiments(draws, candidates, trials, refit, seed, 0)


def _experiments(draws: xr.Dataset, candidates: CandidateSet, trials: int,
                 refit: Callable[[str, np.ndarray], np.ndarray] | None, seed: int,
                 depth: int) -> dict[str, Experiment]:
    """The experiments of every candidate from the draws of a state ``depth`` executions
    ahead of s_t (:func:`experiments_from_belief`; the channel split only at depth 0)."""
    from models import gains

    gain_now = gains.gain_from_draws(draws).values
    exps: dict[str, Experiment] = {}
    order = "gains_gamma" in draws and depth == 0
    built: dict[str, dict[str, Experiment]] = {}

    def then(m: str, adapts: bool) -> Callable[[], dict[str, Experiment]]:
        """The experiments of the state after m, built once on first use."""
        def build() -> dict[str, Experiment]:
            if m not in built:
                nxt = gains.state_after(draws, m, adapts, [seed, depth + 1])
                built[m] = (exps if nxt is draws else
                            _experiments(nxt, candidates, trials, None, seed, depth + 1))
            return built[m]
        return build

    def no_order(m: str, adapts: bool, nxt: np.ndarray) -> np.ndarray | None:
        """m's next gains without its order effects, or None when they are the same."""
        if not order:
            return None
        g = gains.next_gain(draws, m, adapts=adapts, order=False).values
        return None if np.array_equal(g, nxt) else g

    for c in candidates:
        do_refit = (lambda y, m=c.id: refit(m, y)) if refit is not None else None
        if c.changes_policy:
            nxt = gains.next_gain(draws, c.id, adapts=True).values
            exps[c.id] = Experiment(
                next_gain=nxt,
                simulate=lambda rng, idx, m=c.id: gains.simulate(draws, m, rng, idx, trials),
                loglik=lambda y, m=c.id: gains.loglik(draws, m, y, trials),
                refit=do_refit, next_gain_no_order=no_order(c.id, True, nxt),
                then=then(c.id, True))
        elif c.informs or (c.measures and "gains_xi" in draws):
            def sim(rng, idx, c=c):
                cols = [gains.simulate_estimate(draws, t, c.measurement_se, rng, idx)[:, None]
                        for t in c.informs]
                if c.measures:
                    cols.append(gains.simulate_direction(draws, c.measures, c.measurement_se,
                                                         rng, idx))
                return np.concatenate(cols, -1)

            def ll(y, c=c):
                n = len(c.informs)
                out = sum(gains.loglik_estimate(draws, t, c.measurement_se, y[:, k])
                          for k, t in enumerate(c.informs))
                if c.measures:
                    out = out + gains.loglik_direction(draws, c.measures, c.measurement_se,
                                                       y[:, n:])
                return out

            exps[c.id] = Experiment(next_gain=gain_now, simulate=sim, loglik=ll, refit=do_refit,
                                    then=then(c.id, False))
        elif c.role == "model_update":  # acts through the order effects it creates
            nxt = gains.next_gain(draws, c.id, adapts=False).values
            exps[c.id] = Experiment(next_gain=nxt,
                                    next_gain_no_order=no_order(c.id, False, nxt),
                                    then=then(c.id, False))
        else:
            exps[c.id] = Experiment(next_gain=gain_now, then=then(c.id, False))
    return exps


def safety_outcome(p_draws: np.ndarray, runs: int
                   ) -> tuple[Callable[[np.random.Generator, np.ndarray], np.ndarray],
                              Callable[[np.ndarray], np.ndarray]]:
    """The unsafe count of ``runs`` safety trials of one execution-risk cell, for CVU.

    simulate(rng, idx) = y_j ~ Binomial(runs, p_{idx_j}) (:func:`models.exec_risk.simulate`),
    loglik(y) = log Binomial(y_j; runs, p_i), (J, S) (:func:`models.exec_risk.loglik`), with
    ``p_draws`` (S,) the joint draws of the cell's p_unsafe in q_t.
    """
    from models import exec_risk

    p = np.asarray(p_draws, float)
    return (lambda rng, idx: exec_risk.simulate(p[np.asarray(idx)], runs, rng),
            lambda y: exec_risk.loglik(p, runs, np.asarray(y)))
