"""Order effects γ_{a→m} (issue 16): stated priors, the history of a step, the γ term of the
gains model on hand-built lineages, and how executing an actor moves the next gains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import expit

from belief.errors import InputError
from belief.inputs.candidate_file import candidates_toml, parse_candidate_text
from belief.inputs.evidence import Evidence
from belief.inputs.interactions import stated_pair_priors
from belief.inputs.tables import validate_paired
from models import gains as gains_module
from models.gains import GainsModel, GainsPriors, next_gain
from models.gains.encoding import history_matrix

EVAL = "pick_place_v1"
ON = GainsPriors(order_effects=True)
"""Order effects on (the default since they meet the convergence standard; stated here so the
tests do not depend on the default)."""


def _row(step, m, parent, child):
    return {"step": step, "candidate": m, "policy": parent, "eval_protocol": EVAL,
            "control_successes": 30, "control_trials": 100, "treated_successes": 40,
            "treated_trials": 100, "treated_policy": child}


@pytest.fixture(scope="module")
def lineage(world_candidates):
    """π0 → si_friction → π1; sim_refresh at step 1; π1 → dr_1e6 → π2 at step 2; and a
    second branch π0 → dr_1e6 → π3 at step 3 (after sim_refresh, without si_friction)."""
    paired = validate_paired(pd.DataFrame([
        _row(0, "si_friction", "pi0", "pi1"), _row(2, "dr_1e6", "pi1", "pi2"),
        _row(3, "dr_1e6", "pi0", "pi3")]), world_candidates)
    updates = pd.DataFrame([{"step": 1, "candidate": "sim_refresh"}])
    return paired, updates


def test_history_of_a_step_is_its_lineage_and_earlier_model_updates(world_candidates, lineage):
    paired, updates = lineage
    model = GainsModel(world_candidates, ON, max_policies=6)
    assert "sim_refresh" in model.actors and "ft_pilot" not in model.actors  # a diagnosis
    assert ("dr_1e6", "dr_1e6") not in model.pairs  # repeats are ρ, not γ
    enc = model.encode(paired, model_updates=updates)
    h = pd.DataFrame(enc.history[:len(enc.names)], index=enc.names, columns=model.actors)
    ran = {p: {a for a in model.actors if h.loc[p, a] > 0} for p in enc.names}
    assert ran == {"pi0": set(), "pi1": set(), "pi2": {"si_friction", "sim_refresh"},
                   "pi3": {"sim_refresh"}}
    # the same update after the step (step 5) is not in any step's history
    late = model.encode(paired, model_updates=updates.assign(step=5))
    assert late.history[:4, model.actors.index("sim_refresh")].sum() == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_generative_step_mean_carries_sum_of_gammas(world_candidates, lineage):
    """policy_step = θ_m ρ^k + Σ_{a ∈ h} γ_{a→m} + τ_exec z on every prior draw."""
    import pymc as pm

    paired, updates = lineage
    model = GainsModel(world_candidates, ON, max_policies=5)
    enc = model.encode(paired, model_updates=updates)
    est = gains_module.encode_estimates(None, enc, model.gain_ids, model.max_estimates,
                                        model.actors)
    gen = model.build_generative(enc, est)
    with gen:
        prior = pm.sample_prior_predictive(draws=50, random_seed=1,
                                           var_names=["effect", "gamma", "rho", "tau_exec",
                                                      "z_step", "policy_step"])
    pr = prior["prior"]
    mat = np.zeros((50, len(model.actors), len(model.gain_ids)))
    g = pr["gamma"].values[0]
    mat[:, model.pair_actor, model.pair_target] = g
    for k, name in enumerate(enc.names):
        if enc.is_root[k]:
            continue
        m = int(enc.via[k])
        want = (pr["effect"].values[0][:, m] * pr["rho"].values[0] ** enc.repeats[k]
                + mat[:, :, m] @ enc.history[k]
                + pr["tau_exec"].values[0] * pr["z_step"].values[0][:, k])
        np.testing.assert_allclose(pr["policy_step"].values[0][:, k], want, rtol=1e-10,
                                   err_msg=name)
    # the default prior: γ ~ N(0, σ_g² + σ_e²) for pairs of a pooled method pair, N(0, σ_e²)
    # otherwise; 50 draws × 36 pairs: the mean square is within 5 of its standard errors
    pr = GainsPriors()
    want = np.where(model.pair_group >= 0, pr.gamma_group_sd ** 2 + pr.gamma_sd ** 2,
                    pr.gamma_sd ** 2)
    sq = (g ** 2 / want).ravel()  # E = 1 under the prior
    assert abs(sq.mean() - 1) < 5 * sq.std() / np.sqrt(len(sq) / 4)  # groups correlate pairs
    assert abs(g.mean()) < 5 * g.std() / np.sqrt(g.shape[0])


def _draws(history_done: float) -> xr.Dataset:
    """Hand-built joint draws: 2 adaptations (a1, a2), actors a1 and u (a model update)."""
    rng = np.random.default_rng(0)
    s = 400
    cands = ["a1", "a2"]
    gamma = np.zeros((s, 2, 2))
    gamma[:, 0, 1] = rng.normal(0.3, 0.1, s)  # a1 → a2
    gamma[:, 1, :] = rng.normal(-0.2, 0.1, (s, 2))  # u → a1, a2
    hist = np.array([0.0, history_done])
    return xr.Dataset(
        {"gains_eta": ("sample", rng.normal(-0.8, 0.1, s)),
         "gains_theta": (("sample", "candidate"), rng.normal(0.3, 0.1, (s, 2))),
         "gains_tau": ("sample", np.full(s, 0.1)), "gains_rho": ("sample", np.full(s, 0.7)),
         "gains_repeats": ("candidate", np.zeros(2)),
         "gains_z_now": (("sample", "candidate"), rng.standard_normal((s, 2))),
         "gains_z_next": (("sample", "candidate"), rng.standard_normal((s, 2))),
         "gains_gamma": (("sample", "actor", "candidate"), gamma),
         "gains_history": ("actor", hist),
         "gains_offset": (("sample", "candidate"), np.einsum("a,sac->sc", hist, gamma))},
        coords={"candidate": cands, "actor": ["a1", "u"]})


def test_model_update_moves_next_gains_by_its_order_effects():
    d = _draws(history_done=0.0)
    eta, theta = d["gains_eta"].values[:, None], d["gains_theta"].values
    tau, z = 0.1, d["gains_z_now"].values
    base = expit(eta + theta + tau * z) - expit(eta)
    np.testing.assert_allclose(gains_module.gain_from_draws(d).values, base, rtol=1e-12)
    after = next_gain(d, "u", adapts=False).values
    want = expit(eta + theta + d["gains_gamma"].values[:, 1, :] + tau * z) - expit(eta)
    np.testing.assert_allclose(after, want, rtol=1e-12)
    assert np.all(after.mean(0) < base.mean(0))  # u substitutes for both
    # an actor already in the history does not count twice
    done = _draws(history_done=1.0)
    np.testing.assert_allclose(next_gain(done, "u", adapts=False).values,
                               gains_module.gain_from_draws(done).values, rtol=1e-12)


def test_adaptation_creates_order_effect_on_the_next_policy():
    d = _draws(history_done=0.0)
    eta, theta = d["gains_eta"].values, d["gains_theta"].values
    z_now, z_next = d["gains_z_now"].values, d["gains_z_next"].values
    eta2 = eta + theta[:, 0] + 0.1 * z_now[:, 0]  # after a1 (k = 0, no offset yet)
    gam = d["gains_gamma"].values[:, 0, :]
    k2 = np.array([1.0, 0.0])
    want = expit(eta2[:, None] + theta * 0.7 ** k2 + gam + 0.1 * z_next) - expit(eta2)[:, None]
    np.testing.assert_allclose(next_gain(d, "a1").values, want, rtol=1e-12)


def test_next_gain_without_order_effects_leaves_the_actor_out_of_the_history():
    """order=False: the same policy change and repeat count, without γ_{m→·} (the split of
    CVU by channel, belief.decision.cvu.channels)."""
    d = _draws(history_done=0.0)
    np.testing.assert_array_equal(next_gain(d, "u", adapts=False, order=False).values,
                                  gains_module.gain_from_draws(d).values)
    eta, theta = d["gains_eta"].values, d["gains_theta"].values
    z_now, z_next = d["gains_z_now"].values, d["gains_z_next"].values
    eta2 = eta + theta[:, 0] + 0.1 * z_now[:, 0]
    k2 = np.array([1.0, 0.0])
    want = expit(eta2[:, None] + theta * 0.7 ** k2 + 0.1 * z_next) - expit(eta2)[:, None]
    np.testing.assert_allclose(next_gain(d, "a1", order=False).values, want, rtol=1e-12)
    assert not np.allclose(next_gain(d, "a1").values, want)  # a1 → a2 is 0.3 on the logit


def test_experiments_carry_next_gains_without_order_effects_only_for_new_actors():
    from belief.inputs.candidates import Candidate, CandidateSet
    from belief.posterior.experiments import experiments_from_belief

    cands = CandidateSet((
        Candidate("a1", "adaptation", "data", "DR", {}, changes_policy=True),
        Candidate("a2", "adaptation", "data", "DR", {}, changes_policy=True),
        Candidate("u", "model_update", "model", "SI-refresh", {})))
    d = _draws(history_done=0.0)
    exps = experiments_from_belief(d, cands)
    np.testing.assert_array_equal(exps["a1"].next_gain_no_order,
                                  next_gain(d, "a1", order=False).values)
    np.testing.assert_array_equal(exps["u"].next_gain_no_order,
                                  gains_module.gain_from_draws(d).values)
    assert exps["a2"].next_gain_no_order is None  # a2 is no actor: it creates no γ
    # u already ran: it adds nothing, so no split either
    assert experiments_from_belief(_draws(history_done=1.0), cands)["u"].next_gain_no_order \
        is None
    # without order effects in q_t nothing is split
    plain = d.drop_vars(["gains_gamma", "gains_history", "gains_offset"]).drop_dims("actor")
    assert all(e.next_gain_no_order is None
               for e in experiments_from_belief(plain, cands).values())


@pytest.fixture(scope="module")
def fitted_order(world_candidates, campaign_evidence):
    """(idata, belief) of the session's campaign evidence with order effects on (a compile
    of its own: the slow tests below)."""
    from belief.posterior.fitter import BeliefFitter, FitSettings

    ev, world = campaign_evidence
    fast = FitSettings(draws=300, tune=300, chains=2, ess_min=100)
    return BeliefFitter(world_candidates, fast, gains_priors=ON).fit(ev, world.policy, step=4,
                                                                     seed=11)


@pytest.mark.slow
def test_experiment_of_a_model_update_uses_its_order_effects(fitted_order, world_candidates):
    from belief.posterior.experiments import experiments_from_belief

    _, belief = fitted_order
    exps = experiments_from_belief(belief, world_candidates)
    now = gains_module.gain_from_draws(belief[gains_module.decision_vars(belief)]).values
    shift = exps["sim_refresh"].next_gain - now
    i = list(belief["candidate"].values).index("dr_1e6")
    assert np.abs(shift[:, i]).max() > 0  # sim_refresh has γ on dr_1e6
    assert np.all(exps["ft_pilot"].next_gain == now)  # a diagnosis moves nothing by itself


TOML = """
[campaign]
eval_protocol = "E"
[[candidate]]
id = "upd"
role = "model_update"
lens = "model"
method = "refresh"
[[candidate]]
id = "d1"
role = "adaptation"
lens = "data"
method = "DR"
[[candidate]]
id = "d2"
role = "adaptation"
lens = "data"
method = "DR"
[[candidate]]
id = "probe"
role = "diagnosis"
lens = "model"
method = "probe"
"""


def test_stated_priors_parse_round_trip_and_override():
    text = TOML + """
