"""The command line's settings vocabulary: one table of flags, and refusals named by flag.

:data:`TABLE` declares every flag that more than one command shares — its name, its argument
group (:data:`GROUPS`: decision, CVU, look-ahead, costs, sampling, output), its help, the
settings it sets and the names it had before — so that the same setting has the same flag on
``belief decide``, ``report``, ``demo``, ``manual`` and ``replay``.  A command adds the flags
it takes with :func:`add_flags`, giving only its defaults.

A flag's old name (e.g. ``--steps`` for ``--horizon``, ``--refits`` for ``--refit``) is still
accepted on the commands that had it, listed in ``--help`` under "deprecated names", and the
command says once on stderr which flag replaces it (:func:`deprecation_notes`); a refusal
names the flag as typed, on one line.

The settings objects name what they refuse by attribute (``beta``, ``horizon``,
``FitSettings.draws``, ``act_on_unreliable``, …), which is right in Python; on the command line
the user typed a flag.  :func:`as_flag` re-words an :class:`~belief.errors.InputError` so that
its first word is the flag (``--beta``, ``--horizon``, ``--draws``, ``--act-on-unreliable``);
the CLI applies it to every refusal (:func:`belief.cli.main.main`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from belief.errors import InputError

__all__ = ["COMMAND_FLAGS", "EFFORT_FLAGS", "FLAGS", "GROUPS", "RENAMED", "TABLE", "Flag",
           "add_flags", "add_gate_flag", "add_wide_flag", "as_flag", "as_flags",
           "cvu_from_flags", "deprecation_notes", "past_dirs", "typed_flag"]

GROUPS: dict[str, str] = {
    "decision": "the decision rule: φ, β, the safety gate, λ, the horizon",
    "CVU": "the continuation value's Monte Carlo (--effort sets them at once; a flag given "
           "overrides it)",
    "look-ahead": "the continuation CVU takes as the value after a step",
    "costs": "uncertain costs and the budget's chance constraint",
    "sampling": "the posterior sampler and the seeds",
    "output": "what is written and printed",
    "deprecated names": "old flag names, accepted until the next release; each says which "
                        "flag replaces it",
}
"""Argument groups of ``--help``, in the order they are shown."""

RENAMED = "renamed_flags"
"""The namespace attribute holding {new flag: old name as typed} of the deprecated names
used."""


@dataclass(frozen=True)
class Flag:
    """One flag of the table.

    Attributes
    ----------
    name : str
        The flag (``--cvu-outcomes``).
    group : str
        Its argument group, a key of :data:`GROUPS`.
    help : str
        What it sets; a command appends its default.  ``{functionals}`` is replaced by the
        registered functionals when ``--help`` prints it.
    settings : tuple of str
        The settings it sets, as their refusals name them (``CVUSettings.n_outcomes``).
    old : mapping old name → commands
        The flag's former names and the commands that had them.
    kwargs : mapping
        ``add_argument`` keywords (``type``, ``metavar``, ``action``, ``dest``).
    """

    name: str
    group: str
    help: str
    settings: tuple[str, ...] = ()
    old: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dest(self) -> str:
        """The namespace attribute the flag sets (``--cvu-outcomes`` → ``cvu_outcomes``)."""
        return self.kwargs.get("dest", self.name[2:].replace("-", "_"))


_CAMPAIGNS = ("demo", "manual")
_TABLE = [
    # the decision rule
    Flag("--functional", "decision", "decision functional φ: {functionals}", ("functional",)),
    Flag("--beta", "decision", "β in Q = U0 + β·CVU (0 = myopic U0, no CVU)", ("beta",),
         kwargs={"type": float}),
    Flag("--alpha-exec", "decision", "execution-safety ceiling α_exec on the upper bound of "
         "P_exec", ("alpha_exec",), kwargs={"type": float}),
    Flag("--delta", "decision", "one-sided level δ of the safety bounds", ("delta",),
         kwargs={"type": float}),
    Flag("--gate", "decision", "the safety gate's upper bound on P_exec: anytime (a confidence "
         "sequence, valid over every look of a campaign), clopper_pearson (exact, valid at one "
         "look) or posterior (the execution-risk model's credible bound, not frequentist)",
         ("safety gate",), kwargs={"metavar": "BOUND"}),
    Flag("--weights", "decision", "resource weights λ, e.g. real_h=0.01,compute=0.0002,"
         "eng_h=0.004", ("weights",), kwargs={"metavar": "R=λ,..."}),
    Flag("--budget", "decision", "remaining budget b_t, e.g. real_h=10,compute=200,eng_h=15",
         ("budget",), kwargs={"metavar": "R=X,..."}),
    Flag("--horizon", "decision", "horizon T: the last decision is taken at step T − 1, where "
         "CVU := 0", ("horizon",), old={"--steps": _CAMPAIGNS}, kwargs={"type": int}),
    Flag("--allocation", "decision", "allocation policy: q (Q = U0 + β·CVU), u0, mv, thompson, "
         "round_robin, oracle, plan (the open-loop planner on the belief), plan_voi (that "
         "plan's value of each first step + beta x the value of its information); the peer "
         "rules ei_cost (expected improvement per cost), kg_cost (knowledge gradient per cost),"
         " ucb_bwk[:q] (UCB bandits with knapsacks), pbgi (Pandora's-box Gittins index)",
         ("allocation",)),
    Flag("--act-on-unreliable", "decision", "act even when a fit still fails the convergence "
         "checks after the 2x/4x refits (default: stop and say so)", ("act_on_unreliable",),
         kwargs={"action": "store_true"}),
    # CVU
    Flag("--effort", "CVU", "CVU's effort: fast (64 outcomes, no refits, no split by "
         "channel), default (today's settings) or thorough (--continuation lookahead2, 8 inner "
         "outcomes, 128 outcomes, --refit with at most 2 per candidate); flags given override "
         "it (the effort how-to gives each level's time and error)",
         ("effort",), kwargs={"metavar": "LEVEL"}),
    Flag("--cvu-outcomes", "CVU", "simulated outcomes per candidate in CVU",
         ("CVUSettings.n_outcomes",), kwargs={"type": int, "metavar": "N"}),
    Flag("--cvu-estimator", "CVU", "CVU's estimator: auto (PSIS while the weights can be "
         "trusted, regression on the simulated outcome for informative studies), psis or "
         "regression (forced for every candidate; with --continuation lookahead2 or rollout, "
         "regression is the faster nested-regression continuation)",
         ("CVUSettings.estimator",), kwargs={"metavar": "E"}),
    Flag("--refit", "CVU", "exact refits of the gains model where PSIS k̂ > min(1 − 1/log10 S,"
         " 0.7), S the draws (slower: compiles the model); --no-refit: PSIS only, and the "
         "output says so", ("refit",), old={"--refits": ("replay",)},
         kwargs={"action": argparse.BooleanOptionalAction}),
    Flag("--max-refits", "CVU", "with --refit: at most N exact refits per candidate, the "
         "outcomes with the largest k̂ first", ("CVUSettings.max_refits",),
         kwargs={"type": int, "metavar": "N"}),
    Flag("--refit-scope", "CVU", "with --refit: decisive (only the candidates that could "
         "still be chosen, until the choice is settled; the others' untrusted outcomes are "
         "bounded) or all (every candidate's)", ("CVUSettings.refit_scope",),
         kwargs={"metavar": "SCOPE"}),
    Flag("--cvu-threads", "CVU", "BLAS threads while CVU runs (1 is measured faster here; 0: "
         "the BLAS library's default pool)", ("CVUSettings.blas_threads",),
         kwargs={"type": int}),
    Flag("--cvu-workers", "CVU", "candidates whose CVU is estimated at once, on threads (the "
         "numbers do not depend on it)", ("CVUSettings.workers",), kwargs={"type": int}),
    # look-ahead
    Flag("--continuation", "look-ahead", "CVU's continuation: one_step (G0), lookahead2 "
         "(two-step look-ahead) or rollout (the U0-greedy policy for --rollout-depth steps); "
         "the last two are slower", ("CVUSettings.continuation",), kwargs={"metavar": "KIND"}),
    Flag("--rollout-depth", "look-ahead", "depth d >= 1 of --continuation rollout (1 = "
         "one_step)", ("CVUSettings.rollout_depth",), kwargs={"type": int, "metavar": "D"}),
    Flag("--inner-outcomes", "look-ahead", "K >= 2 inner outcomes of --continuation lookahead2 "
         "(second-step outcomes per first outcome and next candidate) or rollout (greedy "
         "paths per first outcome)", ("CVUSettings.inner_outcomes",),
         kwargs={"type": int, "metavar": "K"}),
    # costs
    Flag("--costs", "costs", "fit the cost model to the realised costs and decide with "
         "uncertain costs: C_λ = λᵀE[ΔC], a candidate fits the budget when Pr(ΔC_r > b_r) <= "
         "--epsilon-budget (default off: the candidate file's costs are known)",
         ("FitSettings.costs",), kwargs={"action": "store_true"}),
    Flag("--epsilon-budget", "costs", "ε_budget in [0, 1) of the budget's chance constraint: "
         "with cost draws, a candidate fits the budget when Pr(ΔC_r > b_r) <= EPS for every "
         "resource (0: no cost draw may overrun; 0.05 allows a 5 %% overrun probability)",
         ("eps_budget",), kwargs={"type": float, "dest": "eps_budget", "metavar": "EPS"}),
    Flag("--heavy-tailed-costs", "costs", "resources whose costs get the cost model's repair "
         "tail (a two-component log-normal mixture), e.g. real_h; with --costs",
         ("heavy_tailed_costs",), kwargs={"metavar": "R[,R...]"}),
    # sampling
    Flag("--draws", "sampling", "posterior draws per chain", ("FitSettings.draws",),
         kwargs={"type": int}),
    Flag("--tune", "sampling", "tuning steps per chain", ("FitSettings.tune",),
         kwargs={"type": int}),
    Flag("--chains", "sampling", "chains (R-hat compares chains, 2 make it fragile)",
         ("FitSettings.chains",), kwargs={"type": int}),
    Flag("--target-accept", "sampling", "NUTS target acceptance of the first attempt, in "
         "(0, 1); raise it, e.g. 0.99, when check reports divergences",
         ("FitSettings.target_accept",), kwargs={"type": float}),
    Flag("--seed", "sampling", "seed", ("seed", "CVUSettings.seed"), kwargs={"type": int}),
    # output
    Flag("--out", "output", "output", ()),
    Flag("--wide", "output", "print the decision table with every column (role, MV, the CVU "
         "estimator, CVU by channel, the safety bound, …) and whole reasons; default: the "
         "columns a decision needs, in 100 characters (or the terminal's width), one line per "
         "candidate", (), kwargs={"action": "store_true"}),
]
TABLE: dict[str, Flag] = {f.name: f for f in _TABLE}
"""Every shared flag by name."""

# setting (the InputError's ``table``) → flag, for every command
FLAGS: dict[str, str] = {
    **{s: f.name for f in _TABLE for s in f.settings},
    "workers": "--workers", "scheduler": "--scheduler", "alpha_deploy": "--alpha-deploy",
}
COMMAND_FLAGS: dict[str, dict[str, str]] = {}
"""Per-command exceptions to :data:`FLAGS` (none: a setting has one flag everywhere)."""

EFFORT_FLAGS: dict[str, str] = {
    "--cvu-outcomes": "n_outcomes", "--cvu-estimator": "estimator",
    "--max-refits": "max_refits", "--refit-scope": "refit_scope",
    "--cvu-threads": "blas_threads", "--cvu-workers": "workers",
    "--continuation": "continuation", "--rollout-depth": "rollout_depth",
    "--inner-outcomes": "inner_outcomes",
}
"""The CVU and look-ahead flags → the :class:`~belief.decision.settings.CVUSettings` field
each sets (over ``--effort``'s preset)."""


def _deprecated_action(base: type[argparse.Action], new: str) -> type[argparse.Action]:
    """``base`` that also records, in the namespace, the old name typed for ``new``."""

    class Deprecated(base):  # type: ignore[misc, valid-type]
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                     values: Any, option_string: str | None = None) -> None:
            typed = option_string or self.option_strings[0]
            to = "--no-" + new[2:] if typed.startswith("--no-") else new
            renamed = dict(getattr(namespace, RENAMED, None) or {})
            renamed[to] = typed
            setattr(namespace, RENAMED, renamed)
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def _help(flag: Flag, shown: str | None, extra: str | None) -> str:
    from belief.cli.help_text import functionals_help

    text = extra if extra is not None else flag.help
    if shown:
        text += f" (default{': ' if ' ' in shown else ' '}{shown})"
    return functionals_help(text) if "{functionals}" in text else text


