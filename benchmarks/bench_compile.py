"""Compile and sample times of the four models under each compiled-model caching option.

Each option runs in fresh processes: **cold** with every cache folder empty, **warm** a second
process on the caches the first one left (median of ``--repeat``).  Per process the four models
of the shipped example (gains, execution risk, transfer, sensitivity — as ``belief fit`` builds
them) are compiled (``_compiled()``) and then fitted on the example's evidence with the fit
command's settings (2 chains × 1000 draws + 1000 tuning); the table gives the summed compile
and fit seconds and the process's wall time.

Options:

- ``nutpie``: ``nutpie.compile_pymc_model`` (before this cache), whose only reuse across
  processes is PyTensor's own numba cache of the functions it calls;
- ``cache``: ``models.compile_cache.compile_model`` (the on-disk compiled-model cache);
- ``cache-miss``: the same with the compiled-model cache emptied before the warm run but
  PyTensor's caches kept — what a *new* model (another candidate set, another prior) costs;
  a fixed-slot layout that made the compiled form independent of the candidate set would
  save exactly this on a new candidate set;
- ``jax``: nutpie's JAX backend (data kept as shared inputs) with JAX's persistent compilation
  cache (only when ``jax`` is installed; it is not a dependency).

``--pickle`` also tries to serialise nutpie's compiled model and its parts with cloudpickle.

    uv run python benchmarks/bench_compile.py [--options nutpie,cache,cache-miss,jax]
                                              [--repeat 2] [--pickle]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "belief" / "data" / "example"


def child(option: str) -> None:
    """Compile and fit the four models once; print a JSON line of times."""
    t_start = time.perf_counter()
    import numpy as np

    import models.compile_cache as cc
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence import outcome_family
    from belief.inputs.evidence_dir import infer_policy, read_evidence_dir
    from belief.posterior.fitter import BeliefFitter, FitSettings

    if option == "nutpie":
        import nutpie

        cc.compile_model = lambda m, label=None: nutpie.compile_pymc_model(m)
    elif option == "jax":
        import jax
        import nutpie

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_compilation_cache_dir", os.environ["JAX_CACHE"])
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        cc.compile_model = lambda m, label=None: nutpie.compile_pymc_model(
            m, backend="jax", gradient_backend="pytensor", freeze_model=False)
    cs = load_candidate_file(EXAMPLE / "candidates.toml").candidates
    ev = read_evidence_dir(EXAMPLE / "evidence", cs).evidence
    policy, _ = infer_policy(ev)
    fitter = BeliefFitter(cs, FitSettings(draws=1000, tune=1000))
    t_ready = time.perf_counter()
    compile_s = {}
    for name, fn in (("gains", fitter.gains._compiled), ("exec_risk", fitter.exec_risk._compiled),
                     ("transfer", lambda: fitter.transfer._compiled(outcome_family(ev.transfer)))):
        t0 = time.perf_counter()
        fn()
        compile_s[name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fitter.fit(ev, policy, 3, 0)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fitter.fit_sensitivity(ev, seed=1)  # compiles on first use
    sens = next(iter(fitter._sensitivity.values()))
    compile_s["sensitivity"] = sens.last_timing.get("compile_s", 0.0)
    fit_s += time.perf_counter() - t0 - compile_s["sensitivity"]
    _ = np
    print(json.dumps({"imports_s": t_ready - t_start, "compile_s": compile_s, "fit_s": fit_s,
                      "stats": dict(cc.stats)}))


def try_pickle() -> None:
    import pickle

    import cloudpickle
    import nutpie

    from belief.inputs.candidate_file import load_candidate_file
    from models.gains import GainsModel

    model = GainsModel(load_candidate_file(EXAMPLE / "candidates.toml").candidates).build()
    compiled = nutpie.compile_pymc_model(model)
    for name, obj in (("nutpie compiled model", compiled),
                      ("its logp C callback", compiled.compiled_logp_func),
                      ("its PyTensor logp Function", compiled.logp_func),
                      ("its numba logp dispatcher", compiled.logp_func.vm.jit_fn)):
        try:
            t0 = time.perf_counter()
            blob = cloudpickle.dumps(obj)
            dump_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pickle.loads(blob)
            print(f"  {name}: {len(blob) / 1e6:.2f} MB, dump {dump_s:.2f} s, "
                  f"load {time.perf_counter() - t0:.2f} s")
        except Exception as err:
            print(f"  {name}: cannot be pickled ({type(err).__name__}: {err})")


def run_child(option: str, caches: Path) -> dict:
    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={caches / 'pytensor'}",
           "NUMBA_CACHE_DIR": str(caches / "numba"), "BELIEF_CACHE_DIR": str(caches / "belief"),
           "JAX_CACHE": str(caches / "jax"), "MPLCONFIGDIR": str(caches / "matplotlib")}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", option], env=env, cwd=ROOT,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{option} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default="nutpie,cache,cache-miss,jax")
    parser.add_argument("--repeat", type=int, default=2, help="warm processes per option")
    parser.add_argument("--pickle", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    if args.pickle:
        print("cloudpickle of nutpie's compiled gains model:")
        try_pickle()
    options = args.options.split(",")
    if "jax" in options:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("jax is not installed: skipping the jax option")
            options.remove("jax")
    rows = []
    for option in options:
        caches = Path(tempfile.mkdtemp(prefix=f"bench-compile-{option}-"))
        kind = "cache" if option == "cache-miss" else option
        cold = run_child(kind, caches)
        warm = []
        for _ in range(args.repeat):
            if option == "cache-miss":
                shutil.rmtree(caches / "belief", ignore_errors=True)
            warm.append(run_child(kind, caches))
        shutil.rmtree(caches, ignore_errors=True)
        rows.append((option, cold, warm))
        print(f"{option}: cold {json.dumps(cold)}\n  warm {json.dumps(warm)}", flush=True)
    print(f"\nload average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    head = (f"{'option':11s} {'compile cold':>12s} {'compile warm':>12s} {'fit cold':>9s} "
            f"{'fit warm':>9s} {'wall cold':>10s} {'wall warm':>10s}")
    print(head + "\n" + "-" * len(head))
    for option, cold, warm in rows:
        med = {k: statistics.median(w[k] if k != "compile_s" else sum(w[k].values())
                                    for w in warm) for k in ("compile_s", "fit_s", "wall_s")}
        print(f"{option:11s} {sum(cold['compile_s'].values()):12.2f} {med['compile_s']:12.2f} "
              f"{cold['fit_s']:9.2f} {med['fit_s']:9.2f} {cold['wall_s']:10.2f} "
              f"{med['wall_s']:10.2f}")
    print("(seconds, summed over the four models; warm = median of", args.repeat, "processes)")


if __name__ == "__main__":
    main()
