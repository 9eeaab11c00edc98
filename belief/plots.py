"""Figures people would rather look at than read (matplotlib; ArviZ for posterior plots)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

__all__ = ["plot_gains", "plot_q_decomposition"]


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
    ax.barh(y, u0, color=colors, edgecolor="k", linewidth=0.5, label="U0 = φ(ΔJ) − C_λ")
    # β·CVU stacked from the end of U0
    ax.barh(y, bonus, left=u0, color=np.where(feasible, "C1", "0.85"), edgecolor="k",
            linewidth=0.5, label="β·CVU")
    for i in np.flatnonzero(~feasible):
        ax.barh(y[i], u0[i], color="none", hatch="///", edgecolor="0.5", linewidth=0)
    ax.scatter(q, y, color="k", zorder=3, s=18, label="Q")
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
    ax.legend(fontsize=8, loc="lower right")
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
