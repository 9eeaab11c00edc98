"""Belief files: q_t, the posteriors, the evidence and the settings in one netCDF file.

::

    fitted = belief.fit("evidence/", "candidates.toml")      # FittedBelief (belief.workflow.fit)
    fitted.save("belief.nc")                                  # atomic netCDF
    fitted = belief.load("belief.nc")                         # checked on load
    belief.check_file("belief.nc")                            # R-hat, ESS, divergences

What the saved file holds (checked by :func:`load`)
    ``/belief`` (q_t), ``/posterior/<model>`` (every fitted model's DataTree, attributes
    included), ``/evidence/<table>`` (the validated evidence and ``costs``, the realised
    costs), and root attributes ``format``, ``belief_version``, ``settings`` (JSON: draws,
    tune, chains, seed, policy and the rule that chose it, step, thresholds, every model's
    priors, evidence files and their SHA-256; absent from a campaign's ``belief.nc``, which was
    not fitted by :func:`belief.workflow.fit.fit`), ``candidates_toml`` (the candidate file's
    text), ``candidates_sha256``, ``candidates_source`` and ``costs_complete`` (1 when the
    costs table lists every executed action, as a campaign's does); ``derived`` (JSON: the
    convergence table and sensitivity reports computed from the stored draws at save time,
    with the draws' SHA-256) and ``/derived/sensitivity/<i>`` (the reports' draws), see
    :mod:`belief.workflow.derived`.

Writes go to a temporary file in the same folder, are fsync'ed and renamed over the target
(:func:`belief.files.atomic_write`), so a crash never leaves a half-written belief.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

import belief as _pkg
from belief.errors import InputError
from belief.files import UNREADABLE, check_header, read_file
from belief.inputs.candidate_file import (
    CandidateFile,
    candidates_toml,
    diff_candidates,
    load_candidate_file,
    parse_candidate_text,
)
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence_dir import EvidenceTables, validate_tables
from belief.posterior.registry import refuse_unknown_models
from belief.workflow.derived import (
    Derived,
    compare_diagnostics,
    judge_models,
    posterior_diagnostics,
    posterior_digests,
    read_derived,
)
from belief.workflow.fitted import DerivedMissingWarning, FittedBelief, dataset_table
from belief.workflow.netcdf_store import FORMAT, load_belief, load_tree, save_belief

__all__ = ["FORMAT", "check_file", "decide_from", "load", "load_belief", "load_tree", "save",
           "save_belief"]

_SETTINGS_KEYS = ("belief_version", "draws", "tune", "chains", "seed", "policy", "policy_rule",
                  "step", "rhat_max", "ess_min", "max_policies", "priors", "models")


def check_file(path: str | Path, candidates: str | Path | None = None,
               rhat_max: float | None = None, ess_min: float | None = None,
               max_divergences: int = 0, recompute: bool = False) -> pd.DataFrame:
    """Convergence table of a belief file (``belief check``); works on bare files without a
    candidate set too (:func:`belief.workflow.belief_file.save_belief` alone).

    The diagnostics are those the file stores, computed from its draws when it was saved
    (:mod:`belief.workflow.derived`): the header is read and checked, the settings and the
    stored diagnostics parsed; no group is opened.  With ``recompute``, they are recomputed
    from the stored draws and compared with the stored ones (refused when they differ); a file
    without them has them recomputed (and says so).  With ``candidates``, the whole belief is
    loaded (:func:`load`) and checked against them first.  The table's attribute
    ``diagnostics`` says where the figures come from.

    Raises
    ------
    InputError
        Naming the file: not a belief file, damaged, or stored diagnostics that disagree with
        the draws (``recompute``).
    """
    path = Path(path)
    label = str(path)
    attrs, groups = _open_checked(path)
    stored = read_derived(attrs.get("derived"), lambda g: _read_group(path, g), label)
    settings: dict[str, Any] = {}
    if candidates is not None:
        settings = load(path, candidates).settings
    elif "settings" in attrs:
        try:
            settings = _check_settings(json.loads(str(attrs["settings"])), label, priors=False)
        except json.JSONDecodeError:
            raise InputError(label, "settings attribute is not valid JSON (file "
                                    "damaged)") from None
    if stored is not None and not recompute:
        table = judge_models(stored.convergence, settings, rhat_max, ess_min, max_divergences,
                             label)
        table.attrs["diagnostics"] = "stored at fit time"
        return table
    if "posterior" not in groups:
        raise InputError(label, "no fitted model to check (no /posterior group)")
    idata = _read_group(path, "posterior", tree=True)
    if stored is None:
        import warnings

        warnings.warn(f"{path} holds no stored diagnostics (written before they were "
                      "stored): recomputing them from its draws", DerivedMissingWarning,
                      stacklevel=2)
        raw, source = posterior_diagnostics(idata), "recomputed from the draws (none stored)"
    else:
        fresh = Derived(posterior_diagnostics(idata), {}, posterior_digests(idata))
        compare_diagnostics(stored, fresh, label)
        raw, source = fresh.convergence, ("recomputed from the stored draws: the same as those "
                                          "stored at fit time")
    table = judge_models(raw, settings, rhat_max, ess_min, max_divergences, label)
    table.attrs["diagnostics"] = source
    return table


# -- fit, save, load ----------------------------------------------------------------------------
def save(fitted: FittedBelief, path: str | Path) -> Path:
    """Write a :class:`FittedBelief` to ``path`` (same as ``fitted.save(path)``)."""
    return fitted.save(path)


def _check_settings(settings: Any, label: str, priors: bool = True) -> dict[str, Any]:
    """The stored settings, checked: a JSON object with every key, written by this version,
    integer counts, and (with ``priors``) priors that build this version's prior objects."""
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
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:  # JSON integers only
            raise InputError(label, f"setting {key} must be a non-negative integer, got {v!r}")
    if not priors:
        return settings
    from belief.posterior.registry import check_stored_priors

    check_stored_priors(settings["priors"], label)
    return settings


