"""A report a person can read: the fitted belief, the decision and why, in HTML or Markdown.

Sections: what was fitted (evidence and its source, sampler settings and seed, candidates'
SHA-256; "not recorded" where an older file does not hold them), convergence per model (R-hat,
ESS, divergences), posterior gains per candidate with intervals, the decision (the columns a
decision needs — Q = U0 + β·CVU, the value against stopping, feasibility and the reason each
candidate was excluded —, the rest in a collapsed details section), execution-
safety bounds against α_exec, the deployment chance constraint on the current policy, the
transfer delta δ_J (reported, never scored) and the sensitivities per policy (candidate
generation, never a value input).

HTML reports are self-contained (figures embedded as base64 PNG) and fit a 1280 px screen
(tables wrap their text; a table too wide anyway scrolls in its own box, never the page);
Markdown reports link their figures, written as PNG files into ``<stem>_files/`` next to the
``.md``.  Every table keeps one number of decimals per column
(:func:`belief.report.tables.column_decimals`).
"""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.decision import schema
from belief.decision.schema import Vars as V
from belief.errors import InputError
from belief.report.tables import gate_caption

__all__ = ["DECISION_COLUMNS", "DETAIL_COLUMNS", "FORMATS", "LABELS", "belief_figures",
           "check_decision_matches", "decision_figures", "decision_only_figures",
           "feasibility_figures", "figure_order", "gate_path", "render_report", "value_figures",
           "write_report"]

FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}

LABELS = {"role": "role", **schema.LABELS}
"""The decision's column names, as the terminal table shows them (the variables' labels are
declared in :data:`belief.decision.schema.LABELS`)."""


def decision_figures(fitted: Any, decision: xr.Dataset | None) -> dict[str, Any]:
    """The report's matplotlib figures by file stem: ``gains``, ``order_effects`` (with order
    effects), ``q_decomposition``, ``safety`` (when a decision is given),
    ``sensitivity_<policy>``, and with a cost posterior in q_t ``costs`` (predicted against
    realised cost per candidate) and ``overrun`` (the decision's overrun probability per
    resource, when it has them).

    The union of :func:`belief_figures` (what the belief alone determines) and
    :func:`decision_only_figures`, in :func:`figure_order`."""
    figs = {**belief_figures(fitted), **decision_only_figures(fitted, decision)}
    return {name: figs[name] for name in figure_order(figs)}


def figure_order(names: Any) -> list[str]:
    """``names`` in the order :func:`decision_figures` lists its figures: gains, order effects,
    Q decomposition, safety, sensitivities, costs, overrun (unknown names last, in order)."""
    rank = {"gains": 0, "sim_proxy": 0.5, "order_effects": 1, "q_decomposition": 2, "safety": 3,
            "costs": 5, "overrun": 6}
    names = list(names)
    return sorted(names, key=lambda n: (rank.get(n, 4 if n.startswith("sensitivity_") else 7),
                                        names.index(n)))


def belief_figures(fitted: Any) -> dict[str, Any]:
    """The figures of :func:`decision_figures` that do not depend on the decision:
    ``order_effects``, ``sensitivity_<policy>``, ``costs`` and, with simulated paired
    evaluations, ``sim_proxy``."""
    from belief.report.plots import plot_order_effects, plot_sensitivity

    figs: dict[str, Any] = {}
    if "gains_gamma" in fitted.belief:
        ax = plot_order_effects(fitted.belief)
        ax.set_title("order effects: what ran earlier does to a later candidate's gain",
                     fontsize=9)
        _tight(ax.figure)
        figs["order_effects"] = ax.figure
    for policy, rep in fitted.sensitivity_reports().items():
        ax = plot_sensitivity(rep)
        _tight(ax.figure)
        figs[f"sensitivity_{_slug(policy)}"] = ax.figure
    figs.update(_cost_figures(fitted))
    figs.update(_sim_proxy_figure(fitted))
    return figs


def _sim_proxy_figure(fitted: Any) -> dict[str, Any]:
    """``sim_proxy`` (sim against real gains with the learned calibration,
    :func:`belief.report.plots.plot_sim_proxy`) when the belief has simulated evaluations."""
    if "sim_proxy_sim_share" not in fitted.belief or "sim_proxy" not in fitted.idata.children:
        return {}
    from belief.report.plots import plot_sim_proxy

    node = fitted.idata["sim_proxy"]
    if "a" not in node["posterior"]:  # a fixed calibration: nothing learned to draw
        return {}
    lens_of = {c.id: c.lens for c in fitted.candidate_set}
    return {"sim_proxy": plot_sim_proxy(node, lens_of)}


