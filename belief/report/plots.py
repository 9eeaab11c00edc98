"""Figures people would rather look at than read (matplotlib; ArviZ for posterior plots)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

__all__ = ["plot_gains", "plot_order_effects", "plot_q_decomposition", "plot_safety_bounds",
           "plot_sensitivity", "plot_sim_proxy"]


def plot_q_decomposition(decision: xr.Dataset, ax: plt.Axes | None = None) -> plt.Axes:
    """Q = U0 + β·CVU per candidate as horizontal bars; the chosen one is marked.

    When U0 and β·CVU have the same sign, β·CVU is stacked at the end of U0 (the bar ends at Q).
    When their signs differ, stacking would hide one bar under the other, so the two are drawn
    side by side from 0 (U0 above, β·CVU below, each half as thick) and the dot marks Q.
    Infeasible candidates are drawn hatched and grey.  Where a candidate's CVU has an
    order-effect or safety part (:mod:`belief.decision.cvu.channels`), β times each is written
    beside its bar.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ids = list(decision["candidate"].values)
    u0 = decision["u0"].values.astype(float)
    bonus = np.nan_to_num(decision.attrs.get("beta", 0.0) * decision["cvu"].values.astype(float))
    q = decision["q"].values.astype(float)
    feasible = decision["feasible"].values.astype(bool)
    chosen = decision["chosen"].values.astype(bool)
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.5 * len(ids) + 1.6))
    y = np.arange(len(ids))[::-1].astype(float)
    split = (np.sign(u0) * np.sign(bonus) < 0)  # opposite signs: side by side
    c_u0 = np.where(feasible, "C0", "0.75")
    c_cvu = np.where(feasible, "C1", "0.85")
    h = np.where(split, 0.38, 0.8)
    y_u0 = np.where(split, y + 0.2, y)
    y_cvu = np.where(split, y - 0.2, y)
    left_cvu = np.where(split, 0.0, u0)
    ax.barh(y_u0, u0, height=h, color=c_u0, edgecolor="k", linewidth=0.5)
    ax.barh(y_cvu, bonus, height=h, left=left_cvu, color=c_cvu, edgecolor="k", linewidth=0.5)
    for i in np.flatnonzero(~feasible):
        ax.barh(y_u0[i], u0[i], height=h[i], color="none", hatch="///", edgecolor="0.5",
                linewidth=0)
    ax.scatter(q, y, color="k", zorder=3, s=18)
    handles = [Patch(facecolor="C0", edgecolor="k", label="U0 = φ(ΔJ) − C_λ"),
               Patch(facecolor="C1", edgecolor="k", label="β·CVU (stacked on U0; beside it "
                                                          "when the signs differ)"),
               Patch(facecolor="0.75", hatch="///", edgecolor="0.5", label="infeasible"),
               Line2D([], [], marker="o", color="k", linestyle="", markersize=4,
                      label="Q = U0 + β·CVU")]
    ax.axvline(0, color="k", linewidth=0.8)
    from belief.report.tables import shows_channel_split

    if shows_channel_split(decision):  # CVU by channel where order or safety takes part
        beta = decision.attrs.get("beta", 0.0)
        parts = {k: np.nan_to_num(decision[k].values.astype(float))
                 for k in ("cvu_order", "cvu_safety_value")}
        for i in range(len(ids)):
            bits = [f"{name} {beta * parts[k][i]:+.3f}" for k, name in
                    (("cvu_order", "β·order"), ("cvu_safety_value", "β·safety"))
                    if parts[k][i] != 0]
            if bits:
                ax.annotate(", ".join(bits), (np.nanmax([q[i], u0[i], 0.0]), y[i]),
                            xytext=(4, 0), textcoords="offset points", va="center",
                            fontsize=6)
    labels = [f"★ {c}" if chosen[i] else c for i, c in enumerate(ids)]
    ax.set_yticks(y, labels)
    for i in np.flatnonzero(chosen):
        ax.get_yticklabels()[i].set_fontweight("bold")
    ax.set_xlabel("utility (success-probability units)")
    a = decision.attrs
    ax.set_title(f"step {a.get('step', '?')}: chose {a.get('chosen', '?')} "
                 f"(φ = {a.get('functional', '?')}, β = {a.get('beta', 0):g}, "
                 f"Pr(flip) = {a.get('flip_probability', float('nan')):.2f})", fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0.0)
    return ax


