"""Tables a user reads in the terminal, a pipe or a log: the decision as a rich table.

The decision table has two layouts.  The compact one (the default) holds what a decision needs
— candidate, φ(ΔJ), C_λ, U0, CVU ± its error, Q, the value against stopping, feasible and the
reason — in at most :data:`COMPACT_WIDTH` columns (or the terminal's width), one line per
candidate; a reason too long for its column is cut there and written in full below the table,
and CVU's split by channel, when some channel besides own learning is non-zero, is a second
table.  The wide one (``--wide``) shows every column on one table, reasons whole.

Numbers are formatted per column, with the same decimals in the whole column
(:func:`column_decimals`): to the decimal place of the column's typical Monte Carlo error when
it has one (CVU, Q, the value against stopping, the channels), else to three significant
digits of the column's largest magnitude.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from belief.decision import schema
from belief.decision.schema import Attrs as A
from belief.decision.schema import Vars as V

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CHANNELS", "COMPACT_WIDTH", "PIPE_WIDTH", "channel_rich_table", "column_decimals",
           "console", "decision_rich_table", "escape", "estimator_label", "fixed", "gate_caption",
           "number", "number_columns", "shows_channel_split", "table_width"]

PIPE_WIDTH = 400
"""Line width when stdout is not a terminal: text and wide tables keep their natural width
(rich would squeeze them to 80 columns, wrapping every cell) and reasons are not cut."""

COMPACT_WIDTH = 100
"""Width of the compact decision table in a pipe or a log (a terminal gives its own width)."""

_CANDIDATE_WIDTH = 24
"""A longer candidate id is cut (with …) in the compact table."""

_MIN_REASON_WIDTH = 12

CHANNELS = ((V.cvu_own, "own"), (V.cvu_order, "order"), (V.cvu_safety_value, "safety"))
"""CVU's channels (:mod:`belief.decision.cvu.channels`) and their column names."""


def console(file: Any = None) -> Any:
    """A rich console: a terminal keeps its width and colours; a pipe or a file gets plain text
    at :data:`PIPE_WIDTH` columns, so a table is as wide as its content."""
    from rich.console import Console

    stream = sys.stdout if file is None else file
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=file, highlight=False, width=None if tty else PIPE_WIDTH,
                   soft_wrap=not tty)


def table_width(con: Any) -> int:
    """The width a compact decision table may take on ``con``: the terminal's width, or
    :data:`COMPACT_WIDTH` in a pipe or a file."""
    return int(con.width) if con.is_terminal else COMPACT_WIDTH


def number(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or an em dash for NaN."""
    return fixed(x, digits)


def fixed(x: Any, decimals: int) -> str:
    """``x`` with ``decimals`` decimals (no "-0.000": a value that rounds to zero has no
    sign), an em dash for NaN or a missing value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(v):
        return "—"
    text = f"{v:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def column_decimals(values: Iterable[Any], errors: Iterable[Any] | None = None,
                    digits: int = 3, most: int = 6) -> int:
    """Decimals for every number of one column.

    With ``errors`` (a Monte Carlo standard error per value) that has a finite positive entry:
    the decimal place of the typical error, ``-floor(log10(median error))`` — one significant
    digit of the error; else ``digits`` significant digits of the largest magnitude,
    ``digits - 1 - floor(log10(max |x|))``.  Clipped to ``[0, most]``; a column of zeros gets
    ``min(digits, most)``."""
    import numpy as np

    def finite(xs: Iterable[Any]) -> np.ndarray:
        a = np.asarray(list(xs), dtype=float).ravel()
        return a[np.isfinite(a)]

    if errors is not None:
        err = finite(errors)
        err = err[err > 0]
        if len(err):
            return int(min(most, max(0, -math.floor(math.log10(float(np.median(err)))))))
    x = np.abs(finite(values))
    if not len(x) or x.max() == 0:
        return min(digits, most)
    return int(min(most, max(0, digits - 1 - math.floor(math.log10(float(x.max()))))))


def shows_channel_split(decision: Any) -> bool:
    """Whether a decision's CVU has a channel besides own learning: some candidate with a
    non-zero order-effect or safety part (:mod:`belief.decision.cvu.channels`)."""
    import numpy as np

    return any(v in decision and bool((np.nan_to_num(decision[v].values.astype(float)) != 0)
                                      .any()) for v in (V.cvu_order, V.cvu_safety_value))


