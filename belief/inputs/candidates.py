"""Candidates m = (role, lens, method, recipe, batch), their cost vectors, and budgets.

A candidate is *how an intervention is run* (its ``recipe`` and ``batch``); it is distinct from the
evaluation protocol E_shared (``eval_protocol``), which is *how any policy is scored* and is fixed
for a whole campaign.  Candidates are loaded from a TOML file::

    [campaign]
    eval_protocol = "pick_place_v1"           # E_shared
    resources = ["real_h", "compute", "eng_h"]
    policy_interface = "arm7_obs_v2/jointvel_50hz"   # optional: obs/action schema id of π

    [budget]                                  # optional: the starting budget b_0
    real_h = 20
    compute = 400
    eng_h = 30

    [[candidate]]
    id = "si_friction"
    role = "adaptation"                       # adaptation | diagnosis | model_update
    lens = "model"                            # model | data | representation | optimization
    method = "SI"                             # free label
    recipe = "friction calibration"
    batch = "30 min on the arm"
    cost = { real_h = 0.5, compute = 5, eng_h = 2 }
    drives_hardware = true
    repeatable = false
    hardware_group = "arm"                    # shared hardware (execution-risk pooling);
                                              # required when drives_hardware = true
    targets = ["friction"]                    # mismatch directions it acts on

    [[candidate]]                             # a diagnosis whose measurement informs gains
    id = "ft_pilot"
    role = "diagnosis"
    lens = "optimization"
    method = "FT pilot"
    cost = { real_h = 0.5, compute = 1, eng_h = 0.5 }
    informs = ["ft_real_100"]                 # adaptations whose logit gain it estimates
    measurement_se = 0.15                     # standard error of that estimate (logit scale)

    [[candidate]]                             # a diagnosis that measures a mismatch direction
    id = "latency_probe"
    role = "diagnosis"
    lens = "model"
    method = "probe"
    cost = { real_h = 0.5, compute = 0, eng_h = 1 }
    targets = ["latency"]                     # with measurement_se: one direction_estimates
    measurement_se = 0.1                      # row per direction, y ~ N(ξ_latency, se²)
                                              # (models/gains/__init__.py, "Direction effects")

    [[interaction]]                           # optional: a stated prior of an order effect
    from = "sim_refresh"                      # γ_{a→m} (format: belief/inputs/interactions.py)
    to = "dr_1e6"
    mean = 0.10
    sd = 0.05
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.interactions import InteractionPrior, parse_interactions
from belief.inputs.names import check_name, refuse_unknown
from belief.inputs.resources import make_budget

__all__ = [
    "CAMPAIGN_KEYS",
    "DEFAULT_RESOURCES",
    "LENSES",
    "ROLES",
    "Candidate",
    "CandidateSet",
]

ROLES = ("adaptation", "diagnosis", "model_update")
LENSES = ("model", "data", "representation", "optimization")
DEFAULT_RESOURCES = ("real_h", "compute", "eng_h")


@dataclass(frozen=True)
class Candidate:
    """One intervention candidate m.

    Attributes
    ----------
    id : str
        Unique name.
    role, lens : str
        ``role`` in :data:`ROLES`, ``lens`` in :data:`LENSES`.
    method : str
        Free label (SI, DR, DA, FT, co-training, ...).
    recipe, batch : str
        How the intervention is run and at what scale.
    cost : dict of str to float
        ΔC(m) over named resources (non-negative; missing resources cost 0).
    drives_hardware : bool
        Whether executing m runs the real robot (only those face the execution-safety gate).
    changes_policy : bool
        Whether m retrains the policy (only adaptations do; their immediate gain ΔJ can be ≠ 0).
    repeatable : bool
        Whether m stays a candidate after it has been executed.
    hardware_group : str or None
        Hardware shared with other candidates (pooling of execution risk); required when
        ``drives_hardware`` is true.
    targets : tuple of str
        Mismatch directions ξ_k the intervention acts on (candidate prioritisation).  For a
        diagnosis with ``measurement_se``: the directions it *measures* (:attr:`measures`):
        each execution gives one ``direction_estimates`` row per direction, a measurement of
        the direction effect ξ_k shared by the logit gains of the adaptations that target k
        (observation model in :mod:`models.gains`, "Direction effects").
    informs : tuple of str
        For a diagnosis: the adaptations whose logit gain its measurement estimates (a
        ``gain_estimates`` evidence row per informed candidate).
    measurement_se : float or None
        Standard error (logit scale) of that measurement; required when ``informs`` is set;
        for a diagnosis with ``targets`` it makes the targets measured directions.
    safety_runs : int
        Execution-safety trials one execution adds to an execution-risk cell (0: unknown or
        none).  For a hardware candidate they are its own runs (its cell); for a bench safety
        test they count toward the cell of ``safety_test_of``.  CVU uses it for the
        execution-risk channel: the simulated unsafe count y ~ Binomial(safety_runs, p_unsafe)
        updates the gate in s_{t+1} (:mod:`belief.decision.cvu.safety`).
    safety_test_of : str or None
        For a bench safety-test diagnosis: the hardware candidate whose controller it runs
        ``safety_runs`` times on the bench.  Observation model: the bench trials are
        executions of that candidate with the *same* p_unsafe, reported as ``safety_events``
        rows of that candidate.
    """

    id: str
    role: str
    lens: str
    method: str
    cost: Mapping[str, float]
    recipe: str = ""
    batch: str = ""
    drives_hardware: bool = False
    changes_policy: bool = False
    repeatable: bool = False
    hardware_group: str | None = None
    targets: tuple[str, ...] = ()
    description: str = ""
    informs: tuple[str, ...] = ()
    measurement_se: float | None = None
    safety_runs: int = 0
    safety_test_of: str | None = None

    @property
    def measures(self) -> tuple[str, ...]:
        """The mismatch directions this candidate measures: the ``targets`` of a diagnosis
        that declares ``measurement_se`` (otherwise none; targets then only label)."""
        if self.role == "diagnosis" and self.measurement_se is not None:
            return tuple(self.targets)
        return ()


CAMPAIGN_KEYS = ("eval_protocol", "resources", "policy_interface")
"""The keys of ``[campaign]``."""

_FIELDS = {
    "id", "role", "lens", "method", "cost", "recipe", "batch", "drives_hardware",
    "changes_policy", "repeatable", "hardware_group", "targets", "description", "informs",
    "measurement_se", "safety_runs", "safety_test_of",
}


@dataclass(frozen=True)
class CandidateSet:
    """An ordered set of candidates with the resources they are costed in.

    Attributes
    ----------
    candidates : tuple of Candidate
    resources : tuple of str
        Names of the budgets (default ``real_h``, ``compute``, ``eng_h``).
    eval_protocol : str
        The campaign's shared evaluation protocol E_shared.
    budget : xarray.DataArray or None
        The starting budget b_0 over ``resource``, when the file gives one.
    policy_interface : str or None
        The campaign's policy interface (observation/action schema id, control rate, action
        semantics).  Evidence stating a different interface is refused (δ_J loses its definition
        when π is not the same function in sim and real); None means "not checked".
    interactions : tuple of InteractionPrior
        Stated priors of order effects γ_{a→m} (``[[interaction]]``,
        :mod:`belief.inputs.interactions`); empty means the gains model's default prior.
    """

    candidates: tuple[Candidate, ...]
    resources: tuple[str, ...] = DEFAULT_RESOURCES
    eval_protocol: str = "default"
    budget: xr.DataArray | None = field(default=None, compare=False)
    source: str = "candidates"
    policy_interface: str | None = None
    interactions: tuple[InteractionPrior, ...] = ()

    def __post_init__(self) -> None:
        table = self.source
        if not self.candidates:
            raise InputError(table, "at least one [[candidate]] is required")
        if len(set(self.resources)) != len(self.resources) or not self.resources:
            raise InputError(table, f"[campaign] resources must be distinct and non-empty, got "
                                    f"{list(self.resources)}")
        for r in self.resources:
            check_name(r, "resource", f"{table} [campaign] resources")
        seen: dict[str, int] = {}
        for i, c in enumerate(self.candidates):
            _validate_candidate(c, i, self.resources, table)
            if c.id in seen:
                raise InputError(table, f"duplicate candidate id {c.id!r} (first at row "
                                        f"{seen[c.id]})", row=i)
            seen[c.id] = i
        roles = {c.id: c.role for c in self.candidates}
        for i, c in enumerate(self.candidates):
            for target in c.informs:
                if roles.get(target) != "adaptation":
                    raise InputError(table, f"{c.id!r} informs {target!r}, which is not an "
                                            "adaptation candidate of this file", row=i)
        targeted = {k for c in self.candidates if c.role == "adaptation" for k in c.targets}
        for i, c in enumerate(self.candidates):
            for k in c.measures:
                if k not in targeted:
                    raise InputError(table, f"{c.id!r} measures direction {k!r} (targets with "
                                            "measurement_se), which no adaptation of this file "
                                            "targets: its outcome would inform nothing", row=i)
        hardware = {c.id for c in self.candidates if c.drives_hardware}
        for i, c in enumerate(self.candidates):
            if c.safety_test_of is not None and c.safety_test_of not in hardware:
                raise InputError(table, f"{c.id!r}: safety_test_of {c.safety_test_of!r} must "
                                        "name a hardware candidate (drives_hardware = true) "
                                        "of this file", row=i)
        parse_interactions([s.as_dict() for s in self.interactions], self.candidates, table)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def __getitem__(self, key: str | int) -> Candidate:
        if isinstance(key, int):
            return self.candidates[key]
        for c in self.candidates:
            if c.id == key:
                return c
        raise KeyError(f"unknown candidate {key!r}; known: {self.ids}")

    @property
    def ids(self) -> list[str]:
        """Candidate ids in file order."""
        return [c.id for c in self.candidates]

    def index(self, candidate_id: str) -> int:
        """Position of ``candidate_id``; :class:`KeyError` when unknown."""
        try:
            return self.ids.index(candidate_id)
        except ValueError:
            raise KeyError(f"unknown candidate {candidate_id!r}; known: {self.ids}") from None

    def costs(self) -> xr.DataArray:
        """ΔC as a DataArray over (``candidate``, ``resource``)."""
        data = np.array([[float(c.cost.get(r, 0.0)) for r in self.resources]
                         for c in self.candidates])
        return xr.DataArray(data, dims=("candidate", "resource"),
                            coords={"candidate": self.ids, "resource": list(self.resources)},
                            name="cost")

    def attributes(self) -> xr.Dataset:
        """Candidate attributes as coordinates over ``candidate`` (for joining onto beliefs)."""
        coords: dict[str, Any] = {"candidate": self.ids}
        for name in ("role", "lens", "method", "recipe", "batch"):
            coords[name] = ("candidate", [getattr(c, name) for c in self.candidates])
        for name in ("drives_hardware", "changes_policy", "repeatable"):
            coords[name] = ("candidate", np.array([getattr(c, name) for c in self.candidates]))
        coords["hardware_group"] = ("candidate",
                                    [c.hardware_group or "" for c in self.candidates])
        return xr.Dataset(coords=coords)

    def subset(self, ids: Iterable[str]) -> CandidateSet:
        """The candidates named in ``ids`` (in this set's order)."""
        keep = set(ids)
        kept = tuple(c for c in self.candidates if c.id in keep)
        methods = {c.method for c in kept}
        stated = tuple(s for s in self.interactions
                       if (s.kind == "pair" and {s.source, s.target} <= keep)
                       or (s.kind == "method" and {s.source, s.target} <= methods))
        return CandidateSet(kept, self.resources, self.eval_protocol, self.budget, self.source,
                            self.policy_interface, stated)


def _validate_candidate(c: Candidate, row: int, resources: tuple[str, ...], table: str) -> None:
    if not isinstance(c.id, str) or not c.id.strip():
        raise InputError(table, "candidate id must be a non-empty string", row=row)
    check_name(c.id, "candidate id", table, row)
    if c.role not in ROLES:
        raise InputError(table, f"role must be one of {list(ROLES)}, got {c.role!r}", row=row)
    if c.lens not in LENSES:
        raise InputError(table, f"lens must be one of {list(LENSES)}, got {c.lens!r}", row=row)
    if not isinstance(c.method, str) or not c.method.strip():
        raise InputError(table, "method must be a non-empty string", row=row)
    for r, v in c.cost.items():
        if r not in resources:
            raise InputError(table, f"unknown resource {r!r} in cost of {c.id!r}; resources "
                                    f"are {list(resources)}", row=row)
        if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
            raise InputError(table, f"cost {r} of {c.id!r} must be a finite number, got {v!r}",
                             row=row)
        if v < 0:
            raise InputError(table, f"cost {r} of {c.id!r} must be >= 0, got {v}", row=row)
    if c.changes_policy != (c.role == "adaptation"):
        raise InputError(table, f"changes_policy={c.changes_policy} contradicts role "
                                f"{c.role!r}: only adaptations change the policy (a model update "
                                "that retrains the policy is an adaptation)", row=row)
    for flag in ("drives_hardware", "changes_policy", "repeatable"):
        if not isinstance(getattr(c, flag), bool):
            raise InputError(table, f"{flag} must be true or false", row=row)
    if c.drives_hardware and not (isinstance(c.hardware_group, str) and c.hardware_group.strip()):
        raise InputError(table, f"hardware candidate {c.id!r} (drives_hardware = true) needs a "
                                "hardware_group: execution risk is pooled across candidates "
                                "that share hardware", row=row)
    if c.informs:
        if c.role != "diagnosis":
            raise InputError(table, f"only diagnosis candidates may set informs ({c.id!r} has "
                                    f"role {c.role!r})", row=row)
        se = c.measurement_se
        if isinstance(se, bool) or not isinstance(se, int | float) or not np.isfinite(se) \
                or se <= 0:
            raise InputError(table, f"{c.id!r} informs {list(c.informs)} and needs "
                                    f"measurement_se > 0, got {se!r}", row=row)
    if c.role == "diagnosis" and c.targets and c.measurement_se is not None:
        se = c.measurement_se
        if isinstance(se, bool) or not isinstance(se, int | float) or not np.isfinite(se) \
                or se <= 0:
            raise InputError(table, f"{c.id!r} measures {list(c.targets)} and needs "
                                    f"measurement_se > 0, got {se!r}", row=row)
    runs = c.safety_runs
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 0:
        raise InputError(table, f"safety_runs of {c.id!r} must be an integer >= 0, got "
                                f"{runs!r}", row=row)
    if c.safety_test_of is not None:
        if not isinstance(c.safety_test_of, str) or c.safety_test_of == c.id:
            raise InputError(table, f"safety_test_of of {c.id!r} must name another "
                                    "candidate", row=row)
        if c.role != "diagnosis" or runs == 0:
            raise InputError(table, f"{c.id!r}: a bench safety test (safety_test_of) must be "
                                    "a diagnosis with safety_runs > 0", row=row)


def _candidate_from_mapping(entry: Mapping[str, Any], row: int, table: str) -> Candidate:
    if not isinstance(entry, Mapping):
        raise InputError(table, "each [[candidate]] must be a table", row=row)
    refuse_unknown(entry, sorted(_FIELDS), table, "key", row)
    for required in ("id", "role", "lens", "method"):
        if required not in entry:
            raise InputError(table, f"missing required field {required!r}", row=row)
    cost = entry.get("cost", {})
    if not isinstance(cost, Mapping):
        raise InputError(table, "cost must be a table {resource = amount}", row=row)
    role = entry["role"]
    targets = entry.get("targets", ())
    if not isinstance(targets, list | tuple) or not all(isinstance(t, str) for t in targets):
        raise InputError(table, "targets must be a list of strings", row=row)
    text_fields = ("id", "role", "lens", "method", "recipe", "batch", "description")
    for name in text_fields:
        if name in entry and not isinstance(entry[name], str):
            raise InputError(table, f"{name} must be a string, got {entry[name]!r}", row=row)
    informs = entry.get("informs", ())
    if not isinstance(informs, list | tuple) or not all(isinstance(t, str) for t in informs):
        raise InputError(table, "informs must be a list of candidate ids", row=row)
    group = entry.get("hardware_group")
    if group is not None and not isinstance(group, str):
        raise InputError(table, "hardware_group must be a string", row=row)
    return Candidate(
        id=entry["id"], role=role, lens=entry["lens"], method=entry["method"],
        cost=dict(cost), recipe=entry.get("recipe", ""), batch=str(entry.get("batch", "")),
        drives_hardware=entry.get("drives_hardware", False),
        changes_policy=entry.get("changes_policy", role == "adaptation"),
        repeatable=entry.get("repeatable", False), hardware_group=group,
        targets=tuple(targets), description=entry.get("description", ""),
        informs=tuple(informs), measurement_se=entry.get("measurement_se"),
        safety_runs=entry.get("safety_runs", 0), safety_test_of=entry.get("safety_test_of"),
    )


def candidates_from_dict(doc: Mapping[str, Any], source: str = "candidates") -> CandidateSet:
    """Build a :class:`CandidateSet` from the parsed TOML document (see module docstring)."""
    campaign = doc.get("campaign", {})
    if not isinstance(campaign, Mapping):
        raise InputError(source, "[campaign] must be a table")
    refuse_unknown(campaign, CAMPAIGN_KEYS, f"{source} [campaign]", "key")
    resources = campaign.get("resources", DEFAULT_RESOURCES)
    if not isinstance(resources, list | tuple) or not all(isinstance(r, str) and r
                                                           for r in resources):
        raise InputError(source, "[campaign] resources must be a list of names")
    resources = tuple(resources)
    if not resources or len(set(resources)) != len(resources):
        raise InputError(f"{source} [campaign] resources", f"must be distinct and non-empty, "
                                                           f"got {list(resources)}")
    for r in resources:
        check_name(r, "resource", f"{source} [campaign] resources")
    eval_protocol = campaign.get("eval_protocol", "default")
    if not isinstance(eval_protocol, str) or not eval_protocol:
        raise InputError(source, "[campaign] eval_protocol must be a non-empty string")
    entries = doc.get("candidate", [])
    if not isinstance(entries, list):
        raise InputError(source, "candidates must be given as [[candidate]] tables")
    cands = tuple(_candidate_from_mapping(e, i, source) for i, e in enumerate(entries))
    budget = None
    if "budget" in doc:
        if not isinstance(doc["budget"], Mapping):
            raise InputError(source, "[budget] must be a table {resource = amount}")
        budget = make_budget(doc["budget"], resources, table=f"{source} [budget]")
    interface = campaign.get("policy_interface")
    if interface is not None and (not isinstance(interface, str) or not interface.strip()):
        raise InputError(source, "[campaign] policy_interface must be a non-empty string "
                                 "(the obs/action schema id of the policy)")
    interactions = parse_interactions(doc.get("interaction"), cands, source)
    return CandidateSet(cands, resources, eval_protocol, budget, source, interface,
                        interactions)


def candidates_to_dict(cs: CandidateSet) -> dict[str, Any]:
    """The TOML-shaped document of a candidate set (inverse of :func:`candidates_from_dict`)."""
    campaign: dict[str, Any] = {"eval_protocol": cs.eval_protocol,
                                "resources": list(cs.resources)}
    if getattr(cs, "policy_interface", None):
        campaign["policy_interface"] = cs.policy_interface
    doc: dict[str, Any] = {"campaign": campaign, "candidate": []}
    if cs.budget is not None:
        doc["budget"] = {str(r): float(v) for r, v in zip(cs.budget["resource"].values,
                                                          cs.budget.values, strict=True)}
    for c in cs.candidates:
        entry: dict[str, Any] = {"id": c.id, "role": c.role, "lens": c.lens, "method": c.method,
                                 "cost": {r: float(v) for r, v in c.cost.items()},
                                 "recipe": c.recipe, "batch": c.batch,
                                 "drives_hardware": c.drives_hardware,
                                 "changes_policy": c.changes_policy, "repeatable": c.repeatable,
                                 "targets": list(c.targets), "description": c.description}
        if c.hardware_group is not None:
            entry["hardware_group"] = c.hardware_group
        if c.informs:
            entry["informs"] = list(c.informs)
        if c.measurement_se is not None:  # informs, or targets measured (Candidate.measures)
            entry["measurement_se"] = c.measurement_se
        if c.safety_runs:
            entry["safety_runs"] = int(c.safety_runs)
        if c.safety_test_of is not None:
            entry["safety_test_of"] = c.safety_test_of
        doc["candidate"].append(entry)
    if cs.interactions:
        doc["interaction"] = [s.as_dict() for s in cs.interactions]
    return doc
