"""Command line for the statistician's path: ``belief fit``, ``decide``, ``check``, ``report``.

::

    belief fit EVIDENCE_DIR --candidates candidates.toml --out belief.nc
    belief decide belief.nc [--budget real_h=…,compute=…,eng_h=…] [--weights …]
                            [--functional mean|lcb:Q|cvar:A] [--beta B] [--alpha-exec A]
                            [--delta D] [--gate anytime|clopper_pearson|posterior]
                            [--effort fast|default|thorough] [--out decision/]
    belief check belief.nc          # exit 0 converged, 1 diagnostics fail, 2 bad input
    belief report belief.nc [--decision decision/] --out report.html   (or report.md)

Every command validates all its input before writing anything; refused input is one line on
stderr (``belief: error: <file or option>: <problem>``) and exit code 2 (see
:func:`belief.cli.main.main`).  The Python equivalents are in :mod:`belief.workflow.belief_file`.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

from belief.errors import InputError
from belief.report.tables import console as _rich_console
from belief.report.tables import decision_rich_table, escape, table_width

__all__ = ["add_statistician_commands"]


def _console():
    return _rich_console()


DECIDE_FLAGS: dict[str, Any] = {
    "--functional": "mean", "--beta": 1.0, "--alpha-exec": 0.1, "--delta": 0.05,
    "--gate": "anytime", "--budget": None, "--weights": None, "--horizon": None,
    "--epsilon-budget": 0.0, "--effort": None, "--cvu-outcomes": None,
    "--cvu-estimator": None, "--refit": None, "--max-refits": None, "--refit-scope": None,
    "--cvu-threads": None, "--cvu-workers": None, "--continuation": None,
    "--rollout-depth": None, "--inner-outcomes": None, "--seed": 0,
}
"""The shared flags of ``belief decide`` (and ``report``) and their defaults; the CVU and
look-ahead flags default to None, "not given": ``--effort`` or CVUSettings' defaults apply."""


def _cvu_workers() -> int:
    return min(2, os.cpu_count() or 1)


def _decide_options(p: argparse.ArgumentParser, command: str = "decide",
                    out: tuple[str, str, str] | None = None, wide: bool = False) -> dict[str, Any]:
    """The decision flags of ``command`` (``decide``, ``report``) in their groups, with
    ``--out`` (default, default shown, help) and ``--wide`` when given; returns the groups."""
    from belief.cli.flags import add_flags

    flags = {**DECIDE_FLAGS, **({"--out": out[0]} if out else {}),
             **({"--wide": False} if wide else {})}
    groups = add_flags(p, command, flags, shown={
        "--functional": "mean", "--beta": "1", "--alpha-exec": "0.1", "--delta": "0.05",
        "--gate": "anytime", "--budget": "the candidate file's [budget] minus the realised "
                                         "costs",
        "--weights": "the candidate file's [weights]", "--horizon": "none",
        "--epsilon-budget": "0: no draw may overrun; with known costs the plain budget rule",
        "--effort": "default", "--cvu-outcomes": "256", "--cvu-estimator": "auto",
        "--refit": "off", "--max-refits": "16", "--refit-scope": "decisive",
        "--cvu-threads": "1", "--cvu-workers": "2, or 1 on a one-core machine",
        "--continuation": "one_step", "--rollout-depth": "2", "--inner-outcomes": "32",
        "--seed": "0", **({"--out": out[1]} if out else {})}, helps={
        "--beta": "β in Q = U0 + β·CVU (0 = myopic U0, no CVU)",
        "--epsilon-budget": "ε_budget in [0, 1): with cost draws in the belief (belief fit "
                            "--costs), a candidate fits the budget when Pr(ΔC_r > b_r) <= EPS "
                            "for every resource",
        "--seed": "seed of CVU and the stability bootstrap",
        **({"--out": out[2]} if out else {})})
    groups["decision"].add_argument(
        "--candidates", default=None, metavar="FILE",
        help="candidate TOML file; refused when its candidates differ from those the belief "
             "was fitted with (its [budget] and [weights] then apply)")
    return groups


MAX_CVU_OUTCOMES = 2**20
"""``--cvu-outcomes`` above this is refused before any work: CVU keeps a weight per simulated
outcome and posterior draw for every candidate it estimates at once (8 bytes each)."""


