"""``belief demo``: a closed-loop campaign on the embedded synthetic world.

Everything is checked before the models are compiled: the settings (the flags), the output
folder (writable; empty, new, or holding this same campaign — a demo of the same world and
settings restarts — else refused unless ``--overwrite``).  Ctrl-C stops the run at once (exit
code 130); the log keeps every finished step and ``--resume`` continues from it.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from belief.errors import InputError

__all__ = ["CAMPAIGN_CVU_FLAGS", "COST_FLAGS", "CVU_DESTS", "DEMO_DEFAULTS", "add_demo_command",
           "campaign_cvu", "cost_settings", "gate_settings", "ignored_with_resume"]

DEMO_DEFAULTS = {"horizon": 6, "seed": 0, "out": "belief_demo", "draws": 1000,
                 "functional": "mean", "allocation": "q", "beta": 1.0}


def ignored_with_resume(args: argparse.Namespace, flags: tuple[str, ...]) -> list[str]:
    """The flags given with ``--resume`` that a resumed campaign does not use (its settings
    come from its log), as ``--flag value``."""
    from belief.cli.flags import typed_flag

    out = []
    for name in flags:
        value = getattr(args, name, None)
        if value is not None and value is not False:
            flag = typed_flag(args, "--" + name.replace("_", "-"))
            out.append(flag if value is True else f"{flag} {value}")
    return out


COST_FLAGS = ("costs", "eps_budget", "heavy_tailed_costs")
CVU_DESTS = ("effort", "cvu_outcomes", "cvu_estimator", "refit", "max_refits", "refit_scope",
             "continuation", "rollout_depth", "inner_outcomes")
"""The campaign commands' CVU flags (attribute names), ignored with ``--resume``."""
"""The campaign commands' uncertain-cost flags (attribute names; see :func:`add_cost_flags`)."""


CAMPAIGN_CVU_FLAGS = ("--effort", "--cvu-outcomes", "--cvu-estimator", "--refit",
                      "--max-refits", "--refit-scope", "--continuation", "--rollout-depth",
                      "--inner-outcomes")
"""The CVU and look-ahead flags of the campaign commands (``demo``, ``manual``, ``replay``):
the campaign's defaults (:class:`belief.campaign.loop.CampaignSettings` ``cvu``: exact refits,
at most 4 per candidate) unless given."""

CAMPAIGN_SHOWN = {"--effort": "default", "--cvu-outcomes": "256", "--cvu-estimator": "auto",
                  "--refit": "on, at most 4 per candidate", "--max-refits": "4",
                  "--refit-scope": "decisive when Q chooses, else all",
                  "--continuation": "one_step", "--rollout-depth": "2",
                  "--inner-outcomes": "32"}
"""The campaign commands' CVU defaults, as ``--help`` states them."""

COST_HELPS = {
    "--costs": "re-fit the cost model on the campaign's realised costs at every step and decide "
               "with uncertain costs: C_λ = λᵀE[ΔC], a candidate fits the budget when "
               "Pr(ΔC_r > b_t,r) <= --epsilon-budget (default off: the candidate file's costs "
               "are known)",
    "--epsilon-budget": "ε_budget in [0, 1) of the chance constraint, with --costs",
}
"""The campaign commands' help of the cost flags (:func:`cost_settings`)."""


def campaign_cvu(args: argparse.Namespace, base: Any) -> Any:
    """The campaign's CVU settings: ``base`` with ``--effort`` and the CVU flags given
    (:func:`belief.cli.flags.cvu_from_flags`); a campaign makes exact refits when
    ``max_refits`` > 0, so ``--no-refit`` (or ``--effort fast``) sets it to 0."""
    from belief.cli.flags import cvu_from_flags

    cvu, refit = cvu_from_flags(args, base)
    if refit is False:
        return replace(cvu, max_refits=0)
    if refit and cvu.max_refits == 0:
        raise InputError("--max-refits", "0 makes no exact refits, which --refit (or --effort "
                                         "thorough) asks for: give --no-refit instead")
    return cvu


