"""The policy lineage: which policy each paired evaluation produced from which (a tree)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from belief.errors import InputError

__all__ = ["PolicyTree", "policy_tree"]


@dataclass(frozen=True)
class PolicyTree:
    """Lineage of policies: each non-root policy was produced from ``parent`` by ``via``.

    Attributes
    ----------
    policies : list of str
        Roots first, then every child after its parent (topological order).
    parent : dict of str to str
    via : dict of str to str
        The candidate whose execution produced the policy.
    """

    policies: list[str]
    parent: dict[str, str]
    via: dict[str, str]

    def ancestors(self, policy: str) -> list[str]:
        """``policy`` and its ancestors, from ``policy`` up to its root."""
        chain = [policy]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        return chain


def policy_tree(paired: pd.DataFrame, extra: tuple[str, ...] = (),
                table: str = "paired_evaluations") -> PolicyTree:
    """The policy lineage implied by a validated paired table (plus ``extra`` root policies).

    A ``treated_policy`` must come from one (policy, candidate) only, and no policy may be its
    own ancestor.
    """
    parent: dict[str, str] = {}
    via: dict[str, str] = {}
    for i, (p, c, t) in enumerate(zip(paired["policy"], paired["candidate"],
                                      paired["treated_policy"], strict=True)):
        if t == p:
            raise InputError(table, f"treated_policy {t!r} equals its control policy", row=i)
        if t in parent and (parent[t], via[t]) != (p, c):
            raise InputError(table, f"treated_policy {t!r} is produced by ({p!r}, {c!r}) here "
                                    f"but by ({parent[t]!r}, {via[t]!r}) earlier", row=i)
        parent[t], via[t] = p, c
    names = list(dict.fromkeys([*paired["policy"], *paired["treated_policy"], *extra]))
    order: list[str] = []
    placed: set[str] = set()

    def place(name: str, trail: tuple[str, ...]) -> None:
        if name in placed:
            return
        if name in trail:
            raise InputError(table, f"policy lineage has a cycle through {name!r}")
        if name in parent:
            place(parent[name], (*trail, name))
        placed.add(name)
        order.append(name)

    for name in names:
        place(name, ())
    return PolicyTree(order, parent, via)
