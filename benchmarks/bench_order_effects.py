"""Recovery of order effects (issue 16): coverage of the 90 % intervals of the step gains of
candidates executed after an interacting one, and of γ, with and without order effects in the
gains model, on the same evidence in the same run.

Worlds: ``SyntheticWorld.varied(v, seed=v)`` for v < ``--worlds`` (every interaction
multiplier of the default world raised to a power U(0, 2)).  Each world runs one scripted
sequence (three sequences, by v mod 3, each with SI before DR, a simulator refresh before DR,
DR before FT and DA before co-training or the reverse), one paired evaluation (100 trials per
arm) per adaptation, the model update recorded in ``model_updates``.  The gains models of
:data:`CONFIGS` (order effects at the default scale, at the scale 0.14 it replaced, without
order effects, and the sparse Laplace option; all four by default, ``--configs`` picks) are
fitted to the final evidence at the fit defaults (4 chains, seed v).

Quantities, per evaluated step k (π_k ← parent via m, history h of actors before it):

- step gain s_k: the model's θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} (without order effects:
  θ_m ρ^{k_m}); truth: ``world.mean_logit_gain(m, h)`` (the world's g_m · Π I[a → m] · d^k);
  "after an interacting one" when some a ∈ h has I[a → m] ≠ 1 in the default world;
- γ_{a→m} for every pair with evidence: truth at the first evaluated execution of m with a in
  its history, ``mean_logit_gain(m, h) − mean_logit_gain(m, h ∖ {a})`` (the world is
  multiplicative, so the additive γ that matches it depends on the step: the first one is
  taken).

Printed: coverage of the central 90 % intervals with exact 95 % Clopper–Pearson intervals,
for each model and subset; the share of fits that pass R-hat ≤ 1.01, ESS ≥ 400 and 0
divergences; median fit seconds (compile excluded).

    uv run python benchmarks/bench_order_effects.py [--worlds 30] [--configs A,B] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

SEQUENCES = (
    ("si_friction", "dr_1e6", "sim_refresh", "dr_1e7", "ft_real_100", "dr_1e6", "da_camera",
     "cotrain"),
    ("dr_1e6", "sim_refresh", "dr_1e7", "ft_real_100", "si_friction", "dr_1e6", "cotrain",
     "da_camera"),
    ("da_camera", "cotrain", "si_friction", "dr_1e7", "ft_real_100", "sim_refresh", "dr_1e6",
     "ft_real_100"),
)


def campaign(v: int):
    from belief.campaign.synthetic import DEFAULT_INTERACTIONS, SyntheticWorld
    from belief.campaign.world import model_update_row
    from belief.inputs.evidence import Evidence

    world = SyntheticWorld.varied(v, seed=v)
    cands = world.candidates
    ev = Evidence(cands).append(**world.initial_evidence())
    steps = []
    for t, m in enumerate(SEQUENCES[v % len(SEQUENCES)]):
        h = list(world.history)
        if cands[m].changes_policy:
            truth = world.mean_logit_gain(m, h)
            interacting = any(DEFAULT_INTERACTIONS.get((a, m), 1.0) != 1.0 for a in set(h))
            drop = {a: truth - world.mean_logit_gain(m, [x for x in h if x != a])
                    for a in dict.fromkeys(h) if a != m}
            steps.append({"step": t, "candidate": m, "truth": truth,
                          "interacting": interacting, "gamma_truth": drop})
        out = world.execute(m, t)
        ev = ev.append(**out.tables(), model_updates=model_update_row(cands, m, t, "-"))
    return world, ev, steps


def step_means(idata, model) -> tuple[np.ndarray, list[int]]:
    """Posterior draws (S, K) of every evaluated step's mean and the slots they belong to."""
    post = idata["posterior"]
    const = idata["constant_data"]
    vias = [str(x) for x in const["via"].values]
    eff = post["effect"].stack(s=("chain", "draw")).transpose("s", "candidate")
    rho = post["rho"].stack(s=("chain", "draw")).values
    out, slots = [], []
    for k, m in enumerate(vias):
        if not m:
            continue
        mean = eff.sel(candidate=m).values * rho ** float(const["repeats"].values[k])
        if "gamma" in post:
            g = post["gamma"].stack(s=("chain", "draw")).transpose("s", "pair")
            actors = [str(a) for a in const["actor"].values]
            hist = const["history"].values[k]
            for a, on in zip(actors, hist, strict=True):
                label = f"{a}→{m}"
                if on and label in g["pair"].values:
                    mean = mean + g.sel(pair=label).values
        out.append(mean)
        slots.append(k)
    return np.stack(out, -1), slots


CONFIGS = {"order effects": {"order_effects": True},
           "order effects (scale 0.14)": {"order_effects": True, "gamma_sd": 0.14},
           "no order effects": {"order_effects": False},
           "laplace": {"order_effects": True, "gamma_prior": "laplace"}}
