"""The floor of the convergence standard: how often NUTS fails R-hat ≤ 1.01 on an ideal target.

The target is x ~ Normal(0, I_d) (d = ``--dim``, 39 = the sensitivity model's free parameters
with 3 directions and 8 policy slots), sampled exactly as the models are (nutpie, 4 chains,
``--tune`` tuning steps, target_accept 0.9, ``--draws`` draws per chain), and judged like
:func:`belief.posterior.diagnostics.check_convergence` judges a fit: the largest rank-normalised
R-hat (ArviZ, bulk and folded) over the first k scalars, for each k of ``--checked`` (the
sensitivity fit checks 11 scalars with one swept policy and 3 directions, 15 with two).

A reference, not a strict bound (a model's checked scalars may mix differently from
independent normals): it shows what share of fits the R-hat ≤ 1.01 rule alone rejects on a
target with perfect geometry at these draws, against which the share of a model's fits in
``bench_convergence.py`` that fail *only* on R-hat (by ≤ 0.003) is to be read.  Printed:
quantiles of the max R-hat and the share > 1.01 with its exact 95 % Clopper–Pearson
interval, per k and draws.

    uv run python benchmarks/bench_rhat_floor.py [--fits 200] [--draws 500,1000]
        [--checked 11,15,20] [--dim 39]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    import arviz as az
    import nutpie
    import pymc as pm
    from scipy import stats

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=200)
    parser.add_argument("--draws", default="500,1000")
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--checked", default="11,15,20")
    parser.add_argument("--dim", type=int, default=39)
    args = parser.parse_args()
    ks = [int(k) for k in args.checked.split(",")]
    if max(ks) > args.dim:
        parser.error(f"--checked: at most --dim = {args.dim} scalars")
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0, shape=args.dim)
    compiled = nutpie.compile_pymc_model(model)
    print(f"N(0, I_{args.dim}), 4 chains, tune {args.tune}, target_accept 0.9, "
          f"{args.fits} fits per setting")
    print(f"{'draws':>6} {'checked':>8} {'q50 R-hat':>10} {'q90':>8} {'q99':>8} "
          f"{'share > 1.01':>24} {'s/fit':>6}")
    for draws in (int(d) for d in args.draws.split(",")):
        worst = np.empty((args.fits, len(ks)))
        t0 = time.perf_counter()
        for seed in range(args.fits):
            idata = nutpie.sample(compiled, draws=draws, tune=args.tune, chains=4, seed=seed,
                                  progress_bar=False, target_accept=0.9)
            rhat = az.rhat(idata["posterior"].to_dataset())["x"].values
            worst[seed] = [rhat[:k].max() for k in ks]
        per_fit = (time.perf_counter() - t0) / args.fits
        for j, k in enumerate(ks):
            n_fail = int((worst[:, j] > 1.01).sum())
            lo = stats.beta.ppf(0.025, n_fail, args.fits - n_fail + 1) if n_fail else 0.0
            hi = stats.beta.ppf(0.975, n_fail + 1, args.fits - n_fail) \
                if n_fail < args.fits else 1.0
            q = np.quantile(worst[:, j], [0.5, 0.9, 0.99])
            print(f"{draws:>6} {k:>8} {q[0]:>10.4f} {q[1]:>8.4f} {q[2]:>8.4f} "
                  f"{n_fail / args.fits:>8.1%} [{lo:.3f}, {hi:.3f}] {per_fit:>6.2f}")


if __name__ == "__main__":
    main()
