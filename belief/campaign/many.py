"""Many campaigns at once: replay a folder of logs, or run policies over many worlds.

Work runs serially by default, or on a ``dask.distributed`` cluster: an existing scheduler
(``scheduler="tcp://host:8786"``) or a local one (``workers=N``).  Every unit of work is seeded
by its inputs alone, and results are returned in input order, so serial and distributed runs
give identical results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["campaign_seed", "map_tasks", "policy_run", "policy_settings", "replay_folder",
           "run_policies", "write_tree"]


@contextmanager
def _client(scheduler: str | None, workers: int | None, threads: bool = False):
    if scheduler is None and not workers:
        yield None
        return
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as err:  # pragma: no cover - dask is a dependency
        raise InputError("scheduler", f"dask.distributed is not available: {err}") from None
    if scheduler is not None:
        client = Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    if not isinstance(workers, int) or workers < 1:
        raise InputError("workers", f"workers must be an integer >= 1, got {workers!r}")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=not threads,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def map_tasks(fn: Callable[..., Any], items: Sequence[Any], *, scheduler: str | None = None,
              workers: int | None = None, threads: bool = False,
              progress: Callable[[int, int], None] | None = None) -> list[Any]:
    """``[fn(item) for item in items]``, serially or on a Dask cluster, in input order."""
    items = list(items)
    with _client(scheduler, workers, threads) as client:
        if client is None:
            out = []
            for i, item in enumerate(items):
                if progress:
                    progress(i, len(items))
                out.append(fn(item))
            return out
        futures = client.map(fn, items, pure=False)
        return client.gather(futures)


def write_tree(tree: xr.DataTree, path: str | Path) -> Path:
    """Write a DataTree to netCDF atomically (see :func:`belief.files.atomic_write`)."""
    from belief.files import atomic_write

    return atomic_write(path, lambda tmp: tree.to_netcdf(tmp, engine="h5netcdf"))


def _replay_one(args: tuple[str, dict[str, Any]]) -> xr.DataTree:
    """The replay of one log, or — when the log is refused — an empty tree whose ``problem``
    says why (one bad log does not stop the others)."""
    from belief.campaign.replay import replay

    path, kwargs = args
    try:
        return replay(path, **kwargs)
    except InputError as err:
        return xr.DataTree(xr.Dataset(attrs={"source": path, "problem": str(err), "refused": 1,
                                             "n_steps": 0, "agreement": float("nan")}))


def replay_folder(folder: str | Path, out: str | Path | None = None, *,
                  scheduler: str | None = None, workers: int | None = None,
                  threads: bool = False, **replay_kwargs: Any) -> dict[str, xr.DataTree]:
    """Replay every campaign in ``folder`` (each sub-folder or ``*.jsonl`` file).

    Returns a mapping name → replay DataTree; with ``out`` each is saved as
    ``out/<name>.nc`` (the set written as one unit, :class:`belief.files.OutputSet`).  A log
    that is refused does not stop the others: its tree is empty, with ``refused = 1`` and the
    reason in ``problem``, and nothing is written for it.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(str(folder), "not a folder of campaign logs")
    sources = sorted([p for p in folder.iterdir() if p.suffix == ".jsonl" or
                      (p.is_dir() and ((p / "campaign_log.jsonl").exists()
                                       or (p / "steps.csv").exists()))])
    if not sources:
        raise InputError(str(folder), "no campaign logs found (*.jsonl or run folders)")
    trees = map_tasks(_replay_one, [(str(p), replay_kwargs) for p in sources],
                      scheduler=scheduler, workers=workers, threads=threads)
    result = {p.stem if p.is_file() else p.name: t for p, t in zip(sources, trees, strict=True)}
    if out is not None:
        from belief.files import OutputSet

        with OutputSet(out, "replay") as outputs:
            for name, tree in result.items():
                if not tree.attrs.get("refused"):
                    outputs.write(f"{name}.nc", lambda tmp, tree=tree: write_tree(tree, tmp))
    return result


def _spent(campaign: Any) -> np.ndarray:
    """Σ realised ΔC per resource of the campaign's steps so far (not b_0 − b_t, which the
    clamp at 0 after an overrun would understate)."""
    return campaign.costs_table()[list(campaign.candidates.resources)].sum().to_numpy(float)


