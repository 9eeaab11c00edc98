"""The cost model (models/costs.py), chance-constrained budget feasibility and the costs input
rules (issue 21, phase 1)."""

from __future__ import annotations

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats
from scipy.special import expit

from belief.decision.feasibility import (
    ChanceConstraint,
    affordable,
    feasibility,
    overrun_probability,
)
from belief.decision.safety import SafetyGate
from belief.decision.scores import expected_weighted_cost, weighted_cost
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.costs import check_executed, validate_costs
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from models.costs import CostModel, CostPriors, encode_costs

# -- the conjugate case ---------------------------------------------------------------------------
# Four candidates over two lenses and three methods, two resources; d's eng_h is 0 (exact zero).
CONJ = [("a", "data", "DR", {"compute": 10.0, "eng_h": 1.0}),
        ("b", "data", "DR", {"compute": 40.0, "eng_h": 2.0}),
        ("c", "data", "DA", {"compute": 5.0, "eng_h": 0.5}),
        ("d", "model", "SI", {"compute": 2.0, "eng_h": 0.0})]
# known scales: with every scale fixed the hierarchy is a Gaussian linear model in δ
SCALES = {"tau_lens": 0.3, "tau_method": 0.2, "tau_candidate": 0.25, "sigma": 0.2}
KNOWN = dict(offset_sigma=0.5, known_scales=SCALES)
# realised amounts: a three times, b once, c never, d twice
REALISED = [("a", 12.0, 1.1), ("a", 13.0, 1.3), ("a", 11.0, 0.9), ("b", 55.0, 2.9),
            ("d", 2.5, 0.0), ("d", 2.2, 0.0)]


def _cands(rows):
    return candidates_from_dict({"campaign": {"eval_protocol": "E", "resources":
                                              ["compute", "eng_h"]},
                                 "candidate": [{"id": i, "role": "adaptation", "lens": lens,
                                                "method": m, "cost": cost}
                                               for i, lens, m, cost in rows]})


def _costs_table(realised):
    return pd.DataFrame([{"step": t, "candidate": c, "compute": x, "eng_h": e}
                         for t, (c, x, e) in enumerate(realised)])


