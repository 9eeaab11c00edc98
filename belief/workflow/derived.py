"""What a fit's draws give once and the belief file keeps: convergence diagnostics, sensitivity.

``belief check``, ``decide`` and ``report`` read these instead of recomputing them from every
posterior group on each run.  They are computed from the very draws the file stores, when the
belief is saved (:meth:`belief.workflow.fitted.FittedBelief.save`), and stored as

- the root attribute ``derived`` (JSON, read with the file's header, no group opened)::

    {"format": "belief-derived-2",
     "posterior_sha256": {model: dataset_digest(/posterior/<model>/posterior)},
     "convergence": {"columns": [...], "rows": [[model, variable, rhat, rhat_at, ess_bulk,
                     ess_bulk_at, ess_tail, ess_tail_at, divergences, exact_draws, chains,
                     draws], ...]},
     "sensitivity": {policy: {"ranking": table, "synergy": table, "standardisation": ...,
                              "link": ..., "prob": ..., "reliable": ..., "reliability_reason":
                              ..., "group": "derived/sensitivity/<i>"}}}

  (numbers as JSON floats, which round-trip float64 exactly; NaN kept);
- one group ``/derived/sensitivity/<i>`` per report with its draws (read on first use).

The convergence rows are the thresholds-free :func:`belief.posterior.diagnostics.
diagnostics_table` of every model; the thresholds are applied on reading
(:func:`judge_models`), so ``belief check --rhat-max …`` works on them too.  A file without the
attribute, or with another ``format``, has them recomputed from its draws
(:func:`belief.workflow.fitted.FittedBelief.derived`, which says so once).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.posterior.diagnostics import CHECK_VARS, DIAGNOSTIC_COLUMNS

__all__ = ["DERIVED_FORMAT", "Derived", "compare_diagnostics", "compute_derived",
           "judge_models", "posterior_diagnostics", "posterior_digests", "read_derived",
           "to_file"]

DERIVED_FORMAT = "belief-derived-2"
"""Version 2 added the ``exact_draws`` column; a file of version 1 has its diagnostics
recomputed from its draws."""
_COLUMNS = ["model", "variable", *DIAGNOSTIC_COLUMNS, "chains", "draws"]


@dataclass(frozen=True)
class Derived:
    """What a fit's draws give once (see the module docstring).

    Attributes
    ----------
    convergence : DataFrame
        Index (``model``, ``variable``); columns :data:`belief.posterior.diagnostics.
        DIAGNOSTIC_COLUMNS` plus ``chains`` and ``draws`` of the model (no thresholds).
    sensitivity : dict of str to SensitivityReport
        One report per policy with sensitivity runs (empty without a sensitivity fit).
    posterior_sha256 : dict of str to str
        :func:`belief.files.dataset_digest` of each model's posterior draws they came from.
    """

    convergence: pd.DataFrame
    sensitivity: dict[str, Any]
    posterior_sha256: dict[str, str]


def posterior_diagnostics(idata: xr.DataTree) -> pd.DataFrame:
    """:func:`belief.posterior.diagnostics.diagnostics_table` of every model of ``idata`` (its
    :data:`belief.posterior.diagnostics.CHECK_VARS`), with the model's chains and draws.

    Returns
    -------
    DataFrame
        Index (``model``, ``variable``); empty when no child has a posterior.
    """
    from belief.posterior.diagnostics import diagnostics_table

    frames = {}
    for name, node in idata.children.items():
        if "posterior" not in node.children:
            continue
        post = node["posterior"]
        table = diagnostics_table(node, CHECK_VARS.get(name))
        table["chains"] = int(post.sizes.get("chain", 1))
        table["draws"] = int(post.sizes.get("draw", 1))
        frames[name] = table
    if not frames:
        return _empty()
    return pd.concat(frames, names=["model", "variable"])


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=_COLUMNS).set_index(["model", "variable"])


def judge_models(raw: pd.DataFrame, settings: Mapping[str, Any] | None = None,
                 rhat_max: float | None = None, ess_min: float | None = None,
                 max_divergences: int = 0, label: str = "belief") -> pd.DataFrame:
    """The convergence table (``passed``, ``problem``) of :func:`posterior_diagnostics`.

    Thresholds: R-hat ≤ ``rhat_max`` (default the fit's setting, else 1.01); bulk and tail
    ESS ≥ ``ess_min`` (default the fit's setting, else 400, the rule of
    :class:`belief.posterior.fitter.FitSettings` whatever the draws); divergences ≤
    ``max_divergences``.  Attributes ``rhat_max``, ``ess_min`` (the smallest used) and
    ``max_divergences``.

    Raises
    ------
    InputError
        When there is no fitted model (``label`` names the file).
    """
    from belief.posterior.diagnostics import judge_convergence

    settings = settings or {}
    rhat = float(settings.get("rhat_max", 1.01) if rhat_max is None else rhat_max)
    if not len(raw):
        raise InputError(label, "no fitted model to check")
    frames = {}
    thresholds = []
    for model in raw.index.get_level_values("model").unique():
        part = raw.xs(model, level="model")
        ess = ess_min if ess_min is not None else settings.get("ess_min", 400.0)
        thresholds.append(float(ess))
        frames[model] = judge_convergence(part[DIAGNOSTIC_COLUMNS], rhat_max=rhat,
                                          ess_min=float(ess), max_divergences=max_divergences)
    table = pd.concat(frames, names=["model", "variable"])
    table.attrs.update({"rhat_max": rhat, "ess_min": min(thresholds),
                        "max_divergences": max_divergences})
    return table


def posterior_digests(idata: xr.DataTree) -> dict[str, str]:
    """:func:`belief.files.dataset_digest` of each model's ``posterior`` group."""
    from belief.files import dataset_digest, netcdf_ready

    return {name: dataset_digest(netcdf_ready(node["posterior"].to_dataset()))
            for name, node in idata.children.items() if "posterior" in node.children}


def compute_derived(idata: xr.DataTree, settings: Mapping[str, Any] | None = None) -> Derived:
    """Everything of :class:`Derived`, computed from the draws of ``idata``; the sensitivity
    reports judged at the fit's ``rhat_max`` and ``ess_min`` (``settings``; without them
    R-hat ≤ 1.01 and ESS ≥ 400, as :func:`judge_models`)."""
    reports: dict[str, Any] = {}
    if "sensitivity" in idata.children:
        from belief.posterior.sensitivity import sensitivity_reports

        settings = settings or {}
        reports = sensitivity_reports(idata["sensitivity"],
                                      rhat_max=float(settings.get("rhat_max", 1.01)),
                                      ess_min=float(settings.get("ess_min", 400.0)))
    return Derived(posterior_diagnostics(idata), reports, posterior_digests(idata))


# -- storing and reading ------------------------------------------------------------------------
def _number(v: Any) -> Any:
    if isinstance(v, np.bool_ | bool):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def _frame_json(df: pd.DataFrame) -> dict[str, Any]:
    return {"index_name": df.index.name,
            "index": [_number(v) for v in df.index] if df.index.name is not None else None,
            "columns": [str(c) for c in df.columns],
            "dtypes": [str(t) for t in df.dtypes],
            "data": [[_number(v) for v in row] for row in df.itertuples(index=False)]}


def _frame(spec: Mapping[str, Any]) -> pd.DataFrame:
    n = len(spec["data"])
    index = (pd.Index(spec["index"], name=spec["index_name"]) if spec["index_name"] is not None
             else pd.RangeIndex(n))
    df = pd.DataFrame(spec["data"] if n else None, index=index, columns=spec["columns"])
    return df.astype(dict(zip(spec["columns"], spec["dtypes"], strict=True)))


def to_file(derived: Derived) -> tuple[str, dict[str, xr.Dataset]]:
    """The root attribute ``derived`` (JSON) and the groups of the reports' draws."""
    from belief.files import netcdf_ready

    conv = derived.convergence.reset_index()[_COLUMNS]
    groups: dict[str, xr.Dataset] = {}
    sens = {}
    for i, (policy, rep) in enumerate(derived.sensitivity.items()):
        group = f"derived/sensitivity/{i}"
        groups[group] = netcdf_ready(rep.draws)
        sens[policy] = {"ranking": _frame_json(rep.ranking), "synergy": _frame_json(rep.synergy),
                        "standardisation": rep.standardisation, "link": rep.link,
                        "prob": float(rep.prob), "reliable": bool(rep.reliable),
                        "reliability_reason": rep.reliability_reason, "group": group}
    doc = {"format": DERIVED_FORMAT, "posterior_sha256": dict(derived.posterior_sha256),
           "convergence": {"columns": _COLUMNS,
                           "rows": [[_number(v) for v in row]
                                    for row in conv.itertuples(index=False)]},
           "sensitivity": sens}
    return json.dumps(doc, allow_nan=True), groups


def read_derived(text: str | None, read_group: Callable[[str], xr.Dataset],
                 label: str) -> Derived | None:
    """:class:`Derived` from the root attribute ``derived`` of a belief file; ``None`` when it is
    absent or of another format (the caller recomputes).  ``read_group(path)`` reads a group of
    the file (called only when a report's draws are used).

    Raises
    ------
    InputError
        When the attribute is present in this format but damaged.
    """
    if text is None:
        return None
    try:
        doc = json.loads(str(text))
    except json.JSONDecodeError:
        raise InputError(label, "the stored diagnostics (attribute derived) are not valid JSON "
                                "(file damaged)") from None
    if not isinstance(doc, dict) or doc.get("format") != DERIVED_FORMAT:
        return None
    from belief.posterior.sensitivity import SensitivityReport

    try:
        conv = doc["convergence"]
        if conv["columns"] != _COLUMNS:
            raise KeyError("columns")
        raw = (pd.DataFrame(conv["rows"], columns=_COLUMNS).set_index(["model", "variable"])
               if conv["rows"] else _empty())
        for col in ("rhat", "ess_bulk", "ess_tail"):
            raw[col] = raw[col].astype(float)
        for col in ("divergences", "exact_draws", "chains", "draws"):
            raw[col] = raw[col].astype(np.int64)
        for col in ("rhat_at", "ess_bulk_at", "ess_tail_at"):
            raw[col] = raw[col].astype(str)
        reports = {}
        for policy, r in doc["sensitivity"].items():
            group = str(r["group"])
            reports[str(policy)] = SensitivityReport(
                str(policy), lambda group=group: read_group(group), _frame(r["ranking"]),
                _frame(r["synergy"]), str(r["standardisation"]), str(r["link"]),
                float(r["prob"]), bool(r["reliable"]), str(r["reliability_reason"]))
        digests = {str(k): str(v) for k, v in doc["posterior_sha256"].items()}
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(label, f"the stored diagnostics (attribute derived) are damaged "
                                f"({type(err).__name__}: {err})") from None
    return Derived(raw, reports, digests)


def compare_diagnostics(stored: Derived, recomputed: Derived, label: str) -> None:
    """Refuse stored diagnostics that differ from those recomputed from the stored draws.

    Compares the digests of the draws and every cell of the convergence rows (numbers
    exactly, NaN equal to NaN: the same draws and code give the same float64 values).

    Raises
    ------
    InputError
        Naming the file and the first differences.
    """
    problems = []
    for model in sorted(set(stored.posterior_sha256) | set(recomputed.posterior_sha256)):
        if stored.posterior_sha256.get(model) != recomputed.posterior_sha256.get(model):
            problems.append(f"the draws of {model} are not those the diagnostics were "
                            "computed from (SHA-256 differs)")
    a, b = stored.convergence, recomputed.convergence
    if list(a.index) != list(b.index):
        problems.append(f"checked variables differ: stored {list(a.index)}, recomputed "
                        f"{list(b.index)}")
    else:
        for key in a.index:
            for col in [*DIAGNOSTIC_COLUMNS, "chains", "draws"]:
                x, y = a.at[key, col], b.at[key, col]
                same = (x == y) or (isinstance(x, float) and isinstance(y, float)
                                    and np.isnan(x) and np.isnan(y))
                if not same:
                    x, y = (v.item() if isinstance(v, np.generic) else v for v in (x, y))
                    problems.append(f"{key[0]}: {key[1]}: {col} stored {x!r}, recomputed {y!r}")
    if problems:
        raise InputError(label, "stored diagnostics disagree with the stored draws (file "
                                "damaged or edited): " + "; ".join(problems[:5])
                         + (f"; … {len(problems) - 5} more" if len(problems) > 5 else ""))
