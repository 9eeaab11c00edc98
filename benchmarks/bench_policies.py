"""Allocation policies on many seeded synthetic worlds: final true J, regret, budget, safety.

Every policy (Q with CVU, U0-greedy, MV-greedy, Thompson on net gain, round-robin, the
oracle that knows the truth, ``plan``, the open-loop planner on the belief,
:mod:`belief.decision.planner`, and the peer rules ``ei_cost``, ``kg_cost``, ``ucb_bwk``,
``pbgi`` of :mod:`belief.decision.peers`, selectable with ``--policies``) runs on the same
worlds (``SyntheticWorld.varied(v)``: true gains, costs, interactions and hardware risk
perturbed) with the same budgets and feasibility rules.
Two regrets against the oracle (the one-step greedy allocator on the *true* expected gains, so
regret can be negative): in final success, J_final(oracle) − J_final(policy), and in net value
— what the allocator maximises — V = (J_final − J_0) − λᵀ(budget spent), regret
V(oracle) − V(policy).  Campaigns here act
on beliefs that still fail the convergence checks after the 2x/4x refits
(``act_on_unreliable=True``), so that the gate does not cut campaigns short and confound the
comparison; the number of such decisions is reported.

The limit (issue 18): every policy's net value against the clairvoyant planner's V* on the same
world (:func:`belief.lab.clairvoyant.clairvoyant_plan`, exact over the expected dynamics):
regret V* − V and the fraction V/V* captured, mean over worlds with a 90 % percentile bootstrap
interval over worlds (4000 resamples).  V* bounds the *expected* net value of any policy; one
campaign's realised V can exceed it by the luck of its outcomes, so single regrets can be
negative (their number is printed).  ``--continuations`` adds Q with a non-myopic CVU
continuation (``q_lookahead2``, ``q_rollout2``, …; ``CVUSettings.continuation``, with
``--inner`` inner outcomes) as further rows; ``--gains-arm NAME:FIELD=V`` adds Q with other
gains-model priors (``q_NAME``; e.g. ``no_order:order_effects=false``, the belief without
order effects: a belief change before/after on the same worlds in one run); ``--cvu-arm
NAME:FIELD=V`` adds Q with other CVU settings (e.g. ``plugin:noise_correction=false``, CVU
without the noise-bias correction of :mod:`belief.decision.cvu.noise`); ``--stated-arm SD``
adds Q given each world's true order effects as stated priors of s.d. SD (``q_statedSD``;
:meth:`belief.campaign.synthetic.SyntheticWorld.interaction_priors`: what knowing the order
effects in advance is worth), and ``--stated-sd SD`` states them in every arm (every row
named ``…_statedSD``: e.g. a look-ahead given the order effects); ``--past K`` fits every arm's
gains model on K past campaigns of its world too (rows ``…_pastK``;
:func:`belief.campaign.scripted.random_past_campaigns`: each runs every adaptation once, in a
random order, and a world has the same K past campaigns whatever the current campaign's seed):
what a team's history is worth to a policy; the old one-step oracle stays as ``oracle``.
``--gate`` picks the safety gate's bound (default ``anytime``, the library's; every figure
below dated before it became the default was measured with ``--gate clopper_pearson``).
``--family bench_test`` runs the same worlds with ft_real_100 gated at the start (20
pre-campaign bench runs instead of 150) and a bench safety test ``ft_bench`` that can open it
(:func:`belief.campaign.synthetic.benchmark_world`): a family where a diagnosis opens a
candidate.  The clairvoyant knows P_exec and never runs the test, so its V* is the varied
world's; rows record their family and a summary holds one family.  Measured (2026-12-07, at
638dfe5, one campaign per world, two processes of 10 worlds, ``--family bench_test --policies q
--continuations lookahead2 --inner 8 --truth-runs 0``, ≈ 24 min each): V* runs ft_real_100 in
16 worlds (without it V* keeps 0.893 there); one-step Q 0.627 [0.530, 0.721] of V* and never
ran the test (against 0.760 on the same worlds and seeds without the gate, −0.134 [−0.240,
−0.023] paired; its CVU of the test is 0 up to Monte Carlo error: FT's gain is still to be
learned by a pilot that pays only once FT can follow, two steps of information); the two-step
look-ahead 0.708 [0.622, 0.791] (+0.081 [+0.019, +0.153] over Q; 10.6 s per decision against
2.1 s), which ran the test in 2 of 20 campaigns, as the 7th of 8 steps (0.855 without the
gate, below).

The price of not knowing (``--truth-runs``, default 50 noise runs per world; 0 skips): each Q
row's rule run on the truth (:func:`belief.lab.clairvoyant.lookahead_oracle`: one-step Q
is the depth-1 rollout, a rollout row its depth, ``lookahead2`` the best plan of ≤ 3 steps;
rows record their continuation, older rows are mapped by name, :func:`truth_rule`), V/V* on
the truth beside the campaigns' V/V*, and their difference paired over worlds: 1 − the first
is the rule's myopia; the difference is what not knowing the truth cost — learning, the
safety gate under uncertainty (about 1.7 % of V*, ``bench_clairvoyant.py --decompose``), not
seeing η exactly, Monte Carlo error, the luck of one campaign per world, and for rows whose
estimator falls back to one_step in some decisions (``auto``; their use is printed) that
fallback.  Measured on the rows of four runs at 46a6915/82ab918 (horizon 8, the defaults above;
``--policies q --stated-arm 0.1``, ``--policies "" --continuations rollout2`` with and
without ``--stated-sd 0.1``, ``--continuations rollout3+psis --inner 8`` with and without;
each over ``--world-list 0,…,9`` and ``10,…,19``), summarised with ``--from-json … --truth-runs
200``: Q 0.915 on the truth, 0.767 in the campaigns, not knowing +0.148 [+0.063, +0.243]; the
depth-3 rollout told the order effects 0.983 / 0.878, +0.105 [+0.061, +0.149].

    uv run python benchmarks/bench_policies.py [--worlds 20] [--horizon 8] [--workers 2]
        [--seeds 3] [--continuations lookahead2,rollout2,lookahead2+psis] [--inner 8]
        [--world-list 0,3]
        [--gains-arm no_order:order_effects=false] [--cvu-arm plugin:noise_correction=false]

``--seeds K`` runs K campaigns per world (seeds v, 1000 + v, …;
:func:`belief.campaign.many.campaign_seed`): the truth and V* are the world's, the outcomes and
bench runs the seed's; every interval then resamples worlds, each the mean of its K campaigns,
and paired differences pair world means (one campaign per world is noisy: single worlds swing
by ±0.5 between arms).
``--campaign-list 1,2`` runs only those campaigns (to add campaigns to stored rows of k = 0;
summarise the files together with ``--from-json``).
Measured the same way for the depth-3 rollout (``--policies "" --continuations rollout3+psis
--inner 8``, with and without ``--stated-sd 0.1``; the stored k = 0 rows plus ``--campaign-list
1,2``, two processes of 10 worlds, ≈ 45 min each; summarised with ``--from-json`` beside Q's
three campaigns): V/V* 0.773 [0.713, 0.830] (one campaign per world had given 0.791), − Q
+0.046 [+0.004, +0.089] paired over worlds; told the order effects 0.849 [0.796, 0.897], − Q
+0.122 [+0.078, +0.170], − the rollout not told +0.076 [+0.037, +0.117]; 16.0 s per step against
Q's 5.2 s (the decision alone 13.2 s against 2.5 s).  Not knowing (``--truth-runs 50``): Q
+0.196, the rollout +0.218, told the order effects +0.142 [+0.097, +0.194].
The other arms the same way (stored k = 0 rows plus ``--campaign-list 1,2`` at 9283381:
``--policies "" --stated-arm 0.1``, ``--policies "" --continuations rollout2`` with and without
``--stated-sd 0.1``; paired differences with the bench's ``_world_means`` and ``_boot``): told
the order effects, one-step Q 0.772 [0.703, 0.837] (− Q not told +0.044 [−0.003, +0.096]), the
depth-2 rollout 0.814 [0.759, 0.864] (− one-step Q told +0.042 [+0.006, +0.078]), the depth-3
rollout − one-step Q told +0.078 [+0.038, +0.123] and − depth 2 told +0.036 [+0.014, +0.059]
(depth 2 ran the ``auto`` estimator, depth 3 PSIS forced; decision alone 10.4 s and 13.0 s).
Not told, the depth-2 rollout 0.766 [0.703, 0.825] (− Q +0.038 [+0.005, +0.071]; depth 3 − it
+0.008 [−0.024, +0.039]).
Measured (``--policies q --seeds 3``, worlds 0–9 and 10–19 in two processes, 22 min each
here; the k = 0 campaigns repeat the one-campaign runs' histories exactly): Q captures 0.727
[0.664, 0.786] of V* (one campaign per world had given 0.767 [0.666, 0.859]), min over world
means 0.312 (world 16); on the truth its rule keeps 0.915, so not knowing costs +0.187 [+0.133,
+0.247].

Past campaigns (``--past 4``, one campaign per world, at 2735fb0, two processes of 10 worlds:
``--policies q --past 4`` ≈ 20 min, the baseline ``--policies q --continuations rollout3+psis
--inner 8`` ≈ 29 min, ``--policies "" --continuations rollout3+psis --inner 8 --past 4``
≈ 41 min; paired over worlds): one-step Q 0.779 [0.698, 0.856] against 0.760 [0.656, 0.857]
without them, +0.019 [−0.072, +0.117]; the depth-3 rollout 0.807 [0.726, 0.881] against 0.769
[0.678, 0.850], +0.037 [−0.036, +0.115] (and − one-step Q with the same past +0.028 [−0.016,
+0.078]); both differences are printed by the summary (each ``…_pastK`` row against its twin
without).  With one campaign per world neither is distinguishable from zero, nor from what
stating the order effects buys the rollout (+0.076 [+0.037, +0.117] over the rollout not told,
three campaigns per world, above).  Four past campaigns teach γ slowly: across them a pair is
seen in both orders with probability 7/8 (never within one campaign), and each campaign's own
offsets absorb part of it (``bench_past_campaigns``: the γ interval narrows by a sixth to a
quarter at K = 4).  A step costs 14.7 s (one-step) and 29.2 s
(rollout) with the past against 5.7 s and 16.2 s without: the gains model is fitted on five
campaigns' evidence.  (The k = 0 baseline here, Q 0.760 and the rollout 0.769, differs from the
earlier one-campaign runs, 0.767 and 0.791: the gains model's graph changed since — stated
priors as data — and close decisions flip with the draws.)

The two-step look-ahead (``--policies q --continuations lookahead2 --inner 8 --truth-runs 0``
at a9daf34, one campaign per world, two processes of 10 worlds, ≈ 27 min each; its Q rows
repeat the histories of the rows above exactly): 0.855 [0.791, 0.916] of V*, − Q +0.094
[+0.025, +0.180], − the depth-3 rollout of the past-campaign baseline runs above +0.085
[+0.022, +0.167] (paired over worlds); 11.9 s per decision against 2.4 s.  Three campaigns per
world (the same command with ``--campaign-list 1,2`` at 872044c, two processes of 10 worlds,
≈ 65 min each, summarised with ``--from-json`` together with the k = 0 rows): **0.814 [0.754,
0.867]** against Q's 0.733 [0.665, 0.796], − Q **+0.081 [+0.043, +0.122]** paired over worlds;
the decision alone 13.1 s against 2.8 s; the continuation used in 360 of 472 decisions (the
others the horizon truncated: one step with two decisions left, no CVU at the last).  Told the
order effects (``--stated-sd 0.1``, one campaign per world, ≈ 27 min per process): 0.859
[0.784, 0.924], − one-step Q told +0.107 [+0.031, +0.188], − itself not told (the k = 0 rows
above) +0.004 [−0.046, +0.053]; the decision alone 11.8 s against 1.7 s.

The peer table (:func:`peer_table`, printed as Markdown whenever Q runs beside other rows):
every row's V/V* and its paired difference to one-step Q over the campaigns both ran (same
world, same seed; each world the mean of its campaigns; 90 % bootstrap interval over worlds),
and the seconds per decision (the decision alone; decisions per second its inverse) and per
step (fit + decision).  The peer rules against Q:

    nice -n 10 uv run python benchmarks/bench_policies.py --world-list 0,…,9 \
        --policies q,thompson,ei_cost,kg_cost,ucb_bwk,pbgi --truth-runs 0 --out a.json
    (the same with --world-list 10,…,19 --out b.json; then --from-json a.json,b.json)

Measured (2026-12-08, at e8e5de5, the default anytime gate, one campaign per world; partial:
only worlds 0, 1, 2, 3, 10, 11, 12, 13 finished, 13–30 min per world per process on a shared
machine):
Q 0.673 [0.459, 0.867], 11.56 s per decision; thompson 0.557 [0.443, 0.674], − Q -0.116
[-0.295, +0.058], 0.14 s per decision; ei_cost 0.474 [0.308, 0.661], − Q -0.199 [-0.347,
-0.052] excludes 0, 0.12 s per decision; kg_cost 0.583 [0.397, 0.754], − Q -0.091 [-0.295,
+0.136], 31.51 s per decision; ucb_bwk 0.829 [0.673, 0.938], − Q +0.156 [+0.012, +0.324]
excludes 0, 0.11 s per decision; pbgi 0.716 [0.586, 0.848], − Q +0.042 [-0.083, +0.180], 0.10 s
per decision.

Rows are written to ``--out`` after every world (all policies of a world together), so an
interrupted run leaves complete worlds to summarise with ``--from-json``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from belief.campaign.loop import CampaignSettings, settings_to_dict
from belief.campaign.many import run_policies
from belief.campaign.synthetic import WORLD_FAMILIES, SyntheticWorld, benchmark_world
from belief.decision.allocation import POLICIES, check_policy
from belief.decision.safety import SafetyGate
from belief.decision.settings import CVUSettings
from belief.errors import InputError
from belief.posterior.fitter import FitSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=1,
                        help="campaigns per world (seeds v, 1000+v, 2000+v, …); intervals "
                             "resample worlds, each the mean of its campaigns")
    parser.add_argument("--campaign-list", default="",
                        help="comma-separated campaign indices k to run instead of "
                             "0..seeds-1 (e.g. 1,2: add campaigns to stored rows of k = 0, "
                             "then summarise both with --from-json)")
    parser.add_argument("--horizon", type=int, default=8)
    parser.add_argument("--world-list", default="",
                        help="comma-separated world variations (default: 0..worlds-1)")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--outcomes", type=int, default=128, help="CVU outcomes per candidate")
    parser.add_argument("--refits", type=int, default=2, help="CVU exact refits per candidate")
    parser.add_argument("--workers", type=int, default=None, help="local Dask workers")
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiply every world's starting budget (tight budgets)")
    parser.add_argument("--weights-scale", type=float, default=1.0,
                        help="multiply the default λ (a larger λ makes more actions marginal)")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="comma-separated allocation policies (default: all)")
    parser.add_argument("--continuations", default="",
                        help="comma-separated non-myopic CVU continuations to add as Q rows: "
                             "lookahead2, rolloutD (D = depth), one_step; '+psis' forces the "
                             "PSIS estimator for every candidate (e.g. lookahead2+psis)")
    parser.add_argument("--gains-arm", action="append", default=[], metavar="NAME:FIELD=V[:…]",
                        help="Q with other gains-model priors as a further row q_NAME, e.g. "
                             "no_order:order_effects=false or g014:gamma_sd=0.14 (repeatable; "
                             "the before/after of a belief change in one run)")
    parser.add_argument("--stated-arm", action="append", default=[], type=float, metavar="SD",
                        help="adds Q given each world's true order effects as stated priors "
                             "of s.d. SD (row q_statedSD; repeatable)")
    parser.add_argument("--stated-sd", type=float, default=None, metavar="SD",
                        help="every arm given each world's true order effects as stated priors "
                             "of s.d. SD (rows named …_statedSD)")
    parser.add_argument("--past", type=int, default=0, metavar="K",
                        help="every arm's gains model also fitted on K past campaigns of its "
                             "world (random orders of the adaptations; rows named …_pastK)")
    parser.add_argument("--gate", default="anytime",
                        help="the safety gate's bound: anytime (default), clopper_pearson (the "
                             "default before; the figures measured before it was anytime) or "
                             "posterior")
    parser.add_argument("--family", default=None, choices=WORLD_FAMILIES,
                        help="world family: varied (default) or bench_test (the same worlds "
                             "with ft_real_100 gated at the start and a bench safety test "
                             "that can open it)")
    parser.add_argument("--cvu-arm", action="append", default=[], metavar="NAME:FIELD=V[:…]",
                        help="Q with other CVU settings as a further row q_NAME, e.g. "
                             "plugin:noise_correction=false (repeatable)")
    parser.add_argument("--inner", type=int, default=8,
                        help="inner outcomes of the non-myopic continuations")
    parser.add_argument("--out", default="benchmarks/results/policies.json")
    parser.add_argument("--truth-runs", type=int, default=50,
                        help="noise runs per world of each Q row's rule on the truth (the "
                             "price of not knowing; 0: skip)")
    parser.add_argument("--show-steps", default="",
                        help="comma-separated worlds whose campaigns to print step by step "
                             "(every feasible candidate's U0, CVU, Q; a case study)")
    parser.add_argument("--from-json", default=None,
                        help="summarise the rows of earlier runs (comma-separated JSON files) "
                             "instead of running")
    args = parser.parse_args()
    try:
        gains_arms = [(name, dict(_gains_field(f) for f in fields))
                      for name, *fields in (a.split(":") for a in args.gains_arm)]
        cvu_arms = [(name, dict(_cvu_field(f) for f in fields))
                    for name, *fields in (a.split(":") for a in args.cvu_arm)]
    except ValueError as e:
        parser.error(str(e))
    weights = {r: v * args.weights_scale
               for r, v in {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004}.items()}
    try:
        show = [int(v) for v in args.show_steps.split(",")] if args.show_steps else []
    except ValueError:
        parser.error(f"--show-steps {args.show_steps}: world variations must be "
                     "comma-separated integers")
    if args.from_json and args.family:
        parser.error("--family runs campaigns: --from-json summarises stored rows (they "
                     "record their family); give one of them")
    if args.from_json and args.past:
        parser.error("--past runs campaigns: --from-json summarises stored rows; give one of "
                     "them")
    if args.from_json and args.campaign_list:
        parser.error("--campaign-list runs campaigns: --from-json summarises stored rows; "
                     "give one of them")
    if args.campaign_list and args.seeds != 1:
        parser.error("--campaign-list names the campaigns to run: leave out --seeds")
    if args.from_json:
        rows, seen = [], {}
        for f in args.from_json.split(","):
            for i, r in enumerate(json.loads(Path(f).read_text())):
                key = (r["variation"], _seed(r), r["policy"], r.get("family", "varied"))
                if key in seen:  # one campaign twice would be weighted twice in its world
                    parser.error(f"--from-json: {f} row {i} repeats {seen[key]}: world {key[0]},"
                                 f" seed {key[1]}, policy {key[2]}; give each campaign once")
                seen[key] = f"{f} row {i}"
                rows.append(r)
        families = sorted({r.get("family", "varied") for r in rows})
        if len(families) > 1:  # V* and the truth are per family: one summary, one family
            parser.error(f"--from-json: rows of world families {', '.join(families)}; "
                         "summarise one family at a time")
        summarise(rows, weights, f"rows of {args.from_json}", truth_runs=args.truth_runs,
                  show_steps=show)
        return
    settings = CampaignSettings(horizon=args.horizon, beta=1.0,
                                fit=FitSettings(draws=args.draws, tune=args.draws),
                                cvu=CVUSettings(n_outcomes=args.outcomes,
                                                max_refits=args.refits),
                                stability_resamples=0, act_on_unreliable=True,
                                weights=weights, gate=SafetyGate(method=args.gate))
    t0 = time.perf_counter()
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        try:
            check_policy(p)
        except InputError as e:
            parser.error(f"--policies {p}: {e.rule}")
    if not 1 <= args.seeds < 1000:
        parser.error(f"--seeds {args.seeds}: campaigns per world must be an integer in [1, 999]")
    try:
        campaigns = [int(k) for k in args.campaign_list.split(",")] if args.campaign_list \
            else list(range(args.seeds))
    except ValueError:
        parser.error(f"--campaign-list {args.campaign_list}: campaign indices must be "
                     "comma-separated integers in [0, 999]")
    if not all(0 <= k < 1000 for k in campaigns) or len(set(campaigns)) < len(campaigns):
        parser.error(f"--campaign-list {args.campaign_list}: campaign indices must be "
                     "distinct integers in [0, 999]")
    bad = [sd for sd in args.stated_arm if not (np.isfinite(sd) and sd > 0)]
    if bad:
        parser.error(f"--stated-arm {bad[0]:g}: the prior s.d. must be a finite number > 0")
    if args.stated_sd is not None and not (np.isfinite(args.stated_sd) and args.stated_sd > 0):
        parser.error(f"--stated-sd {args.stated_sd:g}: the prior s.d. must be a finite "
                     "number > 0")
    if not 0 <= args.past <= 16:
        parser.error(f"--past {args.past}: past campaigns per world must be an integer in "
                     "[0, 16]")
    if args.stated_sd is not None and args.stated_arm:
        parser.error("--stated-sd states the order effects in every arm: leave out "
                     "--stated-arm")
    if args.stated_sd is not None and any(g.get("order_effects") is False
                                          for _, g in gains_arms):
        parser.error("--stated-sd: a --gains-arm with order_effects=false has no order effects "
                     "to state")
    arms = [("", settings, policies, None, None)] if policies else []
    for cont in [c.strip() for c in args.continuations.split(",") if c.strip()]:
        spec, _, estimator = cont.partition("+")
        kind, depth = (spec, 2 if spec == "lookahead2" else 1) if spec in (
            "lookahead2", "one_step") else ("rollout", int(spec.removeprefix("rollout")))
        cvu = replace(settings.cvu, continuation=kind, rollout_depth=max(depth, 1),
                      inner_outcomes=args.inner, estimator=estimator or "auto")
        arms.append((f"q_{cont}", replace(settings, cvu=cvu), ["q"], None, None))
    arms += [(f"q_{name}", settings, ["q"], gains, None) for name, gains in gains_arms]
    arms += [(f"q_stated{sd:g}", settings, ["q"], None, sd) for sd in args.stated_arm]
    try:
        arms += [(f"q_{name}", replace(settings, cvu=replace(settings.cvu, **fields)), ["q"],
                  None, None) for name, fields in cvu_arms]
    except InputError as e:
        parser.error(f"--cvu-arm: {e}")
    names = [name for name, *_ in arms]
    clash = sorted({n for n in names if names.count(n) > 1 and n})
    if clash:  # rows are told apart by name: two arms of one name would be pooled
        parser.error(f"--cvu-arm/--gains-arm/--stated-arm/--continuations: two rows named "
                     f"{', '.join(clash)}; give the arms different names")
    worlds = [int(w) for w in args.world_list.split(",")] if args.world_list else list(
        range(args.worlds))
    rows: list[dict] = []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for i, v in enumerate(worlds):  # world by world, written after each: partial runs count
        for name, st, pols, gains, stated in arms:
            extra = run_policies([v], pols, settings_to_dict(st), workers=args.workers,
                                 scheduler=args.scheduler, budget_scale=args.budget_scale,
                                 gains=gains, stated_sd=stated or args.stated_sd,
                                 seeds=campaigns, past=args.past,
                                 family=args.family or "varied")
            suffix = ("" if args.stated_sd is None else f"_stated{args.stated_sd:g}") + (
                f"_past{args.past}" if args.past else "")
            rows.extend({**r, "policy": (name or r["policy"]) + suffix} for r in extra)
            print(f"\rworld {v} ({i + 1}/{len(worlds)}) {name or ','.join(pols)} "
                  f"{(time.perf_counter() - t0) / 60:.1f} min", end="", flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))
    wall = time.perf_counter() - t0
    print()
    summarise(rows, weights, truth_runs=args.truth_runs, show_steps=show,
              title=f"{len(worlds)} worlds x "
              f"{len(policies)} policies, horizon "
              f"{args.horizon}, {args.draws} draws/chain, CVU {args.outcomes} outcomes "
              f"({wall / 60:.1f} min)")


def _gains_field(text: str) -> tuple[str, object]:
    """``FIELD=V`` of ``--gains-arm``: a :class:`models.gains.GainsPriors` field and its value
    (:func:`_arm_field`; a scale-prior field takes a number, read as its documented
    shorthand)."""
    from models.gains import GainsPriors

    return _arm_field(text, GainsPriors().__dict__, "--gains-arm")


def _cvu_field(text: str) -> tuple[str, object]:
    """``FIELD=V`` of ``--cvu-arm``: a :class:`belief.decision.settings.CVUSettings` field and
    its value (:func:`_arm_field`; validated when the settings are built)."""
    return _arm_field(text, CVUSettings().__dict__, "--cvu-arm")


def _arm_field(text: str, defaults: dict, flag: str) -> tuple[str, object]:
    """``FIELD=V``: a field of ``defaults`` and its value, of the field's default's type (bool
    from ``true``/``false``, a string as given, else a number); an unknown field or a value
    that does not parse is refused by name."""
    key, sep, value = text.partition("=")
    if not sep or key not in defaults:
        raise ValueError(f"{flag}: {text!r} is not FIELD=V with FIELD one of "
                         f"{', '.join(sorted(defaults))}")
    low = value.strip().lower()
    if isinstance(defaults[key], bool):
        if low not in ("true", "false"):
            raise ValueError(f"{flag}: {key} takes true or false, not {value!r}")
        return key, low == "true"
    if isinstance(defaults[key], str):
        return key, value.strip()
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{flag}: {key} takes a number, not {value!r}") from None
    if isinstance(defaults[key], int) and not number.is_integer():
        raise ValueError(f"{flag}: {key} takes an integer, not {value!r}")
    return key, int(number) if isinstance(defaults[key], int) else number


def _compare(df: pd.DataFrame, col: str, label: str) -> None:
    present = [p for p in df.policy.unique()
               if p not in ("q", "oracle", LEGACY) and not p.startswith("q_")]
    if not present or "q" not in set(df.policy):
        return
    means = {p: df[df.policy == p][col].mean() for p in df.policy.unique()}
    best = min(present, key=means.get)
    diff = (_world_means(df, best, col) - _world_means(df, "q", col)).dropna().to_numpy()
    lo, hi = _boot(diff, seed=0)
    print(f"{label}: best baseline {best} (mean regret {means[best]:.4f}); Q with CVU "
          f"{means['q']:.4f}: {100 * (1 - means['q'] / means[best]):.0f}% lower; paired "
          f"difference {diff.mean():.4f}, bootstrap 90% CI [{lo:.4f}, {hi:.4f}]")


LEGACY = "q (Q > 0 stop)"


def _family(rows: list[dict]) -> str:
    """The world family of the rows (rows written before families existed are ``varied``);
    rows of two families are refused (V* and the truth are per family)."""
    families = sorted({r.get("family", "varied") for r in rows})
    if len(families) != 1:
        raise InputError("rows", f"world families {', '.join(families) or 'none'}: one "
                                 "summary holds one family")
    return families[0]


def _seed(row: dict) -> int:
    """A stored row's campaign seed; rows written before --seeds (no seed, or null) were the
    one campaign of world v, seeded v."""
    seed = row.get("seed")
    return int(row["variation"] if seed is None else seed)


def _world_means(df: pd.DataFrame, policy: str, col: str) -> pd.Series:
    """``col`` of ``policy``'s campaigns averaged over each world's seeds (index: variation):
    the unit every bootstrap interval resamples, so several campaigns per world narrow a
    world's value instead of counting as more worlds."""
    return df[df.policy == policy].groupby("variation")[col].mean()


