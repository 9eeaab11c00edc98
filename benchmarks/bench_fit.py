"""Compile-once re-fit versus rebuild-and-sample for the gains model.

Prints the compile time, the time of one re-fit after new evidence (compile excluded), the time
of rebuilding the model and sampling it from scratch (what a naive loop would do each step),
and their ratio, all measured in this run.

Both sides sample the same chains (``--chains``, default 2) of ``--draws`` draws and tuning
steps each (until December 2026 the re-fit sampled the model's default 4 chains against the
rebuild's 2).

``--stated K`` adds a prior-sensitivity measurement: the last step's evidence fitted under K
sets of stated ``[[interaction]]`` priors on the same pairs (only their means differ).  The
stated means and s.d. are data of the compiled model, so only the first set compiles; before
that (until December 2026) every set was a new graph, i.e. rebuild + compile + sample, which
is the baseline measured beside it in the same run.  (With ``BELIEF_CACHE_DIR`` set to an empty
folder the first set's compile is cold; otherwise it may load from the compile cache.)
Measured at 3b37357 (``--stated 3``, defaults otherwise, empty cache folder): the first set
49.4 s (its compile), each later set 0.78 s, rebuild + compile + sample per set 41.4 s: 52.8x.

    uv run python benchmarks/bench_fit.py [--steps 4] [--draws 500] [--chains 2] [--stated 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from belief.campaign.synthetic import SyntheticWorld
from belief.inputs.evidence import Evidence
from models.gains import GainsModel, encode_policies


def campaign_evidence(steps: int) -> list[tuple[Evidence, str]]:
    world = SyntheticWorld(seed=0)
    init = world.initial_evidence()
    ev = Evidence(world.candidates).append(policy_evals=init["policy_evaluations"],
                                           safety=init["safety_events"])
    out = [(ev, world.policy)]
    for step, m in enumerate(["dr_1e6", "dr_1e7", "si_friction", "da_camera", "ft_real_100",
                              "cotrain", "dr_1e6", "dr_1e7"][:steps]):
        o = world.execute(m, step)
        ev = ev.append(paired=o.paired, safety=o.safety)
        out.append((ev, world.policy))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--stated", type=int, default=0, metavar="K",
                        help="also fit under K >= 2 sets of stated order-effect priors (prior "
                             "sensitivity) against rebuilding per set")
    args = parser.parse_args()
    if args.stated and args.stated < 2:
        parser.error(f"--stated {args.stated}: needs K >= 2 sets (0: skip)")
    import nutpie
    import pymc as pm

    world = SyntheticWorld(seed=0)
    model = GainsModel(world.candidates, max_policies=32)
    data = campaign_evidence(args.steps)

    t0 = time.perf_counter()
    model._compiled()
    compile_s = time.perf_counter() - t0

    refit = []
    for i, (ev, policy) in enumerate(data):
        t0 = time.perf_counter()
        model.fit(ev.paired, policy, policy_evals=ev.policy_evals, draws=args.draws,
                  tune=args.draws, chains=args.chains, seed=i)
        refit.append(time.perf_counter() - t0)

    rebuild = []
    for i, (ev, policy) in enumerate(data[1:], start=1):
        t0 = time.perf_counter()
        enc = encode_policies(ev.paired, model.gain_ids, model.max_policies, (policy,),
                              ev.policy_evals)
        pm_model = model.build(enc)
        compiled = nutpie.compile_pymc_model(pm_model)
        nutpie.sample(compiled, draws=args.draws, tune=args.draws, chains=args.chains, seed=i,
                      progress_bar=False)
        rebuild.append(time.perf_counter() - t0)
        del pm_model, compiled
        _ = pm  # PyMC is imported so the rebuild includes nothing extra at first call

    r, b = statistics.median(refit), statistics.median(rebuild)
    print(f"gains model: {len(model.gain_ids)} gain candidates, {model.max_policies} policy "
          f"slots, {args.draws} draws + {args.draws} tune x {args.chains} chains, both sides")
    print(f"compile (first, this process):        {compile_s:7.2f} s")
    print(f"re-fit with new data (median of {len(refit)}): {r:7.3f} s   "
          f"[{', '.join(f'{x:.3f}' for x in refit)}]")
    print(f"rebuild + compile + sample (median of {len(rebuild)}): {b:7.2f} s   "
          f"[{', '.join(f'{x:.2f}' for x in rebuild)}]")
    print(f"speed-up of re-fit over rebuild: {b / r:6.1f}x  (target >= 50x, issue 20)")
    if args.stated:
        _prior_sensitivity(world, data[-1], args)


def _prior_sensitivity(world: SyntheticWorld, last: tuple[Evidence, str],
                       args: argparse.Namespace) -> None:
    """Fits of one evidence under ``args.stated`` stated-prior sets (means from −0.3 to 0.3,
    s.d. 0.1, on two pairs) against rebuild + compile + sample per set."""
    from dataclasses import replace

    import nutpie

    from belief.inputs.interactions import InteractionPrior

    ev, policy = last
    pairs = [("sim_refresh", "dr_1e6"), ("si_friction", "dr_1e7")]
    models = [GainsModel(replace(world.candidates, interactions=tuple(
        InteractionPrior(a, m, -0.3 + 0.6 * i / (args.stated - 1), 0.1) for a, m in pairs)),
        max_policies=32) for i in range(args.stated)]
    assert len({m.compile_key() for m in models}) == 1
    fits = []
    for i, gm in enumerate(models):
        t0 = time.perf_counter()
        gm.fit(ev.paired, policy, policy_evals=ev.policy_evals, draws=args.draws,
               tune=args.draws, chains=args.chains, seed=i)
        fits.append(time.perf_counter() - t0)
    rebuild = []
    for i, gm in enumerate(models):
        t0 = time.perf_counter()
        enc = gm.encode(ev.paired, (policy,), ev.policy_evals)
        compiled = nutpie.compile_pymc_model(gm.build(enc))
        nutpie.sample(compiled, draws=args.draws, tune=args.draws, chains=args.chains, seed=i,
                      progress_bar=False)
        rebuild.append(time.perf_counter() - t0)
    r, b = statistics.median(fits[1:]), statistics.median(rebuild)
    print(f"prior sensitivity, {args.stated} sets of stated priors on {len(pairs)} pairs "
          f"(same pairs, other means):")
    print(f"  first set (compiles):                 {fits[0]:7.2f} s")
    print(f"  each later set (median of {len(fits) - 1}):       {r:7.3f} s   "
          f"[{', '.join(f'{x:.3f}' for x in fits[1:])}]")
    print(f"  rebuild + compile + sample per set (median of {len(rebuild)}): {b:7.2f} s   "
          f"(what a new set cost before the values were data)")
    print(f"  speed-up per later set: {b / r:6.1f}x")


if __name__ == "__main__":
    main()
