"""Convergence of every model at the default settings and after escalation, against the models
before issue 15, on evidence sets taken along real campaign trajectories.

Evidence sets (generated once, cached in ``--out``; ``--regenerate`` to redo): campaigns in
``SyntheticWorld.varied(v, seed=v)`` for v < ``--worlds``, horizon ``--steps``, with the
allocation policy cycling over ``q`` (β = 1), ``thompson``, ``round_robin`` and ``u0`` by v
(round-robin runs the diagnoses too, so ``gain_estimates`` rows and more safety runs appear);
the evidence D_t before every decision and after the last step is one set, plus the shipped
example (``belief/data/example``).  The trajectories are driven by the engine at reduced
settings (2 chains × 250 draws, CVU with 64 outcomes and no exact refits, acting on unreliable
beliefs) so that generating them costs minutes; only the evidence is kept.  The campaigns do not
run sensitivity sweeps or transfer evaluations, so each world set gets the world's sweep and
transfer evaluations drawn at that step (``sensitivity_sweep(step=t)`` for both reference
policies at even t and for π_0 alone at odd t; ``transfer_evaluations(step=t)`` for 3, 2 or 1
reference policies by t mod 3) — the sizes a campaign would see.

Fits (per model: gains, exec_risk, transfer, sensitivity), three configurations in the same
run, each in its own process (the baseline's code is ``git archive``-d from ``--baseline``):

- ``before``: the models before issue 15 with that version's defaults — 2 chains × 500 draws
  after 500 tuning steps, its target_accept (0.95 gains and execution risk, 0.9 the others;
  transfer thinned by 4), its checked variables and its ESS threshold max(100, 10 % of the
  draws), escalation = refit with 2× then 4× draws and tuning (sensitivity: none);
- ``before@standard``: the same models judged by the field's standard of this issue — 4 chains,
  ESS ≥ 400, every hyperparameter checked (the lists of ``CHECK``), same 2×/4× escalation;
- ``after``: this version's defaults (``FitSettings()``: 4 chains × 500 after 500, ESS ≥ 400,
  R-hat ≤ 1.01, zero divergences, every hyperparameter checked) and its escalation
  (:meth:`belief.posterior.fitter.BeliefFitter.fit_model`).

Printed per model and configuration: sets, share passing at the defaults (with its exact 95 %
Clopper–Pearson interval), share passing after escalation, median wall and CPU seconds of the
default fit (compile excluded) and of the whole escalated fit; then the demo-sized fit (gains +
execution risk on the world sets, what ``belief demo`` fits at every step): medians and the ratio
after/before measured in this run.

- ``after@<commit>``: the ``after`` configuration on the code of ``<commit>`` (``git
  archive``-d), e.g. ``after@main`` to measure a model change against the current models in the
  same run.

``--models sensitivity,transfer`` fits only those models.  ``--sweeps-only`` makes (and caches
under its own name) evidence sets without running campaigns: the world's sweep and transfer
evaluations at every step t ≤ ``--steps`` of every world (the sets' sensitivity and transfer
tables do not depend on the trajectory; a campaign that stops early has fewer steps), plus the
shipped example's; only ``sensitivity`` and ``transfer`` can be fitted on them.

    uv run python benchmarks/bench_convergence.py [--worlds 40] [--steps 6] [--out DIR]
        [--baseline COMMIT] [--configs before,before@standard,after,after@COMMIT]
        [--models gains,exec_risk,transfer,sensitivity] [--sweeps-only] [--seed 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

BASELINE = "6320e96"
"""The commit with the models before issue 15 (the branch point of issue 15)."""

CHECK = {"gains": ["effect", "policy_logit", "tau_exec", "rho", "mu0", "group_effect",
                   "gamma", "tau_lens", "tau_method", "tau_candidate"],
         "exec_risk": ["p_unsafe", "group_logit", "mu0", "sigma_group", "sigma_candidate"],
         "transfer": ["eta_sim", "shift", "shift_mu", "shift_tau"],
         "sensitivity": ["S", "gamma", "alpha", "S_mu", "S_tau", "sigma"]}
"""Checked variables of the standard (every parameter; absent ones are skipped)."""

OLD_CHECK = {"gains": ["effect", "policy_logit", "tau_exec", "rho"],
             "exec_risk": ["p_unsafe", "group_logit"],
             "transfer": ["eta_sim", "shift", "shift_mu", "shift_tau"],
             "sensitivity": ["S", "gamma", "alpha"]}
"""Checked variables before issue 15."""

MODELS = ("gains", "exec_risk", "transfer", "sensitivity")
POLICY_CYCLE = ("q", "thompson", "round_robin", "u0")
ROOT = Path(__file__).resolve().parents[1]


# -- evidence sets ---------------------------------------------------------------------------------
def generate_sets(worlds: int, steps: int) -> list[dict]:
    """Evidence tables along campaign trajectories (module docstring), plus the example."""
    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.synthetic import SyntheticWorld
    from belief.decision.cvu import CVUSettings
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence_dir import read_evidence_dir
    from belief.posterior.fitter import BeliefFitter, FitSettings

    fit = FitSettings(draws=250, tune=250, chains=2, max_escalations=0)
    sets: list[dict] = []
    for v in range(worlds):
        world = SyntheticWorld.varied(v, seed=v)
        policy = POLICY_CYCLE[v % len(POLICY_CYCLE)]
        settings = CampaignSettings(horizon=steps, beta=1.0 if policy == "q" else 0.0,
                                    allocation=policy, fit=fit, seed=v,
                                    cvu=CVUSettings(n_outcomes=64, max_refits=0),
                                    stability_resamples=0, act_on_unreliable=True)
        # a fitter per world (its costs differ); the compiled models are shared
        campaign = Campaign(world, settings, None, BeliefFitter(world.candidates, fit))
        t0 = time.perf_counter()
        while True:
            t = campaign.step_index
            sets.append(_world_set(world, v, t, campaign.evidence, campaign.policy, policy))
            if campaign.finished:
                break
            _, outcome = campaign.step()
            if outcome is None:
                break
        print(f"  world {v} ({policy}): {len(campaign.history)} steps "
              f"({' → '.join(campaign.history)}) in {time.perf_counter() - t0:.0f} s",
              flush=True)
    cf = load_candidate_file(ROOT / "belief/data/example/candidates.toml")
    tables = read_evidence_dir(ROOT / "belief/data/example/evidence", cf.candidates)
    ev = tables.evidence
    sets.append({"source": "example", "variation": None, "step": None, "policy": "pi2",
                 "allocation": "", "tables": {k: v for k, v in ev.tables().items()}})
    return sets


def generate_sweep_sets(worlds: int, steps: int) -> list[dict]:
    """The sets' sweep and transfer tables without the campaigns (``--sweeps-only``)."""
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.candidate_file import load_candidate_file
    from belief.inputs.evidence import Evidence
    from belief.inputs.evidence_dir import read_evidence_dir

    sets: list[dict] = []
    for v in range(worlds):
        world = SyntheticWorld.varied(v, seed=v)
        policy = POLICY_CYCLE[v % len(POLICY_CYCLE)]
        for t in range(steps + 1):
            sets.append(_world_set(world, v, t, Evidence(world.candidates), "pi0", policy))
    cf = load_candidate_file(ROOT / "belief/data/example/candidates.toml")
    ev = read_evidence_dir(ROOT / "belief/data/example/evidence", cf.candidates).evidence
    tables = {k: v for k, v in ev.tables().items()
              if k in ("sensitivity_runs", "transfer_evaluations")}
    sets.append({"source": "example", "variation": None, "step": None, "policy": "pi2",
                 "allocation": "", "tables": tables})
    return sets


