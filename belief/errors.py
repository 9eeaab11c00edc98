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
    where : str, optional
        How a user finds the offending entry, when "row N" would not help (e.g.
        ``"[[candidate]] 'si' at line 12"``); replaces ``row N`` in the message.
    """

    def __init__(self, table: str, rule: str, row: int | str | None = None, *,
                 where: str | None = None) -> None:
        self.table = table
        self.rule = rule
        self.row = row
        self.where = where
        if where is not None:
            place = f"{table}, {where}"
        else:
            place = f"{table}" if row is None else f"{table}, row {row}"
        super().__init__(f"{place}: {rule}")

    def __reduce__(self):  # picklable (Dask workers send errors back)
        return (_rebuild, (self.table, self.rule, self.row, self.where))


def _rebuild(table: str, rule: str, row: int | str | None, where: str | None) -> InputError:
    return InputError(table, rule, row, where=where)
