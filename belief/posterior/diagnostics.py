"""Convergence checks of a fit (ArviZ): R-hat, bulk/tail ESS and divergences.

A fit that fails any threshold is *unreliable*; the flag and its reason travel with the belief
into every decision it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from models.registry import MODELS

__all__ = ["CHECK_VARS", "DIAGNOSTIC_COLUMNS", "NOT_SAMPLED", "Convergence", "check_convergence",
           "convergence_from_table", "convergence_table", "diagnostics_table",
           "judge_convergence", "next_steps", "not_sampled"]

CHECK_VARS = {m.name: list(m.check_vars) for m in MODELS}
"""Variables whose convergence is checked, per model (the registry's ``check_vars``): every
parameter of the model that is in the posterior (the decision quantities and every
hyperparameter); others: every posterior variable.  Variables a fit does not have (e.g. a
level merged away) are skipped."""


@dataclass(frozen=True)
class Convergence:
    """Result of :func:`check_convergence` (worst values over the checked variables)."""

    rhat_max: float
    ess_bulk_min: float
    ess_tail_min: float
    divergences: int
    reliable: bool
    reason: str

    def as_attrs(self, prefix: str = "") -> dict[str, float | int | str]:
        """Flat attributes for netCDF (booleans stored as 0/1)."""
        return {f"{prefix}rhat_max": self.rhat_max, f"{prefix}ess_bulk_min": self.ess_bulk_min,
                f"{prefix}ess_tail_min": self.ess_tail_min,
                f"{prefix}divergences": self.divergences,
                f"{prefix}reliable": int(self.reliable), f"{prefix}reason": self.reason}


def check_convergence(idata: xr.DataTree, var_names: list[str] | None = None, *,
                      rhat_max: float = 1.01, ess_min: float = 400.0,
                      max_divergences: int = 0) -> Convergence:
    """Check R-hat (rank-normalised), bulk and tail ESS, and divergent transitions.

    Thresholds follow Vehtari et al. (2021): R-hat ≤ 1.01, ESS ≥ 400 (scale ``ess_min`` down
    for short test runs), and no divergences.  The worst values over the variables of
    :func:`convergence_table`: max R-hat, min bulk and tail ESS (NaN entries, e.g. of
    constant elements, are skipped), with the element where each occurs in the reason.
    """
    return convergence_from_table(diagnostics_table(idata, var_names), rhat_max=rhat_max,
                                  ess_min=ess_min, max_divergences=max_divergences,
                                  divergences=_divergences(idata))


def convergence_from_table(table: pd.DataFrame, *, rhat_max: float = 1.01,
                           ess_min: float = 400.0, max_divergences: int = 0,
                           divergences: int | None = None) -> Convergence:
    """:func:`check_convergence` from a :func:`diagnostics_table` already computed (one fit:
    the worst R-hat, bulk and tail ESS over its rows; its divergences, default the table's)."""
    r, r_at = _extreme(table, "rhat", largest=True)
    eb, eb_at = _extreme(table, "ess_bulk", largest=False)
    et, et_at = _extreme(table, "ess_tail", largest=False)
    div = (int(table["divergences"].max()) if len(table) else 0) if divergences is None \
        else int(divergences)
    problems = _problems(r, r_at, eb, eb_at, et, et_at, div, rhat_max, ess_min,
                         max_divergences)
    return Convergence(r, eb, et, div, not problems, "; ".join(problems) or "converged")


def _extreme(table: pd.DataFrame, column: str, largest: bool) -> tuple[float, str]:
    """The largest (or smallest) finite value of a convergence-table column and its element."""
    values = table[column].astype(float)
    values = values[np.isfinite(values)]
    if values.empty:
        return float("nan"), ""
    name = values.idxmax() if largest else values.idxmin()
    return float(values[name]), str(table.at[name, f"{column}_at"])


def _divergences(idata: xr.DataTree) -> int:
    if "sample_stats" in idata.children and "diverging" in idata["sample_stats"].data_vars:
        return int(idata["sample_stats"]["diverging"].sum())
    return 0


def _problems(r: float, r_at: str, eb: float, eb_at: str, et: float, et_at: str, div: int,
              rhat_max: float, ess_min: float, max_divergences: int) -> list[str]:
    """The thresholds broken, in words (NaN R-hat or ESS counts as broken)."""
    problems = []
    if not r <= rhat_max:
        problems.append(f"R-hat {r:.4f} > {rhat_max:g} at {r_at}")
    if not eb >= ess_min:
        problems.append(f"bulk ESS {eb:.0f} < {ess_min:g} at {eb_at}")
    if not et >= ess_min:
        problems.append(f"tail ESS {et:.0f} < {ess_min:g} at {et_at}")
    if div > max_divergences:
        problems.append(f"{div} divergent transitions > {max_divergences}")
    return problems


def _worst(da: xr.DataArray, pick) -> tuple[float, str]:
    """Worst value of ``da`` (``pick`` = np.nanargmax or np.nanargmin) and where it is."""
    values = np.asarray(da.values, dtype=float)
    if not values.size or not np.isfinite(values).any():
        return float("nan"), ""
    flat = int(pick(np.where(np.isfinite(values), values, np.nan).ravel()))
    index = np.unravel_index(flat, values.shape) if values.ndim else ()
    labels = [str(da[d].values[i]) if d in da.coords else str(i)
              for d, i in zip(da.dims, index, strict=True)]
    where = f"{da.name}[{', '.join(labels)}]" if labels else str(da.name)
    return float(values.ravel()[flat]), where


DIAGNOSTIC_COLUMNS = ["rhat", "rhat_at", "ess_bulk", "ess_bulk_at", "ess_tail", "ess_tail_at",
                      "divergences", "exact_draws"]
"""Columns of :func:`diagnostics_table` (what a fit's draws give, before any threshold)."""


def diagnostics_table(idata: xr.DataTree, var_names: list[str] | None = None) -> pd.DataFrame:
    """Per-variable R-hat, bulk and tail ESS of one fit, naming the worst element of each.

    Parameters
    ----------
    idata : DataTree
        A fit with ``posterior`` (and ``sample_stats`` for divergences).
    var_names : list of str, optional
        Variables to check (default: every posterior variable).

    Returns
    -------
    DataFrame
        One row per variable (index ``variable``), columns :data:`DIAGNOSTIC_COLUMNS`:
        ``rhat`` = max over the variable's elements of the rank-normalised split R-hat and
        ``rhat_at`` (the element), ``ess_bulk`` / ``ess_tail`` (min) and where,
        ``divergences`` (of the whole fit).
    """
    post = idata["posterior"].to_dataset()
    names = [v for v in (var_names or list(post.data_vars)) if v in post.data_vars]
    div = _divergences(idata)
    key = _content_key(post, names, div)
    known = _TABLES.get(key)
    if known is not None:  # the same draws again (a fit's check, then its belief file)
        return known.copy()
    table = _diagnostics_table(idata, post, names, div)
    _TABLES[key] = table.copy()
    for old in list(_TABLES)[:-_TABLES_KEPT]:  # the oldest first
        _TABLES.pop(old, None)
    return table


_TABLES: dict[str, pd.DataFrame] = {}
"""The last tables computed, by :func:`_content_key`: a table is a function of the checked
draws, their coordinates and the divergence count only, so equal content gives an equal table
(the fit computes it for its check and the saved belief's diagnostics need it again)."""
_TABLES_KEPT = 16


def _content_key(post: xr.Dataset, names: list[str], divergences: int) -> str:
    """SHA-256 of the checked variables (name, dims, dtype, shape, values, and every coordinate
    on them: the names of the worst elements and the exact-draw mask come from these)."""
    import hashlib

    h = hashlib.sha256(repr((names, int(divergences))).encode())
    for name in names:
        da = post[name]
        values = np.ascontiguousarray(da.values)
        h.update(repr((name, da.dims, values.dtype.str, values.shape)).encode())
        h.update(values.tobytes())
        for c in sorted(da.coords):
            coord = np.asarray(da.coords[c].values)
            if coord.dtype.kind in "OUS":  # labels: as they are printed (str or object alike)
                h.update(repr((c, da.coords[c].dims, [str(x) for x in coord.ravel()])).encode())
            else:
                h.update(repr((c, da.coords[c].dims, coord.dtype.str, coord.shape)).encode())
                h.update(np.ascontiguousarray(coord).tobytes())
    return h.hexdigest()


def _diagnostics_table(idata: xr.DataTree, post: xr.Dataset, names: list[str],
                       div: int) -> pd.DataFrame:
    import arviz_stats as az  # imported here: reading a belief needs none of ArviZ's stats

    def as_ds(obj) -> xr.Dataset:
        return obj.to_dataset() if isinstance(obj, xr.DataTree) else obj

    rhat = as_ds(az.rhat(idata, var_names=names))
    ess_b = as_ds(az.ess(idata, var_names=names, method="bulk"))
    ess_t = as_ds(az.ess(idata, var_names=names, method="tail"))
    rows = []
    for name in names:
        r, r_at = _worst(_sampled(rhat[name], post[name]).rename(name), np.nanargmax)
        eb, eb_at = _worst(_sampled(ess_b[name], post[name]).rename(name), np.nanargmin)
        et, et_at = _worst(_sampled(ess_t[name], post[name]).rename(name), np.nanargmin)
        rows.append({"variable": name, "rhat": r, "rhat_at": r_at, "ess_bulk": eb,
                     "ess_bulk_at": eb_at, "ess_tail": et, "ess_tail_at": et_at,
                     "divergences": div, "exact_draws": _exact_count(post[name])})
    return pd.DataFrame(rows, columns=["variable", *DIAGNOSTIC_COLUMNS]).set_index("variable")


def _sampled(diag: xr.DataArray, draws: xr.DataArray) -> xr.DataArray:
    """``diag`` with NaN at elements whose draws are exact independent draws, not a Markov
    chain (a coordinate ``exact_prior_draw`` = 1 on one of the dims of ``draws``, e.g. the γ
    of order-effect pairs outside the likelihood,
    :meth:`models.gains.GainsModel.informed_pairs`): no MCMC diagnostic applies to them, so
    the checks skip them."""
    if "exact_prior_draw" not in draws.coords:
        return diag
    keep = draws.coords["exact_prior_draw"].reset_coords(drop=True) == 0
    return diag.where(keep.drop_vars("exact_prior_draw", errors="ignore"))


def _exact_count(draws: xr.DataArray) -> int:
    """How many elements of ``draws`` are exact independent draws (:func:`_sampled`)."""
    if "exact_prior_draw" not in draws.coords:
        return 0
    flag = draws.coords["exact_prior_draw"].reset_coords(drop=True)
    other = int(np.prod([draws.sizes[d] for d in draws.dims
                         if d not in ("chain", "draw", *flag.dims)]))
    return int((flag.values != 0).sum()) * other


def not_sampled(row: pd.Series) -> bool:
    """Whether a :func:`diagnostics_table` row has nothing left to check: every element of the
    variable is an exact draw of its posterior (``exact_draws`` > 0 and no finite R-hat or ESS
    over the rest), e.g. the order effects γ of a fit where no step or estimate informs any
    pair, drawn from their prior exactly (:meth:`models.gains.GainsModel.informed_pairs`)."""
    exact = row.get("exact_draws", 0)
    if not (np.isfinite(float(exact)) and float(exact) > 0):
        return False
    return not any(np.isfinite(float(row[c])) for c in ("rhat", "ess_bulk", "ess_tail"))


NOT_SAMPLED = "exact draws (no data: the prior), not a chain: not checked"
"""The ``note`` of a convergence-table row that :func:`not_sampled` leaves out of the checks
(after "all <n> "): independent draws of the exact posterior have no R-hat or ESS."""


def judge_convergence(table: pd.DataFrame, *, rhat_max: float = 1.01, ess_min: float = 400.0,
                      max_divergences: int = 0) -> pd.DataFrame:
    """A :func:`diagnostics_table` with the thresholds applied: columns ``passed``,
    ``problem`` (the thresholds broken, in words; NaN R-hat or ESS counts as broken) and
    ``note`` added.

    A row of exact draws only (:func:`not_sampled`) is not judged: ``passed`` is true,
    ``problem`` empty and ``note`` says why (:data:`NOT_SAMPLED`) — the same rule as the
    whole-fit :func:`check_convergence`, which skips those elements.  A row where some
    elements are exact draws notes how many were left out of its R-hat and ESS.
    """
    out = table.copy()
    problems, notes = [], []
    for _, row in table.iterrows():
        exact = int(row["exact_draws"]) if "exact_draws" in row.index else 0
        if not_sampled(row):
            problems.append([])
            notes.append(f"all {exact} {NOT_SAMPLED}")
            continue
        problems.append(_problems(float(row["rhat"]), str(row["rhat_at"]),
                                  float(row["ess_bulk"]), str(row["ess_bulk_at"]),
                                  float(row["ess_tail"]), str(row["ess_tail_at"]),
                                  int(row["divergences"]), rhat_max, ess_min, max_divergences))
        notes.append(f"{exact} exact draws left out" if exact else "")
    out["passed"] = [not p for p in problems]
    out["problem"] = ["; ".join(p) for p in problems]
    out["note"] = notes
    return out


def convergence_table(idata: xr.DataTree, var_names: list[str] | None = None, *,
                      rhat_max: float = 1.01, ess_min: float = 400.0,
                      max_divergences: int = 0) -> pd.DataFrame:
    """Per-variable convergence diagnostics of one fit, naming the worst element of each.

    Parameters
    ----------
    idata : DataTree
        A fit with ``posterior`` (and ``sample_stats`` for divergences).
    var_names : list of str, optional
        Variables to check (default: every posterior variable).
    rhat_max, ess_min, max_divergences
        Thresholds (see :func:`check_convergence`).

    Returns
    -------
    DataFrame
        One row per variable (index ``variable``): ``rhat`` (max) and ``rhat_at`` (the element),
        ``ess_bulk`` / ``ess_tail`` (min) and where, ``divergences`` (of the whole fit),
        ``exact_draws``, ``passed``, ``problem`` (the thresholds broken, in words) and ``note``
        (e.g. why a row of exact draws is not checked): :func:`judge_convergence` of
        :func:`diagnostics_table`.
    """
    return judge_convergence(diagnostics_table(idata, var_names), rhat_max=rhat_max,
                             ess_min=ess_min, max_divergences=max_divergences)


def next_steps(table: pd.DataFrame, escalations: dict[str, str] | None = None) -> list[str]:
    """What to do about the failing rows of a :func:`convergence_table`, one line per model.

    Divergent transitions mean the sampler met curvature it cannot follow (a funnel between a
    scale and its members, or a boundary): the remedy is a smaller step (``--target-accept``,
    e.g. 0.99, with longer ``--tune``) and, when they persist, a prior that rules the funnel out
    (a tighter or lighter-tailed scale prior for that level in ``[priors.<model>]``).  Low ESS or
    a high R-hat alone means too few effective draws: more ``--draws`` (4 chains).  Thresholds are
    never loosened.  ``escalations`` (model → what the fit already tried, the belief's
    ``<model>_escalation``) is quoted so the user does not repeat it.
    """
    failed = table[~table["passed"].astype(bool)]
    lines = []
    for model in failed.index.get_level_values("model").unique():
        problems = " ".join(failed.xs(model, level="model")["problem"].astype(str))
        tried = (escalations or {}).get(model, "")
        done = f" (the fit already tried: {tried})" if tried and tried != "none" else ""
        if "divergent" in problems:
            lines.append(
                f"{model}: divergent transitions{done} — re-fit with `belief fit ... "
                "--target-accept 0.99 --tune 2000`; if they remain, state a tighter scale prior "
                f"for the level in the candidate file's [priors.{model}] section "
                "(docs/howto/check-fails.md) and fit again")
        else:
            lines.append(
                f"{model}: too few effective draws{done} — re-fit with more draws, e.g. "
                "`belief fit ... --draws 2000 --chains 4`")
    return lines
