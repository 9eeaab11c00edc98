"""CVU's execution-risk channel (belief.decision.cvu.safety) on hand-built beliefs, no model
compile: a bench safety test that can open a gated candidate, against the exact
beta-binomial value, and a belief where no gate can change, against the fixed-gate CVU."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr
from scipy import stats
from scipy.special import betaincinv

from belief.decision.cvu import CVUProblem, continuation_value, cvu_for_state
from belief.decision.cvu.safety import next_gate
from belief.decision.feasibility import feasibility
from belief.decision.safety import SafetyGate
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import Candidate, CandidateSet
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from belief.posterior.experiments import Experiment

S, RUNS, N0, K0 = 4000, 40, 30, 1
GAIN_FT, GAIN_ALT = 0.10, 0.04
LAMBDA = {"real_h": 0.01, "compute": 0.0, "eng_h": 0.01}
COST_FT = {"real_h": 1.0}


def _candidates(runs: int = RUNS) -> CandidateSet:
    return CandidateSet((
        Candidate("ft", "adaptation", "optimization", "FT", COST_FT, drives_hardware=True,
                  changes_policy=True, repeatable=True, hardware_group="arm"),
        Candidate("bench", "diagnosis", "optimization", "bench", {"eng_h": 0.5},
                  safety_runs=runs, safety_test_of="ft"),
        Candidate("alt", "adaptation", "data", "DR", {}, changes_policy=True),
    ))


def _state(cands: CandidateSet, n: int, k: int, seed: int = 0,
           stratified: bool = False) -> State:
    """ft's p_unsafe draws from its flat-prior posterior Beta(k + 1, n − k + 1): random, or
    (``stratified``) its quantiles at (i + ½)/S in random order, whose error as a sample of
    the posterior is negligible next to the outcomes' Monte Carlo error."""
    rng = np.random.default_rng(seed)
    gain = np.zeros((S, 3))
    gain[:, 0], gain[:, 2] = GAIN_FT, GAIN_ALT  # constant gains: φ is known exactly
    p = np.zeros((S, 3))
    p[:, 0] = (rng.permutation(stats.beta.ppf((np.arange(S) + 0.5) / S, k + 1, n - k + 1))
               if stratified else rng.beta(k + 1, n - k + 1, S))
    coords = {"sample": np.arange(S), "candidate": cands.ids}
    belief = make_belief(xr.DataArray(gain, dims=("sample", "candidate"), coords=coords),
                         cands, step=0, policy="pi0", executions=np.array([n, 0, 0]),
                         unsafe=np.array([k, 0, 0]),
                         p_unsafe=xr.DataArray(p, dims=("sample", "candidate"), coords=coords))
    return State(step=0, budget=make_budget({"real_h": 10, "compute": 10, "eng_h": 10},
                                            cands.resources), policy="pi0", belief=belief)


def _experiments(state: State) -> dict[str, Experiment]:
    g = state.belief["gain"].values
    return {c: Experiment(next_gain=g) for c in ("ft", "bench", "alt")}


def _settings(method: str = "clopper_pearson", outcomes: int = 2000) -> DecisionSettings:
    return DecisionSettings(weights=LAMBDA, beta=1.0,
                            gate=SafetyGate(alpha_exec=0.1, delta=0.05, method=method),
                            cvu=CVUSettings(n_outcomes=outcomes, seed=7))


def _exact(open_by_y: np.ndarray, n: int, k: int) -> float:
    """Σ_y BetaBinom(y; r, k + 1, n − k + 1) · max(0, U0(ft), U0(alt)) − G0(s^∅) with ft
    feasible in s_{t+1} iff open_by_y[y] (ft is gated at s_t: G0(s^∅) = U0(alt))."""
    u_ft, u_alt = GAIN_FT - 0.01, GAIN_ALT
    pmf = stats.betabinom.pmf(np.arange(RUNS + 1), RUNS, k + 1, n - k + 1)
    return float(pmf @ np.where(open_by_y, max(u_ft, u_alt, 0.0), max(u_alt, 0.0))) - u_alt