def decision_only_figures(fitted: Any, decision: xr.Dataset | None) -> dict[str, Any]:
    """The figures of :func:`decision_figures` that depend on the decision: ``gains`` (which
    marks the candidates that cannot be chosen; drawn without marks when ``decision`` is
    None), ``q_decomposition``, ``safety`` and, with a cost posterior in q_t, ``overrun`` —
    :func:`feasibility_figures` and :func:`value_figures` of the decision."""
    figs = feasibility_figures(fitted, decision)
    if decision is not None:
        figs.update(value_figures(fitted, decision))
    return figs


def feasibility_figures(fitted: Any, gate: xr.Dataset | None) -> dict[str, Any]:
    """``gains`` and ``safety``: the figures that read of the decision only its feasible set
    and safety gate (:func:`belief.decision.engine.gate_view`, or the decision itself), so
    they can be drawn before CVU is known; ``gains`` alone, unmarked, for ``gate`` None."""
    from belief.report.plots import plot_gains, plot_safety_bounds

    figs: dict[str, Any] = {}
    ax = plot_gains(fitted.belief, decision=gate)
    ax.set_title(f"posterior-predictive gain of the next execution from {fitted.policy} "
                 f"(step {fitted.step})", fontsize=9)
    _tight(ax.figure)
    figs["gains"] = ax.figure
    if gate is not None:
        ax = plot_safety_bounds(gate)
        _tight(ax.figure)
        figs["safety"] = ax.figure
    return figs


def value_figures(fitted: Any, decision: xr.Dataset) -> dict[str, Any]:
    """``q_decomposition`` and, with a cost posterior in q_t, ``overrun``: the figures of the
    decision's values."""
    from belief.report.plots import plot_q_decomposition

    ax = plot_q_decomposition(decision)
    _tight(ax.figure)
    figs = {"q_decomposition": ax.figure}
    if "cost" in fitted.belief:
        figs.update(_overrun_figure(decision))
    return figs


def _cost_figures(fitted: Any) -> dict[str, Any]:
    """``costs`` (see :func:`decision_figures`); none with known costs."""
    from belief.report.cost_plots import cost_intervals, plot_cost_predictions

    figs: dict[str, Any] = {}
    if "cost" not in fitted.belief:
        return figs
    costs = fitted.costs
    resources = list(fitted.candidate_set.resources)
    realised = (costs.melt(id_vars=["candidate"], value_vars=resources, var_name="resource")
                .rename(columns={"candidate": "label"}) if len(costs) else None)
    axes = plot_cost_predictions(cost_intervals(fitted.belief["cost"]), realised)
    _tight(axes[0].figure)
    figs["costs"] = axes[0].figure
    return figs


def _overrun_figure(decision: xr.Dataset) -> dict[str, Any]:
    """``overrun`` when the decision has overrun probabilities (a cost posterior in q_t)."""
    if not schema.members(decision, V.overrun):
        return {}
    from belief.report.cost_plots import plot_overrun_probability

    ax = plot_overrun_probability(decision)
    _tight(ax.figure)
    return {"overrun": ax.figure}