def _world_set(world, v: int, t: int, evidence, policy: str, allocation: str) -> dict:
    tables = dict(evidence.tables())
    sweep_policies = ("pi0", "pi_dr") if t % 2 == 0 else ("pi0",)
    transfer_policies = (("pi0", "pi_dr", "pi_ft"), ("pi0", "pi_dr"), ("pi_ft",))[t % 3]
    tables["sensitivity_runs"] = world.sensitivity_sweep(step=t, policies=sweep_policies)
    tables["transfer_evaluations"] = world.transfer_evaluations(step=t,
                                                                policies=transfer_policies)
    return {"source": "world", "variation": v, "step": t, "policy": policy,
            "allocation": allocation, "tables": tables}


# -- one configuration (run in a child process on the version's code) ----------------------------
def _evidence(s: dict):
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.evidence import Evidence

    if s["source"] == "example":
        from belief.inputs.candidate_file import load_candidate_file

        cands = load_candidate_file(ROOT / "belief/data/example/candidates.toml").candidates
    else:
        cands = SyntheticWorld.varied(s["variation"], seed=s["variation"]).candidates
    t = {k: v for k, v in s["tables"].items() if v is not None and len(v)}
    kw = {"paired": t.get("paired_evaluations"), "safety": t.get("safety_events"),
          "policy_evals": t.get("policy_evaluations"), "gain_estimates": t.get("gain_estimates"),
          "sensitivity_runs": t.get("sensitivity_runs"),
          "transfer_evaluations": t.get("transfer_evaluations")}
    if "model_updates" in t:  # the sources of order effects besides lineages (issue 16)
        kw["model_updates"] = t["model_updates"]
    return cands, Evidence(cands).append(**{k: v for k, v in kw.items() if v is not None})


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def worker(config: str, sets_path: Path, out_path: Path,
           models: tuple[str, ...] = MODELS, seed0: int = 1000) -> None:
    """Fit every model on every set with ``config`` and write one JSON row per (set, model)."""
    from belief.posterior.diagnostics import check_convergence
    from belief.posterior.fitter import BeliefFitter, FitSettings

    sets = pickle.loads(sets_path.read_bytes())
    after = config.split("@")[0] == "after"
    if after:
        settings = FitSettings()
    else:
        settings = FitSettings(draws=500, tune=500, chains=2 if config == "before" else 4)
    standard = config != "before"
    check = CHECK if standard else OLD_CHECK
    rows = []
    fitters: dict[tuple, BeliefFitter] = {}
    for i, s in enumerate(sets):
        cands, ev = _evidence(s)
        key = tuple(cands.ids)
        if key not in fitters:
            fitters[key] = BeliefFitter(cands, settings)
        f = fitters[key]
        seed = seed0 + i
        for model in models:
            if model == "transfer" and not len(ev.transfer):
                continue
            if model == "sensitivity" and not len(ev.sensitivity):
                continue
            run = _fit_after if after else _fit_before
            _compile(f, model, ev)
            row = run(f, model, ev, s["policy"], seed, check, standard, check_convergence)
            rows.append({"set": i, "source": s["source"], "variation": s["variation"],
                         "step": s["step"], "allocation": s["allocation"], "model": model,
                         "config": config, **row})
        out_path.write_text(json.dumps(rows))  # after every set: a partial run is readable
        if i % 20 == 0:
            print(f"  [{config}] set {i + 1}/{len(sets)}", flush=True)


