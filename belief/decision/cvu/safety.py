"""CVU's execution-risk channel: an experiment's unsafe count moves the safety gate of s_{t+1}.

An experiment m that runs ``safety_runs`` = r safety trials of an execution-risk cell c (its
own, when m drives hardware; that of ``safety_test_of`` for a bench safety test, whose trials
are executions of c's controller with the same p_unsafe) adds to its outcome the unsafe count

    y ~ Binomial(r, p_c)   for every joint draw p_c of p_unsafe in q_t,

with log p(y | θ_i) = log Binomial(y; r, p_{c,i}) (:func:`models.exec_risk.loglik`).  The gate
of c in s_{t+1}^{m,Y} is recomputed from the updated evidence:

- ``anytime`` (the default) and ``clopper_pearson``: the same bound of the counts as the gate,
  UCB_{1−δ}(k + y, n + r) ≤ α_exec (n executions, k unsafe so far) — for ``anytime`` the
  confidence sequence of :func:`~belief.decision.safety.anytime_upper`, so a test's value
  counts the runs it really takes to open a gate that keeps its guarantee over every look;
- ``posterior``: the (1 − δ)-quantile of the p_c draws under the Pareto-smoothed weights
  ∝ Binomial(y; r, p_{c,i}) ≤ α_exec.  The execution-risk model is fitted apart from the gains
  model, so only the unsafe count carries information about p_c.

G0(s_{t+1}^{m,Y}) then maximises over the candidates feasible under that gate
(:class:`~belief.decision.cvu.preposterior.NextState` ``outcome_feasible``), so a bench test can
open a gated candidate and earn CVU > 0 from feasibility alone, and a hardware run can close
its own gate.  The channel is added only where the gate of c can change for some y ∈ {0..r}
(the bound is monotone in y, so y = 0 and y = r decide) and c can be feasible in s_{t+1}
(still available and affordable after m); every other experiment is left untouched, so its
CVU is bit-for-bit the fixed-gate value.  Not modelled: the channel in the non-myopic
continuations (``CVUSettings.continuation`` other than ``one_step`` hold the gate of s_t
after the first step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from belief.decision.cvu.importance import psis_weights
from belief.decision.feasibility import BudgetRule, Feasibility
from belief.decision.functionals import lcb
from belief.decision.safety import SafetyGate
from belief.inputs.candidates import CandidateSet
from belief.posterior.experiments import Experiment, safety_outcome

__all__ = ["next_gate", "with_safety_channel", "with_safety_channels"]


def next_gate(gate: SafetyGate, executions: int, unsafe: int, runs: int,
              p_draws: np.ndarray | None) -> np.ndarray:
    """The deciding bound of the cell in s_{t+1} after y = 0..runs unsafe outcomes, (runs + 1,).

    Anytime or Clopper–Pearson: the gate's bound UCB_{1−δ}(k + y, n + r)
    (:meth:`SafetyGate.count_bound`); posterior: the weighted (1 − δ)-quantile of the p draws
    with PSIS-smoothed weights ∝ Binomial(y; r, p_i)."""
    y = np.arange(runs + 1)
    if gate.method != "posterior":
        return gate.count_bound(unsafe + y, executions + runs)
    from models.exec_risk import loglik  # imported here: a decision needs no scipy.stats

    p = np.asarray(p_draws, float)
    smooth, _, _, _ = psis_weights(loglik(p, runs, y))
    return lcb(np.broadcast_to(p, smooth.shape), 1.0 - gate.delta, smooth)


def with_safety_channel(exp: Experiment, cell: int, runs: int, p_draws: np.ndarray,
                        safe_by_y: np.ndarray, safe_now: np.ndarray,
                        note: str) -> Experiment:
    """``exp`` with the unsafe count y of ``runs`` trials of ``cell`` appended to its outcome.

    The outcome becomes (J, K + 1) floats: the K flattened values of ``exp``'s own outcome and
    y.  Both come from one stream, y first, so the own outcome's draws are not those ``exp``
    alone would give for the same seed (they have the same distribution, and the channel-split
    estimates share them: :mod:`belief.decision.cvu.channels`); the log-likelihood is the
    sum of both; an exact refit gets the gains part; ``safe_next`` maps y to M^safe(s_{t+1})
    (``safe_now`` with the cell's entry ``safe_by_y[y]``)."""
    sim_y, ll_y = safety_outcome(p_draws, runs)
    meta: dict = {}

    def split(y: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        y = np.asarray(y)
        ys = np.rint(y[:, -1]).astype(int)
        if exp.simulate is None:
            return None, ys
        yg = y[:, :-1].reshape((y.shape[0], *meta["shape"])).astype(meta["dtype"])
        return yg, ys

    def simulate(rng, idx):
        ys = sim_y(rng, idx).astype(float)[:, None]
        if exp.simulate is None:
            return ys
        yg = np.asarray(exp.simulate(rng, idx))
        meta["shape"], meta["dtype"] = yg.shape[1:], yg.dtype
        return np.concatenate([yg.reshape(yg.shape[0], -1).astype(float), ys], axis=1)

    def loglik(y):
        yg, ys = split(y)
        out = ll_y(ys)
        return out if yg is None else out + np.asarray(exp.loglik(yg), float)

    def safe_next(y):
        ys = split(y)[1]
        mask = np.tile(np.asarray(safe_now, bool), (ys.size, 1))
        mask[:, cell] = safe_by_y[ys]
        return mask

    refit = None
    if exp.refit is not None:
        def refit(y):
            return exp.refit(split(np.asarray(y)[None, :])[0][0])
    return replace(exp, simulate=simulate,
                   loglik=loglik if (exp.simulate is None or exp.loglik is not None) else None,
                   refit=refit, safe_next=safe_next, safety_note=note)


def with_safety_channels(experiments: Mapping[str, Experiment], belief,
                         candidates: CandidateSet, gate: SafetyGate, feas: Feasibility,
                         costs: np.ndarray, budget: np.ndarray,
                         within_budget: Callable[[np.ndarray], np.ndarray] | None = None
                         ) -> dict[str, Experiment]:
    """Add the execution-risk channel to every experiment whose outcome can change a gate in
    s_{t+1} (module docstring); the others are returned as they are.

    Needs ``p_unsafe`` draws in q_t (the predictive of y); without them no channel is added.
    ``within_budget``: M^budget at a budget (the decision's rule,
    :class:`belief.decision.feasibility.BudgetRule`; default :func:`affordable` on ``costs``)."""
    out = dict(experiments)
    within_budget = within_budget or BudgetRule(costs)
    if "p_unsafe" not in belief:
        return out
    ids = candidates.ids
    p_all = belief["p_unsafe"].transpose("sample", "candidate").sel(candidate=ids).values
    n_all = belief["executions"].sel(candidate=ids).values.astype(int)
    k_all = belief["unsafe"].sel(candidate=ids).values.astype(int)
    for mid, exp in experiments.items():
        m = candidates[mid]
        runs = int(m.safety_runs)
        target = m.safety_test_of or (m.id if m.drives_hardware else None)
        if not runs or target is None:
            continue
        c, i = ids.index(target), ids.index(mid)
        if (not candidates[target].drives_hardware or not feas.available[c]
                or (c == i and not m.repeatable)
                or not within_budget(budget - costs[i])[c]):
            continue
        p = p_all[:, c]
        if not np.isfinite(p).all():
            continue
        bound = next_gate(gate, int(n_all[c]), int(k_all[c]), runs, p)
        safe_by_y = bound <= gate.alpha_exec
        if (safe_by_y == bool(feas.safe[c])).all():
            continue  # the gate of c cannot change: untouched
        label = gate.label
        if feas.safe[c]:
            y_star = int(np.argmin(safe_by_y))
            note = (f"can close {target}: {label} > α_exec {gate.alpha_exec:g} for "
                    f"y ≥ {y_star} unsafe of {runs} runs")
        else:
            y_star = int(np.flatnonzero(safe_by_y).max())
            note = (f"can open {target}: {label} ≤ α_exec {gate.alpha_exec:g} for "
                    f"y ≤ {y_star} unsafe of {runs} runs")
        out[mid] = with_safety_channel(exp, c, runs, p, safe_by_y, feas.safe, note)
    return out
