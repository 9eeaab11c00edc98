"""Tables a user reads in the terminal, a pipe or a log: the decision as a rich table."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["PIPE_WIDTH", "channel_cell", "console", "cvu_cell", "decision_rich_table",
           "escape", "estimator_label", "gate_caption", "number", "shows_channel_split"]

PIPE_WIDTH = 400
"""Line width when stdout is not a terminal: tables keep their natural width (rich would
squeeze them to 80 columns, wrapping every cell) and reasons are not cut."""


def console(file: Any = None) -> Any:
    """A rich console: a terminal keeps its width and colours; a pipe or a file gets plain text
    at :data:`PIPE_WIDTH` columns, so a table is as wide as its content."""
    from rich.console import Console

    stream = sys.stdout if file is None else file
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=file, highlight=False, width=None if tty else PIPE_WIDTH,
                   soft_wrap=not tty)


def number(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or an em dash for NaN."""
    return "—" if x != x else f"{x:.{digits}f}"  # NaN check


def cvu_cell(d: Any) -> str:
    """CVU ± its standard error (``cvu_se``: outcome Monte Carlo error and the error of the
    draws; ``cvu_mcse`` when only that is known), or an em dash."""
    cvu = number(float(d["cvu"]))
    for name in ("cvu_se", "cvu_mcse"):
        if name in d:
            se = float(d[name])
            if se == se and se > 0 and cvu != "—":
                return f"{cvu}±{se:.3f}"
            if se == se:
                break
    return cvu


def shows_channel_split(decision: Any) -> bool:
    """Whether a decision's CVU has a channel besides own learning: some candidate with a
    non-zero order-effect or safety part (:mod:`belief.decision.cvu_channels`)."""
    import numpy as np

    return any(v in decision and bool((np.nan_to_num(decision[v].values.astype(float)) != 0)
                                      .any()) for v in ("cvu_order", "cvu_safety_value"))


def channel_cell(d: Any) -> str:
    """CVU's split by channel, "own | order | safety" (three numbers; an em dash where the
    split is not computed)."""
    return " | ".join(number(float(d[v])) if v in d else "—"
                      for v in ("cvu_own", "cvu_order", "cvu_safety_value"))


def estimator_label(d: Any) -> str:
    """The CVU estimator of a candidate (``cvu_method``), blank when CVU was not estimated."""
    if "cvu_method" not in d:
        return ""
    method = d["cvu_method"].values.item() if hasattr(d["cvu_method"], "values") \
        else d["cvu_method"]
    return "" if not isinstance(method, str) or method == "not computed" else method


def escape(text: object) -> str:
    """``text`` with rich markup escaped."""
    from rich.markup import escape as _escape

    return _escape(str(text))


def decision_rich_table(decision: Any, title: str, *, demo: bool = False,
                        wide: bool | None = None) -> Any:
    """The decision as a rich table: one row per candidate, the chosen one in green, the
    infeasible ones dimmed with their reason.  "CVU" is CVU ± its standard error (Monte Carlo
    error of the simulated outcomes and of the posterior draws) and "est." the estimator
    (psis+cv, regression, …, or failed).  "vs stop" is the value against stopping,
    U0 + β·E_Y[G0(s^{m,Y})] (the candidate is worth doing when it is > 0).  ``demo`` adds the
    role and MV columns and leaves out the safety bound.  ``wide`` (default: stdout is not a
    terminal) keeps each reason whole and draws ASCII rules, for pipes and logs; a terminal
    gets reasons cut at 60 characters.  With a cost posterior (``overrun_<resource>`` in the
    decision) a column "Pr(>b) <resource>" per resource shows Pr(ΔC_r(m) > b_t,r).  When
    some candidate's CVU has an order-effect or safety part (:func:`shows_channel_split`), a
    column "CVU own | order | safety" shows the split of CVU by channel
    (:mod:`belief.decision.cvu_channels`; the three sum to CVU).  The caption names the safety
    gate's bound and its guarantee (:func:`gate_caption`)."""
    from rich import box
    from rich.table import Table

    if wide is None:
        wide = not sys.stdout.isatty()
    overrun = [str(v) for v in decision.data_vars if str(v).startswith("overrun_")]
    split = shows_channel_split(decision)

    columns = [("candidate", "left"), *([("role", "left")] if demo else []),
               ("φ(ΔJ)", "right"), ("C_λ", "right"), ("U0", "right"),
               *([("MV", "right")] if demo else []), ("CVU", "right"), ("est.", "left"),
               *([("CVU own | order | safety", "right")] if split else []),
               ("Q", "right"),
               ("vs stop", "right"),
               *([] if demo else [("P_exec UCB", "right")]),
               *[(f"Pr(>b) {v.removeprefix('overrun_')}", "right") for v in overrun],
               ("feasible", "center"), ("", "left")]
    table = Table(title=title, title_justify="left", pad_edge=wide,
                  box=box.ASCII2 if wide else box.HEAVY_HEAD,
                  caption=gate_caption(decision.attrs) or None, caption_justify="left")
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for i, cid in enumerate(decision["candidate"].values):
        d = decision.isel(candidate=i)
        chosen = bool(d["chosen"])
        cvu = cvu_cell(d)
        style = "bold green" if chosen else ("dim" if not bool(d["feasible"]) else "")
        cells = [escape(cid), *([escape(d["role"].values)] if demo else []),
                 number(float(d["phi_gain"])), number(float(d["c_lambda"])), number(float(d["u0"])),
                 *([number(float(d["mv"]), 2)] if demo else []), cvu,
                 escape(estimator_label(d)), *([channel_cell(d)] if split else []),
                 number(float(d["q"])),
                 number(float(d["value_vs_stop"])) if "value_vs_stop" in d else "—",
                 *([] if demo else [number(float(d["p_exec_bound"]))]),
                 *[number(float(d[v])) for v in overrun],
                 "yes" if bool(d["feasible"]) else "no",
                 ("<- chosen" if wide else "◀ chosen") if chosen
                 else escape(_cut(str(d["excluded_reason"].values), None if wide else 60))]
        table.add_row(*cells, style=style)
    return table


def gate_caption(attrs: Any) -> str:
    """The safety gate in words: "safety gate: anytime UCB_0.95 <= α_exec 0.1 (frequentist,
    anytime: over every look)" ("" when the decision names no gate: one written before the
    gate's bound was recorded by name gets its method only)."""
    method = attrs.get("safety_method")
    if method is None:
        return ""
    from belief.decision.safety import BOUNDS

    label, guarantee = BOUNDS.get(str(method), (f"{method} UCB", ""))
    label = attrs.get("safety_bound", label)
    guarantee = attrs.get("safety_guarantee", guarantee)
    level = f"_{1 - float(attrs.get('delta', 0.05)):g}"
    return (f"safety gate: {label.replace('UCB', 'UCB' + level)} <= α_exec "
            f"{float(attrs.get('alpha_exec', float('nan'))):g}"
            + (f" ({guarantee})" if guarantee else ""))


def _cut(text: str, n: int | None) -> str:
    return text if n is None or len(text) <= n else text[: n - 1] + "…"
