"""Offline replay of a past campaign: what did we believe, what would we have picked, at what cost.

For every logged step t the models are re-fitted on the evidence available then (the initial
evidence plus the outcomes of steps < t), the decision is re-taken under the same or different
settings (functional, λ rule, β, α_exec), and compared with what was done:

- agreement between the logged and the recommended choice;
- the posterior expected regret of the logged choice, V(recommended) − V(logged) on the
  decision's own scale V(m) = U0(m) + β·E_Y[G0(s^{m,Y})] (the value against stopping; a stop
  counts as V = 0; between two candidates this is the Q difference), with a 90 % interval from
  the posterior of the per-draw difference ΔJ_s(rec) − C_λ(rec) − (ΔJ_s(logged) −
  C_λ(logged)) + β·(E[G0](rec) − E[G0](logged)) — a mean-based interval: with an LCB or CVaR
  functional the point regret uses φ, which has no per-draw version, and can lie outside it;
- the budget trajectory per resource.

Inputs
------
A log written by this project (``campaign_log.jsonl`` or its folder), or a plain CSV layout that
a team can export from its own records — a folder with:

=========================  ====================================================================
file                       content
=========================  ====================================================================
``candidates.toml``        the candidate file (see :mod:`belief.inputs.candidates`), with
``[budget]``
                           = the starting budget b_0 and ``[campaign] eval_protocol``;
                           its ``[weights]`` (optional) are the campaign's λ
``steps.csv``              one row per executed step: ``step`` (0, 1, …), ``candidate``,
                           ``policy`` (before), ``policy_after``, and ``cost_<resource>`` for
                           every resource (the realised cost)
``<table>.csv``            evidence produced by the steps, in the documented tables
                           (``paired_evaluations``, ``safety_events``, ``gain_estimates``,
                           ``policy_evaluations``, ``model_updates``,
                           ``direction_estimates``), each row's ``step`` = the step that
                           produced it; a step whose candidate is a model update and which has
                           no ``model_updates`` row counts as one (as in the log)
``initial/<table>.csv``    optional: evidence available before the first step
=========================  ====================================================================

A broken record (missing or out-of-order step, unknown candidate, a cost above the budget that
was left without the campaign's matching ``overrun`` entry, a step after an overrun, truncated
line) stops the replay there: the steps before it are replayed and the
problem is reported naming the record and the rule; nothing after it is used.  A campaign
stopped by a budget overrun (:mod:`belief.campaign.loop`) replays its steps up to the overrun;
its stop record is not a decision to stop, so it is not re-decided.  In the CSV layout a
``cost_<r>`` above the budget left is such an overrun, as in the log: the step is kept and
recorded as an overrun (its decision-time probability unknown), the budget after it is
clamped at 0, and a row after it is a broken record.  The replay's ``overrun`` attribute
states the overrun.  A campaign run with the
cost posterior (``fit.costs``) is re-decided with the cost model re-fitted on the realised costs
of the steps before each t, as the campaign did.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.campaign.logged import LoggedCampaign, load_campaign
from belief.campaign.loop import (
    CampaignSettings,
    campaign_fitter,
    step_seed,
)
from belief.decision.engine import STOP, decide
from belief.decision.schema import Attrs, Vars
from belief.decision.state import State
from belief.errors import InputError
from belief.posterior.fitter import BeliefFitter

__all__ = ["LoggedCampaign", "load_campaign", "plot_replay", "replay"]

def replay(source: str | Path | LoggedCampaign, settings: CampaignSettings | None = None, *,
           functional: str | None = None, weights: Any = None, beta: float | None = None,
           alpha_exec: float | None = None, gate: str | None = None,
           fitter: BeliefFitter | None = None,
           use_refits: bool | None = None, seed: int | None = None,
           progress: Any = None, past: Any = None,
           allocation: str | None = None) -> xr.DataTree:
    """Re-decide every logged step and compare with what was done.

    Parameters
    ----------
    source : path or LoggedCampaign
    settings : CampaignSettings, optional
        Base settings (default: the log's, else defaults); ``functional``, ``weights``,
        ``beta``, ``alpha_exec`` and ``gate`` (the gate's bound: ``anytime``,
        ``clopper_pearson`` or ``posterior``) override single fields.  A log replays with the
        gate it was written with (a log from before the anytime gate: Clopper–Pearson); the
        CSV layout, which holds no settings, with the default ``anytime``.
    use_refits : bool, optional
        Allow CVU's exact-refit fallback (slow) where k̂ > 0.7; default: as the campaign did
        (``settings.cvu.max_refits > 0``).
    seed : int, optional
        Seed of the per-step fits and CVU; default the campaign's, so that a replay with the
        same settings reproduces the logged decisions.
    progress : callable(step, n_steps), optional
    past : sequence of paths, optional
        Past campaigns of the same candidate set (``belief replay --past``): every step's
        gains fit learns from them too (campaign level, :mod:`belief.inputs.past_campaigns`);
        the tree's attribute ``past_campaigns`` lists them.
    allocation : str, optional
        Re-decide with this allocation rule (:data:`belief.decision.allocation.POLICIES`,
        e.g. ``ei_cost``: what the BoTorch-style rule would have picked at each step of the
        campaign); the recommendation is its pick and the regret is still on the decision's
        V scale.  Default: the engine's Q (whatever the campaign used).  ``oracle`` is refused
        (a log has no truth); ``thompson`` draws with the generator (step seed, 7), as the
        campaign; ``ucb_bwk`` derives its duals from the budget spent before each step.

    Returns
    -------
    DataTree with ``/steps`` (dim ``step``: logged and recommended choice, agreement, regret
    and its 90 % interval, whether the logged choice was feasible), ``/scores`` (dims ``step``,
    ``candidate``: φ(ΔJ), C_λ, U0, CVU, Q, feasible), ``/budget`` (dims ``step``, ``resource``,
    including the budget after the last step); attributes name the source, the settings and
    any problem that stopped the replay early.
    """
    camp = source if isinstance(source, LoggedCampaign) else load_campaign(source)
    if settings is None and camp.extra.get("settings_problem"):
        raise InputError(camp.source, f"{camp.extra['settings_problem']}: replay it with "
                                      "explicit settings")
    s = settings or camp.settings or CampaignSettings()
    changes: dict[str, Any] = {}
    if functional is not None:
        changes["functional"] = functional
    if weights is not None:
        changes["weights"] = weights
    if beta is not None:
        changes["beta"] = beta
    if alpha_exec is not None or gate is not None:
        changes["gate"] = replace(s.gate, **({} if alpha_exec is None else
                                             {"alpha_exec": alpha_exec}),
                                  **({} if gate is None else {"method": gate}))
    if allocation is not None:
        changes["allocation"] = allocation
    s = replace(s, **changes)  # re-validated: the settings are parsed once, here
    seed = s.seed if seed is None else seed
    if use_refits is None:
        use_refits = s.cvu.max_refits > 0
    if s.weights is None:
        raise InputError("weights", "resource weights λ are needed: the campaign's record "
                                    "gives none (or its λ rule was a user callable, which a "
                                    "log cannot hold)")
    ds = s.decision()
    # every candidate refit: the regret of the logged choice reads the values of candidates
    # that a decisive decision would leave bounded (belief.decision.cvu.decisive)
    ds = replace(ds, cvu=replace(ds.cvu, refit_scope="all"))
    cands = camp.candidates
    fitter = campaign_fitter(fitter, cands, s)  # with fit.costs: the cost model too
    if past:
        from belief.campaign.past import read_past

        fitter = replace(fitter, past=read_past(list(past), cands, current=camp.source or None))
    n_logged = len(camp.steps) + (1 if camp.stop is not None else 0)
    if n_logged == 0:
        raise InputError(camp.source, "nothing to replay: "
                         + (camp.problem or "the log holds no step record"))
    rows, scores = [], []
    available = list(cands.ids)
    history: list[str] = []
    for t in range(n_logged):
        if progress is not None:
            progress(t, n_logged)
        logged = camp.steps[t]["chosen"] if t < len(camp.steps) else STOP
        policy = camp.steps[t]["policy"] if t < len(camp.steps) else (
            camp.steps[-1]["policy_after"] if camp.steps else camp.initial_policy)
        evidence = camp.evidence_before(t)
        budget = camp.budget_before(t)
        sd = step_seed(seed, t)
        costs = camp.costs_before(t) if s.fit.costs else None  # as Campaign._fit
        _, belief = fitter.fit_reliable(evidence, policy, t, sd, costs=costs)
        state = State(step=t, budget=budget, policy=policy, belief=belief,
                      history=tuple(history), available=tuple(available))
        refit = None
        if use_refits and ds.beta > 0 and not ds.is_terminal(t):
            from belief.posterior.refit import exact_refit

            refit = exact_refit(fitter, evidence, state, s.cvu.trials, sd, s.cvu.refit_draws)
        d = decide(state, cands, ds, seed=sd, refit=refit)
        if allocation is not None and s.allocation != "q":
            d = _apply_allocation(s.allocation, d, belief, cands, history, sd,
                                  camp.initial_budget - budget)
        rows.append(_step_row(t, logged, d, belief))
        scores.append(d[[Vars.phi_gain, Vars.c_lambda, Vars.u0, Vars.cvu, Vars.q,
                         Vars.value_vs_stop, Vars.feasible]].reset_coords(drop=True))
        if logged != STOP:
            history.append(logged)
            if not cands[logged].repeatable and logged in available:
                available.remove(logged)
    steps_ds = pd.DataFrame(rows).set_index("step").to_xarray()
    score_ds = xr.concat(scores, dim=pd.Index(range(len(scores)), name="step")) if scores \
        else xr.Dataset()
    budgets = [camp.budget_before(t) for t in range(len(camp.steps) + 1)]
    budget_ds = xr.concat(budgets, dim=pd.Index(range(len(budgets)), name="step")) \
        .rename("budget").to_dataset()
    tree = xr.DataTree.from_dict({"steps": steps_ds, "scores": score_ds, "budget": budget_ds})
    tree.attrs.update({"source": camp.source, "functional": str(s.functional),
                       "allocation": s.allocation if allocation is not None else "q",
                       "beta": s.beta, "alpha_exec": s.gate.alpha_exec,
                       "safety_method": s.gate.method, "safety_bound": s.gate.label,
                       "safety_guarantee": s.gate.guarantee,
                       "problem": camp.problem or "", "n_steps": n_logged,
                       "overrun": camp.overrun(),
                       "agreement": float(steps_ds["agree"].mean()) if rows else float("nan")})
    if fitter.past:
        tree.attrs["past_campaigns"] = ", ".join(f"{c.label} ({c.source})" for c in fitter.past)
    return tree


def _apply_allocation(name: str, d: xr.Dataset, belief: xr.Dataset, cands: Any,
                      history: list[str], seed: int, spent: xr.DataArray) -> xr.Dataset:
    """The decision with ``chosen`` replaced by allocation ``name``'s pick (as the campaign
    loop does)."""
    from belief.decision.allocation import choose

    pick = choose(name, d, belief=belief, world=None, history=tuple(history),
                  rng=np.random.default_rng([seed, 7]), candidates=cands,
                  spent={r: float(spent.sel(resource=r)) for r in cands.resources})
    ids = list(d["candidate"].values)
    d = d.assign({Vars.chosen: ("candidate", np.array(ids) == pick.candidate)})
    d.attrs.update({Attrs.q_choice: d.attrs[Attrs.chosen], Attrs.chosen: pick.candidate,
                    Attrs.stop: int(pick.stop),
                    Attrs.stop_reason: pick.reason if pick.stop else ""})
    return d


def _step_row(t: int, logged: str, d: xr.Dataset, belief: xr.Dataset) -> dict[str, Any]:
    """Regret of the logged choice against the recommendation on the value-against-stopping
    scale V(m) = U0(m) + β·E_Y[G0(s^{m,Y})], where a stop is worth 0 — the decision's own
    rule (:mod:`belief.decision.engine`); between two candidates it equals the Q difference."""
    rec = d.attrs[Attrs.chosen]
    ids = list(d["candidate"].values)
    value = d[Vars.value_vs_stop].values
    beta, g0_null = d.attrs[Attrs.beta], d.attrs[Attrs.g0_null]
    gain = belief["gain"].transpose("sample", "candidate").values
    net = (gain - d[Vars.c_lambda].values[None, :]
           + beta * (d[Vars.cvu].values[None, :] + g0_null))

    def per_draw(c: str) -> np.ndarray:
        return np.zeros(gain.shape[0]) if c == STOP else net[:, ids.index(c)]

    def value_of(c: str) -> float:
        return 0.0 if c == STOP else float(value[ids.index(c)])

    diff = per_draw(rec) - per_draw(logged)
    return {"step": t, "logged": logged, "recommended": rec, "agree": logged == rec,
            "regret": value_of(rec) - value_of(logged),
            "regret_lo": float(np.quantile(diff, 0.05)),
            "regret_hi": float(np.quantile(diff, 0.95)),
            "logged_feasible": logged == STOP or bool(
                d[Vars.feasible].values[ids.index(logged)]),
            "policy": d.attrs[Attrs.policy], "reliable": int(d.attrs.get(Attrs.reliable, 1)),
            "flip_probability": d.attrs[Attrs.flip_probability]}


def plot_replay(tree: xr.DataTree, out: str | Path | None = None) -> Any:
    """Q per candidate over the steps (logged choice marked) and the budget per resource."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    scores = tree["scores"].to_dataset()
    steps = tree["steps"].to_dataset()
    budget = tree["budget"].to_dataset()["budget"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    ax = axes[0]
    if "q" in scores:
        for c in scores["candidate"].values:
            ax.plot(scores["step"], scores["q"].sel(candidate=c), marker=".", label=str(c))
        for t, logged in zip(steps["step"].values, steps["logged"].values, strict=True):
            if logged in scores["candidate"].values:
                ax.plot(t, scores["q"].sel(step=t, candidate=logged), "k*", markersize=12)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("Q = U0 + β·CVU")
    ax.set_title("Q over time (★ = logged choice)")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    b0 = budget.isel(step=0)
    for r in budget["resource"].values:
        ax.plot(budget["step"], budget.sel(resource=r) / max(float(b0.sel(resource=r)), 1e-12),
                marker="o", label=str(r))
    ax.set_xlabel("step")
    ax.set_ylabel("budget left (fraction of b_0)")
    ax.set_title("budget per resource")
    ax.legend()
    for ax in axes:  # steps are whole numbers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    if out is not None:
        fig.savefig(out, dpi=110)
    return fig