def _boot(x: np.ndarray, reps: int = 4000, seed: int = 2) -> tuple[float, float]:
    """90 % percentile bootstrap interval of the mean of x."""
    x = np.asarray(x, float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1)
    return float(np.quantile(means, 0.05)), float(np.quantile(means, 0.95))


def peer_table(df: pd.DataFrame, default: str = "q",
               policies: list[str] | None = None) -> pd.DataFrame:
    """Every policy against the default rule on the same worlds and seeds: the peer table.

    ``df`` holds one row per campaign with ``policy``, ``variation``, ``seed``, ``captured``
    (V/V*) and the per-decision ``decide_seconds`` and ``step_seconds`` lists.  Per policy p:

    - V/V*: the mean over worlds of each world's mean over its campaigns, with the 90 %
      percentile bootstrap interval over worlds (:func:`_boot`, as every interval here);
    - p − default: the paired difference d_v = mean_k V/V*(p, v, k) − mean_k V/V*(default, v, k)
      over the campaigns (v, k) both ran (same world, same seed), its mean over the worlds and
      its 90 % bootstrap interval over worlds; ``below`` is True when that interval lies
      entirely below 0 (the default rule beats p), ``above`` when entirely above (both False
      with fewer than 5 paired worlds: the percentile interval lies within the range of the n
      world differences, which misses their median with probability 2·2⁻ⁿ > 10 % for n < 5);
    - seconds per decision (the decision alone, ``decide_seconds``; decisions per second is
      its inverse) and per step (fit + decision, ``step_seconds``), means over all decisions.
    """
    policies = list(dict.fromkeys(policies or df.policy.unique()))
    base = df[df.policy == default].set_index(["variation", "seed"]).captured
    out = []
    for p in policies:
        d = df[df.policy == p]
        cap = d.groupby("variation").captured.mean().to_numpy()
        lo, hi = _boot(cap)
        mine = d.set_index(["variation", "seed"]).captured
        both = mine.index.intersection(base.index)
        diff = (mine.loc[both] - base.loc[both]).groupby(level="variation").mean().to_numpy()
        dl, dh = _boot(diff) if p != default and diff.size else (np.nan, np.nan)
        s_dec = float(np.nanmean(_seconds(d, "decide_seconds")))
        out.append({"policy": p, "worlds": int(d.variation.nunique()), "campaigns": len(d),
                    "captured": float(cap.mean()), "captured_lo": lo, "captured_hi": hi,
                    "paired_worlds": int(diff.size) if p != default else 0,
                    "diff": float(diff.mean()) if p != default and diff.size else np.nan,
                    "diff_lo": dl, "diff_hi": dh, "below": bool(diff.size >= 5 and dh < 0),
                    "above": bool(diff.size >= 5 and dl > 0),
                    "s_decision": s_dec, "decisions_per_s": 1.0 / s_dec,
                    "s_step": float(np.nanmean(_seconds(d, "step_seconds")))})
    return pd.DataFrame(out).set_index("policy")


