"""Cost and accuracy of each ``--effort`` level of ``belief decide`` on one belief.

For each level, ``belief decide BELIEF --effort LEVEL`` runs once to warm up (compiled models,
OS caches), then once per seed; the table gives the median wall time, the median over the
candidates of CVU's reported standard error (``cvu_se`` in decision.nc, the seed-0 run), the
largest one, the chosen candidate at each seed (the argmax's stability across CVU's Monte Carlo
seeds) and Pr(flip).  The ratio column divides each level's median time by the ``default``
level's, measured in the same run.

    uv run python benchmarks/bench_effort.py BELIEF [--levels fast,default,thorough]
        [--seeds 0,1,2] [--out /tmp/belief-bench-effort]

BELIEF: e.g. ``belief fit belief/data/example/evidence --candidates
belief/data/example/candidates.toml --out belief.nc`` (the README example).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(belief: str, level: str, seed: int, out: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "belief.cli.main", "decide", belief, "--effort", level,
           "--seed", str(seed), "--out", str(out), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("belief")
    parser.add_argument("--levels", default="fast,default,thorough")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="/tmp/belief-bench-effort")
    parser.add_argument("--extra", default="", help="more decide flags, space-separated")
    args = parser.parse_args()
    import numpy as np
    import xarray as xr

    seeds = [int(s) for s in args.seeds.split(",")]
    extra = args.extra.split()
    rows = {}
    for level in args.levels.split(","):
        out = Path(args.out) / level
        run(args.belief, level, seeds[0], out / "warm", extra)
        times, chosen, se_med, se_max, flip = [], [], None, None, []
        for seed in seeds:
            folder = out / f"seed{seed}"
            times.append(run(args.belief, level, seed, folder, extra))
            with xr.open_dataset(folder / "decision.nc") as ds:
                chosen.append(str(ds.attrs["chosen"]) if not ds.attrs.get("stop") else "stop")
                flip.append(float(ds.attrs["flip_probability"]))
                if se_med is None:
                    se = ds["cvu_se"].values.astype(float)
                    se_med, se_max = float(np.nanmedian(se)), float(np.nanmax(se))
        rows[level] = (statistics.median(times), times, se_med, se_max, chosen, flip)
        print(f"{level}: {', '.join(f'{t:.1f}' for t in times)} s; chosen {chosen}",
              flush=True)
    base = rows.get("default", next(iter(rows.values())))[0]
    print("\n| level | median s | × default | runs (s) | median cvu_se | max cvu_se | chosen "
          "by seed | Pr(flip) |")
    print("|---|---|---|---|---|---|---|---|")
    for level, (med, times, se_med, se_max, chosen, flip) in rows.items():
        print(f"| {level} | {med:.1f} | {med / base:.2f} | {', '.join(f'{t:.1f}' for t in times)}"
              f" | {se_med:.4f} | {se_max:.4f} | {', '.join(chosen)} | "
              f"{', '.join(f'{f:.2f}' for f in flip)} |")


if __name__ == "__main__":
    main()
