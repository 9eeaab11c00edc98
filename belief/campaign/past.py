"""Past campaigns given as campaign logs (``belief fit --past``, ``belief replay --past``).

:func:`read_past` is :func:`belief.inputs.past_campaigns.read_past_campaigns` with the
campaign-log forms too: a ``campaign_log.jsonl`` (or its run folder) and the CSV layout of
replay (``candidates.toml`` + ``steps.csv``), read by :func:`belief.campaign.logged.load_campaign`;
the evidence of every logged step (up to a broken record) is the past campaign's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from belief.campaign.log import LOG_NAME
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.inputs.past_campaigns import PastCampaign, read_past_campaigns

__all__ = ["load_log", "read_past"]


def load_log(path: Path) -> tuple[CandidateSet, Evidence, str] | None:
    """(candidate set, evidence of every logged step, source) of a campaign log at ``path``,
    or None when ``path`` is not one."""
    from belief.campaign.logged import load_campaign

    path = Path(path)
    if not (path.is_file() or (path / LOG_NAME).exists() or (path / "steps.csv").exists()):
        return None
    camp = load_campaign(path)
    if camp.problem:  # never learn silently from part of a broken log
        raise InputError(camp.source or str(path), f"broken past-campaign log: {camp.problem}")
    return camp.candidates, camp.evidence_before(len(camp.steps)), camp.source or str(path)


def read_past(paths: Sequence[str | Path], candidates: CandidateSet,
              current: str | Path | None = None) -> tuple[PastCampaign, ...]:
    """Every past campaign at ``paths`` (logs, CSV layouts or evidence folders), checked
    against ``candidates`` (:mod:`belief.inputs.past_campaigns`); none may be ``current``
    (the evidence folder or log of the current campaign) or be given twice."""
    return read_past_campaigns(paths, candidates, loader=load_log, current=current)
