"""Real trials needed to reach a fixed posterior interval width of a candidate's real gain, with
simulated paired evaluations against without (:mod:`models.sim_proxy`), at sim–real
correlations 0.9, 0.6 and 0.

World (per seed): 12 candidates in 3 lenses (4 each), real logit gains θ ~ N(0.3, 0.5²).
Sim gains θ^sim = 0.1 + θ + σ ε with σ = 0.5 √(1/ρ² − 1), so corr(θ^sim, θ) = ρ; at ρ = 0
θ^sim ~ N(0.3, 0.5²) independent of θ.  9 *calibration* candidates have 150 real trials per arm;
the 3 *target* candidates (one per lens) have n real trials per arm, n in ``--grid``; every
candidate has 1000 sim trials per arm.  Real control logit −0.4, sim control logit 0.3.

Measured: the 90 % central interval width of the targets' θ (mean over targets and seeds) at
each n, with the sim table and without it (same real table, same compiled model); the width W
to reach is the real-only width at ``--n-ref`` trials; the trials needed to reach W are
interpolated on log n against log width (linear between grid points; "< min" when the first
grid point is already narrower).  Printed: trials without, trials with, their ratio, per ρ,
and the share of fits meeting R-hat ≤ 1.01, ESS ≥ 400, 0 divergences.

Measured 2026-12-07 (``--seeds 3``, 317 s, 48/48 fits converged): target width 0.822; real
trials needed with sim / without: 0.58 at ρ = 0.9, 1.00 at ρ = 0.6, 0.90 at ρ = 0 (three seeds:
the last is noise, not information — see docs/explanation/sim-proxy.md).

``--coverage N``: coverage of the targets' 90 % intervals of θ over N data sets per ρ (targets
with ``--n-target`` real trials per arm, default 15), Clopper–Pearson 95 % intervals, and the
convergence of every fit.  The data are generated trial by trial (:func:`unit_data`): every real
trial has a paired sim trial, their outcomes coupled by a Gaussian copula of correlation ρ, so
that ``--ppi`` can run prediction-powered inference (``ppi_py.ppi_mean_ci``, PPI++, on each arm,
delta method to the logit gain, :func:`ppi_logit_gain`) and its λ = 0 case (classical, real
trials only) on the same data.  The model sees every candidate's counts but not the pairing;
PPI sees the pairing of one target's trials but not the other candidates.

Measured 2026-12-08 (``--coverage 100 --ppi --draws 500 --tune 500``, 3409 s): coverage
(covered/300) and mean width of the 90 % interval —

    ρ     model + sim           PPI++                 classical (real only)
    0.9   266 (0.887)  0.887    263 (0.877)  1.385    273 (0.910)  1.837
    0.6   264 (0.880)  1.142    267 (0.890)  1.660    273 (0.910)  1.837
    0     260 (0.867)  1.181    269 (0.897)  1.807    273 (0.910)  1.837

every Clopper–Pearson interval contains 0.90 (the widest miss, 0.867 at ρ = 0, has
[0.823, 0.903]); fits meeting R-hat ≤ 1.01, ESS ≥ 400, no divergence: 93, 82, 82 of 100 (500
draws per chain; the misses have ESS 216–400 or R-hat ≤ 1.029), 1 divergence in 300 fits.
The model without the sim table (``--coverage 100 --real-only --no-sim --draws 500 --tune 500``,
276 s): 263/300 (0.877), width 1.248; one fit of 100 (data set 75) has a stuck chain (R-hat
1.53, every draw of that chain divergent; also at 1000 + 1000 draws).
    uv run python benchmarks/bench_sim_proxy.py [--seeds 2] [--grid 5,15,45,135] [--n-ref 45]
    uv run --group compare python benchmarks/bench_sim_proxy.py --coverage 100 --ppi
    (options: --draws 500 --tune 500, --real-only [--no-sim], --out intervals.csv)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

LENSES = ("data", "model", "optimization")
TARGETS = ("dat3", "mod3", "opt3")


def candidate_set():
    from belief.inputs.candidates import candidates_from_dict

    cands = [{"id": f"{lens[:3]}{j}", "role": "adaptation", "lens": lens,
              "method": f"m{j % 2}", "cost": {"real_h": 1.0}}
             for lens in LENSES for j in range(4)]
    return candidates_from_dict({"campaign": {"eval_protocol": "bench"}, "candidate": cands})


def _sim_gains(theta: dict, rho: float, rng: np.random.Generator) -> dict:
    """True sim logit gains with correlation ρ to the real gains θ (s.d. 0.5): independent
    draws of the same prior at ρ = 0, else 0.1 + θ_m + noise of s.d. 0.5·√(1/ρ² − 1)."""
    if rho == 0:
        return dict(zip(theta, rng.normal(0.3, 0.5, len(theta)), strict=True))
    sd = 0.5 * np.sqrt(1.0 / rho**2 - 1.0)
    return {m: 0.1 + g + sd * rng.normal() for m, g in theta.items()}


def tables(seed: int, rho: float, n_target: int, cs):
    """The real table (depends on seed and n only) and the sim table (seed and ρ)."""
    from belief.inputs.tables import validate_paired, validate_sim_paired
    from models.sim_proxy import synthetic_paired

    ids = [c.id for c in cs]
    rng = np.random.default_rng([seed, 0])
    theta = dict(zip(ids, rng.normal(0.3, 0.5, len(ids)), strict=True))
    calib = {m: g for m, g in theta.items() if m not in TARGETS}
    real = pd.concat([
        synthetic_paired(calib, -0.4, 150, np.random.default_rng([seed, 1]),
                         eval_protocol="bench"),
        synthetic_paired({m: theta[m] for m in TARGETS}, -0.4, n_target,
                         np.random.default_rng([seed, 2, n_target]), eval_protocol="bench",
                         step=1)], ignore_index=True)
    srng = np.random.default_rng([seed, 3, round(rho * 100)])
    sim_gain = _sim_gains(theta, rho, srng)
    sim = synthetic_paired(sim_gain, 0.3, 1000, srng, eval_protocol="bench")
    return validate_paired(real, cs), validate_sim_paired(sim, cs)


FAILED: list[str] = []


def width_and_ok(idata, label: str) -> tuple[float, bool]:
    """Mean 90 % width of the targets' θ, and whether the fit meets the convergence standard
    on every free quantity of interest (θ, θ^sim, the calibration); failures are listed."""
    import arviz as az

    th = idata["posterior"]["theta"].sel(candidate=list(TARGETS))
    q = th.quantile([0.05, 0.95], dim=("chain", "draw"))
    width = float((q.sel(quantile=0.95) - q.sel(quantile=0.05)).mean())
    names = [v for v in ("theta", "theta_sim", "a", "b", "sigma")
             if v in idata["posterior"].data_vars]
    s = az.summary(idata, var_names=names)
    rhat, ess = float(s["r_hat"].max()), float(min(s["ess_bulk"].min(), s["ess_tail"].min()))
    div = int(idata["sample_stats"]["diverging"].sum())
    ok = rhat <= 1.01 and ess >= 400 and div == 0
    if not ok:
        FAILED.append(f"{label}: R-hat {rhat:.4f}, min ESS {ess:.0f}, divergences {div}")
    return width, ok


def trials_for(width: float, grid: list[int], widths: list[float]) -> float:
    """n at which the width reaches ``width`` (log–log interpolation on the grid)."""
    lw, ln = np.log(widths), np.log(grid)
    if widths[0] <= width:
        return float("-inf")  # already narrower at the first grid point
    for i in range(len(grid) - 1):
        if widths[i + 1] <= width:
            t = (np.log(width) - lw[i]) / (lw[i + 1] - lw[i])
            return float(np.exp(ln[i] + t * (ln[i + 1] - ln[i])))
    return float("inf")


# -- coverage and prediction-powered inference ------------------------------------------------
SIM_TRIALS = 1000
REAL_CALIB_TRIALS = 150
Z90 = 1.6448536269514722  # Φ⁻¹(0.95)


def unit_data(seed: int, rho: float, n_target: int, cs):
    """Trial-level outcomes of one data set, the model's tables aggregated from them, the truth.

    Gains and calibration as :func:`tables` (θ depends on the seed only).  Each trial is a unit
    with a real and a sim outcome coupled by a Gaussian copula of correlation ``rho`` (the same
    number as the gains' correlation): Z_real ~ N(0, 1), Z_sim = ρ Z_real + √(1 − ρ²) Z',
    outcome = 1[Z < Φ⁻¹(p)], so each domain's outcomes are exactly Bernoulli(p) with the model's
    p (the counts are binomial).  Every real trial (both arms, every candidate) has a paired sim
    trial: the first n_real of the row's ``SIM_TRIALS`` sim trials per arm; the others are
    unpaired.  The real outcomes depend on the seed and n only, not on ρ.

    Returns
    -------
    real, sim : validated tables (what the model sees: counts per row and arm)
    units : dict candidate → dict arm ("ctrl", "trt") → (real outcomes (n_real,), sim outcomes
        (SIM_TRIALS,)), the first n_real sim outcomes paired with the real ones
    theta : dict candidate → true real logit gain
    """
    from scipy.special import expit
    from scipy.stats import norm

    from belief.inputs.tables import validate_paired, validate_sim_paired

    ids = [c.id for c in cs]
    theta = dict(zip(ids, np.random.default_rng([seed, 0]).normal(0.3, 0.5, len(ids)),
                     strict=True))
    sim_gain = _sim_gains(theta, rho, np.random.default_rng([seed, 3, round(rho * 100)]))
    rrng = np.random.default_rng([seed, 4, n_target])
    crng = np.random.default_rng([seed, 5, n_target, round(rho * 100)])
    units, real_rows, sim_rows = {}, [], []
    for m in ids:
        n_real = n_target if m in TARGETS else REAL_CALIB_TRIALS
        units[m] = {}
        for arm, real_logit, sim_logit in (("ctrl", -0.4, 0.3),
                                           ("trt", -0.4 + theta[m], 0.3 + sim_gain[m])):
            z_real = rrng.standard_normal(n_real)
            z_sim = crng.standard_normal(SIM_TRIALS)
            z_sim[:n_real] = rho * z_real + np.sqrt(1.0 - rho**2) * z_sim[:n_real]
            units[m][arm] = ((z_real < norm.ppf(expit(real_logit))).astype(float),
                             (z_sim < norm.ppf(expit(sim_logit))).astype(float))
        for rows, dom, n in ((real_rows, 0, n_real), (sim_rows, 1, SIM_TRIALS)):
            rows.append({"step": int(m in TARGETS), "candidate": m, "policy": "pi0",
                         "eval_protocol": "bench",
                         "control_successes": int(units[m]["ctrl"][dom].sum()),
                         "control_trials": n,
                         "treated_successes": int(units[m]["trt"][dom].sum()),
                         "treated_trials": n, "run_id": f"pi0/{m}/{dom}"})
    return (validate_paired(pd.DataFrame(real_rows), cs),
            validate_sim_paired(pd.DataFrame(sim_rows), cs), units, theta)


def _ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray,
              lam: float | None) -> tuple[float, float]:
    """(estimate, se) of a mean by ``ppi_py.ppi_mean_ci`` (a symmetric z-interval: est ± z·se)."""
    from ppi_py import ppi_mean_ci

    lo, hi = (float(np.squeeze(v)) for v in ppi_mean_ci(y, yhat, yhat_unlabeled, alpha=0.1,
                                                        lam=lam))
    return 0.5 * (lo + hi), (hi - lo) / (2.0 * Z90)


def ppi_logit_gain(units: dict, target: str, lam: float | None) -> tuple[float, float]:
    """90 % interval of a target's real logit gain by prediction-powered inference.

    Each arm's real success rate is a PPI mean (``ppi_mean_ci``): the labeled units are the real
    trials with their paired sim outcomes as predictions, the unlabeled ones the unpaired sim
    trials.  Treated arm: the target's own trials; control arm: every real control trial of the
    policy (every row, as the model's shared baseline η_π).  ``lam`` None is PPI++ (power-tuned
    λ), 0 the classical real-only CLT interval.  The logit gain and its se by the delta method:
    θ̂ = logit p̂_t − logit p̂_c, se² = se_t²/(p̂_t(1 − p̂_t))² + se_c²/(p̂_c(1 − p̂_c))²
    (arms on different units, independent); interval θ̂ ± z_0.95 se.
    """
    def split(pairs):
        real = np.concatenate([r for r, _ in pairs])
        paired = np.concatenate([s[:len(r)] for r, s in pairs])
        unpaired = np.concatenate([s[len(r):] for r, s in pairs])
        return real, paired, unpaired

    arms = {"trt": split([units[target]["trt"]]),
            "ctrl": split([u["ctrl"] for u in units.values()])}
    est, var = {}, 0.0
    for arm, (y, yhat, yhat_u) in arms.items():
        p, se = _ppi_mean(y, yhat, yhat_u, lam)
        n = len(y)
        p = float(np.clip(p, 0.5 / n, 1.0 - 0.5 / n))
        est[arm] = np.log(p) - np.log1p(-p)
        var += (se / (p * (1.0 - p))) ** 2
    g = est["trt"] - est["ctrl"]
    half = Z90 * np.sqrt(var)
    return g - half, g + half


def convergence(idata) -> tuple[float, float, int]:
    """(max R-hat, min bulk/tail ESS, divergences) over θ, θ^sim and the calibration."""
    import arviz as az

    names = [v for v in ("theta", "theta_sim", "a", "b", "sigma")
             if v in idata["posterior"].data_vars]
    s = az.summary(idata, var_names=names)
    return (float(s["r_hat"].max()), float(min(s["ess_bulk"].min(), s["ess_tail"].min())),
            int(idata["sample_stats"]["diverging"].sum()))


def run_coverage(n_sets: int, n_target: int, ppi: bool, real_only: bool, draws: int,
                 tune: int, out: str | None, no_sim: bool = False) -> None:
    """Coverage of the targets' real-gain 90 % intervals over ``n_sets`` data sets per ρ."""
    from scipy.stats import binomtest

    from models.sim_proxy import SimProxyModel

    if ppi:
        try:
            import ppi_py  # noqa: F401
        except ImportError:
            raise SystemExit("--ppi needs ppi_py: uv run --group compare python "
                             "benchmarks/bench_sim_proxy.py --coverage N --ppi") from None
    cs = candidate_set()
    model = SimProxyModel(cs, max_policies=1)
    settings = (0.9, 0.6, 0.0)
    rows, fits = [], []
    t0 = time.perf_counter()
    for seed in range(n_sets):
        for rho in settings:
            real, sim, units, theta = unit_data(seed, rho, n_target, cs)
            arms = ([] if no_sim else [("model + sim", sim)]) + (
                [("model, real only", None)] if real_only and rho == settings[0] else [])
            for label, sim_table in arms:
                t1 = time.perf_counter()
                idata = model.fit(real, sim_table, seed=seed, draws=draws, tune=tune)
                rhat, ess, div = convergence(idata)
                fits.append({"seed": seed, "rho": rho, "method": label, "rhat": rhat,
                             "ess": ess, "divergences": div,
                             "seconds": time.perf_counter() - t1})
                th = idata["posterior"]["theta"]
                for m in TARGETS:
                    lo, hi = (float(v) for v in th.sel(candidate=m).quantile(
                        [0.05, 0.95], dim=("chain", "draw")))
                    for r in ([rho] if sim_table is not None else list(settings)):
                        rows.append({"seed": seed, "rho": r, "target": m, "method": label,
                                     "truth": theta[m], "lo": lo, "hi": hi})
            if ppi:
                for m in TARGETS:
                    for label, lam in (("PPI++", None), ("classical", 0.0)):
                        lo, hi = ppi_logit_gain(units, m, lam)
                        rows.append({"seed": seed, "rho": rho, "target": m, "method": label,
                                     "truth": theta[m], "lo": lo, "hi": hi})
        per = float(np.median([f["seconds"] for f in fits]))  # the median skips the compile
        print(f"data set {seed + 1}/{n_sets}: {time.perf_counter() - t0:.0f} s, median "
              f"{per:.1f} s per fit, about {per * len(fits) * (n_sets / (seed + 1) - 1) / 60:.0f}"
              f" min to go", flush=True)
    df = pd.DataFrame(rows)
    df["covered"] = (df["lo"] <= df["truth"]) & (df["truth"] <= df["hi"])
    df["width"] = df["hi"] - df["lo"]
    fit_df = pd.DataFrame(fits)
    if out:
        df.to_csv(out, index=False)
        fit_df.to_csv(out.replace(".csv", "") + "_fits.csv", index=False)
    print(f"\ncoverage of the targets' real logit gain, 90 % intervals; {n_sets} data sets per "
          f"rho, {len(TARGETS)} targets each with {n_target} real trials per arm; "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'rho':>4} {'method':>17} {'covered':>9} {'coverage':>9} {'95% CP interval':>16} "
          f"{'mean width':>11}")
    for rho in settings:
        for label, g in df[df["rho"] == rho].groupby("method", sort=False):
            k, n = int(g["covered"].sum()), len(g)
            ci = binomtest(k, n).proportion_ci(0.95, method="exact")
            print(f"{rho:4.1f} {label:>17} {k:>4}/{n:<4} {k / n:9.3f} "
                  f"[{ci.low:.3f}, {ci.high:.3f}] {g['width'].mean():11.3f}")
    for label in ("model + sim", "model, real only"):
        sel = df[df["method"] == label]
        if len(sel):
            print(f"per target ({label}): " + "; ".join(
                f"rho {rho} " + ", ".join(f"{m} {int(g['covered'].sum())}/{len(g)}"
                                          for m, g in sel[sel["rho"] == rho].groupby("target"))
                for rho in settings))
    print("convergence (R-hat <= 1.01, bulk and tail ESS >= 400, 0 divergences):")
    for (rho, label), g in fit_df.groupby(["rho", "method"], sort=False):
        ok = ((g["rhat"] <= 1.01) & (g["ess"] >= 400) & (g["divergences"] == 0)).sum()
        print(f"  rho {rho:3.1f} {label:>17}: {ok}/{len(g)} fits; max R-hat "
              f"{g['rhat'].max():.4f}, min ESS {g['ess'].min():.0f}, divergences "
              f"{g['divergences'].sum()} in {(g['divergences'] > 0).sum()} fits; "
              f"{g['seconds'].mean():.1f} s per fit")