def _compile(f, model: str, ev) -> None:
    if model == "gains":
        f.gains._compiled()
    elif model == "exec_risk" and f.exec_risk is not None:
        f.exec_risk._compiled()
    elif model == "transfer":
        f.transfer._compiled(_tables().outcome_family(ev.transfer))
    elif model == "sensitivity":
        _sensitivity_model(f, ev)._compiled()


def _tables():
    """The module of ``outcome_family`` and ``xi_directions`` (``belief.inputs.tables`` on
    main since the merge; ``belief.inputs.evidence`` at the branch point)."""
    try:
        from belief.inputs import tables
    except ImportError:
        from belief.inputs import evidence as tables
    return tables


def _sensitivity_model(f, ev):
    if hasattr(f, "sensitivity_model"):
        return f.sensitivity_model(ev)
    from models.sensitivity import SensitivityModel

    t = _tables()
    key = (tuple(t.xi_directions(ev.sensitivity)), t.outcome_family(ev.sensitivity))
    if key not in f._sensitivity:
        f._sensitivity[key] = SensitivityModel(key[0], key[1], f.sensitivity_priors)
    return f._sensitivity[key]


def _sampler(f, model: str, ev, policy: str):
    """``sample(draws, tune, chains, seed, **kw)`` of a model on this evidence."""
    if model == "gains":
        updates = ({"model_updates": ev.model_updates}
                   if getattr(ev, "model_updates", None) is not None else {})
        return lambda **kw: f.gains.fit(ev.paired, policy, policy_evals=ev.policy_evals,
                                        gain_estimates=ev.gain_estimates, **updates, **kw)
    if model == "exec_risk":
        n, k = ev.safety_counts()
        return lambda **kw: f.exec_risk.fit(n, k, **kw)
    if model == "transfer":
        return lambda **kw: f.transfer.fit(ev.transfer, policy, **kw)
    m = _sensitivity_model(f, ev)
    return lambda **kw: m.fit(ev.sensitivity, **kw)


