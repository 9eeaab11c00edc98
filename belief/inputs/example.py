"""The example data shipped with the package: a small campaign in the documented file layout.

``belief/data/example/`` holds ``candidates.toml`` (the synthetic world's nine candidates, its
budget and default weights) and ``evidence/`` with one CSV per table, generated once from the
synthetic world by :func:`belief.campaign.example.write_example` (which documents the content).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE_DIR", "example_paths"]

EXAMPLE_DIR = Path(__file__).parents[1] / "data" / "example"


def example_paths() -> tuple[Path, Path]:
    """(evidence folder, candidate file) of the shipped example."""
    return EXAMPLE_DIR / "evidence", EXAMPLE_DIR / "candidates.toml"
