"""The hierarchical execution-risk model, its place in the belief, and the posterior gate."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.decision.engine import decide
from belief.decision.safety import SafetyGate, clopper_pearson_upper
from belief.decision.settings import DecisionSettings
from belief.decision.state import State
from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from models.exec_risk import ExecRiskModel, ExecRiskPriors, loglik, p_unsafe_draws, simulate

DELTA = 0.05


def _q95_and_mcse(idata: xr.DataTree, candidate: str) -> tuple[float, float]:
    p = p_unsafe_draws(idata).sel(candidate=candidate).values
    mcse = az.mcse(idata, var_names=["p_unsafe"], method="quantile", prob=1 - DELTA)
    return float(np.quantile(p, 1 - DELTA)), float(mcse["p_unsafe"].sel(candidate=candidate))


@pytest.mark.parametrize("n, k", [(50, 0), (50, 3), (100, 2), (20, 1)])
def test_flat_prior_single_candidate_bound_close_to_clopper_pearson(exec_flat_model, n, k):
    """Flat prior, one candidate: posterior is Beta(k + 1, n − k + 1) (uniform prior).

    Tolerances: the Monte Carlo part is 4 ArviZ quantile-MCSEs of the sampled 95 % quantile;
    the exact gap between the flat-prior bound Beta.ppf(0.95; k + 1, n − k + 1) and CP's
    Beta.ppf(0.95; k + 1, n − k) is one pseudo-safe execution, at most 5 % of CP for n ≥ 20
    (checked exactly below), so |posterior − CP| ≤ 0.05·CP + 4·MCSE.
    """
    idata = exec_flat_model.fit([n], [k], draws=2000, tune=500, seed=n + k)
    post, mcse = _q95_and_mcse(idata, "solo")
    flat = stats.beta.ppf(1 - DELTA, k + 1, n - k + 1)
    cp = float(clopper_pearson_upper(k, n, DELTA))
    assert 0 < cp - flat <= 0.05 * cp  # exact: the uniform prior sits just below CP
    assert abs(post - flat) <= 4 * mcse
    assert abs(post - cp) <= 0.05 * cp + 4 * mcse
    assert mcse < 0.1 * post  # the check above is not vacuous


def test_pooling_narrows_the_bound_of_a_sparse_candidate(fitter, exec_flat_model):
    """A candidate with 5 safe executions in a group with 1000 mostly safe ones borrows strength."""
    model = fitter.exec_risk  # the world's four hardware candidates, all on the "arm"
    assert model.groups == ["arm"]
    counts = {"si_friction": (5, 0), "latency_probe": (300, 0), "ft_real_100": (400, 2),
              "cotrain": (300, 1)}
    idata = model.fit({c: n for c, (n, _) in counts.items()},
                      {c: k for c, (_, k) in counts.items()}, draws=1000, tune=1000, seed=3)
    pooled, mcse = _q95_and_mcse(idata, "si_friction")
    cp = float(clopper_pearson_upper(0, 5, DELTA))  # 0.451
    unpooled = exec_flat_model.fit([5], [0], draws=1000, tune=500, seed=3)
    # flat prior alone: the Beta(1, 6) 95 % quantile 0.393 (measured 0.397 ± 0.011)
    alone, alone_mcse = _q95_and_mcse(unpooled, "solo")
    assert abs(alone - stats.beta.ppf(0.95, 1, 6)) <= 4 * alone_mcse
    assert pooled + 4 * mcse < 0.25 * cp
    assert pooled + 4 * mcse < 0.25 * alone
    # the well-tested siblings keep bounds close to their own data
    for c in ("latency_probe", "ft_real_100", "cotrain"):
        n, k = counts[c]
        q, _ = _q95_and_mcse(idata, c)
        assert q < 1.5 * float(clopper_pearson_upper(k, n, DELTA))


def test_p_unsafe_draws_stack_chain_major(exec_flat_model):
    idata = exec_flat_model.fit([10], [1], draws=50, tune=50, chains=2, seed=0)
    draws = p_unsafe_draws(idata)
    assert draws.dims == ("sample", "candidate") and draws.sizes["sample"] == 100
    post = idata["posterior"]["p_unsafe"]
    np.testing.assert_array_equal(draws.values[:50, 0], post.sel(chain=0).values[:, 0])
    np.testing.assert_array_equal(draws.values[50:, 0], post.sel(chain=1).values[:, 0])
    assert idata.attrs["model"] == "exec_risk"
    assert int(idata["observed_data"]["unsafe"].item()) == 1


def test_p_unsafe_joins_the_belief(fitted, fitter, world_candidates):
    idata, belief = fitted
    assert "exec_risk" in idata.children
    p = belief["p_unsafe"]
    assert p.dims == ("sample", "candidate")
    s = fitter.settings
    assert p.sizes["sample"] == belief["gain"].sizes["sample"] == s.draws * s.chains
    hw = np.array([c.drives_hardware for c in world_candidates])
    assert np.all(p.values[:, ~hw] == 0.0)
    assert np.all((p.values[:, hw] > 0) & (p.values[:, hw] < 1))
    for prefix in ("gains_", "exec_risk_"):
        for key in ("rhat_max", "ess_bulk_min", "divergences", "reliable", "reason"):
            assert prefix + key in belief.attrs
    assert belief.attrs["reliable"] == int(belief.attrs["gains_reliable"]
                                           and belief.attrs["exec_risk_reliable"])
    if not belief.attrs["exec_risk_reliable"]:
        assert "exec_risk:" in belief.attrs["reliability_reason"]


def test_posterior_gate_through_decide(fitted, world_candidates):
    _, belief = fitted
    cs = world_candidates
    budget = make_budget({"real_h": 100, "compute": 1000, "eng_h": 100}, cs.resources)
    state = State(step=4, budget=budget, policy=belief.attrs["policy"], belief=belief)
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    d = decide(state, cs, DecisionSettings(
        weights=weights, gate=SafetyGate(alpha_exec=0.1, method="posterior"),
        stability_resamples=0))
    hw = np.array([c.drives_hardware for c in cs])
    q = belief["p_unsafe"].quantile(1 - DELTA, "sample", method="inverted_cdf").values
    np.testing.assert_array_equal(d["ucb_posterior"].values[hw], q[hw])
    np.testing.assert_array_equal(d["ucb_posterior"].values[~hw], 0.0)
    np.testing.assert_array_equal(d["p_exec_bound"].values, d["ucb_posterior"].values)
    assert np.all(np.isfinite(d["ucb_clopper_pearson"].values))  # both bounds reported
    np.testing.assert_array_equal(d["safe"].values, d["p_exec_bound"].values <= 0.1)
    for i, cid in enumerate(cs.ids):
        reason = str(d["safe_reason"].sel(candidate=cid).values)
        assert ("posterior credible UCB" in reason) if hw[i] else \
            reason == "no hardware: P_exec = 0"
    assert d.attrs["safety_method"] == "posterior"
    assert d.attrs["safety_guarantee"] == "Bayesian credible bound, not frequentist"
    strict = decide(state, cs, DecisionSettings(
        weights=weights, stability_resamples=0,
        gate=SafetyGate(alpha_exec=1e-4, method="posterior")))
    assert not strict["safe"].values[hw].any() and strict["safe"].values[~hw].all()
    for cid in np.array(cs.ids)[hw]:
        if not strict["chosen"].sel(candidate=cid):
            reason = str(strict["excluded_reason"].sel(candidate=cid).values)
            assert reason.startswith("unsafe: posterior credible UCB") or "budget" in reason \
                or "not available" in reason
    assert strict.attrs["chosen"] not in set(np.array(cs.ids)[hw])


def test_simulate_and_loglik_for_cvu():
    rng = np.random.default_rng(0)
    p = np.array([0.01, 0.2, 0.5])
    y = simulate(np.repeat(p, 20_000), 30, rng).reshape(3, -1)
    se = np.sqrt(30 * p * (1 - p) / 20_000)  # s.e. of the mean of 20,000 Binomial(30, p)
    assert (np.abs(y.mean(axis=1) - 30 * p) <= 4 * se).all()
    ys = np.array([0, 3, 30])
    ll = loglik(p, 30, ys)
    assert ll.shape == (3, 3)
    np.testing.assert_allclose(ll[1], stats.binom.logpmf(3, 30, p))
    assert simulate(p, 0, rng).tolist() == [0, 0, 0]
    with pytest.raises(InputError, match="runs must be an integer >= 0"):
        simulate(p, -1, rng)
    with pytest.raises(InputError, match=r"in \[0, runs=30\]"):
        loglik(p, 30, np.array([31]))


def _hw_set(*specs):
    return candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": [
        {"id": i, "role": "diagnosis", "lens": "model", "method": "p", "cost": {},
         "drives_hardware": hw, **({"hardware_group": g} if g else {})}
        for i, hw, g in specs]}, source="cands.toml")


def test_bad_counts_name_table_candidate_and_rule(fitter):
    model = fitter.exec_risk
    ids = model.hw_ids
    n = {c: 10 for c in ids}
    with pytest.raises(InputError, match=r"^safety_events, row ft_real_100: unsafe \(11\) "
                                         r"exceeds executions \(10\)"):
        model.counts(n, {**dict.fromkeys(ids, 0), "ft_real_100": 11})
    with pytest.raises(InputError, match=r"^safety_events, row cotrain: executions must be "
                                         r">= 0"):
        model.counts({**n, "cotrain": -2}, dict.fromkeys(ids, 0))
    with pytest.raises(InputError, match=r"^safety_events, row si_friction: unsafe must be an "
                                         r"integer"):
        model.counts(n, {**dict.fromkeys(ids, 0), "si_friction": 0.5})
    with pytest.raises(InputError, match=r"^safety_events: executions has 3 entries"):
        model.counts([1, 2, 3], [0, 0, 0])
    # arrays over all candidates (Evidence.safety_counts order) are mapped to hardware order
    full = np.arange(len(fitter.candidates))
    got, _ = model.counts(full, np.zeros_like(full))
    assert got.tolist() == [fitter.candidates.index(c) for c in ids]


def test_hardware_candidate_without_group_is_refused():
    with pytest.raises(InputError, match=r"^cands\.toml, row 1: hardware candidate 'b' "
                                         r"\(drives_hardware = true\) needs a hardware_group"):
        _hw_set(("a", True, "arm"), ("b", True, None))
    cs = _hw_set(("a", False, None), ("b", True, "arm"), ("c", True, "base"))
    model = ExecRiskModel(cs)
    assert model.hw_ids == ["b", "c"] and model.groups == ["arm", "base"]
    with pytest.raises(InputError, match="needs at least one hardware candidate"):
        ExecRiskModel(_hw_set(("a", False, None)))


def test_priors_are_validated():
    with pytest.raises(InputError, match=r"^ExecRiskPriors: sigma_group must be > 0"):
        ExecRiskPriors(sigma_group=0.0)
    with pytest.raises(InputError, match=r"^ExecRiskPriors: mu0_dist must be one of"):
        ExecRiskPriors(mu0_dist="cauchy")
    with pytest.raises(InputError, match=r"^ExecRiskPriors: mu0_mu must be finite"):
        ExecRiskPriors(mu0_mu=float("nan"))
    flat = ExecRiskPriors.flat()
    assert flat.mu0_dist == "logistic" and (flat.mu0_mu, flat.mu0_sigma) == (0.0, 1.0)


def test_campaign_checks_deployment_at_the_stop(tmp_path, fitter):
    import json

    from belief.campaign.loop import CampaignSettings, run_campaign
    from belief.campaign.synthetic import SyntheticWorld

    world = SyntheticWorld(seed=2)
    settings = CampaignSettings(horizon=1, fit=fitter.settings, stability_resamples=0,
                                alpha_deploy=0.03, gate=SafetyGate(method="posterior"))
    result = run_campaign(world, settings, tmp_path, fitter=fitter)
    check = result.deployment_check
    assert check.attrs["policy"] == result.policy and check.attrs["method"] == "posterior"
    assert check.attrs["alpha_deploy"] == 0.03 and check.attrs["delta"] == settings.gate.delta
    n, k = result.evidence.deployment_counts(result.policy)
    assert (int(check["trials"]), int(check["unsafe"])) == (n, k) and n == 400
    assert float(check["p_deploy_bound"]) == float(check["ucb_posterior"])
    assert bool(check["passed"]) == (float(check["ucb_posterior"]) <= 0.03)
    last = json.loads((tmp_path / "campaign_log.jsonl").read_text().splitlines()[-1])
    assert last["deployment_check"]["reason"] == check.attrs["reason"]
    assert last["step"] == 1 and last["deployment_safety"][0]["unsafe"] == k
    # execution events stay in safety_events; deployment rows only in deployment_safety
    assert set(result.evidence.safety.columns) >= {"candidate", "executions"}
    assert "candidate" not in result.evidence.deployment.columns


def test_population_risk_without_a_pooled_hardware_group():
    """One hardware candidate per group: no group value is sampled (no ``group_logit``), and the
    population risk is the typical and the new-hardware risk only (it raised KeyError)."""
    import xarray as xr
    from scipy.special import expit

    from models.exec_risk import population_risk

    rng = np.random.default_rng(3)
    c, d = 4, 50
    post = xr.Dataset({"mu0": (("chain", "draw"), rng.normal(-3.0, 0.3, (c, d))),
                       "sigma_group": (("chain", "draw"), rng.uniform(0.1, 1.0, (c, d))),
                       "sigma_candidate": (("chain", "draw"), rng.uniform(0.1, 1.0, (c, d)))})
    pop = population_risk(xr.DataTree.from_dict({"posterior": post}), seed=0)
    assert pop.sizes == {"sample": c * d, "hw_group": 0}
    np.testing.assert_allclose(pop["p_typical"].values, expit(post["mu0"].values.ravel()))
    assert ((pop["p_new_group"] > 0) & (pop["p_new_group"] < 1)).all()