def _shown_channels(decision: Any) -> list[tuple[str, str]]:
    """The channels with a column: own learning, and each other channel non-zero for some
    candidate (none when no channel besides own is)."""
    import numpy as np

    if not shows_channel_split(decision):
        return []
    return [(v, label) for v, label in CHANNELS if v in decision and (
        v == V.cvu_own or bool((np.nan_to_num(decision[v].values.astype(float)) != 0).any()))]


def estimator_label(d: Any) -> str:
    """The CVU estimator of a candidate (``cvu_method``), blank when CVU was not estimated."""
    if V.cvu_method not in d:
        return ""
    method = d[V.cvu_method].values.item() if hasattr(d[V.cvu_method], "values") \
        else d[V.cvu_method]
    return "" if not isinstance(method, str) or method == "not computed" else method


def escape(text: object) -> str:
    """``text`` with rich markup escaped."""
    from rich.markup import escape as _escape

    return _escape(str(text))


def _values(decision: Any, name: str) -> np.ndarray:
    import numpy as np

    n = decision.sizes["candidate"]
    if name not in decision:
        return np.full(n, np.nan)
    return np.asarray(decision[name].values, dtype=float)


def _cvu_errors(decision: Any) -> np.ndarray:
    """CVU's standard error per candidate: ``cvu_se`` (outcome Monte Carlo error and the error
    of the draws), else ``cvu_mcse``, else NaN."""
    for name in (V.cvu_se, V.cvu_mcse):
        if name in decision:
            return _values(decision, name)
    return _values(decision, V.cvu_se)


def _with_error(values: np.ndarray, errors: np.ndarray, decimals: int, sep: str) -> list[str]:
    """``value±error`` per row (the value alone where the error is 0 or unknown)."""
    import numpy as np

    out = []
    for v, e in zip(values, errors, strict=True):
        text = fixed(v, decimals)
        if text != "—" and np.isfinite(e) and e > 0:
            text += f"{sep}{fixed(e, decimals)}"
        out.append(text)
    return out


def number_columns(decision: Any, sep: str = "±") -> dict[str, list[str]]:
    """The decision's numeric columns as text, each with its own decimals
    (:func:`column_decimals`): ``phi_gain``, ``c_lambda``, ``u0``, ``mv``, ``cvu`` (CVU ± its
    error, :func:`_cvu_errors`), ``q`` and ``value_vs_stop`` (to the decimal place of β times
    CVU's error, the Monte Carlo error they carry), ``p_exec_bound``, each channel of
    :data:`CHANNELS` ± its Monte Carlo error, and each ``overrun_<resource>``; ``sep`` joins a
    value and its error."""
    se = _cvu_errors(decision)
    beta = float(decision.attrs.get(schema.Attrs.beta, 1.0) or 0.0)
    out: dict[str, list[str]] = {}
    for name in (V.phi_gain, V.c_lambda, V.u0, V.mv):
        v = _values(decision, name)
        out[name] = [fixed(x, column_decimals(v)) for x in v]
    # the safety bound is read against α_exec: 3 decimals whatever the column's largest value
    # (an untested candidate's bound of 1 would otherwise round 0.0951 and 0.1049 to 0.10)
    out[V.p_exec_bound] = [fixed(x, 3) for x in _values(decision, V.p_exec_bound)]
    cvu = _values(decision, V.cvu)
    out[V.cvu] = _with_error(cvu, se, column_decimals(cvu, se), sep)
    for name in (V.q, V.value_vs_stop):
        v = _values(decision, name)
        out[name] = [fixed(x, column_decimals(v, beta * se)) for x in v]
    for name, _ in CHANNELS:
        v, e = _values(decision, name), _values(decision, f"{name}_mcse")
        out[name] = _with_error(v, e, column_decimals(v, e), sep)
    for name in schema.members(decision, V.overrun):
        v = _values(decision, name)
        out[name] = [fixed(x, column_decimals(v)) for x in v]
    return out


_LOWER_Q = re.compile(r"^feasible, lower Q \([^)]*\) than .+$")


def _short_reason(reason: str) -> str:
    """A reason for the compact table: "feasible, lower Q (x) than m" says no more there than
    the feasible and Q columns and the row marked chosen do, and becomes "lower Q"."""
    return "lower Q" if _LOWER_Q.match(reason) else reason


def gate_caption(attrs: Any) -> str:
    """The safety gate in words: "safety gate: anytime UCB_0.95 <= α_exec 0.1 (frequentist,
    anytime: over every look)" ("" when the decision names no gate: one written before the
    gate's bound was recorded by name gets its method only)."""
    method = attrs.get(A.safety_method)
    if method is None:
        return ""
    from belief.decision.safety import BOUNDS

    label, guarantee = BOUNDS.get(str(method), (f"{method} UCB", ""))
    label = attrs.get(A.safety_bound, label)
    guarantee = attrs.get(A.safety_guarantee, guarantee)
    level = f"_{1 - float(attrs.get(A.delta, 0.05)):g}"
    return (f"safety gate: {label.replace('UCB', 'UCB' + level)} <= α_exec "
            f"{float(attrs.get(A.alpha_exec, float('nan'))):g}"
            + (f" ({guarantee})" if guarantee else ""))


