"""Budget overruns and the cost predictive inside campaigns with stochastic costs (issue 21).

World: the synthetic world with ``stochastic_costs=True`` (documented truth,
:mod:`belief.campaign.synthetic`: ΔC_r = c̃_r · exp(0.2 Z), and in ``real_h`` a repair with
probability 0.1 that multiplies the robot hours by exp(1.5 + 0.3 Z')), seeds 0 … N−1, budget
b_0 = (12, 300, 20) or ``--budget`` (e.g. ``real_h=6,compute=100,eng_h=10``: a tight budget, so
that the horizon's picks reach its limits).  On the same world and seed, two allocators:

- ``chance``: Q with the cost posterior — ``fit.costs`` (the cost model re-fitted at every step on
  the campaign's realised costs, its prior predictive at step 0), the heavy-tailed option in
  ``real_h``, and the chance constraint Pr(ΔC_r(m) ≤ b_t,r) ≥ 1 − ε_budget with ε_budget = 0.05;
- ``blind``: the cost-blind Q — known nominal costs c̃, ε_budget = 0 (today's rule).

Both: Q = U0 + β·CVU with β = ``--beta`` (default 0: U0 only, to keep ≥ 50 campaigns in the time
budget), horizon ``--horizon`` steps, ``--draws`` × 2 chains per fit, acting on unreliable fits
(the short chains fail R-hat now and then; the count is printed).

Measured per arm over the N campaigns:

- overrun frequency: campaigns in which a realised cost exceeded the budget left (the campaign
  then stops, :mod:`belief.campaign.overrun`), with its 95 % Clopper–Pearson interval (target
  for ``chance``: ≤ 5 %); and Σ over executed steps of the decision-time max_r Pr(ΔC_r > b_t,r)
  (a lower bound of the expected number of overrun steps the belief predicted, since a step
  overruns when any resource does) against the observed number;
- net value: J(π_T) − J(π_0) − λᵀ(Σ realised costs), with λ the world's weights (true J from the
  world), mean ± s.e. over campaigns, and the paired difference chance − blind ± s.e.;
- calibration of the cost predictive (``chance`` only): for every executed step and every
  resource with c̃_r(m) > 0, PIT = Pr_pred(ΔC_r ≤ realised) under the decision-time predictive
  draws of q_t, and whether the realised cost is inside the central 90 % interval; coverage
  ± √(0.09/n) Monte Carlo s.e., KS statistic of the PITs against Uniform(0, 1), split by
  whether the executed candidate had been executed before in the campaign (a never-executed
  cell is predicted by the pooled prior; otherwise its own realised costs inform it).

    nice -n 10 uv run python benchmarks/bench_cost_campaigns.py --campaigns 50 --horizon 3 \\
        --draws 300 [--budget real_h=6,compute=100,eng_h=10] --out /tmp/bench_cost_campaigns.csv
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

from belief.campaign.loop import Campaign, CampaignSettings
from belief.campaign.synthetic import SyntheticWorld
from belief.decision.settings import CVUSettings
from belief.posterior.fitter import BeliefFitter, FitSettings

EPS = 0.05


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes of n."""
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def _budget(text: str) -> dict[str, float]:
    """``real_h=6,compute=100,eng_h=10`` → {resource: amount}."""
    return {k.strip(): float(v) for k, v in (part.split("=") for part in text.split(","))}


def run_one(seed: int, arm: str, args: argparse.Namespace, fitters: dict[str, BeliefFitter]
            ) -> tuple[dict, list[dict]]:
    """One campaign; (summary row, calibration rows of its executed steps)."""
    world = SyntheticWorld(seed=seed, stochastic_costs=True)
    if args.budget:
        world = SyntheticWorld(seed=seed, stochastic_costs=True, budget_values=args.budget)
    chance = arm == "chance"
    fit = FitSettings(draws=args.draws, tune=args.draws, chains=2, ess_min=100, costs=chance)
    settings = CampaignSettings(horizon=args.horizon, seed=seed, beta=args.beta, fit=fit,
                                stability_resamples=0, act_on_unreliable=True,
                                cvu=CVUSettings(n_outcomes=64, max_refits=0),
                                eps_budget=EPS if chance else 0.0,
                                heavy_tailed_costs=("real_h",) if chance else ())
    c = Campaign(world, settings, fitter=fitters.get(arm))
    fitters[arm] = c.fitter
    j0 = world.true_success()
    resources = list(c.candidates.resources)
    nominal = c.candidates.costs()
    calib, predicted, unreliable = [], 0.0, 0
    executed: list[str] = []
    while not c.finished:
        budget = c.budget.values.copy()
        decision, outcome = c.step()
        unreliable += int(not c.belief.attrs.get("reliable", 1))
        if outcome is None:
            continue
        chosen = decision.attrs["chosen"]
        if "cost" in c.belief:
            pred = c.belief["cost"].sel(candidate=chosen).transpose("sample", "resource").values
            p_over = (pred > budget[None, :] + 1e-9).mean(0)
            predicted += float(p_over.max())
            for k, r in enumerate(resources):
                if float(nominal.sel(candidate=chosen, resource=r)) <= 0:
                    continue
                x = float(outcome.cost[r])
                lo, hi = np.quantile(pred[:, k], [0.05, 0.95])
                calib.append({"seed": seed, "step": outcome.step, "candidate": chosen,
                              "resource": r, "pit": float((pred[:, k] <= x).mean()),
                              "covered": bool(lo <= x <= hi),
                              "n_before": executed.count(chosen)})
        executed.append(chosen)
    spent = np.array([sum(float(row[r]) for row in c._cost_rows) for r in resources])
    lam = np.array([world.weight_values[r] for r in resources])
    gain = world.true_success() - j0
    row = {"seed": seed, "arm": arm, "steps": len(c.history), "history": " ".join(c.history),
           "overrun": c.overrun is not None,
           "overrun_resources": "" if c.overrun is None else " ".join(c.overrun["resources"]),
           "overrun_probability": (np.nan if c.overrun is None else
                                   max(o["probability"] for o in
                                       c.overrun["resources"].values())),
           "predicted_overrun_steps": predicted, "gain": gain, "cost_lambda": float(lam @ spent),
           "net": gain - float(lam @ spent), "unreliable_steps": unreliable,
           "stop_reason": c.stop_reason or ""}
    return row, calib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--campaigns", type=int, default=50)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--budget", default=None, type=_budget,
                    help="b_0 as real_h=…,compute=…,eng_h=… (default: the world's)")
    ap.add_argument("--out", default=None, help="CSV of the per-campaign rows (and _calib.csv)")
    ap.add_argument("--report-only", default=None,
                    help="summarise the rows of an earlier --out CSV (and its _calib.csv)")
    args = ap.parse_args()
    if args.report_only:
        rows = pd.read_csv(args.report_only)
        calib = pd.read_csv(args.report_only.replace(".csv", "_calib.csv"))
        report(rows[rows["seed"].isin(rows.loc[rows["arm"] == "blind", "seed"])], calib, args,
               float("nan"))
        return
    t0 = time.perf_counter()
    fitters: dict[str, BeliefFitter] = {}
    rows, calib = [], []
    for seed in range(args.first_seed, args.first_seed + args.campaigns):
        for arm in ("chance", "blind"):
            row, cal = run_one(seed, arm, args, fitters)
            rows.append(row)
            calib.extend(cal)
            print(f"[{time.perf_counter() - t0:6.0f} s] seed {seed} {arm:>6}: {row['history']:<40}"
                  f" overrun={row['overrun']} net={row['net']:+.4f} {row['stop_reason'][:70]}",
                  flush=True)
        if args.out:
            pd.DataFrame(rows).to_csv(args.out, index=False)
            pd.DataFrame(calib).to_csv(args.out.replace(".csv", "_calib.csv"), index=False)
    report(pd.DataFrame(rows), pd.DataFrame(calib), args, time.perf_counter() - t0)


