"""CVU for 20 candidates: the new estimators against today's (issue 17), in the same run.

Part 1 — the fitted gains model.  20 candidates (16 adaptations over four lenses, 4 diagnoses
that inform one adaptation each), 2000 joint posterior draws (1000 × 2 chains).  Timed, best
of 3, on all 20 candidates at the default settings:

- *today's*: the estimator before issue 17, copied here verbatim as :func:`baseline_cvu`
  (ArviZ's per-row PSIS, plain mean of G0 over J = 256 outcomes, MCSE = sd(G0_j)/√J);
- *new*: :func:`belief.decision.cvu.cvu_for_state` at the default ``CVUSettings`` (PSIS with
  control variates where the weights can be trusted, regression otherwise; J = 256).

It prints the wall time of both and their ratio, every candidate's CVU ± MCSE under both and
the new draws error (the error of the 2000 draws, which neither more outcomes nor control
variates remove), the estimator chosen and the median MCSE ratio.  With ``--threads 1`` BLAS
is limited to one thread while timing (threadpoolctl), which matters on a loaded 2-core
machine: numpy's matrix products on (256 × 2000) arrays are then ~20× faster than with the
default thread pool.

Part 2 — the accuracy target on a zero-cost normal–normal study with closed-form EVSI
(Δ ~ N(1, 1) on S = 2000 draws, study of n observations with σ = 1, act on Δ or do nothing):
CVU against EVSI(n) for n = 1 … 10⁶ at the default settings, today's MCSE beside the new one
(the target: within 3 total standard errors at every n, MCSE ≤ 10 % of EVSI at n = 1).

With ``--refits N`` it also times N exact nested refits (re-sampling the compiled gains model
on the evidence plus a simulated outcome) and scales them to J outcomes per candidate.

Part 3 (``--calibration SEEDS``) — the reported MCSE against the spread of CVU over seeds of
outcomes, the draws fixed (normal cases and four gains-model candidates).

    uv run python benchmarks/bench_cvu.py [--outcomes 256] [--threads 1] [--belief FILE]
        [--calibration 40] [--refits 3]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from arviz_stats.base import array_stats
from scipy import stats

from belief.decision.cvu import CVUProblem, Scoring, continuation_value, cvu_for_state
from belief.decision.feasibility import affordable, feasibility
from belief.decision.functionals import Mean, weighted_columns
from belief.decision.scores import g0
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.evidence import Evidence
from belief.inputs.resources import make_budget
from belief.posterior.experiments import Experiment, experiments_from_belief
from belief.posterior.fitter import BeliefFitter, FitSettings
from belief.posterior.refit import exact_refit

LENSES = ("model", "data", "representation", "optimization")


def twenty_candidates():
    cands = []
    for i in range(16):
        lens = LENSES[i % 4]
        cands.append({"id": f"a{i:02d}", "role": "adaptation", "lens": lens,
                      "method": f"{lens[:3]}{i // 8}", "repeatable": i % 3 == 0,
                      "cost": {"real_h": 0.5 * (i % 3), "compute": 5.0 + 3 * i,
                               "eng_h": 0.5 + (i % 5)}})
    for i in range(4):
        cands.append({"id": f"d{i}", "role": "diagnosis", "lens": LENSES[i],
                      "method": "pilot", "informs": [f"a{4 * i + 1:02d}"],
                      "measurement_se": 0.2, "cost": {"real_h": 0.2, "eng_h": 0.5}})
    return candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": cands})


def evidence(cs, rng):
    rows, policy, p = [], "pi0", 0.3
    for step, m in enumerate(["a00", "a05", "a10", "a03", "a12", "a07"]):
        new = min(0.95, p + rng.uniform(0.0, 0.08))
        rows.append({"step": step, "candidate": m, "policy": policy, "eval_protocol": "E",
                     "control_successes": rng.binomial(100, p), "control_trials": 100,
                     "treated_successes": rng.binomial(100, new), "treated_trials": 100,
                     "treated_policy": f"pi{step + 1}"})
        policy, p = f"pi{step + 1}", new
    return Evidence(cs, paired=pd.DataFrame(rows)), policy


def baseline_cvu(gain_now, experiments, candidate_ids, costs, budget, weights, functional,
                 *, available, repeatable, safe, feasible, n_outcomes=256, seed=0,
                 chunk=64):
    """Today's estimator (before issue 17), verbatim but for the refit branch: ArviZ PSIS
    per row, CVU = mean_j G0_j − G0(s^∅), MCSE = sd(G0_j)/√J."""
    n_s, n_c = gain_now.shape
    lam_now = np.asarray(weights(budget), float)
    phi_now = functional(gain_now.T)
    g0_null = float(g0(phi_now - costs @ lam_now, feasible))
    cvu, mcse = np.full(n_c, np.nan), np.full(n_c, np.nan)
    for c, cid in enumerate(candidate_ids):
        exp = experiments.get(cid)
        if exp is None:
            continue
        b_next = budget - costs[c]
        c_lam_next = costs @ np.asarray(weights(b_next), float)
        avail_next = available.copy()
        if not repeatable[c]:
            avail_next[c] = False
        feasible_next = avail_next & safe & affordable(costs, b_next)
        next_gain = np.asarray(exp.next_gain, float)
        if exp.simulate is None:
            cvu[c] = float(g0(functional(next_gain.T) - c_lam_next, feasible_next)) - g0_null
            mcse[c] = 0.0
            continue
        rng = np.random.default_rng([seed, 101, c])
        idx = np.random.default_rng([seed, 100]).integers(0, n_s, n_outcomes)
        y = exp.simulate(rng, idx)
        g0_j = np.empty(n_outcomes)
        for start in range(0, n_outcomes, chunk):
            sl = slice(start, start + chunk)
            with np.errstate(over="ignore", invalid="ignore"):
                lw, _ = array_stats.psislw(-exp.loglik(y[sl]), r_eff=1, axis=-1)
            w = np.exp(lw - lw.max(axis=-1, keepdims=True))
            phi = weighted_columns(functional, next_gain, w)
            g0_j[sl] = g0(phi - c_lam_next[None, :], feasible_next[None, :])
        cvu[c] = g0_j.mean() - g0_null
        mcse[c] = g0_j.std(ddof=1) / np.sqrt(n_outcomes)
    return cvu, mcse


def blas_threads(n: int | None):
    """A context limiting BLAS to ``n`` threads (threadpoolctl), or a no-op."""
    if n is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def best_of(f, repeats=3):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return min(times), times, out


def gains_model_part(args) -> None:
    cs = twenty_candidates()
    t0 = time.perf_counter()
    if args.belief and Path(args.belief).exists():
        belief = xr.load_dataset(args.belief)
        policy = belief.attrs["policy"]
        fit_note = f"loaded from {args.belief}"
    else:
        ev, policy = evidence(cs, np.random.default_rng(0))
        fitter = BeliefFitter(cs, FitSettings(draws=1000, tune=1000, chains=2))
        _, belief = fitter.fit(ev, policy, step=6, seed=0)
        fit_note = f"fit {time.perf_counter() - t0:.1f} s incl. compile"
        if args.belief:
            belief.to_netcdf(args.belief)
    budget = make_budget({"real_h": 10, "compute": 200, "eng_h": 20}, cs.resources)
    state = State(step=6, budget=budget, policy=policy, belief=belief)
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    decision = DecisionSettings(weights=weights, beta=1.0, horizon=20,
                                cvu=CVUSettings(n_outcomes=args.outcomes, seed=1))

    # today's estimator, on the same experiments, feasibility and outcomes' seed
    ids = cs.ids
    costs = cs.costs().values
    b = budget.sel(resource=list(cs.resources)).values.astype(float)
    feas = feasibility(state, cs, decision.gate, costs, b)
    exps = experiments_from_belief(belief, cs, decision.cvu.trials)
    exps = {k: v for k, v in exps.items() if feas.feasible[ids.index(k)]}
    gain_now = belief["gain"].transpose("sample", "candidate").values
    lam = decision.weights.bind(cs.resources, state)

    def today():
        return baseline_cvu(gain_now, exps, ids, costs, b, lam, decision.functional,
                            available=feas.available,
                            repeatable=np.array([c.repeatable for c in cs]), safe=feas.safe,
                            feasible=feas.feasible, n_outcomes=args.outcomes, seed=1)

    def new():
        return cvu_for_state(state, cs, decision, experiments=exps, scoring=Scoring(feas=feas))

    with blas_threads(args.threads):
        new()  # warm-up
        t_old, old_times, (cvu_old, mcse_old) = best_of(today)
        t_new, new_times, res = best_of(new)
        tracemalloc.start()  # separate run: tracing slows numpy's allocations
        new()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    x = np.random.default_rng(0).random(10**6)
    t0 = time.perf_counter()
    for _ in range(10):
        np.exp(x)
    print(f"machine: np.exp of 10^6 doubles {(time.perf_counter() - t0) * 100:.1f} ms "
          f"(~2-4 ms on an idle laptop core; the machine is shared)")
    print(f"belief: {belief.sizes['sample']} joint draws x {belief.sizes['candidate']} "
          f"candidates ({fit_note}); J = {args.outcomes} outcomes per candidate; BLAS threads: "
          f"{args.threads or 'default'}")
    print(f"today's CVU (ArviZ PSIS, plain mean), all {len(ids)} candidates: {t_old:6.2f} s "
          f"wall, best of 3 [{', '.join(f'{t:.2f}' for t in old_times)}]")
    print(f"new CVU (PSIS+CV / regression), all {len(ids)} candidates:     {t_new:6.2f} s "
          f"wall, best of 3 [{', '.join(f'{t:.2f}' for t in new_times)}]   (target <= 1 s)")
    print(f"speed ratio today / new: {t_old / t_new:5.2f}x; peak traced memory of the new CVU "
          f"(tracemalloc, separate run): {peak / 2**20:.1f} MiB (target < 1024 MiB)")
    table = pd.DataFrame({
        "cvu_today": cvu_old, "mcse_today": mcse_old, "cvu_new": res["cvu"].values,
        "mcse_new": res["cvu_mcse"].values, "draws_se_new": res["cvu_draws_se"].values,
        "method": res["cvu_method"].values, "k_max": res["pareto_k"].values,
        "bad": res["pareto_k_bad"].values, "cv_gain": res["cvu_cv_gain"].values},
        index=pd.Index(ids, name="candidate"))
    with pd.option_context("display.width", 160, "display.max_columns", 20,
                           "display.float_format", "{:.4f}".format):
        print(table)
    scored = table[table.mcse_today > 0]
    ratio = (scored.mcse_new / scored.mcse_today).median()
    print(f"median MCSE ratio new / today over the {len(scored)} candidates with an outcome: "
          f"{ratio:.3f}; methods: {table.method.value_counts().to_dict()}")
    diff = (table.cvu_new - table.cvu_today) / np.hypot(table.mcse_today, table.mcse_new)
    print(f"new − today in units of their joint MCSE: max |z| = {np.nanmax(np.abs(diff)):.2f}")
    print(f"median error of the draws / new MCSE: "
          f"{(scored.draws_se_new / scored.mcse_new).median():.1f}  (the draws' error dominates)")
    # the second estimator on the same candidates: both target E_Y[G0] under the same draws,
    # so their difference is judged by the outcome errors alone
    reg = cvu_for_state(state, cs, decision.replace(cvu=CVUSettings(
        n_outcomes=args.outcomes, seed=1, estimator="regression")), experiments=exps,
        scoring=Scoring(feas=feas))
    z = (reg["cvu"] - res["cvu"]) / np.hypot(reg["cvu_mcse"], res["cvu_mcse"])
    print(f"regression forced on all 20: max |CVU_reg − CVU_psis| = "
          f"{float(np.abs(reg['cvu'] - res['cvu']).max()):.5f}, max |z| (outcome errors) = "
          f"{float(np.abs(z).max()):.2f}, median regression MCSE "
          f"{float(reg['cvu_mcse'].median()):.5f}")
    if args.refits:
        nested_refits(args, cs, belief, state, decision, t_new, res)


def nested_refits(args, cs, belief, state, decision, t_new, res) -> None:
    """Exact nested refits timed on a few outcomes and scaled to J outcomes per candidate with
    an outcome (the same outcome count as PSIS)."""
    from models import gains

    ev, _ = evidence(cs, np.random.default_rng(0))
    fitter = BeliefFitter(cs, FitSettings(draws=1000, tune=1000, chains=2))
    refit = exact_refit(fitter, ev, state, trials=decision.cvu.trials, seed=3, draws=1000)
    draws = belief[gains.decision_vars(belief)]
    ys = gains.simulate(draws, "a02", np.random.default_rng(2), np.arange(args.refits), 100)
    refit("a02", ys[0])  # compile
    t0 = time.perf_counter()
    for y in ys:
        refit("a02", y)
    per_refit = (time.perf_counter() - t0) / args.refits
    n_with_outcome = int((res["cvu_method"] != "no outcome").sum())
    nested_s = per_refit * args.outcomes * n_with_outcome
    print(f"one exact refit (1000 draws x 2 chains, mean of {args.refits}): {per_refit:.2f} s; "
          f"nested refits for {n_with_outcome} candidates x {args.outcomes} outcomes: "
          f"{nested_s:.0f} s (extrapolated); speed-up of the new CVU: {nested_s / t_new:.0f}x "
          f"(target >= 50x)")


def normal_part(args) -> None:
    mu0, sd0, sigma, n_draws = 1.0, 1.0, 1.0, 2000
    rng = np.random.default_rng(7)
    delta = mu0 + sd0 * rng.standard_normal(n_draws)
    gain = np.stack([delta, np.zeros_like(delta)], -1)
    fn = Mean()
    print(f"\nnormal–normal, Δ ~ N({mu0:g}, {sd0:g}²) on {n_draws} iid draws, σ = {sigma:g}, "
          f"default settings (J = {args.outcomes})")
    print(f"{'n':>8s} {'EVSI':>8s} {'today':>8s} {'MCSE':>8s} {'%EVSI':>6s} {'new':>8s} "
          f"{'MCSE':>8s} {'%EVSI':>6s} {'draws se':>8s} {'z':>6s}  method")
    for n in (1, 10, 100, 1e4, 1e6):
        se = sigma / np.sqrt(n)
        s = np.sqrt(sd0**4 / (sd0**2 + sigma**2 / n))
        u = abs(mu0) / s
        exact = s * (stats.norm.pdf(u) - u * stats.norm.sf(u))
        exp = Experiment(
            next_gain=gain,
            simulate=lambda r, idx, se=se: delta[idx] + se * r.standard_normal(len(idx)),
            loglik=lambda y, se=se: stats.norm.logpdf(y[:, None], delta[None, :], se))
        common = {"available": np.ones(2, bool), "repeatable": np.ones(2, bool),
                  "safe": np.ones(2, bool), "feasible": np.ones(2, bool)}
        old, old_se = baseline_cvu(gain, {"observe": exp}, ["act", "observe"],
                                   np.zeros((2, 1)), np.ones(1), lambda b: np.zeros(1), fn,
                                   n_outcomes=args.outcomes, seed=3, **common)
        res = continuation_value(CVUProblem(
            gain, {"observe": exp}, ["act", "observe"], np.zeros((2, 1)),
                                 np.ones(1), lambda b: np.zeros(1), fn,
                                 settings=CVUSettings(n_outcomes=args.outcomes, seed=3),
                                 **common)).sel(candidate="observe")
        z = (float(res["cvu"]) - exact) / float(res["cvu_se"])
        print(f"{n:8g} {exact:8.4f} {old[1]:8.4f} {old_se[1]:8.4f} {old_se[1] / exact:6.1%} "
              f"{float(res['cvu']):8.4f} {float(res['cvu_mcse']):8.5f} "
              f"{float(res['cvu_mcse']) / exact:6.1%} {float(res['cvu_draws_se']):8.4f} "
              f"{z:+6.2f}  {res['cvu_method'].item()}")


def calibration_part(args) -> None:
    """The reported MCSE against the spread over ``--calibration`` seeds of outcomes (the draws
    fixed): normal–normal at n = 1 and 10 (μ0 = 0, 1) and, with the fitted belief, four of
    the 20 candidates.  A calibrated MCSE has rms(MCSE)/sd ≈ 1 (± ~1/√(2·seeds))."""
    seeds = args.calibration
    rng = np.random.default_rng(11)
    print(f"\ncalibration of the new MCSE over {seeds} seeds of outcomes (draws fixed)")
    print(f"{'case':28s} {'mean CVU':>10s} {'sd':>9s} {'rms MCSE':>9s} {'ratio':>6s}  method")
    for mu0, n in [(1.0, 1), (0.0, 1), (1.0, 10), (0.0, 10)]:
        delta = mu0 + rng.permutation(stats.norm.ppf((np.arange(2000) + 0.5) / 2000))
        gain = np.stack([delta, np.zeros_like(delta)], -1)
        se = 1 / np.sqrt(n)
        exp = Experiment(
            next_gain=gain,
            simulate=lambda r, idx, se=se, d=delta: d[idx] + se * r.standard_normal(len(idx)),
            loglik=lambda y, se=se, d=delta: stats.norm.logpdf(y[:, None], d[None, :], se))
        rows = [continuation_value(CVUProblem(
            gain, {"o": exp}, ["a", "o"], np.zeros((2, 1)), np.ones(1),
                                   lambda b: np.zeros(1), Mean(),
                                   settings=CVUSettings(n_outcomes=args.outcomes, seed=k)
                                   )).sel(candidate="o") for k in range(seeds)]
        _calibration_row(f"normal mu0={mu0:g} n={n:g}", rows)
    if args.skip_model:
        return
    cs = twenty_candidates()
    belief = xr.load_dataset(args.belief)
    budget = make_budget({"real_h": 10, "compute": 200, "eng_h": 20}, cs.resources)
    state = State(step=6, budget=budget, policy=belief.attrs["policy"], belief=belief)
    decision = DecisionSettings(weights={"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004},
                                beta=1.0, horizon=20)
    exps = experiments_from_belief(belief, cs, decision.cvu.trials)
    for cid in ("a02", "a06", "d1", "d3"):
        rows = [cvu_for_state(state, cs, decision.replace(cvu=CVUSettings(
            n_outcomes=args.outcomes, seed=k)), experiments={cid: exps[cid]}).sel(candidate=cid)
            for k in range(seeds)]
        _calibration_row(f"gains model {cid}", rows)


def _calibration_row(name, rows) -> None:
    v = np.array([float(r["cvu"]) for r in rows])
    m = np.array([float(r["cvu_mcse"]) for r in rows])
    sd = v.std(ddof=1)
    rms = np.sqrt(np.mean(m**2))
    print(f"{name:28s} {v.mean():10.5f} {sd:9.5f} {rms:9.5f} {rms / sd if sd else np.nan:6.2f}"
          f"  {rows[0]['cvu_method'].item()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcomes", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS threads while timing (threadpoolctl)")
    parser.add_argument("--belief", default=None,
                        help="netCDF file caching the fitted belief (written if absent)")
    parser.add_argument("--skip-model", action="store_true", help="only the normal part")
    parser.add_argument("--refits", type=int, default=0,
                        help="time this many exact nested refits (0: skip)")
    parser.add_argument("--calibration", type=int, default=0,
                        help="seeds for the MCSE calibration (0: skip; needs --belief)")
    args = parser.parse_args()
    if not args.skip_model:
        gains_model_part(args)
    normal_part(args)
    if args.calibration:
        with blas_threads(args.threads):
            calibration_part(args)


if __name__ == "__main__":
    main()
