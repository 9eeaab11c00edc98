"""Command-line campaign tools: ``belief replay`` and ``belief manual``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from belief.errors import InputError

__all__ = ["add_campaign_commands", "manual_campaign"]


def _weights(text: str | None):
    """``--weights`` as a fixed λ rule (None when absent)."""
    if text is None:
        return None
    from belief.decision.weights import FixedWeights

    return FixedWeights.parse(text)


def cmd_replay(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from belief.campaign.many import replay_folder, write_tree
    from belief.campaign.replay import load_campaign, plot_replay, replay
    from belief.posterior.fitter import FitSettings

    console = Console()
    source = Path(args.log)
    out = Path(args.out)
    single = source.is_file() or (source / "campaign_log.jsonl").exists() or \
        (source / "steps.csv").exists()
    if not single:
        if not source.is_dir():
            raise InputError(str(source), "not a campaign log, a run folder, or a folder of logs")
        trees = replay_folder(source, out, scheduler=args.scheduler, workers=args.workers,
                              functional=args.functional, beta=args.beta,
                              alpha_exec=args.alpha_exec, seed=args.seed)
        for name, tree in trees.items():
            a = tree.attrs
            console.print(f"{name}: {a['n_steps']} steps, agreement {a['agreement']:.2f}"
                          + (f"; [red]{a['problem']}[/red]" if a["problem"] else ""))
        console.print(f"wrote {len(trees)} replays to {out}/")
        return 2 if any(t.attrs["problem"] for t in trees.values()) else 0
    camp = load_campaign(source)
    weights = _weights(args.weights)
    settings = camp.settings
    if args.draws is not None and settings is not None:
        from dataclasses import replace

        settings = replace(settings, fit=FitSettings(draws=args.draws, tune=args.draws))
    elif args.draws is not None:
        from belief.campaign.loop import CampaignSettings

        settings = CampaignSettings(fit=FitSettings(draws=args.draws, tune=args.draws))
    if camp.problem:
        console.print(f"[red]log problem[/red]: {camp.problem} — replaying the "
                      f"{len(camp.steps)} step(s) before it")
    with console.status("replaying…") as status:
        tree = replay(camp, settings, functional=args.functional, weights=weights,
                      beta=args.beta, alpha_exec=args.alpha_exec, seed=args.seed,
                      use_refits=args.refits,
                      progress=lambda t, n: status.update(f"replaying step {t + 1} of {n}"))
    out.mkdir(parents=True, exist_ok=True)
    write_tree(tree, out / "replay.nc")
    steps = tree["steps"].to_dataset().to_dataframe()
    steps.to_csv(out / "replay_steps.csv")
    import matplotlib.pyplot as plt

    plt.close(plot_replay(tree, out / "replay.png"))
    table = Table(title=f"replay of {camp.source} (φ = {tree.attrs['functional']}, "
                        f"β = {tree.attrs['beta']:g}, α_exec = {tree.attrs['alpha_exec']:g})")
    for col in ("step", "logged", "recommended", "agree", "regret", "90% interval"):
        table.add_column(col)
    for t, r in steps.iterrows():
        table.add_row(str(t), str(r["logged"]), str(r["recommended"]),
                      "yes" if r["agree"] else "[yellow]no[/yellow]", f"{r['regret']:.4f}",
                      f"[{r['regret_lo']:.4f}, {r['regret_hi']:.4f}]")
    console.print(table)
    console.print(f"agreement {tree.attrs['agreement']:.2f}; wrote {out}/replay.nc, "
                  f"{out}/replay_steps.csv, {out}/replay.png")
    return 2 if camp.problem else 0


def manual_campaign(args: argparse.Namespace) -> tuple[Any, Any]:
    """The world and campaign of ``belief manual`` (new, or resumed from ``--out``); the
    candidate file's ``[weights]`` are the default λ when ``--weights`` is not given."""
    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.manual import ManualWorld, prompt_outcome
    from belief.inputs.candidate_file import load_candidate_file
    from belief.posterior.fitter import FitSettings

    out = Path(args.out)
    if args.resume:
        from belief.campaign.log import read_log
        from belief.inputs.candidates import candidates_from_dict

        log = read_log(out)
        cands = candidates_from_dict(log.header["candidates"], source=str(log.path))
        world = ManualWorld(cands, log.header["initial_policy"], ask=prompt_outcome())
        return world, Campaign.resume(out, world)
    if args.candidates is None:
        raise InputError("--candidates", "a candidate file is required (or --resume)")
    cfile = load_candidate_file(args.candidates)  # with its [weights], if any
    world = ManualWorld(cfile.candidates, args.policy, weights=cfile.weights,
                        ask=prompt_outcome())
    settings = CampaignSettings(horizon=args.steps, beta=args.beta, seed=args.seed,
                                weights=_weights(args.weights),
                                fit=FitSettings(draws=args.draws, tune=args.draws))
    return world, Campaign(world, settings, out)


