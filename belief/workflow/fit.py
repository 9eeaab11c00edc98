"""Fit every model that has data on an evidence folder (or tables) and build q_t."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
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
from belief.validate import integer
from belief.workflow.fitted import FittedBelief, netcdf_tree

__all__ = ["fit", "model_priors"]


def _past_runs(past: Sequence[Any] | None, fitter: Any, cs: CandidateSet,
               current: Any = None) -> tuple:
    """The past campaigns of a fit: read from ``past`` (paths, or PastCampaign objects — not
    both), or the given fitter's own.  A fitter and ``past=`` together must name the same
    campaigns (compared by their real paths, so a folder given relative and absolute is the
    same campaign)."""
    runs: tuple = ()
    if past:
        from belief.inputs.past_campaigns import PastCampaign, read_past_campaigns

        given = [p for p in past if isinstance(p, PastCampaign)]
        paths = [p for p in past if not isinstance(p, PastCampaign)]
        if given and paths:
            raise InputError("past", "give paths or PastCampaign objects, not both")
        runs = tuple(given) or read_past_campaigns(paths, cs, current=current)
    if fitter is None:
        return runs
    if past and ([os.path.realpath(c.source) for c in fitter.past]
                 != [os.path.realpath(c.source) for c in runs]):
        raise InputError("fitter", "the fitter was built with other past campaigns than "
                                   "past=; pass fitter=None, or the fitter alone")
    return tuple(fitter.past)


SEED_LIMIT = 2**63
"""Seeds are in [0, 2**63): numpy's generators take larger ones, but the belief file stores
the seed as a 64-bit integer (a larger one becomes an object the netCDF writer refuses)."""


def model_priors(cfile: CandidateFile | None = None,
                 priors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The priors object of every model: defaults, then the candidate file's ``[priors]``,
    then ``priors`` (model → priors object, or a mapping of its fields).

    Raises
    ------
    InputError
        Naming the file and ``[priors.<model>]`` (or ``priors[<model>]``), the key and the
        allowed values.
    """
    from belief.posterior.registry import resolve_priors

    if cfile is None:
        return resolve_priors(priors=priors)
    return resolve_priors(cfile.priors, cfile.source, priors)


def _draws_fit_in_memory(fitter: Any, available: int | None = None) -> None:
    """Refuse, before any compile, a gains fit whose order-effect draws cannot fit in memory:
    γ and its whitened deviations, 2 × chains × draws × pairs float64 (pairs ≈ N(N − 1) for
    N candidates), with ``available`` bytes (default: what the machine has free)."""
    from belief.validate import fits_in_memory

    pairs = len(getattr(fitter.gains, "pairs", ()) or ())
    s = fitter.settings
    fits_in_memory(2 * s.chains * s.draws * pairs * 8, "--draws",
                   f"{s.chains} chains × {s.draws} draws of the {pairs} order effects (γ) of "
                   f"{len(fitter.candidates)} candidates",
                   "give fewer --draws or --chains, or set [priors.gains] order_effects = "
                   "false", available=available)