def _outcomes_fit_in_memory(n: Any, draws: int = 4000, *, workers: int = 1,
                            available: int | None = None) -> None:
    """Refuse ``--cvu-outcomes`` whose importance weights cannot fit in memory, before any
    work, with the estimate: 2 arrays (log-weights and weights) of n × ``draws`` float64 for
    each of the ``workers`` candidates estimated at once.  Without a belief yet, ``draws`` is
    a default fit's 4 chains × 1000 and only n > :data:`MAX_CVU_OUTCOMES` is refused; with
    ``available`` (bytes), any estimate above it is."""
    if not isinstance(n, int) or n < 2:
        return  # CVUSettings refuses it, naming the flag
    need = 2 * n * max(draws, 1) * 8 * workers
    if n > MAX_CVU_OUTCOMES or (available is not None and need > available):
        room = (f"; {available / 1e9:,.1f} GB available" if available is not None else "")
        raise InputError("--cvu-outcomes", f"{n} outcomes would need about {need / 1e9:,.1f} "
                                           f"GB (2 × {n} outcomes × {draws} posterior draws × "
                                           f"8 bytes × {workers} candidate(s) at once){room}; "
                                           f"at most {MAX_CVU_OUTCOMES}")


def _decision_settings(args: argparse.Namespace) -> Any:
    """The decision settings from the flags, validated once (when built), before any belief is
    loaded; λ is set from ``--weights`` or the candidate file's ``[weights]`` once the belief
    is loaded.  ``--effort`` sets CVU's preset, the CVU flags given override it, and flags that
    act only with another one are refused without it (:func:`belief.cli.flags.cvu_from_flags`);
    ``args.refit`` becomes the resolved exact-refit switch."""
    from belief.cli.flags import cvu_from_flags
    from belief.decision.safety import SafetyGate
    from belief.decision.settings import CVUSettings, DecisionSettings

    cvu, refit = cvu_from_flags(args, CVUSettings(workers=_cvu_workers()), refit=False)
    args.refit = bool(refit)
    _outcomes_fit_in_memory(cvu.n_outcomes)
    return DecisionSettings(
        weights=None, functional=args.functional, beta=args.beta,
        gate=SafetyGate(alpha_exec=args.alpha_exec, delta=args.delta,
                        method=args.gate),
        cvu=cvu, horizon=args.horizon, eps_budget=args.eps_budget)


def _decide(fitted: Any, settings: Any, args: argparse.Namespace,
            on_feasibility: Any = None) -> Any:
    """``fitted.decide`` with the flags' budget, λ and seed (refusals name the flags, see
    :mod:`belief.cli.flags`)."""
    return fitted.decide(settings, budget=args.budget, weights=args.weights, refit=args.refit,
                         seed=args.seed, on_feasibility=on_feasibility)


# -- belief fit ----------------------------------------------------------------------------------
def cmd_fit(args: argparse.Namespace) -> int:
    from belief.cli.flags import past_dirs
    from belief.files import writable_file
    from belief.inputs.candidate_file import load_candidate_file
    from belief.workflow.fit import fit

    console = _console()
    out = writable_file(args.out, "--out", (".nc",))
    progressbar = sys.stderr.isatty() if args.progress is None else args.progress
    past = past_dirs(args.past)
    if past:  # logs, CSV layouts or evidence folders, checked against the candidate set
        from belief.campaign.past import read_past

        past = list(read_past(past, load_candidate_file(args.candidates).candidates,
                              current=args.evidence_dir))
    console.print(f"[bold]belief fit[/bold] {escape(args.evidence_dir)} with "
                  f"{escape(args.candidates)} → {escape(out)}")
    fitted = fit(args.evidence_dir, args.candidates, policy=args.policy, step=args.step,
                     draws=args.draws, tune=args.tune, chains=args.chains, seed=args.seed,
                     target_accept=args.target_accept, sensitivity=not args.no_sensitivity,
                     costs=args.costs, progressbar=progressbar,
                     progress=lambda msg: console.print(f"  {escape(msg)}"),
                     past=past)
    rows = fitted.settings["evidence_rows"]
    console.print("  evidence: " + ", ".join(f"{k} {v}" for k, v in rows.items() if v)
                  + (f"; ignored files: {fitted.tables.ignored}" if fitted.tables.ignored
                     else ""))
    a = fitted.belief.attrs
    if a.get("past_campaigns"):
        console.print(f"  past campaigns (campaign level of the gains model): "
                      f"{escape(a['past_campaigns'])}")
    for model in fitted.models:
        prefix = f"{model}_"
        if f"{prefix}reliable" in a:
            ok = bool(int(a[f"{prefix}reliable"]))
            console.print(f"  {model}: R-hat {a[f'{prefix}rhat_max']:.3f}, bulk ESS "
                          f"{a[f'{prefix}ess_bulk_min']:.0f}, tail ESS "
                          f"{a[f'{prefix}ess_tail_min']:.0f}, divergences "
                          f"{int(a[f'{prefix}divergences'])} — "
                          + ("[green]converged[/green]" if ok
                             else f"[red]{escape(a[f'{prefix}reason'])}[/red]"))
    fitted.save(out)
    status = "" if fitted.reliable else (" [red](unreliable fit: "
                                         f"{escape(a.get('reliability_reason'))}; see belief "
                                         "check)[/red]")
    console.print(f"wrote {escape(out)}: belief q_t for policy {escape(fitted.policy)} at step "
                  f"{fitted.step}, posteriors of {', '.join(fitted.models)}{status}")
    return 0