def closed_form_posterior(resource: str, realised=REALISED) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and s.d. of δ_{r,·} over the candidates a–d, in closed form.

    With known scales the prior of δ = (δ_a, …, δ_d) is Normal(offset_mu·1, K),
    K = s_0²·11ᵀ + τ_lens²·[same lens] + τ_method²·[same method] + τ_cand²·I, and every
    realised amount gives y_i = log ΔC_i − log c̃ = δ_{m_i} + ε_i, ε_i ~ Normal(0, σ²).  With H
    the (N × C) selection of the observed cells (observation-space conditioning):

        E[δ | y]   = K Hᵀ (H K Hᵀ + σ² I)⁻¹ y
        Cov[δ | y] = K − K Hᵀ (H K Hᵀ + σ² I)⁻¹ H K
    """
    ids = [c[0] for c in CONJ]
    lens = np.array([c[1] for c in CONJ])
    method = np.array([c[1] + "/" + c[2] for c in CONJ])
    k = (KNOWN["offset_sigma"] ** 2 + SCALES["tau_lens"] ** 2 * (lens[:, None] == lens)
         + SCALES["tau_method"] ** 2 * (method[:, None] == method)
         + SCALES["tau_candidate"] ** 2 * np.eye(len(ids)))
    col = 1 if resource == "compute" else 2
    nominal = {c[0]: c[3][resource] for c in CONJ}
    obs = [(ids.index(r[0]), np.log(r[col]) - np.log(nominal[r[0]])) for r in realised
           if nominal[r[0]] > 0]
    h = np.zeros((len(obs), len(ids)))
    for i, (j, _) in enumerate(obs):
        h[i, j] = 1.0
    y = np.array([v for _, v in obs])
    gain = k @ h.T @ np.linalg.inv(h @ k @ h.T + SCALES["sigma"] ** 2 * np.eye(len(obs)))
    return gain @ y, np.sqrt(np.diag(k - gain @ h @ k))


@pytest.fixture(scope="session")
def conjugate_fit():
    model = CostModel(_cands(CONJ), CostPriors(**KNOWN), max_observations=24)
    return model, model.fit(_costs_table(REALISED), draws=1000, tune=500, chains=4, seed=3)


def _assert_conjugate(idata, resource, realised=REALISED):
    mean, sd = closed_form_posterior(resource, realised)
    delta = idata["posterior"]["delta"].sel(resource=resource)
    se_mean = az.mcse(idata, var_names=["delta"], method="mean")["delta"].sel(resource=resource)
    se_sd = az.mcse(idata, var_names=["delta"], method="sd")["delta"].sel(resource=resource)
    cells = [c[0] for c in CONJ if c[3][resource] > 0]
    for c in cells:
        j = [x[0] for x in CONJ].index(c)
        draws = delta.sel(candidate=c).values.ravel()
        assert float(se_sd.sel(candidate=c)) < 0.05 * sd[j]  # the check has power
        assert abs(draws.mean() - mean[j]) <= 4 * float(se_mean.sel(candidate=c)), c
        assert abs(draws.std(ddof=1) - sd[j]) <= 4 * float(se_sd.sel(candidate=c)), c
    assert int(idata["sample_stats"]["diverging"].sum()) == 0


@pytest.mark.parametrize("resource", ["compute", "eng_h"])
def test_cost_model_matches_the_conjugate_posterior(conjugate_fit, resource):
    """Mean and s.d. of every δ_{r,m} (observed, pooled-only and unobserved cells) against the
    closed form, each within 4 Monte Carlo standard errors of its estimate (ArviZ's MCSE of
    the mean, sd/√ESS_mean, and of the s.d., from the ESS of the second moment)."""
    _assert_conjugate(conjugate_fit[1], resource)


def test_zero_nominal_costs_stay_exactly_zero(conjugate_fit):
    model, idata = conjugate_fit
    q = model.decision_draws(idata, np.random.default_rng(0))
    assert q["cost"].dims == ("sample", "candidate", "resource")
    assert q.sizes["sample"] == 4000
    assert (q["cost"].sel(candidate="d", resource="eng_h").values == 0.0).all()
    assert (q["cost"].sel(resource="compute").values > 0).all()
    # the predictive of a draw: c̃·exp(δ + σ ε) — log cost − log median has s.d. σ (fixed 0.2)
    resid = np.log(q["cost"] / q["cost_median"]).sel(resource="compute").values.ravel()
    se = 0.2 / np.sqrt(2 * resid.size)  # s.d. of a sample s.d. of n independent normals
    assert abs(resid.std() - 0.2) <= 4 * se


# -- the default model on the shipped example -----------------------------------------------------
@pytest.fixture(scope="session")
def example_costs():
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.example import example_paths

    evidence, cfile = example_paths()
    return load_candidate_file(cfile).candidates, pd.read_csv(evidence / "costs.csv")


@pytest.fixture(scope="session")
def example_cost_model(example_costs):
    """The default cost model of the example, with the slots the fitter gives it (64 rows ×
    3 resources), so that ``test_uncertain_costs``'s fitter re-uses this compile."""
    cands, _ = example_costs
    return CostModel(cands, CostPriors(), max_observations=192)


@pytest.fixture(scope="session")
def example_cost_fit(example_cost_model, example_costs):
    return example_cost_model.fit(example_costs[1], draws=500, tune=500, chains=4, seed=1)


def test_default_cost_model_converges_on_the_example(example_cost_fit):
    """4 chains, R-hat ≤ 1.01, bulk and tail ESS ≥ 400, no divergences — realised costs at
    exactly the nominal amount (the example) pin every level at once; the model's geometry
    has to cope with it."""
    post = example_cost_fit
    from belief.posterior.diagnostics import CHECK_VARS, check_convergence

    assert post["posterior"].sizes["chain"] == 4
    conv = check_convergence(post, CHECK_VARS["costs"])
    assert conv.reliable, conv.reason
    assert conv.rhat_max <= 1.01 and min(conv.ess_bulk_min, conv.ess_tail_min) >= 400


