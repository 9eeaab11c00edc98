"""Calibration report (issue 9): SBC of every model and coverage of decisions on worlds.

Part 1, simulation-based calibration (:mod:`models.sbc`): for every model (and outcome family),
``--sims`` replications of prior draw → simulated evidence → posterior (2 chains × ``--draws``
after ``--draws`` tuning, thinned to L = 99 draws) → ranks of the true values.  Uniformity per
quantity by Pearson χ² on 10 equiprobable rank bins (9 df) and by ArviZ's PIT-ECDF test
(``pot_c``); family-wise α = 0.01 per model, Bonferroni over its K quantities.  Each model's
mis-specified variants fit with one prior scale ÷ 4 and × 4 (data still from the correct prior;
for the gains model also ``tau_lens``),
``--variant-sims`` replications each; "power@100" is the share of 1000 bootstrap resamples of
100 replications (the slow tests' N) that the χ² test rejects.  Rank-ECDF plots (ArviZ
``plot_ecdf_pit``) go to ``benchmarks/results/sbc_*.png``.

Part 2, coverage of decisions (:mod:`belief.lab.calibration`): scripted campaigns on
``--worlds`` varied synthetic worlds, fitted with the production settings (500 draws); 90 %
intervals of the mean gain μ(m | θ) vs the world's expected gain and of the predictive gain vs
one realised gain; the gate's one-sided 95 % Clopper–Pearson and posterior bounds vs the true
p_unsafe; Clopper–Pearson on simulated bench runs; the exact CP coverage at every world's
(p, n); the posterior bound's coverage under the model's own prior (from the SBC ranks); and
the PIT of the mean gain with the intervals' width against the spread of the worlds' truth
(where the coverage is above nominal, how much too wide).

    uv run python benchmarks/bench_calibration.py [--sims 300] [--variant-sims 200]
        [--worlds 100] [--draws 300] [--models gains,exec_risk] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from belief.campaign.synthetic import SyntheticWorld
from belief.lab.calibration import (
    binomial_interval,
    coverage_table,
    cp_bench_coverage,
    cp_exact_coverage,
    run_world_coverage,
)
from belief.posterior.fitter import BeliefFitter, FitSettings
from models.sbc import MISSPECIFIED_SCALE, model_case, rank_uniformity, ranks_to_pit, run_sbc

ALPHA = 0.01
TEST_N = 100
SBC_MODELS = (("gains", {}), ("exec_risk", {}), ("sensitivity", {"family": "binomial"}),
              ("sensitivity", {"family": "normal"}), ("transfer", {"family": "binomial"}),
              ("transfer", {"family": "normal"}))
EXTRA_SCALES = {"gains": ("tau_lens",)}
"""Further mis-specified prior scales (μ_0 is data-dominated in the gains design, so a 4× wider
``effect_mu_sigma`` barely changes the posterior; τ_lens with four lenses is prior-sensitive)."""
OUT = Path("benchmarks/results")


def ecdf_p_values(result) -> np.ndarray:
    """ArviZ's PIT-ECDF uniformity test (``pot_c``) per quantity, on the randomised PITs."""
    pit = ranks_to_pit(result)["prior_sbc"].to_dataset()
    p, _, _ = pit.azstats.uniformity_test(dim=["chain", "draw"], method="pot_c")
    return np.array([float(p[q]) for q in result.ranks["quantity"].values])


