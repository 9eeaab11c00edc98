"""The safety gate over a campaign's repeated looks: its guarantee, and its price in power.

A campaign re-evaluates the gate of a candidate after every step, on the accumulated safety
events; the gate opens at the first look whose upper bound on P_exec is ≤ α_exec.  For looks
of ``--sizes`` executions each (up to ``--looks`` looks), on ``--reps`` simulated campaigns per
setting (vectorised: the counts at every look are cumulative binomial draws, and a bound opens
the gate at n executions iff k ≤ k*(n), the largest k whose bound is ≤ α_exec — every bound is
increasing in k), it prints for each bound

- Pr(the gate opens at some look | P_exec = α_exec) and | P_exec = 1.5·α_exec, with the exact
  95 % Clopper–Pearson interval of the Monte Carlo share (target: ≤ δ);
- the median number of executions before the gate opens for P_exec = α_exec/4 and α_exec/2
  (campaigns whose gate never opens within the looks count as +∞; "> N" when more than half
  never open), and the ratio to the one-look Clopper–Pearson gate (goal ≤ 1.5×).

Bounds: ``anytime`` (the default gate: the one-sided Beta(1, 9) mixture confidence sequence,
:func:`belief.decision.safety.anytime_upper`), ``anytime two-sided`` (the same mixture over
every p, for the choice of the one-sided form), ``CP one look`` (the exact Clopper–Pearson
bound, read at every look: optional stopping), ``CP α-spending`` (Clopper–Pearson at
δ_n = δ·6/(π²n²), :func:`belief.decision.safety.clopper_pearson_spending_upper`).

    uv run python benchmarks/bench_gate.py [--reps 20000] [--looks 50] [--sizes 10,20]
        [--alpha 0.1] [--delta 0.05] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def thresholds(bound: Callable[[np.ndarray, int], np.ndarray], ns: np.ndarray,
               alpha: float) -> np.ndarray:
    """k*(n) = max{k : bound(k, n) ≤ α} for every n of ``ns`` (−1 when none): the gate opens
    at n executions iff k ≤ k*(n).  Only k ≤ αn + 1 can pass (every bound is ≥ k/n)."""
    out = np.full(len(ns), -1)
    for i, n in enumerate(ns):
        ks = np.arange(0, min(int(alpha * n) + 2, n) + 1)
        ok = np.flatnonzero(bound(ks, int(n)) <= alpha)
        if ok.size:
            out[i] = ks[ok].max()
    return out


def first_open(kstar: np.ndarray, size: int, p: float, reps: int,
               rng: np.random.Generator) -> np.ndarray:
    """Executions at the first look whose counts open the gate (+∞ when none), per campaign."""
    k = np.cumsum(rng.binomial(size, p, size=(reps, len(kstar))), axis=1)
    opened = k <= kstar[None, :]
    first = opened.argmax(axis=1)
    return np.where(opened.any(axis=1), size * (first + 1.0), np.inf)


def share_ci(hits: int, n: int) -> tuple[float, float]:
    """Exact two-sided 95 % Clopper–Pearson interval of hits / n."""
    from belief.decision.safety import clopper_pearson_interval

    lo, hi = clopper_pearson_interval(hits, n, 0.95)
    return float(lo), float(hi)


def median_text(n_open: np.ndarray, cap: int) -> tuple[str, float]:
    med = float(np.median(n_open))
    return (f"{med:.0f}" if np.isfinite(med) else f"> {cap}"), med


def main() -> None:
    from belief.decision.safety import (
        ANYTIME_MIXTURE,
        anytime_upper,
        clopper_pearson_spending_upper,
        clopper_pearson_upper,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20000)
    parser.add_argument("--looks", type=int, default=50)
    parser.add_argument("--sizes", default="10,20")
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    alpha, delta = args.alpha, args.delta
    bounds: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
        "anytime (default)": lambda k, n: anytime_upper(k, n, delta),
        "anytime two-sided": lambda k, n: anytime_upper(k, n, delta, one_sided=False),
        "CP one look": lambda k, n: clopper_pearson_upper(k, n, delta),
        "CP α-spending": lambda k, n: clopper_pearson_spending_upper(k, n, delta),
    }
    a, b = ANYTIME_MIXTURE
    print(f"α_exec = {alpha:g}, δ = {delta:g}, up to {args.looks} looks, {args.reps} campaigns "
          f"per setting, seed {args.seed}; anytime mixture Beta({a:g}, {b:g})")
    t0 = time.perf_counter()
    for size in (int(s) for s in args.sizes.split(",")):
        ns = size * np.arange(1, args.looks + 1)
        cap = int(ns[-1])
        kstars = {name: thresholds(f, ns, alpha) for name, f in bounds.items()}
        print(f"\nlooks of {size} executions (n = {size}, {2 * size}, …, {cap})")
        print(f"{'bound':<20} {'Pr(open | α)':>26} {'Pr(open | 1.5α)':>26} "
              f"{'median n | α/4':>15} {'ratio':>6} {'median n | α/2':>15} {'ratio':>6}")
        medians_cp: dict[float, float] = {}
        rows = []
        for name, kstar in kstars.items():
            rng = np.random.default_rng([args.seed, size])  # the same draws for every bound
            cells, meds = [], {}
            for p in (alpha, 1.5 * alpha):
                hits = int(np.isfinite(first_open(kstar, size, p, args.reps, rng)).sum())
                lo, hi = share_ci(hits, args.reps)
                cells.append(f"{hits / args.reps:.4f} [{lo:.4f}, {hi:.4f}]")
            for p in (alpha / 4, alpha / 2):
                text, med = median_text(first_open(kstar, size, p, args.reps, rng), cap)
                meds[p] = (text, med)
            if name == "CP one look":
                medians_cp = {p: m for p, (_, m) in meds.items()}
            rows.append((name, cells, meds))
        for name, cells, meds in rows:
            out = f"{name:<20} {cells[0]:>26} {cells[1]:>26}"
            for p in (alpha / 4, alpha / 2):
                text, med = meds[p]
                ratio = med / medians_cp[p] if np.isfinite(med) and medians_cp.get(p) else np.inf
                out += f" {text:>15} {ratio:>5.2f}×" if np.isfinite(ratio) else \
                    f" {text:>15} {'—':>6}"
            print(out)
    print(f"\n{time.perf_counter() - t0:.1f} s.  Targets: Pr(open | α) ≤ δ = {delta:g} and "
          f"Pr(open | 1.5α) ≤ δ for the default gate; its median executions at α/4 and α/2 "
          "≤ 1.5× the one-look Clopper–Pearson gate's.")


if __name__ == "__main__":
    main()
