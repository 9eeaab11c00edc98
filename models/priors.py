"""Validation shared by the models' prior dataclasses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import numpy as np

from belief.errors import InputError

__all__ = ["check_priors"]


def check_priors(priors: Any, locations: Iterable[str] = (), skip: Iterable[str] = ()) -> None:
    """Refuse a prior dataclass whose numbers are not finite, or whose scales are not > 0.

    Every field except those in ``skip`` must be a finite real number (not a bool); every
    field except those in ``locations`` and ``skip`` is a scale and must be > 0.  Errors name
    the class and the field.
    """
    label = type(priors).__name__
    locations, skip = set(locations), set(skip)
    for name, value in asdict(priors).items():
        if name in skip:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | np.number) \
                or not np.isfinite(value):
            raise InputError(label, f"{name} must be finite, got {value!r}")
        if name not in locations and value <= 0:
            raise InputError(label, f"{name} must be > 0, got {value}")