def print_peer_table(table: pd.DataFrame, default: str = "q") -> None:
    """The peer table (:func:`peer_table`) as a Markdown table, as in the results page."""
    print(f"\nthe peer table: V/V* and the paired difference to {default} (same worlds and "
          "seeds, each world the mean of its campaigns; 90 % bootstrap intervals over worlds)")
    print(f"| policy | worlds × campaigns | V/V* [90 % CI] | policy − {default}, paired "
          "[90 % CI] | "
          "s per decision (decisions/s) | s per step |")
    print("|---|---|---|---|---|---|")
    for p, r in table.iterrows():
        paired = "—" if p == default or not r.paired_worlds else (
            f"{r['diff']:+.3f} [{r.diff_lo:+.3f}, {r.diff_hi:+.3f}]"
            + (" excludes 0" if r.below or r.above else ""))
        print(f"| {p} | {r.worlds} × {r.campaigns / max(r.worlds, 1):.3g} | {r.captured:.3f} "
              f"[{r.captured_lo:.3f}, {r.captured_hi:.3f}] | {paired} | {r.s_decision:.2f} "
              f"({r.decisions_per_s:.2f}) | {r.s_step:.1f} |")


def legacy_stop_rows(rows: list[dict]) -> list[dict]:
    """The ``q`` campaigns as the former stop rule ("stop when no feasible Q > 0") would have
    run them, derived exactly from the same runs.

    Both rules rank by Q and pick argmax Q whenever they go on, and Q > 0 implies
    U0 + β·E[G0] = Q + β·G0(s^∅) > 0, so the former rule runs the same steps and stops at the
    first step whose best feasible Q is ≤ 0 (every step is seeded by (seed, step), so the
    steps before it are identical): its campaign is the prefix of the new one up to there.
    """
    out = []
    for r in rows:
        if r["policy"] != "q" or "trace" not in r:
            continue
        cut = next((k for k, s in enumerate(r["trace"]) if not s["max_q"] > 0), None)
        steps = r["steps"] if cut is None else min(cut, r["steps"])
        before = r["trace"][steps - 1] if steps > 0 else None
        j = r["final_success"] if steps == r["steps"] else (
            r["initial_success"] if before is None else before["true_success_after"])
        used = r["budget_used"] if steps == r["steps"] else (
            {k: 0.0 for k in r["budget_used"]} if before is None else before["spent_after"])
        out.append({**r, "policy": LEGACY, "final_success": j, "steps": steps,
                    "history": r["history"][:steps], "budget_used": used,
                    "budget_used_fraction": float(np.mean(
                        [used[k] / v for k, v in r["budget_total"].items()]))})
    return out


