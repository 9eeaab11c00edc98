from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.decision.engine import Bootstrap, decide, decision_stability
from belief.decision.functional_registry import parse_functional
from belief.decision.safety import SafetyGate
from belief.decision.scores import g0
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.decision.weights import ScarcityWeights
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from belief.posterior.experiments import Experiment

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


def toy_state(cs, mus, budget=(100, 1000, 100), n=400, spread=1.0, step=0, seed=0):
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(n, len(mus)))
    noise -= noise.mean(axis=0)  # draws whose mean is exactly μ
    adapting = np.array([c.changes_policy for c in cs][: len(mus)])
    assert all(m == 0 for m, a in zip(mus, adapting, strict=True) if not a)
    noise[:, ~adapting] = 0.0  # a diagnosis or model update has ΔJ = 0 exactly
    gain = xr.DataArray(np.array(mus)[None, :] + spread * noise, dims=("sample", "candidate"),
                        coords={"candidate": cs.ids[: len(mus)]})
    belief = make_belief(gain, cs, step=step, policy="pi0")
    b = make_budget(dict(zip(cs.resources, budget, strict=True)), cs.resources)
    return State(step=step, budget=b, policy="pi0", belief=belief)


def test_toy_mv_ranks_si_first_u0_ranks_dr_first():
    cs = toy_candidates()
    state = toy_state(cs, [mu for mu, _ in TOY.values()])
    d = decide(state, cs, DecisionSettings(weights=LAM, beta=0.0))
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
    d = decide(state, cs, DecisionSettings(weights=LAM, functional="lcb:0.1"))
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
    d = decide(state.with_(belief=belief), cs, DecisionSettings(weights=LAM))
    assert float(d["phi_gain"].sel(candidate="probe")) == 0.0
    assert float(d["u0"].sel(candidate="probe")) == pytest.approx(-1.0)
    assert np.isnan(d["mv"].sel(candidate="probe"))
    assert "uninformative" in str(d["mv_reason"].sel(candidate="probe").values)
    assert np.isnan(d["mv"].sel(candidate="free"))
    assert "C_λ = 0" in str(d["mv_reason"].sel(candidate="free").values)


def test_budget_feasibility_and_stop_reasons():
    cs = toy_candidates()
    mus = [mu for mu, _ in TOY.values()]
    d = decide(toy_state(cs, mus, budget=(1, 20, 10)), cs, DecisionSettings(weights=LAM))
    assert not bool(d["budget_ok"].sel(candidate="DR"))
    assert "compute needs 50 > 20 left" in str(d["excluded_reason"].sel(candidate="DR").values)
    assert d.attrs["chosen"] == "SI"
    d = decide(toy_state(cs, mus, budget=(0, 0, 0)), cs, DecisionSettings(weights=LAM))
    assert d.attrs["stop"] == 1 and d.attrs["stop_reason"].startswith("budget exhausted")
    d = decide(toy_state(cs, [0.1, 0.1, 0.1, 0.1]), cs, DecisionSettings(weights=LAM))
    assert d.attrs["stop"] == 1 and d.attrs["stop_reason"].startswith("economic stop")


def test_q_with_cvu_and_terminal_convention():
    cs = toy_candidates()
    mus = [mu for mu, _ in TOY.values()]
    cvu = xr.Dataset({"cvu": ("candidate", [10.0, 0.0, 0.0, 0.0])},
                     coords={"candidate": cs.ids})
    d = decide(toy_state(cs, mus), cs, DecisionSettings(weights=LAM, beta=0.5), cvu=cvu)
    assert float(d["q"].sel(candidate="SI")) == pytest.approx(3.4 + 5.0)
    assert d.attrs["chosen"] == "SI"
    d = decide(toy_state(cs, mus, step=4), cs, DecisionSettings(weights=LAM, beta=0.5, horizon=5),
               cvu=cvu)
    assert d.attrs["chosen"] == "DR" and d.attrs["cvu_status"].startswith("terminal")
    np.testing.assert_array_equal(d["q"].values, d["u0"].values)