def _finite_or_none(x: Any) -> float | None:
    """A float for the rows' JSON, None where it is not finite (NaN ≠ NaN would make two equal
    rows compare unequal)."""
    x = float(x)
    return x if np.isfinite(x) else None


def policy_settings(settings: Any, policy: str) -> Any:
    """The campaign settings of one policy's run: ``allocation`` set, and β = 0 unless the
    policy uses CVU (:data:`belief.decision.allocation.USES_CVU`)."""
    from belief.decision.allocation import USES_CVU

    settings = replace(settings, allocation=policy)
    return settings if policy in USES_CVU else replace(settings, beta=0.0)


def policy_run(args: tuple[Any, ...]) -> dict[str, Any]:
    """One campaign of allocation policy ``policy`` on world variation ``v``: a summary dict
    (with a per-step ``trace``: the choice, the best feasible Q and value against stopping, the
    true J and the budget spent after the step, and every candidate's U0, CVU, Q, value
    against stopping and feasibility (``candidates``; None where not finite); and the CVU
    continuation and rollout depth the campaign's settings asked for).

    ``args`` is ``(variation, policy, settings_dict[, budget_scale[, gains[, stated_sd[,
    seed[, past[, family]]]]]])``:
    ``gains`` a mapping of :class:`models.gains.GainsPriors` fields to override (e.g.
    ``{"order_effects": False}``), or None for the defaults; ``stated_sd`` > 0 gives the
    allocator the world's true order effects as stated pair priors of that s.d.
    (:meth:`SyntheticWorld.interaction_priors`), None or 0 states none; ``seed`` seeds the
    world's outcomes and bench runs (default: the variation — one campaign per world, as
    before; the truth does not depend on it); ``past`` > 0 fits the gains model on that many
    past campaigns of the world too (:func:`belief.campaign.scripted.random_past_campaigns`,
    the same for every campaign of a world; ``belief fit --past``), 0 or None: none;
    ``family`` the world family (:func:`belief.campaign.synthetic.benchmark_world`, default
    ``varied``), recorded in the row.
    """
    from belief.campaign.loop import Campaign, settings_from_dict
    from belief.campaign.synthetic import benchmark_world

    variation, policy, settings_dict, *rest = args
    seed = int(rest[3]) if len(rest) > 3 and rest[3] is not None else int(variation)
    family = str(rest[5]) if len(rest) > 5 and rest[5] is not None else "varied"
    world = benchmark_world(variation, seed, family)
    if len(rest) > 2 and rest[2]:  # the true order effects stated as priors (benchmarks)
        world = replace(world, stated_interactions=world.interaction_priors(float(rest[2])))
    if rest and rest[0] != 1.0:  # a scaled starting budget (benchmarks of tight budgets)
        world.budget_values = {r: v * float(rest[0]) for r, v in world.budget_values.items()}
    settings = policy_settings(settings_from_dict(settings_dict), policy)
    fitter = None
    gains = dict(rest[1]) if len(rest) > 1 and rest[1] else {}
    n_past = rest[4] if len(rest) > 4 and rest[4] is not None else 0  # checked below
    if gains or n_past:  # another gains prior, past campaigns (benchmarks of the belief)
        import tempfile

        from belief.campaign.scripted import random_past_campaigns
        from belief.posterior.fitter import BeliefFitter

        with tempfile.TemporaryDirectory() as tmp:  # read into memory, then not needed
            past = random_past_campaigns(world, n_past, tmp) if n_past else ()
        fitter = BeliefFitter.from_priors(world.candidates, settings.fit, {"gains": gains},
                                          past=past)
    import time

    t0 = time.perf_counter()
    campaign = Campaign(world, settings, fitter=fitter)
    trace: list[dict[str, Any]] = []

    def on_step(step: int, decision: xr.Dataset, outcome: Any) -> None:
        feasible = decision["feasible"].values.astype(bool)
        q = np.where(feasible, decision["q"].values, -np.inf)
        v = np.where(feasible, decision["value_vs_stop"].values, -np.inf)
        spent = _spent(campaign)
        cols = [k for k in ("u0", "cvu", "q", "value_vs_stop") if k in decision]
        table = {str(c): {"feasible": bool(feasible[i]),
                          **{k: _finite_or_none(decision[k].values[i]) for k in cols}}
                 for i, c in enumerate(decision["candidate"].values)}
        trace.append({"step": step, "chosen": decision.attrs["chosen"],
                      "max_q": float(q.max()), "max_value_vs_stop": float(v.max()),
                      "continuation_used": str(decision.attrs.get("continuation_used", "")),
                      "true_success_after": world.true_success(campaign.policy),
                      "spent_after": dict(zip(world.candidates.resources, spent.tolist(),
                                              strict=True)),
                      "candidates": table})

    result = campaign.run(on_step=on_step)
    b0 = world.initial_budget
    used = dict(zip(world.candidates.resources, _spent(campaign).tolist(), strict=True))
    hw_unsafe = [t.candidate.id for t in world.truth
                 if t.candidate.drives_hardware and t.p_unsafe > settings.gate.alpha_exec]
    n_initial = len(campaign.initial_evidence.get("safety_events", []))
    unsafe_events = int(result.evidence.safety["unsafe"].iloc[n_initial:].sum())
    return {"variation": variation, "seed": seed, "policy": policy, "horizon": settings.horizon,
            "budget_total": {r: float(b0.sel(resource=r)) for r in b0["resource"].values},
            "final_success": world.true_success(result.policy),
            "initial_success": world.initial_success,
            "steps": len(result.history), "history": list(result.history),
            "budget_used": used,
            "budget_used_fraction": float(np.mean(
                [used[r] / float(b0.sel(resource=r)) for r in b0["resource"].values])),
            "gate_violations": sum(m in hw_unsafe for m in result.history),
            "unsafe_events": unsafe_events,
            "stop_reason": result.stop_reason,
            "unreliable_decisions": sum(1 - int(d.attrs.get("reliable", 1))
                                        for d in result.decisions),
            "seconds": time.perf_counter() - t0,
            "step_seconds": list(result.step_seconds),
            "decide_seconds": list(campaign.decide_seconds), "trace": trace,
            "continuation": settings.cvu.continuation, "rollout_depth": settings.cvu.rollout_depth,
            "past_campaigns": int(n_past), "family": family}


