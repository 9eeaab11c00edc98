"""Cold compile of the demo's models and sampling time per effective draw, per compile option.

Every option runs in a fresh process with EMPTY caches (belief's compiled-model cache,
PyTensor's compiledir with its numba cache, numba's own cache, JAX's cache: all in a new
temporary folder, never the user's).  Per process the two models ``belief demo`` compiles before
its campaign (gains and execution risk, on the shipped example's candidates — the synthetic
world's) are compiled, then each is fitted on the example's evidence with the demo's settings
(2 chains × 1000 draws + 500 tuning, ``--fit-seeds`` seeds); the sampling cost is the summed
sampling seconds divided by the smallest bulk ESS of the model's free variables.

Options (``--options``, comma-separated, run interleaved ``--rounds`` times so that a machine
shared with other work loads every option alike; figures are given as ratios to the first
option of the list, measured in the same run):

- ``numba``: ``models.compile_cache.compile_model`` (nutpie's numba backend; the cache is
  empty, so this is a full compile);
- ``numba-ptcache``: the same with PyTensor's numba disk cache used while compiling (the
  path before ``compile_cache.PYTENSOR_NUMBA_CACHE`` was turned off);
- ``numba-optN`` (N = 0..3): the same with ``NUMBA_OPT=N`` (LLVM's optimisation level);
- ``plain``: ``nutpie.compile_pymc_model`` itself (no belief cache);
- ``jax``: nutpie's JAX backend (only when ``jax`` is importable; not a dependency).

    uv run python benchmarks/bench_cold_start.py [--options numba,numba-opt1] [--rounds 1]

Measured on the shared 2-core machine (load average 7–14 from other work, so seconds are
inflated; ratios are within one run, one round each):

- where a cold compile of the gains model goes (stage timers, no profiler): graph building and
  rewriting (nutpie's ``_make_functions``) ≈ 10 %, numba typing/lowering and LLVM ≈ 90 % (logp
  and gradient ≈ 84 % of that, the expand function the rest).  The rewritten log density and
  gradient have 410 Apply nodes (165 DimShuffle, 71 fused Elemwise, 43 Subtensor) and numba
  compiles ≈ 680 functions for them; under cProfile LLVM's pass manager and MCJIT finalisation
  alone are ≈ 140 s.  The execution-risk model: 59 nodes, ≈ 15 % of the demo's compile.
- ``numba-ptcache`` (before) vs ``numba`` (PyTensor's numba cache off while compiling): cold
  compile 547.7 s vs 565.4 s (1.03×); s per effective draw 0.41× (gains) and 0.48× (exec
  risk) — identical draws, so the speed difference is load noise or call overhead.
- ``numba`` vs ``numba-opt0`` vs ``numba-opt1`` on the execution-risk model: cold compile
  1 : 2.45 : 0.56, s per effective draw 1 : 9.1 : 0.76; on the gains model ``numba`` vs
  ``numba-opt1``: cold compile 271.5 s vs 151.9 s (0.56×), s per effective draw 1.13×
  (identical draws).  The ``belief`` command therefore sets ``NUMBA_OPT=1`` by default.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "belief" / "data" / "example"


def child(option: str, seeds: int, models: list[str]) -> None:
    """Compile the demo's models, fit them; print one JSON line."""
    t_start = time.perf_counter()
    import numpy as np

    import models.compile_cache as cc
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence_dir import infer_policy, read_evidence_dir
    from belief.posterior.fitter import BeliefFitter, FitSettings

    if option == "numba-ptcache":
        cc.PYTENSOR_NUMBA_CACHE = True
    elif option == "plain":
        import nutpie

        cc.compile_model = lambda m, label=None: nutpie.compile_pymc_model(m)
    elif option == "jax":
        import jax
        import nutpie

        jax.config.update("jax_enable_x64", True)

        def jax_compile(m, label=None):
            return nutpie.compile_pymc_model(m, backend="jax", gradient_backend="pytensor")

        cc.compile_model = jax_compile
    import arviz_stats  # noqa: F401

    cs = load_candidate_file(EXAMPLE / "candidates.toml").candidates
    ev = read_evidence_dir(EXAMPLE / "evidence", cs).evidence
    policy, _ = infer_policy(ev)
    fitter = BeliefFitter(cs, FitSettings.for_draws(1000))
    t_ready = time.perf_counter()
    out: dict = {"imports_s": t_ready - t_start, "compile_s": {}, "sample_s": {},
                 "min_ess": {}}
    specs = {"gains": fitter.gains, "exec_risk": fitter.exec_risk}
    for name in models:
        t0 = time.perf_counter()
        specs[name]._compiled()
        out["compile_s"][name] = time.perf_counter() - t0
    execs, unsafe = ev.safety_counts()
    for name in models:
        spent, ess = 0.0, []
        for seed in range(seeds):
            t0 = time.perf_counter()
            if name == "gains":
                idata = fitter.gains.fit(ev.paired, policy, policy_evals=ev.policy_evals,
                                         gain_estimates=ev.gain_estimates,
                                         model_updates=ev.model_updates, draws=1000, tune=500,
                                         chains=2, seed=seed)
            else:
                idata = fitter.exec_risk.fit(execs, unsafe, draws=1000, tune=500, chains=2,
                                             seed=seed)
            spent += time.perf_counter() - t0
            ess.append(_min_ess(idata))
        out["sample_s"][name] = spent / seeds
        out["min_ess"][name] = float(np.mean(ess))
    print(json.dumps(out))


