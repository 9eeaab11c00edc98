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

Where the parts live
    :mod:`belief.candidate_file` (candidate TOML with ``[weights]``),
    :mod:`belief.evidence_dir` (evidence folders, the current policy and step),
    :mod:`belief.fitted` (:class:`FittedBelief`: decide, diagnostics, reports) and
    :mod:`belief.decision_file` (decisions on disk).  This module fits, saves, loads and
    checks, and re-exports the public names of the others.

What the saved file holds (checked by :func:`load`)
    ``/belief`` (q_t), ``/posterior/<model>`` (every fitted model's DataTree, attributes
    included), ``/evidence/<table>`` (the validated evidence and ``costs``, the realised
    costs), and root attributes ``belief_version``, ``settings`` (JSON: draws, tune, chains,
    seed, policy and the rule that chose it, step, thresholds, every model's priors, evidence
    files and their SHA-256; absent from a campaign's ``belief.nc``, which was not fitted by
    :func:`fit`), ``candidates_toml`` (the candidate file's text), ``candidates_sha256``,
    ``candidates_source`` and ``costs_complete`` (1 when the costs table lists every executed
    action, as a campaign's does).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import belief as _pkg
from belief.campaign_log import jsonable
from belief.candidate_file import (
    CandidateFile,
    _parse_candidate_text,
    candidates_toml,
    diff_candidates,
    load_candidate_file,
    parse_weights,
)
from belief.candidates import CandidateSet
from belief.decision_file import load_decision, save_decision
from belief.diagnostics import CHECK_VARS
from belief.errors import InputError
from belief.evidence import Evidence
from belief.evidence_dir import (
    REQUIRED_TABLES,
    TABLES,
    EvidenceTables,
    _validate_tables,
    evidence_from_tables,
    infer_policy,
    known_policies,
    next_step,
    read_evidence_dir,
)
from belief.fitted import (
    FittedBelief,
    _ds_table,
    _netcdf_ready,
    posterior_convergence,
)
from belief.persistence import UNREADABLE, check_header, read_file

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

_SETTINGS_KEYS = ("belief_version", "draws", "tune", "chains", "seed", "policy", "policy_rule",
                  "step", "rhat_max", "ess_min", "max_policies", "priors", "models")


def check_file(path: str | Path, candidates: str | Path | None = None,
               rhat_max: float | None = None, ess_min: float | None = None,
               max_divergences: int = 0) -> pd.DataFrame:
    """Convergence table of a belief file (``belief check``); works on bare files without a
    candidate set too (:func:`belief.persistence.save_belief` alone)."""
    path = Path(path)
    attrs, groups = _open_checked(path)
    if candidates is not None or "candidates_toml" in attrs:
        return load(path, candidates).convergence(rhat_max, ess_min, max_divergences)
    if "posterior" not in groups:
        raise InputError(str(path), "no fitted model to check (no /posterior group)")
    return posterior_convergence(_read_group(path, "posterior", tree=True), None, rhat_max,
                                 ess_min, max_divergences, label=str(path))



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
        An evidence folder (:mod:`belief.evidence_dir`), a mapping table name → DataFrame, or
        validated evidence.
    candidates : path, CandidateSet or CandidateFile
        The candidate TOML file (or a set; it is stored as TOML in the belief).
    policy : str, optional
        The current policy π_t (default: :func:`belief.evidence_dir.infer_policy`).
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
        known = known_policies(ev)
        if policy not in known:
            raise InputError("--policy", f"policy {policy!r} appears in no evidence table; "
                                         f"policies in the evidence: {known}")
        rule = "given (--policy)"
    if step is None:
        step = next_step(tables)
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
        conv = check_convergence(sens, CHECK_VARS["sensitivity"], rhat_max=s.rhat_max,
                                 ess_min=s.ess_threshold)
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
    return FittedBelief(q, idata, cfile, tables, jsonable(settings))


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
    tables = EvidenceTables(ev, costs, files, dict(settings.get("evidence_sha256", {})),
                            costs_complete=str(attrs.get("costs_complete", 0)) == "1")
    loader = (lambda: _read_group(path, "posterior", tree=True)) if "posterior" in groups \
        else None
    return FittedBelief(belief, None, stored, tables, settings, path, loader)


def _open_checked(path: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Root attributes and group names of a belief file, after the format and version checks
    of :func:`belief.persistence.load_tree` (read with h5py: no data is decoded)."""
    import h5py

    def header(p: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
        with h5py.File(p, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            groups = {name: sorted(f[name].keys()) for name in f.keys()
                      if isinstance(f[name], h5py.Group)}
        return attrs, groups

    attrs, groups = read_file(path, header, UNREADABLE.format(what="belief file"))
    check_header(attrs, path)
    if "belief" not in groups:
        raise InputError(str(path), "no /belief group")
    return attrs, groups


def _read_group(path: Path, group: str, tree: bool = False) -> xr.Dataset | xr.DataTree:
    """One group of a checked belief file, loaded (a DataTree with ``tree``)."""
    opener = xr.open_datatree if tree else xr.open_dataset
    return read_file(path, lambda p: opener(p, group=group, engine="h5netcdf").load(),
                     f"cannot read /{group} (truncated or damaged file)")


def decide_from(source: str | Path | FittedBelief, *,
                candidates: str | Path | CandidateSet | None = None,
                **options: Any) -> xr.Dataset:
    """Load a belief (unless given one) and decide: ``load(source).decide(**options)``."""
    fitted = source if isinstance(source, FittedBelief) else load(source, candidates)
    return fitted.decide(**options)