def _seconds(d: pd.DataFrame, col: str) -> np.ndarray:
    if col not in d:
        return np.array([np.nan])
    return np.concatenate([np.asarray(s, float) for s in d[col] if isinstance(s, list)]
                          or [np.array([np.nan])])


def _continuation_use(d: pd.DataFrame, name: str) -> None:
    """How many of a variant's decisions used its continuation (all or none per decision);
    nothing for a one-step variant (a row that records its continuation as one_step)."""
    if "continuation" in d and (d.continuation == "one_step").all():
        return
    used = [t.get("continuation_used", "") for tr in d.trace for t in tr]
    n = len(used)
    k = sum(u not in ("", "one_step") for u in used)
    print(f"{name}: continuation used in {k} of {n} decisions (the others: the horizon "
          f"truncated it — one step with two decisions left, none at the last — or, beyond two "
          f"steps, a candidate's CVU needed regression: one_step for every candidate)")


def _per_world(df: pd.DataFrame, limit: dict, order: list[str]) -> None:
    """V/V* of every policy on every world, the clairvoyant's V*, and Q's choices."""
    pivot = df.pivot_table(index="variation", columns="policy", values="captured")
    cols = [p for p in order if p in pivot]
    print("\nper world: V/V* (V* the clairvoyant's net value); Q's and the look-ahead's "
          "actions")
    print(f"{'world':>5s} {'V*':>7s} " + " ".join(f"{p[:17]:>17s}" for p in cols))
    # the actions of each world's first campaign (its seed v unless --seeds changed it)
    hist = df.sort_values("seed").drop_duplicates(["variation", "policy"]).set_index(
        ["variation", "policy"]).history
    for v in pivot.sort_values("q" if "q" in pivot else cols[0]).index:
        line = f"{int(v):5d} {limit[v]:7.4f} " + " ".join(f"{pivot.loc[v, p]:17.3f}"
                                                          for p in cols)
        acts = {p: "→".join(hist.get((v, p), [])) for p in cols
                if p == "q" or p.startswith("q_")}
        print(line + "  " + "; ".join(f"{p}: {a or 'stop'}" for p, a in acts.items()))


