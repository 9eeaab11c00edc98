"""CVU split by channel: what the simulated outcome of m is worth through each part of s_{t+1}.

The outcome Y of m moves three channels of the state after m:

(i)   **own** — the gains of m and its siblings (the reweighted joint draws), together with
      everything that does not depend on another channel: m's policy change and its repeat
      count, the budget b − ΔC(m), λ_{t+1}, and the candidate set;
(ii)  **order** — the order effects m creates: executing m adds γ_{m→c} to every later
      candidate c's predictive gain (``Experiment.next_gain`` against
      ``Experiment.next_gain_no_order``);
(iii) **safety** — the execution-risk channel: the gate M^safe(s_{t+1}) recomputed from the
      simulated unsafe count (:mod:`belief.decision.cvu.safety`).

With V_A = E_Y[G0(s_{t+1}^{m,Y})] when only the channels A move (the others held at s_t: no
γ_{m→·}, the gate of s_t), the split is the **sequential attribution in the order (i), (ii),
(iii)**::

    cvu_own          = V_{i}          − G0(s_{t+1}^∅)
    cvu_order        = V_{i,ii}       − V_{i}
    cvu_safety_value = V_{i,ii,iii}   − V_{i,ii}

so cvu_own + cvu_order + cvu_safety_value = CVU (telescoping; equal to rounding).  The split
is order-dependent: G0 is a max, so channels interact (an order effect on a candidate the gate
keeps closed is worth nothing until the gate opens); this order credits such an interaction
to the later channel (safety after order, order after own).  Two exact zeros follow from the
definition: with no gate that the outcome can move (no ``safe_next``) cvu_safety_value = 0,
and when m creates no order effects (no ``next_gain_no_order``: order effects off, m not an
actor, or m already in the history) cvu_order = 0; neither is re-estimated.

All three values are computed on the same simulated outcomes (common random numbers: the same
draw indices and the same outcome streams) with the same estimator as the CVU itself (PSIS
forced where the CVU used PSIS, regression where it used regression), so the weights of every
outcome are shared and each difference has a Monte Carlo error of its own, from the paired
per-outcome terms (:meth:`belief.decision.cvu.estimate.Estimate.mcse_of_difference`);
``cvu_own_mcse`` is V_{i}'s outcome error.  These errors are the outcome errors only (no error
of the draws).  Where the CVU refit outcomes exactly, V_{i,ii} uses the same refits (the gate
does not change the gains) and V_{i} keeps the PSIS weights of those outcomes (a refit without
m's order effects does not exist), so cvu_order then also carries the refit-vs-weights
difference of at most ``max_refits`` outcomes; an outcome whose weights were not finite (it
was refitted because of them) has no weights to keep, so the forced-PSIS V_{i} fails there and
the split is NaN.  Only the one-step CVU is split: a decision that uses a non-myopic
continuation leaves the split NaN (one that falls back to one step is split).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from belief.decision.cvu.estimate import Estimate
from belief.decision.cvu.preposterior import NextState
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment

__all__ = ["CHANNEL_COLUMNS", "channel_split"]

CHANNEL_COLUMNS = ("cvu_own", "cvu_own_mcse", "cvu_order", "cvu_order_mcse",
                   "cvu_safety_value", "cvu_safety_value_mcse")
"""The split's columns in CVU's dataset and in the decision."""

Estimator = Callable[[Experiment, NextState, CVUSettings], Estimate]


def channel_split(exp: Experiment, nxt: NextState, full: Estimate, g0_null: float,
                  estimate: Estimator, settings: CVUSettings,
                  fixed_feasible: np.ndarray) -> dict[str, float]:
    """The split of one candidate's CVU (module docstring).

    Parameters
    ----------
    exp : Experiment
        m's experiment with every channel.
    nxt : NextState
        s_{t+1}^{m,·} with every channel (the CVU's).
    full : Estimate
        V_{i,ii,iii} = E_Y[G0(s_{t+1}^{m,Y})], the CVU's estimate.
    g0_null : float
        G0(s_{t+1}^∅).
    estimate : callable (experiment, next state, settings) → Estimate
        The CVU's estimator on fresh copies of the candidate's outcome streams (the same
        outcomes as ``full``).
    settings : CVUSettings
    fixed_feasible : bool ndarray (C,)
        M^feasible(s_{t+1}) with the gate of s_t held fixed.

    Returns
    -------
    dict over :data:`CHANNEL_COLUMNS` (NaN where the CVU failed or a part's estimate failed).
    """
    nan = dict.fromkeys(CHANNEL_COLUMNS, np.nan)
    if full.method == "failed" or not np.isfinite(full.expected_g0):
        return nan
    kind = ("psis" if full.method.startswith("psis")
            else "regression" if full.method.startswith("regression") else None)
    s = replace(settings, estimator=kind) if kind else settings
    if exp.safe_next is None:
        ordered = full
    else:
        ordered = estimate(exp, NextState(nxt.gain, nxt.c_lambda, fixed_feasible), s)
    if exp.next_gain_no_order is None:
        own = ordered
    else:
        own = estimate(replace(exp, refit=None),
                       NextState(np.asarray(exp.next_gain_no_order, float), nxt.c_lambda,
                                 fixed_feasible), s)
    if any(e.method == "failed" or not np.isfinite(e.expected_g0) for e in (own, ordered)):
        return nan
    return {
        "cvu_own": own.expected_g0 - g0_null, "cvu_own_mcse": own.mcse,
        "cvu_order": ordered.expected_g0 - own.expected_g0,
        "cvu_order_mcse": 0.0 if own is ordered else ordered.mcse_of_difference(own),
        "cvu_safety_value": full.expected_g0 - ordered.expected_g0,
        "cvu_safety_value_mcse": 0.0 if ordered is full else full.mcse_of_difference(ordered),
    }
