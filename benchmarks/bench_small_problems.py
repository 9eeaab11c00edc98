"""Policies against the Bayes-optimal one on small conjugate problems (issue 18, phase 1).

Every policy's expected net value is computed exactly by enumerating outcomes
(:func:`belief.lab.small_policies.policy_value`); the engine's Q (``q_engine``: U0 + CVU
from :func:`belief.decision.cvu.continuation_value` on S joint draws) is a different
deterministic policy for every seed, so its row is the mean over ``--seeds`` seeds with the
standard error over seeds (MCSE).  Fractions are V_policy / V_Bayes per problem.  Also shown:
V_PI, the clairvoyant's value on the same problem (E over the prior of the best plan knowing
θ; Monte Carlo, 200 000 draws), so V_Bayes / V_PI is the price of learning.

The price of learning (:func:`learning_split`): per problem, a policy's gap to the clairvoyant
splits exactly into what no learning policy can avoid and what the policy itself leaves,

    1 − V_pol / V_PI = (1 − V_Bayes / V_PI)  +  (V_Bayes − V_pol) / V_PI,

printed as means over problems with 90 % bootstrap intervals, and the share of the mean gap
that is the price of learning.  This is the issue's question "how much of the gap to the
clairvoyant is the unavoidable price of learning", answered where it can be computed exactly.
Measured (2026-12-07, ``--seeds 3 --no-continuations``, 24 problems): the Bayes-optimal policy
keeps 0.539 [0.461, 0.618] of V_PI, so the price of learning is 0.461 of V_PI; the engine's
one-step Q keeps 0.528 [0.447, 0.609] — its own shortfall is 0.011 of V_PI, and 98 % of its
gap to the clairvoyant is the price of learning (U0-greedy 0.471, 87 %; KG 0.510, 94 %).
Where learning matters (7 problems) the price is 0.566 of V_PI and Q's share 94 %.

Decomposition of Q's shortfall, per problem, in units of V_Bayes:
  myopia   = (V_Bayes − V_q_exact)       the one-step continuation G0 instead of V_{τ−1}
  MC error = (V_q_exact − V_q_engine)    finite draws and outcomes in U0 and CVU
  stop     = (V_q_engine − V_q_engine_q>0) the 'Q > 0' stop of engine.decide today
(functional: 0 — φ = mean is the functional whose value Bayes maximises.)

``--deep`` adds the named and random problems at horizons 5 and 6 (exact policies only), to
see which look-ahead depth the gap needs when more steps remain.

The engine's non-myopic continuations (issue 18, phase 2; ``CVUSettings.continuation``, run
through the same :func:`~belief.decision.cvu.continuation_value` as ``q_engine``):
``q_engine_la2`` (two-step look-ahead), ``q_engine_roll1`` / ``_roll2`` / ``_roll3`` (greedy
rollout of depth d; d = 1 is one_step by definition, kept as a check), with ``--inner`` inner
outcomes; and ``q_engine_plugin``, one step without the CVU noise-bias correction
(``CVUSettings.noise_correction=False``, :mod:`belief.decision.cvu.noise`). For each: the
fraction of V_Bayes captured (mean over problems of the per-problem mean over seeds) with a
90 % percentile bootstrap interval over problems (2000 resamples), and the wall time per decision
(engine calls at states with ≥ 2 steps left) against one_step's in the same run.

    uv run python benchmarks/bench_small_problems.py [--seeds 10] [--draws 1000]
        [--outcomes 256] [--random 18] [--deep] [--inner 16] [--no-continuations]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from belief.lab.small_policies import (
    EngineQ,
    compare_policies,
    engine_cvu,
    policy_value,
    standard_policies,
)
from belief.lab.small_problems import benchmark_problems, perfect_information_value

SHOW = ["q_engine", "q_engine_q>0", "q_exact", "u0", "thompson", "kg", "plan", "plan_voi",
        "lookahead_2", "rollout_2", "rollout_3"]
VARIANTS = {"q_engine_la2": {"continuation": "lookahead2"},
            "q_engine_roll1": {"continuation": "rollout", "rollout_depth": 1},
            "q_engine_roll2": {"continuation": "rollout", "rollout_depth": 2},
            "q_engine_roll3": {"continuation": "rollout", "rollout_depth": 3},
            "q_engine_plugin": {"noise_correction": False}}


def bootstrap_mean(x: np.ndarray, reps: int = 2000, level: float = 0.9,
                   seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of x (resampling its elements)."""
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1)
    return (float(np.quantile(means, (1 - level) / 2)),
            float(np.quantile(means, (1 + level) / 2)))