@pytest.mark.parametrize("method", ["clopper_pearson", "posterior"])
def test_bench_test_cvu_matches_beta_binomial(method):
    cands = _candidates()
    state = _state(cands, N0, K0)
    settings = _settings(method)
    feas = feasibility(state, cands, settings.gate, cands.costs().values,
                       state.budget.values.astype(float))
    assert not feas.safe[0]  # ft is gated at s_t
    ds = cvu_for_state(state, cands, settings, experiments=_experiments(state))
    # the exact gate after y unsafe of RUNS bench trials: CP, or the (1 − δ)-quantile of the
    # conjugate posterior Beta(k + 1 + y, n − k + 1 + r − y)
    y = np.arange(RUNS + 1)
    if method == "clopper_pearson":
        bound = betaincinv(K0 + y + 1.0, N0 + RUNS - K0 - y, 0.95)
    else:
        bound = betaincinv(K0 + 1.0 + y, N0 - K0 + 1.0 + RUNS - y, 0.95)
    open_exact = bound <= 0.1
    assert 0 < open_exact.sum() < RUNS + 1
    got_gate = next_gate(settings.gate, N0, K0, RUNS, state.belief["p_unsafe"].values[:, 0])
    assert ((got_gate <= 0.1) == open_exact).all()
    exact = _exact(open_exact, N0, K0)
    b = ds.sel(candidate="bench")
    assert exact > 0.01
    assert "can open ft" in str(b["cvu_safety"].values)
    se = float(b["cvu_se"])
    assert 0 < se < 0.1 * exact
    assert abs(float(b["cvu"]) - exact) < 4 * se, (float(b["cvu"]), exact, se)
    # alt teaches nothing about ft's risk: no channel, CVU of its own step only
    assert str(ds.sel(candidate="alt")["cvu_safety"].values) == ""


def test_no_gate_can_change_gives_the_old_cvu():
    cands = _candidates()
    state = _state(cands, 2000, 0)  # ft safe, and 40 bench runs cannot close it
    settings = _settings(outcomes=400)
    new = cvu_for_state(state, cands, settings, experiments=_experiments(state))
    feas = feasibility(state, cands, settings.gate, cands.costs().values,
                       state.budget.values.astype(float))
    assert feas.safe[0]
    old = continuation_value(CVUProblem(
        state.belief["gain"].values, _experiments(state), cands.ids, cands.costs().values,
        state.budget.values.astype(float), settings.weights.bind(cands.resources, state),
        settings.functional, available=feas.available, safe=feas.safe,
        feasible=feas.feasible, repeatable=np.array([c.repeatable for c in cands]),
        settings=settings.cvu))
    assert (new["cvu_safety"].values == "").all()
    xr.testing.assert_identical(new, old)


def test_bench_fields_are_validated():
    base = _candidates().candidates
    with pytest.raises(InputError, match="hardware candidate"):
        CandidateSet((base[0], Candidate("bench", "diagnosis", "optimization", "b", {},
                                         safety_runs=5, safety_test_of="alt"), base[2]))
    with pytest.raises(InputError, match="safety_runs"):
        CandidateSet((base[0], Candidate("bench", "diagnosis", "optimization", "b", {},
                                         safety_runs=-1), base[2]))


def test_bench_world_reports_the_target_cell():
    from belief.campaign.synthetic import SyntheticWorld

    w = SyntheticWorld.with_bench_test(seed=1)
    bench = w.candidates["ft_bench"]
    assert (bench.safety_test_of, bench.safety_runs, bench.drives_hardware) == (
        "ft_real_100", 60, False)
    init = w.initial_safety().set_index("candidate")
    assert init.loc["ft_real_100", "executions"] == 20
    o = w.execute("ft_bench", 0)
    assert list(o.safety["candidate"]) == ["ft_real_100"]
    assert int(o.safety["executions"].iloc[0]) == 60 and o.paired.empty
    # the default world is unchanged
    assert "ft_bench" not in SyntheticWorld(seed=1).candidates.ids


# -- CVU split by channel (belief.decision.cvu.channels) ---------------------------------------

def _open_exact(method: str) -> np.ndarray:
    """Whether ft's gate opens after y = 0..RUNS unsafe of RUNS bench trials (N0, K0)."""
    y = np.arange(RUNS + 1)
    if method == "clopper_pearson":
        return betaincinv(K0 + y + 1.0, N0 + RUNS - K0 - y, 0.95) <= 0.1
    return betaincinv(K0 + 1.0 + y, N0 - K0 + 1.0 + RUNS - y, 0.95) <= 0.1


