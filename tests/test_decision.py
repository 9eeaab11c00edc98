from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.decision.engine import decide
from belief.decision.safety import SafetyGate
from belief.decision.scores import g0
from belief.decision.state import State
from belief.decision.weights import ScarcityWeights
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief

TOY = {"SI": (6, (0.5, 1, 1)), "DR": (15, (0, 50, 2)), "DA": (3, (0, 10, 3)),
       "FT": (9, (4, 2, 1))}
LAM = {"real_h": 3.0, "compute": 0.1, "eng_h": 1.0}
LENS = {"SI": "model", "DR": "data", "DA": "representation", "FT": "optimization"}


def toy_candidates(extra=()):
    cands = [{"id": m, "role": "adaptation", "lens": LENS[m], "method": m,
              "cost": dict(zip(("real_h", "compute", "eng_h"), c, strict=True))}
             for m, (_, c) in TOY.items()]
    cands.extend(extra)
    return candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": cands})


def toy_state(cs, mus, budget=(100, 1000, 100), n=400, spread=1.0, step=0, horizon=None,
              seed=0):
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(n, len(mus)))
    noise -= noise.mean(axis=0)  # draws whose mean is exactly μ
    gain = xr.DataArray(np.array(mus)[None, :] + spread * noise, dims=("sample", "candidate"),
                        coords={"candidate": cs.ids[: len(mus)]})
    belief = make_belief(gain, cs, step=step, policy="pi0")
    b = make_budget(dict(zip(cs.resources, budget, strict=True)), cs.resources)
    return State(step=step, budget=b, policy="pi0", belief=belief, horizon=horizon)


def test_toy_mv_ranks_si_first_u0_ranks_dr_first():
    cs = toy_candidates()
    state = toy_state(cs, [mu for mu, _ in TOY.values()])
    d = decide(state, cs, weights=LAM, beta=0.0)
    c_lambda = {"SI": 2.6, "DR": 7.0, "DA": 4.0, "FT": 13.2}
    for m, (mu, _) in TOY.items():
        assert float(d["c_lambda"].sel(candidate=m)) == pytest.approx(c_lambda[m])
        assert float(d["u0"].sel(candidate=m)) == pytest.approx(mu - c_lambda[m])
        assert float(d["mv"].sel(candidate=m)) == pytest.approx(mu / c_lambda[m])
    mv_rank = d["mv"].to_series().sort_values(ascending=False).index.tolist()
    u0_rank = d["u0"].to_series().sort_values(ascending=False).index.tolist()
    assert mv_rank[0] == "SI" and u0_rank[0] == "DR"
    assert d.attrs["chosen"] == "DR"
    for m in ("DA", "FT"):
        assert str(d["excluded_reason"].sel(candidate=m).values).startswith("economic stop")
    np.testing.assert_array_equal(d["q"].values, d["u0"].values)  # β = 0
    assert d.attrs["cvu_status"].startswith("not computed")
    table = d.to_dataframe()
    assert table.loc["DR", "chosen"] and not table.loc["SI", "chosen"]


def test_same_functional_reaches_u0_and_mv():
    cs = toy_candidates()
    state = toy_state(cs, [mu for mu, _ in TOY.values()], spread=3.0)
    d = decide(state, cs, weights=LAM, functional="lcb:0.1")
    q10 = state.belief["gain"].quantile(0.1, "sample", method="inverted_cdf")
    np.testing.assert_allclose(d["phi_gain"].values, q10.values)
    np.testing.assert_allclose(d["u0"].values, q10.values - d["c_lambda"].values)
    np.testing.assert_allclose(d["mv"].values, q10.values / d["c_lambda"].values)
    assert d.attrs["functional"] == "lcb:0.1"


