"""The statistician's path in Python: tables → fitted belief → decision, saved and reloaded.

Everything ``belief fit``, ``belief decide``, ``belief check`` and ``belief report`` do is one or
two calls here, and every result is an xarray object (or a pandas table of diagnostics)::

    import belief

    fitted = belief.fit("evidence/", "candidates.toml")      # FittedBelief: q_t + DataTree
    fitted.save("belief.nc")                                  # atomic netCDF
    fitted = belief.load("belief.nc")                         # checked on load
    decision = fitted.decide(budget="real_h=10,compute=200,eng_h=15",
                             weights="real_h=0.01,compute=0.0002,eng_h=0.004",
                             functional="lcb:0.2", beta=1.0, alpha_exec=0.1)
    fitted.convergence()                                      # R-hat, ESS, divergences per model

Evidence folder
    One file per table, named after the table, ``.csv`` or ``.parquet`` (``.pq``):
    ``paired_evaluations`` (required; a header-only file is allowed), ``gain_estimates``,
    ``policy_evaluations``, ``safety_events``, ``deployment_safety``, ``sensitivity_runs``,
    ``transfer_evaluations`` (columns in :mod:`belief.evidence`) and ``costs`` (realised
    costs per executed action, :mod:`belief.costs`).  A ``.csv``/``.parquet`` file with another
    name, a table given twice, or a table file in another format is refused; other files
    (notes, README) are listed as ignored.

The current policy (``policy=None``)
    The ``treated_policy`` of the paired evaluation with the largest ``step`` (each executed
    adaptation moves the campaign to the policy it produced); without paired rows, the single
    policy of ``policy_evaluations`` and ``gain_estimates``.  Several candidates at the last
    step, or several evaluated policies, are refused: pass ``policy``.  A ``policy`` that no
    table mentions is refused.

The step (``step=None``)
    1 + the largest ``step`` of any evidence row (0 without rows): the belief is the state
    *before* the next decision.

Candidate file extras
    Besides the format of :mod:`belief.candidates`, an optional ``[weights]`` table
    (``real_h = 0.01`` …) gives the default resource weights λ of ``decide``.

Budget of ``decide`` (``budget=None``)
    The candidate file's ``[budget]`` minus the realised costs
    (:func:`belief.costs.remaining_budget`).
    Candidates executed so far (the ``costs`` rows; without them, the paired evaluations and
    the sources of gain estimates) leave the candidate set unless repeatable.

What the saved file holds (checked by :func:`load`)
    ``/belief`` (q_t), ``/posterior/<model>`` (every fitted model's DataTree, attributes
    included), ``/evidence/<table>`` (the validated evidence), and root attributes
    ``belief_version``, ``settings`` (JSON: draws, tune, chains, seed, policy and the rule that
    chose it, step, thresholds, every model's priors, evidence files and their SHA-256),
    ``candidates_toml`` (the candidate file's text) and ``candidates_sha256``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import belief as _pkg
from belief.candidates import (
    CandidateSet,
    candidates_from_dict,
    candidates_to_dict,
    make_budget,
    parse_assignments,
    parse_budget,
)
from belief.costs import empty_costs, executed_actions, remaining_budget, validate_costs
from belief.errors import InputError
from belief.evidence import Evidence
from belief.weights import check_weights

__all__ = [
    "CHECK_VARS",
    "REQUIRED_TABLES",
    "TABLES",
    "CandidateFile",
    "EvidenceTables",
    "FittedBelief",
    "candidates_toml",
    "check_file",
    "decide_from",
    "diff_candidates",
    "fit",
    "infer_policy",
    "load",
    "load_candidate_file",
    "load_decision",
    "parse_weights",
    "posterior_convergence",
    "read_evidence_dir",
    "save",
    "save_decision",
]

TABLES = ("paired_evaluations", "gain_estimates", "policy_evaluations", "safety_events",
          "deployment_safety", "sensitivity_runs", "transfer_evaluations", "costs")
"""Table names of an evidence folder (file stem = table name)."""
REQUIRED_TABLES = ("paired_evaluations",)
SUFFIXES = (".csv", ".parquet", ".pq")
CHECK_VARS = {"gains": ["effect", "policy_logit", "tau_exec", "rho"],
              "exec_risk": ["p_unsafe", "group_logit"],
              "transfer": ["eta_sim", "shift", "shift_mu", "shift_tau"],
              "sensitivity": ["S", "gamma", "alpha"]}
"""Variables whose convergence is checked, per model (others: every posterior variable)."""
DECISION_FORMAT = "belief-decision-1"
_SETTINGS_KEYS = ("belief_version", "draws", "tune", "chains", "seed", "policy", "policy_rule",
                  "step", "rhat_max", "ess_min", "max_policies", "priors", "models")


# -- candidate files ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateFile:
    """A candidate set with the text it came from and its optional default weights."""

    candidates: CandidateSet
    text: str
    weights: dict[str, float] | None = None
    source: str = "candidates"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def _parse_candidate_text(text: str, source: str) -> CandidateFile:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(source, f"not a valid TOML file ({err})") from None
    cands = candidates_from_dict(doc, source=source)
    weights = None
    if "weights" in doc:
        if not isinstance(doc["weights"], Mapping):
            raise InputError(source, "[weights] must be a table {resource = λ}")
        bad = [k for k, v in doc["weights"].items()
               if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            raise InputError(f"{source} [weights]", f"λ of {bad} must be numbers")
        lam = check_weights(doc["weights"], cands.resources, name=f"{source} [weights]")
        weights = {str(r): float(v) for r, v in zip(lam["resource"].values, lam.values,
                                                    strict=True)}
    return CandidateFile(cands, text, weights, source)


def load_candidate_file(path: str | Path) -> CandidateFile:
    """Read a candidate TOML file (format in :mod:`belief.candidates`, plus ``[weights]``).

    Raises
    ------
    InputError
        Naming the file, the ``[[candidate]]`` row and the rule.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), "is a folder, expected a TOML file") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "not a text (UTF-8) file, expected TOML") from None
    return _parse_candidate_text(text, str(path))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return repr(float(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) \
            + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def candidates_toml(cs: CandidateSet, weights: Mapping[str, float] | None = None,
                    header: str = "") -> str:
    """A candidate set as a TOML document in the format of :mod:`belief.candidates`.

    Renders :func:`belief.candidates.candidates_to_dict`; ``load`` of the text gives back an
    equal set (:func:`diff_candidates` is empty); ``weights`` adds a ``[weights]`` table and
    ``header`` leading comment lines.
    """
    doc = candidates_to_dict(cs)
    lines = [f"# {h}" if h else "#" for h in header.splitlines()]
    if lines:
        lines.append("")
    lines += ["[campaign]"] + [f"{_toml_key(k)} = {_toml_value(v)}"
                               for k, v in doc["campaign"].items()]
    for title, values in (("budget", doc.get("budget")), ("weights", weights)):
        if values is not None:
            lines += ["", f"[{title}]"] + [f"{_toml_key(r)} = {_toml_value(float(v))}"
                                           for r, v in values.items()]
    for entry in doc["candidate"]:
        lines += ["", "[[candidate]]"]
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items()
                  if v not in ("", [], None)]
    return "\n".join(lines) + "\n"


