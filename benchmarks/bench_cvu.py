"""CVU for all candidates: wall time and peak memory, against exact nested refits.

20 candidates (16 adaptations over four lenses, 4 diagnoses that inform one adaptation each),
2000 joint posterior draws (1000 × 2 chains), 256 simulated outcomes per candidate. The PSIS
estimator is timed on all 20 candidates; exact nested refits (re-sampling the compiled gains
model on the evidence plus each simulated outcome) are timed on a few outcomes and scaled to the
same number of outcomes, i.e. the same Monte Carlo error sd(G0_j)/√J.

    uv run python benchmarks/bench_cvu.py [--outcomes 256] [--refits 6]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import pandas as pd

from belief.decision.cvu import cvu_for_state
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.evidence import Evidence
from belief.inputs.resources import make_budget
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcomes", type=int, default=256)
    parser.add_argument("--refits", type=int, default=6, help="nested refits actually timed")
    args = parser.parse_args()
    cs = twenty_candidates()
    ev, policy = evidence(cs, np.random.default_rng(0))
    fitter = BeliefFitter(cs, FitSettings(draws=1000, tune=1000, chains=2))
    t0 = time.perf_counter()
    _, belief = fitter.fit(ev, policy, step=6, seed=0)
    fit_s = time.perf_counter() - t0
    budget = make_budget({"real_h": 10, "compute": 200, "eng_h": 20}, cs.resources)
    state = State(step=6, budget=budget, policy=policy, belief=belief)
    weights = {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}
    decision = DecisionSettings(weights=weights, beta=1.0, horizon=20,
                                cvu=CVUSettings(n_outcomes=args.outcomes, seed=1))
    settings = decision.cvu

    cvu_for_state(state, cs, decision.replace(cvu=CVUSettings(n_outcomes=8)))  # warm-up
    times = []
    for _ in range(3):  # wall time without tracing (tracemalloc slows numpy allocation)
        t0 = time.perf_counter()
        res = cvu_for_state(state, cs, decision)
        times.append(time.perf_counter() - t0)
    psis_s = min(times)
    tracemalloc.start()
    cvu_for_state(state, cs, decision)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    refit = exact_refit(fitter, ev, state, trials=settings.trials, seed=3, draws=1000)
    m = "a02"
    from models import gains

    draws = belief[list(gains.DRAW_VARS)]
    ys = gains.simulate(draws, m, np.random.default_rng(2), np.arange(args.refits), 100)
    t0 = time.perf_counter()
    for y in ys:
        refit(m, y)
    per_refit = (time.perf_counter() - t0) / args.refits
    n_with_outcome = int((res["cvu_method"] != "no outcome").sum())
    nested_s = per_refit * args.outcomes * n_with_outcome

    print(f"belief: {belief.sizes['sample']} joint draws x {belief.sizes['candidate']} "
          f"candidates (fit {fit_s:.1f} s incl. compile); {args.outcomes} outcomes per candidate")
    print(f"PSIS CVU, all {len(cs)} candidates:   {psis_s:6.2f} s wall, best of 3 "
          f"[{', '.join(f'{t:.2f}' for t in times)}]   (target < 2 s)")
    print(f"peak traced memory during CVU (tracemalloc, separate run): {peak / 2**20:6.1f} MiB  "
          f"(target < 1024 MiB)")
    print(f"outcomes with k̂ > 0.7: mean share {float(res['pareto_k_bad'].mean()):.3f} "
          f"(no refits in this timing)")
    print(f"one exact refit (1000 draws x 2 chains, mean of {args.refits}): {per_refit:.3f} s")
    print(f"nested refits at equal MC error ({n_with_outcome} candidates x {args.outcomes} "
          f"outcomes): {nested_s:8.1f} s (extrapolated from the timed refits)")
    print(f"speed-up of PSIS over nested refits: {nested_s / psis_s:8.0f}x  (target >= 50x)")
    print(f"max MCSE of CVU: {float(res['cvu_mcse'].max()):.4f}")


if __name__ == "__main__":
    main()
