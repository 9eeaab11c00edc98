"""Stated prior knowledge of order effects γ_{a→m}: ``[[interaction]]`` tables of a candidate file.

An order effect γ_{a→m} is the change of m's logit gain when a ran earlier (the gains model,
:mod:`models.gains`).  Without a statement every pair gets the model's default sparsity prior
centred at "no interaction".  A statistician who knows better states a normal prior for a pair
of candidates or for every pair of a method pair::

    [[interaction]]                 # one candidate pair
    from = "sim_refresh"            # a: an adaptation or a model update
    to = "dr_1e6"                   # m: an adaptation
    mean = 0.10                     # prior mean of γ_{a→m} (logit scale)
    sd = 0.05                       # prior standard deviation (> 0)

    [[interaction]]                 # every candidate pair (a, m) with these methods
    from_method = "SI"
    to_method = "DR"
    mean = -0.15
    sd = 0.10

Rules: ``from``/``to`` name known candidates (or ``from_method``/``to_method`` known methods,
never both kinds in one table); the source is an adaptation or a model update (a diagnosis acts
through what it measures, never through an order effect); the target is an adaptation; a pair's
source and target differ (a candidate's effect on itself is the diminishing-returns factor ρ);
``mean`` within [-10, 10] and ``sd`` within [1e-3, 10] (logit scale, :data:`MEAN_RANGE`,
:data:`SD_RANGE`); a method pair matches at least one candidate pair; no pair stated twice at
the same level.  A candidate-pair
statement overrides a method-pair statement for that pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from belief.errors import InputError
from belief.inputs.names import refuse_unknown

__all__ = ["ACTOR_ROLES", "MEAN_RANGE", "SD_RANGE", "InteractionPrior", "interaction_pairs",
           "parse_interactions", "stated_pair_priors"]

ACTOR_ROLES = ("adaptation", "model_update")
"""Roles whose execution can change a later candidate's gain (the source a of γ_{a→m})."""

_KEYS = {"from", "to", "from_method", "to_method", "mean", "sd"}

MEAN_RANGE = 10.0
"""|mean| ≤ 10 on the logit scale: an order effect of 10 moves a success rate of 0.5 to
0.99995; a larger one is a unit mistake, and the sampler overflows on it."""
SD_RANGE = (1e-3, 10.0)
"""sd in [1e-3, 10] on the logit scale: below, γ is fixed to a point the sampler cannot
resolve next to the other scales (≈ 0.1–1); above, the prior is flat over every probability."""


@dataclass(frozen=True)
class InteractionPrior:
    """A stated normal prior N(mean, sd²) of γ_{a→m}.

    ``kind`` is ``"pair"`` (``source``/``target`` are candidate ids) or ``"method"`` (they are
    method labels, and the prior applies to every candidate pair with these methods).
    """

    source: str
    target: str
    mean: float
    sd: float
    kind: str = "pair"

    def as_dict(self) -> dict[str, Any]:
        keys = ("from", "to") if self.kind == "pair" else ("from_method", "to_method")
        return {keys[0]: self.source, keys[1]: self.target, "mean": float(self.mean),
                "sd": float(self.sd)}


def _number(entry: Mapping[str, Any], key: str, table: str, row: int) -> float:
    v = entry.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
        raise InputError(table, f"{key} must be a finite number, got {v!r}", row=row)
    return float(v)