def _tight(fig: Any) -> None:
    """``fig.tight_layout()``, leaving the figure without a layout engine: tight_layout leaves
    a placeholder engine, and with any engine ``savefig`` draws the whole figure once more
    before rendering it (the layout is already done; the PNG is the same).  The engine is
    cleared with ``figure.autolayout`` and ``figure.constrained_layout.use`` off: with either on
    in a user's rcParams, ``set_layout_engine(None)`` would install that engine again."""
    import matplotlib

    fig.tight_layout()
    with matplotlib.rc_context({"figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text))


def _png(fig: Any) -> bytes:
    from belief.report.png import save_png

    buf = io.BytesIO()
    save_png(fig, buf)
    return buf.getvalue()


def _fmt(v: Any) -> str:
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return "—"
        return f"{v:.4g}"
    return str(v)


_NUMBER = re.compile(r"^(—|[-+]?\d+(\.\d+)?( ± \d+(\.\d+)?)?)$")
"""A cell that is a number (or a number ± its error, or an em dash): right-aligned."""

_FIXED_DECIMALS = {"rhat": 3, "ess_bulk": 0, "ess_tail": 0}
"""Columns whose decimals are set, not read from their values: R-hat against its 1.01 rule,
ESS as a count."""


def _column_text(df: pd.DataFrame) -> list[list[str]]:
    """The cells of ``df`` as text, one number format per column: a float column with the
    decimals of :func:`belief.report.tables.column_decimals` (three significant digits of its
    largest magnitude; :data:`_FIXED_DECIMALS` for R-hat and ESS), a text cell left as it is
    (a column the caller formatted already, e.g. CVU ± its error)."""
    from belief.report.tables import column_decimals, fixed

    cols = []
    for name in df.columns:
        values = df[name]
        if pd.api.types.is_float_dtype(values.dtype):
            d = _FIXED_DECIMALS.get(str(name), column_decimals(values.to_numpy()))
            cols.append([fixed(v, d) for v in values])
        else:
            cols.append([_fmt(v) for v in values])
    return [list(row) for row in zip(*cols, strict=True)] if cols else []


class _Doc:
    """A tiny writer with the same calls for HTML and Markdown."""

    def __init__(self, fmt: str, figures: dict[str, bytes], files_dir: str) -> None:
        self.fmt = fmt
        self.parts: list[str] = []
        self.figures = figures
        self.files_dir = files_dir

    def h(self, level: int, text: str) -> None:
        if self.fmt == "html":
            self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
        else:
            self.parts.append(f"{'#' * level} {text}\n")

    def p(self, text: str) -> None:
        if self.fmt == "html":
            self.parts.append(f"<p>{html.escape(text)}</p>")
        else:
            self.parts.append(text + "\n")

    def items(self, rows: list[str]) -> None:
        if self.fmt == "html":
            self.parts.append("<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in rows)
                              + "</ul>")
        else:
            self.parts.append("\n".join(f"- {r}" for r in rows) + "\n")

    def table(self, df: pd.DataFrame, index: bool = True,
              row_class: list[str] | None = None) -> None:
        df = df.reset_index() if index else df
        cols = [str(c) for c in df.columns]
        rows = _column_text(df)
        if self.fmt == "html":
            numeric = [all(_NUMBER.match(r[j]) for r in rows) and len(rows) > 0
                       for j in range(len(cols))]
            head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
            classes = row_class or [""] * len(rows)
            body = "".join((f"<tr class=\"{k}\">" if k else "<tr>") + "".join(
                f"<td class=\"num\">{html.escape(v)}</td>" if n else f"<td>{html.escape(v)}</td>"
                for v, n in zip(r, numeric, strict=True)) + "</tr>"
                for r, k in zip(rows, classes, strict=True))
            self.parts.append(f"<div class=\"table\"><table><thead><tr>{head}</tr></thead>"
                              f"<tbody>{body}</tbody></table></div>")
        else:
            def esc(s: str) -> str:
                return s.replace("|", "\\|").replace("\n", " ")

            lines = ["| " + " | ".join(esc(c) for c in cols) + " |",
                     "|" + "|".join("---" for _ in cols) + "|"]
            lines += ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows]
            self.parts.append("\n".join(lines) + "\n")

    def details(self, summary: str) -> None:
        """Open a collapsed section (HTML ``<details>``; a level-3 heading in Markdown)
        closed by :meth:`end_details`."""
        if self.fmt == "html":
            self.parts.append(f"<details><summary>{html.escape(summary)}</summary>")
        else:
            self.parts.append(f"### {summary}\n")

    def end_details(self) -> None:
        if self.fmt == "html":
            self.parts.append("</details>")

    def figure(self, name: str, caption: str) -> None:
        if name not in self.figures:
            return
        if self.fmt == "html":
            data = base64.b64encode(self.figures[name]).decode("ascii")
            self.parts.append(f'<figure><img alt="{html.escape(name)}" '
                              f'src="data:image/png;base64,{data}"/><figcaption>'
                              f"{html.escape(caption)}</figcaption></figure>")
        else:
            self.parts.append(f"![{caption}]({self.files_dir}/{name}.png)\n\n*{caption}*\n")

    def render(self, title: str) -> str:
        if self.fmt == "html":
            return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
                    + "\n".join(self.parts) + "\n</body></html>\n")
        return "\n".join(self.parts)


_CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
        "color:#222}div.table{max-width:100%;overflow-x:auto}"
        "table{border-collapse:collapse;margin:0.5em 0 1.2em;font-size:0.85em}"
        "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}"
        "td{overflow-wrap:break-word}td:first-child{white-space:nowrap}"
        "td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}"
        "th{background:#f3f3f3}"
        "tr.chosen td{font-weight:600;background:#eef7ee}tr.infeasible td{color:#777}"
        "details{margin:0 0 1.2em}summary{cursor:pointer;color:#333}"
        "figure{margin:0.5em 0 1.5em}img{max-width:100%;height:auto}figcaption{font-size:0.85em;"
        "color:#555}h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:0.2em}")


