"""The project's error type for refused input.

Every rule broken in user input (an evidence table, a candidate file, a budget, a setting)
raises :class:`InputError`, a :class:`ValueError` whose message names the table (or
parameter), the row when there is one, and the rule that was broken.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Refused input: names the table, the row and the rule.

    Parameters
    ----------
    table : str
        The table, file or parameter the input came from (``"paired_evaluations"``,
        ``"candidates.toml"``, ``"budget"``, ...).
    rule : str
        The rule that was broken, in words.
    row : int or str, optional
        The offending row (0-based position in the table) or entry name.
    """

    def __init__(self, table: str, rule: str, row: int | str | None = None) -> None:
        self.table = table
        self.rule = rule
        self.row = row
        where = f"{table}" if row is None else f"{table}, row {row}"
        super().__init__(f"{where}: {rule}")
