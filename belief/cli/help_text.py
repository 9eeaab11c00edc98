"""Help texts computed when argparse prints them, so that building the parser (``belief
--help``) imports nothing heavy: the functionals' help reads the registry
(:mod:`belief.decision.functional_registry`, which needs numpy) only for ``belief decide
--help`` and the like."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["LazyHelp", "functionals_help"]


class LazyHelp(str):
    """A help string whose text ``build()`` gives when argparse expands it (``help % params``);
    as a plain string it reads ``…``."""

    _build: Callable[[], str]

    def __new__(cls, build: Callable[[], str]) -> LazyHelp:
        obj = super().__new__(cls, "…")
        obj._build = build
        return obj

    def __mod__(self, params: Any) -> str:
        return self._build() % params


def functionals_help(template: str) -> LazyHelp:
    """``template`` with ``{functionals}`` replaced by the registered functionals
    (:func:`belief.decision.functional_registry.functional_help`) when printed."""

    def build() -> str:
        from belief.decision.functional_registry import functional_help

        return template.format(functionals=functional_help()).replace("%", "%%")

    return LazyHelp(build)
