"""What one strongly negative pilot of one lens does to the others (:mod:`models.gains`, "What
one lens's evidence does to the others"): the fitted model against the exact rule of
:mod:`models.gains.pooling_rule`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from models.gains import GainsModel, GainsPriors
from models.gains.pooling_rule import pooling_weights, scale_prior_draws, transfer_bound
from models.priors import ScalePrior

PILOT = -1.5  # logit gain: a strongly negative pilot (the prior mean is +0.2, its sd ≈ 0.8)
SE = 0.15
RELATION = {"dr_1e6": "measured", "dr_1e7": "same_method", "cotrain": "same_lens",
            "si_friction": "other_lens", "da_camera": "other_lens", "ft_real_100": "other_lens"}


def test_the_rule_is_ordered_and_bounded():
    """Pure numbers of the rule: a relation sharing more moves more; the move of another
    lens's θ is bounded over every pilot value (learned scales), at ≈ 0.19 logit for the
    default priors; a far-out pilot moves other lenses less than a moderately bad one."""
    pr = GainsPriors()
    w = pooling_weights(pr, PILOT, SE)
    assert w.ess > 10_000
    assert w.weight["other_lens"] < w.weight["same_lens"] < w.weight["same_method"] < 1.0
    bound, _ = transfer_bound(pr, SE)
    assert 0.15 < bound < 0.25
    for y in (-3.0, PILOT, 0.8):
        assert abs(pooling_weights(pr, y, SE).shift("other_lens", pr.effect_mu_mu)) <= bound
    far = pooling_weights(pr, -6.0, SE).shift("other_lens", pr.effect_mu_mu)
    assert abs(far) < abs(w.shift("other_lens", pr.effect_mu_mu))
    # a lighter-tailed between-lens prior (HalfNormal) learns the scales less: more transfer
    half = ScalePrior("half_normal", sigma=0.2)
    light = GainsPriors(tau_lens=half, tau_method=half, tau_candidate=half)
    assert pooling_weights(light, PILOT, SE).weight["other_lens"] > w.weight["other_lens"]


def _exact_gains(pr: GainsPriors, eta: np.ndarray, estimate: float | None, relation: str,
                 n: int = 400_000, seed: int = 5) -> tuple[float, float]:
    """E[ΔJ_next(j)] at the root policy under the exact law (module docstring of
    :mod:`models.gains.pooling_rule`), for j in ``relation`` to the measured candidate, with
    its Monte Carlo s.e.: scales from their priors, importance-weighted by the pilot (none:
    the prior), θ_j | y, τ normal, η from its (independent) posterior draws ``eta``."""
    rng = np.random.default_rng(seed)
    t2 = {k: scale_prior_draws(getattr(pr, f"tau_{k}"), rng, n) ** 2
          for k in ("lens", "method", "candidate", "exec")}
    s0 = pr.effect_mu_sigma**2
    total = s0 + t2["lens"] + t2["method"] + t2["candidate"]  # prior variance of any θ
    shared = {"other_lens": s0, "same_lens": s0 + t2["lens"],
              "same_method": s0 + t2["lens"] + t2["method"]}[relation]
    if estimate is None:
        w = np.full(n, 1.0 / n)
        mean, var = np.full(n, pr.effect_mu_mu), total
    else:
        v = total + SE**2 + t2["exec"]
        logw = -0.5 * (estimate - pr.effect_mu_mu) ** 2 / v - 0.5 * np.log(v)
        w = np.exp(logw - logw.max())
        w /= w.sum()
        mean = pr.effect_mu_mu + shared / v * (estimate - pr.effect_mu_mu)
        var = total - shared**2 / v
    e = rng.choice(eta, n)
    x = e + mean + np.sqrt(var + t2["exec"]) * rng.standard_normal(n)
    g = 1.0 / (1.0 + np.exp(-x)) - 1.0 / (1.0 + np.exp(-e))
    m = float((w * g).sum())
    return m, float(np.sqrt((w**2 * (g - m) ** 2).sum()))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_one_negative_pilot_moves_other_lenses_only_by_the_rule(world_candidates):
    """A pilot of dr_1e6 at −1.5 ± 0.15 logit, the only evidence about any gain: every
    candidate's posterior mean θ is μ̄ + E[w_j | y](y − μ̄) (the rule) within Monte Carlo
    error; the other lenses' predictive gain is the rule's, within Monte Carlo error; the same
    method's and the same lens's candidates move more than other lenses'.  The fit itself
    meets the convergence standard (4 chains, R-hat ≤ 1.01, ESS ≥ 400, no divergence)."""
    import arviz_stats as az

    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.evidence import Evidence
    from belief.posterior.diagnostics import CHECK_VARS, check_convergence
    from belief.workflow.derived import judge_models, posterior_diagnostics

    world = SyntheticWorld(seed=3)
    init = world.initial_evidence()
    ev = Evidence(world_candidates).append(policy_evals=init["policy_evaluations"])
    pilot = pd.DataFrame({"step": [0], "candidate": ["dr_1e6"], "policy": [world.policy],
                          "eval_protocol": ["pick_place_v1"], "source": ["pilot"],
                          "estimate": [PILOT], "se": [SE]})
    ev = ev.append(gain_estimates=pilot)
    model = GainsModel(world_candidates)
    pr = model.priors
    idata = model.fit(ev.paired, world.policy, policy_evals=ev.policy_evals,
                      gain_estimates=ev.gain_estimates, draws=1000, tune=500, chains=4,
                      seed=4)
    conv = check_convergence(idata, CHECK_VARS["gains"])
    assert conv.reliable, conv.reason
    # no step informs any order effect: every γ is an exact prior draw, and the user's
    # convergence table says so instead of failing the row of a fit called reliable
    tree = xr.DataTree.from_dict({f"gains/{g}": idata[g].to_dataset()
                                  for g in ("posterior", "sample_stats")})
    table = judge_models(posterior_diagnostics(tree))
    assert table["passed"].all(), table[~table["passed"]]
    assert table.loc[("gains", "gamma"), "exact_draws"] == len(model.pairs)
    assert table.loc[("gains", "gamma"), "note"].startswith(f"all {len(model.pairs)} exact draws")

    rule = pooling_weights(pr, PILOT, SE)
    post = idata["posterior"]
    theta = post["effect"]
    ess = az.ess(idata, var_names=["effect"], method="mean")["effect"]
    move = {}
    for j, rel in RELATION.items():
        got = float(theta.sel(candidate=j).mean())
        sd = float(theta.sel(candidate=j).std())
        mcse = sd / np.sqrt(float(ess.sel(candidate=j)))
        if rel == "measured":  # its own posterior: between the pilot and the prior mean
            assert PILOT - 3 * SE < got < pr.effect_mu_mu
            continue
        want = pr.effect_mu_mu + rule.shift(rel, pr.effect_mu_mu)
        tol = 4.0 * np.hypot(mcse, abs(PILOT - pr.effect_mu_mu) * rule.mcse[rel])
        assert abs(got - want) < tol, (j, got, want, tol)
        print(f"{j} ({rel}): θ moved {got - pr.effect_mu_mu:+.3f}, "
              f"rule {want - pr.effect_mu_mu:+.3f} ± {tol:.3f}")
        move[j] = got - pr.effect_mu_mu
    # μ_0 is what other lenses share with the pilot: it moves by the same rule (tighter)
    mu0 = post["mu0"]
    got = float(mu0.mean())
    mcse = float(mu0.std()) / np.sqrt(float(az.ess(idata, var_names=["mu0"],
                                                   method="mean")["mu0"]))
    want = pr.effect_mu_mu + rule.shift("other_lens", pr.effect_mu_mu)
    tol = 4.0 * np.hypot(mcse, abs(PILOT - pr.effect_mu_mu) * rule.mcse["other_lens"])
    assert abs(got - want) < tol, ("mu0", got, want, tol)
    print(f"mu0 moved {got - pr.effect_mu_mu:+.3f}, rule {want - pr.effect_mu_mu:+.3f} "
          f"± {tol:.3f}")
    bound, _ = transfer_bound(pr, SE)
    for j in ("si_friction", "da_camera", "ft_real_100"):
        assert move[j] < 0 and abs(move[j]) < bound + 4 * 0.02  # 0.02 ≫ the mcse above
    worst_other = min(move[j] for j in ("si_friction", "da_camera", "ft_real_100"))
    assert move["dr_1e7"] < move["cotrain"] < worst_other  # moves are negative: more = lower

    eta = post["policy_logit"].sel(policy=world.policy).values.ravel()
    gain = model.predictive_gain(idata, world.policy, np.random.default_rng(2))
    for j in ("si_friction", "da_camera", "ft_real_100"):
        g = gain.sel(candidate=j).values
        mcse = float(g.std()) / np.sqrt(float(ess.sel(candidate=j)))
        want, want_se = _exact_gains(pr, eta, PILOT, "other_lens")
        assert abs(float(g.mean()) - want) < 4 * np.hypot(mcse, want_se), (j, g.mean(), want)
        print(f"{j}: predictive gain {float(g.mean()):.4f}, rule {want:.4f}")
    before, _ = _exact_gains(pr, eta, None, "other_lens")
    after, _ = _exact_gains(pr, eta, PILOT, "other_lens")
    sib, _ = _exact_gains(pr, eta, PILOT, "same_method")
    assert sib < after < before  # the rule, on the predictive-gain scale
    print(f"other lens: predictive gain {before:.4f} before, {after:.4f} after "
          f"(ratio {after / before:.2f}); same method after {sib:.4f}; bound on θ {bound:.3f}")
