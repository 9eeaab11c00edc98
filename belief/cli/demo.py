"""``belief demo``: a closed-loop campaign on the embedded synthetic world."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

__all__ = ["add_demo_command"]


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.synthetic import SyntheticWorld
    from belief.posterior.fitter import BeliefFitter, FitSettings
    from belief.report.tables import decision_rich_table

    console = Console()
    if args.resume:
        out = Path(args.resume)
        campaign = Campaign.resume(out)
        world, settings = campaign.world, campaign.settings
        console.print(f"[bold]belief demo --resume[/bold] {out}/: continuing at step "
                      f"{campaign.step_index} of {settings.horizon} (policy {campaign.policy})")
    else:
        world = SyntheticWorld(seed=args.seed)
        settings = CampaignSettings(horizon=args.steps, seed=args.seed,
                                    functional=args.functional, beta=args.beta,
                                    allocation=args.allocation,
                                    act_on_unreliable=args.act_on_unreliable,
                                    fit=FitSettings(draws=args.draws, tune=args.draws))
        out = Path(args.out)
        console.print(f"[bold]belief demo[/bold]: {len(world.candidates)} candidates, budget "
                      + ", ".join(f"{r}={v:g}" for r, v in world.budget_values.items())
                      + f", horizon {args.steps}, seed {args.seed}, allocation "
                      f"{args.allocation} → {out}/")
    t_start = time.perf_counter()
    fitter = BeliefFitter(world.candidates, settings.fit)
    with console.status("compiling the models (once per process; ~30 s the first time)"):
        fitter.gains._compiled()
        if fitter.exec_risk is not None:
            fitter.exec_risk._compiled()
    console.print(f"compiled in {time.perf_counter() - t_start:.1f} s")

    def on_step(step, decision, outcome):
        a = decision.attrs
        title = (f"step {step} · policy {a['policy']} · budget "
                 + ", ".join(f"{r}={a[f'budget_{r}']:g}" for r in world.budget_values)
                 + f" · Pr(flip) {a['flip_probability']:.2f}")
        if not a.get("reliable", 1):
            title += f" · [red]unreliable fit: {a['reliability_reason']}[/red]"
        console.print(decision_rich_table(decision, title, demo=True))
        if outcome is None:
            console.print(f"[bold]stop[/bold]: {a['stop_reason']}")
        else:
            ev = outcome.paired
            line = f"executed [bold]{outcome.candidate}[/bold]"
            if len(ev):
                r = ev.iloc[0]
                line += (f": control {r.control_successes}/{r.control_trials}, treated "
                         f"{r.treated_successes}/{r.treated_trials} → policy {outcome.policy}")
            console.print(line + "\n")

    if args.resume:
        campaign.fitter = fitter
    else:
        campaign = Campaign(world, settings, out, fitter, overwrite=True)  # a demo restarts
    result = campaign.run(on_step=on_step)
    console.print(f"[bold]done[/bold] in {time.perf_counter() - t_start:.1f} s: "
                  f"{' → '.join(result.history) or 'no action'}; stop: {result.stop_reason}; "
                  f"true J(π_0) = {world.true_success('pi0'):.3f} → J({result.policy}) = "
                  f"{world.true_success(result.policy):.3f}")
    dep = result.deployment_check
    if dep is not None:
        a = dep.attrs
        style = "green" if a["passed"] else "red"
        console.print(f"deployment check on {a['policy']} (α_deploy {a['alpha_deploy']:g}, "
                      f"{a['method']}): [{style}]{'PASS' if a['passed'] else 'FAIL'}[/{style}] "
                      f"— {a['reason']}; CP UCB {a['ucb_clopper_pearson']:.4f}, posterior UCB "
                      f"{a['ucb_posterior']:.4f}; true P_deploy = "
                      f"{world.true_p_deploy(result.policy):.4f}")
    console.print(f"wrote {out}/belief.nc, {out}/campaign_log.jsonl, {out}/decisions/, "
                  f"{out}/candidates.toml, {out}/evidence/")
    if result.stop_reason.startswith("refusing to act"):
        console.print("[red]the campaign stopped on an unreliable belief (exit code 1)[/red]")
        return 1
    return 0



def add_demo_command(sub: argparse._SubParsersAction) -> None:
    """Register ``demo`` on the ``belief`` parser."""
    demo = sub.add_parser("demo", help="closed-loop campaign on the embedded synthetic world")
    demo.add_argument("--steps", type=int, default=6, help="horizon T (default 6)")
    demo.add_argument("--seed", type=int, default=0, help="world and sampler seed (default 0)")
    demo.add_argument("--out", default="belief_demo", help="output folder (default belief_demo)")
    demo.add_argument("--draws", type=int, default=500,
                      help="posterior draws (and tuning steps) per chain (default 500)")
    demo.add_argument("--functional", default="mean",
                      help="decision functional: mean, lcb:Q or cvar:A (default mean)")
    demo.add_argument("--allocation", default="q",
                      help="allocation policy: q (default), u0, mv, thompson, round_robin, "
                           "oracle")
    demo.add_argument("--act-on-unreliable", action="store_true",
                      help="act even when a fit still fails the convergence checks after the "
                           "2x/4x refits (default: stop and say so)")
    demo.add_argument("--resume", metavar="DIR", default=None,
                      help="continue the campaign logged in DIR (settings come from its log)")
    demo.add_argument("--beta", type=float, default=1.0,
                      help="weight β of the continuation value in Q = U0 + β·CVU (default 1; "
                           "0 = myopic U0)")
    demo.set_defaults(func=cmd_demo)