def report(df: pd.DataFrame, cal: pd.DataFrame, args: argparse.Namespace, seconds: float) -> None:
    """Print the measurements (module docstring)."""
    n = df["seed"].nunique()
    print(f"\n{n} seeded campaigns per arm, budget {args.budget or 'the world default'}, "
          f"horizon {args.horizon}, β = {args.beta:g}, "
          f"{args.draws} draws × 2 chains per fit, ε_budget = {EPS} (chance); {seconds:.0f} s")
    for arm, g in df.groupby("arm", sort=False):
        k = int(g["overrun"].sum())
        lo, hi = clopper_pearson(k, len(g))
        print(f"{arm:>6}: overruns {k}/{len(g)} = {k / len(g):.3f} (95 % CP [{lo:.3f}, {hi:.3f}])"
              f"; predicted overrun steps Σ max_r Pr = {g['predicted_overrun_steps'].sum():.2f}"
              f"; net value {g['net'].mean():+.4f} ± {g['net'].std(ddof=1) / np.sqrt(len(g)):.4f}"
              f" (gain {g['gain'].mean():+.4f}, λᵀspent {g['cost_lambda'].mean():.4f}); "
              f"steps {g['steps'].mean():.2f}; unreliable steps {int(g['unreliable_steps'].sum())}")
    wide = df.pivot(index="seed", columns="arm", values="net")
    if {"chance", "blind"} <= set(wide.columns):
        d = wide["chance"] - wide["blind"]
        hist = df.pivot(index="seed", columns="arm", values="history")
        same = int((hist.nunique(axis=1) == 1).sum())
        print(f"paired net difference chance − blind: {d.mean():+.4f} ± "
              f"{d.std(ddof=1) / np.sqrt(len(d)):.4f} (s.e.; {len(d)} seeds); "
              f"same history in {same} seeds")
    if len(cal):
        for r, g in cal.groupby("resource"):
            ks = stats.kstest(g["pit"], "uniform")
            m = len(g)
            print(f"calibration {r:>8}: n = {m:3d}  90 % coverage = {g['covered'].mean():.3f} "
                  f"(± {np.sqrt(0.09 / m):.3f})  PIT mean = {g['pit'].mean():.3f}  "
                  f"KS = {ks.statistic:.3f} (p = {ks.pvalue:.3f})")
        m = len(cal)
        print(f"calibration    all: n = {m:3d}  90 % coverage = {cal['covered'].mean():.3f} "
              f"(± {np.sqrt(0.09 / m):.3f})  PIT KS p = "
              f"{stats.kstest(cal['pit'], 'uniform').pvalue:.3f}")
        if "n_before" in cal:  # the prior predictive (a never-executed cell) against the rest
            for label, g in cal.groupby(cal["n_before"] > 0):
                m = len(g)
                print(f"  cell executed before: {label!s:>5}: n = {m:3d}  90 % coverage = "
                      f"{g['covered'].mean():.3f} (± {np.sqrt(0.09 / m):.3f})  PIT mean = "
                      f"{g['pit'].mean():.3f}  KS p = "
                      f"{stats.kstest(g['pit'], 'uniform').pvalue:.3f}")
        hist, _ = np.histogram(cal["pit"], bins=10, range=(0, 1))
        print("PIT histogram (10 bins, all resources):", " ".join(str(h) for h in hist))


if __name__ == "__main__":
    main()