def bootstrap_power(result, n: int = TEST_N, resamples: int = 1000, seed: int = 0) -> float:
    """Share of bootstrap resamples of ``n`` replications whose χ² test rejects at ALPHA."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(resamples):
        idx = rng.integers(0, result.n_sims, n)
        sub = type(result)(result.name, result.ranks.isel(replication=idx), result.n_draws,
                           result.divergences[idx], 0.0)
        hits += not rank_uniformity(sub, alpha=ALPHA).attrs["passed"]
    return hits / resamples


def plot(result, path: Path) -> None:
    import arviz_plots as azp
    import matplotlib.pyplot as plt

    k = result.ranks.sizes["quantity"]
    rows = -(-k // 3)
    pc = azp.plot_ecdf_pit(ranks_to_pit(result), backend="matplotlib", col_wrap=min(k, 3),
                           figure_kwargs={"sharey": False, "figsize": (12, 1.0 + 2.8 * rows),
                                          "layout": "constrained"})
    pc.add_title(f"SBC rank ECDF − uniform: {result.name} (N={result.n_sims}, "
                 f"L={result.n_draws})")
    pc.savefig(path, dpi=80)
    plt.close("all")


def sbc_part(args) -> tuple[list[dict], dict]:
    rows, keep = [], {}
    for model, kw in SBC_MODELS:
        if args.models and model not in args.models.split(","):
            continue
        scales = [MISSPECIFIED_SCALE[model], *EXTRA_SCALES.get(model, ())]
        variants = [(scales[0], 1.0, args.sims)] + [
            (scale, factor, args.variant_sims) for scale in scales for factor in (0.25, 4.0)]
        for scale, factor, n in variants:
            t0 = time.perf_counter()
            case = model_case(model, scale=scale, factor=factor, **kw)
            compile_s = time.perf_counter() - t0
            res = run_sbc(case, n, seed=args.seed, draws=args.draws, tune=args.draws)
            test = rank_uniformity(res, alpha=ALPHA)
            ecdf = ecdf_p_values(res)
            k = len(ecdf)
            worst = str(test["quantity"].values[int(np.argmin(test["p_value"].values))])
            row = {"case": res.name, "model": model, "family": kw.get("family", ""),
                   "fit_prior": "correct" if factor == 1 else
                   f"{scale} {'÷ 4' if factor < 1 else '× 4'}",
                   "n_sims": n, "L": res.n_draws, "K": k,
                   "worst_quantity": worst,
                   "chi2_worst": float(test["chi2"].sel(quantity=worst)),
                   "p_worst": float(test["p_value"].min()),
                   "p_adj_chi2": test.attrs["p_adjusted"],
                   "p_adj_ecdf": float(min(1.0, k * ecdf.min())),
                   "passed": bool(test.attrs["passed"]),
                   "power_at_100": bootstrap_power(res) if factor != 1 else float("nan"),
                   "divergent_fits": test.attrs["divergent_fits"],
                   "compile_s": compile_s, "seconds": res.seconds,
                   "per_quantity": {str(q): {"chi2": float(c), "p": float(p), "p_ecdf": float(e)}
                                    for q, c, p, e in zip(test["quantity"].values,
                                                          test["chi2"].values,
                                                          test["p_value"].values, ecdf,
                                                          strict=True)}}
            rows.append(row)
            print(f"  {res.name:<46s} N={n:4d}  χ²={row['chi2_worst']:7.1f} ({worst}) "
                  f"p_adj={row['p_adj_chi2']:.3g}  ECDF p_adj={row['p_adj_ecdf']:.3g}  "
                  f"{'pass' if row['passed'] else 'FAIL'}  [{res.seconds:.0f} s]", flush=True)
            slug = res.name.replace(" ", "_").replace(",", "").replace("(", "").replace(
                ")", "").replace("÷", "div").replace("×", "x")
            if factor != 4.0 and scale == scales[0]:
                plot(res, OUT / f"sbc_{slug}.png")
            keep[res.name] = res
    return rows, keep


def coverage_part(args, sbc_results: dict) -> dict:
    fitter = BeliefFitter(SyntheticWorld(seed=0).candidates,
                          FitSettings(draws=args.fit_draws, tune=args.fit_draws))
    run = run_world_coverage(fitter, range(args.worlds), seed=args.seed)
    out: dict = {"worlds": args.worlds, "fits": int(run.gains.groupby(
        ["world", "checkpoint"]).ngroups), "seconds": run.seconds,
        "reliable_fits": float(run.gains.groupby(["world", "checkpoint"])["reliable"].first()
                               .mean())}
    gains = run.gains.assign(executed=run.gains["executed_before"] > 0)
    for col in ("covered_mean", "covered_pred"):
        out[col] = {"all": coverage_table(gains, col).to_dict("records"),
                    "executed": coverage_table(gains, col, "executed").to_dict("records"),
                    "reliable_only": coverage_table(gains[gains["reliable"] == 1], col).to_dict(
                        "records"),
                    "checkpoint": coverage_table(run.gains, col, "checkpoint").to_dict(
                        "records"),
                    "candidate": coverage_table(run.gains, col, "candidate").to_dict(
                        "records"),
                    "world_share_below_80pct": float(
                        (run.gains.groupby("world")[col].mean() < 0.8).mean())}
    # the shape of the miscalibration, not only the rate: the PIT of the mean gain (share of
    # draws ≤ the truth; sd 1/√12 = 0.289 when calibrated, smaller when the intervals are too
    # wide) and the interval width against the spread of the worlds' true gains
    width = gains["mean_hi"] - gains["mean_lo"]
    out["pit_mean"] = [
        {"group": "executed before" if key else "not executed yet", "n": len(g),
         "pit_sd": float(g["pit_mean"].std()), "width": float(width[g.index].mean()),
         "truth_sd": float(g.groupby(["candidate", "checkpoint"])["expected_gain"].std()
                           .mean())}
        for key, g in gains.groupby("executed")]
    for col in ("covered_cp", "covered_posterior"):
        out[col] = {"all": coverage_table(run.gate, col).to_dict("records"),
                    "candidate": coverage_table(run.gate, col, "candidate").to_dict("records")}
    pairs = run.gate[["p_true", "executions"]].drop_duplicates()
    exact = [cp_exact_coverage(p, int(n), run.delta) for p, n in pairs.to_numpy()]
    out["cp_exact_min"] = float(min(exact))
    bench = cp_bench_coverage(range(args.bench_worlds), args.bench_reps, run.delta)
    out["cp_bench"] = coverage_table(bench, "covered_cp").to_dict("records")
    out["cp_bench_candidate"] = coverage_table(bench, "covered_cp", "candidate").to_dict(
        "records")
    # the posterior bound under the model's own prior: truth <= the (1 − δ) empirical
    # quantile of L draws  <=>  rank <= ceil((1 − δ)(L + 1)) − 1
    res = sbc_results.get("exec_risk")
    if res is not None:
        j = int(np.ceil((1 - run.delta) * (res.n_draws + 1))) - 1
        prior_rows = []
        for q in [q for q in res.ranks["quantity"].values if str(q).startswith("p_unsafe")]:
            r = res.ranks.sel(quantity=q).values
            lo, hi = binomial_interval(int((r <= j).sum()), len(r))
            prior_rows.append({"group": str(q), "hits": int((r <= j).sum()), "n": len(r),
                               "coverage": float((r <= j).mean()), "ci_low": lo, "ci_high": hi})
        out["posterior_bound_under_prior"] = prior_rows
    run.gains.to_csv(OUT / "coverage_gains.csv", index=False)
    run.gate.to_csv(OUT / "coverage_gate.csv", index=False)
    return out


def fmt(rec: dict) -> str:
    return (f"{rec['hits']:5d}/{rec['n']:<5d} = {rec['coverage']:.3f}  "
            f"[{rec['ci_low']:.3f}, {rec['ci_high']:.3f}]")


def report(rows: list[dict], cov: dict, args) -> str:
    lines = ["## SBC (Talts et al. 2018)", "",
             f"L = 99 thinned draws (2 chains × {args.draws}, stride {2 * args.draws // 99}); "
             "χ² on 10 rank bins (9 df); α = 0.01 per model, Bonferroni over K quantities "
             "(p_adj = min(1, K·min p)); pass ⇔ p_adj ≥ 0.01.  power@100 = share of bootstrap "
             "samples of 100 replications that fail (the slow test's N).", "",
             "| model | fit prior | N | K | worst quantity | χ² | p_adj (χ²) | p_adj (ECDF) | "
             "result | power@100 | divergent fits |",
             "|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        power = "" if np.isnan(r["power_at_100"]) else f"{r['power_at_100']:.2f}"
        lines.append(f"| {r['model']} {r['family']} | {r['fit_prior']} | {r['n_sims']} | "
                     f"{r['K']} | {r['worst_quantity']} | {r['chi2_worst']:.1f} | "
                     f"{r['p_adj_chi2']:.3g} | {r['p_adj_ecdf']:.3g} | "
                     f"{'pass' if r['passed'] else 'FAIL'} | {power} | "
                     f"{r['divergent_fits']}/{r['n_sims']} |")
    lines += ["", "## Coverage of decisions", "",
              f"{cov['worlds']} varied worlds, {cov['fits']} fits ({cov['reliable_fits']:.0%} "
              "flagged reliable by the convergence check); intervals are exact Clopper–Pearson "
              "95 % for the rate, treating rows as independent (rows of one world are not).", "",
              "| quantity | truth | nominal | covered | rate [95 % CI] |",
              "|---|---|---:|---:|---|"]
    for col, what, truth, nominal in (
            ("covered_mean", "90 % interval of mean gain μ(m \\| θ)", "world expected_gain(m)",
             "0.90"),
            ("covered_pred", "90 % interval of predictive gain", "one realised gain", "0.90"),
            ("covered_cp", "CP UCB_0.95 (gate)", "true p_unsafe", "≥ 0.95"),
            ("covered_posterior", "posterior UCB_0.95 (gate)", "true p_unsafe", "—")):
        rec = cov[col]["all"][0]
        lines.append(f"| {what} | {truth} | {nominal} | {rec['hits']}/{rec['n']} | "
                     f"{rec['coverage']:.3f} [{rec['ci_low']:.3f}, {rec['ci_high']:.3f}] |")
        subs = [("executed before" if sub["group"] else "not executed yet", sub)
                for sub in cov[col].get("executed", [])]
        subs += [("fits flagged reliable only", sub) for sub in cov[col].get("reliable_only", [])]
        for label, sub in subs:
            lines.append(f"| … {label} | | | {sub['hits']}/{sub['n']} | "
                         f"{sub['coverage']:.3f} [{sub['ci_low']:.3f}, {sub['ci_high']:.3f}] |")
    rec = cov["cp_bench"][0]
    lines.append(f"| CP UCB_0.95 on simulated bench runs | true p_unsafe | ≥ 0.95 | "
                 f"{rec['hits']}/{rec['n']} | {rec['coverage']:.3f} [{rec['ci_low']:.3f}, "
                 f"{rec['ci_high']:.3f}] |")
    for rec in cov.get("posterior_bound_under_prior", []):
        lines.append(f"| posterior UCB_0.95, θ from the model's prior (SBC) | {rec['group']} | "
                     f"0.95 | {rec['hits']}/{rec['n']} | {rec['coverage']:.3f} "
                     f"[{rec['ci_low']:.3f}, {rec['ci_high']:.3f}] |")
    lines.append(f"\nExact CP coverage min over the worlds' (p, n): {cov['cp_exact_min']:.4f}")
    lines += ["", "PIT of the mean gain (uniform when calibrated: sd 0.289; piled up about 0.5 "
              "when the intervals are too wide) and the 90 % interval's width against the sd of "
              "the worlds' true expected gains (per candidate and checkpoint, averaged):", "",
              "| rows | n | PIT sd | interval width | sd of the truth over worlds |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['group']} | {r['n']} | {r['pit_sd']:.3f} | {r['width']:.3f} | "
              f"{r['truth_sd']:.3f} |" for r in cov.get("pit_mean", [])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=300, help="SBC replications (correct)")
    parser.add_argument("--variant-sims", type=int, default=200,
                        help="SBC replications per mis-specified variant")
    parser.add_argument("--draws", type=int, default=300, help="SBC draws (and tune) per chain")
    parser.add_argument("--worlds", type=int, default=100)
    parser.add_argument("--fit-draws", type=int, default=500)
    parser.add_argument("--bench-worlds", type=int, default=200)
    parser.add_argument("--bench-reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--models", default="", help="comma-separated subset of "
                                                      f"{sorted(MISSPECIFIED_SCALE)} (SBC part)")
    parser.add_argument("--quick", action="store_true", help="small numbers (smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.sims, args.variant_sims, args.worlds = 40, 40, 4
        args.bench_worlds, args.bench_reps = 20, 2
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    print("SBC", flush=True)
    rows, results = sbc_part(args)
    t_sbc = time.perf_counter() - t0
    print(f"coverage on {args.worlds} worlds", flush=True)
    cov = coverage_part(args, results)
    t_all = time.perf_counter() - t0
    print(f"\nSBC {t_sbc / 60:.1f} min, coverage {(t_all - t_sbc) / 60:.1f} min\n")
    for col in ("covered_mean", "covered_pred"):
        print(f"{col} per checkpoint / candidate:")
        for rec in cov[col]["checkpoint"] + cov[col]["candidate"]:
            print(f"  {rec['group']!s:>12}: {fmt(rec)}")
    for col in ("covered_cp", "covered_posterior"):
        print(f"{col} per candidate:")
        for rec in cov[col]["candidate"]:
            print(f"  {rec['group']!s:>14}: {fmt(rec)}")
    text = report(rows, cov, args)
    print("\n" + text)
    (OUT / "calibration.md").write_text(text + "\n")
    (OUT / "calibration.json").write_text(json.dumps(
        {"sbc": rows, "coverage": cov, "settings": vars(args), "minutes": t_all / 60},
        indent=1, default=str))


if __name__ == "__main__":
    pd.set_option("display.width", 160)
    main()
