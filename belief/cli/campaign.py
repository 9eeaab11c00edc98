"""Command-line campaign tools: ``belief replay`` and ``belief manual``.

Both check every flag and the output folder before fitting anything; a refusal is one line on
stderr and exit code 2 (:func:`belief.cli.main.main`).  ``replay`` of a folder of logs reports
a log it cannot read and goes on with the others.  ``manual`` takes the campaign's initial
evidence (bench safety runs, a baseline evaluation) from ``--evidence DIR``; Ctrl-C or the end of
input at a prompt stops it with the log intact (``--resume`` continues).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from belief.errors import InputError

__all__ = ["MANUAL_DEFAULTS", "add_campaign_commands", "manual_campaign"]

MANUAL_DEFAULTS = {"horizon": 10, "policy": "pi0", "beta": 1.0, "draws": 1000, "seed": 0}


def _weights(text: str | None):
    """``--weights`` as a fixed λ rule (None when absent)."""
    if text is None:
        return None
    from belief.decision.weights import FixedWeights

    return FixedWeights.parse(text)


def _replay_settings(args: argparse.Namespace, base: Any) -> Any:
    """The replay's settings: ``base`` (the log's, or defaults) with the flags applied,
    validated here, before any fit."""
    from dataclasses import replace

    from belief.campaign.loop import CampaignSettings
    from belief.cli.flags import cvu_from_flags
    from belief.posterior.fitter import FitSettings

    s = base or CampaignSettings()
    changes: dict[str, Any] = {}
    if args.draws is not None:
        changes["fit"] = FitSettings.for_draws(args.draws, getattr(args, "tune", None))
    elif getattr(args, "tune", None) is not None:
        changes["fit"] = replace(s.fit, tune=FitSettings.for_draws(s.fit.draws, args.tune).tune)
    cvu, refit = cvu_from_flags(args, s.cvu)
    if refit is False:
        cvu = replace(cvu, max_refits=0)
    if cvu != s.cvu:
        changes["cvu"] = cvu
    args.use_refits = refit
    if args.functional is not None:
        changes["functional"] = args.functional
    if args.beta is not None:
        changes["beta"] = args.beta
    if args.alpha_exec is not None or args.gate is not None:
        changes["gate"] = replace(s.gate, **({} if args.alpha_exec is None else
                                             {"alpha_exec": args.alpha_exec}),
                                  **({} if args.gate is None else {"method": args.gate}))
    if args.weights is not None:
        changes["weights"] = _weights(args.weights)
    if args.eps_budget is not None:
        changes["eps_budget"] = args.eps_budget
    if getattr(args, "allocation", None) is not None:
        changes["allocation"] = args.allocation
    return replace(s, **changes)


def cmd_replay(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.table import Table

    from belief.campaign.many import replay_folder, write_tree
    from belief.campaign.replay import load_campaign, plot_replay, replay
    from belief.cli.flags import past_dirs
    from belief.files import OutputSet, writable_folder
    from belief.report.tables import console as make_console
    from belief.report.tables import escape
    from belief.validate import integer

    console = make_console()
    source = Path(args.log)
    out = writable_folder(args.out, "--out")
    if args.workers is not None:
        integer(args.workers, "--workers", minimum=1)
    if args.seed is not None:
        integer(args.seed, "--seed", minimum=0)
    single = source.is_file() or (source / "campaign_log.jsonl").exists() or \
        (source / "steps.csv").exists()
    past = past_dirs(args.past)
    if past and single:  # the replayed log is not its own past
        from belief.inputs.past_campaigns import check_distinct_sources

        check_distinct_sources(past, source, "the replayed log")
    if past and not single:
        raise InputError("--past", "--past works with the replay of one campaign log, not a "
                                   "folder of logs")
    from belief.cli.demo import CVU_DESTS

    given = [d for d in CVU_DESTS if getattr(args, d, None) is not None]
    if not single and given:
        flag = "--" + given[0].replace("_", "-")
        raise InputError(flag, f"{flag} works with the replay of one campaign log, not a "
                               "folder of logs")
    if not single and getattr(args, "allocation", None) is not None:
        raise InputError("--allocation", "--allocation works with the replay of one campaign "
                                         "log, not a folder of logs")
    if not single:
        if not source.is_dir():
            raise InputError(str(source), "not a campaign log, a run folder, or a folder of logs")
        _replay_settings(args, None)  # the flags, checked once before any log is read
        trees = replay_folder(source, out, scheduler=args.scheduler, workers=args.workers,
                              functional=args.functional, beta=args.beta,
                              weights=_weights(args.weights), alpha_exec=args.alpha_exec,
                              gate=args.gate, seed=args.seed)
        for name, tree in trees.items():
            a = tree.attrs
            if a.get("refused"):
                console.print(f"{escape(name)}: [red]not replayed[/red]: {escape(a['problem'])}")
                continue
            console.print(f"{escape(name)}: {a['n_steps']} steps, agreement {a['agreement']:.2f}"
                          + (f"; [red]{escape(a['problem'])}[/red]" if a["problem"] else ""))
        done = sum(not t.attrs.get("refused") for t in trees.values())
        console.print(f"wrote {done} of {len(trees)} replays to {escape(out)}/")
        bad = [name for name, t in trees.items() if t.attrs["problem"]]
        if bad:
            print(f"belief: error: {len(bad)} of {len(trees)} logs have a problem "
                  f"({', '.join(bad)}; see above)", file=sys.stderr)
        return 2 if bad else 0
    camp = load_campaign(source)
    if camp.extra.get("settings_problem"):  # the flags override single fields only
        raise InputError(camp.source, f"{camp.extra['settings_problem']}: replay it from "
                                      "Python with replay(log, settings=...)")
    settings = _replay_settings(args, camp.settings)
    if settings.weights is not None:  # λ matched to the campaign's resources before any fit
        settings.weights.bind(camp.candidates.resources)
    if camp.problem and (camp.steps or camp.stop is not None):
        console.print(f"[red]log problem[/red]: {escape(camp.problem)} — replaying the "
                      f"{len(camp.steps)} step(s) before it")
    with console.status("replaying…") as status:
        tree = replay(camp, settings, seed=args.seed, use_refits=args.use_refits, past=past,
                      allocation=args.allocation,
                      progress=lambda t, n: status.update(f"replaying step {t + 1} of {n}"))
    steps = tree["steps"].to_dataset().to_dataframe()
    fig = plot_replay(tree)
    try:
        with OutputSet(out, "replay") as outputs:
            outputs.write("replay.nc", lambda tmp: write_tree(tree, tmp))
            outputs.write("replay_steps.csv", lambda tmp: steps.to_csv(tmp))
            outputs.write("replay.png", lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
    table = Table(title=f"replay of {escape(camp.source)} (φ = {tree.attrs['functional']}, "
                        f"β = {tree.attrs['beta']:g}, α_exec = {tree.attrs['alpha_exec']:g}, "
                        f"gate {tree.attrs['safety_bound']}: "
                        f"{tree.attrs['safety_guarantee']})")
    for col in ("step", "logged", "recommended", "agree", "regret", "90% interval"):
        table.add_column(col)
    for t, r in steps.iterrows():
        table.add_row(str(t), escape(r["logged"]), escape(r["recommended"]),
                      "yes" if r["agree"] else "[yellow]no[/yellow]", f"{r['regret']:.4f}",
                      f"[{r['regret_lo']:.4f}, {r['regret_hi']:.4f}]")
    console.print(table)
    if tree.attrs["overrun"]:
        console.print(f"budget overrun at {escape(tree.attrs['overrun'])}; the budget after it "
                      "is clamped at 0")
    if tree.attrs.get("past_campaigns"):
        console.print(f"past campaigns (campaign level of the gains model): "
                      f"{escape(tree.attrs['past_campaigns'])}")
    console.print(f"agreement {tree.attrs['agreement']:.2f}; wrote {escape(out)}/replay.nc, "
                  "replay_steps.csv, replay.png")
    if camp.problem:  # the exit code says it; so does stderr, in one line
        print(f"belief: error: {camp.problem} (replayed the {len(camp.steps)} step(s) before "
              "it)", file=sys.stderr)
    return 2 if camp.problem else 0


def _initial_evidence(folder: str | None, cands: Any) -> dict[str, Any]:
    """``--evidence DIR``: the campaign's initial evidence tables (no realised costs)."""
    if folder is None:
        return {}
    from belief.inputs.evidence_dir import read_evidence_dir

    tables = read_evidence_dir(folder, cands, required=())
    if len(tables.costs):
        raise InputError(tables.files.get("costs", str(Path(folder) / "costs.csv")),
                         "initial evidence holds no realised costs: the campaign starts from "
                         "the [budget] of the candidate file (remove the file, or lower the "
                         "[budget])")
    return {name: df for name, df in tables.evidence.tables().items() if len(df)}