def fit(evidence: str | Path | Mapping[str, pd.DataFrame] | Evidence | EvidenceTables,
        candidates: str | Path | CandidateSet | CandidateFile, *, policy: str | None = None,
        step: int | None = None, draws: int = 1000, tune: int | None = None, chains: int = 4,
        seed: int = 0, target_accept: float | None = None, sensitivity: bool = True,
        costs: bool = False, progressbar: bool = False, fitter: Any = None,
        priors: Mapping[str, Any] | None = None,
        progress: Callable[[str], None] | None = None,
        past: Sequence[Any] | None = None) -> FittedBelief:
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
        Sampler settings (``tune`` defaults to min(draws, 500)).  Every model is checked (R-hat ≤
        1.01, bulk and tail ESS ≥ 400, no divergences) and a failing one re-fitted with the
        remedy for its failure (:meth:`belief.posterior.fitter.BeliefFitter.fit_reliable`).
    target_accept : float, optional
        NUTS target acceptance of the first attempt (default: each model's own).
    sensitivity : bool
        Fit the sensitivity model when there are sensitivity runs.
    costs : bool
        Fit the cost model when the evidence has realised costs (``belief fit --costs``; off
        by default, see :mod:`belief.posterior.fitter`, "Costs"): q_t gets the joint
        predictive cost draws ``cost`` and ``belief decide`` uses them.
    priors : mapping, optional
        Model → priors object (e.g. ``{"gains": GainsPriors(tau_lens=ScalePrior(
        "half_cauchy", beta=0.5))}``) or a mapping of its fields; applied after the candidate
        file's ``[priors]`` (see :func:`model_priors`).
    progressbar : bool
        nutpie's progress bars.
    fitter : BeliefFitter, optional
        Re-use a compiled fitter (its settings and priors win over ``draws``/``tune``/
        ``chains`` and the priors); it must be built on the same candidates.
    progress : callable, optional
        Called with one-line progress messages.
    past : sequence of paths or PastCampaign, optional
        Past campaigns of the same candidate set (``belief fit --past``): evidence folders
        (paths), or campaigns read by :func:`belief.campaign.past.read_past` (which also reads
        campaign logs; :mod:`belief.inputs.past_campaigns`): the gains model
        learns the order effects γ (and τ_exec, ρ, the pooling) from them too, with a campaign
        level on θ (:mod:`models.gains`, "Past campaigns").  The belief's attribute
        ``past_campaigns`` and the stored settings list them.  None or empty: the default
        fit, unchanged.

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
    from belief.posterior.registry import refuse_unknown_models

    refuse_unknown_models(cfile.priors, f"{cfile.source} [priors]")  # before any table is read
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
    if step < next_step(tables):
        raise InputError("--step", f"{step} is before the evidence, which runs to step "
                                   f"{next_step(tables) - 1}: a belief at step t is the state "
                                   "before decision t, after the evidence of the steps before "
                                   f"it; give --step {next_step(tables)} or more, or leave it "
                                   "out")
    if not (isinstance(seed, int | np.integer) and not isinstance(seed, bool)
            and 0 <= int(seed) < SEED_LIMIT):
        raise InputError("--seed", f"must be an integer in [0, 2**63 - 1] (what the sampler's "
                                   f"generators and the belief file store), got {seed!r}")
    draws, chains = integer(draws, "--draws", minimum=1), integer(chains, "--chains", minimum=1)
    if chains < 2:
        raise InputError("--chains", f"{chains} chain: the convergence check (R-hat) compares "
                                     "chains and needs at least 2; give --chains 2 or more")
    tune = None if tune is None else integer(tune, "--tune", minimum=1)
    past_runs = _past_runs(past, fitter, cs,
                           current=evidence if isinstance(evidence, str | Path) else None)
    if fitter is None:
        pri = model_priors(cfile, priors)
        fitter = BeliefFitter.from_priors(cs, FitSettings.for_draws(
            int(draws), tune, chains=int(chains), target_accept=target_accept,
            costs=bool(costs)), pri, past=past_runs)
    elif fitter.candidates.ids != cs.ids:
        raise InputError("fitter", f"the fitter was built on candidates {fitter.candidates.ids}"
                                   f", the evidence on {cs.ids}")
    s = fitter.settings
    _draws_fit_in_memory(fitter)
    cost_model = (fitter.cost_model(len(tables.costs))
                  if s.costs and len(tables.costs) else None)
    models = ["gains"] + (["exec_risk"] if fitter.exec_risk is not None else []) \
        + (["costs"] if cost_model is not None else []) \
        + (["transfer"] if len(ev.transfer) else []) \
        + (["sensitivity"] if sensitivity and len(ev.sensitivity) else [])
    say(f"policy {policy} ({rule}); step {step}; models: {', '.join(models)}")
    t0 = time.perf_counter()
    from belief.posterior.registry import priors_setting, progress_line

    labels = [fitter.gains.compile_label()] \
        + ([fitter.exec_risk.compile_label()] if fitter.exec_risk is not None else []) \
        + ([cost_model.compile_label()] if cost_model is not None else []) \
        + ([f"transfer {outcome_family(ev.transfer)}"] if len(ev.transfer) else [])
    say(progress_line(labels) + " …")
    fitter.gains._compiled()
    if fitter.exec_risk is not None:
        fitter.exec_risk._compiled()
    if cost_model is not None:
        cost_model._compiled()
    if len(ev.transfer):
        fitter.transfer._compiled(outcome_family(ev.transfer))
    t1 = time.perf_counter()
    say(f"compiled in {t1 - t0:.1f} s; sampling {s.chains} chains × {s.draws} draws "
        f"(+{s.tune} tuning) …")
    idata, q = fitter.fit_reliable(ev, policy, int(step), int(seed), progressbar=progressbar,
                                   costs=tables.costs if len(tables.costs) else None)
    say(f"sampled {', '.join(idata.children)} in {time.perf_counter() - t1:.1f} s")
    for name in idata.children:
        if int(q.attrs.get(f"{name}_attempts", 1)) > 1:
            say(f"{name}: re-fitted: {q.attrs[f'{name}_escalation']}")
    children = {name: idata[name] for name in idata.children}
    if "sensitivity" in models:
        t2 = time.perf_counter()
        sens = fitter.fit_sensitivity_model(
            ev, seed=int(np.random.default_rng([seed, 4]).integers(2**31)),
            progressbar=progressbar)
        q.attrs.update(sens.as_attrs("sensitivity_"))  # the check and every attempt, as for
        children["sensitivity"] = sens.idata           # gains and execution risk
        say(f"sensitivity model (compile + sample) in {time.perf_counter() - t2:.1f} s")
    idata = netcdf_tree(xr.DataTree.from_dict(children))
    settings = {
        "belief_version": _pkg.__version__, "draws": s.draws, "tune": s.tune,
        "chains": s.chains, "seed": int(seed), "policy": policy, "policy_rule": rule,
        "step": int(step), "rhat_max": s.rhat_max, "ess_min": float(s.ess_threshold),
        "max_policies": s.max_policies, "max_escalations": s.max_escalations,
        "costs": bool(s.costs),
        "models": list(idata.children),
        "priors": priors_setting(fitter),
        "evidence_source": source, "evidence_files": {k: Path(v).name if v != "<python>"
                                                      else v for k, v in tables.files.items()},
        "evidence_sha256": tables.digests, "evidence_rows": tables.rows(),
        "fit_seconds": round(time.perf_counter() - t0, 2)}
    if past_runs:  # only then: a default fit stores exactly what it stored before
        settings["past_campaigns"] = [{"label": c.label, "source": c.source,
                                       "paired_rows": len(c.evidence.paired)}
                                      for c in past_runs]
        settings["past_campaigns_prior"] = {
            "tau_campaign": {"family": "half_normal", "sigma": fitter.gains.campaign_sd}}
        q.attrs["past_campaigns"] = ", ".join(f"{c.label} ({c.source})" for c in past_runs)
    return FittedBelief(q, idata, cfile, tables, jsonable(settings))