# -- belief decide -------------------------------------------------------------------------------
def cmd_decide(args: argparse.Namespace) -> int:
    from belief.report.figure_worker import FigureWorker

    # the figures are drawn by a second process while this one decides (figure_worker); on
    # one core it would only compete with CVU
    worker = (FigureWorker.start(args.belief, args.candidates) if (os.cpu_count() or 1) > 1
              else FigureWorker.disabled())
    try:
        return _decide_and_write(args, worker)
    finally:
        worker.close()


def _figure_files(worker: Any, fitted: Any, decision: Any) -> dict[str, Any]:
    """{stem: a function writing the PNG to a path}: the worker's files (its warnings issued
    again by ``finish``), or — when the worker failed, with a warning naming why, or did not run —
    figures drawn here."""
    import shutil

    paths = worker.finish(decision, fitted=fitted)
    if paths is not None:
        return {name: (lambda tmp, src=src: shutil.copyfile(src, tmp))
                for name, src in paths.items()}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from belief.report.document import decision_figures
    from belief.report.figure_worker import save_png

    if worker.error:
        print(f"warning: {worker.error}; drawing the figures here", file=sys.stderr)
    files = {}
    figs = decision_figures(fitted, decision)
    try:
        for name, fig in figs.items():
            buf = io.BytesIO()
            save_png(fig, buf)
            data = buf.getvalue()
            files[name] = (lambda tmp, data=data: Path(tmp).write_bytes(data))
    finally:
        for fig in figs.values():
            plt.close(fig)
    return files


def _decide_and_write(args: argparse.Namespace, worker: Any) -> int:
    from belief.decision.decision_file import save_decision
    from belief.files import OutputSet, writable_folder
    from belief.validate import available_memory
    from belief.workflow.belief_file import load

    out = writable_folder(args.out, "--out")
    settings = _decision_settings(args)
    console = _console()
    fitted = load(args.belief, args.candidates)
    _outcomes_fit_in_memory(settings.cvu.n_outcomes, int(fitted.belief.sizes.get("sample", 0)),
                            workers=max(1, int(settings.cvu.workers)),
                            available=available_memory())
    if args.eps_budget and "cost" not in fitted.belief:
        raise InputError("--epsilon-budget", f"{args.eps_budget:g} would have no effect: "
                                             f"{args.belief} has no cost draws (fit it with "
                                             "belief fit --costs), so its costs are known and "
                                             "the plain budget rule applies")
    # the worker draws gains and safety while CVU runs, the rest while the tables are written
    decision = _decide(fitted, settings, args,
                       on_feasibility=lambda gate: worker.send_early(gate, fitted))
    worker.send(decision, fitted)
    # everything validated and computed: write the set of files as one unit
    table = decision.drop_vars([v for v in decision.data_vars
                                if decision[v].dims != ("candidate",)]).to_dataframe()
    with OutputSet(out, "decide") as outputs:
        outputs.write("decision.csv", lambda tmp: table.to_csv(tmp))
        outputs.write("decision.nc", lambda tmp: save_decision(tmp, decision))
        with console.capture() as summary:  # rendered while the worker draws; shown once
            _print_decision(console, decision, fitted, args.wide)  # every file is committed
        figs = _figure_files(worker, fitted, decision)  # the worker drew them meanwhile
        for name, write in figs.items():
            outputs.write(f"{name}.png", write)
    sys.stdout.write(summary.get())
    console.print(escape(f"wrote {out}/decision.csv, {out}/decision.nc, "
                       + ", ".join(f"{out}/{n}.png" for n in figs)))
    return 0