DECISION_COLUMNS = (V.phi_gain, V.c_lambda, V.u0, V.cvu, V.q, V.value_vs_stop, V.feasible,
                    V.excluded_reason)
"""The decision table's columns (after the candidate): what a decision needs.  The other
columns of a decision are in its details (:func:`_decision_tables`)."""

DETAIL_COLUMNS = ("role", V.mv, V.cvu_method, V.cvu_se, V.cvu_mcse, V.cvu_draws_se, V.cvu_low,
                  V.cvu_high, V.p_exec_bound, V.chosen)
"""The decision's details: the role, MV, the CVU estimator and its errors (the range of a CVU
left bounded), the safety bound, and which candidate was chosen."""


def _decision_tables(doc: _Doc, decision: xr.Dataset) -> None:
    """The decision table (:data:`DECISION_COLUMNS`), then a collapsed section with the
    details (:data:`DETAIL_COLUMNS`) and CVU's split by channel.  Numbers as the terminal
    table formats them (:func:`belief.report.tables.number_columns`): one decimal place per
    column, from its Monte Carlo error where it has one."""
    from belief.report.tables import CHANNELS, number_columns

    ids = pd.Index([str(c) for c in decision["candidate"].values], name="candidate")
    nums = number_columns(decision, sep=" ± ")
    labels = {**LABELS, V.cvu: "CVU ± error"}
    main = pd.DataFrame({labels[c]: nums[c] if c in nums else decision[c].values
                         for c in DECISION_COLUMNS if c in decision.variables}, index=ids)
    if V.feasible in decision:
        main[labels[V.feasible]] = decision[V.feasible].values.astype(bool)
    doc.table(main, row_class=["chosen" if c else ("infeasible" if not f else "")
                               for c, f in zip(decision[V.chosen].values.astype(bool),
                                               decision[V.feasible].values.astype(bool),
                                               strict=True)])
    doc.p("φ(ΔJ): the decision functional of the predictive gain; C_λ = λᵀΔC, the weighted "
          "cost; U0 = φ(ΔJ) − C_λ; CVU: the continuation value ± its standard error (the Monte "
          "Carlo error of the simulated outcomes and of the posterior draws, cvu_se); Q = U0 + "
          "β·CVU ranks; vs stop = U0 + β·E_Y[G0(s^{m,Y})] is compared with 0. Each column "
          "keeps one number of decimals: CVU, Q and vs stop to the decimal place of CVU's "
          "typical error, the others to three significant digits of the column's largest "
          "value.")
    bounded = V.n_deferred in decision and bool((decision[V.n_deferred] > 0).any())
    detail = [c for c in DETAIL_COLUMNS if c in decision.variables
              and (bounded or c not in (V.cvu_low, V.cvu_high))]
    doc.details("Details: role, MV, the CVU estimator and its errors, the safety bound, CVU "
                "by channel")
    table = pd.DataFrame({LABELS.get(c, c): decision[c].values for c in detail}, index=ids)
    if "role" in table:
        table["role"] = table["role"].astype(str)
    doc.table(table)
    doc.p("MV = φ(ΔJ) / C_λ, the gain per unit of weighted cost, is an efficiency reading "
          "only: it ranks nothing, is undefined (—) when C_λ = 0, and says nothing about "
          "diagnosis and model-update candidates, whose immediate gain is 0 by definition "
          "(their value is in CVU). cvu_se = √(cvu_mcse² + cvu_draws_se²); CVU ≥ and CVU ≤ "
          "bound a CVU whose untrusted outcomes were left unrefit (+bounded).")
    channels = [(v, f"CVU {label}") for v, label in CHANNELS if v in decision]
    if channels:
        split = pd.DataFrame({label: nums[v] for v, label in channels}, index=ids)
        doc.table(split)
        doc.p("CVU own / order / safety split CVU by channel, in that order (they sum to "
              "CVU): own = with only the gains of m and its siblings learnt (and budget, λ, "
              "policy and candidate set changed); order = what m's order effects γ_{m→·} on "
              "later candidates add; safety = what the gate of s_{t+1} moved by m's simulated "
              "unsafe count adds; each ± its Monte Carlo error on common random numbers "
              "(belief.decision.cvu.channels).")
    doc.end_details()


_NOT_RECORDED = "not recorded"