def add_flags(p: argparse.ArgumentParser, command: str,
              flags: Mapping[str, Any] | Iterable[str], *,
              shown: Mapping[str, str] | None = None,
              helps: Mapping[str, str] | None = None,
              required: Iterable[str] = ()) -> dict[str, Any]:
    """Add the table's ``flags`` to ``command``'s parser ``p``, each in its group.

    ``flags`` maps a flag to its default (an iterable: default None, "not given"); ``shown``
    the default as ``--help`` states it; ``helps`` replaces a flag's help for this command.
    The flag's old names on this command are added to the "deprecated names" group.  Returns
    the argument groups by name (to add a command's own flags to them)."""
    defaults = dict(flags) if isinstance(flags, Mapping) else dict.fromkeys(flags)
    shown, helps, required = dict(shown or {}), dict(helps or {}), set(required)
    olds = [(name, old) for name in defaults for old, commands in TABLE[name].old.items()
            if command in commands]
    groups = {name: p.add_argument_group(name, desc) for name, desc in GROUPS.items()
              if (name == "deprecated names" and olds)
              or any(TABLE[f].group == name for f in defaults)}
    for name, default in defaults.items():
        flag = TABLE[name]
        kwargs = dict(flag.kwargs)
        if name in required:
            kwargs["required"] = True
        elif default is not None or kwargs.get("action") != "store_true":
            kwargs["default"] = default  # a switch not given is False
        groups[flag.group].add_argument(name, help=_help(flag, shown.get(name),
                                                         helps.get(name)), **kwargs)
    for name, old in olds:
        flag = TABLE[name]
        kwargs = dict(flag.kwargs)
        kwargs["dest"] = flag.dest
        added = groups["deprecated names"].add_argument(
            old, default=argparse.SUPPRESS, help=f"deprecated: use {name}", **kwargs)
        added.__class__ = _deprecated_action(type(added), name)  # the same action, recorded
    return groups


