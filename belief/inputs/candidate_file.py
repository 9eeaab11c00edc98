"""Candidate files: the TOML candidate set with its text, digest, default weights λ and priors.

Besides the format of :mod:`belief.inputs.candidates`, an optional ``[weights]`` table
(``real_h = 0.01`` …) gives the default resource weights λ of
:meth:`belief.workflow.fitted.FittedBelief.decide`, and optional ``[priors.<model>]`` tables
state the priors of the models (one table per model of :data:`models.registry.MODELS`:
``gains``, ``exec_risk``, ``transfer``, ``sensitivity``, ``costs``) by the names of their
parameters, a scale parameter as ``{family = ..., <parameters>}``::

    [priors.gains]
    tau_lens = { family = "half_student_t", nu = 3, sigma = 0.5 }
    tau_method = { family = "half_cauchy", beta = 0.25 }
    tau_candidate = { family = "exponential", lam = 2.0 }
    tau_exec = { family = "half_normal", sigma = 0.2 }
    effect_mu_sigma = 0.4                      # a location or fixed scale: a number
    gamma_prior = "laplace"                    # the sparse order-effect prior (a choice)

    [priors.exec_risk]
    sigma_group = { family = "half_normal", sigma = 1.0 }

Families: ``half_normal`` (sigma), ``half_student_t`` (nu, sigma), ``half_cauchy`` (beta),
``exponential`` (lam, the rate).  The names and defaults of every model's priors are the fields
of its registered priors type (:func:`models.registry.prior_classes`).  This module checks the
section's shape (tables of name = value); the model names are checked against the registry and
the values against the models when a fit is set up (:func:`belief.workflow.fit.fit`,
:func:`belief.workflow.fit.model_priors`), with errors naming the file, the
``[priors.<model>]`` key and the allowed values.

:func:`candidates_toml` writes a set back to TOML and :func:`diff_candidates` names every
difference between two sets.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet, candidates_from_dict, candidates_to_dict
from belief.inputs.names import refuse_unknown
from belief.inputs.resources import resource_vector

__all__ = ["TOP_LEVEL", "CandidateFile", "candidates_toml", "diff_candidates",
           "load_candidate_file", "load_candidates", "parse_candidate_text", "parse_priors"]

TOP_LEVEL = ("campaign", "budget", "weights", "priors", "candidate", "interaction")
"""The tables of a candidate file; any other is refused (a misspelt ``[weigths]`` would
otherwise be ignored and the decision made with other weights than the user wrote)."""


@dataclass(frozen=True)
class CandidateFile:
    """A candidate set with the text it came from, its optional default weights and priors.

    ``priors`` maps a model name (one of :data:`models.registry.MODELS`, checked by every
    command that reads the file: ``fit``, ``decide --candidates``, ``manual``, ``replay``) to
    the ``[priors.<model>]`` table as parsed (name → number or ``{family, parameters}``
    table), or is empty.
    """

    candidates: CandidateSet
    text: str
    weights: dict[str, float] | None = None
    source: str = "candidates"
    priors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


_HEADER = re.compile(r"^\s*\[\[\s*[\"']?candidate[\"']?\s*\]\]")
_INTERACTION = re.compile(r"^\s*\[\[\s*[\"']?interaction[\"']?\s*\]\]")


def _where(doc: Mapping[str, Any], text: str, row: int) -> str:
    """How a user finds ``[[candidate]]`` number ``row`` (0-based) of a TOML file: its id and
    the line of its header (its 1-based position when the file has no headers)."""
    entries = doc.get("candidate") if isinstance(doc, Mapping) else None
    entry = entries[row] if isinstance(entries, list) and 0 <= row < len(entries) else None
    cid = entry.get("id") if isinstance(entry, Mapping) else None
    name = repr(cid) if isinstance(cid, str) and cid else f"#{row + 1}"
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if _HEADER.match(line)]
    if isinstance(entries, list) and len(lines) == len(entries):
        return f"[[candidate]] {name} (line {lines[row]})"
    return f"[[candidate]] {name} (the {row + 1}. candidate)"


def _interaction_where(text: str, row: int) -> str:
    """How a user finds ``[[interaction]]`` number ``row`` (0-based): the line of its header."""
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if _INTERACTION.match(line)]
    if 0 <= row < len(lines):
        return f"line {lines[row]} (the {row + 1}. one)"
    return f"the {row + 1}. one"


def _candidates_from_toml(doc: dict[str, Any], text: str, source: str) -> CandidateSet:
    """:func:`candidates_from_dict` with errors that name the candidate's id and line (and
    the line of an ``[[interaction]]``); unknown tables are refused first."""
    refuse_unknown(doc, TOP_LEVEL, source, "table")
    try:
        return candidates_from_dict(doc, source=source)
    except InputError as err:
        if err.table == f"{source} [[interaction]]" and isinstance(err.row, int) \
                and err.where is None:
            raise InputError(err.table, err.rule, where=_interaction_where(text, err.row)) \
                from None
        if not (isinstance(err.row, int) and err.where is None and err.table == source):
            raise
        rule = _FIRST_AT.sub(lambda m: f"(first given at {_where(doc, text, int(m[1]))})",
                             err.rule)
        raise InputError(source, rule, err.row, where=_where(doc, text, err.row)) from None


_FIRST_AT = re.compile(r"\(first at row (\d+)\)")


def parse_candidate_text(text: str, source: str) -> CandidateFile:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(source, f"not a valid TOML file ({err})") from None
    cands = _candidates_from_toml(doc, text, source)
    weights = None
    if "weights" in doc:
        if not isinstance(doc["weights"], Mapping):
            raise InputError(source, "[weights] must be a table {resource = λ}")
        bad = [k for k, v in doc["weights"].items()
               if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            raise InputError(f"{source} [weights]", f"λ of {bad} must be numbers")
        lam = resource_vector(doc["weights"], cands.resources, f"{source} [weights]",
                              what="λ", name="lambda")
        weights = {str(r): float(v) for r, v in zip(lam["resource"].values, lam.values,
                                                    strict=True)}
    priors = parse_priors(doc.get("priors"), source)
    if cands.interactions and priors.get("gains", {}).get("order_effects") is False:
        raise InputError(f"{source} [[interaction]]", "stated while [priors.gains] "
                                                      "order_effects = false: the gains model "
                                                      "has no order effects, so the statements "
                                                      "would have no effect; remove one of the "
                                                      "two")
    return CandidateFile(cands, text, weights, source, priors)


def parse_priors(section: Any, source: str) -> dict[str, dict[str, Any]]:
    """The ``[priors]`` section's shape: tables ``[priors.<model>]``, each a table of
    name = number or inline table.  The model names are checked against the model registry
    and the values by the models, when a fit is set up (module docstring)."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise InputError(f"{source} [priors]", "must hold tables [priors.<model>], <model> a "
                                               "model's name")
    out = {}
    for model, table in section.items():
        where = f"{source} [priors.{model}]"
        if not isinstance(table, Mapping):
            raise InputError(where, "must be a table {name = value}")
        out[model] = {str(k): (dict(v) if isinstance(v, Mapping) else v)
                      for k, v in table.items()}
    return out