def continuation_note(attrs: Any) -> str:
    """One line when CVU used another continuation than ``--continuation`` asked for (e.g. a
    rollout deeper than two steps fell back to one step for every candidate), else ""."""
    asked, used = attrs.get("continuation"), attrs.get("continuation_used")
    if not asked or not used or str(used).startswith(str(asked)):
        return ""
    depth = attrs.get("continuation_depth")
    why = attrs.get("continuation_reason", "")
    return (f"note: --continuation {asked}" + (f" (depth {depth})" if depth else "")
            + f" was not used; CVU used {used} for every candidate" + (f": {why}" if why
                                                                       else ""))


def _print_decision(console: Any, decision: Any, fitted: Any, wide: bool = False) -> None:
    """The decision table (every column with ``wide``), budget, λ, CVU status, δ_J and the
    recommendation."""
    a = decision.attrs
    title = (f"step {a['step']} · policy {a['policy']} · φ {a['functional']} · β {a['beta']:g}"
             f" · Pr(flip) {a['flip_probability']:.2f}")
    console.print(decision_rich_table(decision, escape(title), wide=wide,
                                      width=table_width(console)))
    res = fitted.candidate_set.resources
    lines = ["budget: " + ", ".join(f"{r}={a[f'budget_{r}']:g}" for r in res)
             + f" ({a['budget_source']})",
             "weights λ: " + ", ".join(f"{r}={a[f'lambda_{r}']:g}" for r in res)
             + f" ({a['weights_source']})",
             f"CVU: {a['cvu_status']}; {a['cvu_refits']}"]
    if "delta_j_mean" in a:
        lines.append(f"transfer δ_J({a['policy']}) = {a['delta_j_mean']:.3f} "
                     f"[{a['delta_j_lo90']:.3f}, {a['delta_j_hi90']:.3f}] "
                     f"({a['delta_j_source']}; reported, not scored)")
    fallback = continuation_note(a)
    if fallback:
        lines.append(fallback)
    for line in lines:
        console.print(escape(line))
    if not a.get("reliable", 1):
        console.print(f"[red]unreliable fit: {escape(a['reliability_reason'])} — check "
                      "convergence (belief check) before acting on this decision[/red]")
    if a["stop"]:
        console.print(f"[bold]recommendation: stop[/bold] — {escape(a['stop_reason'])}")
    else:
        console.print(f"[bold]recommendation: {escape(a['chosen'])}[/bold]")


# -- belief check --------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    from rich.table import Table

    from belief.workflow.belief_file import check_file

    for name, value in (("--rhat-max", args.rhat_max), ("--ess-min", args.ess_min)):
        if value is not None and not value > 0:
            raise InputError(name, f"must be > 0, got {value}")
    if args.max_divergences < 0:
        raise InputError("--max-divergences", f"must be >= 0, got {args.max_divergences}")
    table = check_file(args.belief, args.candidates, args.rhat_max, args.ess_min,
                       args.max_divergences, recompute=args.recompute)
    models = table.index.get_level_values("model").unique()
    console = _console()
    t = Table(title=f"convergence of {escape(args.belief)} (R-hat ≤ {table.attrs['rhat_max']:g}, "
                    f"ESS ≥ {table.attrs['ess_min']:g}, divergences ≤ "
                    f"{table.attrs['max_divergences']})", title_justify="left", pad_edge=False)
    for col in ("model", "variable", "R-hat", "bulk ESS", "tail ESS", "div.", "status"):
        t.add_column(col, justify="left" if col in ("model", "variable", "status") else "right")
    for (model, var), row in table.iterrows():
        t.add_row(model, var, f"{row['rhat']:.3f}", f"{row['ess_bulk']:.0f}",
                  f"{row['ess_tail']:.0f}", str(int(row["divergences"])),
                  _check_status(row),
                  style="" if row["passed"] else "red")
    console.print(t)
    if args.recompute or not table.attrs["diagnostics"].startswith("stored"):
        print(f"diagnostics {table.attrs['diagnostics']}")
    failed = table[~table["passed"].astype(bool)]
    if len(failed):
        for (model, var), row in failed.iterrows():
            print(f"FAIL {model}: {var}: {row['problem']}")
        print(f"not converged: {len(failed)} of {len(table)} checked variables fail")
        from belief.posterior.diagnostics import next_steps

        for line in next_steps(table, table.attrs.get("escalations")):
            print(f"next step: {line}")
        return 1
    print(f"converged: {len(table)} variables of {len(models)} models pass")
    return 0