def _cut(text: str, n: int | None) -> str:
    from rich.cells import cell_len, set_cell_size

    if n is None or cell_len(text) <= n:
        return text
    return set_cell_size(text, n - 1) + "…"


_ASCII_SIMPLE_HEAD = None


def _box(ascii_only: bool, wide: bool) -> Any:
    """The table's box: rules under the header only (compact), every rule (wide); ASCII for a
    pipe or a log."""
    from rich import box

    global _ASCII_SIMPLE_HEAD
    if wide:
        return box.ASCII2 if ascii_only else box.HEAVY_HEAD
    if not ascii_only:
        return box.SIMPLE_HEAD
    if _ASCII_SIMPLE_HEAD is None:
        _ASCII_SIMPLE_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n",
                                     ascii=True)
    return _ASCII_SIMPLE_HEAD


def decision_rich_table(decision: Any, title: str, *, wide: bool = False,
                        width: int | None = None, ascii_only: bool | None = None) -> Any:
    """The decision as rich renderables: one row per candidate, the chosen one in green, the
    infeasible ones dimmed.

    Compact (default): candidate, φ(ΔJ), C_λ, U0, CVU ± its standard error (Monte Carlo error
    of the simulated outcomes and of the posterior draws), Q, "vs stop" — the value against
    stopping, U0 + β·E_Y[G0(s^{m,Y})] (worth doing when > 0) —, feasible and the reason, in at
    most ``width`` columns (default :data:`COMPACT_WIDTH`), each row on one line: a reason cut
    to fit is written in full below the table.  When some candidate's CVU has an order-effect
    or safety part (:func:`shows_channel_split`), :func:`channel_rich_table` follows.

    ``wide``: one table with every column — also the role, MV = φ(ΔJ)/C_λ, the CVU estimator
    ("est.": psis+cv, regression, …, or failed), the range [CVU ≥, CVU ≤] of a CVU left
    bounded, CVU's channels (own, and order and safety where non-zero; they sum to CVU), the
    safety bound "P_exec UCB" and, with a cost posterior, "Pr(>b) <resource>" =
    Pr(ΔC_r(m) > b_t,r) — reasons whole.

    ``ascii_only`` (default: stdout is not a terminal) draws ASCII rules, for pipes and logs.
    Numbers: :func:`number_columns`.
    """
    import numpy as np
    from rich.cells import cell_len
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if ascii_only is None:
        ascii_only = not sys.stdout.isatty()
    nums = number_columns(decision)
    ids = [str(c) for c in decision["candidate"].values]
    chosen = decision[V.chosen].values.astype(bool)
    feasible = decision[V.feasible].values.astype(bool)
    reasons = [str(r) for r in decision[V.excluded_reason].values]
    styles = ["bold green" if c else ("" if f else "dim") for c, f in zip(chosen, feasible,
                                                                          strict=True)]
    mark = "<- chosen" if ascii_only else "◀ chosen"
    yes_no = ["yes" if f else "no" for f in feasible]
    vs_stop = nums[V.value_vs_stop] if V.value_vs_stop in decision else ["—"] * len(ids)

    if wide:
        bounded = V.n_deferred in decision and bool((decision[V.n_deferred] > 0).any())
        lows = _with_error(_values(decision, V.cvu_low), np.zeros(len(ids)),
                           column_decimals(_values(decision, V.cvu), _cvu_errors(decision)),
                           "")
        highs = _with_error(_values(decision, V.cvu_high), np.zeros(len(ids)),
                            column_decimals(_values(decision, V.cvu), _cvu_errors(decision)),
                            "")
        role = "role" in decision.variables
        cols: list[tuple[str, str, list[str]]] = [
            ("candidate", "left", ids),
            *([("role", "left", [str(r) for r in decision["role"].values])] if role else []),
            ("φ(ΔJ)", "right", nums[V.phi_gain]), ("C_λ", "right", nums[V.c_lambda]),
            ("U0", "right", nums[V.u0]),
            *([("MV", "right", nums[V.mv])] if V.mv in decision else []),
            ("CVU", "right", nums[V.cvu]),
            ("est.", "left", [estimator_label(decision.isel(candidate=i))
                              for i in range(len(ids))]),
            *([("CVU ≥", "right", lows), ("CVU ≤", "right", highs)] if bounded else []),
            *[(f"CVU {label}", "right", nums[v]) for v, label in _shown_channels(decision)],
            ("Q", "right", nums[V.q]), ("vs stop", "right", vs_stop),
            *([("P_exec UCB", "right", nums[V.p_exec_bound])]
              if V.p_exec_bound in decision else []),
            *[(f"Pr(>b) {r}", "right", nums[schema.per_resource(V.overrun, r)])
              for r in schema.member_resources(decision, V.overrun)],
            ("feasible", "center", yes_no),
            ("reason", "left", [mark if c else r for c, r in zip(chosen, reasons,
                                                                  strict=True)])]
        table = Table(title=title, title_justify="left", pad_edge=True,
                      box=_box(ascii_only, True),
                      caption=gate_caption(decision.attrs) or None, caption_justify="left")
        for name, justify, _ in cols:
            table.add_column(name, justify=justify, no_wrap=name != "reason")
        for i in range(len(ids)):
            table.add_row(*(escape(c[2][i]) for c in cols), style=styles[i])
        return table

    width = COMPACT_WIDTH if width is None else int(width)
    cut_ids = [_cut(c, _CANDIDATE_WIDTH) for c in ids]
    cols = [("candidate", "left", cut_ids), ("φ(ΔJ)", "right", nums[V.phi_gain]),
            ("C_λ", "right", nums[V.c_lambda]), ("U0", "right", nums[V.u0]),
            ("CVU", "right", nums[V.cvu]), ("Q", "right", nums[V.q]),
            ("vs stop", "right", vs_stop), ("feasible", "center", yes_no)]
    used = sum(max(cell_len(name), *(cell_len(x) for x in cells)) for name, _, cells in cols)
    used += 2 * len(cols)  # two spaces between columns (padding collapsed), no edges
    room = max(_MIN_REASON_WIDTH, width - used)
    shown = [mark if c else _cut(_short_reason(r), room)
             for c, r in zip(chosen, reasons, strict=True)]
    table = Table(title=title, title_justify="left", box=_box(ascii_only, False),
                  show_edge=False, pad_edge=False, collapse_padding=True)
    for name, justify, _ in cols:
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("reason", justify="left", no_wrap=True, overflow="ellipsis",
                     max_width=room)
    for i in range(len(ids)):
        table.add_row(*(escape(c[2][i]) for c in cols), escape(shown[i]), style=styles[i])
    parts: list[Any] = [table]
    caption = gate_caption(decision.attrs)
    if caption:  # the safety gate's bound and its guarantee, under the table
        parts.append(Text(caption, style="dim"))
    cut = [(cid, r) for cid, r, s, c in zip(ids, reasons, shown, chosen, strict=True)
           if not c and s != _short_reason(r)]
    if cut:
        parts.append(Text("reasons in full:\n" + "\n".join(f"  {cid}: {r}" for cid, r in cut),
                          style="dim"))
    channels = channel_rich_table(decision, ascii_only=ascii_only)
    if channels is not None:
        parts.append(channels)
    return Group(*parts) if len(parts) > 1 else table