def _fit_after(f, model, ev, policy, seed, check, standard, check_convergence) -> dict:
    import importlib

    module = importlib.import_module(f"models.{model}")
    sample = _sampler(f, model, ev, policy)
    first = {}

    def timed_sample(**kw):
        out, w, c = _timed(lambda: sample(**kw))
        first.setdefault("wall", w)
        first.setdefault("cpu", c)
        return out

    fit, wall, cpu = _timed(lambda: f.fit_model(model, timed_sample, seed,
                                                module.TARGET_ACCEPT, escalate=True))
    lines = fit.history
    ok0 = lines[0].endswith(": converged")
    return {"passed_default": ok0, "passed_final": bool(fit.convergence.reliable),
            "attempts": fit.attempts, "reason_default": lines[0].split("): ", 1)[1],
            "reason_final": fit.convergence.reason, "wall_default": first["wall"],
            "cpu_default": first["cpu"], "wall_total": wall, "cpu_total": cpu,
            "n_steps": float(fit.idata["sample_stats"]["n_steps"].mean())}


def _fit_before(f, model, ev, policy, seed, check, standard, check_convergence) -> dict:
    s = f.settings
    ess = 400.0 if standard else max(100.0, 0.1 * s.draws * s.chains)
    sample = _sampler(f, model, ev, policy)
    extra = {"thin": 4} if model == "transfer" else {}
    factors = (1,) if model == "sensitivity" else (1, 2, 4)
    total_w = total_c = 0.0
    out = {}
    for j, factor in enumerate(factors):
        idata, w, c = _timed(lambda factor=factor: sample(
            draws=factor * s.draws, tune=factor * s.tune, chains=s.chains, seed=seed, **extra))
        total_w, total_c = total_w + w, total_c + c
        conv = check_convergence(idata, check[model], rhat_max=1.01, ess_min=ess)
        if j == 0:
            out.update({"passed_default": bool(conv.reliable), "reason_default": conv.reason,
                        "wall_default": w, "cpu_default": c,
                        "n_steps": float(idata["sample_stats"]["n_steps"].mean())})
        if conv.reliable:
            break
    out.update({"passed_final": bool(conv.reliable), "attempts": j + 1,
                "reason_final": conv.reason, "wall_total": total_w, "cpu_total": total_c})
    return out