def deprecation_notes(args: argparse.Namespace) -> list[str]:
    """One line per deprecated flag name used: which flag replaces it."""
    return [f"belief: warning: {old} is deprecated, use {new} (the old name is accepted "
            "until the next release)"
            for new, old in (getattr(args, RENAMED, None) or {}).items()]


def typed_flag(args: argparse.Namespace, flag: str) -> str:
    """``flag`` as the user typed it (its old name when a deprecated one was used)."""
    return (getattr(args, RENAMED, None) or {}).get(flag, flag)


def as_flag(err: InputError, command: str | None = None,
            extra: Mapping[str, str] | None = None,
            renamed: Mapping[str, str] | None = None) -> InputError:
    """``err`` with its setting replaced by the flag of ``command`` (itself when no flag
    sets it); with ``renamed`` ({new flag: old name typed}), a flag typed under its old name
    is named so and the rule says which flag replaces it."""
    flags = {**FLAGS, **COMMAND_FLAGS.get(command or "", {}), **(extra or {})}
    flag = flags.get(err.table)
    if flag is None and renamed and err.table in renamed:
        flag = err.table
    if flag is None:
        return err
    rule = err.rule
    if renamed and flag in renamed:
        flag, rule = renamed[flag], f"{rule} ({renamed[flag]} is deprecated: use {flag})"
    return InputError(flag, rule, err.row, where=err.where)