def channel_rich_table(decision: Any, *, ascii_only: bool | None = None) -> Any:
    """CVU split by channel (:mod:`belief.decision.cvu.channels`), one row per candidate: own
    learning and each other channel (order effects, safety) that is non-zero for some
    candidate, each ± its Monte Carlo error on common random numbers; the channels sum to CVU.
    None when no channel besides own learning is non-zero (:func:`shows_channel_split`)."""
    from rich.table import Table

    shown = _shown_channels(decision)
    if not shown:
        return None
    if ascii_only is None:
        ascii_only = not sys.stdout.isatty()
    nums = number_columns(decision)
    table = Table(title="CVU by channel (they sum to CVU)", title_justify="left",
                  box=_box(ascii_only, False), show_edge=False, pad_edge=False,
                  collapse_padding=True)
    table.add_column("candidate", no_wrap=True)
    table.add_column("CVU", justify="right", no_wrap=True)
    for _, label in shown:
        table.add_column(label, justify="right", no_wrap=True)
    chosen = decision[V.chosen].values.astype(bool)
    for i, cid in enumerate(decision["candidate"].values):
        table.add_row(escape(_cut(str(cid), _CANDIDATE_WIDTH)), nums[V.cvu][i],
                      *(nums[v][i] for v, _ in shown),
                      style="bold green" if chosen[i] else "")
    return table
