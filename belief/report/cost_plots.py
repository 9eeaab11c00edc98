"""Figures of uncertain costs: predicted against realised cost, and the overrun
probability per resource on a decision (matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr

from belief.decision.schema import Attrs, Vars, member_resources, per_resource
from belief.errors import InputError

__all__ = ["cost_intervals", "plot_cost_predictions", "plot_overrun_probability",
           "step_cost_intervals"]

_COLS = ["label", "resource", "lo", "median", "hi"]


def cost_intervals(draws: xr.DataArray, interval: float = 0.9) -> pd.DataFrame:
    """Central ``interval`` (equal-tailed) and median of predictive cost draws per candidate.

    Parameters
    ----------
    draws : DataArray (sample, candidate, resource)
        Joint predictive draws of ΔC_r(m), e.g. q_t's ``cost``.

    Returns
    -------
    DataFrame
        One row per (candidate, resource): ``label`` (the candidate), ``resource``, ``lo`` =
        q_{(1−interval)/2}, ``median``, ``hi`` = q_{(1+interval)/2}.
    """
    a = (1 - interval) / 2
    qs = draws.quantile([a, 0.5, 1 - a], "sample")
    rows = [{"label": str(c), "resource": str(r),
             **dict(zip(("lo", "median", "hi"),
                        qs.sel(candidate=c, resource=r).values.astype(float), strict=True))}
            for c in draws["candidate"].values for r in draws["resource"].values]
    return pd.DataFrame(rows, columns=_COLS)


def step_cost_intervals(steps: Sequence[tuple[int, str, xr.DataArray]],
                        interval: float = 0.9) -> pd.DataFrame:
    """:func:`cost_intervals` of the executed steps of a campaign, labelled ``t=<step> <m>``.

    ``steps``: (step, chosen candidate, decision-time predictive draws (sample, resource) of
    its cost) per executed step.
    """
    frames = []
    for step, cand, da in steps:
        one = cost_intervals(da.expand_dims(candidate=[cand]), interval)
        one["label"] = f"t={step} {cand}"
        frames.append(one)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_COLS)


def plot_cost_predictions(intervals: pd.DataFrame, realised: pd.DataFrame | None = None,
                          axes: Sequence[plt.Axes] | None = None,
                          interval: float = 0.9) -> np.ndarray:
    """Predicted against realised cost: one panel per resource, one row per label.

    Each row shows the predictive ``interval`` (line) and median (tick) of ``intervals``
    (:func:`cost_intervals` or :func:`step_cost_intervals`); ``realised`` (columns ``label``,
    ``resource``, ``value``) adds the realised amounts as points — black inside the interval,
    red outside it.  Cells with a zero predictive (a zero nominal cost is exact) are left
    blank.

    Returns
    -------
    ndarray of Axes
    """
    resources = list(dict.fromkeys(intervals["resource"]))
    labels = list(dict.fromkeys(intervals["label"]))
    if axes is None:
        _, axes = plt.subplots(1, len(resources), figsize=(3.2 * len(resources) + 1.5,
                                                          0.35 * len(labels) + 1.4),
                               sharey=True, squeeze=False)
        axes = axes[0]
    y = {lab: float(len(labels) - 1 - i) for i, lab in enumerate(labels)}
    for ax, r in zip(axes, resources, strict=True):
        sub = intervals[(intervals["resource"] == r) & (intervals["hi"] > 0)]
        ys = sub["label"].map(y).to_numpy(float)
        ax.hlines(ys, sub["lo"], sub["hi"], color="C0", linewidth=2.5, alpha=0.7)
        ax.scatter(sub["median"], ys, marker="|", color="C0", s=80, zorder=3)
        if realised is not None and len(realised):
            pts = realised[(realised["resource"] == r) & realised["label"].isin(sub["label"])]
            merged = pts.merge(sub, on=["label", "resource"], how="left")
            inside = (merged["value"] >= merged["lo"]) & (merged["value"] <= merged["hi"])
            py = merged["label"].map(y).to_numpy(float)
            ax.scatter(merged["value"][inside], py[inside.to_numpy()], color="k", s=16,
                       zorder=4)
            ax.scatter(merged["value"][~inside], py[~inside.to_numpy()], color="C3", s=22,
                       marker="D", zorder=4)
        ax.set_title(r, fontsize=9)
        ax.set_xlabel("cost")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(list(y.values()), list(y.keys()), fontsize=8)
    axes[0].figure.suptitle(f"predicted ({interval:.0%} interval, | median) against realised "
                            "cost (● inside, ◆ outside the interval)", fontsize=9)
    return np.asarray(axes)


def plot_overrun_probability(decision: xr.Dataset, ax: plt.Axes | None = None) -> plt.Axes:
    """Pr(ΔC_r(m) > b_t,r) per candidate and resource as a heatmap (the decision's
    ``overrun_<r>``); cells above ε_budget are outlined in red, the chosen candidate starred.

    Raises
    ------
    InputError
        When the decision has no overrun probabilities (it was taken with known costs).
    """
    resources = member_resources(decision, Vars.overrun)
    if not resources:
        raise InputError("decision", "no overrun probabilities (overrun_<resource>): the "
                                     "decision was taken with known costs")
    ids = [str(c) for c in decision["candidate"].values]
    p = np.column_stack([decision[per_resource(Vars.overrun, r)].values.astype(float)
                         for r in resources])
    eps = float(decision.attrs.get(Attrs.eps_budget, 0.0))
    chosen = decision[Vars.chosen].values.astype(bool)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.3 * len(resources) + 3.0, 0.4 * len(ids) + 1.5))
    im = ax.imshow(p, cmap="Reds", vmin=0.0, vmax=max(0.2, float(p.max())), aspect="auto")
    for i in range(len(ids)):
        for k in range(len(resources)):
            ax.text(k, i, f"{p[i, k]:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if p[i, k] > 0.6 * max(0.2, float(p.max())) else "black")
            if p[i, k] > eps:
                ax.add_patch(plt.Rectangle((k - 0.5, i - 0.5), 1, 1, fill=False,
                                           edgecolor="C3", linewidth=1.5))
    ax.set_xticks(range(len(resources)), resources)
    ax.set_yticks(range(len(ids)), [f"★ {c}" if chosen[i] else c for i, c in enumerate(ids)],
                  fontsize=8)
    ax.figure.colorbar(im, ax=ax, label="Pr(ΔC_r(m) > b_t,r)")
    ax.set_title(f"overrun probability per resource (step {decision.attrs.get('step', '?')}; "
                 f"red box: > ε_budget = {eps:g})", fontsize=9)
    return ax
