"""Tables a user reads in the terminal: the decision as a rich table."""

from __future__ import annotations

from typing import Any

__all__ = ["decision_rich_table", "escape", "number"]


def number(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or an em dash for NaN."""
    return "—" if x != x else f"{x:.{digits}f}"  # NaN check


def escape(text: object) -> str:
    """``text`` with rich markup escaped."""
    from rich.markup import escape as _escape

    return _escape(str(text))


def decision_rich_table(decision: Any, title: str, *, demo: bool = False) -> Any:
    """The decision as a rich table: one row per candidate, the chosen one in green, the
    infeasible ones dimmed with their reason.  "vs stop" is the value against stopping,
    U0 + β·E_Y[G0(s^{m,Y})] (the candidate is worth doing when it is > 0).  ``demo`` adds the
    role and MV columns and leaves out the safety bound."""
    from rich.table import Table

    columns = [("candidate", "left"), *([("role", "left")] if demo else []),
               ("φ(ΔJ)", "right"), ("C_λ", "right"), ("U0", "right"),
               *([("MV", "right")] if demo else []), ("CVU", "right"), ("Q", "right"),
               ("vs stop", "right"),
               *([] if demo else [("P_exec UCB", "right")]), ("feasible", "center"),
               ("", "left")]
    table = Table(title=title, title_justify="left", pad_edge=False)
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for i, cid in enumerate(decision["candidate"].values):
        d = decision.isel(candidate=i)
        chosen = bool(d["chosen"])
        cvu = number(float(d["cvu"]))
        if "cvu_mcse" in d and float(d["cvu_mcse"]) == float(d["cvu_mcse"]) \
                and float(d["cvu_mcse"]) > 0:
            cvu += f"±{float(d['cvu_mcse']):.3f}"
        style = "bold green" if chosen else ("dim" if not bool(d["feasible"]) else "")
        cells = [escape(cid), *([escape(d["role"].values)] if demo else []),
                 number(float(d["phi_gain"])), number(float(d["c_lambda"])), number(float(d["u0"])),
                 *([number(float(d["mv"]), 2)] if demo else []), cvu, number(float(d["q"])),
                 number(float(d["value_vs_stop"])) if "value_vs_stop" in d else "—",
                 *([] if demo else [number(float(d["p_exec_bound"]))]),
                 "yes" if bool(d["feasible"]) else "no",
                 "◀ chosen" if chosen else escape(str(d["excluded_reason"].values)[:60])]
        table.add_row(*cells, style=style)
    return table