def main() -> None:
    from models.sim_proxy import SimProxyModel

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--grid", default="5,15,45,135")
    ap.add_argument("--n-ref", type=int, default=45)
    ap.add_argument("--coverage", type=int, metavar="N", default=0,
                    help="instead of the trials: coverage over N data sets per correlation")
    ap.add_argument("--n-target", type=int, default=15,
                    help="real trials per arm of each target (coverage)")
    ap.add_argument("--ppi", action="store_true",
                    help="with --coverage: prediction-powered inference (ppi_py) side by side")
    ap.add_argument("--real-only", action="store_true",
                    help="with --coverage: also the real-only fit of every data set")
    ap.add_argument("--no-sim", action="store_true",
                    help="with --coverage --real-only: skip the fits with sim data")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--out", help="with --coverage: write the intervals to this CSV")
    args = ap.parse_args()
    if args.coverage:
        run_coverage(args.coverage, args.n_target, args.ppi, args.real_only, args.draws,
                     args.tune, args.out, args.no_sim)
        return
    grid = [int(x) for x in args.grid.split(",")]
    if args.n_ref not in grid:
        raise SystemExit("--n-ref must be a grid point")
    cs = candidate_set()
    model = SimProxyModel(cs, max_policies=1)
    t0 = time.perf_counter()
    alone = {n: [] for n in grid}
    with_sim = {(rho, n): [] for rho in (0.9, 0.6, 0.0) for n in grid}
    fits = ok_fits = 0
    for seed in range(args.seeds):
        for n in grid:
            real, _ = tables(seed, 0.9, n, cs)
            w, ok = width_and_ok(model.fit(real, None, seed=seed),
                                 f"seed {seed}, n {n}, real only")
            alone[n].append(w)
            fits, ok_fits = fits + 1, ok_fits + ok
            for rho in (0.9, 0.6, 0.0):
                real, sim = tables(seed, rho, n, cs)
                w, ok = width_and_ok(model.fit(real, sim, seed=seed),
                                     f"seed {seed}, n {n}, rho {rho}")
                with_sim[(rho, n)].append(w)
                fits, ok_fits = fits + 1, ok_fits + ok
    w_alone = [float(np.mean(alone[n])) for n in grid]
    target = w_alone[grid.index(args.n_ref)]
    n0 = trials_for(target, grid, w_alone)
    print(f"seeds {args.seeds}, grid {grid}, target width {target:.3f} (real-only at "
          f"n = {args.n_ref}); real-only widths {np.round(w_alone, 3).tolist()}")
    print(f"{'rho':>5} {'widths with sim':>34} {'n without':>10} {'n with':>8} {'ratio':>7}")
    for rho in (0.9, 0.6, 0.0):
        ws = [float(np.mean(with_sim[(rho, n)])) for n in grid]
        n1 = trials_for(target, grid, ws)
        shown = f"< {grid[0]}" if n1 == float("-inf") else f"{n1:.1f}"
        ratio = f"< {grid[0] / n0:.2f}" if n1 == float("-inf") else f"{n1 / n0:.2f}"
        print(f"{rho:5.1f} {np.round(ws, 3).tolist()!s:>34} {n0:10.1f} {shown:>8} "
              f"{ratio:>7}")
    print(f"fits meeting R-hat <= 1.01, ESS >= 400, 0 divergences: {ok_fits}/{fits}; "
          f"{time.perf_counter() - t0:.0f} s")
    for line in FAILED:
        print("  not converged:", line)


if __name__ == "__main__":
    main()
