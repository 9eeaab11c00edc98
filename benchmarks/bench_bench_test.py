"""A world where a bench safety test opens fine-tuning (issue 16): how often Q runs the bench
test ``ft_bench`` and then ``ft_real_100``, and the test's CVU with its split by channel.

World: :meth:`belief.campaign.synthetic.SyntheticWorld.with_bench_test` — the default world
with ft_real_100 gated (20 pre-campaign bench runs, 0 unsafe: CP UCB_0.95 = 0.139 > α_exec 0.1)
and ``ft_bench`` (60 bench runs of ft_real_100's controller, same true P_exec).  Campaigns:
Q = U0 + β·CVU with β = 1, ``--horizon`` steps, the gate of ``--gate`` (default ``anytime``,
the library's default; the figures below were measured with ``clopper_pearson``, the default
then: ``--gate clopper_pearson`` reproduces them), δ = 0.05,
default CVU settings of a campaign (256 outcomes, ≤ 4 exact refits), order effects off
unless ``--order-effects`` (the library default is on since issue 16), fits with ``--draws``
draws and tuning steps per chain (4 chains), seeds 0 … ``--seeds``−1.

The horizon matters: the test is worth running only if fine-tuning can follow it and its
opening outweighs the steps it takes.  At 2026-12-05 (order effects off, ``--ft-gain 1.0
--pilot 1.0``, 20 seeds): with ``--horizon 3`` Q ran the test in 9/20 and test-then-FT in 6/20
(at step 1 its own belief saw a near tie, two-step values 0.167 for dr_1e7 then DR against
0.147 for the test then FT, while the truth — DR before FT ×1.5, which a model without order
effects cannot see — gives 0.329 against 0.165); with ``--horizon 5`` it ran the test in 19/20
and test-then-FT in 13/20; with ``--horizon 3 --order-effects --stated 0.5`` (the belief can
express DR before FT) in 20/20 and 13/20.  In both, FT followed every opening of the gate
(13/13): the other campaigns are tests whose unsafe count kept the gate closed.

``--ft-gain G --pilot E`` runs a variant in which fine-tuning is worth opening: ft_real_100's
true logit gain is G (default world: 0.35) and the evidence holds an earlier fine-tuning pilot's
gain estimate E ± 0.2 (logit scale) of ft_real_100 (the world of
``notebooks/06_order_effects.ipynb``, without its order effects).

``--order-effects`` fits the gains model with order effects (the library's default) and
``--stated M`` adds the stated method-pair prior γ_{DR→FT} ~ N(M, 0.1²) (the notebook's setting);
``--chains C --ess-min E --act-on-unreliable`` shorten the fits (the notebook's fast mode uses
2 chains, 300 draws, ESS ≥ 100 and acts on fits that miss the targets).

Printed: per seed the choices; then the number of campaigns that ran ft_bench and later
ft_real_100 (with its exact 95 % Clopper–Pearson interval), how many ran ft_bench at all, and
at the step where ft_bench was chosen its CVU ± cvu_se (outcome and draws error), its safety
part cvu_safety_value ± its outcome MCSE (:mod:`belief.decision.cvu.channels`), and the mean
of each over the seeds ± its standard error across seeds.

    nice -n 10 uv run python benchmarks/bench_bench_test.py [--seeds 20] [--horizon 3] \\
        [--draws 500] [--ft-gain 1.0 --pilot 1.0] > bench_test.log 2>&1 &
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _world(seed: int, ft_gain: float | None, pilot: float | None, stated: float | None):
    """The bench-test world, or its variant with a larger FT gain and a pilot's estimate."""
    from dataclasses import replace

    import pandas as pd

    from belief.campaign.synthetic import EVAL_PROTOCOL, SyntheticWorld

    class PilotedWorld(SyntheticWorld):
        def initial_evidence(self):
            ev = super().initial_evidence()
            if pilot is not None:
                ev["gain_estimates"] = pd.DataFrame([{
                    "step": 0, "candidate": "ft_real_100", "policy": self.initial_policy,
                    "eval_protocol": EVAL_PROTOCOL, "source": "ft_pilot", "estimate": pilot,
                    "se": 0.2}])
            return ev

    from belief.inputs.interactions import InteractionPrior

    base = SyntheticWorld.with_bench_test(seed=seed)
    if ft_gain is None and pilot is None and stated is None:
        return base
    st = () if stated is None else (InteractionPrior("DR", "FT", stated, 0.1, "method"),)
    truth = tuple(replace(t, logit_gain=ft_gain) if t.candidate.id == "ft_real_100"
                  and ft_gain is not None else t for t in base.truth)
    return PilotedWorld(seed=seed, truth=truth, stated_interactions=st)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=3)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--ft-gain", type=float, default=None)
    parser.add_argument("--order-effects", action="store_true")
    parser.add_argument("--stated", type=float, default=None)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--ess-min", type=float, default=None)
    parser.add_argument("--act-on-unreliable", action="store_true")
    parser.add_argument("--pilot", type=float, default=None)
    parser.add_argument("--gate", default="anytime",
                        help="the safety gate's bound: anytime, clopper_pearson or posterior")
    args = parser.parse_args()

    from belief.campaign.loop import CampaignSettings, run_campaign
    from belief.decision.safety import SafetyGate
    from belief.lab.calibration import binomial_interval
    from belief.posterior.fitter import BeliefFitter, FitSettings
    from models.gains import GainsPriors

    rows = []
    t_all = time.perf_counter()
    for seed in range(args.seeds):
        world = _world(seed, args.ft_gain, args.pilot, args.stated)
        fit = FitSettings(draws=args.draws, tune=min(args.draws, 500), chains=args.chains,
                          ess_min=args.ess_min)
        settings = CampaignSettings(horizon=args.horizon, beta=1.0, seed=seed, fit=fit,
                                    act_on_unreliable=args.act_on_unreliable,
                                    gate=SafetyGate(method=args.gate))
        fitter = BeliefFitter(world.candidates, fit,
                              gains_priors=GainsPriors(order_effects=args.order_effects))
        t0 = time.perf_counter()
        res = run_campaign(world, settings, fitter=fitter)
        chosen = [str(d.attrs["chosen"]) for d in res.decisions]
        row = {"seed": seed, "chosen": chosen, "seconds": time.perf_counter() - t0}
        d0 = res.decisions[0]
        ids = [str(c) for c in d0["candidate"].values]
        q_chosen = (float(d0["q"].sel(candidate=d0.attrs["chosen"]))
                    if d0.attrs["chosen"] in ids else float("nan"))
        b0 = d0.sel(candidate="ft_bench")
        step0 = (f"step 0: ft_bench Q {float(b0['q']):.4f} (CVU {float(b0['cvu']):.4f}, safety "
                 f"part {float(b0['cvu_safety_value']):.4f} ± "
                 f"{float(b0['cvu_safety_value_mcse']):.4f}; {b0['cvu_safety'].values}), "
                 f"chosen {d0.attrs['chosen'] or '(stop)'} Q {q_chosen:.4f}")
        if "ft_bench" in chosen:
            k = chosen.index("ft_bench")
            d = res.decisions[k].sel(candidate="ft_bench")
            # whether the test's outcome opened ft_real_100's gate (the next decision's M^safe;
            # unknown when the test was the last step)
            opened = (bool(res.decisions[k + 1]["safe"].sel(candidate="ft_real_100"))
                      if k + 1 < len(res.decisions) else None)
            row.update(step=k, ft_after="ft_real_100" in chosen[k + 1:], opened=opened,
                       **{v: float(d[v]) for v in ("cvu", "cvu_se", "cvu_own", "cvu_order",
                                                  "cvu_safety_value", "cvu_safety_value_mcse",
                                                  "cvu_mcse")})
        rows.append(row)
        extra = (f"  [ft_bench at step {row['step']}: CVU {row['cvu']:.4f} ± {row['cvu_se']:.4f},"
                 f" safety part {row['cvu_safety_value']:.4f} ± "
                 f"{row['cvu_safety_value_mcse']:.4f}; gate opened: {row['opened']}]"
                 if "step" in row else "")
        print(f"seed {seed}: {' → '.join(chosen) or '(stopped)'}  ({row['seconds']:.0f} s)"
              f"{extra}\n    {step0}", flush=True)
    n = len(rows)
    ran = [r for r in rows if "step" in r]
    both = sum(r.get("ft_after", False) for r in rows)
    lo, hi = binomial_interval(both, n)
    lo_b, hi_b = binomial_interval(len(ran), n)
    print(f"\n{n} seeds, horizon {args.horizon}, {args.draws} draws × {args.chains} chains, β = 1, "
          f"ft_real_100 true logit gain {args.ft_gain or 0.35}, pilot estimate {args.pilot}, "
          f"order effects {args.order_effects}, stated γ_DR→FT {args.stated}; "
          f"{time.perf_counter() - t_all:.0f} s")
    print(f"ft_bench then ft_real_100: {both}/{n}, 95 % CP [{lo:.2f}, {hi:.2f}]")
    print(f"ft_bench run at all:       {len(ran)}/{n}, 95 % CP [{lo_b:.2f}, {hi_b:.2f}]")
    opened = [r for r in ran if r["opened"]]
    print(f"the test opened ft_real_100's gate in {len(opened)} of the {len(ran)} campaigns that "
          f"ran it ({sum(r['opened'] is None for r in ran)} ran it last); ft_real_100 ran after "
          f"an opening in {sum(r['ft_after'] for r in opened)}/{len(opened)}")
    if ran:
        for name, se in (("cvu", "cvu_se"), ("cvu_safety_value", "cvu_safety_value_mcse"),
                         ("cvu_own", None), ("cvu_order", None)):
            v = np.array([r[name] for r in ran])
            sd = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else np.nan
            per = (f"; per-seed error median {np.median([r[se] for r in ran]):.4f}"
                   if se else "")
            print(f"ft_bench {name:>17} at its step: mean {v.mean():.4f} ± {sd:.4f} (se across "
                  f"seeds), range [{v.min():.4f}, {v.max():.4f}]{per}")


if __name__ == "__main__":
    main()
