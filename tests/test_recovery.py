"""Parameter recovery of the gains model (slow): data simulated from known gains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from belief.inputs.evidence import Evidence

pytestmark = pytest.mark.slow

TRUE_EFFECT = {"si_friction": 0.40, "dr_1e6": 0.20, "dr_1e7": 0.50, "da_camera": 0.15,
               "ft_real_100": 0.35, "cotrain": 0.45}
ORDER = ["dr_1e6", "si_friction", "dr_1e7", "da_camera", "ft_real_100", "cotrain", "dr_1e6",
         "dr_1e7", "ft_real_100", "si_friction", "da_camera", "cotrain"]
TRUE_RHO, TRUE_TAU, TRIALS = 0.8, 0.1, 150


def simulate(seed: int, candidates) -> Evidence:
    """Each candidate executed twice on two parallel lineages; 150 trials per arm."""
    rng = np.random.default_rng(seed)
    rows = []
    for lineage in range(2):
        policy, eta, done = f"L{lineage}_0", logit(0.3), []
        order = ORDER[lineage::2] + ORDER[1 - lineage::2]
        for step, m in enumerate(order[:8]):
            k = done.count(m)
            new_eta = eta + TRUE_EFFECT[m] * TRUE_RHO**k + TRUE_TAU * rng.standard_normal()
            new_policy = f"L{lineage}_{step + 1}"
            rows.append({"step": step, "candidate": m, "policy": policy,
                         "eval_protocol": candidates.eval_protocol,
                         "control_successes": rng.binomial(TRIALS, expit(eta)),
                         "control_trials": TRIALS,
                         "treated_successes": rng.binomial(TRIALS, expit(new_eta)),
                         "treated_trials": TRIALS, "treated_policy": new_policy})
            policy, eta = new_policy, new_eta
            done.append(m)
    return Evidence(candidates, paired=pd.DataFrame(rows))


def test_gains_model_recovers_known_gains(fitter, world_candidates):
    hits, total = 0, 0
    for seed in range(5):
        ev = simulate(seed, world_candidates)
        idata = fitter.gains.fit(ev.paired, draws=1000, tune=1000, chains=2, seed=seed)
        effect = idata["posterior"]["effect"]
        lo = effect.quantile(0.05, ("chain", "draw"))
        hi = effect.quantile(0.95, ("chain", "draw"))
        for m, truth in TRUE_EFFECT.items():
            hits += bool(lo.sel(candidate=m) <= truth <= hi.sel(candidate=m))
            total += 1
    # nominal 90 % coverage; ≥ 80 % of 30 intervals is ~2 binomial s.e. below nominal
    print(f"gains recovery: {hits}/{total} true effects inside their 90% intervals")
    assert hits / total >= 0.8, f"coverage {hits}/{total}"