def load_candidate_file(path: str | Path) -> CandidateFile:
    """Read a candidate TOML file (format in :mod:`belief.inputs.candidates`, plus ``[weights]``).

    Raises
    ------
    InputError
        Naming the file, the ``[[candidate]]`` (its id and the line of its header) and the
        rule.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), "is a folder, expected a TOML file") from None
    except PermissionError:
        raise InputError(str(path), "cannot be read (permission denied)") from None
    except UnicodeDecodeError:
        raise InputError(str(path), "not a text (UTF-8) file, expected TOML") from None
    return parse_candidate_text(text, str(path))


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
                    header: str = "",
                    priors: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """A candidate set as a TOML document in the format of :mod:`belief.inputs.candidates`.

    Renders :func:`belief.inputs.candidates.candidates_to_dict`; ``load`` of the text gives back an
    equal set (:func:`diff_candidates` is empty); ``weights`` adds a ``[weights]`` table,
    ``priors`` (model → name → value, see :class:`CandidateFile`) ``[priors.<model>]`` tables
    and ``header`` leading comment lines.
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
    for model, table in (priors or {}).items():
        if table:
            lines += ["", f"[priors.{model}]"] + [
                f"{_toml_key(k)} = {_toml_value({a: b for a, b in v.items() if b is not None})}"
                if isinstance(v, Mapping) else f"{_toml_key(k)} = {_toml_value(v)}"
                for k, v in table.items()]
    for entry in doc["candidate"]:
        lines += ["", "[[candidate]]"]
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items()
                  if v not in ("", [], None)]
    for entry in doc.get("interaction", []):
        lines += ["", "[[interaction]]"] + [f"{_toml_key(k)} = {_toml_value(v)}"
                                            for k, v in entry.items()]
    return "\n".join(lines) + "\n"


_COMPARED = ("role", "lens", "method", "recipe", "batch", "cost", "drives_hardware",
             "changes_policy", "repeatable", "hardware_group", "targets", "informs",
             "measurement_se", "safety_runs", "safety_test_of")


def diff_candidates(fitted: CandidateSet, given: CandidateSet) -> list[str]:
    """What differs between two candidate sets, in words (empty when they are the same).

    Compared: the campaign (E_shared, resources, policy interface), the candidate ids and
    their order, every field of each candidate except the free-text ``description``, and the
    stated ``[[interaction]]`` priors.
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
    if set(fitted.interactions) != set(given.interactions):
        out.append(f"[[interaction]] priors {[s.as_dict() for s in fitted.interactions]} → "
                   f"{[s.as_dict() for s in given.interactions]}")
    return out


def load_candidates(path: str | Path) -> CandidateSet:
    """Load candidates (and optionally a starting budget) from a TOML file.

    Raises
    ------
    InputError
        When the file cannot be parsed or breaks a rule; the message names the file, the
        ``[[candidate]]`` (its id and the line of its header) and the rule.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        doc = tomllib.loads(text)
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), "is a folder, expected a TOML file") from None
    except PermissionError:
        raise InputError(str(path), "cannot be read (permission denied)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"not a valid TOML file ({err})") from None
    return _candidates_from_toml(doc, text, path.name)
