"""How every figure is written as PNG: one resolution for ``belief decide``'s figures, the
report's embedded images and the figure worker's files."""

from __future__ import annotations

from typing import Any

__all__ = ["DPI", "save_png"]

DPI = 110
"""Resolution of every figure ``belief decide`` writes."""


def save_png(fig: Any, path: Any) -> None:
    """``fig.savefig(path, format="png", dpi=DPI)`` (a path or a binary file object)."""
    fig.savefig(path, format="png", dpi=DPI)