def without_belief_suffix(policy: str) -> str:
    """A row's name without the suffixes of ``--stated-sd`` and ``--past`` (``_statedSD``,
    ``_pastK``): the same arm on the belief that was given neither."""
    return re.sub(r"(_stated[^_]+)?(_past\d+)?$", "", policy)


def truth_rule(policy: str, continuation: str | None = None,
               depth: int | None = None) -> tuple[str, int] | None:
    """The rule of :func:`belief.lab.clairvoyant.lookahead_oracle` that chooses as a Q row
    does when its belief is the truth: one-step Q → rollout depth 1 (Q's G0), the rollout of
    depth D → rollout depth D, the two-step look-ahead → the best plan of ≤ 3 steps (U0(m) +
    V_2 after m); None for rows that are not Q (baselines) or whose rule is unknown.

    ``continuation`` and ``depth`` are the row's recorded CVU settings (rows written since
    this stop carry them, so a gains or CVU arm of any name maps by what it ran); rows without
    them are mapped by name: ``q`` and ``q_stated…`` one-step, ``q_one_step…``,
    ``q_rolloutD…`` and ``q_lookahead2…`` (any ``+estimator``, ``_stated`` and ``_past``
    suffix).
    """
    if continuation is not None:
        if not (policy == "q" or policy.startswith("q_")):  # baselines, the legacy stop row
            return None
        return {"one_step": ("rollout", 1), "lookahead2": ("plan", 3)}.get(
            continuation, ("rollout", int(depth or 1)))
    base = without_belief_suffix(policy)
    if base == "q" or re.fullmatch(r"q_one_step(\+\w+)?", base):
        return ("rollout", 1)
    m = re.fullmatch(r"q_rollout(\d+)(\+\w+)?", base)
    if m:
        return ("rollout", int(m.group(1)))
    if re.fullmatch(r"q_lookahead2(\+\w+)?", base):
        return ("plan", 3)
    return None