def _check_sum(ds: xr.Dataset) -> None:
    parts = ds["cvu_own"] + ds["cvu_order"] + ds["cvu_safety_value"]
    ok = np.isfinite(ds["cvu"].values)
    np.testing.assert_allclose(parts.values[ok], ds["cvu"].values[ok], rtol=1e-12, atol=1e-15)


def test_channel_split_of_a_bench_test_is_its_safety_part():
    """Constant gains: learning and order effects are worth 0, and the safety part is the
    exact beta-binomial value of the gate opening, within 4 of its own MCSE (the posterior
    gate's next_gate is checked by test_bench_test_cvu_matches_beta_binomial)."""
    method = "clopper_pearson"
    cands = _candidates()
    state = _state(cands, N0, K0, stratified=True)
    ds = cvu_for_state(state, cands, _settings(method), experiments=_experiments(state))
    _check_sum(ds)
    b = ds.sel(candidate="bench")
    exact = _exact(_open_exact(method), N0, K0)
    assert abs(float(b["cvu_own"])) < 1e-12
    assert float(b["cvu_order"]) == 0.0 and float(b["cvu_order_mcse"]) == 0.0  # no γ
    got, se = float(b["cvu_safety_value"]), float(b["cvu_safety_value_mcse"])
    assert 0 < se < 0.1 * exact
    assert abs(got - exact) < 4 * se, (got, exact, se)
    # no channel but its own for alt and ft (ft's own run cannot open ft: it is gated, and
    # a gated candidate's CVU may be left unscored)
    assert np.isfinite(float(ds["cvu"].sel(candidate="alt")))
    for c in ("alt", "ft"):
        d = ds.sel(candidate=c)
        if np.isfinite(float(d["cvu"])):
            assert float(d["cvu_safety_value"]) == 0.0 and float(d["cvu_order"]) == 0.0
            assert float(d["cvu_own"]) == float(d["cvu"])


def test_channel_split_with_an_order_effect_and_the_gate():
    """The bench test also raises alt's gain by 0.02 (a hand-built order effect): own 0, order
    0.02 exactly (constant gains), safety Pr(open)·(U0(ft) − U0(alt) − 0.02), against the
    exact beta-binomial Pr(open); the order is credited before the gate (module docstring)."""
    cands = _candidates()
    state = _state(cands, N0, K0, stratified=True)
    exps = _experiments(state)
    g = state.belief["gain"].values
    shifted = g.copy()
    shifted[:, 2] += 0.02
    exps["bench"] = Experiment(next_gain=shifted, next_gain_no_order=g)
    ds = cvu_for_state(state, cands, _settings(outcomes=1000), experiments=exps)
    _check_sum(ds)
    b = ds.sel(candidate="bench")
    assert abs(float(b["cvu_own"])) < 1e-12
    assert abs(float(b["cvu_order"]) - 0.02) < 1e-12
    p_open = stats.betabinom.pmf(np.arange(RUNS + 1), RUNS, K0 + 1, N0 - K0 + 1) @ \
        _open_exact("clopper_pearson")
    exact = p_open * ((GAIN_FT - 0.01) - (GAIN_ALT + 0.02))
    got, se = float(b["cvu_safety_value"]), float(b["cvu_safety_value_mcse"])
    assert exact > 0.005 and 0 < se < 0.1 * exact
    assert abs(got - exact) < 4 * se, (got, exact, se)


def test_no_gate_can_change_gives_a_zero_safety_part():
    cands = _candidates()
    state = _state(cands, 2000, 0)  # ft safe, and 40 bench runs cannot close it
    ds = cvu_for_state(state, cands, _settings(outcomes=400), experiments=_experiments(state))
    ok = np.isfinite(ds["cvu"].values)
    assert ok.sum() == 3
    assert (ds["cvu_safety_value"].values == 0.0).all()
    assert (ds["cvu_safety_value_mcse"].values == 0.0).all()
    assert (ds["cvu_order"].values == 0.0).all()
    np.testing.assert_array_equal(ds["cvu_own"].values, ds["cvu"].values)


def test_channel_split_can_be_switched_off():
    cands = _candidates()
    state = _state(cands, N0, K0)
    s = _settings(outcomes=200)
    s = DecisionSettings(weights=LAMBDA, beta=1.0, gate=s.gate,
                         cvu=CVUSettings(n_outcomes=200, seed=7, channel_split=False))
    ds = cvu_for_state(state, cands, s, experiments=_experiments(state))
    assert np.isnan(ds["cvu_safety_value"].values).all()
    assert np.isfinite(float(ds["cvu"].sel(candidate="bench")))