_COMPARED = ("role", "lens", "method", "recipe", "batch", "cost", "drives_hardware",
             "changes_policy", "repeatable", "hardware_group", "targets", "informs",
             "measurement_se")


def diff_candidates(fitted: CandidateSet, given: CandidateSet) -> list[str]:
    """What differs between two candidate sets, in words (empty when they are the same).

    Compared: the campaign (E_shared, resources, policy interface), the candidate ids and
    their order, and every field of each candidate except the free-text ``description``.
    Budgets are not compared (they are decision inputs, not part of the fit).
    """
    out = []
    for name in ("eval_protocol", "resources", "policy_interface"):
        a, b = getattr(fitted, name), getattr(given, name)
        if (list(a) if isinstance(a, tuple) else a) != (list(b) if isinstance(b, tuple) else b):
            out.append(f"[campaign] {name} {a!r} → {b!r}")
    removed = [c for c in fitted.ids if c not in given.ids]
    added = [c for c in given.ids if c not in fitted.ids]
    if removed:
        out.append(f"candidate(s) {removed} missing from the given file")
    if added:
        out.append(f"candidate(s) {added} not in the fitted belief")
    common = [c for c in fitted.ids if c in given.ids]
    if not removed and not added and fitted.ids != given.ids:
        out.append(f"candidate order {fitted.ids} → {given.ids}")
    for cid in common:
        a, b = fitted[cid], given[cid]
        for name in _COMPARED:
            va, vb = getattr(a, name), getattr(b, name)
            if name == "cost":
                va = {r: float(v) for r, v in va.items() if float(v) != 0.0}
                vb = {r: float(v) for r, v in vb.items() if float(v) != 0.0}
            if isinstance(va, tuple):
                va, vb = list(va), list(vb)
            if va != vb:
                out.append(f"{cid}.{name} {va!r} → {vb!r}")
    return out


def parse_weights(text: str, resources: list[str] | tuple[str, ...],
                  table: str = "--weights") -> dict[str, float]:
    """Parse ``"real_h=0.01,compute=0.0002,eng_h=0.004"`` into λ (every resource, none unknown).

    Raises
    ------
    InputError
        For a part without ``=``, an amount that is not a number, an unknown or missing
        resource, or a negative weight.
    """
    values = parse_assignments(text, table, what="weight")
    lam = check_weights(values, list(resources), name=table)
    return {str(r): float(v) for r, v in zip(lam["resource"].values, lam.values, strict=True)}


# -- evidence folders --------------------------------------------------------------------------
@dataclass(frozen=True)
class EvidenceTables:
    """Validated evidence with the realised costs and where each table came from.

    Attributes
    ----------
    evidence : Evidence
    costs : DataFrame
        Realised costs per executed action (:mod:`belief.costs`).
    files : dict of str to str
        Table name → file it was read from (``"<python>"`` for DataFrames).
    digests : dict of str to str
        Table name → SHA-256 of the file's bytes (empty for DataFrames).
    ignored : list of str
        Files of the folder that are not tables.
    """

    evidence: Evidence
    costs: pd.DataFrame
    files: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def rows(self) -> dict[str, int]:
        """Rows per table (every documented table, 0 when absent)."""
        out = {name: len(df) for name, df in self.evidence.tables().items()}
        out["costs"] = len(self.costs)
        return out


def _rewrap(err: InputError, table: str, csv: bool) -> InputError:
    row = err.row
    if isinstance(row, int | np.integer) and csv:
        row = f"{int(row)} (line {int(row) + 2} of the file)"
    return InputError(table, err.rule, row=row)


def _validate_tables(tables: Mapping[str, pd.DataFrame], candidates: CandidateSet,
                     labels: Mapping[str, str], csv: Mapping[str, bool]) -> tuple[Evidence,
                                                                                   pd.DataFrame]:
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        raise InputError("evidence", f"unknown table(s) {unknown}; known: {list(TABLES)}")
    for name, df in tables.items():
        if name == "costs":
            continue
        try:
            Evidence.from_tables(candidates, {name: df})
        except InputError as err:
            raise _rewrap(err, labels.get(name, name), csv.get(name, False)) from None
    costs = empty_costs(candidates)
    if "costs" in tables:
        try:
            costs = validate_costs(tables["costs"], candidates)
        except InputError as err:
            raise _rewrap(err, labels.get("costs", "costs"), csv.get("costs", False)) from None
    evidence = Evidence.from_tables(candidates, {k: v for k, v in tables.items()
                                                 if k != "costs"})
    return evidence, costs