def parse_interactions(section: Any, candidates: Sequence[Any],
                       source: str = "candidates") -> tuple[InteractionPrior, ...]:
    """Validate the ``[[interaction]]`` tables against the candidates (rules: module docstring).

    Raises
    ------
    InputError
        Naming ``<source> [[interaction]]``, the row and the rule.
    """
    if section is None:
        return ()
    table = f"{source} [[interaction]]"
    if not isinstance(section, list):
        raise InputError(table, "interactions must be given as [[interaction]] tables")
    by_id = {c.id: c for c in candidates}
    methods = {c.method for c in candidates}
    out: list[InteractionPrior] = []
    seen: set[tuple[str, str, str]] = set()
    for row, entry in enumerate(section):
        if not isinstance(entry, Mapping):
            raise InputError(table, "each [[interaction]] must be a table", row=row)
        refuse_unknown(entry, sorted(_KEYS), table, "key", row)
        pair = "from" in entry or "to" in entry
        method = "from_method" in entry or "to_method" in entry
        if pair == method:
            raise InputError(table, "give either from/to (a candidate pair) or from_method/"
                                    "to_method (a method pair)", row=row)
        keys = ("from", "to") if pair else ("from_method", "to_method")
        for k in keys:
            if not isinstance(entry.get(k), str) or not entry[k]:
                raise InputError(table, f"{k} must be a non-empty string", row=row)
        a, m = entry[keys[0]], entry[keys[1]]
        if pair:
            for k, cid in zip(keys, (a, m), strict=True):
                if cid not in by_id:
                    raise InputError(table, f"{k} = {cid!r} is not a candidate; known: "
                                            f"{sorted(by_id)}", row=row)
            if by_id[a].role not in ACTOR_ROLES:
                raise InputError(table, f"from = {a!r} has role {by_id[a].role!r}: only "
                                        f"{' and '.join(ACTOR_ROLES)}s create order effects (a "
                                        "diagnosis acts through what it measures)", row=row)
            if by_id[m].role != "adaptation":
                raise InputError(table, f"to = {m!r} has role {by_id[m].role!r}: only "
                                        "adaptations have a gain to change", row=row)
            if a == m:
                raise InputError(table, f"from and to are both {a!r}: a candidate's effect on "
                                        "itself is the diminishing-returns factor ρ", row=row)
        else:
            for k, lab in zip(keys, (a, m), strict=True):
                if lab not in methods:
                    raise InputError(table, f"{k} = {lab!r} is not a method of this file; "
                                            f"known: {sorted(methods)}", row=row)
            by_method = {c.id: c.method for c in candidates}
            if not any(by_method[x] == a and by_method[y] == m
                       for x, y in interaction_pairs(candidates)[2]):
                raise InputError(table, f"from_method = {a!r}, to_method = {m!r} matches no "
                                        "candidate pair (an adaptation or model update of the "
                                        "first method and another adaptation of the second): "
                                        "the statement would have no effect", row=row)
        mean = _number(entry, "mean", table, row)
        sd = _number(entry, "sd", table, row)
        if sd <= 0:
            raise InputError(table, f"sd must be > 0, got {sd}", row=row)
        if abs(mean) > MEAN_RANGE:
            raise InputError(table, f"mean must be within [-{MEAN_RANGE:g}, {MEAN_RANGE:g}] "
                                    f"(logit scale, the range the model can sample), got "
                                    f"{mean:g}", row=row)
        if not SD_RANGE[0] <= sd <= SD_RANGE[1]:
            raise InputError(table, f"sd must be within [{SD_RANGE[0]:g}, {SD_RANGE[1]:g}] "
                                    f"(logit scale, the range the model can sample), got "
                                    f"{sd:g}", row=row)
        key = ("pair" if pair else "method", a, m)
        if key in seen:
            raise InputError(table, f"{keys[0]} = {a!r}, {keys[1]} = {m!r} is stated twice",
                             row=row)
        seen.add(key)
        out.append(InteractionPrior(a, m, mean, sd, key[0]))
    return tuple(out)


def interaction_pairs(candidates: Sequence[Any]) -> tuple[list[str], list[str],
                                                          list[tuple[str, str]]]:
    """Actors (sources), targets and every pair (a, m), a ≠ m, of γ, in candidate order.

    Actors are the adaptations and model updates; targets the adaptations.
    """
    actors = [c.id for c in candidates if c.role in ACTOR_ROLES]
    targets = [c.id for c in candidates if c.role == "adaptation"]
    pairs = [(a, m) for a in actors for m in targets if a != m]
    return actors, targets, pairs


def stated_pair_priors(candidates: Sequence[Any], stated: Sequence[InteractionPrior]
                       ) -> dict[tuple[str, str], tuple[float, float]]:
    """The stated (mean, sd) of every candidate pair that has one (pair statements override
    method-pair statements)."""
    method = {c.id: c.method for c in candidates}
    _, _, pairs = interaction_pairs(candidates)
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for s in stated:
        if s.kind == "method":
            for a, m in pairs:
                if method[a] == s.source and method[m] == s.target:
                    out[(a, m)] = (s.mean, s.sd)
    for s in stated:
        if s.kind == "pair":
            out[(s.source, s.target)] = (s.mean, s.sd)
    return out
