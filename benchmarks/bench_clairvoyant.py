"""The clairvoyant planner on the default world and the varied worlds (issue 18, phase 1).

For each world: the exact open-loop optimum V* = E[J_T] − J_0 − λᵀΔC over plans of length
≤ T under the truth gate (:func:`belief.campaign.clairvoyant.clairvoyant_plan`), its plan,
the adaptive clairvoyant's value (it also sees each realised logit; ``--adaptive``), and the
old benchmark oracle — one-step greedy on the true expected gains — as mean realised V over
``--runs`` seeds of the run-to-run noise (± its Monte Carlo standard error).  Wall time is
per world.

    uv run python benchmarks/bench_clairvoyant.py [--worlds 20] [--horizon 8] [--adaptive]
        [--runs 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from belief.campaign.clairvoyant import (
    adaptive_clairvoyant_value,
    clairvoyant_plan,
    one_step_oracle,
)
from belief.campaign.synthetic import SyntheticWorld

SHORT = {"si_friction": "SI", "latency_probe": "probe", "sim_refresh": "refresh",
         "dr_1e6": "DR6", "dr_1e7": "DR7", "da_camera": "DA", "ft_real_100": "FT",
         "ft_pilot": "pilot", "cotrain": "cotrain"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=8)
    parser.add_argument("--adaptive", action="store_true")
    parser.add_argument("--runs", type=int, default=200, help="oracle runs per world (0: skip)")
    args = parser.parse_args()
    worlds = [("default", SyntheticWorld())] + [
        (f"varied {v}", SyntheticWorld.varied(v)) for v in range(args.worlds)]
    print(f"clairvoyant planner, horizon {args.horizon}, truth gate P_exec <= 0.1\n")
    print(f"{'world':10s} {'V*':>7s} {'E[J_T]':>7s} {'J_0':>6s} {'λᵀΔC':>6s} {'n':>2s} "
          f"{'P_dep':>6s} {'states':>6s} {'sec':>5s}"
          + (f" {'V_adapt':>7s}" if args.adaptive else "")
          + (f" {'oracle V':>8s} {'±':>6s} {'orc/V*':>6s}" if args.runs else "") + "  plan")
    vs, fr = [], []
    for name, w in worlds:
        t0 = time.perf_counter()
        r = clairvoyant_plan(w, args.horizon)
        dt = time.perf_counter() - t0
        p = r.plan
        line = (f"{name:10s} {p.value:7.4f} {p.expected_final:7.4f} {p.initial:6.3f} "
                f"{p.weighted_cost:6.4f} {len(p.sequence):2d} {p.p_deploy:6.4f} "
                f"{r.n_states:6d} {dt:5.2f}")
        if args.adaptive:
            line += f" {adaptive_clairvoyant_value(w, args.horizon):7.4f}"
        if args.runs:
            ov, se, _ = one_step_oracle(w, args.horizon, runs=args.runs)
            line += f" {ov:8.4f} {se:6.4f} {ov / p.value:6.3f}"
            fr.append(ov / p.value)
        excl = f" [gated: {','.join(r.excluded)}]" if r.excluded else ""
        print(line + "  " + " → ".join(SHORT.get(m, m) for m in p.sequence) + excl,
              flush=True)
        vs.append(p.value)
    v = np.array(vs[1:])
    print(f"\nvaried worlds 0–{args.worlds - 1}: V* mean {v.mean():.4f}, min {v.min():.4f}, "
          f"max {v.max():.4f}")
    if fr:
        f = np.array(fr[1:])
        print(f"one-step oracle captures {f.mean():.3f} of V* on average (min {f.min():.3f})")


if __name__ == "__main__":
    main()
