"""Wall times of the statistician's commands, cold and warm, against a baseline checkout.

For each side — this checkout ("new") and a baseline commit ("base") — and each command below,
the script measures

- **cold**: every cache empty (a fresh PyTensor compiledir, numba cache, belief compiled-model
  cache, matplotlib config and XDG cache folder, all in a temporary folder), one run;
- **warm**: the same command again with the caches the cold run left (the median of
  ``--repeat`` runs).

Commands, on the shipped example (``belief/data/example``):

    belief --help
    belief fit EVIDENCE --candidates candidates.toml --out belief.nc
    belief check belief.nc
    belief decide belief.nc --functional lcb:0.2 --beta 1 --alpha-exec 0.1 --out decision
    belief report belief.nc --decision decision --out report.html
    python -c "import belief; belief.load('belief.nc')"
    belief demo [--steps 2 --draws 200 with --quick]

``check``, ``decide``, ``report`` and the load read the ``belief.nc`` that the side's own cold
``fit`` wrote (a belief file is only read by the version that wrote it).  Runs of the two sides
alternate (base, new, base, new, …) so that a change of machine load hits both.

The baseline is a ``git worktree`` of ``--base`` (default: ``git merge-base HEAD main``, i.e. the
code this branch started from, or main itself once main is merged in) with its own virtual
environment made by ``uv sync`` from *its* ``pyproject.toml`` (so the baseline installs exactly
as a fresh clone of that commit does).  Both live under ``--workdir`` (default
``/tmp/belief-bench-cli``) and are re-used by later runs (``--fresh`` rebuilds them).  "new" is
the checkout this script is in, run with the interpreter running the script.

    uv run python benchmarks/bench_cli.py [--base REF] [--repeat 3] [--cold-repeat 1] [--quick]
                                          [--only fit,check] [--base-bytecode] [--warm-prep]

``--warm-prep`` fits the two belief files with the caller's own caches (faster when they are
warm; the measured runs still use empty, then their own, caches).

``--base-bytecode`` compiles the baseline's packages to bytecode too (``uv sync
--compile-bytecode``), to separate what this branch's ``[tool.uv] compile-bytecode`` brings from
the code changes.  Prints one table: cold and warm seconds per side, and base/new ratios
(> 1 = new is faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = Path("belief") / "data" / "example"
ORDER = ("help", "fit", "check", "decide", "report", "load", "demo")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def base_interpreter() -> str:
    return os.environ.get("UV_PYTHON") or getattr(sys, "_base_executable", sys.executable)


def prepare_base(ref: str, workdir: Path, fresh: bool, bytecode: bool) -> tuple[Path, Path]:
    """A worktree of ``ref`` with its own venv; returns (checkout, python)."""
    commit = git("rev-parse", ref)
    tree = workdir / f"base-{commit[:12]}"
    if fresh and tree.exists():
        git("worktree", "remove", "--force", str(tree))
    if not tree.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", str(tree), commit)
    env = {**os.environ, "UV_PYTHON": base_interpreter()}
    env.pop("VIRTUAL_ENV", None)
    cmd = ["uv", "sync", "--quiet"] + (["--compile-bytecode"] if bytecode else [])
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    return tree, tree / ".venv" / "bin" / "python"


def commands(side: dict, out: Path, quick: bool) -> dict[str, list[str]]:
    py, ex = str(side["python"]), side["tree"] / EXAMPLE
    belief = [str(Path(py).parent / "belief")]
    nc = str(out / "belief.nc")
    demo = ["--steps", "2", "--draws", "200"] if quick else []
    return {
        "help": [*belief, "--help"],
        "fit": [*belief, "fit", str(ex / "evidence"), "--candidates",
                str(ex / "candidates.toml"), "--out", str(out / "fit.nc")],
        "check": [*belief, "check", nc],
        "decide": [*belief, "decide", nc, "--functional", "lcb:0.2", "--beta", "1",
                   "--alpha-exec", "0.1", "--out", str(out / "decision")],
        "report": [*belief, "report", nc, "--decision", str(out / "decision"), "--out",
                   str(out / "report.html")],
        "load": [py, "-c", f"import belief; belief.load({nc!r})"],
        "demo": [*belief, "demo", "--out", str(out / "demo"), *demo],
    }


def cache_env(folder: Path) -> dict[str, str]:
    """Environment whose every compile cache lives in ``folder`` (empty = cold)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update({"PYTENSOR_FLAGS": f"base_compiledir={folder / 'pytensor'}",
                "NUMBA_CACHE_DIR": str(folder / "numba"),
                "BELIEF_CACHE_DIR": str(folder / "belief"),
                "MPLCONFIGDIR": str(folder / "matplotlib"),
                "XDG_CACHE_HOME": str(folder / "xdg")})
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, int]:
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
        return time.perf_counter() - t0, rc


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="baseline commit (default: merge-base of "
                                                     "HEAD and main)")
    parser.add_argument("--workdir", default="/tmp/belief-bench-cli")
    parser.add_argument("--fresh", action="store_true", help="rebuild the baseline worktree")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs per command (median)")
    parser.add_argument("--cold-repeat", type=int, default=1,
                        help="cold runs per command, each with fresh caches (median)")
    parser.add_argument("--quick", action="store_true", help="demo with 2 steps and 200 draws")
    parser.add_argument("--only", default=",".join(ORDER),
                        help=f"comma-separated subset of {','.join(ORDER)}")
    parser.add_argument("--base-bytecode", action="store_true",
                        help="compile the baseline's packages to bytecode too")
    parser.add_argument("--warm-prep", action="store_true",
                        help="fit the belief files that check/decide/report/load read with "
                             "this environment's own (warm) caches instead of empty ones")
    args = parser.parse_args()
    wanted = [c for c in ORDER if c in args.only.split(",")]
    ref = args.base or git("merge-base", "HEAD", "main")
    workdir = Path(args.workdir)
    tree, python = prepare_base(ref, workdir, args.fresh, args.base_bytecode)
    sides = {"base": {"tree": tree, "python": python},
             "new": {"tree": ROOT, "python": Path(sys.executable)}}
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    log = scratch / "commands.log"
    dirty = " + uncommitted changes" if git("status", "--porcelain") else ""
    dirty = " + uncommitted changes" if git("status", "--porcelain") else ""
    print(f"base {git('rev-parse', '--short', ref)} ({tree}); new {ROOT} "
          f"({git('rev-parse', '--short', 'HEAD')}{dirty})")
    print(f"log {log}; load average at start {load_average()}", flush=True)
    times: dict[tuple[str, str, str], list[float]] = {}
    failures: list[str] = []
    # the belief file each side reads: its own fit's output, written once up front
    for name, side in sides.items():
        out = scratch / name / "inputs"
        out.mkdir(parents=True)
        cmd = commands(side, out, args.quick)
        prep_env = (cache_env(scratch / name / "prep-cache") if not args.warm_prep else
                    {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",
                                                                       "PYTHONPATH")})
        seconds, rc = run(cmd["fit"], prep_env, out, log)
        if rc != 0:
            raise SystemExit(f"{name}: belief fit failed (exit {rc}); see {log}")
        (out / "fit.nc").rename(out / "belief.nc")
        side["inputs"] = out
    for command in wanted:
        for rep in range(max(args.cold_repeat, 1)):
            for name, side in sides.items():
                caches = scratch / name / f"cache-{command}-{rep}"
                shutil.rmtree(caches, ignore_errors=True)
                env = cache_env(caches)
                work = side["inputs"]
                cmd = commands(side, work, args.quick)[command]
                runs = ["cold"] + (["warm"] * args.repeat if rep == 0 else [])
                for kind in runs:
                    seconds, rc = run(cmd, env, work, log)
                    if rc not in (0, 1):  # check exits 1 on failed diagnostics, demo on a stop
                        failures.append(f"{name} {command} {kind}: exit {rc}")
                    times.setdefault((name, command, kind), []).append(seconds)
                    print(f"  {name:4s} {command:6s} {kind}: {seconds:7.2f} s  (exit {rc}, "
                          f"load {load_average()})", flush=True)
    print(f"\nload average at end {load_average()}")
    head = (f"{'command':8s} {'base cold':>10s} {'new cold':>9s} {'ratio':>6s}   "
            f"{'base warm':>10s} {'new warm':>9s} {'ratio':>6s}")
    print(head)
    print("-" * len(head))
    for command in wanted:
        row = f"{command:8s}"
        for kind in ("cold", "warm"):
            b = statistics.median(times[("base", command, kind)])
            n = statistics.median(times[("new", command, kind)])
            row += f" {b:10.2f} {n:9.2f} {b / n:6.2f}x  "
        print(row)
    print("(seconds; cold = median of", max(args.cold_repeat, 1), "run(s) with empty caches, "
          "warm = median of", args.repeat, "runs right after; ratio = base / new)")
    for key, values in sorted(times.items()):
        print(f"  {key[0]} {key[1]} {key[2]}: " + ", ".join(f"{v:.2f}" for v in values))
    if failures:
        print("FAILED RUNS:\n  " + "\n  ".join(failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
