"""Uncertain costs wired into fit, q_t and decide (issue 21, phase 2).

The decision tests put hand-made cost draws into q_t (no fitting); the one fitter test re-uses
the session's compiled gains model and the cost model compiled by ``test_costs_model`` (the
same candidates, priors and slots).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats

from belief.decision.engine import decide, decision_table
from belief.decision.settings import DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief

ROWS = [("a", "adaptation", {"compute": 10.0, "eng_h": 1.0}),
        ("b", "adaptation", {"compute": 4.0, "eng_h": 2.0}),
        ("c", "diagnosis", {"compute": 2.0, "eng_h": 0.0})]
LAM = {"compute": 0.01, "eng_h": 0.02}
S = 20_000
SIGMA = 0.5  # log-scale spread of a's compute


def _cands():
    return candidates_from_dict({"campaign": {"eval_protocol": "E", "resources":
                                              ["compute", "eng_h"]},
                                 "candidate": [{"id": i, "role": role, "lens": "data",
                                                "method": i, "cost": cost}
                                               for i, role, cost in ROWS]})


def _state(cs, budget, cost=None):
    gain = np.zeros((S, len(cs.ids)))
    gain[:, 0], gain[:, 1] = 0.2, 0.1  # known gains: only the costs are uncertain
    belief = make_belief(xr.DataArray(gain, dims=("sample", "candidate"),
                                      coords={"candidate": cs.ids}), cs, step=0, policy="p0")
    if cost is not None:
        belief["cost"] = (("sample", "candidate", "resource"), cost)
        belief = belief.assign_coords(resource=list(cs.resources))
    return State(step=0, budget=make_budget(budget, cs.resources), policy="p0", belief=belief)


def _known_draws(cs):
    return np.broadcast_to(cs.costs().values, (S, len(cs.ids), len(cs.resources))).copy()


def _lognormal_draws(cs):
    """a's compute ~ 10·exp(0.5 Z); every other cell at its nominal cost."""
    draws = _known_draws(cs)
    draws[:, 0, 0] = 10.0 * np.exp(SIGMA * np.random.default_rng(0).standard_normal(S))
    return draws


def _settings(eps=0.0):
    return DecisionSettings(weights=LAM, beta=0.0, stability_resamples=0, eps_budget=eps)


def test_known_cost_draws_with_eps_zero_decide_exactly_as_known_costs():
    cs = _cands()
    for budget in ({"compute": 12.0, "eng_h": 5.0}, {"compute": 9.0, "eng_h": 5.0},
                   {"compute": 4.0, "eng_h": 2.0}):
        plain = decide(_state(cs, budget), cs, _settings())
        drawn = decide(_state(cs, budget, _known_draws(cs)), cs, _settings())
        for v in ("c_lambda", "u0", "q", "value_vs_stop", "budget_ok", "feasible", "chosen"):
            np.testing.assert_array_equal(drawn[v].values, plain[v].values, err_msg=v)
        assert drawn.attrs["chosen"] == plain.attrs["chosen"]
        assert set(np.unique(drawn["overrun_compute"].values)) <= {0.0, 1.0}
        assert "overrun_compute" not in plain and plain.attrs["costs"] == "known"