def test_decision_table_and_terminal_table_show_the_split():
    from rich.console import Console

    from belief.decision.engine import decide, decision_table
    from belief.report.tables import decision_rich_table

    cands = _candidates()
    state = _state(cands, N0, K0, stratified=True)
    d = decide(state, cands, _settings(outcomes=400), experiments=_experiments(state))
    table = decision_table(d)
    for col in ("cvu_own", "cvu_order", "cvu_safety_value"):
        assert col in table.columns and col in d and f"{col}_mcse" in d
    b = d.sel(candidate="bench")
    assert float(b["cvu_safety_value"]) > 0
    channels = {"cvu_own": "own", "cvu_order": "order", "cvu_safety_value": "safety"}
    shown = [v for v in channels if v == "cvu_own" or (np.nan_to_num(d[v].values) != 0).any()]
    assert "cvu_safety_value" in shown
    for wide in (False, True):  # a table of its own (compact), columns of the wide table
        console = Console(record=True, width=300)
        console.print(decision_rich_table(d, "decision", wide=wide, ascii_only=False))
        lines = console.export_text().splitlines()
        if wide:  # cells between the rules
            rows = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in lines]
            names = [f"CVU {channels[v]}" for v in shown]
        else:  # cells are single words, apart by spaces
            rows = [line.split() for line in lines]
            names = [channels[v] for v in shown]
        head = next(r for r in rows if r[:1] == ["candidate"] and names[0] in r)
        assert [c for c in head if c in names] == names, head  # in order, zeros left out
        bench = next(r for r in rows[rows.index(head):] if r[:1] == ["bench"])
        for v, name in zip(shown, names, strict=True):  # each ± its Monte Carlo error
            value, _, error = bench[head.index(name)].partition("±")
            decimals = len(value.split(".")[1])
            assert abs(float(value) - float(d[v].sel(candidate="bench"))) \
                <= 0.5 * 10 ** -decimals, (v, bench)
            assert (error != "") == (float(d[f"{v}_mcse"].sel(candidate="bench")) > 0)
    from belief.report.plots import plot_q_decomposition

    ax = plot_q_decomposition(d)
    notes = [t.get_text() for t in ax.texts]
    assert f"β·safety {float(b['cvu_safety_value']):+.3f}" in notes


def test_refits_are_reused_by_the_split():
    from belief.decision.cvu.problem import _memoised

    calls = []

    def refit(y):
        calls.append(np.asarray(y).copy())
        return np.full((3, 2), float(np.sum(y)))

    once = _memoised(refit)
    a = once(np.array([1.0, 2.0]))
    b = once(np.array([1.0, 2.0]))
    c = once(np.array([2.0, 2.0]))
    assert len(calls) == 2 and a is b and c[0, 0] == 4.0


def _learning_experiments(state: State, calls: list[int]
                          ) -> tuple[dict[str, Experiment], np.ndarray]:
    """alt's run measures alt's gain (y = g_alt + N(0, 0.02²), 20 replicates averaged) and
    raises ft's gain by 0.01 (an order effect): importance weights, an order channel and,
    with the gate of s_t held, no safety channel; ``calls`` counts loglik's outcome rows."""
    rng = np.random.default_rng(3)
    g = state.belief["gain"].values.copy()
    g[:, 2] = GAIN_ALT + 0.03 * rng.standard_normal(S)  # alt's gain is uncertain
    sd = 0.02 / np.sqrt(20)

    def simulate(r: np.random.Generator, idx: np.ndarray) -> np.ndarray:
        return g[idx, 2] + sd * r.standard_normal(idx.size)

    def loglik(y: np.ndarray) -> np.ndarray:
        calls.append(len(y))
        return stats.norm.logpdf(np.asarray(y)[:, None], g[None, :, 2], sd)

    shifted = g.copy()
    shifted[:, 0] += 0.01
    return {"ft": Experiment(next_gain=g), "bench": Experiment(next_gain=g),
            "alt": Experiment(next_gain=shifted, simulate=simulate, loglik=loglik,
                              next_gain_no_order=g)}, g