def test_bad_parameters_name_the_parameter():
    cs = toy_candidates()
    state = toy_state(cs, [1, 2, 3, 4])
    # refused once, when the settings are built, naming the setting and the allowed values
    with pytest.raises(InputError, match=r"^beta: must be a finite number >= 0, got -1"):
        DecisionSettings(weights=LAM, beta=-1)
    with pytest.raises(InputError, match=r"^functional: unknown functional 'max'; allowed: "
                                         r"'mean', 'lcb:Q'"):
        DecisionSettings(weights=LAM, functional="max")
    with pytest.raises(InputError, match=r"^horizon: must be an integer >= 1, got 0"):
        DecisionSettings(weights=LAM, horizon=0)
    with pytest.raises(InputError, match=r"^CVUSettings.n_outcomes: must be an integer >= 2"):
        DecisionSettings(weights=LAM, cvu=CVUSettings(n_outcomes=1))
    with pytest.raises(InputError, match=r"^weights, row eng_h: λ of eng_h must be >= 0"):
        DecisionSettings(weights={**LAM, "eng_h": -1.0})
    with pytest.raises(InputError, match=r"^weights: resource weights λ are required"):
        decide(state, cs, DecisionSettings())
    with pytest.raises(InputError, match=r"^weights: .*'gpu'"):
        decide(state, cs, DecisionSettings(weights={**LAM, "gpu": 1.0}))
    with pytest.raises(InputError, match=r"^weights: .*missing"):
        decide(state, cs, DecisionSettings(weights={"real_h": 1.0}))


def test_safety_gate_blocks_hardware_without_evidence():
    extra = [{"id": "hw", "role": "adaptation", "lens": "optimization", "method": "FT",
              "cost": {"real_h": 0.01}, "drives_hardware": True, "hardware_group": "arm"}]
    cs = toy_candidates(extra)
    state = toy_state(cs, [1, 1, 1, 1, 50])
    d = decide(state, cs, DecisionSettings(weights=LAM))
    assert not bool(d["safe"].sel(candidate="hw"))
    assert "0/0 unsafe" in str(d["excluded_reason"].sel(candidate="hw").values)
    belief = state.belief.copy()
    belief["executions"] = belief["executions"].copy(data=[0, 0, 0, 0, 100])
    d = decide(state.with_(belief=belief), cs,
               DecisionSettings(weights=LAM, gate=SafetyGate(alpha_exec=0.05,
                                                             method="clopper_pearson")))
    assert bool(d["safe"].sel(candidate="hw")) and d.attrs["chosen"] == "hw"
    assert float(d["p_exec_bound"].sel(candidate="hw")) == pytest.approx(1 - 0.05 ** (1 / 100))


def test_decision_stability_reflects_closeness():
    cs = toy_candidates()
    # DR and SI nearly tied in U0 with wide draws → flips often; well separated → never
    state = toy_state(cs, [6, 10.45, 0, 0], spread=5.0, n=200)
    close = decide(state, cs, DecisionSettings(weights=LAM))
    far = decide(toy_state(cs, [6, 30, 0, 0], spread=1.0), cs, DecisionSettings(weights=LAM))
    # bootstrap of the mean: Pr(flip) ≈ Φ(−ΔU0 / (sd(g_DR − g_SI)/√n)); ± 4 binomial s.e. of
    # the 200 resamples
    diff = (state.belief["gain"].sel(candidate="DR") - state.belief["gain"].sel(candidate="SI"))
    du0 = float(close["u0"].sel(candidate="DR") - close["u0"].sel(candidate="SI"))
    expected = stats.norm.cdf(-abs(du0) / (float(diff.std()) / np.sqrt(200)))
    assert 0.3 < expected < 0.5  # a near tie
    assert abs(close.attrs["flip_probability"] - expected) <= 4 * np.sqrt(
        expected * (1 - expected) / 200)
    assert far.attrs["flip_probability"] == 0.0


def test_decision_stability_with_an_unknown_cvu_error_is_nan_not_zero():
    rng = np.random.default_rng(0)
    gain = rng.normal([1.0, 0.9, 0.2], 1.0, size=(200, 3))
    fn = parse_functional("mean")
    cost, cont = np.zeros(3), np.zeros(3)
    feas = np.array([True, True, False])
    known = decision_stability(gain, fn, cost, cont, feas, 0, Bootstrap(200, 1),
                               continuation_se=np.array([0.5, 0.5, np.nan]))
    # the NaN error of an unranked (infeasible) candidate does not matter; a near tie flips
    assert 0.0 < known < 1.0
    # the same near tie with one ranked candidate's error unknown: NaN, not "as if 0"
    unknown = decision_stability(gain, fn, cost, cont, feas, 0, Bootstrap(200, 1),
                                 continuation_se=np.array([0.5, np.nan, 0.0]))
    assert np.isnan(unknown)


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
    d = decide(state, cs, DecisionSettings(weights=rule))
    # FT spends 4 of 10 real hours: λ_real goes from 3 to 3·10/6
    assert float(d["lambda_next_real_h"].sel(candidate="FT")) == pytest.approx(5.0)
    assert float(d["lambda_next_compute"].sel(candidate="DR")) == pytest.approx(0.2)
    assert d.attrs["lambda_real_h"] == pytest.approx(3.0)


