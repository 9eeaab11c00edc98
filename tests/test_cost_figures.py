"""Figures of uncertain costs (issue 21) on hand-made cost draws (no fitting)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from belief.decision.engine import decide
from belief.decision.settings import DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from belief.report.cost_plots import (
    cost_intervals,
    plot_cost_predictions,
    plot_overrun_probability,
    step_cost_intervals,
)

S = 4000
ROWS = [("a", {"compute": 10.0, "eng_h": 1.0}), ("b", {"compute": 4.0, "eng_h": 0.0})]


def _setup(eps=0.1):
    cs = candidates_from_dict({"campaign": {"eval_protocol": "E",
                                            "resources": ["compute", "eng_h"]},
                               "candidate": [{"id": i, "role": "adaptation", "lens": "data",
                                              "method": i, "cost": c} for i, c in ROWS]})
    rng = np.random.default_rng(3)
    draws = np.broadcast_to(cs.costs().values, (S, 2, 2)).copy()
    draws[:, 0, 0] = 10.0 * np.exp(0.5 * rng.standard_normal(S))  # a's compute: log-normal
    belief = make_belief(xr.DataArray(np.full((S, 2), 0.1), dims=("sample", "candidate"),
                                      coords={"candidate": cs.ids}), cs, step=2, policy="p")
    belief["cost"] = (("sample", "candidate", "resource"), draws)
    belief = belief.assign_coords(resource=list(cs.resources))
    state = State(step=2, budget=make_budget({"compute": 12.0, "eng_h": 5.0}, cs.resources),
                  policy="p", belief=belief)
    d = decide(state, cs, DecisionSettings(weights={"compute": 0.001, "eng_h": 0.001},
                                           stability_resamples=0, eps_budget=eps))
    return cs, belief, d


def test_cost_intervals_are_the_quantiles_of_the_draws():
    _, belief, _ = _setup()
    iv = cost_intervals(belief["cost"]).set_index(["label", "resource"])
    a = belief["cost"].sel(candidate="a", resource="compute").values
    np.testing.assert_allclose(iv.loc[("a", "compute"), ["lo", "median", "hi"]].to_numpy(float),
                               np.quantile(a, [0.05, 0.5, 0.95]))
    assert iv.loc[("b", "eng_h"), "hi"] == 0.0  # a zero nominal cost is exact
    steps = step_cost_intervals([(0, "a", belief["cost"].sel(candidate="a")),
                                 (1, "b", belief["cost"].sel(candidate="b"))])
    assert list(dict.fromkeys(steps["label"])) == ["t=0 a", "t=1 b"]


def test_predicted_against_realised_marks_points_outside_the_interval():
    _, belief, _ = _setup()
    iv = cost_intervals(belief["cost"])
    realised = pd.DataFrame({"label": ["a", "a", "b"], "resource": ["compute"] * 3,
                             "value": [10.0, 40.0, 4.0]})  # 40 is beyond a's 95 % quantile
    axes = plot_cost_predictions(iv, realised)
    assert len(axes) == 2 and [ax.get_title() for ax in axes] == ["compute", "eng_h"]
    colls = axes[0].collections  # interval lines, medians, inside points, outside points
    inside, outside = colls[2].get_offsets(), colls[3].get_offsets()
    assert sorted(inside[:, 0]) == [4.0, 10.0] and list(outside[:, 0]) == [40.0]
    plt.close("all")


def test_overrun_heatmap_shows_the_decisions_probabilities_and_refuses_known_costs():
    _, _, d = _setup(eps=0.1)
    ax = plot_overrun_probability(d)
    img = ax.images[0].get_array()
    np.testing.assert_allclose(np.asarray(img), np.column_stack(
        [d["overrun_compute"].values, d["overrun_eng_h"].values]))
    boxes = [p for p in ax.patches if isinstance(p, plt.Rectangle)]
    p_a = float(d["overrun_compute"].sel(candidate="a"))
    assert p_a > 0.1 and len(boxes) == 1 and boxes[0].get_xy() == (-0.5, -0.5)  # a, compute
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "★ b"]
    with pytest.raises(InputError, match=r"^decision: no overrun probabilities"):
        plot_overrun_probability(d.drop_vars(["overrun_compute", "overrun_eng_h"]))
    plt.close("all")


def test_report_figures_appear_with_a_cost_posterior_only():
    from belief.report.document import _cost_figures, _overrun_figure

    cs, belief, d = _setup()
    costs = pd.DataFrame({"step": [0], "candidate": ["a"], "compute": [13.0], "eng_h": [1.0]})
    fitted = SimpleNamespace(belief=belief, costs=costs, candidate_set=cs)
    assert set(_cost_figures(fitted)) == {"costs"}
    assert set(_overrun_figure(d)) == {"overrun"}
    assert _overrun_figure(d.drop_vars([v for v in d.data_vars
                                        if str(v).startswith("overrun_")])) == {}
    assert _cost_figures(SimpleNamespace(belief=belief.drop_vars("cost"), costs=costs,
                                         candidate_set=cs)) == {}
    plt.close("all")
