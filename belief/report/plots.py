"""Figures people would rather look at than read (matplotlib; ArviZ for posterior plots)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

__all__ = ["plot_gains", "plot_q_decomposition", "plot_safety_bounds", "plot_sensitivity"]


def plot_q_decomposition(decision: xr.Dataset, ax: plt.Axes | None = None) -> plt.Axes:
    """Q = U0 + β·CVU per candidate as stacked horizontal bars; the chosen one is marked.

    Infeasible candidates are drawn hatched and grey, with their exclusion reason as label.
    """
    ids = list(decision["candidate"].values)
    u0 = decision["u0"].values
    bonus = decision.attrs.get("beta", 0.0) * decision["cvu"].values
    q = decision["q"].values
    feasible = decision["feasible"].values.astype(bool)
    chosen = decision["chosen"].values.astype(bool)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * len(ids) + 1.2))
    y = np.arange(len(ids))[::-1]
    colors = np.where(feasible, "C0", "0.75")
    ax.barh(y, u0, color=colors, edgecolor="k", linewidth=0.5)
    # β·CVU stacked from the end of U0: solid when it adds to U0; a negative CVU is drawn as
    # the hatched part of U0 it takes away (it would otherwise look like an addition)
    plus = np.where(np.nan_to_num(bonus) >= 0, bonus, 0.0)
    minus = np.where(np.nan_to_num(bonus) < 0, bonus, 0.0)
    ax.barh(y, plus, left=u0, color=np.where(feasible, "C1", "0.85"), edgecolor="k",
            linewidth=0.5)
    ax.barh(y, minus, left=u0, color="white", hatch="xxx", edgecolor="C1", linewidth=0.5)
    for i in np.flatnonzero(~feasible):
        ax.barh(y[i], u0[i], color="none", hatch="///", edgecolor="0.5", linewidth=0)
    ax.scatter(q, y, color="k", zorder=3, s=18)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor="C0", edgecolor="k", label="U0 = φ(ΔJ) − C_λ"),
               Patch(facecolor="C1", edgecolor="k", label="β·CVU > 0 (added)"),
               Patch(facecolor="white", hatch="xxx", edgecolor="C1",
                     label="β·CVU < 0 (taken from U0)"),
               Patch(facecolor="0.75", hatch="///", edgecolor="0.5", label="infeasible"),
               Line2D([], [], marker="o", color="k", linestyle="", markersize=4, label="Q")]
    ax.axvline(0, color="k", linewidth=0.8)
    labels = [f"★ {c}" if chosen[i] else c for i, c in enumerate(ids)]
    ax.set_yticks(y, labels)
    for i in np.flatnonzero(chosen):
        ax.get_yticklabels()[i].set_fontweight("bold")
    ax.set_xlabel("utility (success-probability units)")
    a = decision.attrs
    ax.set_title(f"step {a.get('step', '?')}: chose {a.get('chosen', '?')} "
                 f"(φ = {a.get('functional', '?')}, β = {a.get('beta', 0):g}, "
                 f"Pr(flip) = {a.get('flip_probability', float('nan')):.2f})", fontsize=9)
    ax.legend(handles=handles, fontsize=8, loc="best")
    return ax


def plot_gains(belief: xr.Dataset, ax: plt.Axes | None = None,
               interval: float = 0.9) -> plt.Axes:
    """Posterior-predictive gain per candidate: mean and central ``interval`` (ETI)."""
    g = belief["gain"]
    lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
    qs = g.quantile([lo, hi], "sample")
    mean = g.mean("sample")
    ids = list(belief["candidate"].values)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.4 * len(ids) + 1))
    y = np.arange(len(ids))[::-1]
    ax.hlines(y, qs.sel(quantile=lo), qs.sel(quantile=hi), color="C0", linewidth=2)
    ax.plot(mean, y, "o", color="C0")
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_yticks(y, ids)
    ax.set_xlabel(f"predictive gain ΔJ of the next execution (mean, {interval:.0%} interval)")
    return ax


def plot_safety_bounds(decision: xr.Dataset, ax: plt.Axes | None = None) -> plt.Axes:
    """Upper bounds of P_exec(unsafe | m) of the hardware candidates against α_exec.

    Both estimators are drawn when available (Clopper–Pearson as bars, the posterior
    (1 − δ)-quantile as diamonds); the bound the gate used decides the colour (green = passes,
    red = refused).  Candidates that do not drive hardware have P_exec = 0 and are left out.
    """
    a = decision.attrs
    alpha = float(a.get("alpha_exec", np.nan))
    hw = np.array([not str(r).startswith("no hardware") for r in decision["safe_reason"].values])
    ids = [str(c) for c, h in zip(decision["candidate"].values, hw, strict=True) if h]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * max(len(ids), 1) + 1.3))
    if not ids:
        ax.text(0.5, 0.5, "no candidate drives hardware", ha="center", va="center")
        ax.set_axis_off()
        return ax
    sub = decision.sel(candidate=ids)
    y = np.arange(len(ids))[::-1]
    safe = sub["safe"].values.astype(bool)
    cp = sub["ucb_clopper_pearson"].values.astype(float)
    post = sub["ucb_posterior"].values.astype(float)
    ax.barh(y, cp, color=np.where(safe, "C2", "C3"), alpha=0.7, edgecolor="k", linewidth=0.5,
            label=f"Clopper–Pearson UCB$_{{{1 - a.get('delta', 0.05):g}}}$")
    if np.isfinite(post).any():
        ax.scatter(post, y, marker="D", color="k", zorder=3, s=22,
                   label="posterior UCB (execution-risk model)")
    ax.axvline(alpha, color="C3", linestyle="--", linewidth=1.2, label=f"α_exec = {alpha:g}")
    ax.set_yticks(y, ids)
    ax.set_xlabel("upper bound of P_exec(unsafe | m)")
    ax.set_title(f"execution-safety gate ({a.get('safety_method', '?')} decides; green = passes)",
                 fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    return ax


def plot_sensitivity(report, ax: plt.Axes | None = None) -> plt.Axes:
    """S_k(π) of one policy: mean and interval per direction, most influential on top.

    ``report`` is a :class:`belief.posterior.sensitivity.SensitivityReport`; one panel per policy,
    because sensitivities are not comparable across policies.
    """
    r = report.ranking
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.45 * len(r) + 1.2))
    y = np.arange(len(r))[::-1]
    ax.hlines(y, r["S_lo"], r["S_hi"], color="C0", linewidth=2)
    ax.plot(r["S_mean"], y, "o", color="C0")
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_yticks(y, [f"{d} (P(top) {p:.2f})" for d, p in
                      zip(r.index, r["p_most_influential"], strict=True)])
    ax.set_xlabel(f"S_k({report.policy}) per s.d. of ξ_k ({report.link}; "
                  f"{report.prob:.0%} interval)")
    ax.set_title(f"sensitivities of policy {report.policy} (not comparable across policies)",
                 fontsize=9)
    return ax
