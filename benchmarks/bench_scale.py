"""``belief fit`` and ``belief decide`` wall time against the number of candidates.

For each size N (default 10, 50, 200, 1000) the script writes a synthetic campaign — a candidate
file of N adaptations over four lenses and three methods per lens (every fifth one drives
hardware, on two hardware groups) and an evidence folder of three sequential paired evaluations,
one stand-alone evaluation of the start policy and safety events of the hardware candidates —
and runs, each in a fresh process with ``nice``:

- ``fit`` **cold**: ``belief fit`` with an empty compiled-model cache (``BELIEF_CACHE_DIR`` a new
  folder): compile + sample (``--draws 500 --tune 500 --chains 2 --no-sensitivity``);
- ``fit`` **warm**: the same command again on the cache the cold run left;
- ``decide``: ``belief decide`` on the belief file the fit wrote (``--effort fast``).

Every run has a time limit (``--timeout`` seconds); a run that exceeds it is killed and reported
as such, and the larger sizes are then skipped for that command (they can only be slower).  A size
whose posterior draws alone would exceed ``--max-gb`` is not run (reported with the estimate):
γ has N (N − 1) pairs and the fit keeps γ and its standard variables for every draw, so
2 × chains × draws × N (N − 1) × 8 bytes (16 GB at N = 1000).  The
table gives seconds and the ratio to the 10-candidate run measured in the same invocation.  The
fit progress lines (compile seconds) are kept in the run folder (``--keep``).

    uv run python benchmarks/bench_scale.py [--sizes 10,50,200,1000] [--timeout 900]
                                            [--max-gb 2] [--keep DIR]

Order effects are the model's default: the gains model then has one γ per ordered pair of
adaptations, N (N − 1) of them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LENSES = ("data", "model", "optimization", "representation")
CHAINS, DRAWS = 2, 500


def candidate_file(n: int) -> str:
    """The TOML of N synthetic adaptations (see the module docstring)."""
    lines = ['[campaign]', 'eval_protocol = "bench"', 'resources = ["compute", "real_h"]', '',
             '[budget]', f'compute = {10.0 * n}', f'real_h = {float(n)}', '',
             '[weights]', 'compute = 0.01', 'real_h = 0.1', '']
    for i in range(n):
        hw = i % 5 == 0
        lines += ['[[candidate]]', f'id = "c{i:04d}"', 'role = "adaptation"',
                  f'lens = "{LENSES[i % 4]}"', f'method = "M{(i // 4) % 3}"',
                  f'cost = {{ compute = {1.0 + i % 7}, real_h = {0.5 if hw else 0.0} }}',
                  f'drives_hardware = {"true" if hw else "false"}',
                  f'repeatable = {"true" if i % 2 == 0 else "false"}']
        if hw:
            lines.append(f'hardware_group = "arm{i % 2}"')
        lines.append('')
    return "\n".join(lines)


def evidence(folder: Path, n: int) -> None:
    """Three steps c0000 → c0001 → c0002 from pi0, one evaluation of pi0, safety events."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["step,candidate,policy,eval_protocol,control_successes,control_trials,"
            "treated_successes,treated_trials,treated_policy"]
    succ = (30, 40, 47, 52)
    for t in range(min(3, n)):
        rows.append(f"{t},c{t:04d},pi{t},bench,{succ[t]},100,{succ[t + 1]},100,pi{t + 1}")
    (folder / "paired_evaluations.csv").write_text("\n".join(rows) + "\n")
    (folder / "policy_evaluations.csv").write_text(
        "step,policy,eval_protocol,successes,trials\n0,pi0,bench,29,100\n")
    hw = [i for i in range(n) if i % 5 == 0][:4]
    (folder / "safety_events.csv").write_text(
        "step,candidate,executions,unsafe,policy\n"
        + "".join(f"0,c{i:04d},50,{i % 3},pi0\n" for i in hw))


def run(cmd: list[str], env: dict[str, str], timeout: float, log: Path) -> float | None:
    """Wall seconds of ``cmd`` (niced), or None when it exceeded ``timeout`` (then killed)."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(["nice", "-n", "10", *cmd], stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return None
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {rc}); see {log}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,50,200,1000")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--max-gb", type=float, default=2.0,
                    help="skip sizes whose draws of γ alone would exceed this (GB)")
    ap.add_argument("--keep", default=None, help="folder for the runs (default: a temporary one)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    belief = [sys.executable, "-m", "belief.cli.main"]
    fit_flags = ["--draws", str(DRAWS), "--tune", "500", "--chains", str(CHAINS),
                 "--no-sensitivity",
                 "--no-progress"]
    results: dict[tuple[str, int], float | None] = {}
    skip: set[str] = set()
    too_big: dict[int, float] = {}
    for n in sizes:
        gb = 2 * CHAINS * DRAWS * n * (n - 1) * 8 / 1e9
        if gb > args.max_gb:
            too_big[n] = gb
            print(f"N={n:5d} not run: the draws of γ alone need ≈ {gb:.1f} GB", flush=True)
            continue
        work = root / f"n{n}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        (work / "candidates.toml").write_text(candidate_file(n))
        evidence(work / "evidence", n)
        env = {**os.environ, "BELIEF_CACHE_DIR": str(work / "cache"), "MPLBACKEND": "Agg"}
        fit = [*belief, "fit", str(work / "evidence"), "--candidates",
               str(work / "candidates.toml"), "--out", str(work / "belief.nc"), *fit_flags]
        decide = [*belief, "decide", str(work / "belief.nc"), "--effort", "fast",
                  "--out", str(work / "decision")]
        for name, cmd in (("fit cold", fit), ("fit warm", fit), ("decide", decide)):
            if name in skip or (name != "fit cold" and results.get(("fit cold", n)) is None):
                results[(name, n)] = None
                continue
            log = work / f"{name.replace(' ', '_')}.log"
            results[(name, n)] = t = run(cmd, env, args.timeout, log)
            shown = "timed out" if t is None else f"{t:.1f} s"
            print(f"N={n:5d} {name:9s} {shown}", flush=True)
            if t is None:
                skip.add(name)
    print(f"\nper-run limit {args.timeout:.0f} s; ratio = time / time at N={sizes[0]} "
          "(same run)\n")
    print(f"{'N':>6} " + "".join(f"{c:>22}" for c in ("fit cold", "fit warm", "decide")))
    for n in sizes:
        cells = []
        for c in ("fit cold", "fit warm", "decide"):
            t, base = results.get((c, n)), results.get((c, sizes[0]))
            if n in too_big:
                cells.append(f"{f'not run (≈{too_big[n]:.0f} GB)':>22}")
            elif t is None:
                cells.append(f"{'> limit / not run':>22}")
            else:
                cells.append(f"{t:9.1f} s ({t / base:5.1f}×)" if base else f"{t:9.1f} s")
        print(f"{n:>6} " + "".join(f"{c:>22}" for c in cells))
    print(f"\nruns in {root}")


if __name__ == "__main__":
    main()