def manual_campaign(args: argparse.Namespace) -> tuple[Any, Any]:
    """The world and campaign of ``belief manual`` (new, or resumed from ``--out``); the
    candidate file's ``[weights]`` are the default λ when ``--weights`` is not given."""
    from belief.campaign.loop import Campaign, CampaignSettings, folder_state
    from belief.campaign.manual import ManualWorld, prompt_outcome
    from belief.files import writable_folder
    from belief.inputs.candidate_file import load_candidate_file
    from belief.posterior.fitter import FitSettings

    if args.resume:
        from belief.campaign.log import read_log
        from belief.inputs.candidates import candidates_from_dict

        out = writable_folder(args.out, "--out")
        log = read_log(out)
        cands = candidates_from_dict(log.header["candidates"], source=str(log.path))
        world = ManualWorld(cands, log.header["initial_policy"], ask=prompt_outcome())
        return world, Campaign.resume(out, world)
    if args.candidates is None:
        raise InputError("--candidates", "a candidate file is required (or --resume)")
    from belief.cli.demo import cost_settings, gate_settings

    v = {k: (getattr(args, k, None) if getattr(args, k, None) is not None else d)
         for k, d in MANUAL_DEFAULTS.items()}
    cfile = load_candidate_file(args.candidates)  # with its [weights], if any
    from belief.posterior.registry import refuse_unknown_models

    refuse_unknown_models(cfile.priors, f"{args.candidates} [priors]")
    costs = cost_settings(args, cfile.candidates.resources)
    from belief.cli.demo import campaign_cvu

    settings = CampaignSettings(horizon=v["horizon"], beta=v["beta"], seed=v["seed"],
                                weights=_weights(args.weights), gate=gate_settings(args),
                                act_on_unreliable=bool(getattr(args, "act_on_unreliable",
                                                               False)),
                                cvu=campaign_cvu(args, CampaignSettings().cvu),
                                fit=FitSettings.for_draws(v["draws"], getattr(args, "tune", None),
                                                          costs=costs.pop("fit_costs")),
                                priors=cfile.priors, **costs)
    if settings.weights is not None:  # λ matched to the file's resources now, not at step 0
        settings.weights.bind(cfile.candidates.resources)
    initial = _initial_evidence(args.evidence, cfile.candidates)
    world = ManualWorld(cfile.candidates, v["policy"], initial_tables=initial,
                        weights=cfile.weights, ask=prompt_outcome())
    out = writable_folder(args.out, "--out")
    state = folder_state(out)
    if state == "campaign" and not args.overwrite:
        raise InputError("--out", f"{out} holds a campaign log: continue it with belief manual "
                                  f"--resume --out {out}, or pass --overwrite to start a new "
                                  "campaign there (the log is replaced)")
    if state == "other" and not args.overwrite:
        raise InputError("--out", f"{out} is not empty and is not a belief campaign folder: "
                                  "choose an empty or new folder, or pass --overwrite")
    return world, Campaign(world, settings, out, overwrite=args.overwrite)