def cmd_manual(args: argparse.Namespace) -> int:
    from rich.console import Console

    from belief.decision.engine import decision_table

    console = Console()
    world, campaign = manual_campaign(args)
    while not campaign.finished:
        decision = campaign.decide_next()
        console.print(decision_table(decision).round(4).to_string())
        if campaign.record_decision(decision):
            console.print(f"stop: {campaign.stop_reason}")
            break
        outcome = world.execute(decision.attrs["chosen"], campaign.step_index)
        campaign.apply(decision, outcome)
    result = campaign.finish()
    console.print(f"done: {' → '.join(result.history) or 'no action'}; logged in "
                  f"{campaign.out}/")
    return 0


def add_campaign_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``replay`` and ``manual`` on the ``belief`` parser."""
    rp = sub.add_parser("replay", help="re-decide every step of a past campaign offline")
    rp.add_argument("log", help="campaign_log.jsonl, its run folder, a CSV-layout folder "
                                "(candidates.toml + steps.csv), or a folder of logs")
    rp.add_argument("--out", required=True, help="output folder")
    rp.add_argument("--functional", default=None, help="mean, lcb:Q or cvar:A (default: log's)")
    rp.add_argument("--beta", type=float, default=None, help="β (default: the log's)")
    rp.add_argument("--alpha-exec", type=float, default=None, dest="alpha_exec",
                    help="α_exec of the safety gate (default: the log's)")
    rp.add_argument("--weights", default=None, help="λ as real_h=…,compute=…,eng_h=…")
    rp.add_argument("--draws", type=int, default=None, help="posterior draws per chain")
    rp.add_argument("--seed", type=int, default=None,
                    help="seed of the re-fits (default: the campaign's)")
    rp.add_argument("--refits", action=argparse.BooleanOptionalAction, default=None,
                    help="allow CVU's exact-refit fallback (default: as the campaign did)")
    rp.add_argument("--workers", type=int, default=None,
                    help="replay a folder of logs on a local Dask cluster with N workers")
    rp.add_argument("--scheduler", default=None, help="address of a Dask scheduler")
    rp.set_defaults(func=cmd_replay)

    mp = sub.add_parser("manual", help="a campaign whose outcomes you enter step by step")
    mp.add_argument("--candidates", default=None, help="candidate TOML file (with [budget])")
    mp.add_argument("--out", required=True, help="campaign folder (log and outputs)")
    mp.add_argument("--resume", action="store_true", help="continue the campaign in --out")
    mp.add_argument("--steps", type=int, default=10, help="horizon T (default 10)")
    mp.add_argument("--policy", default="pi0", help="name of the current policy")
    mp.add_argument("--weights", default=None, help="λ as real_h=…,compute=…,eng_h=…")
    mp.add_argument("--beta", type=float, default=1.0)
    mp.add_argument("--draws", type=int, default=500)
    mp.add_argument("--seed", type=int, default=0)
    mp.set_defaults(func=cmd_manual)