def read_evidence_dir(path: str | Path, candidates: CandidateSet) -> EvidenceTables:
    """Read and validate the tables of an evidence folder (see the module docstring).

    Raises
    ------
    InputError
        Naming the file, the row (with its line in a CSV file) and the rule: a missing folder
        or required table, a file that is not CSV/Parquet, an unknown table name, a table given
        twice, a column missing or of the wrong type, any rule of the table's validator.
    """
    from belief.evidence import read_table

    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "evidence folder not found")
    if not path.is_dir():
        raise InputError(str(path), "is not a folder: give the folder that holds the evidence "
                                    f"tables ({', '.join(TABLES)})")
    found: dict[str, Path] = {}
    ignored = []
    for f in sorted(path.iterdir()):
        if f.name.startswith(".") or f.is_dir():
            continue
        stem, suffix = f.stem, f.suffix.lower()
        if stem in TABLES:
            if suffix not in SUFFIXES:
                raise InputError(str(f), f"{f.name} is neither CSV (.csv) nor Parquet "
                                         "(.parquet): save the table in one of these formats")
            if stem in found:
                raise InputError(str(f), f"table {stem!r} is given twice ({found[stem].name} "
                                         f"and {f.name}); keep one")
            found[stem] = f
        elif suffix in SUFFIXES:
            raise InputError(str(f), f"{f.name} is not a known evidence table; table files are "
                                     f"named {', '.join(t + '.csv' for t in TABLES)} "
                                     "(or .parquet)")
        else:
            ignored.append(f.name)
    missing = [t for t in REQUIRED_TABLES if t not in found]
    if missing:
        raise InputError(str(path), f"missing required table {missing[0]}.csv (or .parquet); "
                                    f"found: {sorted(found) or 'no tables'} (a header-only "
                                    "paired_evaluations.csv is fine before any adaptation)")
    tables = {}
    for name, f in found.items():
        df = read_table(f, table=str(f))
        if len(df.columns) == 0:
            raise InputError(str(f), "the file has no columns")
        tables[name] = df
    labels = {name: str(f) for name, f in found.items()}
    csv = {name: f.suffix.lower() == ".csv" for name, f in found.items()}
    evidence, costs = _validate_tables(tables, candidates, labels, csv)
    digests = {name: hashlib.sha256(f.read_bytes()).hexdigest() for name, f in found.items()}
    return EvidenceTables(evidence, costs, {k: str(v) for k, v in found.items()}, digests,
                          ignored)


def evidence_from_tables(tables: Mapping[str, pd.DataFrame] | Evidence | EvidenceTables,
                         candidates: CandidateSet) -> EvidenceTables:
    """Validate in-memory tables (table name → DataFrame, or an :class:`Evidence`)."""
    if isinstance(tables, EvidenceTables):
        return tables
    if isinstance(tables, Evidence):
        return EvidenceTables(tables, empty_costs(candidates),
                              {k: "<python>" for k, v in tables.tables().items() if len(v)})
    if not isinstance(tables, Mapping):
        raise InputError("evidence", f"expected a folder, a mapping table name → DataFrame or "
                                     f"an Evidence, got {type(tables).__name__}")
    evidence, costs = _validate_tables(dict(tables), candidates, {}, {})
    return EvidenceTables(evidence, costs, {k: "<python>" for k in tables})


def infer_policy(evidence: Evidence) -> tuple[str, str]:
    """The current policy and the rule that gave it (see the module docstring)."""
    paired = evidence.paired
    if len(paired):
        last = paired[paired["step"] == paired["step"].max()]
        names = list(dict.fromkeys(last["treated_policy"]))
        if len(names) > 1:
            raise InputError("paired_evaluations", f"cannot tell the current policy: step "
                                                   f"{int(last['step'].iloc[0])} produced "
                                                   f"several policies {names}; pass --policy")
        return names[0], (f"treated_policy of the last paired evaluation (step "
                          f"{int(last['step'].iloc[0])}, candidate "
                          f"{last['candidate'].iloc[0]})")
    names = list(dict.fromkeys([*evidence.policy_evals["policy"],
                                *evidence.gain_estimates["policy"]]))
    if len(names) == 1:
        return str(names[0]), "the single policy evaluated (no paired evaluations)"
    if not names:
        raise InputError("evidence", "cannot tell the current policy: no paired evaluations, "
                                     "policy evaluations or gain estimates; pass --policy")
    raise InputError("evidence", f"cannot tell the current policy: no paired evaluations and "
                                 f"several evaluated policies {names}; pass --policy")


def _known_policies(evidence: Evidence) -> list[str]:
    p = evidence.paired
    return list(dict.fromkeys([*p["policy"], *p["treated_policy"],
                               *evidence.policy_evals["policy"],
                               *evidence.gain_estimates["policy"]]))


def _next_step(tables: EvidenceTables) -> int:
    steps = [int(df["step"].max()) for df in (*tables.evidence.tables().values(), tables.costs)
             if len(df)]
    return max(steps) + 1 if steps else 0


# -- the fitted belief -------------------------------------------------------------------------
def _table_ds(df: pd.DataFrame) -> xr.Dataset:
    data = {}
    for col in df.columns:
        values = df[col].to_numpy()
        if values.dtype == object or pd.api.types.is_string_dtype(df[col].dtype):
            values = np.array([str(v) for v in values], dtype=str) if len(values) \
                else np.array([], dtype=str)
        data[str(col)] = ("row", values)
    return xr.Dataset(data, coords={"row": np.arange(len(df))})


def _ds_table(ds: xr.Dataset) -> pd.DataFrame:
    return pd.DataFrame({name: ds[name].values for name in ds.data_vars})


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _netcdf_ready(tree: xr.DataTree) -> xr.DataTree:
    """The tree as netCDF stores it (object variables, e.g. nutpie's ``divergence_message``
    of ``None``s, become strings), so that a saved and reloaded fit is identical to this one."""
    from belief.persistence import _clean

    return xr.DataTree.from_dict({node.path: _clean(node.to_dataset(inherit=False))
                                  for node in tree.subtree})


