"""Refused settings named as the command-line flags that set them.

The settings objects name what they refuse by attribute (``beta``, ``horizon``,
``FitSettings.draws``, ``act_on_unreliable``, …), which is right in Python; on the command line
the user typed a flag.  :func:`as_flag` re-words an :class:`~belief.errors.InputError` so that
its first word is the flag (``--beta``, ``--steps``, ``--draws``, ``--act-on-unreliable``); the
CLI applies it to every refusal (:func:`belief.cli.main.main`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from belief.errors import InputError

__all__ = ["COMMAND_FLAGS", "FLAGS", "add_gate_flag", "add_wide_flag", "as_flag", "as_flags",
           "past_dirs"]

# setting (the InputError's ``table``) → flag, for every command
FLAGS: dict[str, str] = {
    "beta": "--beta", "functional": "--functional", "horizon": "--horizon",
    "CVUSettings.n_outcomes": "--cvu-outcomes", "CVUSettings.blas_threads": "--cvu-threads",
    "CVUSettings.workers": "--cvu-workers",
    "alpha_exec": "--alpha-exec", "eps_budget": "--epsilon-budget",
    "CVUSettings.continuation": "--continuation",
    "CVUSettings.rollout_depth": "--rollout-depth",
    "CVUSettings.inner_outcomes": "--inner-outcomes",
    "CVUSettings.estimator": "--cvu-estimator",
    "CVUSettings.refit_scope": "--refit-scope",
    "CVUSettings.max_refits": "--max-refits",
    "delta": "--delta", "safety gate": "--gate", "weights": "--weights",
    "budget": "--budget", "seed": "--seed", "CVUSettings.seed": "--seed",
    "alpha_deploy": "--alpha-deploy", "allocation": "--allocation",
    "act_on_unreliable": "--act-on-unreliable", "FitSettings.draws": "--draws",
    "FitSettings.tune": "--tune", "FitSettings.chains": "--chains",
    "FitSettings.target_accept": "--target-accept",
    "workers": "--workers", "scheduler": "--scheduler",
}

# what differs per command: the horizon is ``--steps`` of a campaign, its tuning steps are
# its ``--draws``
_CAMPAIGN = {"horizon": "--steps", "FitSettings.tune": "--draws"}
COMMAND_FLAGS: dict[str, dict[str, str]] = {"demo": _CAMPAIGN, "manual": _CAMPAIGN,
                                            "replay": {"FitSettings.tune": "--draws"}}


def as_flag(err: InputError, command: str | None = None,
            extra: Mapping[str, str] | None = None) -> InputError:
    """``err`` with its setting replaced by the flag of ``command`` (itself when no flag
    sets it)."""
    flags = {**FLAGS, **COMMAND_FLAGS.get(command or "", {}), **(extra or {})}
    flag = flags.get(err.table)
    if flag is None:
        return err
    return InputError(flag, err.rule, err.row, where=err.where)


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
    shown = default or "anytime"
    p.add_argument("--gate", default=default, metavar="BOUND",
                   help="the safety gate's upper bound on P_exec: anytime (a confidence "
                        "sequence, valid over every look of a campaign), clopper_pearson "
                        "(exact, valid at one look) or posterior (the execution-risk model's "
                        f"credible bound, not frequentist); default {shown}"
                        + ("" if default else " (a resumed or replayed log: its own)"))


def add_wide_flag(p: Any) -> None:
    """``--wide`` of a command that prints the decision table
    (:func:`belief.report.tables.decision_rich_table`)."""
    p.add_argument("--wide", action="store_true",
                   help="print the decision table with every column (role, MV, the CVU "
                        "estimator, CVU by channel, the safety bound, …) and whole reasons; "
                        "default: the columns a decision needs, in 100 characters (or the "
                        "terminal's width), one line per candidate")
