"""Names a user types: unknown names offered the closest known one, ids that the CLI can spell.

:func:`refuse_unknown` refuses the first name that is not a known one (a table, a key, a
column), naming it and, when one is close (:func:`difflib.get_close_matches`, cutoff 0.6),
the closest known name: ``unknown key 'resorces' (did you mean 'resources'?)``.  A misspelt
name is never dropped silently: a misspelt optional column or table would otherwise be read as
absent, and the decision made on other data than the user's.

:func:`check_name` refuses an id (candidate, resource, method, hardware group) that could not
be written back or typed on the command line unchanged: empty, surrounding whitespace, a
control character (newline, tab, …), or one of the separators of the CLI's ``name=value,…``
lists (``,`` and ``=``; :func:`belief.inputs.resources.parse_assignments`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from belief.errors import InputError

__all__ = ["SEPARATORS", "check_name", "closest", "refuse_unknown"]

SEPARATORS = (",", "=")
"""Characters of the CLI's ``name=value,…`` lists, refused in names."""


def closest(name: Any, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib ratio ≥ 0.6), or None."""
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return match[0] if match else None


def refuse_unknown(given: Iterable[Any], known: Iterable[str], table: str, what: str,
                   row: int | str | None = None, *, where: str | None = None) -> None:
    """Refuse the first of ``given`` that is not in ``known``.

    The message names ``what`` (``"key"``, ``"table"``, ``"column"``), the unknown name, the
    closest known name when there is one, and the known names.
    """
    known = [str(k) for k in known]
    for name in given:
        if str(name) in known:
            continue
        near = closest(name, known)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise InputError(table, f"unknown {what} {str(name)!r}{hint}; known: {known}", row,
                         where=where)


def check_name(value: Any, what: str, table: str, row: int | str | None = None, *,
               where: str | None = None) -> str:
    """``value`` if it is a name the CLI can spell (module docstring), else InputError."""
    if not isinstance(value, str) or not value:
        raise InputError(table, f"{what} must be a non-empty string, got {value!r}", row,
                         where=where)
    if value != value.strip():
        raise InputError(table, f"{what} {value!r} has surrounding whitespace", row,
                         where=where)
    bad = [ch for ch in value if ord(ch) < 32 or ord(ch) == 127]
    if bad:
        raise InputError(table, f"{what} {value!r} contains a control character "
                                f"({bad[0]!r})", row, where=where)
    for sep in SEPARATORS:
        if sep in value:
            raise InputError(table, f"{what} {value!r} contains {sep!r}, a separator of the "
                                    "command line's name=value,… lists", row, where=where)
    return value