@dataclass
class FittedBelief:
    """A fitted belief q_t with its posteriors, evidence, candidates and settings.

    Attributes
    ----------
    belief : Dataset
        q_t (:func:`belief.state.make_belief`), joint draws over (``sample``, ``candidate``).
    idata : DataTree
        One child per fitted model (``gains``, ``exec_risk``, ``transfer``, ``sensitivity``),
        each with ``posterior``, ``sample_stats``, ... (ArviZ-ready).  A loaded belief reads
        it from its file on first access.
    candidates : CandidateFile
        The candidate set, its text and default weights.
    tables : EvidenceTables
        The validated evidence and realised costs.
    settings : dict
        Fit settings (stored as JSON in the file; see the module docstring).
    path : Path or None
        The file it was loaded from or last saved to.
    """

    belief: xr.Dataset
    _idata: xr.DataTree | None
    candidates: CandidateFile
    tables: EvidenceTables
    settings: dict[str, Any]
    path: Path | None = None
    _load_idata: Callable[[], xr.DataTree] | None = field(default=None, repr=False)

    # -- properties ---------------------------------------------------------------------------
    @property
    def idata(self) -> xr.DataTree:
        """The posteriors (read from the file on first use when the belief was loaded)."""
        if self._idata is None:
            self._idata = self._load_idata() if self._load_idata is not None else xr.DataTree()
        return self._idata

    @property
    def candidate_set(self) -> CandidateSet:
        return self.candidates.candidates

    @property
    def evidence(self) -> Evidence:
        return self.tables.evidence

    @property
    def costs(self) -> pd.DataFrame:
        return self.tables.costs

    @property
    def policy(self) -> str:
        return str(self.belief.attrs["policy"])

    @property
    def step(self) -> int:
        return int(self.belief.attrs["step"])

    @property
    def reliable(self) -> bool:
        return bool(int(self.belief.attrs.get("reliable", 1)))

    @property
    def models(self) -> list[str]:
        if self._idata is None and "models" in self.settings:
            return list(self.settings["models"])
        return list(self.idata.children)

    def history(self) -> list[str]:
        """Candidates executed so far, in step order (see the module docstring)."""
        return executed_actions(self.costs, self.evidence.paired, self.evidence.gain_estimates)

    def available(self) -> tuple[str, ...]:
        """Candidates still available: executed non-repeatable ones leave the set."""
        done = set(self.history())
        return tuple(c.id for c in self.candidate_set if c.repeatable or c.id not in done)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write everything to ``path`` (netCDF, atomically); :func:`load` reads it back."""
        from belief.persistence import save_belief

        groups = {f"evidence/{name}": _table_ds(df)
                  for name, df in self.evidence.tables().items()}
        groups["evidence/costs"] = _table_ds(self.costs)
        attrs = {"candidates_toml": self.candidates.text,
                 "candidates_sha256": self.candidates.sha256,
                 "candidates_source": self.candidates.source}
        if self.settings:  # a belief fitted here; one loaded from a bare file has none
            attrs["settings"] = json.dumps(_jsonable(self.settings), sort_keys=True)
        path = save_belief(path, self.belief, self.idata, groups=groups, attrs=attrs)
        self.path = Path(path)
        return self.path

    # -- diagnostics ----------------------------------------------------------------------------
    def convergence(self, rhat_max: float | None = None, ess_min: float | None = None,
                    max_divergences: int = 0) -> pd.DataFrame:
        """R-hat, bulk/tail ESS and divergences of every fitted model, per checked variable.

        Thresholds default to the fit's settings (R-hat ≤ 1.01; ESS ≥ 10 % of the draws).

        Returns
        -------
        DataFrame
            Index (``model``, ``variable``); columns of
            :func:`belief.diagnostics.convergence_table`.
        """
        return posterior_convergence(self.idata, self.settings, rhat_max, ess_min,
                                     max_divergences, label=str(self.path or "belief"))

    # -- decisions ------------------------------------------------------------------------------
    def budget(self, budget: str | Mapping[str, float] | xr.DataArray | None = None
               ) -> tuple[xr.DataArray, str]:
        """The budget b_t and where it came from (explicit, or ``[budget]`` − realised costs)."""
        cs = self.candidate_set
        if budget is None:
            b = remaining_budget(cs, self.costs, source=self.candidates.source)
            spent = ", ".join(f"{r}={float(self.costs[r].sum()):g}" for r in cs.resources)
            return b, (f"[budget] of {Path(self.candidates.source).name} minus realised costs "
                       f"({spent}; {len(self.costs)} cost rows)")
        if isinstance(budget, str):
            return parse_budget(budget, cs.resources), "--budget"
        if isinstance(budget, xr.DataArray):
            budget = {str(r): float(v) for r, v in zip(budget["resource"].values,
                                                        budget.values, strict=True)}
        return make_budget(budget, cs.resources, table="budget"), "given"

    def weights(self, weights: str | Mapping[str, float] | None = None
                ) -> tuple[dict[str, float], str]:
        """λ and where it came from (explicit, or the candidate file's ``[weights]``)."""
        cs = self.candidate_set
        if weights is None:
            if self.candidates.weights is None:
                raise InputError("--weights", "no resource weights: pass --weights "
                                              + ",".join(f"{r}=…" for r in cs.resources)
                                              + " or add [weights] to the candidate file")
            return dict(self.candidates.weights), (f"[weights] of "
                                                    f"{Path(self.candidates.source).name}")
        if isinstance(weights, str):
            return parse_weights(weights, cs.resources), "--weights"
        lam = check_weights(weights, cs.resources)
        return ({str(r): float(v) for r, v in zip(lam["resource"].values, lam.values,
                                                  strict=True)}, "given")

    def decide(self, *, budget: str | Mapping[str, float] | xr.DataArray | None = None,
               weights: str | Mapping[str, float] | None = None, functional: str = "mean",
               beta: float = 1.0, alpha_exec: float = 0.1, delta: float = 0.05,
               safety_method: str = "clopper_pearson", cvu_outcomes: int = 256,
               refit: bool = False, horizon: int | None = None, seed: int = 0,
               stability_resamples: int = 200) -> xr.Dataset:
        """The decision at the fitted state: :func:`belief.decision.decide` with CVU.

        Parameters
        ----------
        budget : str, mapping or DataArray, optional
            b_t (``"real_h=10,compute=200,eng_h=15"``); default ``[budget]`` − realised costs.
        weights : str or mapping, optional
            λ; default the candidate file's ``[weights]``.
        functional : str
            φ: ``mean``, ``lcb:Q`` or ``cvar:A``.
        beta : float
            β in Q = U0 + β·CVU (0: myopic, CVU not computed).
        alpha_exec, delta, safety_method
            The execution-safety gate (:class:`belief.risk.SafetyGate`).
        cvu_outcomes : int
            Simulated outcomes per candidate in CVU.
        refit : bool
            Exact refits where PSIS k̂ > 0.7 (re-samples the gains model on the stored evidence;
            compiles it once per process).  Without it CVU is importance-weighted only and the
            decision says so (``cvu_refits`` attribute).
        horizon : int, optional
            T; at the last step (step ≥ T − 1) CVU := 0.
        seed : int
            Seeds CVU and the decision-stability bootstrap.

        Returns
        -------
        Dataset over ``candidate`` (see :func:`belief.decision.decide`), with attributes
        ``budget_source``, ``weights_source``, ``cvu_refits``, ``history``,
        ``candidates_sha256`` and ``belief_file`` added.
        """
        from belief.cvu import CVUSettings, cvu_for_state
        from belief.decision import decide
        from belief.functionals import parse_functional
        from belief.risk import SafetyGate
        from belief.scores import check_beta
        from belief.state import State

        fn = parse_functional(functional)
        beta = check_beta(beta)
        gate = SafetyGate(alpha_exec=alpha_exec, delta=delta, method=safety_method)
        b, b_source = self.budget(budget)
        lam, w_source = self.weights(weights)
        if isinstance(cvu_outcomes, bool) or not isinstance(cvu_outcomes, int | np.integer) \
                or cvu_outcomes < 2:
            raise InputError("--cvu-outcomes", f"must be an integer >= 2, got {cvu_outcomes!r}")
        if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)
                                    or horizon <= self.step):
            raise InputError("horizon", f"horizon must be an integer > the current step "
                                        f"{self.step}, got {horizon!r}")
        cs = self.candidate_set
        state = State(step=self.step, budget=b, policy=self.policy, belief=self.belief,
                      history=tuple(self.history()), horizon=horizon,
                      available=self.available())
        cvu = None
        refits = "CVU not computed (β = 0)" if beta == 0 else ""
        if beta > 0 and not state.is_terminal:
            refit_fn = None
            if refit:
                from belief.refit import exact_refit

                refit_fn = exact_refit(self._fitter(), self.evidence, state, seed=seed)
                refits = "exact refits where PSIS k̂ > 0.7 (on the evidence stored in the file)"
            else:
                refits = ("no exact refits: CVU by PSIS reweighting only (deciding from a saved "
                          "belief; pass --refit to re-sample the gains model where k̂ > 0.7)")
            cvu = cvu_for_state(state, cs, functional=fn, weights=lam, gate=gate,
                                settings=CVUSettings(n_outcomes=int(cvu_outcomes), seed=seed),
                                refit=refit_fn)
        elif state.is_terminal:
            refits = "terminal step: CVU := 0"
        decision = decide(state, cs, functional=fn, weights=lam, beta=beta, gate=gate, cvu=cvu,
                          stability_resamples=stability_resamples, seed=seed)
        decision.attrs.update({
            "budget_source": b_source, "weights_source": w_source, "cvu_refits": refits,
            "history": ", ".join(state.history), "candidates_sha256": self.candidates.sha256,
            "belief_file": str(self.path or ""), "belief_version": _pkg.__version__,
            "cvu_outcomes": int(cvu_outcomes) if cvu is not None else 0, "seed": int(seed)})
        return decision

    def _fitter(self):
        from belief.fitting import BeliefFitter, FitSettings
        from models.exec_risk import ExecRiskPriors
        from models.gains import GainsPriors
        from models.sensitivity import SensitivityPriors
        from models.transfer import TransferPriors

        s = self.settings
        if not s:
            raise InputError(str(self.path or "belief"), "no fit settings stored: exact refits "
                                                         "need a belief written by belief fit")
        pri = s["priors"]
        return BeliefFitter(
            self.candidate_set,
            FitSettings(draws=int(s["draws"]), tune=int(s["tune"]), chains=int(s["chains"]),
                        max_policies=int(s["max_policies"]), rhat_max=float(s["rhat_max"]),
                        ess_min=float(s["ess_min"])),
            GainsPriors(**pri["gains"]), ExecRiskPriors(**pri["exec_risk"]),
            TransferPriors(**pri["transfer"]), SensitivityPriors(**pri["sensitivity"]))

    # -- reports ---------------------------------------------------------------------------------
    def sensitivity_reports(self) -> dict[str, Any]:
        """One :class:`belief.sensitivity.SensitivityReport` per policy with sensitivity runs."""
        from belief.sensitivity import sensitivity_reports

        if "sensitivity" not in self.idata.children:
            return {}
        return sensitivity_reports(self.idata["sensitivity"])

    def deployment_check(self, alpha_deploy: float = 0.05, delta: float = 0.05,
                         method: str = "clopper_pearson") -> xr.Dataset:
        """P_deploy(unsafe | π_t) ≤ α_deploy on the current policy (deployment evidence only)."""
        from belief.risk import deployment_check

        return deployment_check(self.evidence, self.policy, alpha_deploy, delta, method)

    def gains_summary(self, interval: float = 0.9) -> pd.DataFrame:
        """Posterior-predictive gain per candidate: mean, s.d., interval, P(ΔJ > 0)."""
        g = self.belief["gain"]
        lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
        qs = g.quantile([lo, 0.5, hi], "sample")
        out = pd.DataFrame({
            "role": self.belief["role"].values.astype(str),
            "mean": g.mean("sample").values, "sd": g.std("sample").values,
            f"q{100 * lo:g}": qs.sel(quantile=lo).values,
            "median": qs.sel(quantile=0.5).values,
            f"q{100 * hi:g}": qs.sel(quantile=hi).values,
            "p_positive": (g > 0).mean("sample").values},
            index=pd.Index(self.belief["candidate"].values.astype(str), name="candidate"))
        return out