def continuation_summary(df: pd.DataFrame, names: list[str], label: str) -> None:
    print(f"\n{label} ({df.problem.nunique()} problems): engine continuations, fraction of "
          "V_Bayes (90 % bootstrap CI over problems) and wall time per decision")
    base = df[df.policy == "q_engine"]
    t_base = base.seconds.sum() / base.calls.sum()
    print(f"{'policy':16s} {'mean':>7s} {'90% CI':>15s} {'min':>7s} {'short>3%':>8s} "
          f"{'ms/decision':>11s} {'× one_step':>10s}")
    for pol in names:
        d = df[df.policy == pol]
        if d.empty:
            continue
        lo, hi = bootstrap_mean(d.fraction.to_numpy())
        t = d.seconds.sum() / d.calls.sum() if d.calls.sum() else np.nan
        print(f"{pol:16s} {d.fraction.mean():7.3f} [{lo:6.3f}, {hi:6.3f}] "
              f"{d.fraction.min():7.3f} {int((d.fraction < 0.97).sum()):5d}/{len(d):<2d} "
              f"{t * 1e3:11.0f} {t / t_base:10.2f}")


def learning_split(df: pd.DataFrame, pi: dict[str, tuple[float, float]],
                   policies: list[str], reps: int = 2000) -> pd.DataFrame:
    """Each policy's gap to the clairvoyant split into the price of learning and its own part.

    Per problem p (value V_pol the mean over the policy's seeds):
    captured = V_pol / V_PI, price = 1 − V_Bayes / V_PI, own = (V_Bayes − V_pol) / V_PI, so
    1 − captured = price + own exactly.  Returns one row per policy: the means over problems,
    90 % percentile bootstrap intervals of the mean captured fraction and of the mean price
    (``reps`` resamples of problems, :func:`bootstrap_mean`), and ``share`` = mean price /
    mean gap (NaN when the mean gap is 0).
    """
    rows = []
    for pol in policies:
        d = df[df.policy == pol].groupby("problem")[["value", "bayes"]].mean()
        if d.empty:
            continue
        v_pi = np.array([pi[name][0] for name in d.index])
        if (v_pi <= 0).any():
            raise ValueError("V_PI must be > 0 on every problem (a problem worth nothing "
                             "even to the clairvoyant has no fraction)")
        captured = d.value.to_numpy() / v_pi
        price = 1.0 - d.bayes.to_numpy() / v_pi
        own = (d.bayes.to_numpy() - d.value.to_numpy()) / v_pi
        gap = 1.0 - captured.mean()
        rows.append({"policy": pol, "problems": len(d), "captured": captured.mean(),
                     "captured_ci": bootstrap_mean(captured, reps), "price": price.mean(),
                     "price_ci": bootstrap_mean(price, reps), "own": own.mean(),
                     "share": price.mean() / gap if gap > 0 else float("nan")})
    return pd.DataFrame(rows)


def print_learning_split(df: pd.DataFrame, pi: dict[str, tuple[float, float]],
                         policies: list[str], label: str) -> None:
    split = learning_split(df, pi, policies)
    print(f"\n{label}: fraction of the clairvoyant's V_PI captured, and its gap split into the "
          "price of learning (1 − V_Bayes/V_PI) and the policy's own shortfall")
    print(f"{'policy':16s} {'V/V_PI':>7s} {'90% CI':>16s} {'learning':>8s} {'90% CI':>16s} "
          f"{'own':>7s} {'share':>6s}")
    for r in split.itertuples():
        print(f"{r.policy:16s} {r.captured:7.3f} [{r.captured_ci[0]:6.3f}, "
              f"{r.captured_ci[1]:6.3f}] {r.price:8.3f} [{r.price_ci[0]:6.3f}, "
              f"{r.price_ci[1]:6.3f}] {r.own:7.3f} {r.share:6.2f}")