def test_refit_with_new_costs_does_not_recompile_and_learns(conjugate_fit):
    """A re-fit swaps the data without compiling, and what it learns is exact: three more
    executions of c (never executed before) at twice its compute and three of b, and every
    δ_{r,m} — c's own, its pooled siblings' a and b, and the other lens's d — is again the
    closed-form posterior within 4 Monte Carlo standard errors."""
    model, _ = conjugate_fit
    more = REALISED + [("c", 10.0, 0.6)] * 3 + [("b", 41.0, 2.2)] * 3
    refit = model.fit(_costs_table(more), draws=1000, tune=500, chains=4, seed=5)
    assert "compile_s" not in model.last_timing
    for resource in ("compute", "eng_h"):
        _assert_conjugate(refit, resource, more)
    q = model.decision_draws(refit, np.random.default_rng(1))["cost"]
    assert (q.sel(candidate="d", resource="eng_h").values == 0).all()


def test_nominal_cost_is_the_prior_median(example_cost_model, example_costs):
    """Without realised costs the predictive median of every cell is its nominal cost:
    Pr(ΔC ≤ c̃) = 1/2 within 4·√(1/4 / n), n = the smallest bulk ESS of the offsets δ (the
    noise ε is fresh per draw, so the indicator's ESS is at least about that)."""
    cands, costs = example_costs
    prior = example_cost_model.fit(costs.iloc[:0], draws=500, tune=500, chains=4, seed=4)
    q = example_cost_model.decision_draws(prior, np.random.default_rng(2))["cost"]
    nominal = cands.costs().sel(candidate=q["candidate"], resource=q["resource"])
    below = (q <= nominal).mean("sample").values[nominal.values > 0]
    n = min(q.sizes["sample"],
            float(az.ess(prior, var_names=["delta"], method="bulk")["delta"].min()))
    assert np.abs(below - 0.5).max() <= 4 * np.sqrt(0.25 / n)


# -- refused input -------------------------------------------------------------------------------
def test_cost_model_refuses_costs_it_cannot_represent():
    cs = _cands(CONJ)
    model = CostModel(cs, CostPriors(), max_observations=4)
    with pytest.raises(InputError, match=r"^costs, row 0: eng_h = 0.5 realised for 'd', whose "
                                         r"nominal eng_h cost is 0"):
        model.encode(_costs_table([("d", 2.0, 0.5)]))
    with pytest.raises(InputError, match=r"^costs, row 1: compute = 0 realised for 'a'.*needs a "
                                         r"positive realised amount"):
        model.encode(_costs_table([("a", 9.0, 1.0), ("a", 0.0, 1.0)]))
    with pytest.raises(InputError, match="6 realised amounts exceed max_observations=4"):
        model.encode(_costs_table(REALISED[:3]))


@pytest.mark.parametrize("column,value,rule", [
    ("compute", -1.0, r"compute must be >= 0 \(a realised cost\), got -1"),
    ("compute", np.nan, r"compute must be a finite number, got nan"),
    ("eng_h", np.inf, r"eng_h must be a finite number, got inf"),
])
def test_negative_or_non_finite_realised_costs_are_refused(column, value, rule):
    table = _costs_table(REALISED[:2])
    table.loc[1, column] = value
    with pytest.raises(InputError, match=rf"^costs, row 1: {rule}"):
        validate_costs(table, _cands(CONJ))
    with pytest.raises(InputError, match=rf"^costs, row 1: {rule}"):
        CostModel(_cands(CONJ)).encode(table)