def _not_knowing(df: pd.DataFrame, order: list[str], limit: dict, weights: dict[str, float],
                 runs: int, world: Callable[[int], SyntheticWorld]) -> None:
    """Each Q row's rule on the truth beside its campaigns: the price of not knowing."""
    from belief.lab.clairvoyant import lookahead_oracle

    def rule_of(p: str) -> tuple[str, int] | None:
        first = df[df.policy == p].iloc[0]
        cont = first.get("continuation") if "continuation" in df else None
        cont = cont if isinstance(cont, str) else None
        return truth_rule(p, cont, first.get("rollout_depth") if cont else None)

    rows = [p for p in order if rule_of(p) is not None]
    if not rows or runs < 1:
        return
    horizon = int(df.horizon.max())
    totals = df.groupby("variation").budget_total.first()
    cache: dict[tuple, float] = {}
    print(f"\nthe price of not knowing: each Q row's rule run on the truth (lookahead_oracle, "
          f"{runs} noise runs per world) against its campaigns, V/V*, paired over worlds")
    print(f"{'policy':26s} {'rule':>10s} {'on the truth':>22s} {'campaign':>22s} "
          f"{'not knowing':>24s}")
    for p in rows:
        rule, depth = rule_of(p)
        c = _world_means(df, p, "captured")
        truth = []
        for v in c.index:
            key = (int(v), rule, depth)
            if key not in cache:
                w = world(int(v))
                cache[key] = lookahead_oracle(w, horizon, depth, runs=runs, rule=rule,
                                              weights=weights, budget=totals[v])[0] / limit[v]
            truth.append(cache[key])
        t, c = np.array(truth), c.to_numpy()
        (tl, th), (cl, ch), (dl, dh) = _boot(t), _boot(c), _boot(t - c)
        print(f"{p:26s} {rule + ' ' + str(depth):>10s} {t.mean():6.3f} [{tl:6.3f}, {th:6.3f}] "
              f"{c.mean():6.3f} [{cl:6.3f}, {ch:6.3f}] {(t - c).mean():+7.3f} "
              f"[{dl:+6.3f}, {dh:+6.3f}]")
    print("on the truth: what the row's rule keeps if its belief were the truth (1 − it: the "
          "myopia); not knowing = on the truth − campaign (learning, Monte Carlo and luck)")