[[interaction]]
from_method = "refresh"
to_method = "DR"
mean = 0.2
sd = 0.1
[[interaction]]
from = "upd"
to = "d2"
mean = -0.1
sd = 0.05
"""
    cf = parse_candidate_text(text, "c.toml")
    stated = stated_pair_priors(list(cf.candidates), cf.candidates.interactions)
    assert stated == {("upd", "d1"): (0.2, 0.1), ("upd", "d2"): (-0.1, 0.05)}
    again = parse_candidate_text(candidates_toml(cf.candidates), "again.toml")
    assert again.candidates.interactions == cf.candidates.interactions
    model = GainsModel(cf.candidates, ON)
    k = model.pairs.index(("upd", "d2"))
    assert model.pair_stated[k] and model.pair_mean[k] == -0.1 and model.pair_sd[k] == 0.05
    assert not model.pair_stated[model.pairs.index(("d1", "d2"))]


@pytest.mark.parametrize(("extra", "rule"), [
    ('from = "probe"\nto = "d1"\nmean = 0\nsd = 1', "only adaptation and model_updates"),
    ('from = "upd"\nto = "upd"\nmean = 0\nsd = 1', "only adaptations have a gain"),
    ('from = "d1"\nto = "d1"\nmean = 0\nsd = 1', "diminishing-returns"),
    ('from = "nope"\nto = "d1"\nmean = 0\nsd = 1', "is not a candidate"),
    ('from = "upd"\nto = "d1"\nmean = 0\nsd = 0', "sd must be > 0"),
    ('from = "upd"\nto = "d1"\nmean = "x"\nsd = 1', "mean must be a finite number"),
    ('from = "upd"\nfrom_method = "DR"\nto = "d1"\nmean = 0\nsd = 1', "either from/to"),
    ('from_method = "XX"\nto_method = "DR"\nmean = 0\nsd = 1', "not a method"),
    ('from = "upd"\nto = "d1"\nmean = 0\nsd = 1\nweight = 2', "unknown key"),
])
def test_bad_interaction_is_refused_naming_table_and_line(extra, rule):
    with pytest.raises(InputError, match=rule) as err:
        parse_candidate_text(TOML + "[[interaction]]\n" + extra + "\n", "c.toml")
    line = len(TOML.splitlines()) + 1  # the [[interaction]] header's line
    assert "[[interaction]]" in str(err.value) and f"line {line} " in str(err.value)


def test_model_updates_table_is_validated(world_candidates):
    ev = Evidence(world_candidates).append(
        model_updates=pd.DataFrame([{"step": 2, "candidate": "sim_refresh"}]))
    assert ev.until(2).model_updates.empty and len(ev.until(3).model_updates) == 1
    with pytest.raises(InputError, match="model updates only"):
        Evidence(world_candidates).append(
            model_updates=pd.DataFrame([{"step": 0, "candidate": "dr_1e6"}]))


def test_order_effects_off_gives_no_gamma(world_candidates):
    model = GainsModel(world_candidates, GainsPriors(order_effects=False))
    assert model.pairs == [] and "actor" not in model.coords()
    assert GainsModel(world_candidates).pairs  # on by default


@pytest.mark.slow
def test_order_effects_table_and_plot_from_q_t(fitted_order):
    """γ's table from q_t: one row per pair, intervals from the draws, evidence counted on the
    lineage pi0 → dr_1e7 → si_friction → dr_1e6 → ft_real_100."""
    import matplotlib.pyplot as plt

    from belief.posterior.order_effects import order_effects_table
    from belief.report.plots import plot_order_effects

    _, belief = fitted_order
    tab = order_effects_table(belief)
    # every actor (6 adaptations, 1 model update) on every other adaptation
    assert len(tab) == 7 * 6 - 6 == int(belief["gains_gamma_pair"].sum())
    row = tab.set_index(["source", "target"]).loc[("si_friction", "dr_1e6")]
    x = belief["gains_gamma"].sel(actor="si_friction", candidate="dr_1e6").values
    assert row["mean"] == pytest.approx(x.mean()) and row["upper"] == pytest.approx(
        np.quantile(x, 0.95))
    got = {(a, m): int(e) for a, m, e in zip(tab["source"], tab["target"], tab["evidence"],
                                            strict=True) if e}
    assert got == {("dr_1e7", "si_friction"): 1, ("dr_1e7", "dr_1e6"): 1,
                   ("si_friction", "dr_1e6"): 1, ("dr_1e7", "ft_real_100"): 1,
                   ("si_friction", "ft_real_100"): 1, ("dr_1e6", "ft_real_100"): 1}
    assert set(tab["kind"]) <= {"complement", "substitute", "unclear"}
    ax = plot_order_effects(belief)
    assert len(ax.get_yticks()) == len(got)
    plt.close(ax.figure)


def test_order_effects_are_on_by_default_and_can_be_turned_off_in_the_candidate_file():
    from models.priors import priors_from_dict

    assert GainsPriors().order_effects
    off = priors_from_dict(GainsPriors, {"order_effects": False}, "c.toml [priors.gains]")
    assert off.order_effects is False
    with pytest.raises(InputError, match="order_effects must be true or false"):
        priors_from_dict(GainsPriors, {"order_effects": 1}, "c.toml [priors.gains]")


def test_informed_pairs_are_those_in_a_step_or_estimate(world_candidates, lineage):
    """γ_{a→m} enters the likelihood only through a step of m (or an estimate of m) with a in
    its history: si_friction→dr_1e6 and sim_refresh→dr_1e6 on the hand-built lineage, plus
    sim_refresh→ft_real_100 once an estimate of ft_real_100 after the update is added."""
    paired, updates = lineage
    model = GainsModel(world_candidates, ON, max_policies=6)
    enc = model.encode(paired, model_updates=updates)
    est = gains_module.encode_estimates(None, enc, model.gain_ids, model.max_estimates,
                                        model.actors)
    got = {model.pairs[p] for p in np.flatnonzero(model.informed_pairs(enc, est))}
    assert got == {("si_friction", "dr_1e6"), ("sim_refresh", "dr_1e6")}
    rows = pd.DataFrame([{"step": 4, "candidate": "ft_real_100", "policy": "pi3",
                          "estimate": 0.3, "se": 0.2}])
    est = gains_module.encode_estimates(rows, enc, model.gain_ids, model.max_estimates,
                                        model.actors)
    got = {model.pairs[p] for p in np.flatnonzero(model.informed_pairs(enc, est))}
    assert got == {("si_friction", "dr_1e6"), ("sim_refresh", "dr_1e6"),
                   ("dr_1e6", "ft_real_100"), ("sim_refresh", "ft_real_100")}


def test_uninformed_gamma_are_exact_prior_draws_and_skip_the_checks(world_candidates):
    """An uninformed γ is replaced by γ = σ_g g + σ_e ε (default prior) or mean + sd ε (stated)
    with fresh ε, g kept where its group is informed; the convergence table skips them, so a
    bad chain there cannot fail the fit, while an informed γ's bad chain still does."""
    from belief.posterior.diagnostics import diagnostics_table

    model = GainsModel(world_candidates, ON, max_policies=6)
    n, groups = len(model.pairs), len(model.gamma_groups)
    assert groups >= 1
    rng = np.random.default_rng(0)
    chains, draws = 4, 2000
    z_g = rng.standard_normal((chains, draws, groups))
    gamma = rng.standard_normal((chains, draws, n))
    gamma[0] += 5.0  # a stuck chain everywhere
    post = xr.Dataset({"gamma": (("chain", "draw", "pair"), gamma),
                       "z_gamma_group": (("chain", "draw", "g"), z_g)},
                      coords={"pair": [f"{a}→{m}" for a, m in model.pairs]})
    idata = xr.DataTree.from_dict({"posterior": post})
    informed = np.zeros(n, dtype=bool)
    in_group = np.flatnonzero(model.pair_group == 0)
    informed[in_group[0]] = True  # group 0 informed through one member
    out = model._gamma_from_prior(idata, informed, np.random.default_rng(1))
    g_out = out["posterior"]["gamma"].values
    assert np.array_equal(g_out[..., informed], gamma[..., informed])  # untouched
    # group 0 keeps its MCMC draws; another member of it is σ_g g + σ_e ε
    other = in_group[1]
    resid = (g_out[..., other] - model.priors.gamma_group_sd * z_g[..., 0]) \
        / model.priors.gamma_sd
    assert abs(resid.mean()) < 4 / np.sqrt(chains * draws)
    assert abs(resid.std() - 1.0) < 0.03
    # an ungrouped uninformed pair: N(0, σ_e²) exactly
    lone = np.flatnonzero((model.pair_group < 0) & ~model.pair_stated)[0]
    x = g_out[..., lone].ravel()
    assert abs(x.mean()) < 4 * model.priors.gamma_sd / np.sqrt(x.size)
    assert abs(x.std() / np.hypot(model.priors.gamma_sd, 0.0) - 1.0) < 0.03
    table = diagnostics_table(out, ["gamma"])
    assert table.loc["gamma", "rhat"] > 1.5  # the informed one's stuck chain is seen
    assert table.loc["gamma", "rhat_at"] == f"gamma[{model.pairs[in_group[0]][0]}→" \
                                            f"{model.pairs[in_group[0]][1]}]"
    informed[:] = False
    clean = model._gamma_from_prior(idata, informed, np.random.default_rng(1))
    assert np.isnan(diagnostics_table(clean, ["gamma"]).loc["gamma", "rhat"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_sampled_gamma_is_the_actor_by_actor_whitening(world_candidates, lineage):
    """γ of the sampled model (:meth:`GainsModel.build`) at a random point is the documented
    triangular map, recomputed here in numpy: actor a by actor (candidate order), over its
    pairs a→m, P = Σ_k [via_k = m] h_ka w_k, P x̂ = Σ_k [via_k = m] h_ka w_k r_k and
    γ = (σ² P x̂ + μ)/(σ² P + 1) + σ z/√(σ² P + 1), with w_k = both_k/(v_k + τ_exec²) and the
    residual r_k = x̂_k − θ_{via_k} ρ^{k} − Σ_{a' before a} h_ka' γ_{a'→via_k}."""

    paired, updates = lineage
    model = GainsModel(world_candidates, ON, max_policies=5)
    enc = model.encode(paired, model_updates=updates)
    est = gains_module.encode_estimates(None, enc, model.gain_ids, model.max_estimates,
                                        model.actors)
    built = model.build(enc, est)
    rng = np.random.default_rng(7)
    point = {v.name: rng.normal(0.0, 0.7, built.initial_point()[v.name].shape)
             for v in built.value_vars}
    outs = built.replace_rvs_by_values([built[n] for n in ("gamma", "effect", "rho", "tau_exec")])
    fn = built.compile_fn(outs, inputs=built.value_vars, on_unused_input="ignore",
                          point_fn=False)
    gamma, effect, rho, tau = fn(**point)
    g = point["z_gamma_group"]
    approx = gains_module.likelihood_approximation(enc, est, len(model.gain_ids), ON)
    hist = history_matrix(enc.history, model.max_policies, len(model.actors))
    via = approx["via_onehot"]
    w = approx["step_both"] / (approx["step_var"] + tau**2)
    resid = approx["step_hat"] - via @ effect * rho ** enc.data()["repeats"]
    grouped = (~model.pair_stated) & (model.pair_group >= 0)
    mu = (np.where(model.pair_stated, model.pair_mean, 0.0)
          + np.where(grouped, ON.gamma_group_sd, 0.0) * g[np.maximum(model.pair_group, 0)])
    sd = np.where(model.pair_stated, model.pair_sd, ON.gamma_sd)
    want = np.zeros(len(model.pairs))
    several = 0
    for i in range(len(model.actors)):
        idx = np.flatnonzero(model.pair_actor == i)
        v = via[:, model.pair_target[idx]] * (hist[:, i] * w)[:, None]
        prec, prec_x = v.sum(axis=0), v.T @ resid
        denom = sd[idx] ** 2 * prec + 1.0
        want[idx] = ((sd[idx] ** 2 * prec_x + mu[idx]) / denom
                     + sd[idx] / np.sqrt(denom) * point["z_gamma_pairs"][idx])
        row = np.zeros(len(model.gain_ids))
        row[model.pair_target[idx]] = want[idx]
        resid = resid - hist[:, i] * (via @ row)
        several += int(np.count_nonzero(prec))
    assert several >= 2  # pairs informed by data ...
    assert ((approx["step_both"] > 0) & ((hist > 0).sum(axis=1) >= 2)).any()  # ... after 2 actors
    np.testing.assert_allclose(gamma, want, rtol=1e-12, atol=1e-12)


def _stated(cands, *priors):
    from dataclasses import replace

    from belief.inputs.interactions import InteractionPrior

    return replace(cands, interactions=tuple(InteractionPrior(a, m, mean, sd)
                                             for a, m, mean, sd in priors))


def test_stated_prior_values_are_data_of_one_compiled_graph(world_candidates, lineage):
    """The stated priors' means and s.d. are ``pm.Data``: models that differ only in them have
    one compile key (one compile), and the graph built for one set of values gives, with the
    other set's data swapped in, the other model's γ — the whitening with its μ and σ."""
    import pymc as pm

    paired, updates = lineage
    a = GainsModel(_stated(world_candidates, ("si_friction", "dr_1e6", 0.3, 0.05),
                           ("sim_refresh", "dr_1e6", -0.2, 0.1)), ON, max_policies=5)
    b = GainsModel(_stated(world_candidates, ("si_friction", "dr_1e6", -0.4, 0.2),
                           ("sim_refresh", "dr_1e6", 0.1, 0.02)), ON, max_policies=5)
    other = GainsModel(_stated(world_candidates, ("si_friction", "dr_1e6", 0.3, 0.05)), ON,
                       max_policies=5)
    plain = GainsModel(world_candidates, ON, max_policies=5)
    assert a.compile_key() == b.compile_key()
    assert len({a.compile_key(), other.compile_key(), plain.compile_key()}) == 3
    # which pairs are stated is structure: two ungrouped pairs (equal pair_group) stated with
    # the same values must not share a graph, or one's prior would act on the other
    x, y = (GainsModel(_stated(world_candidates, ("si_friction", m, 0.1, 0.1)), ON,
                       max_policies=5) for m in ("da_camera", "ft_real_100"))
    assert (x.pair_group == y.pair_group).all() and x.compile_key() != y.compile_key()
    enc = a.encode(paired, model_updates=updates)
    est = gains_module.encode_estimates(None, enc, a.gain_ids, a.max_estimates, a.actors)
    built = a.build(enc, est)
    point = {v.name: np.random.default_rng(3).normal(0.0, 0.7, built.initial_point()[v.name].shape)
             for v in built.value_vars}
    outs = built.replace_rvs_by_values([built["gamma"]])
    fn = built.compile_fn(outs, inputs=built.value_vars, on_unused_input="ignore",
                          point_fn=False)
    k = [b.pairs.index(p) for p in (("si_friction", "dr_1e6"), ("sim_refresh", "dr_1e6"))]
    (g_a,) = fn(**point)
    data_b = b.data(enc, est)
    np.testing.assert_array_equal(data_b["gamma_stated_mean"], b.pair_mean[b.pair_stated])
    assert set(data_b) == {v.name for v in built.data_vars}  # a re-fit refreshes every one
    with built:
        pm.set_data({n: data_b[n] for n in ("gamma_stated_mean", "gamma_stated_sd")})
    (g_swapped,) = fn(**point)
    # γ of b built on its own values, at the same point
    built_b = b.build(enc, est)
    fn_b = built_b.compile_fn(built_b.replace_rvs_by_values([built_b["gamma"]]),
                              inputs=built_b.value_vars, on_unused_input="ignore",
                              point_fn=False)
    (g_b,) = fn_b(**point)
    np.testing.assert_allclose(g_swapped, g_b, rtol=1e-12, atol=1e-12)
    assert np.abs(g_a[k] - g_b[k]).min() > 0.05  # the values matter: a's γ differ from b's
    # the generative model (SBC, prior predictive) reads the same containers
    gen_a, gen_b = a.build_generative(enc, est), b.build_generative(enc, est)
    z = {"z_gamma_stated": np.array([0.7, -1.3])}
    fns = [g.compile_fn(g.replace_rvs_by_values([g["gamma"]]), inputs=g.value_vars,
                        on_unused_input="ignore", point_fn=False) for g in (gen_a, gen_b)]
    pt_a = {**{v.name: np.zeros(gen_a.initial_point()[v.name].shape)
               for v in gen_a.value_vars}, **z}
    with gen_a:
        pm.set_data({n: data_b[n] for n in ("gamma_stated_mean", "gamma_stated_sd")})
    (ga,), (gb,) = fns[0](**pt_a), fns[1](**pt_a)
    np.testing.assert_allclose(ga[k], [-0.4 + 0.2 * 0.7, 0.1 - 0.02 * 1.3], rtol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-12)