def cost_settings(args: argparse.Namespace, resources: tuple[str, ...] | list[str]
                  ) -> dict[str, Any]:
    """The cost flags as ``CampaignSettings`` keywords (``fit_costs`` for ``FitSettings.costs``),
    checked here: the tail's resources among ``resources``, and ``--epsilon-budget`` > 0 and
    ``--heavy-tailed-costs`` only with ``--costs`` (without cost draws they would do nothing);
    ``CampaignSettings`` refuses an ε_budget outside [0, 1) (named as the flag by
    :mod:`belief.cli.flags`)."""
    costs = bool(getattr(args, "costs", None))
    eps, heavy = getattr(args, "eps_budget", None), getattr(args, "heavy_tailed_costs", None)
    out: dict[str, Any] = {"fit_costs": costs}
    if eps is not None:
        out["eps_budget"] = eps
        if not costs and eps > 0:
            raise InputError("--epsilon-budget", "acts on the cost posterior: give --costs too "
                                                 "(with known costs a candidate fits the "
                                                 "budget or not)")
    if heavy is not None:
        names = tuple(r.strip() for r in heavy.split(",") if r.strip())
        unknown = [r for r in names if r not in resources]
        if not names or unknown:
            raise InputError("--heavy-tailed-costs", f"names {unknown or heavy!r}, not "
                                                     f"resources of the candidates: "
                                                     f"{list(resources)}")
        if not costs:
            raise InputError("--heavy-tailed-costs", "shapes the cost posterior: give --costs "
                                                     "too")
        out["heavy_tailed_costs"] = names
    return out


def gate_settings(args: argparse.Namespace) -> Any:
    """The campaign's safety gate from ``--gate`` (the default gate, the anytime bound, when
    absent); a bad name is refused naming the flag (:mod:`belief.cli.flags`)."""
    from belief.decision.safety import SafetyGate

    gate = getattr(args, "gate", None)
    return SafetyGate() if gate is None else SafetyGate(method=gate)


def _settings(args: argparse.Namespace) -> Any:
    from belief.campaign.loop import CampaignSettings
    from belief.campaign.synthetic import SyntheticWorld
    from belief.posterior.fitter import FitSettings

    v = {k: (getattr(args, k, None) if getattr(args, k, None) is not None else d)
         for k, d in DEMO_DEFAULTS.items()}
    costs = cost_settings(args, SyntheticWorld().candidates.resources)
    fit = FitSettings.for_draws(v["draws"], getattr(args, "tune", None),
                                costs=costs.pop("fit_costs"))
    # CVU scores its candidates on two threads where there are two cores (the same numbers:
    # CVUSettings.workers); the campaign's other CVU settings are the library's, with the flags
    cvu = campaign_cvu(args, replace(CampaignSettings().cvu, workers=min(2, os.cpu_count() or 1)))
    return CampaignSettings(horizon=v["horizon"], seed=v["seed"], functional=v["functional"],
                            beta=v["beta"], allocation=v["allocation"], cvu=cvu,
                            gate=gate_settings(args),
                            act_on_unreliable=args.act_on_unreliable, fit=fit, **costs), v