def _check_status(row: Any) -> str:
    """The status cell of a ``belief check`` row: "ok", or the problem; followed by the row's
    ``note`` when it has one (e.g. exact prior draws that are not checked)."""
    note = row.get("note", "")
    note = note if isinstance(note, str) else ""
    if not row["passed"]:
        return escape(str(row["problem"]) + (f" ({note})" if note else ""))
    return escape(f"ok: {note}") if note else "ok"


# -- belief report -------------------------------------------------------------------------------
_REPORT_OWN = frozenset({"candidates"})
"""Flags of the decision options that a report with ``--decision`` still uses."""


def _no_decision_flags_with_a_decision(args: argparse.Namespace) -> None:
    """Refuse a decision setting given together with ``--decision``: a given decision is
    reported as it was made, so the setting would silently do nothing (a flag counts as given
    when its value differs from its default)."""
    probe = argparse.ArgumentParser(add_help=False)
    _decide_options(probe)
    for action in probe._actions:
        dest = action.dest
        if (dest in _REPORT_OWN or not hasattr(args, dest)
                or action.default is argparse.SUPPRESS):  # an old name: its new one is checked
            continue
        if getattr(args, dest) != action.default:
            flag = action.option_strings[0]
            raise InputError(flag, f"{flag} would not change a given --decision (it is "
                                   "reported as it was made); leave out --decision to decide "
                                   "again with it")


