"""Exact refits only where they can change the choice: the bounds of deferred refits, the
contenders, and a decision that refits fewer candidates and chooses as refitting all does."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from belief.decision.cvu import CVUProblem, continuation_value
from belief.decision.cvu.decisive import contenders, decisive_cvu, settled
from belief.decision.cvu.preposterior import control_variate_terms
from belief.decision.cvu.psis import refit_bounds
from belief.decision.functionals import Cvar, Lcb, Mean
from belief.decision.settings import CVUSettings
from belief.posterior.experiments import Experiment

MEAN = Mean()


def test_contenders_by_hand():
    low = np.array([0.10, 0.05, 0.02, -0.3, 0.5])
    high = np.array([0.12, 0.11, 0.09, -0.1, 0.9])
    eligible = np.array([True, True, True, True, False])  # the last is not ranked
    # best low among the others: 0.05 for the first, 0.10 for the rest
    np.testing.assert_array_equal(contenders(low, high, eligible),
                                  [True, True, False, False, False])
    # a tie with the best other low still contends (the refit decides it)
    np.testing.assert_array_equal(contenders([0.1, 0.0], [0.2, 0.1], np.ones(2, bool)),
                                  [True, True])
    # nothing worth more than stopping: nobody contends
    np.testing.assert_array_equal(contenders([-0.2, -0.1], [-0.1, 0.0], np.ones(2, bool)),
                                  [False, False])
    # a single candidate contends when it can beat stopping
    np.testing.assert_array_equal(contenders([-0.1], [0.1], np.ones(1, bool)), [True])


@pytest.mark.parametrize("n_controls", [0, 3])
def test_refit_bounds_contain_the_estimate_for_every_value_in_the_box(n_controls):
    rng = np.random.default_rng(3)
    n_j = 96
    z = rng.standard_normal((n_j, n_controls))
    v = 0.1 + z @ rng.normal(0, 0.05, n_controls) + 0.02 * rng.standard_normal(n_j)
    deferred = np.zeros(n_j, bool)
    deferred[rng.choice(n_j, 6, replace=False)] = True
    ranges = np.sort(rng.uniform(-0.2, 0.4, (6, 2)), axis=1)
    low, high = refit_bounds(v, z, deferred, ranges)
    rows = np.flatnonzero(deferred)
    values = []
    for k in range(300):
        w = v.copy()
        u = rng.uniform(size=6) if k >= 64 else (k >> np.arange(6)) & 1  # the 64 corners first
        w[rows] = ranges[:, 0] + u * (ranges[:, 1] - ranges[:, 0])
        values.append(np.mean(control_variate_terms(w, z)))
    values = np.array(values)
    assert values.min() >= low - 1e-12 and values.max() <= high + 1e-12
    # the extremes are corners of the box: the range is attained, not just covered
    assert values[:64].min() == pytest.approx(low, abs=1e-12)
    assert values[:64].max() == pytest.approx(high, abs=1e-12)


def _problem(means, sds, n_obs, sigma=1.0, n_draws=4000, failing=()):
    """Independent normal gains; candidate c's experiment observes its own gain with n_obs
    observations of sd sigma; the exact refit is the conjugate posterior of column c (the
    other columns keep their draws), its draws seeded by the outcome (not by the call order);
    the candidates in ``failing`` have refits that return NaN.  Returns the draws, the
    experiments and a call count."""
    rng = np.random.default_rng(11)
    q = stats.norm.ppf((np.arange(n_draws) + 0.5) / n_draws)
    gain = np.stack([m + s * rng.permutation(q) for m, s in zip(means, sds, strict=True)], -1)
    calls = {"n": 0}
    se = sigma / np.sqrt(n_obs)

    def experiment(c):
        def refit(y):
            calls["n"] += 1
            if c in failing:
                return np.full((2000, gain.shape[1]), np.nan)
            prior_mu, prior_var = gain[:, c].mean(), gain[:, c].var()
            var = 1 / (1 / prior_var + 1 / se**2)
            mu = var * (prior_mu / prior_var + float(y) / se**2)
            out = gain[:2000].copy()
            own = np.random.default_rng([c, int(abs(float(y)) * 1e9)])
            out[:, c] = mu + np.sqrt(var) * own.permutation(q[::2])
            return out

        return Experiment(
            next_gain=gain,
            simulate=lambda r, idx: gain[idx, c] + se * r.standard_normal(len(idx)),
            loglik=lambda y: stats.norm.logpdf(y[:, None], gain[None, :, c], se),
            refit=refit)

    return gain, {f"m{c}": experiment(c) for c in range(len(means))}, calls


def _both(means, functional, failing=(), **settings):
    """CVU with every candidate refit and with the decisive scope: (all, decisive, their
    values against stopping, refit calls of each, U0)."""
    gain, exps, calls = _problem(means, [0.15] * len(means), n_obs=400, failing=failing)
    ids = list(exps)
    n_c = len(ids)
    costs = np.full((n_c, 1), 0.1)
    cvu_settings = CVUSettings(n_outcomes=128, seed=4, max_refits=6, **settings)

    def compute(defer, only):
        chosen = exps if only is None else {k: exps[k] for k in only}
        return continuation_value(CVUProblem(
            gain, chosen, ids, costs, np.ones(1), lambda b: np.ones(1),
                                  functional, settings=cvu_settings, defer_refits=defer))

    u0 = functional(gain.T) - 0.1
    full = compute(False, None)
    n_all, calls["n"] = calls["n"], 0
    dec = decisive_cvu(compute, u0, 1.0, np.ones(n_c, bool))
    values = [u0 + d["cvu"].values + d.attrs["g0_null"] for d in (full, dec)]
    return full, dec, values, (n_all, calls["n"]), u0


@pytest.mark.parametrize("functional", [MEAN, Lcb(0.2)], ids=["mean", "lcb"])
@pytest.mark.parametrize("means, near_tie", [([0.30, 0.28, 0.05, -0.10], False),
                                             ([0.30, 0.299, 0.05, -0.10], True)],
                         ids=["clear", "near_tie"])
def test_decisive_refits_fewer_and_chooses_as_refitting_all(functional, means, near_tie):
    """Four candidates whose informative studies leave untrusted weights.  A clear leader:
    no refit at all (its lower end clears every other's upper end, and it is chosen as when
    every candidate is refit).  A near tie at the top: the two leaders are refit — their rows
    are those of refitting every candidate — and the two far below stay bounded.  Every
    bounded CVU brackets the value its refits give."""
    full, dec, (v_all, v_dec), (n_all, n_dec), _ = _both(means, functional)
    assert n_all == int(full["n_refits"].sum()) > 0
    assert int(np.argmax(v_all)) == int(np.argmax(v_dec))
    bounded = dec["n_deferred"].values > 0
    if near_tie:
        assert 0 < n_dec < n_all
        np.testing.assert_array_equal(bounded, [False, False, True, True])
    else:
        assert n_dec == 0 and bounded.all()
        chosen = int(np.argmax(v_dec))
        assert "chosen whatever they give" in dec["cvu_reason"].values[chosen]
    for i in np.flatnonzero(~bounded):  # refit: the estimate of refitting every candidate
        for name in ("cvu", "cvu_se", "n_refits", "cvu_method", "cvu_own", "cvu_voi"):
            assert dec[name].values[i] == full[name].values[i], (i, name)
    for i in np.flatnonzero(bounded):
        assert dec["cvu_method"].values[i].endswith("+bounded")
        assert "not refit" in dec["cvu_reason"].values[i]
        assert dec["cvu_low"].values[i] <= full["cvu"].values[i] <= dec["cvu_high"].values[i]
        assert dec["n_deferred"].values[i] == full["n_refits"].values[i]


def test_a_failed_refit_is_read_again_before_the_choice():
    """The leader's refits fail (NaN draws) and no untrusted outcome may stay: it falls back
    to the regression estimator, as when every candidate is refit, and the bounds are read
    again with its new value before anything else is decided."""
    full, dec, (v_all, v_dec), _, _ = _both([0.30, 0.299, 0.05, -0.10], MEAN, failing=(0,),
                                            max_bad_share=0.0)
    assert full["cvu_method"].values[0] == dec["cvu_method"].values[0] == "regression"
    assert dec["cvu"].values[0] == full["cvu"].values[0]
    assert int(np.argmax(v_all)) == int(np.argmax(v_dec))
    assert dec["cvu_method"].values[1] == full["cvu_method"].values[1]


def test_settled_by_hand():
    ones = np.ones(3, bool)
    assert settled([0.3, 0.1, 0.0], [0.4, 0.25, 0.2], ones)  # 0.3 > every other's most
    assert not settled([0.3, 0.1, 0.0], [0.4, 0.31, 0.2], ones)
    assert settled([-0.3, -0.2, -0.5], [-0.1, 0.0, -0.2], ones)  # stop, whatever they give
    assert not settled([-0.1, -0.2, -0.5], [0.05, 0.0, -0.2], ones)  # go or stop?
    assert settled([0.3, 0.1, 0.0], [0.4, 0.5, 0.2], np.array([True, False, True]))


def test_refit_seeds_follow_the_outcome_not_the_call_order():
    from belief.posterior.refit import refit_seed

    y = np.array([40.0, 55.0])
    assert refit_seed(3, "dr_1e6", y) == refit_seed(3, "dr_1e6", y.copy())
    assert len({refit_seed(3, "dr_1e6", y), refit_seed(4, "dr_1e6", y),
                refit_seed(3, "dr_1e7", y), refit_seed(3, "dr_1e6", y + np.array([1.0, 0.0]))}) == 4
    assert refit_seed(3, "m", np.array([1, 2])) == refit_seed(3, "m", np.array([1.0, 2.0]))


def test_deferring_needs_the_one_step_continuation():
    gain, exps, _ = _problem([0.1, 0.0], [0.1, 0.1], n_obs=10)
    with pytest.raises(ValueError, match="one-step"):
        continuation_value(CVUProblem(gain, exps, list(exps), np.zeros((2, 1)), np.ones(1),
                           lambda b: np.ones(1), MEAN,
                           settings=CVUSettings(continuation="lookahead2"), defer_refits=True))


def test_campaigns_bound_refits_for_q_only_and_old_logs_refit_all():
    from belief.campaign.loop import CampaignSettings, logged_settings, settings_to_dict

    assert CampaignSettings().decision().cvu.refit_scope == "decisive"
    # plan_voi ranks by the value of information of every candidate: all are refit; the log
    # header keeps the scope given, for a campaign derived from it with another allocation
    voi = CampaignSettings(allocation="plan_voi")
    assert voi.decision().cvu.refit_scope == "all"
    assert settings_to_dict(voi)["cvu"]["refit_scope"] == "decisive"
    header = settings_to_dict(CampaignSettings())
    del header["cvu"]["refit_scope"]  # a log written before the setting existed
    assert logged_settings(header)["cvu"]["refit_scope"] == "all"


def test_decide_refuses_an_unknown_refit_scope_naming_the_flag(capsys):
    from belief.cli.main import main

    assert main(["decide", "absent.nc", "--refit", "--refit-scope", "sometimes"]) == 2
    err = capsys.readouterr().err
    assert "--refit-scope" in err and "'decisive', 'all'" in err


def test_deferred_estimates_on_two_threads_are_the_sequential_ones():
    """Deferred refits leave nothing but array work: the candidates are scored on threads, and
    the dataset is the one scored one at a time."""
    import xarray as xr

    gain, exps, calls = _problem([0.30, 0.299, 0.05, -0.10], [0.15] * 4, n_obs=400)
    ids = list(exps)

    def run(workers):
        return continuation_value(CVUProblem(gain, exps, ids, np.full((4, 1), 0.1), np.ones(1),
                                  lambda b: np.ones(1), MEAN, defer_refits=True,
                                  settings=CVUSettings(n_outcomes=128, seed=4, max_refits=6,
                                                       workers=workers)))

    one, two = run(1), run(2)
    assert calls["n"] == 0 and int(one["n_deferred"].sum()) > 0
    xr.testing.assert_identical(one, two)


@pytest.mark.parametrize("functional", [MEAN, Lcb(0.2), Cvar(0.2)],
                         ids=["mean", "lcb", "cvar"])
def test_a_deferred_estimate_lies_within_its_bounds(functional):
    """The weighted G0_j − b_j of a deferred outcome is clipped into the refit's range (a noise
    bias from weights of low ESS can exceed the range's margin: before the clip, lcb:0.2 with
    2000 observations put a point 3e-4 below its lower end, and a settled choice then ranked
    the point against an exact rival), so every point lies within [cvu_low, cvu_high]."""
    gain, exps, _ = _problem([0.30, 0.299, 0.05, -0.10], [0.15] * 4, n_obs=2000)
    ids = list(exps)
    for seed in range(3):
        for max_refits in (1, 16):
            out = continuation_value(CVUProblem(
                gain, exps, ids, np.full((4, 1), 0.1), np.ones(1), lambda b: np.ones(1),
                functional, defer_refits=True,
                settings=CVUSettings(n_outcomes=128, seed=seed, max_refits=max_refits)))
            assert (out["n_deferred"].values > 0).any()
            cvu, low, high = (out[k].values for k in ("cvu", "cvu_low", "cvu_high"))
            assert np.all(low <= cvu) and np.all(cvu <= high), (seed, max_refits)
