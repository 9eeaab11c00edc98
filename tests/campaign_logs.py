"""Helpers shared by the campaign tests (not a test module)."""

from __future__ import annotations

import json
from pathlib import Path


def log_records(folder: str | Path) -> list[dict]:
    """The records of ``folder/campaign_log.jsonl`` as written, one dict per line (no repair,
    no validation: the tests check what the campaign wrote, not what the reader makes of it)."""
    return [json.loads(x) for x in (Path(folder) / "campaign_log.jsonl").read_text().splitlines()]