def load(path: str | Path, candidates: str | Path | CandidateSet | CandidateFile | None = None
         ) -> FittedBelief:
    """Read a belief written by :meth:`FittedBelief.save` (``belief fit``), checking it.

    Checks: format and package version; the stored settings when present (JSON, every key,
    priors valid for this version, policy and step equal to q_t's); the candidate text against
    its SHA-256 and q_t's candidates; the stored evidence against its validators.  With
    ``candidates`` given, a candidate set that differs from the fitted one is refused, naming
    every difference; its ``[budget]`` and ``[weights]`` are then the decision defaults.

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
        refuse_unknown_models(given.priors or {}, f"{given.source} [priors]")
    text = attrs.get("candidates_toml")
    if text is None:  # a bare save_belief file: candidates must be given
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
            stored = parse_candidate_text(text, f"{label} (stored candidates)")
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
    tables_in = {name: dataset_table(_read_group(path, f"evidence/{name}"))
                 for name in groups.get("evidence", [])}
    try:
        ev, costs = validate_tables(tables_in, cs, {k: f"{label} /evidence/{k}"
                                                     for k in tables_in}, {})
    except InputError as err:
        raise InputError(label, f"stored evidence is invalid: {err}") from None
    files = {k: str(v) for k, v in settings.get("evidence_files", {}).items()}
    tables = EvidenceTables(ev, costs, files, dict(settings.get("evidence_sha256", {})),
                            costs_complete=str(attrs.get("costs_complete", 0)) == "1")
    loader = (lambda: _read_group(path, "posterior", tree=True)) if "posterior" in groups \
        else None
    derived = read_derived(attrs.get("derived"), lambda g: _read_group(path, g), label)
    return FittedBelief(belief, None, stored, tables, settings, path, loader, derived)


def _open_checked(path: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Root attributes and group names of a belief file, after the format and version checks
    of :func:`belief.workflow.netcdf_store.load_tree` (read with h5py: no data is decoded)."""
    import h5py

    def header(p: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
        with h5py.File(p, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            groups = {name: sorted(f[name].keys()) for name in f.keys()
                      if isinstance(f[name], h5py.Group)}
        return attrs, groups

    attrs, groups = read_file(path, header, UNREADABLE.format(what="belief file"))
    check_header(attrs, path, fmt=FORMAT)
    if "belief" not in groups:
        raise InputError(str(path), "no /belief group")
    return attrs, groups


def _read_group(path: Path, group: str, tree: bool = False) -> xr.Dataset | xr.DataTree:
    """One group of a checked belief file, loaded (a DataTree with ``tree``).  A flat group is
    read by :func:`belief.workflow.h5read.read_group` (the same Dataset as xarray's, faster),
    or by xarray when it holds anything that reader does not decode."""
    from belief.workflow.h5read import Unsupported, read_group

    def read(p: Path) -> xr.Dataset | xr.DataTree:
        if not tree:
            try:
                return read_group(p, group)
            except Unsupported:
                pass
        opener = xr.open_datatree if tree else xr.open_dataset
        return opener(p, group=group, engine="h5netcdf").load()

    return read_file(path, read, f"cannot read /{group} (truncated or damaged file)")


def decide_from(source: str | Path | FittedBelief, *,
                candidates: str | Path | CandidateSet | None = None,
                **options: Any) -> xr.Dataset:
    """Load a belief (unless given one) and decide: ``load(source).decide(**options)``."""
    fitted = source if isinstance(source, FittedBelief) else load(source, candidates)
    return fitted.decide(**options)