"""The gains models compared: the default (σ_e = 0.25), the scale 0.14 it replaced (the
default before December 2026), the model without order effects, and the sparse option
(``gamma_prior = "laplace"``, the same s.d.)."""


def covered(draws: np.ndarray, truth: float, level: float = 0.9) -> bool:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return bool(lo <= truth <= hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=30)
    parser.add_argument("--out", default="benchmarks/results/order_effects.json")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"gains models to fit, comma-separated from {list(CONFIGS)}")
    args = parser.parse_args()
    labels = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in labels if c not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {list(CONFIGS)}")

    from belief.lab.calibration import binomial_interval
    from belief.posterior.diagnostics import CHECK_VARS, check_convergence
    from models.gains import GainsModel, GainsPriors

    rows, gam_rows, fits = [], [], []
    models: dict[str, GainsModel] = {}
    for v in range(args.worlds):
        world, ev, steps = campaign(v)
        for label in labels:
            pri = GainsPriors(**CONFIGS[label])
            model = models.setdefault(label, GainsModel(world.candidates, pri))
            t0 = time.perf_counter()
            idata = model.fit(ev.paired, world.policy, policy_evals=ev.policy_evals,
                              gain_estimates=ev.gain_estimates, model_updates=ev.model_updates,
                              seed=v)
            secs = time.perf_counter() - t0 - model.last_timing.pop("compile_s", 0.0)
            conv = check_convergence(idata, CHECK_VARS["gains"])
            fits.append({"world": v, "model": label, "reliable": conv.reliable,
                         "reason": conv.reason, "seconds": secs})
            draws, slots = step_means(idata, model)
            names = list(idata["constant_data"]["policy"].values)
            vias = [str(x) for x in idata["constant_data"]["via"].values]
            evaluated = [(k, vias[k]) for k in slots]
            for (k, m), st in zip(evaluated, steps, strict=True):
                assert m == st["candidate"], (names[k], m, st)
                rows.append({"world": v, "model": label, "candidate": m,
                             "interacting": st["interacting"],
                             "covered": covered(draws[:, slots.index(k)], st["truth"])})
            if "gamma" in idata["posterior"]:
                g = idata["posterior"]["gamma"].stack(s=("chain", "draw"))
                seen: set[str] = set()
                for st in steps:
                    for a, truth in st["gamma_truth"].items():
                        pair = f"{a}→{st['candidate']}"
                        if pair in seen or pair not in g["pair"].values:
                            continue
                        seen.add(pair)
                        x = g.sel(pair=pair).values
                        lo, hi = np.quantile(x, [0.05, 0.95])
                        gam_rows.append({"world": v, "model": label, "pair": pair,
                                         "truth": truth, "interacting": abs(truth) > 1e-12,
                                         "covered": covered(x, truth), "width": hi - lo})
        print(f"world {v}: " + "; ".join(
            f"{f['model']}: {'ok' if f['reliable'] else f['reason']} ({f['seconds']:.0f} s)"
            for f in fits[-len(labels):]), flush=True)

    df, gdf, fdf = pd.DataFrame(rows), pd.DataFrame(gam_rows), pd.DataFrame(fits)

    def line(sub: pd.DataFrame, what: str) -> str:
        n, hits = len(sub), int(sub["covered"].sum())
        lo, hi = binomial_interval(hits, n)
        return f"{what:<58} {hits:>4}/{n:<4} = {hits / max(n, 1):.3f}  [{lo:.3f}, {hi:.3f}]"

    print(f"\ncoverage of central 90 % intervals ({args.worlds} worlds; 95 % CP intervals)")
    for label in labels:
        sub = df[df["model"] == label]
        print(line(sub[sub["interacting"]], f"{label}: step gains after an interacting one"))
        print(line(sub[~sub["interacting"]], f"{label}: other step gains"))
    for label in labels:
        sub = gdf[gdf["model"] == label] if len(gdf) else gdf
        if not len(sub):
            continue
        for inter, what in ((True, "interacting pairs (truth ≠ 0)"),
                            (False, "non-interacting pairs (truth = 0)")):
            part = sub[sub["interacting"] == inter]
            print(line(part, f"{label}: γ of {what}")
                  + f"  mean 90 % width {part['width'].mean():.3f}")
    for label in labels:
        sub = fdf[fdf["model"] == label]
        print(f"{label}: {int(sub['reliable'].sum())}/{len(sub)} fits converged at the "
              f"defaults; median fit {sub['seconds'].median():.1f} s")
    from pathlib import Path

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"steps": rows, "gamma": gam_rows, "fits": fits},
                                         default=float, indent=1))


if __name__ == "__main__":
    main()