def test_mv_reasons_and_diagnosis_gain_zero():
    extra = [{"id": "probe", "role": "diagnosis", "lens": "model", "method": "p",
              "cost": {"eng_h": 1}},
             {"id": "free", "role": "adaptation", "lens": "data", "method": "X", "cost": {}}]
    cs = toy_candidates(extra)
    state = toy_state(cs, [6, 15, 3, 9, 0, 1])
    # the diagnosis has no gain draws at all: make_belief fills it with zeros
    belief = make_belief(state.belief["gain"].drop_sel(candidate="probe"), cs, step=0,
                         policy="pi0")
    d = decide(state.with_(belief=belief), cs, weights=LAM)
    assert float(d["phi_gain"].sel(candidate="probe")) == 0.0
    assert float(d["u0"].sel(candidate="probe")) == pytest.approx(-1.0)
    assert np.isnan(d["mv"].sel(candidate="probe"))
    assert "uninformative" in str(d["mv_reason"].sel(candidate="probe").values)
    assert np.isnan(d["mv"].sel(candidate="free"))
    assert "C_λ = 0" in str(d["mv_reason"].sel(candidate="free").values)


def test_budget_feasibility_and_stop_reasons():
    cs = toy_candidates()
    mus = [mu for mu, _ in TOY.values()]
    d = decide(toy_state(cs, mus, budget=(1, 20, 10)), cs, weights=LAM)
    assert not bool(d["budget_ok"].sel(candidate="DR"))
    assert "compute needs 50 > 20 left" in str(d["excluded_reason"].sel(candidate="DR").values)
    assert d.attrs["chosen"] == "SI"
    d = decide(toy_state(cs, mus, budget=(0, 0, 0)), cs, weights=LAM)
    assert d.attrs["stop"] == 1 and d.attrs["stop_reason"].startswith("budget exhausted")
    d = decide(toy_state(cs, [0.1, 0.1, 0.1, 0.1]), cs, weights=LAM)
    assert d.attrs["stop"] == 1 and d.attrs["stop_reason"].startswith("economic stop")


def test_q_with_cvu_and_terminal_convention():
    cs = toy_candidates()
    mus = [mu for mu, _ in TOY.values()]
    cvu = xr.Dataset({"cvu": ("candidate", [10.0, 0.0, 0.0, 0.0])},
                     coords={"candidate": cs.ids})
    d = decide(toy_state(cs, mus), cs, weights=LAM, beta=0.5, cvu=cvu)
    assert float(d["q"].sel(candidate="SI")) == pytest.approx(3.4 + 5.0)
    assert d.attrs["chosen"] == "SI"
    d = decide(toy_state(cs, mus, step=4, horizon=5), cs, weights=LAM, beta=0.5, cvu=cvu)
    assert d.attrs["chosen"] == "DR" and d.attrs["cvu_status"].startswith("terminal")
    np.testing.assert_array_equal(d["q"].values, d["u0"].values)


def test_bad_parameters_name_the_parameter():
    cs = toy_candidates()
    state = toy_state(cs, [1, 2, 3, 4])
    with pytest.raises(InputError, match=r"^beta: "):
        decide(state, cs, weights=LAM, beta=-1)
    with pytest.raises(InputError, match=r"^functional: unknown functional"):
        decide(state, cs, weights=LAM, functional="max")
    with pytest.raises(InputError, match=r"^weights: .*'gpu'"):
        decide(state, cs, weights={**LAM, "gpu": 1.0})
    with pytest.raises(InputError, match=r"^weights: .*missing"):
        decide(state, cs, weights={"real_h": 1.0})
    with pytest.raises(InputError, match=r"^weights: .*>= 0"):
        decide(state, cs, weights={**LAM, "eng_h": -1.0})