def test_cost_row_for_a_candidate_not_executed_at_that_step_is_refused():
    from belief.inputs.evidence_dir import evidence_from_tables

    cs = _cands(CONJ)
    paired = pd.DataFrame({"step": [0, 1], "candidate": ["a", "b"], "policy": ["p0", "p1"],
                           "eval_protocol": "E", "control_successes": [30, 40],
                           "control_trials": 100, "treated_successes": [40, 45],
                           "treated_trials": 100, "treated_policy": ["p1", "p2"]})
    good = _costs_table([("a", 10.0, 1.0), ("b", 40.0, 2.0), ("c", 5.0, 0.5)])
    tables = evidence_from_tables({"paired_evaluations": paired, "costs": good}, cs)
    assert list(tables.costs["candidate"]) == ["a", "b", "c"]  # step 2: nothing else says
    bad = good.assign(candidate=["a", "c", "c"])
    with pytest.raises(InputError, match=r"^costs, row 1: a cost row for 'c' at step 1, which "
                                         r"was not executed at that step: the evidence records "
                                         r"'b' \(paired_evaluations\) at step 1"):
        evidence_from_tables({"paired_evaluations": paired, "costs": bad}, cs)
    estimates = pd.DataFrame({"step": [2], "candidate": ["a"], "policy": ["p2"],
                              "eval_protocol": "E", "source": ["b"], "estimate": [0.3],
                              "se": [0.1]})
    with pytest.raises(InputError, match=r"row 2: a cost row for 'c' at step 2.*'b' "
                                         r"\(gain_estimates \(source\)\)"):
        check_executed(good, paired, estimates)


def test_the_example_costs_agree_with_its_evidence_and_a_wrong_row_is_named_by_line(tmp_path):
    import shutil

    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence_dir import read_evidence_dir
    from belief.inputs.example import example_paths

    evidence, cfile = example_paths()
    cands = load_candidate_file(cfile).candidates
    assert len(read_evidence_dir(evidence, cands).costs) == 3
    folder = shutil.copytree(evidence, tmp_path / "evidence")
    costs = pd.read_csv(folder / "costs.csv")
    costs.loc[1, "candidate"] = "dr_1e6"  # step 1 executed si_friction (paired evaluations)
    costs.to_csv(folder / "costs.csv", index=False)
    with pytest.raises(InputError, match=r"costs.csv, row 1 \(line 3 of the file\): a cost row "
                                         r"for 'dr_1e6' at step 1, which was not executed"):
        read_evidence_dir(folder, cands)


@pytest.mark.parametrize("field,value,rule", [
    ("tau_lens", {"family": "gamma"}, r"tau_lens: unknown family 'gamma'; allowed: "),
    ("tau_method", 0.0, r"tau_method must be > 0, got 0.0"),
    ("sigma", {"family": "exponential", "sigma": 1.0}, r"sigma: family 'exponential' takes "
                                                       r"\['lam'\], not sigma"),
    ("noise_floor", -0.1, r"noise_floor must be >= 0, got -0.1"),
    ("tail_shift", np.nan, r"tail_shift must be finite, got nan"),
    ("tail_prob_a", 0.0, r"tail_prob_a must be > 0, got 0"),
    ("heavy_tailed", "real_h", r"heavy_tailed must be a tuple of resource names"),
    ("known_scales", {"tau_group": 1.0}, r"known_scales names 'tau_group'; allowed: "),
    ("known_scales", {"sigma": -1.0}, r"known_scales\['sigma'\] must be a finite number > 0"),
])
def test_cost_priors_are_validated_at_construction(field, value, rule):
    with pytest.raises(InputError, match=rf"^CostPriors: {rule}"):
        CostPriors(**{field: value})


def test_cost_priors_follow_the_scale_prior_conventions():
    """Scales are :class:`ScalePrior` (a number is HalfNormal with that σ; an exponential is
    given by its rate λ), the priors round-trip through the candidate file's form, and the
    cost model is one of the models a ``[priors.costs]`` table may set."""
    from belief.workflow.fit import model_priors
    from models.priors import ScalePrior, priors_from_dict
    from models.registry import model_names

    p = CostPriors(tau_lens=0.5, sigma={"family": "exponential", "lam": 4.0})
    assert p.tau_lens == ScalePrior("half_normal", sigma=0.5)
    assert p.sigma.scale == 0.25 and p.sigma.describe() == "Exponential(lam=4)"
    assert priors_from_dict(CostPriors, p.as_dict(), "t") == p
    assert "costs" in model_names()
    assert model_priors(priors={"costs": {"heavy_tailed": ["real_h"]}})["costs"] \
        == CostPriors(heavy_tailed=("real_h",))