def cmd_demo(args: argparse.Namespace) -> int:
    from belief.campaign.loop import Campaign, folder_state, outputs_complete, same_campaign
    from belief.campaign.synthetic import SyntheticWorld
    from belief.files import writable_folder
    from belief.posterior.fitter import BeliefFitter
    from belief.report.tables import console as make_console
    from belief.report.tables import decision_rich_table, escape, table_width

    console = make_console()
    if args.resume:
        out = Path(args.resume)
        ignored = ignored_with_resume(args, (*DEMO_DEFAULTS, "act_on_unreliable", "overwrite",
                                             "stochastic_costs", "gate", "tune",
                                             *COST_FLAGS, *CVU_DESTS))
        writable_folder(out, "--resume")
        campaign = Campaign.resume(out)
        world, settings = campaign.world, campaign.settings
        if ignored:
            console.print(f"note: ignored with --resume: {escape(', '.join(ignored))} — the "
                          f"campaign keeps its logged settings (horizon T = {settings.horizon},"
                          f" seed {settings.seed}, φ {settings.functional}, β "
                          f"{settings.beta:g}, {settings.fit.draws} draws, gate "
                          f"{settings.gate.method})")
        if campaign.finished and outputs_complete(out):
            reason = campaign.stop_reason or f"horizon T = {settings.horizon} reached"
            console.print(f"[bold]belief demo --resume[/bold] {escape(out)}/: the campaign is "
                          f"already finished ({escape(reason)}, after {campaign.step_index} "
                          f"step(s)); its outputs are in {escape(out)}/ — nothing to do")
            campaign.release()
            return 0
        console.print(f"[bold]belief demo --resume[/bold] {escape(out)}/: continuing at step "
                      f"{campaign.step_index} of {settings.horizon} (policy "
                      f"{escape(campaign.policy)})")
    else:
        settings, v = _settings(args)
        world = SyntheticWorld(seed=v["seed"], stochastic_costs=bool(args.stochastic_costs))
        out = writable_folder(v["out"], "--out")
        state = folder_state(out)
        if state == "campaign" and not args.overwrite and not same_campaign(out, world,
                                                                             settings):
            raise InputError("--out", f"{out} holds another campaign's log (other world or "
                                      f"settings): continue it with belief demo --resume {out}, "
                                      "choose another folder, or pass --overwrite to replace it")
        if state == "other" and not args.overwrite:
            raise InputError("--out", f"{out} is not empty and is not a belief campaign "
                                      "folder: choose an empty or new folder, or pass "
                                      "--overwrite to write the campaign's files into it "
                                      "(files with their names are replaced)")
        if state == "campaign":
            console.print(f"note: {escape(out)}/ holds this same campaign: starting it again "
                          f"(continue it instead with belief demo --resume {escape(out)})")
        console.print(f"[bold]belief demo[/bold]: {len(world.candidates)} candidates, budget "
                      + ", ".join(f"{r}={x:g}" for r, x in world.budget_values.items())
                      + f", horizon {settings.horizon}, seed {settings.seed}, allocation "
                      f"{settings.allocation}, gate {settings.gate.label} "
                      f"({settings.gate.guarantee})"
                      + (", stochastic costs" if world.stochastic_costs else "")
                      + (f", cost posterior (ε_budget {settings.eps_budget:g}"
                         + (f", repair tail in {', '.join(settings.heavy_tailed_costs)}"
                            if settings.heavy_tailed_costs else "") + ")"
                         if settings.fit.costs else "")
                      + f" → {escape(out)}/")
    args.interrupt_note = (f"{out}/campaign_log.jsonl keeps every finished step: continue with "
                           f"belief demo --resume {out}")
    t_start = time.perf_counter()
    fitter = BeliefFitter(world.candidates, settings.fit)
    from models.compile_cache import progress_line

    labels = [fitter.gains.compile_label()] + (
        [fitter.exec_risk.compile_label()] if fitter.exec_risk is not None else [])
    with console.status(progress_line(labels)):
        fitter.gains._compiled()
        if fitter.exec_risk is not None:
            fitter.exec_risk._compiled()
    console.print(f"compiled in {time.perf_counter() - t_start:.1f} s")

    def on_step(step, decision, outcome):
        a = decision.attrs
        title = (f"step {step} · policy {a['policy']} · budget "
                 + ", ".join(f"{r}={a[f'budget_{r}']:g}" for r in world.budget_values)
                 + f" · Pr(flip) {a['flip_probability']:.2f}")
        console.print(decision_rich_table(decision, title, wide=args.wide,
                                          width=table_width(console)))
        if not a.get("reliable", 1):  # a line of its own: the table's title stays short
            console.print(f"[red]step {step}: unreliable fit: "
                          f"{escape(a['reliability_reason'])}[/red]")
        if outcome is None:
            console.print(f"[bold]stop[/bold]: {escape(a['stop_reason'])}")
        else:
            ev = outcome.paired
            line = f"executed [bold]{escape(outcome.candidate)}[/bold]"
            if len(ev):
                r = ev.iloc[0]
                line += (f": control {r.control_successes}/{r.control_trials}, treated "
                         f"{r.treated_successes}/{r.treated_trials} → policy "
                         f"{escape(outcome.policy)}")
            console.print(line + "\n")

    if args.resume:
        campaign.fitter = fitter
    else:  # the folder was checked above: a restart of this campaign, or --overwrite
        campaign = Campaign(world, settings, out, fitter, overwrite=True)
    result = campaign.run(on_step=on_step)
    console.print(f"[bold]done[/bold] in {time.perf_counter() - t_start:.1f} s: "
                  f"{' → '.join(result.history) or 'no action'}; stop: "
                  f"{escape(result.stop_reason)}; true J(π_0) = "
                  f"{world.true_success('pi0'):.3f} → J({result.policy}) = "
                  f"{world.true_success(result.policy):.3f}")
    dep = result.deployment_check
    if dep is not None:
        a = dep.attrs
        style = "green" if a["passed"] else "red"
        console.print(f"deployment check on {a['policy']} (α_deploy {a['alpha_deploy']:g}, "
                      f"{a['method']}, one look at the stop): "
                      f"[{style}]{'PASS' if a['passed'] else 'FAIL'}[/{style}] "
                      f"— {escape(a['reason'])}; CP UCB {a['ucb_clopper_pearson']:.4f}, "
                      f"posterior credible UCB {a['ucb_posterior']:.4f}; true P_deploy = "
                      f"{world.true_p_deploy(result.policy):.4f}")
    console.print(f"wrote {escape(out)}/belief.nc, campaign_log.jsonl, decisions/, "
                  "candidates.toml, evidence/")
    if result.stop_reason.startswith("refusing to act"):
        console.print("[red]the campaign stopped on an unreliable belief (exit code 1): re-run "
                      "with more --draws, or pass --act-on-unreliable[/red]")
        return 1
    return 0