def plot_gains(belief: xr.Dataset, ax: plt.Axes | None = None, interval: float = 0.9,
               decision: xr.Dataset | None = None) -> plt.Axes:
    """Posterior-predictive gain per candidate: mean and central ``interval`` (ETI).

    With ``decision``, candidates that cannot be chosen are marked: grey with "(unavailable)"
    when executed and not repeatable, grey with "(infeasible)" when over budget or refused by
    the safety gate.
    """
    g = belief["gain"]
    lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
    qs = g.quantile([lo, hi], "sample")
    mean = g.mean("sample").values
    ids = [str(c) for c in belief["candidate"].values]
    status = ["" for _ in ids]
    if decision is not None:
        d = decision.reindex(candidate=ids)
        avail = d["available"].values.astype(bool) if "available" in d else np.ones(len(ids),
                                                                                       bool)
        feas = d["feasible"].values.astype(bool)
        status = ["unavailable" if not a else ("infeasible" if not f else "")
                  for a, f in zip(avail, feas, strict=True)]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.4 * len(ids) + 1.2))
    y = np.arange(len(ids))[::-1]
    colors = ["0.6" if st else "C0" for st in status]
    ax.hlines(y, qs.sel(quantile=lo), qs.sel(quantile=hi), colors=colors, linewidth=2)
    ax.scatter(mean, y, color=colors, zorder=3,
               marker="o", s=[18 if not st else 14 for st in status])
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_yticks(y, [f"{c} ({st})" if st else c for c, st in zip(ids, status, strict=True)])
    for tick, st in zip(ax.get_yticklabels(), status, strict=True):
        if st:
            tick.set_color("0.45")
    ax.set_xlabel(f"predictive gain ΔJ of the next execution\n(mean, {interval:.0%} interval)")
    return ax