def test_q_decomposition_plot(tmp_path):
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_q_decomposition

    cs = toy_candidates()
    cvu = xr.Dataset({"cvu": ("candidate", [1.0, -2.0, 0.0, 0.5])}, coords={"candidate": cs.ids})
    d = decide(toy_state(cs, [6, 15, 3, 9], budget=(1, 1000, 100)), cs,
               DecisionSettings(weights=LAM, beta=1.0), cvu=cvu)
    ax = plot_q_decomposition(d)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert f"★ {d.attrs['chosen']}" in labels
    assert len(ax.containers) >= 2  # U0 bars and β·CVU bars
    ax.figure.savefig(tmp_path / "q.png")
    plt.close(ax.figure)


# -- the economic stop compares each candidate with stopping (issue 14) -----------------------
def _one_resource_set(entries):
    return candidates_from_dict({"campaign": {"eval_protocol": "E", "resources": ["r"]},
                                 "candidate": entries})


def _state(cs, gain, budget=1.0, step=0):
    belief = make_belief(xr.DataArray(gain, dims=("sample", "candidate"),
                                      coords={"candidate": cs.ids}), cs, step=step, policy="pi0")
    return State(step=step, budget=make_budget({"r": budget}, ["r"]), policy="pi0",
                 belief=belief)


def test_a_sure_gain_is_taken_although_nothing_is_worth_doing_after_it():
    # one non-repeatable adaptation, sure gain 0.05, C_λ = 0.01: U0 = 0.04 at step 0 of T = 8.
    cs = _one_resource_set([{"id": "a", "role": "adaptation", "lens": "data", "method": "DR",
                             "cost": {"r": 0.01}}])
    gain = np.full((200, 1), 0.05)
    state = _state(cs, gain)
    exps = {"a": Experiment(next_gain=gain)}  # no outcome: only the candidate set changes
    myopic = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=0.0, horizon=8))
    assert myopic.attrs["chosen"] == "a"
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8),
               experiments=exps)
    # CVU = G0(s^{a}) − G0(s^∅) = 0 − 0.04: Q = 0, but against stopping a is worth 0.04
    assert float(d["cvu"].sel(candidate="a")) == pytest.approx(-0.04)
    assert float(d["q"].sel(candidate="a")) == pytest.approx(0.0, abs=1e-12)
    assert d.attrs["g0_null"] == pytest.approx(0.04)
    assert float(d["value_vs_stop"].sel(candidate="a")) == pytest.approx(0.04)
    assert d.attrs["chosen"] == "a" and d.attrs["stop"] == 0


def test_stopping_is_right_when_nothing_is_worth_doing_now_or_after():
    cs = _one_resource_set([
        {"id": "a", "role": "adaptation", "lens": "data", "method": "DR", "cost": {"r": 0.1}},
        {"id": "b", "role": "adaptation", "lens": "model", "method": "SI", "cost": {"r": 0.2}}])
    gain = np.tile([0.05, 0.1], (200, 1))  # U0 = −0.05 and −0.1
    state = _state(cs, gain)
    exps = {m: Experiment(next_gain=gain) for m in cs.ids}
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8),
               experiments=exps)
    assert d.attrs["stop"] == 1 and d.attrs["chosen"] == "(stop)"
    assert "worth more than stopping" in d.attrs["stop_reason"]
    assert "U0 + β·E[G0(s')]" in d.attrs["stop_reason"]
    np.testing.assert_array_less(d["value_vs_stop"].values, 0.0)
    for m in cs.ids:
        assert str(d["excluded_reason"].sel(candidate=m).values).startswith("economic stop")


def test_terminal_step_uses_u0_against_stopping():
    cs = _one_resource_set([{"id": "a", "role": "adaptation", "lens": "data", "method": "DR",
                             "cost": {"r": 0.01}}])
    gain = np.full((200, 1), 0.05)
    state = _state(cs, gain, step=7)
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8),
               experiments={"a": Experiment(next_gain=gain)})
    assert d.attrs["cvu_status"].startswith("terminal")
    np.testing.assert_array_equal(d["value_vs_stop"].values, d["u0"].values)
    assert d.attrs["chosen"] == "a"
    lossy = _state(cs, np.full((200, 1), 0.005), step=7)  # U0 = −0.005 at the horizon
    assert decide(lossy, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8),
                  experiments={"a": Experiment(next_gain=gain)}).attrs["stop"] == 1