# -- driver --------------------------------------------------------------------------------------
def _baseline_tree(commit: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "belief", "models"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def summarise(rows: list[dict]) -> None:
    import pandas as pd
    from scipy import stats

    df = pd.DataFrame(rows)
    print("\nconvergence per model (pass = R-hat, bulk and tail ESS, divergences all within the "
          "configuration's thresholds)")
    print(f"{'model':>12} {'config':>16} {'sets':>5} {'pass@default':>22} {'pass@escalated':>15}"
          f" {'wall s':>7} {'cpu s':>7} {'wall s (esc.)':>14} {'steps':>6}")
    for model in MODELS:
        for config in dict.fromkeys(df["config"]):
            d = df[(df.model == model) & (df.config == config)]
            if not len(d):
                continue
            k, n = int(d.passed_default.sum()), len(d)
            lo = stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
            hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
            print(f"{model:>12} {config:>16} {n:>5} {k / n:>8.1%} [{lo:.3f}, {hi:.3f}] "
                  f"{d.passed_final.mean():>15.1%} {d.wall_default.median():>7.2f} "
                  f"{d.cpu_default.median():>7.2f} {d.wall_total.median():>14.2f} "
                  f"{d.n_steps.median():>6.1f}")
    print("\nfailures at the defaults (first reason per set):")
    for (model, config), d in df[~df.passed_default].groupby(["model", "config"]):
        parts = d.reason_default.str.split("; ").explode()
        top = parts.str.extract(r"(R-hat|bulk ESS|tail ESS|divergent transitions)")[0] \
            .fillna("other").value_counts()
        print(f"  {model:>12} {config:>16}: " + ", ".join(f"{k.strip()} ×{v}"
                                                          for k, v in top.items()))
    still = df[~df.passed_final]
    if len(still):
        print("\nstill failing after escalation:")
        for r in still.itertuples():
            print(f"  {r.model:>12} {r.config:>16} set {r.set} ({r.source} v={r.variation} "
                  f"t={r.step}): {r.reason_final}")
    demo = df[(df.source == "world") & df.model.isin(["gains", "exec_risk"])]
    per_set = demo.groupby(["config", "set"])[["wall_default", "cpu_default", "wall_total",
                                               "cpu_total"]].sum().groupby("config").median()
    print("\ndemo-sized fit (gains + execution risk per world set), medians:")
    print(per_set.round(3).to_string())
    if {"before", "after"} <= set(per_set.index):
        for col in per_set.columns:
            print(f"  after / before ({col}): "
                  f"{per_set.loc['after', col] / per_set.loc['before', col]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default="benchmarks/results/convergence")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--configs", default="before,before@standard,after")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sweeps-only", action="store_true")
    parser.add_argument("--seed", type=int, default=1000,
                        help="seed of set i: SEED + i (another SEED: the same sets, new fits)")
    parser.add_argument("--worker", nargs=3, metavar=("CONFIG", "SETS", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = tuple(args.models.split(","))
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown {unknown}; allowed: {', '.join(MODELS)}")
    if args.sweeps_only and set(models) - {"sensitivity", "transfer"}:
        parser.error("--sweeps-only: only sensitivity and transfer can be fitted (--models)")
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]), models, args.seed)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets_path = out / ("sweep_sets.pkl" if args.sweeps_only else "evidence_sets.pkl")
    configs = args.configs.split(",")
    if args.summary_only:
        summarise([r for c in configs for r in json.loads((out / f"{c}.json").read_text())])
        return
    if args.regenerate or not sets_path.exists():
        t0 = time.perf_counter()
        print(f"generating evidence sets: {args.worlds} worlds × up to {args.steps} steps")
        sets = (generate_sweep_sets if args.sweeps_only else generate_sets)(args.worlds,
                                                                             args.steps)
        sets_path.write_bytes(pickle.dumps(sets))
        print(f"{len(sets)} evidence sets in {time.perf_counter() - t0:.0f} s → {sets_path}")
    n_sets = len(pickle.loads(sets_path.read_bytes()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = _baseline_tree(args.baseline, Path(tmp) / "before") if any(
            c.startswith("before") for c in configs) else None
        for config in configs:
            commit = config.split("@", 1)[1] if config.startswith("after@") else None
            if config == "after":
                path, label = ROOT, "this tree"
            elif commit is not None:
                path, label = _baseline_tree(commit, Path(tmp) / commit), commit
            else:
                path, label = base, args.baseline
            env = {**os.environ, "PYTHONPATH": str(path)}
            t0 = time.perf_counter()
            print(f"fitting {n_sets} sets with {config!r} (code: {label})", flush=True)
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", config,
                            str(sets_path.resolve()), str((out / f"{config}.json").resolve()),
                            "--models", ",".join(models), "--seed", str(args.seed)],
                           check=True, env=env, cwd=str(path))
            print(f"  done in {time.perf_counter() - t0:.0f} s", flush=True)
            rows += json.loads((out / f"{config}.json").read_text())
    summarise(rows)


if __name__ == "__main__":
    main()