def test_safety_gate_blocks_hardware_without_evidence():
    extra = [{"id": "hw", "role": "adaptation", "lens": "optimization", "method": "FT",
              "cost": {"real_h": 0.01}, "drives_hardware": True, "hardware_group": "arm"}]
    cs = toy_candidates(extra)
    state = toy_state(cs, [1, 1, 1, 1, 50])
    d = decide(state, cs, weights=LAM)
    assert not bool(d["safe"].sel(candidate="hw"))
    assert "0/0 unsafe" in str(d["excluded_reason"].sel(candidate="hw").values)
    belief = state.belief.copy()
    belief["executions"] = belief["executions"].copy(data=[0, 0, 0, 0, 100])
    d = decide(state.with_(belief=belief), cs, weights=LAM, gate=SafetyGate(alpha_exec=0.05))
    assert bool(d["safe"].sel(candidate="hw")) and d.attrs["chosen"] == "hw"
    assert float(d["p_exec_bound"].sel(candidate="hw")) == pytest.approx(1 - 0.05 ** (1 / 100))


def test_decision_stability_reflects_closeness():
    cs = toy_candidates()
    # DR and SI nearly tied in U0 with wide draws → flips often; well separated → never
    state = toy_state(cs, [6, 10.45, 0, 0], spread=5.0, n=200)
    close = decide(state, cs, weights=LAM)
    far = decide(toy_state(cs, [6, 30, 0, 0], spread=1.0), cs, weights=LAM)
    # bootstrap of the mean: Pr(flip) ≈ Φ(−ΔU0 / (sd(g_DR − g_SI)/√n)); ± 4 binomial s.e. of
    # the 200 resamples
    diff = (state.belief["gain"].sel(candidate="DR") - state.belief["gain"].sel(candidate="SI"))
    du0 = float(close["u0"].sel(candidate="DR") - close["u0"].sel(candidate="SI"))
    expected = stats.norm.cdf(-abs(du0) / (float(diff.std()) / np.sqrt(200)))
    assert 0.3 < expected < 0.5  # a near tie
    assert abs(close.attrs["flip_probability"] - expected) <= 4 * np.sqrt(
        expected * (1 - expected) / 200)
    assert far.attrs["flip_probability"] == 0.0


def test_scarcity_weights_rise_as_budget_falls():
    rule = ScarcityWeights(LAM, {"real_h": 10, "compute": 100, "eng_h": 10}, kappa=1.0)
    full = make_budget({"real_h": 10, "compute": 100, "eng_h": 10}, LAM)
    half = make_budget({"real_h": 5, "compute": 100, "eng_h": 0}, LAM)
    np.testing.assert_allclose(rule(full).values, [3.0, 0.1, 1.0])
    np.testing.assert_allclose(rule(half).values, [6.0, 0.1, 1.0 / 0.05])


def test_g0_is_max_of_zero_and_feasible_u0():
    u0 = np.array([[1.0, 3.0, -1.0], [-2.0, -1.0, -0.5]])
    feas = np.array([True, False, True])
    np.testing.assert_array_equal(g0(u0, feas), [1.0, 0.0])


def test_lambda_next_uses_budget_after_the_action():
    cs = toy_candidates()
    state = toy_state(cs, [6, 15, 3, 9], budget=(10, 100, 10))
    rule = ScarcityWeights(LAM, {"real_h": 10, "compute": 100, "eng_h": 10})
    d = decide(state, cs, weights=rule)
    # FT spends 4 of 10 real hours: λ_real goes from 3 to 3·10/6
    assert float(d["lambda_next_real_h"].sel(candidate="FT")) == pytest.approx(5.0)
    assert float(d["lambda_next_compute"].sel(candidate="DR")) == pytest.approx(0.2)
    assert d.attrs["lambda_real_h"] == pytest.approx(3.0)


def test_q_decomposition_plot(tmp_path):
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_q_decomposition

    cs = toy_candidates()
    cvu = xr.Dataset({"cvu": ("candidate", [1.0, -2.0, 0.0, 0.5])}, coords={"candidate": cs.ids})
    d = decide(toy_state(cs, [6, 15, 3, 9], budget=(1, 1000, 100)), cs, weights=LAM, beta=1.0,
               cvu=cvu)
    ax = plot_q_decomposition(d)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert f"★ {d.attrs['chosen']}" in labels
    assert len(ax.containers) >= 2  # U0 bars and β·CVU bars
    ax.figure.savefig(tmp_path / "q.png")
    plt.close(ax.figure)