def _unsafe_without_data(campaign: Any) -> list[str]:
    """Hardware candidates without any execution-safety event: their upper bound is 1 (every
    frequentist gate's), so the gate keeps them out until bench runs are entered."""
    executions, _ = campaign.evidence.safety_counts()
    return [c.id for c, n in zip(campaign.candidates, executions, strict=True)
            if c.drives_hardware and n == 0]


def cmd_manual(args: argparse.Namespace) -> int:
    from belief.campaign.loop import outputs_complete
    from belief.cli.demo import COST_FLAGS, CVU_DESTS, ignored_with_resume
    from belief.report.tables import console as make_console
    from belief.report.tables import decision_rich_table, escape, table_width

    console = make_console()
    world, campaign = manual_campaign(args)
    out = campaign.out
    args.interrupt_note = (f"{out}/campaign_log.jsonl keeps every step entered: continue with "
                           f"belief manual --resume --out {out}")
    if args.resume:
        ignored = ignored_with_resume(args, (*MANUAL_DEFAULTS, "candidates", "weights",
                                             "evidence", "overwrite", "act_on_unreliable",
                                             "gate", "tune", *COST_FLAGS, *CVU_DESTS))
        s = campaign.settings
        if ignored:
            console.print(f"note: ignored with --resume: {escape(', '.join(ignored))} — the "
                          f"campaign keeps its logged settings (horizon T = {s.horizon}, β "
                          f"{s.beta:g}, {s.fit.draws} draws, gate {s.gate.method})")
        if campaign.finished:
            console.print(f"the campaign in {escape(out)}/ is finished ("
                          f"{escape(campaign.stop_reason or f'horizon T = {s.horizon} reached')}"
                          f", after {campaign.step_index} step(s))")
            if outputs_complete(out):
                campaign.release()
                return 0
    blocked = _unsafe_without_data(campaign)
    if blocked:
        console.print(f"note: hardware candidate(s) {escape(', '.join(blocked))} have no "
                      "execution-safety events: their upper bound is 1 > α_exec, so "
                      "the safety gate keeps them out until their bench runs are entered (give "
                      "them as safety_events in --evidence DIR)")
    while not campaign.finished:
        decision = campaign.decide_next()
        a = decision.attrs
        console.print(decision_rich_table(decision, f"step {a['step']} · policy "
                                                    f"{escape(a['policy'])}", wide=args.wide,
                                          width=table_width(console)))
        if campaign.record_decision(decision):
            console.print(f"stop: {escape(campaign.stop_reason)}")
            break
        outcome = world.execute(decision.attrs["chosen"], campaign.step_index)
        campaign.apply(decision, outcome)
    result = campaign.finish()
    console.print(f"done: {' → '.join(result.history) or 'no action'}; logged in "
                  f"{escape(out)}/")
    return 0