def _provenance_lines(fitted: Any) -> list[str]:
    """The header's evidence and sampler lines from :meth:`FittedBelief.provenance
    <belief.workflow.fitted.FittedBelief.provenance>`: what a file does not hold (written
    before it was recorded) says "not recorded"."""
    p = fitted.provenance()
    rows = ", ".join(f"{k} {v}" for k, v in p["evidence_rows"].items() if v) or "no rows"
    sampler = (f"{p['chains']} chains × {p['draws']} draws (+{p['tune']} tuning)"
               if None not in (p["chains"], p["draws"], p["tune"])
               else f"settings {_NOT_RECORDED}")
    seed = _NOT_RECORDED if p["seed"] is None else p["seed"]
    return [f"evidence: {p['evidence_source'] or f'source {_NOT_RECORDED}'} — {rows}",
            f"sampler: {sampler}, seed {seed}; models: " + ", ".join(fitted.models)]


def render_report(fitted: Any, decision: xr.Dataset | None, fmt: str = "html",
                  files_dir: str = "report_files", alpha_deploy: float = 0.05,
                  figures: dict[str, Any] | None = None) -> tuple[str, dict[str, bytes]]:
    """The report's text and its figures as PNG bytes (see :func:`write_report`)."""
    if fmt not in ("html", "md"):
        raise InputError("report", f"format must be html or md, got {fmt!r}")
    import matplotlib.pyplot as plt

    figs = figures if figures is not None else decision_figures(fitted, decision)
    pngs = {name: _png(fig) for name, fig in figs.items()}
    if figures is None:
        for fig in figs.values():
            plt.close(fig)
    doc = _Doc(fmt, pngs, files_dir)
    q = fitted.belief
    s = fitted.settings
    title = f"belief report — policy {fitted.policy}, step {fitted.step}"
    doc.h(1, title)
    reliable = fitted.reliable
    doc.items([
        f"belief file: {fitted.path or '(not saved)'}; belief version "
        f"{fitted.provenance()['belief_version']}",
        f"candidates: {Path(fitted.candidates.source).name} ({len(fitted.candidate_set)} "
        f"candidates, SHA-256 {fitted.candidates.sha256[:12]}…)",
        f"current policy {fitted.policy}: {s.get('policy_rule', 'given')}; history: "
        + (" → ".join(fitted.history()) or "none"),
        *_provenance_lines(fitted),
        "fit reliable (gains and execution risk converged)" if reliable else
        f"UNRELIABLE FIT: {q.attrs.get('reliability_reason', '')} — decisions built on it are "
        "flagged",
    ])

    if decision is not None:
        a = decision.attrs
        doc.h(2, "Decision")
        chosen = a.get("chosen")
        head = (f"Recommendation: {chosen}" if not a.get("stop") else
                f"Recommendation: stop — {a.get('stop_reason')}")
        doc.p(head)
        named = {r: (schema.per_resource(schema.Attrs.lambda_, r),
                     schema.per_resource(schema.Attrs.budget, r))
                 for r in fitted.candidate_set.resources}
        lam = ", ".join(f"{r}={a[k]:g}" for r, (k, _) in named.items() if k in a)
        bud = ", ".join(f"{r}={a[k]:g}" for r, (_, k) in named.items() if k in a)
        doc.items([
            f"functional φ = {a.get('functional')}, β = {a.get('beta')}; Q = U0 + β·CVU, "
            "U0 = φ(ΔJ) − λᵀΔC",
            "Q = U0 + β·CVU ranks the candidates; value_vs_stop = U0 + β·E_Y[G0(s^{m,Y})] "
            f"= Q + β·G0(s^∅) (G0(s^∅) = {_fmt(a.get('g0_null', 0.0))}) compares each with "
            "stopping: stop when none is > 0",
            f"budget b_t: {bud} ({a.get('budget_source', '')})",
            f"weights λ: {lam} ({a.get('weights_source', '')})",
            f"CVU: {a.get('cvu_status')}; {a.get('cvu_refits', '')}; cvu_se = "
            "√(cvu_mcse² + cvu_draws_se²): the Monte Carlo error of the simulated outcomes "
            "and of the posterior draws; cvu_method is the estimator (psis+cv: importance "
            "reweighting with control variates, regression: for informative studies; "
            "+refit: outcomes with untrusted weights refit exactly; +bounded: such outcomes "
            "left unrefit because no refit could change the choice, CVU within "
            "[cvu_low, cvu_high])",
            f"decision stability: Pr(argmax flips) = {_fmt(a.get('flip_probability'))} "
            "under posterior resampling and CVU's Monte Carlo error (a proxy, not a value)",
            gate_caption(a).replace("<=", "≤"),
        ] + ([] if a.get("reliable", 1) else
             [f"built on an unreliable fit: {a.get('reliability_reason')}"]))
        _decision_tables(doc, decision)
        doc.figure("q_decomposition", "Q decomposition: U0 (blue) and β·CVU (orange) per "
                                      "candidate; grey/hatched = infeasible; ★ = chosen")

    doc.h(2, "Posterior gains per candidate")
    doc.p("Posterior-predictive gain ΔJ of the next execution from the current policy, on the "
          "success-probability scale (diagnosis and model-update candidates have ΔJ = 0 by "
          "definition; their value is in CVU).")
    gains = fitted.gains_summary()
    doc.table(gains)
    if "own_share" in gains:
        doc.p("own share: how much of each candidate's belief comes from its own evidence "
              "rather than from the pooled lens and method levels, 1 − Var_post(ε_m) / "
              "E_post[σ_m²] with ε_m its deviation from the pooled prediction (0 = all "
              "pooled, 1 = pinned down by its own results; in a normal–normal model the "
              "shrinkage weight σ²/(σ² + s²)). The pooling scales are learned from the data.")
    if "sim_share" in gains:
        doc.p("sim share: how much of each candidate's belief about its real logit gain θ_m "
              "comes from the simulated paired evaluations, 1 − Var(θ_m | real and sim data) "
              "/ Var(θ_m | real data only), both posteriors of the sim-proxy model (the "
              "second fitted without the sim rows). It counts only what the simulator has "
              "been seen to predict: the calibration θ_sim = a_l + b_l·θ + ε (ε ~ N(0, σ_l²)) "
              "is learned per lens from the candidates evaluated in both, so a simulator "
              "that does not track reality adds ≈ 0. 0.5 means the sim rows halved the "
              "variance, as many real trials again would have; values within Monte Carlo "
              "error of 0 may be slightly negative.")
    doc.figure("gains", "mean and 90 % equal-tailed interval per candidate")
    if "sim_proxy" in doc.figures:
        doc.figure("sim_proxy", "sim against real logit gain per lens: posterior means and 90 % "
                                "intervals of the candidates evaluated in simulation, the "
                                "learned calibration a + b·x and its 90 % band")

    order = fitted.order_effects()
    if "gains_gamma" in q:
        doc.h(2, "Order effects γ: complements and substitutes")
        doc.p("The logit gain of m executed after a is θ_m ρ^k + Σ_{a ∈ h} γ_{a→m}: γ > 0 "
              "means a makes m worth more (a complement), γ < 0 less (a substitute). Actors a "
              "are the adaptations on the lineage and the executed model updates; without "
              "evidence γ keeps its prior, centred at no interaction. The 'history' column "
              "of the gains table is Σ_{a ∈ h} γ_{a→m} for the history that led here.")
        shown = order[(order["evidence"] > 0) | order["stated"]]
        if len(shown):
            doc.table(shown.set_index(["source", "target"]).round(4))
        else:
            doc.p("No candidate has yet been evaluated after another actor: every γ is at "
                  "its prior.")
        doc.figure("order_effects", "γ with 90 % intervals (pairs with evidence or a stated "
                                    "prior); n = evaluated executions after the actor")

    if "cost" in q:
        doc.h(2, "Uncertain costs")
        doc.p("Costs are a posterior too: ΔC_r(m) of the next execution from the hierarchical "
              "log-normal cost model fitted to the realised costs (the candidate file's cost "
              "is the prior median). C_λ and U0 use E[λᵀΔC]; the budget is the chance "
              "constraint Pr(ΔC_r(m) ≤ b_t,r) ≥ 1 − ε_budget for every resource r.")
        doc.figure("costs", "predicted cost of the next execution (90 % interval, median) per "
                            "candidate and resource, with the realised costs logged so far")
        if decision is not None and "overrun" in doc.figures:
            over = schema.members(decision, V.overrun)
            doc.table(decision[over].to_dataframe().round(4))
            eps = decision.attrs.get(schema.Attrs.eps_budget, 0)
            doc.figure("overrun", f"Pr(ΔC_r(m) > b_t,r) per candidate and resource; red box: "
                                  f"above ε_budget = {eps:g}")

    doc.h(2, "Execution safety against α_exec")
    if decision is not None:
        hw = [c.id for c in fitted.candidate_set if c.drives_hardware]
        if hw:
            from belief.decision.safety import clopper_pearson_interval

            sub = decision.sel(candidate=hw)
            delta = float(a.get("delta", 0.05))
            n_exec = q["executions"].sel(candidate=hw).values
            n_unsafe = q["unsafe"].sel(candidate=hw).values
            low, high = clopper_pearson_interval(n_unsafe, n_exec, 1 - 2 * delta)
            level = f"{1 - 2 * delta:.0%}"
            safety = pd.DataFrame({
                "executions": n_exec, "unsafe": n_unsafe,
                f"CP {level} interval": [f"[{lo:.3f}, {hi:.3f}]" if n else "no data"
                                          for lo, hi, n in zip(low, high, n_exec, strict=True)],
                **({f"UCB_{1 - delta:g} anytime (every look)": sub["ucb_anytime"].values}
                   if "ucb_anytime" in sub else {}),
                f"UCB_{1 - delta:g} Clopper–Pearson (one look)":
                    sub["ucb_clopper_pearson"].values,
                f"UCB_{1 - delta:g} posterior (credible)": sub["ucb_posterior"].values,
                "bound used": sub["p_exec_bound"].values,
                "passes": sub["safe"].values.astype(bool),
                "reason": sub["safe_reason"].values.astype(str)},
                index=pd.Index(hw, name="candidate"))
            doc.table(safety)
            doc.p(f"The gate decides with the {gate_caption(a).removeprefix('safety gate: ')}"
                  f". The anytime bound is a confidence sequence: Pr(the bound ever falls "
                  f"below the true P_exec, at any look) ≤ δ, so it keeps its guarantee over a "
                  f"campaign that looks after every step; the one-sided Clopper–Pearson bound "
                  f"at 1 − δ = {1 - delta:g} (the upper end of the two-sided exact interval "
                  f"at {level}) holds at one look only; the posterior bound is the "
                  f"execution-risk model's credible bound, not a frequentist one.")
            path = gate_path(fitted.evidence.safety, hw, a)
            if len(path) > 1:
                doc.p("The deciding bound over the campaign's looks (one look per step, on the "
                      "safety events logged up to it; executions/unsafe, then the bound):")
                doc.table(path)
        doc.figure("safety", "upper bounds of P_exec(unsafe | m) against α_exec (dashed)")
    else:
        doc.p("No decision given: the safety gate is evaluated with the decision's α_exec.")
    risk = fitted.exec_risk_summary()
    if len(risk):
        doc.p("Execution risk on the probability scale from the hierarchical model: each "
              "hardware candidate's posterior, and the population level — the typical "
              "candidate and the posterior-predictive risk of a new, untested candidate on "
              "each hardware group and on new hardware (90 % intervals; CP = exact "
              "Clopper–Pearson interval of the counts alone).")
        doc.table(risk)
    dep = fitted.deployment_check(alpha_deploy=alpha_deploy)
    d = dep.attrs
    doc.p(f"Deployment chance constraint on {d['policy']} (checked at the stop, from deployment "
          f"evidence only): {d['reason']}.")

    if "delta_j" in q:
        doc.h(2, "Transfer delta δ_J = J_real − J_sim (reported, never scored)")
        dj = q["delta_j"]
        lo, hi = dj.quantile([0.05, 0.95], "sample")
        tr = pd.DataFrame({"mean": dj.mean("sample").values, "q5": lo.values, "q95": hi.values,
                           "evaluations": q["transfer_rows"].values},
                          index=pd.Index(q["transfer_policy"].values.astype(str),
                                         name="policy"))
        doc.table(tr)
        doc.p("Policies with 0 evaluations get the pooled prediction.")

    reports = fitted.sensitivity_reports()
    if reports:
        doc.h(2, "Sensitivities S_k(π) (candidate generation, never a value input)")
        doc.p("Per policy, per standard deviation of ξ_k; directions are ranked within a "
              "policy only — sensitivities are not comparable across policies.")
        from belief.posterior.sensitivity import prioritise

        for policy, rep in reports.items():
            doc.h(3, f"policy {policy}")
            doc.table(rep.ranking.round(4))
            if len(rep.synergy):
                doc.table(rep.synergy[["gamma_mean", "gamma_lo", "gamma_hi",
                                       "p_synergy"]].round(4))
            doc.figure(f"sensitivity_{_slug(policy)}", f"S_k({policy}) with 90 % intervals")
            pr = prioritise(rep, fitted.candidate_set)
            doc.p(f"Top directions {pr.directions}; worth scoring: "
                  f"{', '.join(pr.worth_scoring)}.")
        if fitted.policy not in reports:
            doc.p(f"The current policy {fitted.policy} has no sensitivity runs: the rankings "
                  "above are about other policies and do not carry over.")

    doc.h(2, "Convergence")
    conv = fitted.convergence()
    doc.p(f"Thresholds: R-hat ≤ {conv.attrs['rhat_max']:g}, bulk and tail ESS ≥ "
          f"{conv.attrs['ess_min']:g}, no divergent transitions.")
    doc.table(conv[["rhat", "rhat_at", "ess_bulk", "ess_tail", "divergences", "passed",
                    "problem", "note"]])
    return doc.render(title), pngs