def summary(df: pd.DataFrame, policies: list[str], label: str) -> None:
    print(f"\n{label} ({df.problem.nunique()} problems): fraction of V_Bayes captured")
    print(f"{'policy':14s} {'mean':>7s} {'median':>7s} {'min':>7s} {'sum ratio':>9s} "
          f"{'short>3%':>8s}")
    for pol in policies:
        d = df[df.policy == pol]
        if d.empty:
            continue
        print(f"{pol:14s} {d.fraction.mean():7.3f} {d.fraction.median():7.3f} "
              f"{d.fraction.min():7.3f} {d.value.sum() / d.bayes.sum():9.3f} "
              f"{int((d.fraction < 0.97).sum()):5d}/{len(d)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="engine seeds per problem")
    parser.add_argument("--draws", type=int, default=1000, help="joint posterior draws S")
    parser.add_argument("--outcomes", type=int, default=256, help="CVU outcomes J")
    parser.add_argument("--random", type=int, default=18, help="random problems kept")
    parser.add_argument("--deep", action="store_true", help="also horizons 5 and 6")
    parser.add_argument("--inner", type=int, default=16,
                        help="inner outcomes K of the non-myopic continuations")
    parser.add_argument("--no-continuations", action="store_true",
                        help="skip the engine's look-ahead, rollout and plug-in rows")
    parser.add_argument("--out", default="benchmarks/results/small_problems.json")
    args = parser.parse_args()

    problems = benchmark_problems(n_random=args.random)
    policies = standard_policies(lookahead=(2, 3), rollout=(2, 3))
    t0 = time.perf_counter()
    df = compare_policies(problems, policies)
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    variants = {} if args.no_continuations else {
        k: {**v, "inner_outcomes": args.inner} for k, v in VARIANTS.items()}
    eng = compare_policies(problems, {}, engine_seeds=range(args.seeds),
                           engine_draws=args.draws, engine_outcomes=args.outcomes,
                           engine_variants=variants)
    t_engine = time.perf_counter() - t0
    df = pd.concat([df, eng], ignore_index=True)
    pi = {p.name: perfect_information_value(p) for p in problems}
    named = {p.name for p in problems if not p.name.startswith("random_")}
    df["family"] = np.where(df.problem.isin(named), "named", "random")

    wide = df.pivot(index="problem", columns="policy", values="fraction")
    order = [p.name for p in problems]
    print(f"{len(problems)} small problems; engine: {args.seeds} seeds, S = {args.draws} "
          f"draws, J = {args.outcomes} outcomes (exact policies {t_exact:.1f} s, engine "
          f"{t_engine:.1f} s)\n")
    print(f"{'problem':26s} {'T':>2s} {'V_PI':>7s} {'V_Bayes':>7s} {'B/PI':>5s} "
          + " ".join(f"{c[:12]:>12s}" for c in SHOW))
    for name in order:
        p = next(q for q in problems if q.name == name)
        v_star = p.bayes_value()
        mc = df[(df.problem == name) & (df.policy == "q_engine")].mcse.iloc[0] / v_star
        cells = [f"{wide.loc[name, c]:12.3f}" if c != "q_engine"
                 else f"{wide.loc[name, c]:6.3f}±{mc:5.3f}" for c in SHOW]
        print(f"{name:26s} {p.horizon:2d} {pi[name][0]:7.4f} {v_star:7.4f} "
              f"{v_star / pi[name][0]:5.2f} " + " ".join(cells))

    show = ["bayes", *SHOW, "lookahead_3"]
    summary(df, show, "all")
    summary(df[df.family == "named"], show, "named (information and budgets by design)")
    summary(df[df.family == "random"], show, "random family")
    hard = wide.index[wide["u0"] < 0.97]
    summary(df[df.problem.isin(hard)], show, "where learning matters (u0 < 97 % of Bayes)")
    split_show = ["bayes", "q_engine", "u0", "kg", "lookahead_2", "rollout_3",
                  *(["q_engine_la2", "q_engine_roll3"] if not args.no_continuations else [])]
    print_learning_split(df, pi, split_show, f"all ({len(problems)} problems)")
    print_learning_split(df[df.problem.isin(hard)], pi, split_show,
                         "where learning matters (u0 < 97 % of Bayes)")

    print("\nQ's shortfall (q_engine, DESIGN stop), in units of V_Bayes, where it is > 3 %:")
    print(f"{'problem':26s} {'short':>7s} {'myopia':>7s} {'MC err':>7s} {'(MCSE)':>7s} "
          f"{'stop q>0':>8s}")
    for name in order:
        f = wide.loc[name]
        if f["q_engine"] < 0.97:
            mc = df[(df.problem == name) & (df.policy == "q_engine")].mcse.iloc[0]
            v_star = next(q for q in problems if q.name == name).bayes_value()
            print(f"{name:26s} {1 - f['q_engine']:7.3f} {1 - f['q_exact']:7.3f} "
                  f"{f['q_exact'] - f['q_engine']:7.3f} {mc / v_star:7.3f} "
                  f"{f['q_engine'] - f['q_engine_q>0']:8.3f}")
    mean = wide.mean()
    print(f"{'mean over all':26s} {1 - mean['q_engine']:7.3f} {1 - mean['q_exact']:7.3f} "
          f"{mean['q_exact'] - mean['q_engine']:7.3f} {'':7s} "
          f"{mean['q_engine'] - mean['q_engine_q>0']:8.3f}")

    if variants:
        names = ["q_engine", *variants]
        continuation_summary(df, names, "all")
        continuation_summary(df[df.problem.isin(hard)], names,
                             "where learning matters (u0 < 97 % of Bayes)")
        print(f"\n{'problem':26s} " + " ".join(f"{c[9:] or 'one_step':>9s}" for c in names)
              + f" {'bayes':>7s} {'la_2 ex':>7s} {'roll_2 ex':>9s}")
        for name in order:
            f = wide.loc[name]
            print(f"{name:26s} " + " ".join(f"{f[c]:9.3f}" for c in names)
                  + f" {1.0:7.3f} {f['lookahead_2']:7.3f} {f['rollout_2']:9.3f}")

    # cost of one engine call (CVU of every feasible candidate at s_0), for the look-ahead
    p = max(problems, key=lambda q: len(q.arms))
    t0 = time.perf_counter()
    for k in range(5):
        engine_cvu(p, p.initial, draws=args.draws, n_outcomes=args.outcomes, seed=100 + k)
    per = (time.perf_counter() - t0) / 5 / int(p.feasible(p.initial).sum())
    print(f"\none-step CVU of one candidate (S = {args.draws}, J = {args.outcomes}): "
          f"{per * 1e3:.0f} ms")
    calls = EngineQ(args.draws, args.outcomes, 0)
    for q in problems:
        policy_value(q, calls)
    print(f"engine calls (states scored) per problem and seed: "
          f"{calls.calls / len(problems):.1f}")

    if args.deep:
        deep_pols = standard_policies(lookahead=(2, 3), rollout=(2, 3))
        rows = []
        for horizon in (5, 6):
            probs = [replace(q, horizon=horizon, name=f"{q.name}@T{horizon}")
                     for q in problems]
            probs = [q for q in probs if q.bayes_value() >= 0.005]
            d = compare_policies(probs, deep_pols)
            d["horizon"] = horizon
            rows.append(d)
        deep = pd.concat(rows, ignore_index=True)
        for horizon, d in deep.groupby("horizon"):
            summary(d, ["bayes", "q_exact", "u0", "kg", "lookahead_2", "lookahead_3",
                        "rollout_2", "rollout_3"], f"horizon {horizon} (exact policies)")
        df = pd.concat([df, deep], ignore_index=True)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df["v_pi"] = df.problem.map(lambda n: pi.get(n, (np.nan,))[0])
    Path(args.out).write_text(json.dumps(df.to_dict(orient="records"), indent=1))


if __name__ == "__main__":
    main()