def posterior_convergence(idata: xr.DataTree, settings: Mapping[str, Any] | None = None,
                          rhat_max: float | None = None, ess_min: float | None = None,
                          max_divergences: int = 0, label: str = "belief") -> pd.DataFrame:
    """Convergence table of every model in ``idata`` (see :meth:`FittedBelief.convergence`).

    Default thresholds: the fit's settings; without them R-hat ≤ 1.01 and ESS ≥ 10 % of each
    model's draws × chains (the rule of :class:`belief.fitting.FitSettings`).
    """
    from belief.diagnostics import convergence_table

    settings = settings or {}
    rhat_max = float(settings.get("rhat_max", 1.01) if rhat_max is None else rhat_max)
    frames = {}
    thresholds = []
    for name, node in idata.children.items():
        if "posterior" not in node.children:
            continue
        post = node["posterior"]
        ess = ess_min if ess_min is not None else settings.get(
            "ess_min", 0.1 * post.sizes.get("chain", 1) * post.sizes.get("draw", 1))
        thresholds.append(float(ess))
        frames[name] = convergence_table(node, CHECK_VARS.get(name), rhat_max=rhat_max,
                                         ess_min=float(ess), max_divergences=max_divergences)
    if not frames:
        raise InputError(label, "no fitted model to check")
    table = pd.concat(frames, names=["model", "variable"])
    table.attrs.update({"rhat_max": rhat_max, "ess_min": min(thresholds),
                        "max_divergences": max_divergences})
    return table