def test_a_diagnosis_worth_only_what_it_enables_is_chosen_over_stopping():
    # "a" has prior gain N(0, 0.1²): U0(a) = −0.001 < 0, so without information one stops.
    # "probe" measures a's gain with s.e. 0.02 for C_λ = 0.01: U0(probe) = −0.01, but
    # E_Y[G0(s^{probe,Y})] = E[max(0, E(g_a | Y) − 0.001)] ≈ 0.039 (normal preposterior).
    cs = _one_resource_set([
        {"id": "a", "role": "adaptation", "lens": "data", "method": "DR", "cost": {"r": 0.001}},
        {"id": "probe", "role": "diagnosis", "lens": "data", "method": "pilot",
         "cost": {"r": 0.01}}])
    n = 4000
    g_a = 0.1 * stats.norm.ppf((np.arange(n) + 0.5) / n)
    gain = np.stack([g_a, np.zeros(n)], -1)
    se = 0.02
    probe = Experiment(next_gain=gain,
                       simulate=lambda rng, idx: g_a[idx] + se * rng.standard_normal(len(idx)),
                       loglik=lambda y: stats.norm.logpdf(y[:, None], g_a[None, :], se))
    state = _state(cs, gain)
    settings = DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8,
                                cvu=CVUSettings(n_outcomes=512, seed=1))
    d = decide(state, cs, settings, experiments={"probe": probe,
                                                 "a": Experiment(next_gain=gain)})
    assert float(d["u0"].sel(candidate="probe")) == pytest.approx(-0.01)
    assert d.attrs["g0_null"] == 0.0  # nothing is worth doing now without the probe
    # closed form: s = sd of the preposterior mean = 0.1² / sqrt(0.1² + se²); E[max(0, m − c)]
    s = 0.1**2 / np.sqrt(0.1**2 + se**2)
    c = 0.001
    expected = s * stats.norm.pdf(c / s) - c * stats.norm.sf(c / s)
    got = float(d["value_vs_stop"].sel(candidate="probe")) + 0.01  # = E_Y[G0]
    assert abs(got - expected) < 4 * float(d["cvu_mcse"].sel(candidate="probe"))
    assert d.attrs["chosen"] == "probe" and d.attrs["stop"] == 0
    # the decision carries the value of information: without the probe's outcome nothing is
    # worth doing after it (G0(s̄) = 0), so VOI is the whole E_Y[G0]; "a" teaches nothing
    assert abs(float(d["cvu_voi"].sel(candidate="probe")) - expected) < 4 * float(
        d["cvu_mcse"].sel(candidate="probe"))
    assert float(d["cvu_voi"].sel(candidate="a")) == 0.0


def _two_sure_candidates(gain_a=0.3, gain_b=0.25):
    cs = _one_resource_set([
        {"id": "a", "role": "adaptation", "lens": "data", "method": "DR", "cost": {"r": 0.01}},
        {"id": "b", "role": "adaptation", "lens": "model", "method": "SI", "cost": {"r": 0.01}}])
    gain = np.tile([gain_a, gain_b], (400, 1))  # no posterior spread: only CVU's error counts
    return cs, _state(cs, gain)


def test_a_nan_cvu_handed_to_decide_is_never_ranked_and_says_why():
    cs, state = _two_sure_candidates()
    given = xr.Dataset({"cvu": ("candidate", [np.nan, 0.0]),
                        "cvu_mcse": ("candidate", [np.nan, 0.0]),
                        "cvu_method": ("candidate", np.array(["failed", "no outcome"], object)),
                        "cvu_reason": ("candidate", np.array(
                            ["the simulated outcomes are not finite", ""], object))},
                       coords={"candidate": ["a", "b"]}, attrs={"g0_null": 0.29})
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8), cvu=given)
    assert d.attrs["chosen"] == "b"  # a has the larger U0, but its Q is unknown
    assert np.isnan(float(d["q"].sel(candidate="a")))
    why = str(d["excluded_reason"].sel(candidate="a").values)
    assert why == "not ranked: CVU could not be estimated (the simulated outcomes are not finite)"
    status = d.attrs["cvu_status"]
    assert status.startswith("given except for 1 feasible candidate") and "a (the simulated" \
        in status
    assert np.isfinite(d.attrs["flip_probability"])
    # a NaN without a reason is reported as such, and with every CVU NaN the decision stops
    bare = given.drop_vars(["cvu_reason", "cvu_method"]).assign(
        cvu=("candidate", [np.nan, np.nan]))
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8), cvu=bare)
    assert d.attrs["stop"] == 1 and "estimable CVU" in d.attrs["stop_reason"]
    assert "no reason given" in str(d["excluded_reason"].sel(candidate="a").values)