@pytest.mark.parametrize("functional", ["mean", "lcb:0.2"])
def test_split_reuses_the_weights_of_the_cvu_outcomes(monkeypatch, functional):
    """The split's estimates share the CVU's PSIS weights (cvu.psis.OutcomeWeights): the
    outcomes' log-likelihood is evaluated once per outcome with or without the split, and
    the split is bit for bit the one computed with fresh weights for every estimate (the
    weighted quantiles the LCB shares are remembered too)."""
    import belief.decision.cvu.psis as cvu_psis

    cands = _candidates()
    state = _state(cands, 2000, 0)  # ft safe: every gate fixed
    s = DecisionSettings(weights=LAMBDA, beta=1.0, functional=functional,
                         gate=_settings().gate, cvu=CVUSettings(n_outcomes=300, seed=7))
    runs = {}
    for split in (True, False):
        calls: list[int] = []
        exps, _ = _learning_experiments(state, calls)
        s_k = DecisionSettings(weights=LAMBDA, beta=1.0, functional=functional, gate=s.gate,
                               cvu=CVUSettings(n_outcomes=300, seed=7, channel_split=split))
        runs[split] = cvu_for_state(state, cands, s_k, experiments=exps)
        assert sum(calls) == 300, (split, calls)
    on, off = runs[True], runs[False]
    a = on.sel(candidate="alt")
    assert a["cvu_method"].item().startswith("psis")
    np.testing.assert_array_equal(on["cvu"].values, off["cvu"].values)
    _check_sum(on)
    assert float(a["cvu_order"]) > 0.005 and float(a["cvu_safety_value"]) == 0.0

    class Fresh(cvu_psis.OutcomeWeights):  # no memory: every estimate recomputes
        def weights(self, y):
            self._weights.clear()
            return super().weights(y)

        def columns(self, functional, gain, smooth, y):
            self._columns.clear()
            return super().columns(functional, gain, smooth, y)

        def quantiles(self, gain, smooth, y, levels):
            self._quantiles.clear()
            return super().quantiles(gain, smooth, y, levels)

    monkeypatch.setattr("belief.decision.cvu.problem.OutcomeWeights", Fresh)
    monkeypatch.setattr("belief.decision.cvu.value.OutcomeWeights", Fresh)
    calls = []
    exps, _ = _learning_experiments(state, calls)
    fresh = cvu_for_state(state, cands, s, experiments=exps)
    assert sum(calls) > 300  # the split re-evaluated the outcomes
    for col in ("cvu", "cvu_own", "cvu_own_mcse", "cvu_order", "cvu_order_mcse"):
        np.testing.assert_array_equal(fresh[col].values, on[col].values, err_msg=col)


def test_split_after_a_fallback_to_one_step_is_the_one_step_split():
    """A depth-3 rollout falls back to one step when a candidate needs the regression
    estimator (ft: an outcome without a likelihood); its split is then computed after the
    fallback, with a fresh memo, and equals the one-step decision's split bit for bit."""
    cands = _candidates()
    state = _state(cands, 2000, 0)
    s = _settings(outcomes=300)
    runs = {}
    for cont in ("one_step", "rollout"):
        calls: list[int] = []
        exps, g = _learning_experiments(state, calls)
        exps["ft"] = Experiment(
            next_gain=g, simulate=lambda r, idx, g=g: g[idx, 2] + 0.01 * r.standard_normal(
                idx.size))
        s_k = DecisionSettings(weights=LAMBDA, beta=1.0, gate=s.gate,
                               cvu=CVUSettings(n_outcomes=300, seed=7, continuation=cont,
                                               rollout_depth=3))
        runs[cont] = (cvu_for_state(state, cands, s_k, experiments=exps), sum(calls))
    (one, n_one), (roll, n_roll) = runs["one_step"], runs["rollout"]
    assert roll.attrs["continuation_used"] == "one_step"
    assert one.sel(candidate="ft")["cvu_method"].item().startswith("regression")
    assert float(one.sel(candidate="alt")["cvu_order"]) > 0.005
    assert n_one == 300 and n_roll == 600  # the fallback's split evaluates the outcomes again
    for col in ("cvu", "cvu_own", "cvu_own_mcse", "cvu_order", "cvu_order_mcse",
                "cvu_safety_value"):
        np.testing.assert_array_equal(roll[col].values, one[col].values, err_msg=col)