def test_heavy_tailed_must_name_a_resource():
    with pytest.raises(InputError, match=r"^CostPriors: heavy_tailed names \['real_h'\], which "
                                         r"are not resources of the candidates"):
        CostModel(_cands(CONJ), CostPriors(heavy_tailed=("real_h",)))


# -- chance-constrained budget feasibility ------------------------------------------------------
def test_overrun_probability_of_a_hand_computed_log_normal():
    """ΔC = exp(μ + σZ): Pr(ΔC ≤ b) = Φ((log b − μ)/σ); the fraction of S draws has binomial
    Monte Carlo error √(p(1 − p)/S); tolerance 4 of it."""
    rng = np.random.default_rng(0)
    s = 200_000
    mu = np.array([[np.log(2.0), np.log(10.0)], [np.log(1.0), np.log(25.0)]])  # (C=2, R=2)
    sigma = np.array([[0.3, 0.5], [0.8, 0.2]])
    draws = np.exp(mu + sigma * rng.standard_normal((s, 2, 2)))
    budget = np.array([2.5, 35.0])
    p_within = stats.norm.cdf((np.log(budget) - mu) / sigma)
    over = overrun_probability(draws, budget)
    assert over.shape == (2, 2)
    assert np.all(np.abs((1 - over) - p_within) <= 4 * np.sqrt(p_within * (1 - p_within) / s))
    # hand-computed overrun probabilities 1 − Φ(·): [[0.229, 0.006], [0.126, 0.046]], so
    # M^budget is {} at ε = 0.05, {second} at ε = 0.15 and {both} at ε = 0.25
    np.testing.assert_allclose(1 - p_within, [[0.2285, 0.0061], [0.1260, 0.0463]], atol=5e-4)
    p_over = 1 - p_within
    for eps, expected in ((0.05, [False, False]), (0.15, [False, True]), (0.25, [True, True])):
        mask, _ = ChanceConstraint(eps).evaluate(draws, budget)
        np.testing.assert_array_equal(mask, expected)
        np.testing.assert_array_equal(mask, (p_over <= eps).all(axis=1))
    # leading budget axes broadcast (one budget per state after m)
    both = overrun_probability(draws, np.stack([budget, 2 * budget]))
    assert both.shape == (2, 2, 2)
    np.testing.assert_array_equal(both[0], over)


