"""A campaign that executes a given sequence of candidates in a world, without deciding.

Used to make the *past campaigns* of a team (``belief fit --past``,
:mod:`belief.inputs.past_campaigns`) in tests and benchmarks: each is the world's initial
evidence plus the outcome of every executed candidate, written as an evidence folder with
the candidate file it ran with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from belief.campaign.world import model_update_row
from belief.errors import InputError
from belief.inputs.past_campaigns import PastCampaign, read_past_campaigns

__all__ = ["random_past_campaigns", "scripted_campaign", "write_evidence_folder"]


def scripted_campaign(world, order: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Execute ``order`` (candidate ids, step t = 0, 1, …) from the world's initial policy.

    Returns the evidence tables by name (``policy_evaluations``, ``safety_events``,
    ``paired_evaluations``, ``gain_estimates``, ``model_updates``; empty ones left out).
    The world is reset first, so the same world object can script several campaigns (their
    outcomes differ through ``world.seed``).
    """
    world.reset()
    init = world.initial_evidence()
    frames: dict[str, list[pd.DataFrame]] = {name: [df] for name, df in init.items()}
    names = {"paired": "paired_evaluations", "safety": "safety_events",
             "gain_estimates": "gain_estimates"}
    for t, cid in enumerate(order):
        before = world.policy
        out = world.execute(cid, t)
        for attr, name in names.items():
            df = getattr(out, attr)
            if len(df):
                frames.setdefault(name, []).append(df)
        mu = model_update_row(world.candidates, cid, t, before)
        if mu is not None:
            frames.setdefault("model_updates", []).append(mu)
    out_tables = {}
    for name, dfs in frames.items():
        dfs = [d for d in dfs if len(d)]
        if dfs:
            out_tables[name] = pd.concat(dfs, ignore_index=True)
    out_tables.setdefault("paired_evaluations", pd.DataFrame(columns=[
        "step", "candidate", "policy", "eval_protocol", "control_successes", "control_trials",
        "treated_successes", "treated_trials", "treated_policy"]))
    return out_tables


def write_evidence_folder(tables: dict[str, pd.DataFrame], folder: str | Path,
                          candidates=None) -> Path:
    """Write ``tables`` as ``<name>.csv`` files in ``folder`` (created), and the candidate
    file ``candidates.toml`` when ``candidates`` (a CandidateSet) is given."""
    from belief.inputs.candidate_file import candidates_toml

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(folder / f"{name}.csv", index=False)
    if candidates is not None:
        (folder / "candidates.toml").write_text(candidates_toml(candidates), encoding="utf-8")
    return folder


def random_past_campaigns(world, k: int, folder: str | Path) -> tuple[PastCampaign, ...]:
    """``k`` past campaigns of ``world``'s candidate set, read back as ``belief fit --past``
    reads them (:func:`belief.inputs.past_campaigns.read_past_campaigns`): what a team that
    ran the same candidates ``k`` times before would bring to the current campaign.

    Past campaign j = 0, …, k − 1 executes every policy-changing adaptation of the candidate
    set once, in the order ``default_rng([v, 40_000, j]).permutation`` (v = the world's
    variation), in a copy of the world seeded ``1_000_000 + 1000·j + v`` (outcomes distinct
    from every benchmark campaign's seed ``1000·i + v``, i, v < 1000); it is written as an
    evidence folder ``folder/past<j>`` with its candidate file.  The same world gets the same
    past whatever the current campaign's seed: a team has one history.  Across campaigns a
    pair a → m is seen in both orders with probability 1 − 2^(1−k) (7/8 at k = 4, never at
    k = 1), which is how past campaigns inform the order effects (the campaign level of
    :mod:`models.gains` absorbs each campaign's own offsets).  Only the gains tables are used
    (:mod:`belief.inputs.past_campaigns`), so running the unsafe adaptations here costs
    nothing.  (The order's stream ``[v, 40_000, j]`` is also the world's stochastic-cost
    stream of campaign seed v at step j, first execution: numpy ignores trailing zeros.  The
    varied worlds draw no cost noise, so nothing is shared there.)
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise InputError("past", f"the number of past campaigns must be an integer >= 0, "
                                 f"got {k!r}")
    v = int(world.variation or 0)
    adaptations = [c.id for c in world.candidates if c.role == "adaptation"
                   and c.changes_policy]
    paths = []
    for j in range(k):
        past = replace(world, seed=1_000_000 + 1000 * j + v)
        order = [adaptations[i] for i in np.random.default_rng([v, 40_000, j]).permutation(
            len(adaptations))]
        paths.append(write_evidence_folder(scripted_campaign(past, order),
                                           Path(folder) / f"past{j}", past.candidates))
    return read_past_campaigns(paths, world.candidates)