def plot_order_effects(belief: xr.Dataset, ax: plt.Axes | None = None, interval: float = 0.9,
                       evidenced_only: bool = True) -> plt.Axes:
    """Order effects γ_{a→m} (logit scale): posterior mean and central ``interval`` per pair,
    complements (interval above 0) in green, substitutes (below 0) in red, unclear in grey.

    ``evidenced_only`` (default) shows the pairs with evidence or a stated prior (see
    :func:`belief.posterior.order_effects.order_effects_table`).
    """
    from belief.posterior.order_effects import order_effects_table

    tab = order_effects_table(belief, interval, evidenced_only=evidenced_only)
    n = max(len(tab), 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.32 * n + 1.3))
    if not len(tab):
        ax.text(0.5, 0.5, "no order effects with evidence yet", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    y = np.arange(len(tab))[::-1]
    color = {"complement": "C2", "substitute": "C3", "unclear": "0.5"}
    cols = [color[k] for k in tab["kind"]]
    ax.hlines(y, tab["lower"], tab["upper"], colors=cols, linewidth=2)
    ax.scatter(tab["mean"], y, color=cols, zorder=3, s=16,
               marker="o")
    ax.axvline(0, color="k", linewidth=0.8)
    labels = [f"{a} → {m}" + (" (stated prior)" if st else "") + f"  [n={e}]"
              for a, m, st, e in zip(tab["source"], tab["target"], tab["stated"],
                                     tab["evidence"], strict=True)]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(f"order effect γ (logit gain of the later candidate; mean, {interval:.0%} "
                  "interval)\n> 0 complement, < 0 substitute; n = evaluated executions after")
    return ax


def plot_safety_bounds(decision: xr.Dataset, ax: plt.Axes | None = None) -> plt.Axes:
    """Upper bounds of P_exec(unsafe | m) of the hardware candidates against α_exec.

    Every bound is drawn when available (Clopper–Pearson as bars, the anytime bound as a
    vertical tick, the posterior (1 − δ)-quantile as diamonds); the bound the gate used
    decides the colour (green = passes,
    red = refused).  A candidate with no executions (0/0) has no data: its bar is hatched and
    labelled "no data (0/0)" instead of a full red bar.  The legend sits outside the axes, so
    it never covers a bar.  Candidates that do not drive hardware have P_exec = 0 and are left
    out.
    """
    a = decision.attrs
    alpha = float(a.get("alpha_exec", np.nan))
    hw = np.array([not str(r).startswith("no hardware") for r in decision["safe_reason"].values])
    ids = [str(c) for c, h in zip(decision["candidate"].values, hw, strict=True) if h]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.45 * max(len(ids), 1) + 1.4))
    if not ids:
        ax.text(0.5, 0.5, "no candidate drives hardware", ha="center", va="center")
        ax.set_axis_off()
        return ax
    sub = decision.sel(candidate=ids)
    y = np.arange(len(ids))[::-1]
    safe = sub["safe"].values.astype(bool)
    cp = sub["ucb_clopper_pearson"].values.astype(float)
    post = sub["ucb_posterior"].values.astype(float)
    reasons = [str(r) for r in sub["safe_reason"].values]
    no_data = np.array(["(0/0 unsafe)" in r for r in reasons])
    colors = np.where(safe, "C2", "C3")
    ax.barh(y[~no_data], cp[~no_data], color=colors[~no_data], alpha=0.7, edgecolor="k",
            linewidth=0.5,
            label=f"Clopper–Pearson UCB$_{{{1 - a.get('delta', 0.05):g}}}$ (one look)")
    if no_data.any():
        ax.barh(y[no_data], np.ones(int(no_data.sum())), color="none", hatch="..",
                edgecolor="0.6", linewidth=0.5, label="no data (0/0): bound = 1")
        for yi in y[no_data]:
            ax.text(0.02, yi, "no data (0/0)", va="center", ha="left", fontsize=8,
                    color="0.25")
    if "ucb_anytime" in sub:
        anytime = sub["ucb_anytime"].values.astype(float)
        ax.scatter(anytime[~no_data], y[~no_data], marker="|", color="C0", zorder=3, s=160,
                   linewidths=2, label="anytime UCB (over every look)")
    if np.isfinite(post).any():
        ax.scatter(post, y, marker="D", color="k", zorder=3, s=22,
                   label="posterior credible UCB (execution-risk model)")
    ax.axvline(alpha, color="C3", linestyle="--", linewidth=1.2, label=f"α_exec = {alpha:g}")
    ax.set_yticks(y, ids)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("upper bound of P_exec(unsafe | m)")
    ax.set_title(f"execution-safety gate ({a.get('safety_method', '?')} decides; green = passes)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


def plot_sensitivity(report, ax: plt.Axes | None = None) -> plt.Axes:
    """S_k(π) of one policy: mean and interval per direction, most influential on top.

    ``report`` is a :class:`belief.posterior.sensitivity.SensitivityReport`; one panel per policy,
    because sensitivities are not comparable across policies.
    """
    r = report.ranking
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.45 * len(r) + 1.6))
    y = np.arange(len(r))[::-1]
    ax.hlines(y, r["S_lo"], r["S_hi"], color="C0", linewidth=2)
    ax.plot(r["S_mean"], y, "o", color="C0")
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_yticks(y, [f"{d} (P(top) {p:.2f})" for d, p in
                      zip(r.index, r["p_most_influential"], strict=True)])
    # policy names of a campaign grow with its lineage (pi0+dr_1e6+si_friction): wrap the
    # label to the figure's width instead of letting it run off the edge
    label = (f"S_k({report.policy}) per s.d. of ξ_k ({report.link}; {report.prob:.0%} "
             "interval)")
    width = max(20, int(ax.figure.get_figwidth() * 8))  # ~8 characters per inch at 10 pt
    ax.set_xlabel(textwrap.fill(label, width, break_long_words=True))
    ax.set_title(textwrap.fill(f"sensitivities of policy {report.policy} (not comparable "
                               "across policies)", int(ax.figure.get_figwidth() * 11)),
                 fontsize=9)
    return ax