def test_known_costs_with_eps_zero_are_todays_rule():
    """Every draw equal to the known cost, ε_budget = 0: exactly :func:`affordable`, also at
    the boundary (cost = budget, and within its 1e-12 tolerance)."""
    rng = np.random.default_rng(5)
    costs = rng.choice([0.0, 0.5, 1.0, 2.0, 5.0], size=(40, 3))
    budgets = np.array([[1.0, 2.0, 5.0], [0.5, 0.5, 0.5], [2.0 + 1e-13, 1.0, 0.0],
                        [0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    draws = np.broadcast_to(costs, (7, *costs.shape))
    for b in budgets:
        mask, over = ChanceConstraint(0.0).evaluate(draws, b)
        np.testing.assert_array_equal(mask, affordable(costs, b))
        assert set(np.unique(over)) <= {0.0, 1.0}
    np.testing.assert_array_equal(ChanceConstraint(0.0).evaluate(draws, budgets)[0],
                                  affordable(costs, budgets))


def _state(cs, budget):
    gain = xr.DataArray(np.zeros((10, len(cs.ids))), dims=("sample", "candidate"),
                        coords={"candidate": cs.ids})
    return State(step=0, budget=make_budget(dict(zip(cs.resources, budget, strict=True)),
                                            cs.resources),
                 policy="p0", belief=make_belief(gain, cs, step=0, policy="p0"))


def test_feasibility_uses_cost_draws_only_when_given():
    cs = _cands(CONJ)
    costs = cs.costs().values
    budget = np.array([12.0, 1.0])
    state, gate = _state(cs, budget), SafetyGate()
    plain = feasibility(state, cs, gate, costs, budget)
    assert plain.overrun is None
    np.testing.assert_array_equal(plain.affordable, affordable(costs, budget))
    known = feasibility(state, cs, gate, costs, budget,
                        cost_draws=np.broadcast_to(costs, (5, *costs.shape)))
    np.testing.assert_array_equal(known.affordable, plain.affordable)
    # uncertain: a's compute is 10 or 14 with equal probability → Pr(overrun) = 0.5
    draws = np.broadcast_to(costs, (4, *costs.shape)).copy()
    draws[:2, 0, 0] = 14.0
    tight = feasibility(state, cs, gate, costs, budget, cost_draws=draws,
                        chance=ChanceConstraint(0.05))
    assert not tight.affordable[0] and tight.overrun[0, 0] == 0.5
    assert tight.budget_reason[0] == ("over budget: Pr(compute > 12 left) = 0.5 > eps_budget "
                                      "0.05")
    loose = feasibility(state, cs, gate, costs, budget, cost_draws=draws,
                        chance=ChanceConstraint(0.5))
    assert loose.affordable[0]
    with pytest.raises(InputError, match=r"^cost_draws: expected draws over"):
        feasibility(state, cs, gate, costs, budget, cost_draws=draws[:, :2])


@pytest.mark.parametrize("eps", [-0.01, 1.0, 1.5, np.nan, np.inf, True, "0.05", None])
def test_eps_budget_outside_zero_one_is_refused(eps):
    with pytest.raises(InputError, match=r"^eps_budget: must be a finite number with 0 <= "
                                         r"value < 1, got"):
        ChanceConstraint(eps)


def test_expected_weighted_cost_is_lambda_times_the_mean_cost():
    rng = np.random.default_rng(3)
    draws = rng.lognormal(size=(50, 4, 3))
    lam = np.array([0.5, 0.01, 2.0])
    np.testing.assert_allclose(expected_weighted_cost(draws, lam),
                               (draws * lam).sum(-1).mean(0))
    known = draws[0]
    np.testing.assert_allclose(expected_weighted_cost(np.broadcast_to(known, draws.shape), lam),
                               weighted_cost(known, lam))


def test_encode_costs_counts_and_residuals():
    cs = _cands(CONJ)
    model = CostModel(cs, CostPriors(), max_observations=16)
    enc = encode_costs(validate_costs(_costs_table(REALISED), cs), model.ids, model.resources,
                       model.nominal, 16)
    assert enc.mask.sum() == 10  # 6 rows × 2 resources, minus d's two zero eng_h
    r, c = model.resources.index("compute"), model.ids.index("a")
    assert enc.count[r, c] == 3
    assert enc.resid_mean[r, c] == pytest.approx(np.mean(np.log([1.2, 1.3, 1.1])))


# -- the repair tail: a two-component log-normal mixture with a finite mean ------------------------
def _tail_fit(theta, omega=0.3, repeat=1):
    """A hand-built cost 'fit' of CONJ with a repair tail in eng_h: posterior draws (one chain)
    of δ, σ, π, κ — theta is a list of (δ, σ, π, κ), the same for every cell, each draw
    ``repeat`` times."""
    ids, res = [c[0] for c in CONJ], ["compute", "eng_h"]
    th = np.repeat(np.asarray(theta, dtype=float), repeat, axis=0)
    n = len(th)
    nominal = np.array([[c[3][r] for r in res] for c in CONJ])
    delta = np.where(nominal > 0, th[:, 0][:, None, None], 0.0)
    post = xr.Dataset({"delta": (("chain", "draw", "candidate", "resource"), delta[None]),
                       "sigma": (("chain", "draw", "resource"),
                                 np.repeat(th[:, 1][:, None], 2, axis=1)[None]),
                       "tail_prob": (("chain", "draw", "tail_resource"), th[None, :, 2:3]),
                       "tail_shift": (("chain", "draw", "tail_resource"), th[None, :, 3:4])},
                      coords={"chain": [0], "draw": np.arange(n), "candidate": ids,
                              "resource": res, "tail_resource": ["eng_h"]})
    const = xr.Dataset({"nominal": (("candidate", "resource"), nominal)},
                       coords={"candidate": ids, "resource": res})
    dt = xr.DataTree.from_dict({"posterior": post, "constant_data": const})
    dt.attrs.update({"heavy_tailed": "eng_h", "prior_tail_sd": omega})
    return dt


def _scipy_mixture(c_nom, delta, sigma, prob, shift, omega):
    """The repair mixture of ΔC as two scipy log-normals and their weights."""
    ordinary = stats.lognorm(s=sigma, scale=c_nom * np.exp(delta))
    repair = stats.lognorm(s=np.hypot(sigma, omega), scale=c_nom * np.exp(delta + shift))
    return (1 - prob, ordinary), (prob, repair)


THETA = [(0.1, 0.2, 0.1, 1.5), (-0.2, 0.4, 0.3, 0.8), (0.0, 0.15, 0.0, 1.0)]


def test_repair_tail_mean_and_cdf_are_the_log_normal_mixture_of_scipy():
    """E[ΔC | θ] and Pr(ΔC ≤ b | θ) in closed form (models.costs.conditional_mean/_cdf) equal
    the weighted means and cdfs of the two scipy log-normals, draw by draw; a resource without
    a tail (compute) is the plain log-normal; a zero nominal cost is 0 (and ≤ any b ≥ 0)."""
    from models.costs import conditional_cdf, conditional_mean

    cs = _cands(CONJ)
    fit = _tail_fit(THETA)
    mean = conditional_mean(fit, cs)
    budget = np.array([12.0, 2.5])
    cdf = conditional_cdf(fit, cs, budget)
    assert mean.shape == cdf.shape == (len(THETA), 4, 2)
    for s, (d, sig, p, k) in enumerate(THETA):
        for j, (cid, *_, cost) in enumerate(CONJ):
            (w0, ordinary), (w1, repair) = _scipy_mixture(cost["eng_h"], d, sig, p, k, 0.3)
            if cost["eng_h"] > 0:
                assert mean[s, j, 1] == pytest.approx(w0 * ordinary.mean() + w1 * repair.mean(),
                                                      rel=1e-12), (s, cid)
                assert cdf[s, j, 1] == pytest.approx(w0 * ordinary.cdf(2.5)
                                                     + w1 * repair.cdf(2.5), rel=1e-12)
            else:
                assert mean[s, j, 1] == 0.0 and cdf[s, j, 1] == 1.0
            plain = stats.lognorm(s=sig, scale=cost["compute"] * np.exp(d))
            assert mean[s, j, 0] == pytest.approx(plain.mean(), rel=1e-12)
            assert cdf[s, j, 0] == pytest.approx(plain.cdf(12.0), rel=1e-12)
    # hand-computed, first draw, a's eng_h (c̃ = 1): e^{0.1 + 0.02}·(0.9 + 0.1·e^{1.5 + 0.045})
    assert mean[0, 0, 1] == pytest.approx(np.exp(0.12) * (0.9 + 0.1 * np.exp(1.545)), rel=1e-12)
    assert mean[0, 0, 1] == pytest.approx(1.5433, abs=5e-5)


def test_repair_tail_predictive_draws_match_the_closed_form():
    """decision_draws' predictive (a fresh repair indicator and noise per draw) has the closed-
    form mean and Pr(ΔC ≤ b) of the mixture, averaged over θ — within 4 Monte Carlo standard
    errors of the n draws (s.d./√n for the mean, √(p(1 − p)/n) for the probability)."""
    from models.costs import conditional_cdf, conditional_mean, decision_draws

    cs = _cands(CONJ)
    fit = _tail_fit(THETA, repeat=40_000)
    cost = decision_draws(fit, cs, np.random.default_rng(0))["cost"].values
    n = cost.shape[0]
    budget = np.array([12.0, 2.5])
    mean, cdf = conditional_mean(fit, cs).mean(0), conditional_cdf(fit, cs, budget).mean(0)
    pos = cs.costs().values > 0
    se = cost.std(0) / np.sqrt(n)
    assert np.all(np.abs(cost.mean(0) - mean)[pos] <= 4 * se[pos])
    below = (cost <= budget).mean(0)
    assert np.all(np.abs(below - cdf) <= 4 * np.sqrt(cdf * (1 - cdf) / n) + 1e-12)
    assert (cost[:, 3, 1] == 0).all()  # d's eng_h: a zero nominal cost stays exactly 0


def test_repair_tail_likelihood_is_the_marginalised_mixture():
    """The model's ``realised`` potential at a point equals Σ_i log[(1 − π) N(y_i | c_i, σ) +
    π N(y_i | c_i + κ, √(σ² + ω²))] for eng_h (heavy-tailed) and Σ log N(y_i | c_i, σ) for
    compute, with c_i = log c̃ + δ, every value read from the same point (scipy)."""
    model = CostModel(_cands(CONJ), CostPriors(heavy_tailed=("eng_h",)), max_observations=8)
    realised = [*REALISED[:3], ("a", 11.0, 4.0)]  # a repair-sized eng_h for a
    enc = model.encode(_costs_table(realised))
    pm_model = model.build(enc)
    point = pm_model.initial_point()
    for name in point:  # move off the initial point: π ≈ 0.25, κ ≈ e^0.3
        if name.startswith("tail_prob"):
            point[name] = np.full_like(point[name], -1.1)
        elif name.startswith("tail_shift"):
            point[name] = np.full_like(point[name], 0.3)
    outs = pm_model.replace_rvs_by_values([pm_model[v] for v in ("realised", "delta", "sigma",
                                                                 "tail_prob", "tail_shift")])
    fn = pm_model.compile_fn(outs, inputs=pm_model.value_vars, on_unused_input="ignore")
    pot, delta, sigma, prob, shift = fn(point)
    assert float(prob[0]) == pytest.approx(expit(-1.1))
    assert float(shift[0]) == pytest.approx(np.exp(0.3))
    total = 0.0
    for cid, x, e in realised:
        j = model.ids.index(cid)
        for k, (r, y) in enumerate((("compute", x), ("eng_h", e))):
            c = np.log(model.nominal[j, k]) + delta[k, j]
            if r == "compute":
                total += stats.norm.logpdf(np.log(y), c, sigma[k])
            else:
                total += np.logaddexp(
                    np.log1p(-prob[0]) + stats.norm.logpdf(np.log(y), c, sigma[k]),
                    np.log(prob[0]) + stats.norm.logpdf(np.log(y), c + shift[0],
                                                        np.hypot(sigma[k], 0.3)))
    assert float(pot) == pytest.approx(total, rel=1e-10)


def test_predictive_adds_the_noise_once(conjugate_fit):
    """With known scales the predictive log cost of a cell is Normal(E[δ | y], Var[δ | y] +
    σ²): the parameter uncertainty enters once (through the posterior draws of δ) and the
    noise once (fresh per draw).  Its mean and s.d. against the closed form within 4 standard
    errors, with n the ESS of δ's mean or s.d. (at most the number of draws)."""
    model, idata = conjugate_fit
    q = model.decision_draws(idata, np.random.default_rng(3))
    for resource in ("compute", "eng_h"):
        mean, sd = closed_form_posterior(resource)
        for j, (cid, *_, cost) in enumerate(CONJ):
            if cost[resource] <= 0:
                continue
            y = np.log(q["cost"].sel(candidate=cid, resource=resource).values / cost[resource])
            total = np.hypot(sd[j], SCALES["sigma"])
            n_mean, n_sd = (min(y.size, float(az.ess(idata, var_names=["delta"], method=m)
                                              ["delta"].sel(candidate=cid, resource=resource)))
                            for m in ("mean", "sd"))
            assert abs(y.mean() - mean[j]) <= 4 * total / np.sqrt(n_mean), (cid, resource)
            assert abs(y.std(ddof=1) - total) <= 4 * total / np.sqrt(2 * n_sd), (cid, resource)