def test_decision_with_a_log_normal_cost_matches_the_hand_computed_values():
    """a's compute is 10·exp(0.5 Z), budget 12: Pr(overrun) = 1 − Φ(log 1.2 / 0.5) = 0.3577 and
    E[λᵀΔC] = 0.01·10·e^{0.125} + 0.02·1 — each within 4 Monte Carlo standard errors; a is
    feasible exactly when ε_budget ≥ that probability."""
    cs = _cands()
    budget = {"compute": 12.0, "eng_h": 5.0}
    p_over = 1 - stats.norm.cdf(np.log(12.0 / 10.0) / SIGMA)
    assert p_over == pytest.approx(0.3577, abs=1e-4)
    draws = _lognormal_draws(cs)
    d = decide(_state(cs, budget, draws), cs, _settings(0.3))
    assert abs(float(d["overrun_compute"].sel(candidate="a")) - p_over) \
        <= 4 * np.sqrt(p_over * (1 - p_over) / S)
    mean_cost = 10.0 * np.exp(SIGMA**2 / 2)
    se = 10.0 * np.sqrt((np.exp(SIGMA**2) - 1) * np.exp(SIGMA**2)) / np.sqrt(S)
    assert abs(float(d["c_lambda"].sel(candidate="a")) - (0.01 * mean_cost + 0.02)) \
        <= 4 * 0.01 * se
    assert abs(float(d["cost_compute"].sel(candidate="a")) - mean_cost) <= 4 * se
    # U0 uses E[λᵀΔC] whatever φ: the lcb functional changes the gain term only
    lcb = decide(_state(cs, budget, draws), cs, _settings(0.3).replace(functional="lcb:0.1"))
    np.testing.assert_allclose(lcb["c_lambda"].values, d["c_lambda"].values)
    assert not bool(d["budget_ok"].sel(candidate="a"))
    assert re.fullmatch(r"over budget: Pr\(compute > 12 left\) = 0\.3\d* > eps_budget 0\.3",
                        d["budget_reason"].sel(candidate="a").item())
    assert d.attrs["chosen"] == "b" and d.attrs["eps_budget"] == 0.3
    loose = decide(_state(cs, budget, draws), cs, _settings(0.4))
    assert bool(loose["budget_ok"].sel(candidate="a")) and loose.attrs["chosen"] == "a"
    table = decision_table(d)
    assert {"overrun_compute", "overrun_eng_h"} <= set(table.columns)
    assert table.loc["c", "overrun_eng_h"] == 0.0  # a zero cost never overruns