def test_a_cvu_that_fails_inside_decide_is_reported():
    cs, state = _two_sure_candidates()
    broken = np.tile([0.3, np.nan], (400, 1))
    exps = {"a": Experiment(next_gain=broken), "b": Experiment(next_gain=state.belief[
        "gain"].transpose("sample", "candidate").values)}
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8),
               experiments=exps)
    assert d["cvu_method"].sel(candidate="a").item() == "failed"
    assert d.attrs["chosen"] == "b"
    assert d.attrs["cvu_status"].startswith("estimated except for 1 feasible candidate")
    assert "not finite" in str(d["excluded_reason"].sel(candidate="a").values)


def test_flip_probability_includes_cvu_monte_carlo_error():
    # U0(a) − U0(b) = 0.05 exactly (no posterior spread); CVU(a) = 0 ± 0.05, CVU(b) = 0:
    # a flips to b when 0.05 + 0.05·Z < 0, Pr = Φ(−1) = 0.159; ± 4 binomial s.e. of 4000
    cs, state = _two_sure_candidates()
    given = xr.Dataset({"cvu": ("candidate", [0.0, 0.0]),
                        "cvu_se": ("candidate", [0.05, 0.0])},
                       coords={"candidate": ["a", "b"]}, attrs={"g0_null": 0.29})
    settings = DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8,
                                stability_resamples=4000)
    d = decide(state, cs, settings, cvu=given)
    assert d.attrs["chosen"] == "a"
    expected = stats.norm.cdf(-1.0)
    assert abs(d.attrs["flip_probability"] - expected) <= 4 * np.sqrt(
        expected * (1 - expected) / 4000)
    assert float(d["cvu_se"].sel(candidate="a")) == 0.05
    exact = decide(state, cs, settings, cvu=given.assign(cvu_se=("candidate", [0.0, 0.0])))
    assert exact.attrs["flip_probability"] == 0.0


def test_the_decision_table_shows_cvu_with_its_error_and_the_estimator():
    from rich.console import Console

    from belief.report.tables import decision_rich_table

    cs, state = _two_sure_candidates()
    given = xr.Dataset({"cvu": ("candidate", [0.012, np.nan]),
                        "cvu_mcse": ("candidate", [0.003, np.nan]),
                        "cvu_draws_se": ("candidate", [0.004, np.nan]),
                        "cvu_method": ("candidate", np.array(["psis+cv", "failed"], object)),
                        "cvu_reason": ("candidate", np.array(["", "refit failed"], object))},
                       coords={"candidate": ["a", "b"]}, attrs={"g0_null": 0.29})
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8), cvu=given)
    assert float(d["cvu_se"].sel(candidate="a")) == pytest.approx(0.005)  # √(0.003² + 0.004²)
    console = Console(record=True, width=250)
    console.print(decision_rich_table(d, "decision", wide=True, ascii_only=False))
    cells = [[c.strip() for c in line.split("│")[1:-1]]
             for line in console.export_text().splitlines() if line.startswith("│")]
    rows = {r[0]: r for r in cells}
    col = rows["a"].index("0.012±0.005")  # CVU ± cvu_se, then the estimator
    assert rows["a"][col + 1] == "psis+cv"
    assert rows["b"][col] == "—" and rows["b"][col + 1] == "failed"
    console = Console(record=True, width=100)  # the compact table: CVU ± cvu_se, no estimator
    console.print(decision_rich_table(d, "decision", ascii_only=False))
    text = console.export_text()
    assert "0.012±0.005" in text and "psis+cv" not in text


def test_a_given_cvu_without_g0_null_is_compared_with_stopping_exactly():
    """G0(s^∅) = max(0, max feasible U0) when the given CVU does not carry it (not 0)."""
    cs, state = _two_sure_candidates()
    given = xr.Dataset({"cvu": ("candidate", [-0.29, -0.24]),
                        "cvu_mcse": ("candidate", [0.0, 0.0])},
                       coords={"candidate": ["a", "b"]})  # no attrs["g0_null"]
    d = decide(state, cs, DecisionSettings(weights={"r": 1.0}, beta=1.0, horizon=8), cvu=given)
    u0 = d["u0"].values
    assert d.attrs["g0_null"] == pytest.approx(max(0.0, u0.max()))
    np.testing.assert_allclose(d["value_vs_stop"].values, d["q"].values + max(0.0, u0.max()))
    assert d.attrs["chosen"] == "a"  # Q(a) = 0: the former default would have stopped here
