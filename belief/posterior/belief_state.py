"""The belief state q_t: joint posterior draws of every decision quantity.

q_t is an ``xarray.Dataset`` of *joint* posterior draws over (``sample``, ``candidate``):

- ``gain``: posterior-predictive gain of the next execution of m from the current policy, on
  the success-probability scale (exactly 0 for diagnosis and model-update candidates);
- ``p_unsafe`` (when an execution-risk model was fitted): draws of P_exec(unsafe | m);
- ``executions`` / ``unsafe``: execution-safety counts so far (for Clopper–Pearson bounds);

with candidate attributes as coordinates.  Joint draws matter: a reweighting of the samples
(CVU) moves every candidate's belief at once.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet

__all__ = ["check_belief_candidates", "check_zero_gain", "make_belief", "summarize"]


def make_belief(gain: xr.DataArray, candidates: CandidateSet, *, step: int, policy: str,
                executions: np.ndarray | None = None, unsafe: np.ndarray | None = None,
                p_unsafe: xr.DataArray | None = None,
                reliability: dict[str, float | int | str] | None = None,
                model_draws: xr.Dataset | None = None) -> xr.Dataset:
    """Assemble q_t from model draws.

    Parameters
    ----------
    gain : DataArray (``sample``, ``candidate``)
        Predictive gain draws of the policy-changing candidates (others get 0; a non-zero draw
        given for one of them is refused, see :func:`check_zero_gain`).
    candidates : CandidateSet
    step, policy
        The time step t and current policy π_t (stored as attributes).
    executions, unsafe : array over candidates, optional
        Safety counts (default zeros).
    p_unsafe : DataArray (``sample``, ``candidate``), optional
    reliability : dict, optional
        Convergence attributes (see :meth:`belief.posterior.diagnostics.Convergence.as_attrs`).
    model_draws : Dataset, optional
        The models' joint decision draws (e.g. ``gains_*`` from
        :func:`models.gains.decision_draws`), kept in q_t for the continuation value; variables
        over ``candidate`` are filled with 0 for candidates the model does not cover.
    """
    ids = candidates.ids
    check_zero_gain(gain, candidates, "gain")
    full = gain.reindex(candidate=ids, fill_value=0.0)
    n = len(ids)
    data = {
        "gain": full.transpose("sample", "candidate"),
        "executions": ("candidate", np.zeros(n, int) if executions is None
                       else np.asarray(executions, int)),
        "unsafe": ("candidate", np.zeros(n, int) if unsafe is None else np.asarray(unsafe, int)),
    }
    if p_unsafe is not None:
        data["p_unsafe"] = p_unsafe.reindex(candidate=ids, fill_value=0.0).transpose(
            "sample", "candidate")
    if model_draws is not None:
        for name, var in model_draws.data_vars.items():
            if "candidate" in var.dims:
                var = var.reindex(candidate=ids, fill_value=0.0)
            data[name] = var.drop_vars("sample", errors="ignore")
    ds = xr.Dataset(data).assign_coords(candidates.attributes().coords)
    ds = ds.assign_coords(sample=np.arange(ds.sizes["sample"]))
    ds.attrs.update({"step": int(step), "policy": str(policy), "eval_protocol":
                     candidates.eval_protocol, "reliable": 1, "reliability_reason": "converged"})
    if reliability:
        ds.attrs.update(reliability)
    ds["gain"].attrs.update({"long_name": "posterior-predictive gain of the next execution",
                             "units": "success probability"})
    return ds


def check_belief_candidates(belief: xr.Dataset, candidates: CandidateSet) -> None:
    """Refuse a belief whose ``candidate`` coordinate is not the candidate set, in order, or
    that gives a diagnosis or model-update candidate a gain (:func:`check_zero_gain`)."""
    got = [str(c) for c in belief["candidate"].values]
    if got != candidates.ids:
        raise InputError("belief", f"belief candidates {got} do not match the candidate set "
                                   f"{candidates.ids}")
    check_zero_gain(belief["gain"], candidates)


def check_zero_gain(gain: xr.DataArray, candidates: CandidateSet, table: str = "belief") -> None:
    """Refuse a non-zero gain draw for a candidate that does not change the policy.

    A diagnosis or a model update leaves π_t as it is, so its immediate gain ΔJ is 0 by
    definition (its value is in CVU: what it teaches about the other candidates).  A gain
    supplied for one would be scored in U0 = φ(ΔJ) − C_λ as if it improved the policy, so it is
    refused — not set to 0 silently, which would hide the mistake in the input.
    """
    ids = [str(c) for c in gain["candidate"].values]
    for c in candidates:
        if c.changes_policy or c.id not in ids:
            continue
        values = np.asarray(gain.sel(candidate=c.id).values, dtype=float)
        if np.any(values != 0):
            raise InputError(table, f"gain of {c.id!r} must be 0: a {c.role} does not change the "
                                    "policy, so its immediate gain ΔJ is 0 by definition (its "
                                    "value is in CVU); got draws with mean "
                                    f"{np.nanmean(values):.4g}", row=c.id)


def summarize(belief: xr.Dataset, quantiles: tuple[float, ...] = (0.05, 0.5, 0.95)) -> xr.Dataset:
    """Mean, standard deviation and quantiles of every (``sample``, ``candidate``) variable."""
    out = {}
    for name, da in belief.data_vars.items():
        if "sample" not in da.dims:
            continue
        out[f"{name}_mean"] = da.mean("sample")
        out[f"{name}_sd"] = da.std("sample")
        qs = da.quantile(list(quantiles), dim="sample")
        for q in quantiles:
            out[f"{name}_q{100 * q:g}"] = qs.sel(quantile=q).drop_vars("quantile")
    return xr.Dataset(out)

