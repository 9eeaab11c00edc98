from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from belief.inputs.tables import validate_paired
from models.gains import GainsPriors, encode_policies
from models.gains import model as gains_model_module


def test_encoding_ancestry_repeats_and_counts(world_candidates):
    rows = pd.DataFrame([
        {"step": 0, "candidate": "dr_1e6", "policy": "pi0", "eval_protocol": "pick_place_v1",
         "control_successes": 30, "control_trials": 100, "treated_successes": 40,
         "treated_trials": 100, "treated_policy": "pi1"},
        {"step": 1, "candidate": "dr_1e6", "policy": "pi1", "eval_protocol": "pick_place_v1",
         "control_successes": 45, "control_trials": 100, "treated_successes": 50,
         "treated_trials": 100, "treated_policy": "pi2"},
    ])
    paired = validate_paired(rows, world_candidates)
    gain_ids = [c.id for c in world_candidates if c.changes_policy]
    evals = pd.DataFrame({"step": [0], "policy": ["pi0"], "eval_protocol": ["pick_place_v1"],
                          "successes": [25], "trials": [100]})
    enc = encode_policies(paired, gain_ids, 6, ("pi2",), evals)
    assert enc.names == ["pi0", "pi1", "pi2"]
    np.testing.assert_array_equal(enc.ancestry[:3, :3], [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    np.testing.assert_array_equal(enc.ancestry[3:, 3:], np.eye(3))  # unused slots
    np.testing.assert_array_equal(enc.is_root, [1, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(enc.repeats[:3], [0, 0, 1])
    np.testing.assert_array_equal(enc.successes[:3], [55, 85, 50])
    np.testing.assert_array_equal(enc.trials[:3], [200, 200, 100])
    assert enc.via[1] == gain_ids.index("dr_1e6")
    np.testing.assert_array_equal(enc.repeats_from("pi2", gain_ids),
                                  [2 if g == "dr_1e6" else 0 for g in gain_ids])


def test_too_many_policies_is_refused(world_candidates):
    from belief.errors import InputError

    with pytest.raises(InputError, match="exceed max_policies"):
        encode_policies(_chain(world_candidates, 5), ["dr_1e6"], 3)


def _chain(cands, n):
    rows = [{"step": i, "candidate": "dr_1e6", "policy": f"p{i}", "eval_protocol":
             "pick_place_v1", "control_successes": 1, "control_trials": 2,
             "treated_successes": 1, "treated_trials": 2, "treated_policy": f"p{i + 1}"}
            for i in range(n)]
    return validate_paired(pd.DataFrame(rows), cands)


def test_fit_refit_without_recompiling(fitter, campaign_evidence, fitted):
    ev, _world = campaign_evidence
    idata, belief = fitted
    n_compiled = len(gains_model_module._COMPILED)
    post = idata["gains"]["posterior"]
    assert list(post["policy"].values) == ["pi0", "pi1", "pi2", "pi3", "pi4"]
    # the policy logits follow the observed success rates
    obs = idata["gains"]["observed_data"]["successes"] / idata["gains"]["constant_data"]["trials"]
    from scipy.special import expit

    p = expit(post["policy_logit"])
    # each observed rate lies within 3 posterior s.d. of the posterior mean success rate
    assert (abs(p.mean(("chain", "draw")) - obs) <= 3 * p.std(("chain", "draw"))).all()
    # re-fit with less evidence: same compiled model, different posterior
    _, belief2 = fitter.fit(ev.until(2), "pi2", step=2, seed=1)
    assert len(gains_model_module._COMPILED) == n_compiled
    assert belief2.attrs["policy"] == "pi2"
    assert not np.allclose(belief2["gain"].mean("sample"), belief["gain"].mean("sample"))


def test_light_fit_has_the_full_fits_draws(fitter, campaign_evidence):
    """``fit(light=True)`` (exact CVU refits) reads the sampler's raw trace: the same draws,
    hence the same decision draws, as the full fit with the same seed — only fewer variables."""
    ev, world = campaign_evidence
    kw = dict(policy_evals=ev.policy_evals, gain_estimates=ev.gain_estimates,
              model_updates=ev.model_updates, direction_estimates=ev.direction_estimates,
              draws=50, tune=100, chains=2, seed=5)
    gains = fitter.gains
    full = gains.fit(ev.paired, world.policy, **kw)
    light = gains.fit(ev.paired, world.policy, light=True, **kw)
    assert set(light["posterior"].data_vars) < set(full["posterior"].data_vars)
    assert "sample_stats" not in light.children
    for v in light["posterior"].data_vars:
        np.testing.assert_array_equal(light["posterior"][v].values, full["posterior"][v].values)
    a = gains.decision_draws(full, world.policy, np.random.default_rng(0))
    b = gains.decision_draws(light, world.policy, np.random.default_rng(0))
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        np.testing.assert_array_equal(a[v].values, b[v].values)


def test_belief_shape_and_zero_gain_for_non_adaptations(fitted, world_candidates):
    _, belief = fitted
    assert belief["gain"].dims == ("sample", "candidate")
    assert belief.sizes["sample"] == 600
    for c in world_candidates:
        g = belief["gain"].sel(candidate=c.id)
        if c.changes_policy:
            assert float(g.std()) > 0
            assert (g > -1).all() and (g < 1).all()
        else:
            assert (g == 0).all()
    assert int(belief["executions"].sel(candidate="ft_real_100")) == 250
    assert belief.attrs["reliable"] in (0, 1)


def test_predictive_gain_includes_repeat_discount(fitter, fitted, world_candidates):
    """ΔJ_next(m | π) = logistic(η_π + θ_m ρ^{k_m(π)} + τ·z) − logistic(η_π), with k_m(π) the
    executions of m on π's lineage (pi0 → dr_1e7 → si_friction → dr_1e6 → ft_real_100)."""
    from scipy.special import expit

    from belief.errors import InputError

    idata, _ = fitted
    ids = fitter.gains.gain_ids
    d = fitter.gains.decision_draws(idata["gains"], "pi4", np.random.default_rng(0))
    g = fitter.gains.predictive_gain(idata["gains"], "pi4", np.random.default_rng(0))
    assert list(g["candidate"].values) == ids
    lineage = {"dr_1e7", "si_friction", "dr_1e6", "ft_real_100"}
    assert d["gains_repeats"].values.tolist() == [int(c in lineage) for c in ids]
    eta, rho, tau = (d[v].values[:, None] for v in ("gains_eta", "gains_rho", "gains_tau"))
    k = d["gains_repeats"].values[None, :]
    # order effects (on by default): the history of the next execution from pi4 is its
    # lineage (no model update ran), and the offset is Σ_{a ∈ h} γ_{a→m}
    actors = [str(a) for a in d["actor"].values]
    assert {a for a, h in zip(actors, d["gains_history"].values, strict=True) if h} == lineage
    gamma = d["gains_gamma"].values  # (sample, actor, candidate), 0 where a = m
    offset = sum(gamma[:, actors.index(a), :] for a in sorted(lineage))
    # the model may sum in another order: rounding of O(1) terms (≈ 1e-16) is allowed in
    # absolute terms, since a gain or an offset can be arbitrarily close to 0
    np.testing.assert_allclose(d["gains_offset"].values, offset, rtol=1e-12, atol=1e-14)
    expected = expit(eta + d["gains_theta"].values * rho ** k + offset
                     + tau * d["gains_z_now"].values) - expit(eta)
    np.testing.assert_allclose(g.values, expected, rtol=1e-12, atol=1e-14)
    assert 0 < float(rho.max()) < 1 and int(k.sum()) >= 3  # the discount bites
    with pytest.raises(InputError, match="not part of the fit"):
        fitter.gains.predictive_gain(idata["gains"], "pi99", np.random.default_rng(0))


def test_priors_are_validated():
    from belief.errors import InputError

    with pytest.raises(InputError, match="tau_lens must be > 0"):
        GainsPriors(tau_lens=0.0)


def test_loglik_matches_scipy_binomial(fitted):
    from scipy.special import expit
    from scipy.stats import binom

    from models.gains import decision_vars, executed_logit, loglik

    _, belief = fitted
    draws = belief[decision_vars(belief)]
    y = np.array([[30, 41], [0, 100], [100, 0]])
    got = loglik(draws, "dr_1e6", y, 100)
    p0 = expit(draws["gains_eta"].values)
    p1 = expit(executed_logit(draws, "dr_1e6"))
    ref = binom.logpmf(y[:, :1], 100, p0[None]) + binom.logpmf(y[:, 1:], 100, p1[None])
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-8)


def test_one_outlying_pilot_estimate_does_not_drag_unrelated_lenses(fitter, campaign_evidence,
                                                                  fitted):
    """Issue 15's held-out case: a single pilot estimate of −0.38 (logit) for the fine-tuning
    candidate must not move the predictive gain of the adaptations in *other* lenses by as much
    as their posterior s.d. (the pooling scales are learned, not fixed tight).

    The tolerance is the issue's criterion, |Δ mean| < s.d.; the Monte Carlo error of Δ mean with
    2 × 300 draws (ESS ≥ 100 per fit) is ≤ √2 · s.d./√100 ≈ 0.14 s.d., so a pass is not luck.
    """
    ev, world = campaign_evidence
    _, base = fitted
    row = pd.DataFrame({"step": [4], "candidate": ["ft_real_100"], "policy": [world.policy],
                        "eval_protocol": [ev.candidates.eval_protocol], "source": ["ft_pilot"],
                        "estimate": [-0.38], "se": [0.15]})
    _, moved = fitter.fit(ev.append(gain_estimates=row), world.policy, step=4, seed=11)
    cs = ev.candidates
    own_lens = cs["ft_real_100"].lens
    others = [c.id for c in cs if c.changes_policy and c.lens != own_lens]
    assert others
    g0, g1 = base["gain"].sel(candidate=others), moved["gain"].sel(candidate=others)
    shift = np.abs(g1.mean("sample") - g0.mean("sample"))
    assert (shift < g0.std("sample")).all(), (shift.values, g0.std("sample").values)
    # the estimate itself is not ignored: the informed candidate's gain does drop
    ft0 = float(base["gain"].sel(candidate="ft_real_100").mean())
    ft1 = float(moved["gain"].sel(candidate="ft_real_100").mean())
    assert ft1 < ft0