def check_file(path: str | Path, candidates: str | Path | None = None,
               rhat_max: float | None = None, ess_min: float | None = None,
               max_divergences: int = 0) -> pd.DataFrame:
    """Convergence table of a belief file (``belief check``); works on files without a
    candidate set too (e.g. ``belief demo``'s ``belief.nc``)."""
    path = Path(path)
    attrs, groups = _open_checked(path)
    if candidates is not None or "candidates_toml" in attrs:
        return load(path, candidates).convergence(rhat_max, ess_min, max_divergences)
    if "posterior" not in groups:
        raise InputError(str(path), "no fitted model to check (no /posterior group)")
    return posterior_convergence(_read_tree(path, "posterior"), None, rhat_max, ess_min,
                                 max_divergences, label=str(path))


# -- fit, save, load ----------------------------------------------------------------------------
def fit(evidence: str | Path | Mapping[str, pd.DataFrame] | Evidence | EvidenceTables,
        candidates: str | Path | CandidateSet | CandidateFile, *, policy: str | None = None,
        step: int | None = None, draws: int = 500, tune: int | None = None, chains: int = 2,
        seed: int = 0, sensitivity: bool = True, progressbar: bool = False,
        fitter: Any = None, progress: Callable[[str], None] | None = None) -> FittedBelief:
    """Fit every model that has data and build q_t.

    Parameters
    ----------
    evidence : folder, mapping, Evidence or EvidenceTables
        An evidence folder (module docstring), a mapping table name → DataFrame, or
        validated evidence.
    candidates : path, CandidateSet or CandidateFile
        The candidate TOML file (or a set; it is stored as TOML in the belief).
    policy : str, optional
        The current policy π_t (default: inferred, see the module docstring).
    step : int, optional
        t (default: 1 + the last step of the evidence).
    draws, tune, chains, seed
        Sampler settings (``tune`` defaults to ``draws``).
    sensitivity : bool
        Fit the sensitivity model when there are sensitivity runs.
    progressbar : bool
        nutpie's progress bars.
    fitter : BeliefFitter, optional
        Re-use a compiled fitter (its settings and priors win over ``draws``/``tune``/
        ``chains``); it must be built on the same candidates.
    progress : callable, optional
        Called with one-line progress messages.

    Returns
    -------
    FittedBelief
    """
    from belief.evidence import outcome_family
    from belief.fitting import BeliefFitter, FitSettings

    say = progress or (lambda msg: None)
    if isinstance(candidates, CandidateFile):
        cfile = candidates
    elif isinstance(candidates, CandidateSet):
        cfile = CandidateFile(candidates, candidates_toml(candidates), None, candidates.source)
    else:
        cfile = load_candidate_file(candidates)
    cs = cfile.candidates
    if isinstance(evidence, str | Path):
        tables = read_evidence_dir(evidence, cs)
        source = str(evidence)
    else:
        tables = evidence_from_tables(evidence, cs)
        source = "<python>"
    ev = tables.evidence
    if policy is None:
        policy, rule = infer_policy(ev)
    else:
        known = _known_policies(ev)
        if policy not in known:
            raise InputError("--policy", f"policy {policy!r} appears in no evidence table; "
                                         f"policies in the evidence: {known}")
        rule = "given (--policy)"
    if step is None:
        step = _next_step(tables)
    if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
        raise InputError("--step", f"step must be an integer >= 0, got {step!r}")
    for name, value in (("draws", draws), ("chains", chains), ("tune", tune)):
        if value is None and name == "tune":
            continue
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InputError(f"--{name}", f"{name} must be an integer >= 1, got {value!r}")
    if fitter is None:
        fitter = BeliefFitter(cs, FitSettings(draws=int(draws), tune=int(tune or draws),
                                              chains=int(chains)))
    elif fitter.candidates.ids != cs.ids:
        raise InputError("fitter", f"the fitter was built on candidates {fitter.candidates.ids}"
                                   f", the evidence on {cs.ids}")
    s = fitter.settings
    models = ["gains"] + (["exec_risk"] if fitter.exec_risk is not None else []) \
        + (["transfer"] if len(ev.transfer) else []) \
        + (["sensitivity"] if sensitivity and len(ev.sensitivity) else [])
    say(f"policy {policy} ({rule}); step {step}; models: {', '.join(models)}")
    t0 = time.perf_counter()
    say("compiling (once per process; 10–30 s each the first time) …")
    fitter.gains._compiled()
    if fitter.exec_risk is not None:
        fitter.exec_risk._compiled()
    if len(ev.transfer):
        fitter.transfer._compiled(outcome_family(ev.transfer))
    t1 = time.perf_counter()
    say(f"compiled in {t1 - t0:.1f} s; sampling {s.chains} chains × {s.draws} draws "
        f"(+{s.tune} tuning) …")
    idata, q = fitter.fit(ev, policy, int(step), int(seed), progressbar=progressbar)
    say(f"sampled {', '.join(idata.children)} in {time.perf_counter() - t1:.1f} s")
    children = {name: idata[name] for name in idata.children}
    if "sensitivity" in models:
        from belief.diagnostics import check_convergence

        t2 = time.perf_counter()
        sens = fitter.fit_sensitivity(
            ev, seed=int(np.random.default_rng([seed, 4]).integers(2**31)),
            progressbar=progressbar)
        conv = check_convergence(sens, [v for v in CHECK_VARS["sensitivity"]
                                        if v in sens["posterior"].data_vars],
                                 rhat_max=s.rhat_max, ess_min=s.ess_threshold)
        q.attrs.update(conv.as_attrs("sensitivity_"))
        children["sensitivity"] = sens
        say(f"sensitivity model (compile + sample) in {time.perf_counter() - t2:.1f} s")
    idata = _netcdf_ready(xr.DataTree.from_dict(children))
    settings = {
        "belief_version": _pkg.__version__, "draws": s.draws, "tune": s.tune,
        "chains": s.chains, "seed": int(seed), "policy": policy, "policy_rule": rule,
        "step": int(step), "rhat_max": s.rhat_max, "ess_min": float(s.ess_threshold),
        "max_policies": s.max_policies, "models": list(idata.children),
        "priors": {"gains": asdict(fitter.gains_priors),
                   "exec_risk": asdict(fitter.exec_risk_priors),
                   "transfer": asdict(fitter.transfer_priors),
                   "sensitivity": asdict(fitter.sensitivity_priors)},
        "evidence_source": source, "evidence_files": {k: Path(v).name if v != "<python>"
                                                      else v for k, v in tables.files.items()},
        "evidence_sha256": tables.digests, "evidence_rows": tables.rows(),
        "fit_seconds": round(time.perf_counter() - t0, 2)}
    return FittedBelief(q, idata, cfile, tables, _jsonable(settings))


