"""Fit every model that has data on an evidence folder (or tables) and build q_t."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import belief as _pkg
from belief.errors import InputError
from belief.files import jsonable
from belief.inputs.candidate_file import CandidateFile, candidates_toml, load_candidate_file
from belief.inputs.candidates import CandidateSet
from belief.inputs.evidence import Evidence
from belief.inputs.evidence_dir import (
    EvidenceTables,
    evidence_from_tables,
    infer_policy,
    known_policies,
    next_step,
    read_evidence_dir,
)
from belief.posterior.diagnostics import CHECK_VARS
from belief.validate import integer
from belief.workflow.fitted import FittedBelief, netcdf_tree

__all__ = ["fit"]


def fit(evidence: str | Path | Mapping[str, pd.DataFrame] | Evidence | EvidenceTables,
        candidates: str | Path | CandidateSet | CandidateFile, *, policy: str | None = None,
        step: int | None = None, draws: int = 500, tune: int | None = None, chains: int = 2,
        seed: int = 0, sensitivity: bool = True, progressbar: bool = False,
        fitter: Any = None, progress: Callable[[str], None] | None = None) -> FittedBelief:
    """Fit every model that has data and build q_t.

    Parameters
    ----------
    evidence : folder, mapping, Evidence or EvidenceTables
        An evidence folder (:mod:`belief.inputs.evidence_dir`), a mapping table name → DataFrame, or
        validated evidence.
    candidates : path, CandidateSet or CandidateFile
        The candidate TOML file (or a set; it is stored as TOML in the belief).
    policy : str, optional
        The current policy π_t (default: :func:`belief.inputs.evidence_dir.infer_policy`).
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
    from belief.inputs.tables import outcome_family
    from belief.posterior.fitter import BeliefFitter, FitSettings

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
    step = integer(step, "--step", minimum=0)
    draws, chains = integer(draws, "--draws", minimum=1), integer(chains, "--chains", minimum=1)
    tune = None if tune is None else integer(tune, "--tune", minimum=1)
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
        from belief.posterior.diagnostics import check_convergence

        t2 = time.perf_counter()
        sens = fitter.fit_sensitivity(
            ev, seed=int(np.random.default_rng([seed, 4]).integers(2**31)),
            progressbar=progressbar)
        conv = check_convergence(sens, CHECK_VARS["sensitivity"], rhat_max=s.rhat_max,
                                 ess_min=s.ess_threshold)
        q.attrs.update(conv.as_attrs("sensitivity_"))
        children["sensitivity"] = sens
        say(f"sensitivity model (compile + sample) in {time.perf_counter() - t2:.1f} s")
    idata = netcdf_tree(xr.DataTree.from_dict(children))
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