def plot_sim_proxy(idata: xr.DataTree, lens_of: dict[str, str], interval: float = 0.9,
                   grid: int = 50) -> plt.Figure:
    """Sim against real logit gains, one panel per lens, with the learned calibration.

    Each candidate with simulated paired evaluations is a point at the posterior means of its
    real gain θ_m (x) and sim gain θ^sim_m (y), with their ``interval`` equal-tailed
    intervals as error bars.  The line is the posterior mean of the calibration
    a_l + b_l·x of the lens, its band the ``interval`` of a_l + b_l·x over the posterior draws
    at each x (the uncertainty of the line, not the residual scale σ_l, which the title
    states); the dotted diagonal is sim = real.  ``idata`` is the sim-proxy model's fit
    (:mod:`models.sim_proxy`, learned calibration); ``lens_of`` maps candidate → lens.
    """
    post = idata["posterior"]
    const = idata["constant_data"]
    evaluated = [str(c) for c in const["candidate"].values
                 if float(const["sim_trt_n"].sel(candidate=c).sum()) > 0
                 or float(const["sim_has_est"].sel(candidate=c)) > 0]
    lenses = [str(lv) for lv in post["lens"].values]
    lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
    fig, axes = plt.subplots(1, len(lenses), figsize=(3.6 * len(lenses) + 0.4, 3.6),
                             squeeze=False)
    theta = post["theta"].stack(s=("chain", "draw"))
    theta_sim = post["theta_sim"].stack(s=("chain", "draw"))
    for ax, lens in zip(axes[0], lenses, strict=True):
        ids = [c for c in evaluated if lens_of.get(c) == lens]
        xs = theta.sel(candidate=ids) if ids else None
        x_all = theta.sel(candidate=[c for c in theta["candidate"].values
                                     if lens_of.get(str(c)) == lens])
        span = np.quantile(x_all.values, [0.02, 0.98]) if x_all.size else np.array([-1, 1])
        x = np.linspace(min(span[0], -0.2), max(span[1], 0.2), grid)
        a = post["a"].sel(lens=lens).values.ravel()
        b = post["b"].sel(lens=lens).values.ravel()
        lines = a[:, None] + b[:, None] * x[None, :]
        ax.fill_between(x, np.quantile(lines, lo, axis=0), np.quantile(lines, hi, axis=0),
                        color="C0", alpha=0.2, lw=0, label=f"{interval:.0%} band of a + b·x")
        ax.plot(x, lines.mean(axis=0), color="C0", label="calibration a + b·x")
        ax.plot(x, x, ls=":", color="0.5", lw=1, label="sim = real")
        if ids:
            ys = theta_sim.sel(candidate=ids)
            xm, ym = xs.mean("s").values, ys.mean("s").values
            xq, yq = xs.quantile([lo, hi], "s").values, ys.quantile([lo, hi], "s").values
            ax.errorbar(xm, ym, xerr=[xm - xq[0], xq[1] - xm], yerr=[ym - yq[0], yq[1] - ym],
                        fmt="o", color="C1", ms=4, lw=1, label="candidates (θ, θ_sim)")
            for c, xi, yi in zip(ids, xm, ym, strict=True):
                ax.annotate(c, (xi, yi), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
        sig = post["sigma"].sel(lens=lens).values
        ax.set_title(f"{lens}: b = {b.mean():.2f}, σ = {sig.mean():.2f}"
                     + ("" if ids else " (no sim rows)"), fontsize=9)
        ax.set_xlabel("real logit gain θ")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("sim logit gain θ_sim")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
