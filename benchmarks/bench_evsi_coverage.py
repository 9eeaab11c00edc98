"""Do CVU's error bars hold?  CVU against the closed-form EVSI of a normal study, over seeds.

Two options (act on Δ, or do nothing), Δ ~ N(μ0, 1) as S joint draws, a study of n
observations with σ = 1 and no cost: CVU(observe) = EVSI(n) = s·(φ(u) − u·Φ(−u)),
s² = 1/(1 + 1/n), u = |μ0|/s.  For every n and every seed k the draws are S independent
N(μ0, 1) values (seed k) and the outcomes use seed k, so both sources of error are random;
the estimate is :func:`belief.decision.cvu.continuation_value` at the default
``CVUSettings`` (``--estimator`` forces one).  Printed per (estimator, n):

- ``z = (cvu − EVSI)/cvu_se`` over the seeds: mean, sd, max |z| and the share within ±2 and
  ±3 reported standard errors (a calibrated error has sd(z) ≈ 1, ~95 % and ~99.7 %);
- the same split into the two layers the engine reports: the outcome error given the draws,
  ``z_out = (cvu − EVSI_S)/cvu_mcse`` with EVSI_S the exact value under the draws' own
  (discrete) prior, by numerical integration over the outcome
  (:func:`belief.lab.normal_study.own_prior_evsi`), and
  the error of the draws ``z_draws = (EVSI_S − EVSI)/cvu_draws_se``;
- ``se/EVSI``: the median reported ``cvu_se`` (and ``cvu_mcse``) relative to the value.

``--mu0 0`` makes G0(s^∅) = max(0, mean Δ) a tie between acting and stopping (the max-of-means
bias of the plug-in G0(s^∅)).

    uv run python benchmarks/bench_evsi_coverage.py [--n 1,10,100,1e3,1e4,1e5,1e6]
        [--seeds 40] [--draws 4000] [--mu0 1] [--estimator auto,regression,psis]
        [--outcomes 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from belief.lab.normal_study import evsi, normal_study_cvu


def one_run(mu0: float, n: float, seed: int, n_draws: int, settings: dict) -> dict:
    return normal_study_cvu(mu0, n, seed, n_draws, **settings)


def summary(rows: list[dict], exact: float) -> str:
    v = np.array([r["cvu"] for r in rows])
    se, mc, ds = (np.array([r[k] for r in rows]) for k in ("se", "mcse", "draws_se"))
    own = np.array([r["own"] for r in rows])
    z = (v - exact) / se
    z_out = (v - own) / mc
    z_dr = (own - exact) / ds
    methods = sorted({r["method"] for r in rows})
    cover = " ".join(f"{np.mean(np.abs(z) <= k):5.0%}" for k in (2, 3))
    return (f"{z.mean():+6.2f} {z.std(ddof=1):5.2f} {np.abs(z).max():5.2f} {cover} "
            f"{np.median(se) / exact:6.1%} {np.median(mc) / exact:6.1%} | "
            f"{z_out.mean():+6.2f} {z_out.std(ddof=1):5.2f} {np.abs(z_out).max():5.2f} "
            f"{np.mean(np.abs(z_out) <= 3):5.0%} | "
            f"{z_dr.mean():+6.2f} {z_dr.std(ddof=1):5.2f} {np.abs(z_dr).max():5.2f}  "
            f"{','.join(methods)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1,10,100,1e3,1e4,1e5,1e6")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--draws", type=int, default=4000,
                        help="S joint draws (the fitter's default: 4 chains x 1000)")
    parser.add_argument("--mu0", type=float, default=1.0)
    parser.add_argument("--estimator", default="auto,regression",
                        help="comma-separated: auto (the default), regression, psis")
    parser.add_argument("--outcomes", type=int, default=None,
                        help="J outcomes of the PSIS estimator (default: CVUSettings')")
    args = parser.parse_args()
    ns = [float(x) for x in args.n.split(",")]
    print(f"CVU vs closed-form EVSI: Δ ~ N({args.mu0:g}, 1), S = {args.draws} iid draws, "
          f"{args.seeds} seeds per row (draws and outcomes)")
    print(f"{'estimator':>10s} {'n':>7s} {'EVSI':>8s} | {'z mean':>6s} {'sd':>5s} {'max':>5s} "
          f"{'±2se':>5s} {'±3se':>5s} {'se/V':>6s} {'mcse/V':>6s} | "
          f"{'z_out':>6s} {'sd':>5s} {'max':>5s} {'±3':>5s} | {'z_drw':>6s} {'sd':>5s} "
          f"{'max':>5s}  methods   [s]")
    for est in args.estimator.split(","):
        settings = {} if est == "auto" else {"estimator": est}
        if args.outcomes:
            settings["n_outcomes"] = args.outcomes
        for n in ns:
            t0 = time.perf_counter()
            try:
                rows = [one_run(args.mu0, n, k, args.draws, settings)
                        for k in range(args.seeds)]
            except ValueError as err:  # e.g. forced PSIS where no weight is finite
                print(f"{est:>10s} {n:7g}  failed: {err}")
                continue
            exact = evsi(args.mu0, n)
            print(f"{est:>10s} {n:7g} {exact:8.5f} | {summary(rows, exact)}  "
                  f"[{time.perf_counter() - t0:.0f}]", flush=True)


if __name__ == "__main__":
    main()