def as_flags(call: Callable[..., Any], *args: Any, command: str | None = None,
             **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` with a refused setting re-worded to name its flag."""
    try:
        return call(*args, **kwargs)
    except InputError as err:
        new = as_flag(err, command)
        if new is err:
            raise
        raise new from None


def cvu_from_flags(args: argparse.Namespace, base: Any,
                   refit: bool | None = None) -> tuple[Any, bool | None]:
    """CVU's settings and exact refits from ``--effort`` and the CVU and look-ahead flags.

    ``base`` (:class:`~belief.decision.settings.CVUSettings`: the command's defaults, or a
    replayed log's) takes the effort level's preset
    (:meth:`~belief.decision.settings.CVUSettings.for_effort`), then every flag given
    (:data:`EFFORT_FLAGS`); ``refit`` (the command's default, None: its own) likewise takes
    the level's, then ``--refit``/``--no-refit``.  A flag that acts only with another
    setting (``--max-refits`` and ``--refit-scope`` with refits, ``--rollout-depth`` with the
    rollout, ``--inner-outcomes`` with a non-myopic continuation) is refused, naming it, when
    the resolved settings lack it."""
    from belief.decision.settings import CONTINUATIONS, EFFORTS
    from belief.validate import choice

    effort = getattr(args, "effort", None)
    if effort is not None:
        choice(effort, "--effort", tuple(EFFORTS))
    given = {attr: getattr(args, flag[2:].replace("-", "_"), None)
             for flag, attr in EFFORT_FLAGS.items()}
    given = {attr: v for attr, v in given.items() if v is not None}
    if "continuation" in given:  # before what depends on it
        choice(given["continuation"], "--continuation", CONTINUATIONS)
    cvu, refit = base.at_effort(effort, given, refit)
    if getattr(args, "refit", None) is not None:
        refit = args.refit
    refits_on = refit if refit is not None else cvu.max_refits > 0
    rules = (("--max-refits", refits_on, "applies only with --refit"),
             ("--refit-scope", refits_on, "applies only with --refit"),
             ("--rollout-depth", cvu.continuation == "rollout",
              "applies only with --continuation rollout"),
             ("--inner-outcomes", cvu.continuation in ("lookahead2", "rollout"),
              "applies only with --continuation lookahead2 or rollout"))
    for flag, needed, rule in rules:
        value = given.get(EFFORT_FLAGS[flag])
        if value is not None and not needed:
            raise InputError(flag, f"{rule} (given {value!r})")
    return cvu, refit


def past_dirs(value: str | None) -> list[str]:
    """``--past DIR[,DIR...]`` (``belief fit``, ``belief replay``) → the paths (none without
    the flag); an empty entry is refused naming the flag."""
    if value is None:
        return []
    dirs = [d.strip() for d in value.split(",")]
    if not all(dirs):
        raise InputError("--past", f"empty entry in {value!r}: give DIR[,DIR...]")
    return dirs


def add_gate_flag(p: Any, default: str | None) -> None:
    """``--gate`` of every command that decides (``decide``, ``demo``, ``manual``,
    ``replay``): the safety gate's bound by name, checked by
    :class:`~belief.decision.safety.SafetyGate` (a bad name is one line naming ``--gate``).
    ``default`` None: the command's own default (a log's gate, the campaign default)."""
    shown = (default or "anytime") + ("" if default else
                                      " (a resumed or replayed log: its own)")
    flag = TABLE["--gate"]
    p.add_argument("--gate", default=default, help=_help(flag, shown, None), **flag.kwargs)


def add_wide_flag(p: Any) -> None:
    """``--wide`` of a command that prints the decision table
    (:func:`belief.report.tables.decision_rich_table`)."""
    flag = TABLE["--wide"]
    p.add_argument("--wide", help=flag.help, **flag.kwargs)
