"""CVU's estimators behind one interface: ``estimate(problem, branch) -> Estimate``.

Each estimates E_Y[V(s^{m,Y})] of one candidate (its :class:`~belief.decision.cvu.problem.
Branch`) of a :class:`~belief.decision.cvu.problem.CVUProblem`:

- :class:`OneStep` — V = G0 with the estimator the settings and the weights call for (module
  :mod:`belief.decision.cvu.value`): no outcome (exact given the draws), PSIS with control
  variates and refits (:mod:`belief.decision.cvu.psis`), or regression on the simulated
  outcome (:mod:`belief.decision.cvu.regression`) when forced, when the experiment has no
  likelihood, or when the weights cannot be trusted;
- :class:`Lookahead` — V the two-step look-ahead or the greedy rollout
  (:mod:`belief.decision.cvu.lookahead`), importance-weighted or by nested regression
  (:mod:`belief.decision.cvu.lookahead_regression`), labelled after the one-step estimate it
  continues.

The channel split (:func:`split_by_channel`) runs :class:`OneStep` on the branch with channels
removed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from belief.decision.cvu.channels import channel_split
from belief.decision.cvu.estimate import Estimate
from belief.decision.cvu.lookahead import Node, expected_continuation
from belief.decision.cvu.lookahead_regression import regression_continuation
from belief.decision.cvu.preposterior import NextState
from belief.decision.cvu.problem import Branch, CVUProblem, influence_of_winner
from belief.decision.cvu.psis import DrawsBootstrap, Outcomes, PSISOptions, importance_estimate
from belief.decision.cvu.regression import regression_estimate
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment

__all__ = ["ESTIMATOR_ERRORS", "Estimator", "Lookahead", "OneStep", "split_by_channel"]

#: what an estimator may raise on bad draws: the candidate's CVU then fails, with the reason
ESTIMATOR_ERRORS = (np.linalg.LinAlgError, FloatingPointError, ValueError)


class Estimator(Protocol):
    """E_Y[V(s^{m,Y})] of one candidate of a CVU problem."""

    def estimate(self, problem: CVUProblem, branch: Branch) -> Estimate:
        """The estimate of ``branch``'s candidate (its value, Monte Carlo error, method)."""
        ...


def _no_outcome(problem: CVUProblem, nxt: NextState) -> Estimate:
    """An experiment no model predicts: E_Y[G0] is G0 of the state after m, exact."""
    phi = problem.functional(nxt.gain.T)
    value = float(nxt.g0(phi[None, :])[0])
    infl = influence_of_winner(problem.functional, nxt.gain, phi, nxt.c_lambda, nxt.feasible)
    return Estimate(value, 0.0, "no outcome", "no model predicts this experiment's "
                    "outcome: budget, λ, candidate set and policy change only (a model "
                    "update's order effects enter through next_gain; no safety gate "
                    "can change: belief.decision.cvu.safety)",
                    if_draws=infl, if_noise=np.zeros_like(infl))