def _min_ess(idata) -> float:
    """Smallest bulk ESS over every scalar of the posterior's variables."""
    import arviz_stats  # noqa: F401
    import numpy as np

    post = idata["posterior"].to_dataset()
    worst = np.inf
    for name, da in post.data_vars.items():
        if "exact_prior_draw" in da.coords or name == "gamma":
            continue
        e = da.azstats.ess(method="bulk")
        worst = min(worst, float(np.nanmin(np.asarray(e))))
    return worst


def run_child(option: str, seeds: int, models: list[str]) -> dict:
    caches = Path(tempfile.mkdtemp(prefix=f"bench-cold-{option}-"))
    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={caches / 'pytensor'}",
           "NUMBA_CACHE_DIR": str(caches / "numba"), "BELIEF_CACHE_DIR": str(caches / "belief"),
           "JAX_COMPILATION_CACHE_DIR": str(caches / "jax"),
           "MPLCONFIGDIR": str(caches / "matplotlib")}
    kind = option
    if option.startswith("numba-opt"):
        env["NUMBA_OPT"] = option.removeprefix("numba-opt")
        kind = "numba"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", kind, "--fit-seeds", str(seeds),
                        "--models", ",".join(models)],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    shutil.rmtree(caches, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"{option} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default="numba,numba-opt1")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fit-seeds", type=int, default=2)
    parser.add_argument("--models", default="gains,exec_risk")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = args.models.split(",")
    if args.child:
        return child(args.child, args.fit_seeds, models)
    options = args.options.split(",")
    results: dict[str, list[dict]] = {o: [] for o in options}
    for r in range(args.rounds):
        for option in options:
            res = run_child(option, args.fit_seeds, models)
            results[option].append(res)
            print(f"round {r} {option}: {json.dumps(res)}", flush=True)
    base = options[0]

    def mean(option: str, f) -> float:
        return sum(f(x) for x in results[option]) / len(results[option])

    def compile_s(o: str) -> float:
        return mean(o, lambda x: sum(x["compile_s"].values()))

    def per_ess(o: str, m: str) -> float:
        return mean(o, lambda x: x["sample_s"][m] / x["min_ess"][m])

    print(f"\nload average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    head = f"{'option':12s} {'compile s':>10s} {'ratio':>6s} " + " ".join(
        f"{m + ' s/ESS':>16s} {'ratio':>6s}" for m in models)
    print(head + "\n" + "-" * len(head))
    for o in options:
        line = f"{o:12s} {compile_s(o):10.1f} {compile_s(o) / compile_s(base):6.2f} "
        line += " ".join(f"{per_ess(o, m) * 1e3:13.3f} ms {per_ess(o, m) / per_ess(base, m):6.2f}"
                         for m in models)
        print(line)
    print(f"(compile: cold, summed over {', '.join(models)}; sampling: seconds per effective "
          f"draw, the smallest bulk ESS; ratios against {base} in this run)")


if __name__ == "__main__":
    main()
