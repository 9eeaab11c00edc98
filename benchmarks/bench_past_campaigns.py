"""Learning order effects from past campaigns (issue 16, ``belief fit --past``).

For every seed s, the current campaign runs si_friction then dr_1e6 in the synthetic world
(seed s); past campaigns k = 1..4 run a random order of the six adaptations in the same world
(seed 1000 s + k).  The gains model is fitted on the current campaign with K = 0, 2, 4 of
them (nested: K = 2 uses the first two) through :func:`belief.workflow.fit.fit` at the
default sampler settings (4 chains × 1000 draws, escalation on).

Truth: in these scripts si_friction is the only actor that interacts with dr_* (no
sim_refresh, no repeats), so the world's multiplicative interaction is exactly additive on the
logit gain: γ(si_friction → dr_m) = g_m · (I − 1) = −0.5 g_m (−0.10 for dr_1e6, −0.25 for
dr_1e7).

Prints, per K: the mean 90 % interval width of γ(si_friction → dr_1e6) and
γ(si_friction → dr_1e7), their coverage (pairs × seeds), the share of gains fits that passed
the convergence check at the first attempt and in the end, the largest R-hat, and the compile
and fit times.

    nohup nice -n 10 uv run python benchmarks/bench_past_campaigns.py --seeds 3 \\
        --ks 0,2,4,8 > /work/runs/bench_past_campaigns.log 2>&1 &

Measured (3 seeds, 2 cores shared with another benchmark; issue 16):

===  ========================  ========================  ==========  ===========  ======
K    90 % width γ(si→dr_1e6)   90 % width γ(si→dr_1e7)   coverage    converged    R-hat
                                                         (both)      1st attempt  max
===  ========================  ========================  ==========  ===========  ======
0    0.486                     0.490                     3/3, 0/3    3/3          1.003
2    0.447                     0.471                     3/3, 1/3    3/3          1.009
4    0.415                     0.443                     3/3, 1/3    3/3          1.005
8    0.385                     0.393                     3/3, 1/3    3/3          1.007
===  ========================  ========================  ==========  ===========  ======

Compile of the campaign model ≈ 85–95 s per K (first fit of a K), then 10–25 s per fit.
With random orders and one run of each adaptation per campaign, a past campaign informs γ only
by comparing campaigns (its own θ offset partly absorbs its own step), so intervals narrow slowly;
γ(si_friction → dr_1e7) = −0.25 lay just outside the then default γ prior's 90 % interval
(± 0.245, scale 0.14), which is why it was not covered at K = 0 in that run.

After the default scale of γ went from 0.14 to 0.25 (``--seeds 3 --ks 0,4``, December 2026):
widths 0.802 / 0.835 at K = 0 and 0.600 / 0.695 at K = 4 (dr_1e6 / dr_1e7), coverage 3/3 and
3/3 for both pairs at both K, 6/6 fits converged at the first attempt, R-hat ≤ 1.007.  The
wider prior leaves more for past campaigns to inform: the dr_1e7 width shrinks by 17 % with
four of them (10 % before).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from belief.campaign.scripted import scripted_campaign, write_evidence_folder
from belief.campaign.synthetic import SyntheticWorld
from belief.inputs.candidate_file import candidates_toml
from belief.workflow.fit import fit

ADAPTATIONS = ["si_friction", "dr_1e6", "dr_1e7", "da_camera", "cotrain", "ft_real_100"]
PAIRS = ["si_friction→dr_1e6", "si_friction→dr_1e7"]


def true_gamma(world: SyntheticWorld, pair: str) -> float:
    a, m = pair.split("→")
    return world._truth[m].logit_gain * (world.interactions[(a, m)] - 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--ks", default="0,2,4")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--out", default=None, help="CSV of every fit")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(args.seeds):
            world = SyntheticWorld(seed=s)
            cur = write_evidence_folder(scripted_campaign(world, ["si_friction", "dr_1e6"]),
                                        Path(tmp, f"s{s}", "current"))
            cfile = Path(tmp, "candidates.toml")
            cfile.write_text(candidates_toml(world.candidates), encoding="utf-8")
            rng = np.random.default_rng([s, 16_016])
            past = []
            for k in range(1, max(ks) + 1):
                wk = SyntheticWorld(seed=1000 * s + k)
                order = list(rng.permutation(ADAPTATIONS))
                past.append(str(write_evidence_folder(scripted_campaign(wk, order),
                                                      Path(tmp, f"s{s}", f"past{k}"),
                                                      wk.candidates)))
            for K in ks:
                t0 = time.perf_counter()
                f = fit(cur, cfile, draws=args.draws, seed=s, sensitivity=False,
                        past=past[:K])
                secs = time.perf_counter() - t0
                a = f.belief.attrs
                post = f.idata["gains"]["posterior"]
                row = {"seed": s, "K": K, "reliable": int(a["gains_reliable"]),
                       "first_attempt": int(int(a["gains_attempts"]) == 1),
                       "rhat_max": float(a["gains_rhat_max"]),
                       "ess_bulk_min": float(a["gains_ess_bulk_min"]),
                       "ess_tail_min": float(a["gains_ess_tail_min"]),
                       "divergences": int(a["gains_divergences"]), "seconds": secs,
                       "tau_campaign": (float(post["tau_campaign"].mean())
                                        if "tau_campaign" in post else np.nan)}
                for p in PAIRS:
                    x = post["gamma"].sel(pair=p).values.ravel()
                    lo, hi = np.quantile(x, [0.05, 0.95])
                    truth = true_gamma(world, p)
                    row[f"width[{p}]"] = hi - lo
                    row[f"cover[{p}]"] = int(lo <= truth <= hi)
                    row[f"mean[{p}]"] = float(x.mean())
                rows.append(row)
                print(pd.DataFrame([row]).to_string(index=False), flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    print("\ntruth:", {p: round(true_gamma(SyntheticWorld(seed=0), p), 3) for p in PAIRS})
    summary = df.groupby("K").agg(
        fits=("seed", "size"),
        **{f"width {p}": (f"width[{p}]", "mean") for p in PAIRS},
        coverage=("cover[si_friction→dr_1e6]", "mean"),
        coverage_dr_1e7=("cover[si_friction→dr_1e7]", "mean"),
        converged_first=("first_attempt", "mean"), converged=("reliable", "mean"),
        rhat_max=("rhat_max", "max"), seconds=("seconds", "median"))
    print("\nsummary (mean over seeds; coverage of the 90 % interval):")
    print(summary.to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