def _bench_test_use(df: pd.DataFrame, order: list[str], limit: dict,
                    weights: dict[str, float], world: Callable[[int], SyntheticWorld]) -> None:
    """The bench-test family: per policy, the campaigns that ran the test ``ft_bench``, that
    ran ft_real_100 after it, and the worlds whose V* uses ft_real_100 (the test is worth
    running there; V* without ft_real_100 / V* shows by how much)."""
    from belief.lab.clairvoyant import clairvoyant_plan, without_candidates

    horizon = int(df.horizon.max())
    totals = df.groupby("variation").budget_total.first()
    needs = {v: clairvoyant_plan(without_candidates(world(v), ["ft_real_100"]), horizon,
                                 weights=weights, budget=totals[v]).plan.value / limit[v]
             for v in sorted(df.variation.unique())}
    uses = [v for v, f in needs.items() if f < 1 - 1e-9]
    print(f"\nthe bench test: V* uses ft_real_100 in {len(uses)} of {len(needs)} worlds "
          f"(V* without it keeps {np.mean([needs[v] for v in uses]):.3f} of V* there)"
          if uses else f"\nthe bench test: V* uses ft_real_100 in none of {len(needs)} worlds")
    print(f"{'policy':18s} {'ran ft_bench':>12s} {'then FT':>8s} {'FT, V* uses FT':>15s}")
    for p in order:
        d = df[df.policy == p]
        tested = d.history.apply(lambda h: "ft_bench" in h)
        then_ft = d.history.apply(
            lambda h: "ft_bench" in h and "ft_real_100" in h[h.index("ft_bench"):])
        in_uses = d.variation.isin(uses)
        print(f"{p:18s} {int(tested.sum()):5d} of {len(d):<4d} {int(then_ft.sum()):8d} "
              f"{int(d[in_uses].history.apply(lambda h: 'ft_real_100' in h).sum()):8d} of "
              f"{int(in_uses.sum()):<4d}")


def _vs_stop(item: tuple[str, dict]) -> float:
    """A stored candidate's value against stopping for sorting: None (not finite) last."""
    v = item[1].get("value_vs_stop")
    return -np.inf if v is None else float(v)


def _steps(df: pd.DataFrame, worlds: list[int],
           world: Callable[[int], SyntheticWorld]) -> None:
    """The campaigns of ``worlds`` step by step: the choice, the true J after it and every
    feasible candidate's U0, CVU, Q and value against stopping U0 + β·E[V(s')], best first (a
    case study from the stored rows; rows written before the trace kept the table show the
    choices only), under the world's true logit gains."""
    for v in worlds:
        if v not in set(df.variation):
            print(f"\n--show-steps: world {v} has no rows here")
            continue
        truth = world(v).truth
        print(f"\nworld {v}: true logit gains " + ", ".join(
            f"{t.candidate.id} {t.logit_gain:+.3f}"
            for t in sorted(truth, key=lambda t: -t.logit_gain)))
        # the legacy stop rule's rows are derived from Q's traces: not campaigns of their own
        mine = df[(df.variation == v) & (df.policy != LEGACY)]
        for _, r in mine.sort_values(["policy", "seed"]).iterrows():
            print(f"{r.policy}, seed {r.seed}: V/V* {r.captured:.3f}, stop: "
                  f"{r.get('stop_reason') or 'horizon'}")
            for t in r.trace if isinstance(r.trace, list) else []:
                print(f"  step {t['step']}: {t['chosen']}, true J after "
                      f"{t['true_success_after']:.3f}")
                table = t.get("candidates")
                if not table:
                    continue
                feasible = sorted(((c, x) for c, x in table.items() if x["feasible"]),
                                  key=_vs_stop, reverse=True)
                print(f"    {'candidate':14s} {'U0':>8s} {'CVU':>8s} {'Q':>8s} {'vs stop':>8s}")
                for c, x in feasible:
                    print(f"    {c:14s} " + " ".join(
                        f"{x[k]:8.4f}" if x.get(k) is not None else f"{'nan':>8s}"
                        for k in ("u0", "cvu", "q", "value_vs_stop")))