def check_decision_matches(fitted: Any, decision: xr.Dataset, label: str = "decision", *,
                           require_digest: bool = False) -> None:
    """Refuse a decision that was not made from this belief.

    Checked: the candidates (SHA-256 of the candidate file), the policy and step, and the
    belief itself (``belief_sha256``, the :func:`belief.files.dataset_digest` of q_t that
    :meth:`belief.workflow.fitted.FittedBelief.decide` stores): two fits with the same
    candidates, policy and step are different beliefs.  ``require_digest`` refuses a decision
    that does not say which belief it came from (a decision file always does).
    """
    from belief.files import dataset_digest

    a = decision.attrs
    if a.get("candidates_sha256") not in (None, fitted.candidates.sha256):
        raise InputError(label, "the decision was made from other candidates than the "
                                "belief's (candidate SHA-256 differs)")
    if a.get("policy") != fitted.policy or int(a.get("step", -1)) != fitted.step:
        raise InputError(label, f"the decision is for policy {a.get('policy')!r} at step "
                                f"{a.get('step')}, the belief for {fitted.policy!r} at step "
                                f"{fitted.step}")
    digest = a.get("belief_sha256")
    if digest is None:
        if require_digest:
            raise InputError(label, "the decision does not say which belief it came from (no "
                                    "belief_sha256): decide again from this belief")
        return
    if digest != dataset_digest(fitted.belief):
        raise InputError(label, "the decision was made from another belief (same candidates, "
                                "policy and step, but the belief's SHA-256 differs): decide "
                                "again from this belief")


