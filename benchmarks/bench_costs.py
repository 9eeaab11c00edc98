"""Calibration of the cost predictive (models/costs.py) on simulated realised costs.

Truth (documented, seeded per world).  The synthetic world's candidates and nominal costs c̃;
for every cell with c̃_r(m) > 0 a true log offset δ*_{r,m} ~ Normal(0, 0.3); an execution of m
consumes

    ΔC_r(m) = c̃_r(m) · exp(δ*_{r,m} + 0.2 · Z),                  Z ~ Normal(0, 1),

and in real-robot hours (``real_h``) a repair tail: with probability 0.1 the execution needs a
repair that multiplies its robot hours by exp(1.5 + 0.3·Z') (≈ 4.5×).  Each world logs
``--rows`` executions of candidates drawn uniformly; the model is fitted to them, then every
candidate is executed once more and the realised amount is compared with the predictive draws
of :func:`models.costs.decision_draws`:

    PIT = Pr_pred(ΔC ≤ realised),   covered = realised within the central 90 % interval.

A calibrated predictive has PIT ~ Uniform(0, 1) and 90 % coverage; the coverage's Monte Carlo
error over n cells is √(0.9 · 0.1 / n).  Printed per resource, for the log-normal model and the
heavy-tailed option (the repair mixture of ``real_h``, as the truth), with the KS statistic of the
PITs against Uniform(0, 1) and its p-value, and the convergence of every fit
(:func:`belief.posterior.diagnostics.check_convergence` on ``CHECK_VARS["costs"]``: R-hat ≤
1.01, bulk and tail ESS ≥ 400, no divergences), naming the variable of each failing fit.

    uv run python benchmarks/bench_costs.py --worlds 20 --rows 15 [--models lognormal]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

from belief.campaign.synthetic import SyntheticWorld
from belief.posterior.diagnostics import CHECK_VARS, check_convergence
from models.costs import CostModel, CostPriors

TAIL_P, TAIL_MU, TAIL_SD, NOISE, OFFSET = 0.1, 1.5, 0.3, 0.2, 0.3


def realise(nominal: np.ndarray, delta: np.ndarray, resources: list[str],
            rng: np.random.Generator) -> np.ndarray:
    """One execution's realised costs (R,) of a candidate with nominal (R,) and offsets (R,)."""
    out = np.where(nominal > 0, nominal * np.exp(delta + NOISE * rng.standard_normal(len(nominal))),
                   0.0)
    if "real_h" in resources and rng.random() < TAIL_P:
        k = resources.index("real_h")
        out[k] *= np.exp(TAIL_MU + TAIL_SD * rng.standard_normal())
    return out


def one_world(seed: int, rows: int, models: dict[str, CostModel], draws: int) -> list[dict]:
    cands = next(iter(models.values())).candidates
    resources = list(cands.resources)
    nominal = np.asarray(cands.costs().values, dtype=float)
    rng = np.random.default_rng([seed, 21])
    delta = OFFSET * rng.standard_normal(nominal.shape)
    picks = rng.integers(0, len(cands.ids), size=rows)
    table = pd.DataFrame([{"step": t, "candidate": cands.ids[j],
                           **dict(zip(resources, realise(nominal[j], delta[j], resources, rng),
                                      strict=True))} for t, j in enumerate(picks)])
    nxt = np.stack([realise(nominal[j], delta[j], resources, rng) for j in range(len(cands))])
    out = []
    for name, model in models.items():
        idata = model.fit(table, draws=draws, tune=draws, chains=4, seed=seed)
        conv = check_convergence(idata, CHECK_VARS["costs"])
        div, rhat = conv.divergences, conv.rhat_max
        ess = min(conv.ess_bulk_min, conv.ess_tail_min)
        if not conv.reliable:
            print(f"world {seed} {name}: {conv.reason}", flush=True)
        q = model.decision_draws(idata, np.random.default_rng([seed, 7]))["cost"].values
        for j, cid in enumerate(cands.ids):
            for k, r in enumerate(resources):
                if nominal[j, k] <= 0:
                    continue
                pred = q[:, j, k]
                lo, hi = np.quantile(pred, [0.05, 0.95])
                out.append({"model": name, "world": seed, "candidate": cid, "resource": r,
                            "pit": float((pred <= nxt[j, k]).mean()),
                            "covered": bool(lo <= nxt[j, k] <= hi), "divergences": div,
                            "rhat": rhat, "ess": ess})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=20)
    ap.add_argument("--rows", type=int, default=15)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--models", default="lognormal,heavy_real_h")
    args = ap.parse_args()
    cands = SyntheticWorld(seed=0).candidates
    slots = args.rows * len(cands.resources)
    models = {"lognormal": CostModel(cands, CostPriors(), max_observations=slots),
              "heavy_real_h": CostModel(cands, CostPriors(heavy_tailed=("real_h",)),
                                        max_observations=slots)}
    models = {k: v for k, v in models.items() if k in args.models.split(",")}
    t0 = time.perf_counter()
    rows = []
    for w in range(args.worlds):
        rows.extend(one_world(w, args.rows, models, args.draws))
    df = pd.DataFrame(rows)
    print(f"{args.worlds} worlds × {args.rows} logged executions, {args.draws} draws × 4 chains; "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"truth: log offset ~ N(0, {OFFSET}), noise sd {NOISE}, real_h repair tail "
          f"p = {TAIL_P}, × exp(N({TAIL_MU}, {TAIL_SD}))")
    for (name, r), g in df.groupby(["model", "resource"]):
        n = len(g)
        ks = stats.kstest(g["pit"], "uniform")
        print(f"{name:>13} {r:>8}: n = {n:4d}  90 % coverage = {g['covered'].mean():.3f} "
              f"(± {np.sqrt(0.09 / n):.3f} MC s.e.)  PIT mean = {g['pit'].mean():.3f}  "
              f"KS = {ks.statistic:.3f} (p = {ks.pvalue:.3f})")
    for name, g in df.groupby("model"):
        fits = g.drop_duplicates("world")
        print(f"{name:>13}: worlds with divergences = {(fits['divergences'] > 0).sum()} "
              f"of {len(fits)}; max R-hat = {fits['rhat'].max():.4f}; min bulk/tail ESS = "
              f"{fits['ess'].min():.0f}; fits with R-hat > 1.01 or ESS < 400: "
              f"{((fits['rhat'] > 1.01) | (fits['ess'] < 400)).sum()}")


if __name__ == "__main__":
    main()
