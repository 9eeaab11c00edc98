"""The open-loop planner on the belief (belief/decision/planner.py) and the ``plan``
allocation policy, on hand-built decision draws (no model is compiled)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr
from scipy.special import expit

from belief.decision.planner import (
    PlanInputs,
    expected_success,
    first_step_values,
    plan_on_belief,
)
from belief.errors import InputError

IDS = ["refresh", "si", "dr", "ft", "probe"]  # model update, 3 adaptations, diagnosis
ADAPT = np.array([False, True, True, True, False])
ACTORS = ["refresh", "si", "dr", "ft"]


def belief(theta=(0.0, 0.3, 0.5, 0.4, 0.0), gamma=None, rho=0.6, eta=-0.5, tau=0.2,
           repeats=(0, 0, 1, 0, 0), history=(0, 0, 0, 0), n=400, seed=0) -> xr.Dataset:
    """Decision draws with posterior spread: θ_m ± 0.2, γ ± 0.1, ρ ± 0.05 around the means."""
    rng = np.random.default_rng(seed)
    th = np.asarray(theta)[None, :] + 0.2 * rng.standard_normal((n, len(IDS))) * ADAPT
    g = np.zeros((len(ACTORS), len(IDS))) if gamma is None else np.asarray(gamma, float)
    gam = g[None] + 0.1 * rng.standard_normal((n, *g.shape)) * (g[None] != 0)
    hist = np.asarray(history, float)
    return xr.Dataset({
        "gains_eta": ("sample", eta + 0.1 * rng.standard_normal(n)),
        "gains_theta": (("sample", "candidate"), th),
        "gains_tau": ("sample", tau + 0.02 * rng.standard_normal(n)),
        "gains_rho": ("sample", np.clip(rho + 0.05 * rng.standard_normal(n), 0.05, 1.0)),
        "gains_repeats": ("candidate", np.asarray(repeats, float)),
        "gains_gamma": (("sample", "actor", "candidate"), gam),
        "gains_history": ("actor", hist),
        "gains_offset": (("sample", "candidate"), np.einsum("a,sac->sc", hist, gam)),
    }, coords={"candidate": IDS, "actor": ACTORS})


COSTS = np.array([[0.0, 1.0], [1.0, 2.0], [0.5, 3.0], [4.0, 1.0], [0.2, 0.2]])
LAM = np.array([0.01, 0.005])


def _pick(n):
    return np.linspace(0, n - 1, min(256, n)).round().astype(int)


def direct_value(b: xr.Dataset, seq, costs=COSTS, lam=LAM) -> tuple[float, float]:
    """(V, mean S) of a sequence from its definition, execution by execution, in every one of
    the 256 evenly spread joint draws: the increment θ_m ρ^k + γ of the actors before it, then
    the average over the draws of E_Z logistic(η + S + τ √n_a Z)."""
    pick = _pick(b.sizes["sample"])
    th = b["gains_theta"].values[pick]
    rho = b["gains_rho"].values[pick]
    gam = b["gains_gamma"].values[pick]
    hist = set(a for a, h in zip(ACTORS, b["gains_history"].values, strict=True) if h > 0)
    reps = dict(zip(IDS, b["gains_repeats"].values, strict=True))
    s, n_a, done = np.zeros(pick.size), 0, []
    for m in seq:
        i = IDS.index(m)
        if ADAPT[i]:
            k = reps[m] + sum(1 for x in done if x == m)
            before = (hist | set(done)) - {m}
            s = s + th[:, i] * rho ** k + sum(
                (gam[:, ACTORS.index(a), i] for a in before if a in ACTORS), np.zeros(pick.size))
            n_a += 1
        done.append(m)
    eta = b["gains_eta"].values[pick]
    tau = b["gains_tau"].values[pick]
    ej = float(expected_success(eta + s, tau * np.sqrt(n_a), 16).mean()) if n_a else \
        float(expit(eta).mean())
    spent = sum((costs[IDS.index(m)] for m in seq), np.zeros(costs.shape[1]))
    return ej - float(expit(eta).mean()) - float(spent @ lam), float(s.mean())


def brute_force(b, steps, budget, feasible, repeatable, first=None):
    """Every sequence enumerated; for each count vector and first execution the order with
    the largest mean increment (the planner's rule), valued on the draws; the best of them."""
    by_counts = {}
    for n in range(1, steps + 1):
        for seq in itertools.product(IDS, repeat=n):
            if first is not None and seq[0] != first:
                continue
            counts = tuple(seq.count(m) for m in IDS)
            key = (counts, seq[0])
            if any(c and not feasible[i] for i, c in enumerate(counts)):
                continue
            if any(c > 1 and not repeatable[i] for i, c in enumerate(counts)):
                continue
            if (np.array(counts) @ COSTS > budget + 1e-9).any():
                continue
            v, s = direct_value(b, seq)
            if key not in by_counts or s > by_counts[key][2] + 1e-12:
                by_counts[key] = (seq, v, s)
    best = ((), 0.0 if first is None else -np.inf)
    for seq, v, _ in by_counts.values():
        if v > best[1] + 1e-12:
            best = (seq, v)
    return best


def plan(b, steps, budget=None, feasible=None, repeatable=None):
    budget = np.array([10.0, 10.0]) if budget is None else budget
    feasible = np.ones(len(IDS), bool) if feasible is None else feasible
    repeatable = np.array([False, False, True, False, False]) if repeatable is None \
        else repeatable
    return plan_on_belief(b, IDS, PlanInputs(costs=COSTS, budget=budget, weights=LAM,
                                             feasible=feasible, adapts=ADAPT,
                                             repeatable=repeatable, steps=steps))


@pytest.mark.parametrize("case", range(4))
def test_the_planner_finds_the_brute_force_optimum(case):
    """Against every sequence enumerated and valued execution by execution: the same best
    value, and the planner's reported value is its sequence's value."""
    rng = np.random.default_rng(case)
    gamma = np.zeros((len(ACTORS), len(IDS)))
    gamma[:, 1:4] = rng.normal(0.0, 0.4, (len(ACTORS), 3))
    for a in range(1, 4):
        gamma[a, a] = 0.0  # γ_{m→m} is not a parameter
    b = belief(theta=(0.0, *rng.uniform(0.0, 0.8, 3), 0.0), gamma=gamma,
               history=(0, 0, int(case % 2), 0), seed=case)
    budget = np.array([6.0, 9.0])
    feasible = np.array([True, True, True, case != 3, True])
    repeatable = np.array([False, True, True, False, False])
    for steps in (0, 1, 2, 3, 4):
        got = plan(b, steps, budget, feasible, repeatable)
        seq, value = brute_force(b, steps, budget, feasible, repeatable)
        assert got.value == pytest.approx(value, abs=1e-9), (steps, got, seq)
        assert direct_value(b, got.sequence)[0] == pytest.approx(got.value, abs=1e-9)
        assert len(got.sequence) <= steps


@pytest.mark.parametrize("case", range(4))
def test_the_value_of_each_first_step_is_the_brute_force_optimum_of_plans_starting_with_it(
        case):
    """V_plan(m) against every sequence that starts with m, valued execution by execution;
    NaN exactly where m cannot start (infeasible, over budget, no steps); the best of them is
    the planner's plan value when the plan does not stop."""
    rng = np.random.default_rng(10 + case)
    gamma = np.zeros((len(ACTORS), len(IDS)))
    gamma[:, 1:4] = rng.normal(0.0, 0.4, (len(ACTORS), 3))
    for a in range(1, 4):
        gamma[a, a] = 0.0
    b = belief(theta=(0.0, *rng.uniform(0.0, 0.8, 3), 0.0), gamma=gamma,
               history=(int(case % 2), 0, 0, 0), seed=case)
    budget = np.array([4.5, 9.0]) if case == 2 else np.array([6.0, 9.0])
    feasible = np.array([True, case != 1, True, True, True])
    repeatable = np.array([False, True, True, False, case == 3])
    for steps in (0, 1, 2, 3, 4):
        got = first_step_values(b, IDS, PlanInputs(costs=COSTS, budget=budget, weights=LAM,
                                feasible=feasible, adapts=ADAPT, repeatable=repeatable,
                                steps=steps))
        for i, m in enumerate(IDS):
            seq, value = brute_force(b, steps, budget, feasible, repeatable, first=m)
            if not seq:
                assert np.isnan(got[i]), (steps, m)
            else:
                assert got[i] == pytest.approx(value, abs=1e-9), (steps, m, seq)
        best = plan(b, steps, budget, feasible, repeatable)
        if best.sequence:
            assert np.nanmax(got) == pytest.approx(best.value, abs=1e-9)
            assert got[IDS.index(best.first)] == pytest.approx(best.value, abs=1e-9)
        else:
            assert not (got > 1e-12).any()


def test_an_order_effect_makes_the_planner_run_a_model_update_first():
    """A hand-solvable case of the framework's claim.  Refreshing the simulator gains nothing
    itself but raises DR's logit gain by E[γ] = 0.8; with two steps left the best plan is
    refresh → DR (V ≈ +0.15 against DR alone ≈ +0.08), which a one-step rule never finds
    (refresh's own U0 is negative); with one step left it is DR alone; with refresh's γ at 0
    it is DR → DR."""
    gamma = np.zeros((len(ACTORS), len(IDS)))
    gamma[0, 2] = 0.8  # refresh → dr
    b = belief(theta=(0.0, 0.0, 0.5, 0.0, 0.0), gamma=gamma, repeats=(0, 0, 0, 0, 0))
    feasible = np.array([True, False, True, False, True])
    two = plan(b, 2, feasible=feasible)
    assert two.sequence == ("refresh", "dr")
    assert direct_value(b, ("dr",))[0] < two.value
    assert plan(b, 1, feasible=feasible).sequence == ("dr",)
    flat = belief(theta=(0.0, 0.0, 0.5, 0.0, 0.0), repeats=(0, 0, 0, 0, 0))
    assert plan(flat, 2, feasible=feasible).sequence == ("dr", "dr")


def test_the_planner_stops_when_nothing_is_worth_its_cost_and_respects_the_budget():
    b = belief(theta=(0.0, 0.01, 0.01, 0.01, 0.0))
    assert plan(b, 3).sequence == () and plan(b, 3).first is None
    rich = belief()
    assert plan(rich, 3, budget=np.array([0.1, 0.1])).sequence == ()  # nothing affordable
    assert "ft" not in plan(rich, 3, budget=np.array([3.0, 10.0])).sequence  # ft costs 4


def test_planner_refuses_bad_input():
    b = belief()
    with pytest.raises(InputError, match="steps left must be an integer >= 0"):
        plan(b, -1)
    with pytest.raises(InputError, match="costs >= 0"):
        plan_on_belief(b, IDS, PlanInputs(costs=-COSTS, budget=np.ones(2), weights=LAM,
                       feasible=np.ones(5, bool), adapts=ADAPT, repeatable=np.ones(5, bool),
                       steps=2))


def test_the_plans_logit_gain_is_what_the_gains_models_state_after_gives():
    """An oracle independent of the planner's formula: executing the best plan's sequence with
    :func:`models.gains.draws.state_after` on the draws (noise set to 0) moves the logit by
    the planner's S on average over the draws."""
    from models.gains.draws import state_after

    rng = np.random.default_rng(5)
    gamma = np.zeros((len(ACTORS), len(IDS)))
    gamma[:, 1:4] = rng.normal(0.0, 0.5, (len(ACTORS), 3))
    for a in range(1, 4):
        gamma[a, a] = 0.0
    for history in ((0, 0, 0, 0), (1, 0, 1, 0)):
        b = belief(theta=(0.0, 0.6, 0.5, 0.7, 0.0), gamma=gamma, history=history, tau=0.0,
                   n=256)  # the planner's draws are all of them
        n = b.sizes["sample"]
        b = b.assign(gains_tau=("sample", np.zeros(n)),
                     gains_z_now=(("sample", "candidate"), np.zeros((n, len(IDS)))),
                     gains_z_next=(("sample", "candidate"), np.zeros((n, len(IDS)))))
        got = plan(b, 4, budget=np.array([20.0, 20.0]),
                   repeatable=np.array([False, True, True, False, False]))
        assert len(got.sequence) >= 3
        state = b
        for m in got.sequence:
            state = state_after(state, m, adapts=bool(ADAPT[IDS.index(m)]))
            state["gains_z_next"] = state["gains_z_next"] * 0.0  # no run-to-run noise
        moved = float((state["gains_eta"] - b["gains_eta"]).mean())
        assert moved == pytest.approx(got.logit_gain, abs=1e-9)
        # the value averages the success over the draws (not the success at the mean move)
        spent = sum(COSTS[IDS.index(m)] for m in got.sequence) @ LAM
        j = float(expit(state["gains_eta"]).mean() - expit(b["gains_eta"]).mean())
        assert got.value == pytest.approx(j - spent, abs=1e-9)
        at_mean = float(expit(b["gains_eta"] + moved).mean() - expit(b["gains_eta"]).mean())
        assert abs(j - at_mean) > 1e-4


def test_a_free_plan_without_adaptations_is_worth_exactly_nothing():
    """With λ = 0 a model update costs nothing and, without adaptations after it, gains
    nothing: exactly 0, a tie with stopping, which stops (no quadrature rounding decides)."""
    for seed in range(12):  # the rounding of a quadrature at sd 0 depends on the draws
        b = belief(theta=(0.0, 0.0, 0.0, 0.0, 0.0), eta=-2.0 + 0.4 * seed, seed=seed)
        got = plan_on_belief(b, IDS, PlanInputs(costs=COSTS, budget=np.array([10.0, 10.0]),
                             weights=np.zeros(2), feasible=np.array([True, False, False, False,
                                                                     True]),
                             adapts=ADAPT, repeatable=np.zeros(5, bool), steps=2))
        assert got.sequence == () and got.value == 0.0, seed


class _Candidates:
    """The two things the plan policies read from a CandidateSet."""

    resources = ("hours", "gpu")

    def __init__(self, repeatable):
        self._rep = dict(zip(IDS, repeatable, strict=True))

    def __getitem__(self, m):
        from types import SimpleNamespace
        return SimpleNamespace(changes_policy=bool(ADAPT[IDS.index(m)]), repeatable=self._rep[m])


def decision(voi=None, beta=1.0, step=0, horizon=3, feasible=None, budget=(10.0, 10.0)):
    ds = xr.Dataset({"feasible": ("candidate", np.ones(len(IDS), bool) if feasible is None
                                  else np.asarray(feasible)),
                     "cost_hours": ("candidate", COSTS[:, 0]),
                     "cost_gpu": ("candidate", COSTS[:, 1])},
                    coords={"candidate": IDS},
                    attrs={"budget_hours": budget[0], "budget_gpu": budget[1],
                           "lambda_hours": LAM[0], "lambda_gpu": LAM[1], "step": step,
                           "horizon": horizon, "beta": beta})
    if voi is not None:
        ds["cvu_voi"] = ("candidate", np.asarray(voi, float))
    return ds


def test_plan_voi_adds_the_value_of_information_to_the_plan_that_starts_with_each_candidate():
    """plan_voi = argmax V_plan(m) + β·VOI(m): without information value it is the plan's
    first step; a diagnosis whose VOI exceeds the plan's margin is run first; with β = 0 the
    VOI is ignored; NaN VOI counts as 0; nothing worth more than 0 stops."""
    from belief.decision.allocation import choose

    b = belief(theta=(0.0, 0.3, 0.5, 0.4, 0.0))
    cands = _Candidates([False, False, True, False, False])
    steps = 3
    v = first_step_values(b, IDS, PlanInputs(costs=COSTS, budget=np.array([10.0, 10.0]),
                                             weights=LAM,
                          feasible=np.ones(5, bool), adapts=ADAPT,
                          repeatable=np.array([False, False, True, False, False]),
                          steps=steps))
    best = plan(b, steps, repeatable=np.array([False, False, True, False, False]))
    top = choose("plan_voi", decision(np.zeros(5)), belief=b, candidates=cands).candidate
    # without order effects every ordering of the best counts ties: the first of them wins
    assert top in best.sequence and v[IDS.index(top)] == pytest.approx(best.value, abs=1e-12)
    assert top == IDS[int(np.nanargmax(v))]
    assert choose("plan_voi", decision(), belief=b, candidates=cands).candidate == top
    margin = np.nanmax(v) - v[IDS.index("probe")]
    assert margin > 0
    voi = np.array([0.0, 0.0, 0.0, np.nan, 1.01 * margin])
    assert choose("plan_voi", decision(voi), belief=b, candidates=cands).candidate == "probe"
    assert choose("plan_voi", decision(0.99 * voi), belief=b,
                  candidates=cands).candidate == top
    assert choose("plan_voi", decision(voi, beta=0.0), belief=b,
                  candidates=cands).candidate == top
    flat = belief(theta=(0.0, 0.0, 0.0, 0.0, 0.0))
    assert choose("plan_voi", decision(np.zeros(5)), belief=flat, candidates=cands).stop
    # information alone can make a candidate worth running
    d = decision(np.array([0.0, 0.0, 0.0, 0.0, 1.0]))
    assert choose("plan_voi", d, belief=flat, candidates=cands).candidate == "probe"
    # an infeasible candidate is never chosen, whatever its VOI
    d = decision(np.array([0.0, 0.0, 0.0, 0.0, 1.0]),
                 feasible=np.array([True, True, True, True, False]))
    assert choose("plan_voi", d, belief=flat, candidates=cands).stop
    with pytest.raises(InputError, match="plan_voi needs the belief"):
        choose("plan_voi", decision(np.zeros(5)))


def test_plan_voi_refuses_a_decision_without_the_one_step_value_of_information():
    """A decision whose CVU used a non-myopic continuation has CVU but no VOI: refused, not
    silently the plan alone; non-finite draws are refused by the planner."""
    from belief.decision.allocation import choose

    b = belief()
    cands = _Candidates([False, False, True, False, False])
    d = decision(np.full(5, np.nan)).assign(cvu=("candidate", np.full(5, 0.01)))
    d.attrs["continuation_used"] = "lookahead2"
    with pytest.raises(InputError, match="one_step continuation"):
        choose("plan_voi", d, belief=b, candidates=cands)
    d.attrs["continuation_used"] = "one_step"  # fell back to one step: VOI there
    choose("plan_voi", d, belief=b, candidates=cands)
    # the last step: CVU := 0 and no VOI column — the plan alone, not an error
    last = decision(None, step=2).assign(cvu=("candidate", np.zeros(5)))
    assert choose("plan_voi", last, belief=b, candidates=cands).candidate == \
        choose("plan", last, belief=b, candidates=cands).candidate
    bad = b.copy(deep=True)
    bad["gains_theta"][0, 1] = np.nan
    with pytest.raises(InputError, match="must be finite"):
        plan(bad, 2)
