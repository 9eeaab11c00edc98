"""Shared validators: every setting is checked once, at the boundary, with one wording.

Each function returns the value converted to a plain Python type, or raises
:class:`~belief.errors.InputError` naming the setting (``name``, e.g. ``"--beta"`` or
``"CVUSettings.n_outcomes"``) and the allowed values.  Booleans are never numbers here
(``True`` is not an integer of 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from belief.errors import InputError

__all__ = ["available_memory", "choice", "fits_in_memory", "fraction", "integer", "is_number",
           "real"]


def is_number(value: Any) -> bool:
    """True for an int, float or numpy number that is not a bool."""
    return not isinstance(value, bool | np.bool_) and isinstance(value, int | float | np.number)


def _finite(value: Any) -> bool:
    """A number with a finite float value (an int too large for a float is not)."""
    try:
        return is_number(value) and math.isfinite(float(value))
    except OverflowError:
        return False


def integer(value: Any, name: str, *, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """An integer (a float with an integral value is accepted) within [minimum, maximum] and
    within a float's range (|value| < 1.8e308: every setting is used in float arithmetic)."""
    ok = _finite(value) and float(value).is_integer()
    if ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return int(value)
    bounds = _bounds(minimum, maximum, "<=", "<=")
    raise InputError(name, f"must be an integer{bounds}, got {_shown(value)}")


def real(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
         open_min: bool = False, open_max: bool = False) -> float:
    """A finite real number within the bounds (closed unless ``open_min``/``open_max``)."""
    if _finite(value):
        v = float(value)
        low = minimum is None or (v > minimum if open_min else v >= minimum)
        high = maximum is None or (v < maximum if open_max else v <= maximum)
        if low and high:
            return v
    bounds = _bounds(minimum, maximum, "<" if open_min else "<=", "<" if open_max else "<=")
    raise InputError(name, f"must be a finite number{bounds}, got {_shown(value)}")


def fraction(value: Any, name: str, *, closed_low: bool = False,
             closed_high: bool = False) -> float:
    """A number in (0, 1), with either end included on request."""
    return real(value, name, minimum=0.0, maximum=1.0, open_min=not closed_low,
                open_max=not closed_high)


def choice(value: Any, name: str, allowed: Iterable[str]) -> str:
    """One of ``allowed`` (the message lists them)."""
    allowed = list(allowed)
    if isinstance(value, str) and value in allowed:
        return value
    raise InputError(name, f"must be one of {allowed}, got {_shown(value)}")


def _shown(value: Any, width: int = 40) -> str:
    """``repr(value)``, cut to ``width`` characters (a 400-digit number stays one short line)."""
    try:
        text = repr(value)
    except ValueError:  # an int of more than sys.get_int_max_str_digits() digits
        return f"an integer of {int(value).bit_length()} bits"
    return text if len(text) <= width else f"{text[:width - 1]}… ({len(text)} characters)"


def _bounds(minimum: float | None, maximum: float | None, lo_op: str, hi_op: str) -> str:
    if minimum is not None and maximum is not None:
        return f" with {minimum:g} {lo_op} value {hi_op} {maximum:g}"
    if minimum is not None:
        return f" {'>' if lo_op == '<' else '>='} {minimum:g}"
    if maximum is not None:
        return f" {'<' if hi_op == '<' else '<='} {maximum:g}"
    return ""


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def fits_in_memory(need: int, name: str, what: str, remedy: str, *,
                   available: int | None = None) -> None:
    """Refuse, before any work, an allocation of ``need`` bytes above ``available`` (default:
    :func:`available_memory`; unknown: nothing refused), naming ``name`` (the flag or table),
    ``what`` needs it, the estimate, what is available and ``remedy``."""
    available = available_memory() if available is None else available
    if available is not None and need > available:
        raise InputError(name, f"{what} need about {need / 1e9:,.1f} GB; "
                               f"{available / 1e9:,.1f} GB available: {remedy}")