def write_report(fitted: Any, decision: xr.Dataset | None, path: str | Path,
                 fmt: str | None = None, alpha_deploy: float = 0.05) -> Path:
    """Write the report to ``path`` (format from the suffix: ``.html`` or ``.md``).

    Everything is rendered first; then the report is written through a temporary file and a
    rename — with its figures, for Markdown, as one set (:class:`belief.files.OutputSet`: a
    re-run never leaves the figure of an earlier run behind in ``<stem>_files/``).

    Raises
    ------
    InputError
        For an unknown format or a decision made from another belief
        (:func:`check_decision_matches`).
    """
    from belief.files import OutputSet, atomic_write

    path = Path(path)
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt not in ("html", "md"):
        raise InputError(str(path), f"report format from the suffix {path.suffix!r}: use .html "
                                    "or .md")
    if decision is not None:
        check_decision_matches(fitted, decision, "--decision")
    files_dir = f"{path.stem}_files"
    text, pngs = render_report(fitted, decision, fmt, files_dir, alpha_deploy)
    if fmt == "html":
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        return path
    with OutputSet(path.parent, f"report-{path.name}") as outputs:
        for name, data in pngs.items():
            outputs.write(f"{files_dir}/{name}.png",
                          lambda tmp, data=data: Path(tmp).write_bytes(data))
        outputs.write(path.name, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


def gate_path(safety: pd.DataFrame, candidates: list[str], attrs: Any) -> pd.DataFrame:
    """The gate's bound of each candidate over the looks of a campaign: at every step t with
    safety events, the counts (n, k) summed over the events of steps ≤ t and the bound the gate
    decides with (``anytime`` or ``clopper_pearson``, :meth:`SafetyGate.count_bound`; the
    posterior gate has no path from counts: empty).  One row per step, cells "k/n: bound"."""
    from belief.decision.safety import SafetyGate

    method = str(attrs.get("safety_method", "anytime"))
    if method == "posterior" or safety is None or not len(safety) or not candidates:
        return pd.DataFrame()
    gate = SafetyGate(alpha_exec=float(attrs.get("alpha_exec", 0.1)),
                      delta=float(attrs.get("delta", 0.05)), method=method)
    steps = sorted(int(t) for t in safety["step"].unique())
    sums = (safety.groupby(["step", "candidate"])[["executions", "unsafe"]].sum()
            .unstack("candidate").reindex(index=steps, fill_value=0).fillna(0).cumsum())
    rows = {}
    for cid in candidates:
        if ("executions", cid) not in sums:
            continue
        n = sums[("executions", cid)].to_numpy().astype(int)
        k = sums[("unsafe", cid)].to_numpy().astype(int)
        bound = gate.count_bound(k, n)
        rows[cid] = [f"{kk}/{nn}: {b:.3f}" for kk, nn, b in zip(k, n, bound, strict=True)]
    return pd.DataFrame(rows, index=pd.Index(steps, name="step"))