def campaign_seed(variation: int, k: int) -> int:
    """The seed of world ``variation``'s k-th benchmark campaign: v for k = 0 (the one campaign
    per world of earlier runs), 1000·k + v after it (distinct for v < 1000)."""
    if k < 0 or variation < 0:
        raise InputError("seeds", f"campaign index and variation must be >= 0, got "
                                  f"{k!r}, {variation!r}")
    return int(variation) if k == 0 else 1000 * int(k) + int(variation)


def run_policies(variations: Iterable[int], policies: Iterable[str], settings_dict: dict,
                 *, scheduler: str | None = None, workers: int | None = None,
                 threads: bool = False, budget_scale: float = 1.0,
                 gains: dict[str, Any] | None = None, stated_sd: float | None = None,
                 seeds: Iterable[int] | None = None, past: int = 0,
                 family: str = "varied",
                 progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Every policy on every world variation (the policy benchmark), in a fixed order
    (``budget_scale`` multiplies every world's starting budget; ``gains`` overrides fields of
    the gains model's priors, :class:`models.gains.GainsPriors`, for every campaign;
    ``stated_sd`` states each world's true order effects as priors of that s.d.,
    :meth:`SyntheticWorld.interaction_priors`; ``seeds`` gives each world several campaigns,
    seeded ``campaign_seed(v, k)`` for k in ``seeds``, default one with seed v; ``past``
    fits every campaign's gains model on that many past campaigns of its world too,
    :func:`belief.campaign.scripted.random_past_campaigns`; ``family`` the worlds' family,
    :func:`belief.campaign.synthetic.benchmark_world`)."""
    ks = [0] if seeds is None else [int(k) for k in seeds]
    items = [(v, p, settings_dict, float(budget_scale), dict(gains or {}),
              float(stated_sd or 0.0), campaign_seed(v, k), int(past), str(family))
             for v in variations for k in ks for p in policies]
    return map_tasks(policy_run, items, scheduler=scheduler, workers=workers, threads=threads,
                     progress=progress)