def cmd_report(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")

    from belief.decision.decision_file import load_decision
    from belief.files import writable_file, writable_folder
    from belief.report.document import FORMATS, check_decision_matches, write_report
    from belief.validate import fraction
    from belief.workflow.belief_file import load

    out = writable_file(args.out, "--out", tuple(FORMATS))
    markdown = FORMATS[out.suffix.lower()] == "md"
    if markdown:  # its figures go into <stem>_files/
        writable_folder(out.parent / f"{out.stem}_files", "--out")
    alpha_deploy = fraction(args.alpha_deploy, "--alpha-deploy")
    settings = _decision_settings(args) if args.decision is None else None
    if args.decision is not None:
        from belief.cli.flags import cvu_from_flags
        from belief.decision.settings import CVUSettings

        cvu_from_flags(args, CVUSettings())  # refused the same way, though not re-made
        _no_decision_flags_with_a_decision(args)
        decision = load_decision(args.decision)
    fitted = load(args.belief, args.candidates)
    if settings is None:
        check_decision_matches(fitted, decision, "--decision", require_digest=True)
    else:
        decision = _decide(fitted, settings, args)
    write_report(fitted, decision, out, alpha_deploy=alpha_deploy)
    extra = f" and {out.parent / (out.stem + '_files')}/" if markdown else ""
    print(f"wrote {out}{extra}")
    return 0


def add_statistician_commands(sub: Any) -> None:
    """Add the ``fit``, ``decide``, ``check`` and ``report`` subcommands to ``sub``."""
    fit = sub.add_parser("fit", help="fit every model that has data on an evidence folder",
                         description="Read the evidence tables (CSV/Parquet) in EVIDENCE_DIR, "
                                     "fit every model that has data, save belief and posteriors.")
    fit.add_argument("evidence_dir", metavar="EVIDENCE_DIR",
                     help="folder of evidence tables, one <table>.csv or .parquet each")
    fit.add_argument("--candidates", required=True, metavar="FILE", help="candidate TOML file")
    fit.add_argument("--out", default="belief.nc", help="output netCDF (default belief.nc)")
    fit.add_argument("--policy", default=None,
                     help="current policy (default: the treated_policy of the last paired "
                          "evaluation, else the single evaluated policy)")
    fit.add_argument("--step", type=int, default=None,
                     help="step t of the belief (default: 1 + the last step in the evidence)")
    fit.add_argument("--draws", type=int, default=1000,
                     help="posterior draws per chain (default 1000)")
    fit.add_argument("--tune", type=int, default=None,
                     help="tuning steps per chain (default: 500, or --draws when fewer)")
    fit.add_argument("--chains", type=int, default=4,
                     help="chains (default 4: R-hat compares chains, 2 make it fragile)")
    fit.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    fit.add_argument("--target-accept", type=float, default=None,
                     help="NUTS target acceptance of the first attempt, in (0, 1) (default: "
                          "each model's own; raise it, e.g. 0.99, when check reports "
                          "divergences)")
    fit.add_argument("--no-sensitivity", action="store_true",
                     help="skip the sensitivity model even when there are sensitivity runs")
    fit.add_argument("--costs", action="store_true",
                     help="fit the cost model to the realised costs (costs table) and decide "
                          "with uncertain costs: E[λᵀΔC] and Pr(ΔC_r <= b_r) >= 1 - eps_budget "
                          "(default off: the candidate file's costs are known)")
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="nutpie progress bars (default: when stderr is a terminal)")
    fit.add_argument("--past", default=None, metavar="DIR[,DIR...]",
                     help="past campaigns of the same candidate set (campaign logs, replay CSV "
                          "layouts or evidence folders): learn the order effects from them "
                          "too, with campaign as a level of the gains model")
    fit.set_defaults(func=cmd_fit)

    decide = sub.add_parser("decide", help="decide from a saved belief: table, CSV, figures",
                            description="Score every candidate at the fitted state (U0, CVU, "
                                        "Q, feasibility) and recommend the next one.")
    decide.add_argument("belief", metavar="BELIEF", help="belief file written by belief fit")
    _decide_options(decide, wide=True, out=("decision", "decision/", "folder for "
                                            "decision.csv, decision.nc and the PNG figures"))
    decide.set_defaults(func=cmd_decide)

    check = sub.add_parser("check", help="convergence diagnostics (exit 1 when they fail)",
                           description="R-hat, bulk/tail ESS and divergences of every fitted "
                                       "model. Exit 0 converged, 1 fails, 2 bad input.")
    check.add_argument("belief", metavar="BELIEF", help="belief file written by belief fit")
    check.add_argument("--candidates", default=None, metavar="FILE",
                       help="optional: check the stored candidates against this file too")
    check.add_argument("--rhat-max", type=float, default=None,
                       help="R-hat threshold (default: the fit's, 1.01)")
    check.add_argument("--ess-min", type=float, default=None,
                       help="bulk and tail ESS threshold (default: the fit's, 10%% of the "
                            "draws)")
    check.add_argument("--max-divergences", type=int, default=0,
                       help="divergent transitions allowed per model (default 0)")
    check.add_argument("--recompute", action="store_true",
                       help="recompute R-hat, ESS and divergences from the stored draws and "
                            "compare them with the diagnostics stored at fit time (exit 2 "
                            "when they differ; default: report the stored ones)")
    check.set_defaults(func=cmd_check)

    report = sub.add_parser("report", help="HTML or Markdown report with the figures",
                            description="A report of the belief, the decision and why: gains, "
                                        "Q decomposition, safety bounds, sensitivities, "
                                        "convergence.")
    report.add_argument("belief", metavar="BELIEF", help="belief file written by belief fit")
    report.add_argument("--decision", default=None, metavar="PATH",
                        help="decision.nc (or its folder) written by belief decide; default: "
                             "decide now with the options below")
    groups = _decide_options(report, "report", out=("report.html", "report.html",
                                                  "report file: .html (self-contained) or .md "
                                                  "(figures in <stem>_files/)"))
    groups["decision"].add_argument("--alpha-deploy", type=float, default=0.05,
                                    help="deployment ceiling α_deploy for the chance "
                                         "constraint (default 0.05)")
    report.set_defaults(func=cmd_report)