def save(fitted: FittedBelief, path: str | Path) -> Path:
    """Write a :class:`FittedBelief` to ``path`` (same as ``fitted.save(path)``)."""
    return fitted.save(path)


def _check_settings(settings: Any, label: str) -> dict[str, Any]:
    if not isinstance(settings, dict):
        raise InputError(label, "settings attribute is not a JSON object")
    missing = [k for k in _SETTINGS_KEYS if k not in settings]
    if missing:
        raise InputError(label, f"settings lack {missing} (file not written by belief fit, or "
                                "damaged)")
    if settings["belief_version"] != _pkg.__version__:
        raise InputError(label, f"settings written by belief {settings['belief_version']}, "
                                f"this is {_pkg.__version__}; re-fit with this version")
    for key in ("draws", "tune", "chains", "step", "max_policies"):
        v = settings[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(label, f"setting {key} must be a non-negative integer, got {v!r}")
    from models.exec_risk import ExecRiskPriors
    from models.gains import GainsPriors
    from models.sensitivity import SensitivityPriors
    from models.transfer import TransferPriors

    pri = settings["priors"]
    for name, cls in (("gains", GainsPriors), ("exec_risk", ExecRiskPriors),
                      ("transfer", TransferPriors), ("sensitivity", SensitivityPriors)):
        try:
            cls(**pri[name])
        except (KeyError, TypeError) as err:
            raise InputError(label, f"stored {name} priors do not fit this version "
                                    f"({type(err).__name__}: {err})") from None
    return settings


def load(path: str | Path, candidates: str | Path | CandidateSet | CandidateFile | None = None
         ) -> FittedBelief:
    """Read a belief written by :meth:`FittedBelief.save` (``belief fit``), checking it.

    Checks: format and package version; the stored settings (JSON, every key, priors valid for
    this version, policy and step equal to q_t's); the candidate text against its SHA-256 and
    q_t's candidates; the stored evidence against its validators.  With ``candidates`` given,
    a candidate set that differs from the fitted one is refused, naming every difference; its
    ``[budget]`` and ``[weights]`` are then the decision defaults.

    Raises
    ------
    InputError
        Naming the file and the problem.
    """
    path = Path(path)
    label = str(path)
    attrs, groups = _open_checked(path)
    given = None
    if candidates is not None:
        given = candidates if isinstance(candidates, CandidateFile) else (
            CandidateFile(candidates, candidates_toml(candidates), None, candidates.source)
            if isinstance(candidates, CandidateSet) else load_candidate_file(candidates))
    text = attrs.get("candidates_toml")
    if text is None:  # a bare save_belief file (e.g. from belief demo): candidates must be given
        if given is None:
            raise InputError(label, "the file holds no candidate set (not written by belief "
                                    "fit); pass --candidates")
        stored, settings = given, {}
    else:
        text = str(text)
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != attrs.get("candidates_sha256"):
            raise InputError(label, "the stored candidate text does not match its SHA-256 "
                                    "(file damaged or edited)")
        try:
            stored = _parse_candidate_text(text, f"{label} (stored candidates)")
        except InputError as err:
            raise InputError(label, f"stored candidate set is invalid: {err}") from None
        stored = CandidateFile(stored.candidates, text, stored.weights,
                               str(attrs.get("candidates_source", "candidates")))
        settings = {}  # no settings attribute: saved from a belief that had none (bare file)
        if "settings" in attrs:
            try:
                settings = json.loads(str(attrs["settings"]))
            except json.JSONDecodeError:
                raise InputError(label, "settings attribute is not valid JSON (file "
                                        "damaged)") from None
            settings = _check_settings(settings, label)
    belief = _read_group(path, "belief")
    ids = [str(c) for c in belief["candidate"].values]
    if ids != stored.candidates.ids:
        raise InputError(label, f"q_t has candidates {ids}, the stored candidate set "
                                f"{stored.candidates.ids}")
    if settings and (settings["policy"] != str(belief.attrs.get("policy"))
                     or settings["step"] != int(belief.attrs.get("step", -1))):
        raise InputError(label, f"settings (policy {settings['policy']!r}, step "
                                f"{settings['step']}) disagree with q_t (policy "
                                f"{belief.attrs.get('policy')!r}, step "
                                f"{belief.attrs.get('step')})")
    if given is not None:
        diff = diff_candidates(stored.candidates, given.candidates)
        if diff:
            raise InputError(given.source, "the candidates differ from those the belief in "
                                           f"{label} was fitted with: " + "; ".join(diff))
        stored = CandidateFile(given.candidates, stored.text if text is not None
                               else given.text, given.weights, given.source)
    for model in settings.get("models", []):
        if model not in groups.get("posterior", []):
            raise InputError(label, f"settings list model {model!r}, but /posterior/{model} "
                                    "is missing")
    cs = stored.candidates
    tables_in = {name: _ds_table(_read_group(path, f"evidence/{name}"))
                 for name in groups.get("evidence", [])}
    try:
        ev, costs = _validate_tables(tables_in, cs, {k: f"{label} /evidence/{k}"
                                                     for k in tables_in}, {})
    except InputError as err:
        raise InputError(label, f"stored evidence is invalid: {err}") from None
    files = {k: str(v) for k, v in settings.get("evidence_files", {}).items()}
    tables = EvidenceTables(ev, costs, files, dict(settings.get("evidence_sha256", {})))
    loader = (lambda: _read_tree(path, "posterior")) if "posterior" in groups else None
    return FittedBelief(belief, None, stored, tables, settings, path, loader)


def _open_checked(path: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Root attributes and group names of a belief file, after the format and version checks
    of :func:`belief.persistence.load_tree` (read with h5py: no data is decoded)."""
    import h5py

    from belief.persistence import FORMAT

    label = str(path)
    if not path.exists():
        raise InputError(label, "file not found")
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            groups = {name: sorted(f[name].keys()) for name in f.keys()
                      if isinstance(f[name], h5py.Group)}
    except Exception as err:
        raise InputError(label, f"not a readable belief file (truncated or not netCDF): "
                                f"{type(err).__name__}") from None
    if attrs.get("format") != FORMAT:
        raise InputError(label, f"not a belief file (format {attrs.get('format')!r}, "
                                f"expected {FORMAT!r})")
    if attrs.get("belief_version") != _pkg.__version__:
        raise InputError(label, f"written by belief {attrs.get('belief_version')}, this "
                                f"is {_pkg.__version__}; re-fit with this version")
    if "belief" not in groups:
        raise InputError(label, "no /belief group")
    return attrs, groups


def _read_group(path: Path, group: str) -> xr.Dataset:
    try:
        return xr.open_dataset(path, group=group, engine="h5netcdf").load()
    except Exception as err:
        raise InputError(str(path), f"cannot read /{group} (truncated or damaged file): "
                                    f"{type(err).__name__}") from None


def _read_tree(path: Path, group: str) -> xr.DataTree:
    try:
        return xr.open_datatree(path, group=group, engine="h5netcdf").load()
    except Exception as err:
        raise InputError(str(path), f"cannot read /{group} (truncated or damaged file): "
                                    f"{type(err).__name__}") from None


def decide_from(source: str | Path | FittedBelief, *,
                candidates: str | Path | CandidateSet | None = None,
                **options: Any) -> xr.Dataset:
    """Load a belief (unless given one) and decide: ``load(source).decide(**options)``."""
    fitted = source if isinstance(source, FittedBelief) else load(source, candidates)
    return fitted.decide(**options)


# -- decisions on disk --------------------------------------------------------------------------
def save_decision(path: str | Path, decision: xr.Dataset) -> Path:
    """Write a decision Dataset to netCDF atomically (read back with :func:`load_decision`)."""
    from belief.persistence import _clean

    ds = _clean(decision)
    ds.attrs = {k: (int(v) if isinstance(v, bool | np.bool_) else v)
                for k, v in decision.attrs.items()}
    ds.attrs.update({"format": DECISION_FORMAT, "belief_version": _pkg.__version__})
    from belief.persistence import atomic_write

    return atomic_write(Path(path), lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf"))


def load_decision(path: str | Path) -> xr.Dataset:
    """Read a decision written by :func:`save_decision` (``belief decide``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "decision.nc"
    if not path.exists():
        raise InputError(str(path), "file not found")
    try:
        ds = xr.open_dataset(path, engine="h5netcdf").load()
    except Exception as err:
        raise InputError(str(path), f"not a readable decision file (truncated or not netCDF): "
                                    f"{type(err).__name__}") from None
    if ds.attrs.get("format") != DECISION_FORMAT:
        raise InputError(str(path), f"not a decision file (format {ds.attrs.get('format')!r})")
    if ds.attrs.get("belief_version") != _pkg.__version__:
        raise InputError(str(path), f"written by belief {ds.attrs.get('belief_version')}, this "
                                    f"is {_pkg.__version__}; decide again")
    return ds
