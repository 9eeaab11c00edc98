"""Past campaigns of the same candidate set, read and stacked for the gains model's campaign
level (``belief fit --past``; :mod:`models.gains`, "Past campaigns").

A past campaign is given as a folder (or a ``campaign_log.jsonl`` file) in one of three forms:

- a campaign log written by ``belief campaign`` / ``belief demo`` (``campaign_log.jsonl``);
- the CSV layout of ``belief replay`` (``candidates.toml`` + ``steps.csv`` + tables);
- an evidence folder (:mod:`belief.inputs.evidence_dir`), optionally with the
  ``candidates.toml`` it was run with.

This module reads evidence folders; the two log forms are read by the campaign layer and
passed in as ``loader`` (:func:`belief.campaign.past.read_past`, which ``belief fit --past``
and ``belief replay --past`` use).

Its candidate set must be the current one: the same candidate ids with the same role, lens,
method, recipe, batch, policy-changing and repeatable flags, and the same evaluation protocol
(costs and budgets may differ: prices change between campaigns).  Anything else is refused —
one :class:`~belief.errors.InputError` naming the file and the rule (exit 2 on the command
line).  An evidence folder without a candidate file is validated against the current set.

Stacking (:func:`stack_campaigns`): the gains tables of past campaign k (1..K, in the order
given) are appended to the current campaign's with every policy renamed ``label:policy``
(``label`` = the folder's name, made unique with ``#2``, ``#3``…), so the lineages of
different campaigns never meet; each campaign keeps its own roots (baselines).
``model_updates`` gets a ``campaign`` column (0 = current), because a model update acts only
on later steps of its own campaign.  Only the gains tables (paired evaluations, policy
evaluations, gain estimates, model updates) are stacked; safety events, transfer and
sensitivity runs and direction estimates of past campaigns are not used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence

__all__ = ["PastCampaign", "StackedEvidence", "check_distinct_sources", "read_past_campaigns",
           "same_candidate_set", "stack_campaigns"]

_FIELDS = ("role", "lens", "method", "recipe", "batch", "changes_policy", "repeatable")
"""Candidate attributes that must agree between a past campaign and the current one."""


@dataclass(frozen=True)
class PastCampaign:
    """One past campaign: its label (policy prefix), its evidence and where it came from."""

    label: str
    evidence: Evidence
    source: str


@dataclass(frozen=True)
class StackedEvidence:
    """The gains tables of the current and the past campaigns, stacked (module docstring).

    Attributes
    ----------
    paired, policy_evals, gain_estimates, model_updates : DataFrame
        ``model_updates`` has a ``campaign`` column (0 = current campaign).
    campaign_of : dict of str to int
        Every policy of a past campaign (renamed) → its index 1..K.
    labels : list of str
        The past campaigns' labels, index k − 1.
    """

    paired: pd.DataFrame
    policy_evals: pd.DataFrame
    gain_estimates: pd.DataFrame
    model_updates: pd.DataFrame
    campaign_of: dict[str, int] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)


def same_candidate_set(past: CandidateSet, current: CandidateSet) -> str | None:
    """None when ``past`` is the current candidate set (module docstring), else the first
    difference in words."""
    if sorted(past.ids) != sorted(current.ids):
        extra = sorted(set(past.ids) - set(current.ids))
        missing = sorted(set(current.ids) - set(past.ids))
        return f"candidate ids differ (only in the past campaign: {extra}; only in the current " \
               f"one: {missing})"
    if past.eval_protocol != current.eval_protocol:
        return f"evaluation protocol {past.eval_protocol!r} differs from the current " \
               f"{current.eval_protocol!r}"
    for c in current:
        p = past[c.id]
        for name in _FIELDS:
            if getattr(p, name) != getattr(c, name):
                return f"candidate {c.id!r}: {name} {getattr(p, name)!r} differs from the " \
                       f"current {getattr(c, name)!r}"
    return None


Loader = Callable[[Path], "tuple[CandidateSet, Evidence, str] | None"]
"""Reads a campaign log at a path: (its candidate set, its evidence, its file), or None when
the path is not a log."""

LOG_FILES = ("campaign_log.jsonl", "steps.csv")


def _read_one(path: Path, candidates: CandidateSet,
              loader: Loader | None) -> tuple[Evidence, str]:
    from belief.inputs.candidate_file import load_candidates
    from belief.inputs.evidence_dir import read_evidence_dir

    if not path.exists():
        raise InputError(str(path), "past campaign not found (--past)")
    got = loader(path) if loader is not None else None
    if got is not None:
        cands, ev, source = got
        diff = same_candidate_set(cands, candidates)
        if diff is not None:
            raise InputError(source, f"past campaign of another candidate set: {diff}; --past "
                                     "takes campaigns of the current candidate set")
        # re-validated against the current set (the same one; its object is what fits)
        return Evidence.from_tables(candidates, ev.tables()), source
    if path.is_file() or any((path / f).exists() for f in LOG_FILES):
        raise InputError(str(path), "a campaign log: read it with "
                                    "belief.campaign.past.read_past (belief fit --past does)")
    toml = path / "candidates.toml"
    if toml.exists():
        diff = same_candidate_set(load_candidates(toml), candidates)
        if diff is not None:
            raise InputError(str(toml), f"past campaign of another candidate set: {diff}; "
                                        "--past takes campaigns of the current candidate set")
    return read_evidence_dir(path, candidates).evidence, str(path)


def _identity(path: str | Path) -> tuple:
    """What makes two paths the same campaign: the file identity (device, inode) of the
    folder or file — of the log inside a run folder — so that links, ``./`` and trailing
    slashes do not hide it; the resolved path when it cannot be read."""
    p = Path(path)
    for name in LOG_FILES[:1]:
        if p.is_dir() and (p / name).exists():
            p = p / name
    try:
        st = p.stat()
    except OSError:
        return ("path", os.path.realpath(p))
    return (st.st_dev, st.st_ino)


def check_distinct_sources(paths: Sequence[str | Path], current: str | Path | None = None,
                           current_is: str = "the evidence folder") -> None:
    """Refuse a past campaign given twice, or one that is the current campaign itself
    (``current``: the evidence folder of a fit, the log of a replay): its runs would be
    counted twice.  Paths are compared by file identity (:func:`_identity`).

    Raises
    ------
    InputError
        Naming ``--past`` and both paths.
    """
    seen: dict[tuple, str] = {}
    if current is not None:
        seen[_identity(current)] = f"{current_is} {current}"
    for raw in paths:
        key = _identity(raw)
        if key in seen:
            first = seen[key]
            what = (f"is {first}" if current is not None and first.startswith(current_is)
                    else f"is given twice ({first} and {raw})")
            raise InputError("--past", f"{raw} {what}: its runs would be counted twice")
        seen[key] = str(raw)


def read_past_campaigns(paths: Sequence[str | Path], candidates: CandidateSet,
                        loader: Loader | None = None,
                        current: str | Path | None = None) -> tuple[PastCampaign, ...]:
    """Read and check every past campaign (module docstring), labelled by folder name;
    ``loader`` reads the campaign-log forms (none: evidence folders only).

    Raises
    ------
    InputError
        Naming the file and the rule: a missing path, a campaign of another candidate set,
        a campaign given twice or the current evidence folder ``current`` given as its own
        past (:func:`check_distinct_sources`), any rule of the log or evidence readers.
    """
    check_distinct_sources(paths, current)
    out: list[PastCampaign] = []
    used: set[str] = set()
    for raw in paths:
        path = Path(raw)
        ev, source = _read_one(path, candidates, loader)
        base = (path.parent.name if path.is_file() else path.name) or "past"
        label, n = base, 1
        while label in used:  # unique among all labels (a folder may be named "run#2")
            n += 1
            label = f"{base}#{n}"
        used.add(label)
        if not len(ev.paired) and not len(ev.gain_estimates):
            raise InputError(source, "past campaign without paired evaluations or gain "
                                     "estimates: nothing to learn from (--past)")
        out.append(PastCampaign(label, ev, source))
    return tuple(out)


def _renamed(df: pd.DataFrame, label: str, cols: tuple[str, ...]) -> pd.DataFrame:
    df = df.copy()
    for c in cols:
        if c in df.columns:
            df[c] = [f"{label}:{p}" for p in df[c]]
    return df


def stack_campaigns(current: Evidence, past: Sequence[PastCampaign]) -> StackedEvidence:
    """The current campaign's gains tables with every past campaign's appended, policies
    renamed ``label:policy`` (module docstring).

    Raises
    ------
    InputError
        When a renamed policy collides with a policy of the current campaign.
    """
    paired = [current.paired]
    evals = [current.policy_evals]
    estimates = [current.gain_estimates]
    updates = [current.model_updates.assign(campaign=0)]
    campaign_of: dict[str, int] = {}
    for k, camp in enumerate(past, start=1):
        ev = camp.evidence
        p = _renamed(ev.paired, camp.label, ("policy", "treated_policy"))
        e = _renamed(ev.policy_evals, camp.label, ("policy",))
        g = _renamed(ev.gain_estimates, camp.label, ("policy",))
        paired.append(p)
        evals.append(e)
        estimates.append(g)
        updates.append(_renamed(ev.model_updates, camp.label, ("policy",)).assign(campaign=k))
        for name in [*p["policy"], *p["treated_policy"], *e["policy"], *g["policy"]]:
            campaign_of[str(name)] = k
    own = {*current.paired["policy"], *current.paired["treated_policy"],
           *current.policy_evals["policy"], *current.gain_estimates["policy"]}
    clash = sorted(own & set(campaign_of))
    if clash:
        raise InputError("--past", f"policy {clash[0]!r} of the current campaign has the name of "
                                   "a renamed past-campaign policy; rename the past campaign's "
                                   "folder")

    def cat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        frames = [f for f in frames if len(f)] or frames[:1]
        return pd.concat(frames, ignore_index=True)

    mu = cat(updates)
    mu["campaign"] = mu["campaign"].astype(int)
    return StackedEvidence(cat(paired), cat(evals), cat(estimates), mu, campaign_of,
                           [c.label for c in past])