@pytest.mark.parametrize("eps", [1.0, -0.1, np.nan])
def test_eps_budget_outside_zero_one_is_refused_naming_the_setting_and_the_flag(eps, tmp_path,
                                                                                capsys):
    from belief.cli.main import main

    with pytest.raises(InputError, match=r"^eps_budget: must be a finite number with 0 <= "
                                         r"value < 1"):
        DecisionSettings(eps_budget=eps)
    out = tmp_path / "decision"
    code = main(["decide", str(tmp_path / "missing.nc"), "--epsilon-budget", str(eps),
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("belief: error: --epsilon-budget: must be a finite")
    assert not out.exists()


def test_fit_with_costs_puts_cost_draws_in_q_and_checks_them(fitter, campaign_evidence):
    """``FitSettings.costs``: the cost model is fitted on the realised costs, checked like the
    other models (its attributes join the belief's reliability), and its joint draws are q_t's
    ``cost``; the decision then shows the overrun probabilities."""
    ev, world = campaign_evidence
    cs = fitter.candidates
    nominal = cs.costs()
    executed = ["dr_1e7", "si_friction", "dr_1e6", "ft_real_100"]
    costs = pd.DataFrame([{"step": t, "candidate": m, "policy": "p",
                           **{r: float(nominal.sel(candidate=m, resource=r)) * f
                              for r in cs.resources}}
                          for t, (m, f) in enumerate(zip(executed, [1.0, 1.5, 0.9, 2.0],
                                                         strict=True))])
    with_costs = fitter.scaled(costs=True)
    idata, q = with_costs.fit(ev, world.policy, step=4, seed=11, costs=costs)
    assert "costs" in idata.children
    assert q["cost"].dims == ("sample", "candidate", "resource")
    assert q.sizes["sample"] == fitter.settings.draws * fitter.settings.chains
    zero = nominal.values == 0
    assert (q["cost"].transpose("sample", "candidate", "resource").values[:, zero] == 0).all()
    for key in ("costs_rhat_max", "costs_ess_bulk_min", "costs_attempts", "costs_reliable"):
        assert key in q.attrs, key
    assert ("costs:" in q.attrs["reliability_reason"]) != bool(q.attrs["costs_reliable"])
    budget = dict(zip(cs.resources, [12.0, 300.0, 20.0], strict=True))
    state = State(step=4, budget=make_budget(budget, cs.resources), policy=world.policy,
                  belief=q)
    d = decide(state, cs, DecisionSettings(weights={"real_h": 0.01, "compute": 0.0002,
                                                    "eng_h": 0.004}, stability_resamples=0,
                                           eps_budget=0.05))
    assert {f"overrun_{r}" for r in cs.resources} <= set(d.data_vars)
    lam = np.array([0.01, 0.0002, 0.004])
    np.testing.assert_allclose(d["c_lambda"].values,
                               q["cost"].transpose("sample", "candidate", "resource")
                               .values.mean(0) @ lam)


def test_synthetic_world_stochastic_costs_follow_the_documented_truth():
    """Off by default (every execution costs its nominal amount); on, log(ΔC/c̃) has mean o_{r,m}
    (the world's log offset of the cell; s.d. 0.25 over cells) and s.d. 0.2 outside repairs,
    and real_h needs a repair with probability 0.1, with the mean and Pr(ΔC ≤ 2c̃) of the cost
    model's repair mixture — each within 4 Monte Carlo standard errors over n executions;
    reproducible, and kept by the world's spec."""
    from belief.campaign.synthetic import (
        COST_NOISE,
        COST_OFFSET,
        REPAIR_MU,
        REPAIR_P,
        REPAIR_SD,
        SyntheticWorld,
        world_from_spec,
    )

    plain = SyntheticWorld(seed=2)
    ft = plain._truth["ft_real_100"].candidate
    assert plain.execute("ft_real_100", 0).cost == dict(ft.cost)
    assert {v for o in plain.cost_offsets().values() for v in o.values()} == {0.0}
    world = SyntheticWorld(seed=2, stochastic_costs=True)
    offsets = world.cost_offsets()
    assert offsets == SyntheticWorld(seed=2, stochastic_costs=True).cost_offsets()
    every = np.array([v for o in offsets.values() for v in o.values()])
    # the offsets are COST_OFFSET · Z: their s.d. within 4 s.e. of a normal sample's s.d.
    assert abs(every.std(ddof=1) - COST_OFFSET) <= 4 * COST_OFFSET / np.sqrt(2 * every.size)
    n = 4000
    draws = [world.realised_cost(ft, step, 0) for step in range(n)]
    log_compute = np.log([d["compute"] / ft.cost["compute"] for d in draws])
    assert abs(log_compute.mean() - offsets[ft.id]["compute"]) <= 4 * COST_NOISE / np.sqrt(n)
    assert abs(log_compute.std(ddof=1) - COST_NOISE) <= 4 * COST_NOISE / np.sqrt(2 * n)
    log_real = np.log([d["real_h"] / ft.cost["real_h"] for d in draws]) - offsets[ft.id]["real_h"]
    # 0.75 is 3.75 noise s.d. above 0 and 2.1 s.d. (of repair + noise) below 1.5: fewer than
    # 2 % of repairs are missed, a bias < 0.002, inside the tolerance of 0.019
    repaired = log_real > REPAIR_MU / 2
    assert abs(repaired.mean() - REPAIR_P) <= 4 * np.sqrt(REPAIR_P * (1 - REPAIR_P) / n)
    # the cost model's kind: real_h is the repair mixture of models.costs with δ = o, σ = 0.2,
    # π = 0.1, κ = 1.5, ω = 0.3 — its closed-form mean and Pr(ΔC ≤ 2 c̃) (scipy log-normals)
    real = np.array([d["real_h"] for d in draws])
    median = ft.cost["real_h"] * np.exp(offsets[ft.id]["real_h"])
    parts = [(1 - REPAIR_P, stats.lognorm(s=COST_NOISE, scale=median)),
             (REPAIR_P, stats.lognorm(s=np.hypot(COST_NOISE, REPAIR_SD),
                                      scale=median * np.exp(REPAIR_MU)))]
    mean = sum(w * d.mean() for w, d in parts)
    assert mean == pytest.approx(median * np.exp(0.02) * (0.9 + 0.1 * np.exp(1.545)))
    assert abs(real.mean() - mean) <= 4 * real.std(ddof=1) / np.sqrt(n)
    p2 = sum(w * d.cdf(2 * ft.cost["real_h"]) for w, d in parts)
    assert abs((real <= 2 * ft.cost["real_h"]).mean() - p2) <= 4 * np.sqrt(p2 * (1 - p2) / n)
    zero = world.realised_cost(world._truth["dr_1e7"].candidate, 0, 0)
    assert zero["real_h"] == 0.0
    assert world.realised_cost(ft, 7, 1) == world.realised_cost(ft, 7, 1)
    assert world_from_spec(world.describe()).stochastic_costs
    assert "stochastic_costs" not in plain.describe()
    with pytest.raises(InputError, match=r"^stochastic_costs: must be True or False"):
        SyntheticWorld(stochastic_costs="yes")


@pytest.mark.parametrize("continuation", ["one_step", "lookahead2"])
def test_cvu_keeps_the_chance_constraint_after_m(continuation):
    """Through decide: a's compute ~ 10·exp(0.5 Z) is excluded by the chance constraint
    (ε 0.1) at b = 14 (Pr(a > 14) = 0.25) and after the diagnosis c (b = 12).  The
    expected-cost test after c (E = 11.3 ≤ 12) credited c with opening a (CVU +0.047, and c was
    chosen over b); with one rule c, which teaches nothing, is worth nothing: CVU 0, b chosen."""
    from dataclasses import replace

    from belief.posterior.experiments import Experiment

    cs = _cands()
    state = _state(cs, {"compute": 14.0, "eng_h": 5.0}, _lognormal_draws(cs))
    settings = _settings(0.1).replace(beta=1.0)
    settings = settings.replace(cvu=replace(settings.cvu, continuation=continuation))
    gain = state.belief["gain"].transpose("sample", "candidate").values
    d = decide(state, cs, settings, experiments={k: Experiment(next_gain=gain) for k in cs.ids})
    assert d["feasible"].values.tolist() == [False, True, True]
    assert float(d["cvu"].sel(candidate="c")) == pytest.approx(0.0, abs=1e-12)
    assert d.attrs["chosen"] == "b"


def test_cvu_for_state_with_cost_draws_uses_their_expected_costs():
    """cvu_for_state(cost_draws=) without ``costs`` takes E[ΔC] of the draws (as decide
    passes it; the nominal costs would value a's step at 10 instead of E = 11.3 compute), and
    refuses draws of the wrong shape by name."""
    from belief.decision.cvu import cvu_for_state
    from belief.posterior.experiments import Experiment

    cs = _cands()
    draws = _lognormal_draws(cs)
    state = _state(cs, {"compute": 30.0, "eng_h": 5.0}, draws)
    settings = _settings(0.1).replace(beta=1.0)
    gain = state.belief["gain"].transpose("sample", "candidate").values
    exps = {k: Experiment(next_gain=gain) for k in cs.ids}
    got = cvu_for_state(state, cs, settings, experiments=exps, cost_draws=draws)
    want = cvu_for_state(state, cs, settings, experiments=exps, cost_draws=draws,
                         costs=draws.mean(axis=0))
    nominal = cvu_for_state(state, cs, settings, experiments=exps, cost_draws=draws,
                            costs=cs.costs().values)
    np.testing.assert_array_equal(got["cvu"].values, want["cvu"].values)
    assert float(got["cvu"].sel(candidate="a")) != pytest.approx(
        float(nominal["cvu"].sel(candidate="a")), abs=1e-3)
    with pytest.raises(InputError, match=r"cost_draws: expected draws over"):
        cvu_for_state(state, cs, settings, experiments=exps, cost_draws=draws[:, :2])
