"""Exact CVU refits: the full fit against the light fit (``GainsModel.fit(light=True)``).

An exact refit (:func:`belief.posterior.refit.exact_refit`) needs only the posterior variables
the decision draws read; the light fit reads them from nutpie's raw Arrow trace instead of
converting the whole trace (posterior, sample statistics) to an ArviZ DataTree.  Both fits
sample the same evidence with the same seed (so the same draws, which this script checks),
interleaved so that load on the machine hits both alike; prints the median wall time of each,
of the decision draws read from it, and their ratio.

    uv run python benchmarks/bench_refit.py [--repeats 8] [--draws 150]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from belief.campaign.synthetic import SyntheticWorld
from belief.inputs.evidence import Evidence
from models.gains import GainsModel


def evidence(steps: int = 4) -> tuple[Evidence, str]:
    """The synthetic world after a few executions (as in ``bench_fit.py``)."""
    world = SyntheticWorld(seed=0)
    init = world.initial_evidence()
    ev = Evidence(world.candidates).append(policy_evals=init["policy_evaluations"],
                                           safety=init["safety_events"])
    for step, m in enumerate(["dr_1e6", "si_friction", "dr_1e7", "ft_real_100"][:steps]):
        ev = ev.append(paired=world.execute(m, step).paired)
    return ev, world.policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--draws", type=int, default=150, help="draws = tuning steps per chain "
                        "(the demo's refit_draws default is 150)")
    args = parser.parse_args()
    world = SyntheticWorld(seed=0)
    model = GainsModel(world.candidates, max_policies=32)
    ev, policy = evidence()
    kw = dict(policy_evals=ev.policy_evals, draws=args.draws, tune=max(args.draws, 200),
              chains=4)
    model.fit(ev.paired, policy, seed=0, **kw)  # compile and warm up
    times: dict[str, list[float]] = {"full": [], "light": []}
    for i in range(args.repeats):
        got = {}
        for name in ("full", "light"):
            t0 = time.perf_counter()
            idata = model.fit(ev.paired, policy, seed=i, light=name == "light", **kw)
            draws = model.decision_draws(idata, policy, np.random.default_rng(i))
            times[name].append(time.perf_counter() - t0)
            got[name] = draws["gains_theta"].values
        assert np.array_equal(got["full"], got["light"]), "light and full fits disagree"
    full, light = statistics.median(times["full"]), statistics.median(times["light"])
    print(f"gains refit + decision draws, {args.repeats} repeats, 4 chains × {args.draws} draws")
    print(f"  full fit (ArviZ DataTree)   median {full:.3f} s")
    print(f"  light fit (raw Arrow trace) median {light:.3f} s")
    print(f"  ratio full / light          {full / light:.2f}×  (same draws: yes)")


if __name__ == "__main__":
    main()