def summarise(rows: list[dict], weights: dict[str, float], title: str,
              truth_runs: int = 50, show_steps: list[int] | None = None) -> None:
    """Print the per-policy table and the comparison of Q with the best baseline (and the
    campaigns of the worlds ``show_steps`` step by step)."""
    from belief.lab.clairvoyant import clairvoyant_plan, plan_value

    rows = rows + legacy_stop_rows(rows)
    family = _family(rows)

    def world(v: int) -> SyntheticWorld:  # the truth of world v (the seed does not change it)
        return benchmark_world(int(v), int(v), family)

    df = pd.DataFrame(rows)
    df["seed"] = [_seed(r) for r in rows]
    horizon = int(df.horizon.max())
    df["spent"] = df.budget_used.apply(lambda b: sum(weights[r] * v for r, v in b.items()))
    df["net"] = df.final_success - df.initial_success - df.spent
    totals = df.groupby("variation").budget_total.first()
    limit = {v: clairvoyant_plan(world(v), horizon,
                                 weights=weights, budget=totals[v]).plan.value
             for v in df.variation.unique()}
    df["regret_clairvoyant"] = df.apply(lambda r: limit[r.variation] - r.net, axis=1)
    df["captured"] = df.apply(lambda r: r.net / limit[r.variation], axis=1)
    # the expected net value of the executed sequence (execution noise averaged out): the
    # quantity V* maximises over sequences, so V*−V_plan ≥ 0 for any sequence in its set
    df["captured_plan"] = df.apply(lambda r: plan_value(
        world(r.variation), list(r.history),
        weights=weights).value / limit[r.variation], axis=1)
    has_oracle = "oracle" in set(df.policy)
    if has_oracle:
        oracle = df[df.policy == "oracle"].set_index(["variation", "seed"])
        df["regret"] = df.apply(lambda r: oracle.final_success[(r.variation, r.seed)]
                                - r.final_success, axis=1)
        df["regret_net"] = df.apply(lambda r: oracle.net[(r.variation, r.seed)] - r.net,
                                    axis=1)
    print(title + ("" if family == "varied" else f" [world family {family}]"))
    print(f"{'policy':16s} {'final J':>8s} {'regret J':>9s} {'regret V':>9s} {'90% range':>18s} "
          f"{'V* − V':>8s} {'V/V*':>6s} {'budget':>7s} {'steps':>6s} {'gate viol.':>10s} "
          f"{'unsafe':>7s} {'s/step':>7s}")
    variants = sorted(p for p in set(df.policy) if p.startswith("q_"))
    order = [*[p for p in POLICIES if p in set(df.policy)], *variants]
    # baselines run with --stated-sd/--past (u0_past4, …): rows of their own, not dropped
    order += sorted(set(df.policy) - set(order) - {LEGACY})
    order += [LEGACY] if LEGACY in set(df.policy) else []
    for p in order:
        d = df[df.policy == p]
        reg = d["regret"].to_numpy() if has_oracle else np.full(len(d), np.nan)
        regv = d["regret_net"].to_numpy() if has_oracle else np.full(len(d), np.nan)
        per_step = np.concatenate([np.asarray(s) for s in d["step_seconds"]])
        print(f"{p:16s} {d.final_success.mean():8.3f} {np.mean(reg):9.4f} {np.mean(regv):9.4f} "
              f"[{np.quantile(regv, 0.05):7.4f}, {np.quantile(regv, 0.95):7.4f}] "
              f"{d.regret_clairvoyant.mean():8.4f} {d.captured.mean():6.3f} "
              f"{d.budget_used_fraction.mean():7.2f} {d.steps.mean():6.1f} "
              f"{d.gate_violations.sum():10d} {d.unsafe_events.sum():7d} "
              f"{np.nanmean(per_step):7.2f}")
    n_worlds = df.variation.nunique()
    per = df.groupby(["policy", "variation"]).size()
    seeds = f", {per.min()}–{per.max()} campaigns per world" if per.max() > 1 else ""
    print(f"\nagainst the limit (clairvoyant V*, {n_worlds} worlds{seeds}; V* mean "
          f"{np.mean(list(limit.values())):.4f}): mean and 90 % bootstrap interval over worlds "
          f"(of each world's mean over its campaigns)")
    print(f"{'policy':18s} {'V*−V':>8s} {'90% CI':>18s} {'V/V*':>6s} {'90% CI':>16s} "
          f"{'min V/V*':>8s} {'V>V*':>5s} {'Vplan/V*':>8s} {'90% CI':>16s} {'>V*':>4s}")
    for p in order:
        d = df[df.policy == p]
        reg, cap, plan = (_world_means(df, p, c).to_numpy()
                          for c in ("regret_clairvoyant", "captured", "captured_plan"))
        (rl, rh), (cl, ch), (pl, ph) = _boot(reg), _boot(cap), _boot(plan)
        print(f"{p:18s} {reg.mean():8.4f} [{rl:7.4f}, {rh:7.4f}] {cap.mean():6.3f} "
              f"[{cl:6.3f}, {ch:6.3f}] {cap.min():8.3f} "
              f"{int((d.regret_clairvoyant < 0).sum()):5d} {plan.mean():8.3f} "
              f"[{pl:6.3f}, {ph:6.3f}] {int((d.captured_plan > 1 + 1e-9).sum()):4d}")
    print("V: realised net value of the campaign (its execution noise is in the interval); "
          "Vplan: expected net value of the sequence it executed; min: of the world means; "
          "V>V*, >V*: campaigns")
    for p in variants if "q" in set(df.policy) else []:
        a, b = df[df.policy == "q"], df[df.policy == p]
        diff = (_world_means(df, p, "captured")
                - _world_means(df, "q", "captured")).dropna().to_numpy()
        lo, hi = _boot(diff)
        print(f"{p} − q, paired over worlds: V/V* {diff.mean():+.3f} (90% CI [{lo:+.3f}, "
              f"{hi:+.3f}]); wall time per step "
              f"{np.nanmean(np.concatenate([np.asarray(s) for s in b.step_seconds])):.2f} s vs "
              f"{np.nanmean(np.concatenate([np.asarray(s) for s in a.step_seconds])):.2f} s "
              f"(same run); the decision alone (no fit) "
              f"{np.nanmean(_seconds(b, 'decide_seconds')):.2f} s vs "
              f"{np.nanmean(_seconds(a, 'decide_seconds')):.2f} s")
    for p in order:  # a row told the order effects or given a past, against itself without
        twin = without_belief_suffix(p)
        if twin != p and twin in set(df.policy):
            diff = (_world_means(df, p, "captured")
                    - _world_means(df, twin, "captured")).dropna().to_numpy()
            lo, hi = _boot(diff)
            print(f"{p} − {twin}, paired over worlds: V/V* {diff.mean():+.3f} (90% CI "
                  f"[{lo:+.3f}, {hi:+.3f}])")
    if "q" in set(df.policy) and len(set(order) - {LEGACY}) > 1:
        print_peer_table(peer_table(df, "q", [p for p in order if p != LEGACY]))
    for p in variants:
        _continuation_use(df[df.policy == p], p)
    if family == "bench_test":
        _bench_test_use(df, order, limit, weights, world)
    _per_world(df, limit, order)
    _not_knowing(df, order, limit, weights, truth_runs, world)
    if has_oracle:
        _compare(df, "regret", "final J")
        _compare(df, "regret_net", "net value V")
    if LEGACY in set(df.policy):
        old = df[df.policy == LEGACY].set_index(["variation", "seed"])
        # the Q campaigns the former rule's rows were derived from (rows without a trace have
        # none), so both sides average the same campaigns of each world
        new = df[df.policy == "q"].set_index(["variation", "seed"]).loc[old.index]

        def means(col: str) -> tuple[float, float]:  # over worlds, each its campaigns' mean
            return tuple(float(d[col].groupby(level="variation").mean().mean())
                         for d in (new, old))

        # paired per world, and the interval resamples worlds like every other interval here
        diff = (old.regret_clairvoyant - new.regret_clairvoyant).groupby(
            level="variation").mean().to_numpy()
        lo, hi = _boot(diff, seed=1)
        (sn, so), (nn, no), (jn, jo) = means("steps"), means("net"), means("final_success")
        print(f"stop rule: against stopping (new) vs 'Q > 0' (former), same runs: steps "
              f"{sn:.2f} vs {so:.2f}, net value {nn:.4f} vs {no:.4f}, final J "
              f"{jn:.4f} vs {jo:.4f}; regret to the clairvoyant lower by {diff.mean():.4f} "
              f"(90% CI over worlds [{lo:.4f}, {hi:.4f}]); campaigns that differ: "
              f"{int((new.steps != old.steps).sum())} of {len(new)}")
    if "unreliable_decisions" in df:
        print(f"decisions taken on beliefs still failing the convergence checks: "
              f"{int(df.unreliable_decisions.sum())} of {int(df.steps.sum() + len(df))}")
    if show_steps:
        _steps(df, show_steps, world)


if __name__ == "__main__":
    main()
