"""Coverage of decisions on synthetic worlds (issue 9; see :mod:`belief.lab.calibration`).

Slow tests: scripted campaigns on 40 varied worlds (``SyntheticWorld.varied(v)``), fitted at two
checkpoints (after 2 and 5 executions) with the session's fast fitter (2 × 300 draws).

- gains: the 90 % posterior interval of the mean gain μ(m | θ) is compared with the world's
  ``expected_gain(m)``, the 90 % interval of the predictive gain ``belief["gain"]`` with one
  realised gain.  Neither may under-cover (upper end of the exact two-sided 99 %
  Clopper–Pearson interval of the observed rate ≥ 0.90), also for candidates the world had
  executed before.  Without order effects those were nominal; with order effects (the default
  since issue 16) they over-cover, because the prior of γ for actors that ran since m's own
  executions widens them while the worlds leave most pairs at 0.  The
  intervals of candidates not executed yet over-cover (the worlds' gains are not drawn from
  the model's priors; see the calibration report), and that is asserted.
- gate: the one-sided 95 % Clopper–Pearson bound must cover the true p_unsafe at ≥ 0.95 on the
  worlds and on simulated bench runs (upper end of the 99 % interval ≥ 0.95), and its exact
  coverage at every world's (p, n) must be ≥ 0.95.  The hierarchical posterior bound has no
  frequentist guarantee; its coverage is printed, and the per-candidate check is an expected
  failure (shrinkage pulls the riskiest candidate's bound below its truth; see the report).

Rows of one world share evidence and truth; the binomial intervals treat rows as independent
(stated), so they are somewhat too narrow.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import expit

from belief.errors import InputError
from belief.lab.calibration import (
    binomial_interval,
    coverage_table,
    cp_bench_coverage,
    cp_exact_coverage,
    mean_gain_draws,
    run_world_coverage,
)

WORLDS = range(40)
LEVEL = 0.99  # confidence of the binomial intervals the assertions use


# -- fast ----------------------------------------------------------------------------------------
def _fake_belief(n: int = 4000) -> xr.Dataset:
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"gains_eta": ("sample", rng.normal(-0.8, 0.1, n)),
         "gains_theta": (("sample", "candidate"), rng.normal([0.3, 0.6], 0.1, (n, 2))),
         "gains_rho": ("sample", rng.uniform(0.6, 0.9, n)),
         "gains_tau": ("sample", rng.uniform(0.1, 0.4, n)),
         "gains_repeats": ("candidate", np.array([0.0, 2.0]))},
        coords={"candidate": ["a", "b"]})


def test_mean_gain_integrates_out_run_noise():
    b = _fake_belief()
    mean = mean_gain_draws(b)
    i = 7
    eta, tau, rho = (float(b[v][i]) for v in ("gains_eta", "gains_tau", "gains_rho"))
    z = np.random.default_rng(1).standard_normal(100_000)
    for j, k in enumerate((0, 2)):
        theta = float(b["gains_theta"][i, j])
        mc = np.mean(expit(eta + theta * rho**k + tau * z)) - expit(eta)
        assert mean.values[i, j] == pytest.approx(mc, abs=1e-3)
    with pytest.raises(InputError, match="joint draws"):
        mean_gain_draws(b.drop_vars("gains_tau"))


def test_binomial_interval_and_exact_cp_coverage():
    lo, hi = binomial_interval(90, 100)
    assert lo == pytest.approx(0.8238, abs=1e-3) and hi == pytest.approx(0.9510, abs=1e-3)
    assert binomial_interval(0, 10)[0] == 0.0
    for n in (10, 40, 150):
        for p in (0.001, 0.01, 0.03, 0.1, 0.3):
            assert cp_exact_coverage(p, n, 0.05) >= 0.95
    table = coverage_table(pd.DataFrame({"hit": [True] * 9 + [False], "g": [0, 1] * 5}),
                           "hit", "g")
    assert table["hits"].tolist() == [5, 4] and table["n"].tolist() == [5, 5]


def test_cp_bench_coverage_rows():
    bench = cp_bench_coverage([0, 1], 2)
    assert len(bench) == 2 * 2 * 5  # five hardware candidates with bench runs
    assert (bench["ucb_cp"] >= bench["unsafe"] / bench["executions"]).all()


def test_world_coverage_refuses_bad_settings(fitter):
    with pytest.raises(InputError, match="checkpoints"):
        run_world_coverage(fitter, [0], checkpoints=(99,))
    with pytest.raises(InputError, match="level"):
        run_world_coverage(fitter, [0], level=1.5)
    with pytest.raises(InputError, match="unknown candidates"):
        run_world_coverage(fitter, [0], sequence=("nope",), checkpoints=(1,))


# -- slow ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world_run(fitter):
    return run_world_coverage(fitter, WORLDS, seed=9)


def _show(title: str, table) -> None:
    print(f"\n{title}")
    for r in table.itertuples():
        print(f"  {r.group!s:>14}: {r.hits}/{r.n} = {r.coverage:.3f} "
              f"[{r.ci_low:.3f}, {r.ci_high:.3f}]")


@pytest.mark.slow
def test_gain_intervals_cover_world_truth(world_run):
    gains = world_run.gains.assign(executed=world_run.gains["executed_before"] > 0)
    for col in ("covered_mean", "covered_pred"):
        _show(f"{col} (95 % CP intervals)", coverage_table(gains, col))
        for by in ("candidate", "checkpoint", "executed"):
            _show(f"{col} per {by}", coverage_table(gains, col, by))
    for col, what in (("covered_mean", "mean gain vs expected gain"),
                      ("covered_pred", "predictive gain vs realised gain")):
        rate = coverage_table(gains, col, level=LEVEL).iloc[0]
        assert rate.ci_high >= 0.90, (
            f"90 % intervals of the {what} under-cover: {rate.coverage:.3f} "
            f"[{rate.ci_low:.3f}, {rate.ci_high:.3f}] (99 % CI)")
    # where the world executed m before, m's own evidence dominates its interval
    # With order effects (on by default since issue 16) an executed candidate's interval also
    # carries the prior of γ_{a→m} for every actor a that ran since m's own executions; the
    # worlds leave most pairs at γ = 0, so these intervals over-cover (measured 157/160 =
    # 0.981, 99 % CI [0.933, 0.998]; without order effects they were nominal).  Only
    # under-coverage is asserted here; the over-coverage is reported as a finding.
    own = coverage_table(gains[gains["executed"]], "covered_mean", level=LEVEL).iloc[0]
    assert own.ci_high >= 0.90, (
        f"90 % intervals of the mean gain, candidates executed before, under-cover: "
        f"{own.coverage:.3f} [{own.ci_low:.3f}, {own.ci_high:.3f}] (99 % CI)")


@pytest.mark.slow
def test_mean_gain_over_covers_where_priors_dominate(world_run):
    """The known departure from nominal, asserted where it comes from.

    Intervals of candidates the world has not executed yet rest on priors wider than the
    worlds' spread of gains, so they over-cover: the lower end of the 99 % CI of their rate
    lies above 0.90 (measured 194/200 = 0.970, CI [0.924, 0.992]).  The pooled rate over all
    rows mixes these with the nominal executed rows and sits at the edge (338/360 = 0.939, CI
    [0.899, 0.967]), so it is not asserted either way (a strict xfail on it flipped with the
    fits' Monte Carlo error).
    """
    gains = world_run.gains
    fresh = coverage_table(gains[gains["executed_before"] == 0], "covered_mean",
                           level=LEVEL).iloc[0]
    assert fresh.ci_low > 0.90, (
        f"90 % intervals of the mean gain, candidates not executed yet: {fresh.coverage:.3f} "
        f"[{fresh.ci_low:.3f}, {fresh.ci_high:.3f}] (99 % CI) no longer over-cover; revisit "
        "the calibration report")
    # the same departure in the PIT (share of mean-gain draws ≤ the truth): uniform when
    # calibrated (sd 1/√12 = 0.289, its sample sd's standard error ≈ 0.009 over these ~200
    # rows), piled up about 0.5 when the intervals are too wide (measured on 20 worlds at
    # checkpoint 0: sd 0.074, interval width 0.76 against the worlds' spread of true gains,
    # sd 0.02–0.05)
    pit = gains.loc[gains["executed_before"] == 0, "pit_mean"]
    assert pit.between(0.0, 1.0).all()
    assert pit.std() < 0.2, f"PIT sd {pit.std():.3f}: no longer over-dispersed; revisit"


@pytest.mark.slow
def test_clopper_pearson_gate_covers_true_risk(world_run):
    gate, delta = world_run.gate, world_run.delta
    _show("gate CP bound (95 % CP intervals)", coverage_table(gate, "covered_cp"))
    _show("gate posterior bound", coverage_table(gate, "covered_posterior"))
    _show("gate posterior bound per candidate",
          coverage_table(gate, "covered_posterior", "candidate"))
    cp = coverage_table(gate, "covered_cp", level=LEVEL).iloc[0]
    assert cp.ci_high >= 1 - delta, f"CP bound covers only {cp.coverage:.3f}"
    exact = [cp_exact_coverage(p, int(n), delta)
             for p, n in gate[["p_true", "executions"]].drop_duplicates().to_numpy()]
    assert min(exact) >= 1 - delta - 1e-9
    runs = cp_bench_coverage(range(100), 10, delta)
    _show("CP bound on simulated bench runs", coverage_table(runs, "covered_cp"))
    bench = coverage_table(runs, "covered_cp", level=LEVEL).iloc[0]
    assert bench.ci_high >= 1 - delta, f"CP bound on bench runs covers {bench.coverage:.3f}"


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="hierarchical shrinkage: the posterior bound of the "
                   "riskiest arm candidate (ft_real_100) falls below its true p_unsafe more "
                   "often than δ on varied worlds; the gate's default method is the anytime bound")
def test_posterior_gate_bound_covers_every_candidate(world_run):
    per = coverage_table(world_run.gate, "covered_posterior", "candidate", level=LEVEL)
    worst = per.loc[per["coverage"].idxmin()]
    assert worst.ci_high >= 1 - world_run.delta, (
        f"posterior bound of {worst.group} covers {worst.coverage:.3f} "
        f"[{worst.ci_low:.3f}, {worst.ci_high:.3f}] < {1 - world_run.delta}")