def add_demo_command(sub: argparse._SubParsersAction) -> None:
    """Register ``demo`` on the ``belief`` parser."""
    from belief.cli.flags import add_flags

    d = DEMO_DEFAULTS
    demo = sub.add_parser("demo", help="closed-loop campaign on the embedded synthetic world")
    groups = add_flags(demo, "demo", [
        "--functional", "--beta", "--gate", "--horizon", "--allocation", "--act-on-unreliable",
        *CAMPAIGN_CVU_FLAGS, "--costs", "--epsilon-budget", "--heavy-tailed-costs",
        "--draws", "--tune", "--seed", "--out", "--wide"], shown={
        "--functional": "mean", "--beta": f"{d['beta']:g}",
        "--gate": "anytime (a resumed log: its own)", "--horizon": str(d["horizon"]),
        "--allocation": "q", **CAMPAIGN_SHOWN, "--epsilon-budget": "0",
        "--draws": str(d["draws"]), "--tune": "500, or --draws when fewer",
        "--seed": str(d["seed"]), "--out": d["out"]}, helps={
        **COST_HELPS,
        "--horizon": "horizon T: the campaign's number of steps",
        "--seed": "world and sampler seed",
        "--out": "output folder; refused when it is not empty and not this campaign's, "
                 "unless --overwrite"})
    groups["output"].add_argument(
        "--overwrite", action="store_true",
        help="write into --out even when it holds other files or another campaign (files "
             "with the campaign's names are replaced)")
    groups["output"].add_argument(
        "--resume", metavar="DIR", default=None,
        help="continue the campaign logged in DIR (settings come from its log; the other "
             "flags are ignored, and the output says so)")
    demo.add_argument("--stochastic-costs", action="store_true", default=None,
                      help="the world's executions cost a random amount about the nominal cost, "
                           "with a repair tail in real_h (documented truth in "
                           "belief.campaign.synthetic; default: exactly the nominal cost)")
    demo.set_defaults(func=cmd_demo)