def add_campaign_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``replay`` and ``manual`` on the ``belief`` parser."""
    from belief.cli.demo import CAMPAIGN_CVU_FLAGS, CAMPAIGN_SHOWN, COST_HELPS
    from belief.cli.flags import add_flags

    rp = sub.add_parser("replay", help="re-decide every step of a past campaign offline")
    rp.add_argument("log", help="campaign_log.jsonl, its run folder, a CSV-layout folder "
                                "(candidates.toml + steps.csv), or a folder of logs")
    logs = "the log's"
    groups = add_flags(rp, "replay", [
        "--functional", "--beta", "--alpha-exec", "--gate", "--weights", "--allocation",
        *CAMPAIGN_CVU_FLAGS, "--epsilon-budget", "--draws", "--tune", "--seed", "--out"],
        required=["--out"], shown={
            "--functional": logs, "--beta": logs, "--alpha-exec": logs, "--gate": logs,
            "--weights": logs, "--allocation": logs, "--effort": "the log's settings",
            **dict.fromkeys(CAMPAIGN_CVU_FLAGS[1:], logs), "--epsilon-budget": logs,
            "--draws": logs, "--tune": "500, or --draws when fewer", "--seed": "the "
                                                                              "campaign's"},
        helps={"--allocation": "re-decide with this allocation rule instead of Q (e.g. "
                               "ei_cost, kg_cost, ucb_bwk, pbgi, thompson: what that rule "
                               "would have picked at each step)",
               "--refit": "CVU's exact-refit fallback where PSIS k̂ is above its threshold "
                          "(--no-refit: PSIS only)",
               "--seed": "seed of the re-fits", "--out": "output folder",
               "--epsilon-budget": "ε_budget in [0, 1) of the budget's chance constraint, "
                                   "for a campaign with a cost posterior"})
    groups["output"].add_argument(
        "--workers", type=int, default=None,
        help="replay a folder of logs on a local Dask cluster with N workers")
    groups["output"].add_argument("--scheduler", default=None,
                                  help="address of a Dask scheduler")
    rp.add_argument("--past", default=None, metavar="DIR[,DIR...]",
                    help="past campaigns of the same candidate set: every step's gains fit "
                         "learns the order effects from them too (campaign level)")
    rp.set_defaults(func=cmd_replay)

    d = MANUAL_DEFAULTS
    mp = sub.add_parser("manual", help="a campaign whose outcomes you enter step by step")
    mp.add_argument("--candidates", default=None, help="candidate TOML file (with [budget])")
    mp.add_argument("--evidence", default=None, metavar="DIR",
                    help="initial evidence: an evidence folder (e.g. safety_events.csv with "
                         "the bench runs of the hardware candidates, policy_evaluations.csv "
                         "with a baseline); no costs")
    mp.add_argument("--policy", default=None,
                    help=f"name of the current policy (default {d['policy']})")
    groups = add_flags(mp, "manual", [
        "--beta", "--gate", "--weights", "--horizon", "--act-on-unreliable",
        *CAMPAIGN_CVU_FLAGS, "--costs", "--epsilon-budget", "--heavy-tailed-costs",
        "--draws", "--tune", "--seed", "--out", "--wide"], required=["--out"], shown={
        "--beta": f"{d['beta']:g}", "--gate": "anytime (a resumed log: its own)",
        "--weights": "the file's [weights]", "--horizon": str(d["horizon"]),
        **CAMPAIGN_SHOWN, "--epsilon-budget": "0", "--draws": str(d["draws"]),
        "--tune": "500, or --draws when fewer", "--seed": str(d["seed"])}, helps={
        **COST_HELPS, "--horizon": "horizon T: the campaign's number of steps",
        "--out": "campaign folder (log and outputs)",
        "--act-on-unreliable": "act on a belief whose fit fails the convergence checks "
                               "(default: stop and say so)"})
    groups["output"].add_argument(
        "--overwrite", action="store_true",
        help="start a new campaign in --out even when it holds a log or other files")
    groups["output"].add_argument("--resume", action="store_true",
                                  help="continue the campaign in --out")
    mp.set_defaults(func=cmd_manual)
