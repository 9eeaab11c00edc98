"""The one registry of decision functionals: name → type.

The command line, the settings objects, the campaign log and the report find a functional
here by the name it is written with (``"mean"``, ``"lcb:0.1"``, ``"cvar:0.2"``); an
unknown name is refused listing the registered ones, and a type is registered once.  Adding
a functional is one module defining a :class:`~belief.decision.functionals.Functional`
subclass and one entry in :data:`REGISTRY`'s line below.
"""

from __future__ import annotations

from belief.decision.entropic import Entropic
from belief.decision.functionals import Cvar, Functional, Lcb, Mean
from belief.errors import InputError

__all__ = ["REGISTRY", "FunctionalRegistry", "functional_help", "parse_functional"]


class FunctionalRegistry:
    """Functional types by name (their ``kind``), in registration order."""

    def __init__(self, types: tuple[type[Functional], ...] = ()) -> None:
        self._types: dict[str, type[Functional]] = {}
        for cls in types:
            self.register(cls)

    def register(self, cls: type[Functional]) -> type[Functional]:
        """Add ``cls`` under its ``kind``; a second type with the same name is refused."""
        if not (isinstance(cls, type) and issubclass(cls, Functional)) or not cls.kind:
            raise TypeError(f"a functional type is a named Functional subclass, got {cls!r}")
        if cls.kind in self._types:
            raise ValueError(f"functional {cls.kind!r} is already registered "
                             f"(by {self._types[cls.kind].__qualname__})")
        self._types[cls.kind] = cls
        return cls

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names."""
        return tuple(self._types)

    def __getitem__(self, name: str) -> type[Functional]:
        if name not in self._types:
            raise InputError("functional", f"unknown functional {name!r}; allowed: "
                                           f"{self.describe()}")
        return self._types[name]

    def describe(self) -> str:
        """Each registered functional as written, with its parameter's range:
        ``'mean', 'lcb:Q' with 0 < Q < 1, …``."""
        return ", ".join(f"{cls.syntax!r}" + (f" with {cls.rule}" if cls.rule else "")
                         for cls in self._types.values())

    def parse(self, text: str | Functional) -> Functional:
        """``"name"`` or ``"name:parameter"`` → the registered type built with it (a
        :class:`Functional` is returned as it is)."""
        if isinstance(text, Functional):
            return text
        if not isinstance(text, str):
            raise InputError("functional", f"expected a string like {self.describe()}, "
                                           f"got {text!r}")
        kind, sep, param = text.strip().partition(":")
        cls = self[kind]
        if not sep:
            return cls()
        try:
            value = float(param)
        except ValueError:
            raise InputError("functional",
                             f"cannot parse parameter {param!r} of {kind!r}") from None
        return cls(value)


REGISTRY = FunctionalRegistry((Mean, Lcb, Cvar, Entropic))


def parse_functional(text: str | Functional) -> Functional:
    """Parse ``"mean"``, ``"lcb:0.1"``, ``"cvar:0.2"`` … with :data:`REGISTRY`."""
    return REGISTRY.parse(text)


def functional_help() -> str:
    """The registered functionals for a help text: ``mean, lcb:Q (0 < Q < 1), …``."""
    return ", ".join(cls.syntax + (f" ({cls.rule})" if cls.rule else "")
                     for cls in (REGISTRY[n] for n in REGISTRY.names))