@dataclass(frozen=True)
class OneStep:
    """E_Y[G0(s^{m,Y})] with the estimator the settings and the weights call for.

    Attributes
    ----------
    settings : CVUSettings, optional
        Settings of this estimate (the channel split's); default the problem's.
    draws_influence : bool
        Estimate the error of the draws (False: the channel split's estimates).
    bootstrap : bool
        Bootstrap the error of the draws where G0(s^∅) is a near tie, or where the
        influence values are too noisy for their error (:func:`~belief.decision.cvu.psis.
        noisy_influence`).
    """

    settings: CVUSettings | None = None
    draws_influence: bool = True
    bootstrap: bool = True

    def estimate(self, problem: CVUProblem, branch: Branch) -> Estimate:
        """The one-step estimate of ``branch`` (module docstring); ``problem.noise_z``: the
        PSIS estimate's noise-bias correction, and the regression estimate's with
        ``settings.regression_noise_correction`` (its Monte Carlo error is added to the
        MCSE); ``branch.memo``, ``branch.fits``: the weights and regression fits of its
        outcomes shared with other estimates on them."""
        exp, nxt = branch.experiment, branch.next_state
        settings = self.settings or problem.settings
        if exp.simulate is None:
            return _no_outcome(problem, nxt)
        rngs = branch.streams()
        regression = {"replicates": settings.regression_replicates,
                      "noise_z": (problem.noise_z if settings.regression_noise_correction
                                  else None),
                      "memo": branch.fits}
        if settings.estimator == "regression" or exp.loglik is None:
            why = ("regression forced by the settings" if settings.estimator == "regression"
                   else "the experiment has no likelihood to reweight by")
            return regression_estimate(nxt, problem.functional, exp.simulate, rngs[1],
                                       reason=why, **regression)
        y = np.asarray(exp.simulate(rngs[0], problem.outcome_index))
        if y.dtype.kind in "fc" and not np.isfinite(y).all():
            return Estimate.failed("the simulated outcomes are not finite")
        # the block bootstrap of the draws at a near tie of G0(s^∅), or where the influence
        # values are too noisy for their error (psis.noisy_influence)
        est, reason, diag = importance_estimate(
            nxt, problem.functional, Outcomes(y, exp.loglik, exp.refit),
            PSISOptions.from_settings(settings, draws_influence=self.draws_influence,
                                      defer_refits=problem.defer_refits),
            noise_z=problem.noise_z, memo=branch.memo,
            bootstrap=DrawsBootstrap(problem.g0_null_weighted, rngs[2],
                                     None if problem.tie[0] else problem.if_null)
            if self.bootstrap else None)
        if est is not None:
            return est
        est = regression_estimate(nxt, problem.functional, exp.simulate, rngs[1],
                                  reason=reason, **regression)
        est.pareto_k, est.bad_share, est.ess = diag["pareto_k"], diag["bad_share"], diag["ess"]
        return est


@dataclass(frozen=True)
class Lookahead:
    """E_Y[V(s^{m,Y})] for the problem's non-myopic continuation V, continuing a one-step
    estimate ``first`` of the same candidate (whose method and diagnostics it keeps).

    Attributes
    ----------
    first : Estimate
        The candidate's one-step estimate.
    by_regression : bool
        Nested regression (two steps) instead of importance weights.
    """

    first: Estimate
    by_regression: bool = False

    def estimate(self, problem: CVUProblem, branch: Branch) -> Estimate:
        """The continuation's estimate; ``extra`` holds its ``bias_bound`` and
        ``inner_bad_share``."""
        kind, depth, est = problem.kind, problem.depth, self.first
        nxt = branch.next_state
        after = Node(nxt.gain, branch.budget, branch.available)
        if self.by_regression:
            ce = regression_continuation(
                problem.context, branch.experiment, after, kind, seed=problem.settings.seed,
                column=branch.column, replicates=problem.settings.regression_replicates)
        else:
            ce = expected_continuation(
                problem.context, branch.experiment, after, kind, depth,
                problem.settings.inner_outcomes, problem.outcome_index,
                branch.continuation_streams())
        out = Estimate(ce.value, ce.mcse,
                       f"{est.method}+{kind}{'-by-regression' if self.by_regression else ''}",
                       f"{est.reason}; {kind} (depth "
                       f"{depth}): the error of the draws is not estimated, "
                       "cvu_se is the outcome error only", n_outcomes=est.n_outcomes,
                       pareto_k=est.pareto_k, bad_share=est.bad_share,
                       n_refits=est.n_refits, ess=est.ess, cv_gain=est.cv_gain)
        out.extra.update(bias_bound=ce.bias_bound, inner_bad_share=ce.inner_bad_share)
        return out


def split_by_channel(problem: CVUProblem, branch: Branch, full: Estimate) -> dict[str, float]:
    """The one-step CVU's split by channel (:mod:`belief.decision.cvu.channels`), on the
    CVU's outcomes and, through the branch's memos, their weights or regression fits; no
    error of the draws.  Empty when an estimate fails."""

    def estimate(exp: Experiment, nxt: NextState, settings: CVUSettings) -> Estimate:
        part = replace(branch, experiment=exp, next_state=nxt)
        return OneStep(settings, draws_influence=False, bootstrap=False).estimate(problem,
                                                                                  part)

    try:
        return channel_split(branch.experiment, branch.next_state, full, problem.g0_null,
                             estimate, problem.settings, problem.fixed_feasible(branch))
    except ESTIMATOR_ERRORS:
        return {}
