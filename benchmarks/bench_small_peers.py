"""The peer allocation rules against Q and the Bayes-optimal policy on the small problems, exactly.

On the 24 benchmark small problems (:func:`belief.lab.small_problems.benchmark_problems`)
every policy's expected net value is computed exactly (:func:`belief.lab.small_policies.
policy_value`): the Bayes-optimal policy, the engine's one-step rule without Monte Carlo error
(``q_exact``: U0 + E_y G0(s^{m,y}), stop against stopping), U0-greedy, Thompson, and the peer
rules of :mod:`belief.lab.small_peers` (``ei_cost``, ``kg_cost``, ``pbgi``,
``ucb_bwk``, and ``kg_cost_plain``: KG per cost with the plain "KG ≤ cost" stop).  Per
policy: the mean over problems of V_pol / V_Bayes and of V_pol / B, B the
penalised information-relaxation bound with the one-step value (:mod:`belief.campaign.
small_bounds`, 4000 scenarios), each with a 90 % percentile bootstrap interval over problems
(4000 resamples, seed 0), and the paired difference (V_q_exact − V_pol) / V_Bayes with its
interval: an interval above 0 means Q beats the peer on this family.  Decisions per second:
states scored per second of each policy's exact valuation (a rough figure: the exact
valuation's own work is included).

    nice -n 10 uv run python benchmarks/bench_small_peers.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from belief.lab.small_bounds import relaxation_bound
from belief.lab.small_peers import peer_policies
from belief.lab.small_policies import policy_value, standard_policies, thompson_probabilities
from belief.lab.small_problems import benchmark_problems

ORDER = ["bayes", "q_exact", "u0", "thompson", "ei_cost", "kg_cost", "kg_cost_plain", "pbgi",
         "ucb_bwk"]


def _boot(x: np.ndarray, reps: int = 4000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    return float(np.quantile(means, 0.05)), float(np.quantile(means, 0.95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=4000,
                        help="Monte Carlo scenarios of the bound")
    args = parser.parse_args()
    if args.scenarios < 2:
        parser.error(f"--scenarios {args.scenarios}: at least 2 scenarios are needed")
    std = standard_policies()
    policies = {"bayes": std["bayes"], "q_exact": std["q_exact"], "u0": std["u0"],
                "thompson": thompson_probabilities, **peer_policies()}
    rows = []
    for p in benchmark_problems():
        v_bayes = p.bayes_value()
        bound = relaxation_bound(p, "one_step", scenarios=args.scenarios).value
        for name in ORDER:
            calls = {"n": 0}
            pol = policies[name]

            def counted(prob, s, pol=pol, calls=calls):
                calls["n"] += 1
                return pol(prob, s)

            t0 = time.perf_counter()
            v = policy_value(p, counted)
            rows.append({"problem": p.name, "policy": name, "value": v, "bayes": v_bayes,
                         "bound": bound, "seconds": time.perf_counter() - t0,
                         "states": calls["n"]})
    df = pd.DataFrame(rows)
    df["frac_bayes"] = df.value / df.bayes
    df["frac_bound"] = df.value / df.bound
    wide = df.pivot(index="problem", columns="policy", values="frac_bayes")
    print(f"{len(wide)} small problems; fractions are means over problems [90 % bootstrap]")
    print(f"{'policy':10s} {'V/V_Bayes':>22s} {'V/bound':>22s} {'Q − peer (of V_Bayes)':>28s} "
          f"{'states/s':>9s}")
    for name in ORDER:
        d = df[df.policy == name].set_index("problem").loc[wide.index]
        fb, fo = d.frac_bayes.to_numpy(), d.frac_bound.to_numpy()
        diff = (wide["q_exact"] - wide[name]).to_numpy()
        lo, hi = _boot(fb)
        lo2, hi2 = _boot(fo)
        lo3, hi3 = _boot(diff)
        rate = d.states.sum() / max(d.seconds.sum(), 1e-9)
        print(f"{name:10s} {fb.mean():6.3f} [{lo:6.3f}, {hi:6.3f}]  {fo.mean():6.3f} "
              f"[{lo2:6.3f}, {hi2:6.3f}]  {diff.mean():+7.3f} [{lo3:+7.3f}, {hi3:+7.3f}]  "
              f"{rate:9.0f}")
    beaten = [n for n in ["u0", "thompson", "ei_cost", "kg_cost", "kg_cost_plain", "pbgi",
                          "ucb_bwk"]
              if _boot((wide["q_exact"] - wide[n]).to_numpy())[0] > 0]
    print(f"\nQ (exact one-step) beats with a 90 % interval above 0: {', '.join(beaten) or 'none'}")


if __name__ == "__main__":
    main()
