"""Sensitivity reports per policy and candidate prioritisation (candidate generation only).

The sensitivity model (:mod:`models.sensitivity`) gives posterior draws of S_kπ (per policy π
and mismatch direction k, per one s.d. of ξ_k) and of the synergies γ_kl.  This module turns a
fit into:

- a **report per policy**: every S_kπ (mean, s.d., 90 % interval), the ranking of directions
  *within that policy* by influence |S_kπ| with the probability that each is the most
  influential, P(most influential)_k = Pr(k = argmax_j |S_jπ|), and every γ_kl with P(synergy);
- a **prioritisation**: the top directions mapped to the candidates whose ``targets`` include
  them — which candidates are worth scoring, and why.  It is candidate generation, never a value
  input: it does not enter U0, MV, CVU or Q.

Sensitivity is *policy-conditional*: S_k(π1) and S_k(π2) are not comparable, so reports of two
different policies refuse to be compared (:class:`PolicyConditionalError`).

P(synergy) for a pair (k, l) under π: with every other direction at its sweep centre, let
lo/hi be the smallest/largest settings of ξ_k and ξ_l in the sweep and

    a     = η(hi_k, lo_l) − η(lo_k, lo_l)       (k alone)
    b     = η(lo_k, hi_l) − η(lo_k, lo_l)       (l alone)
    joint = η(hi_k, hi_l) − η(lo_k, lo_l)  = a + b + γ_kl (hi'_k − lo'_k)(hi'_l − lo'_l)

on the model's linear-predictor scale (logit for binomial outcomes); then
P(synergy) = Pr(|joint| > |a| + |b|): the two perturbations together move J more than any
additive combination of their separate effects can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.posterior.diagnostics import CHECK_VARS, Convergence, check_convergence

__all__ = [
    "PolicyConditionalError",
    "Prioritisation",
    "SensitivityReport",
    "compare_sensitivities",
    "prioritise",
    "sensitivity_report",
    "sensitivity_reports",
]


class PolicyConditionalError(InputError):
    """Refused comparison of sensitivities across two policies.

    S_k(π) measures how *this* policy's J responds to ξ_k near its own operating point (through
    its own occupancy d^π); under the same ξ_k, S_k(π1) ≠ S_k(π2) in general and the two are not
    on a common scale, so no cross-policy statement is claimed.
    """

    def __init__(self, first: str, second: str) -> None:
        super().__init__(
            "sensitivity_report",
            f"cannot compare sensitivities of policy {first!r} with those of policy {second!r}: "
            "sensitivity is policy-conditional — S_k(π) is the local response of this policy's J "
            "to ξ_k around its own operating point (its own state-action occupancy), so "
            "S_k(π1) and S_k(π2) are not comparable statistics; rank directions within one "
            "policy, and compare policies by their gains ΔJ, not their sensitivities")


def _stack(da: xr.DataArray) -> xr.DataArray:
    """(chain, draw, ...) → (sample, ...)."""
    out = da.stack(sample=("chain", "draw")).drop_vars(["sample", "chain", "draw"])
    return out.transpose("sample", ...)


@dataclass(frozen=True)
class SensitivityReport:
    """What the sensitivity runs say about one policy π.

    Attributes
    ----------
    policy : str
    draws : Dataset
        ``S`` (``sample``, ``direction``), ``S_per_unit``, ``gamma`` (``sample``, ``pair``),
        ``joint``, ``alone_first``, ``alone_second`` (``sample``, ``pair``), ``synergy``
        (0/1 per draw).  Built with a callable instead (a report stored in a belief file),
        they are read on first access.
    ranking : DataFrame
        Per direction, most influential first: ``S_mean``, ``S_sd``, ``S_lo``, ``S_hi``
        (equal-tailed ``prob`` interval), ``S_per_unit_mean``, ``influence_mean`` (E|S|),
        ``p_most_influential`` and ``rank``.
    synergy : DataFrame
        Per pair: ``gamma_mean``, ``gamma_lo``, ``gamma_hi``, ``p_gamma_positive``,
        ``p_gamma_negative``, means of ``alone_first``, ``alone_second``, ``joint``, and
        ``p_synergy``.
    standardisation : str
        How ξ (and J) were standardised for S and γ.
    link : str
        Scale of the linear predictor (logit of the success probability, or J).
    prob : float
        Interval probability.
    reliable : bool
        Whether the fit passed the convergence checks (R-hat ≤ 1.01, bulk/tail ESS ≥ 400 —
        the fit's thresholds when given — no divergences) on ``CHECK_VARS["sensitivity"]``.
    reliability_reason : str
    """

    policy: str
    _draws: xr.Dataset | Callable[[], xr.Dataset] = field(repr=False)
    ranking: pd.DataFrame
    synergy: pd.DataFrame
    standardisation: str
    link: str
    prob: float = 0.9
    reliable: bool = True
    reliability_reason: str = "not checked"

    @property
    def draws(self) -> xr.Dataset:
        """The report's draws (see the class docstring); read once when given as a callable."""
        if callable(self._draws):
            object.__setattr__(self, "_draws", self._draws())
        return self._draws

    @property
    def directions(self) -> list[str]:
        """Directions, most influential first."""
        return list(self.ranking.index)

    def compare(self, other: SensitivityReport) -> pd.DataFrame:
        """Side-by-side S of two reports *of the same policy* (e.g. two steps of a campaign).

        Raises
        ------
        PolicyConditionalError
            When ``other`` is about a different policy.
        """
        if other.policy != self.policy:
            raise PolicyConditionalError(self.policy, other.policy)
        return pd.concat({"this": self.ranking[["S_mean", "S_lo", "S_hi"]],
                          "other": other.ranking[["S_mean", "S_lo", "S_hi"]]}, axis=1)


def compare_sensitivities(first: SensitivityReport, second: SensitivityReport) -> pd.DataFrame:
    """Compare two sensitivity reports; refused across policies
    (:class:`PolicyConditionalError`)."""
    return first.compare(second)


def sensitivity_report(idata: xr.DataTree, policy: str, prob: float = 0.9,
                       convergence: Convergence | None = None, *, rhat_max: float = 1.01,
                       ess_min: float = 400.0) -> SensitivityReport:
    """The report of one policy from a fit of :class:`models.sensitivity.SensitivityModel`.

    Parameters
    ----------
    idata : DataTree
        The sensitivity fit (``posterior`` with ``S``, ``gamma``; ``constant_data`` with the
        standardisation).
    policy : str
        A policy with sensitivity runs in the fit.
    prob : float
        Probability of the equal-tailed intervals (ArviZ ``eti``).
    convergence : Convergence, optional
        The fit's :func:`belief.posterior.diagnostics.check_convergence` on
        ``CHECK_VARS["sensitivity"]``, when already computed (the same for every policy of
        the fit); computed here otherwise, at ``rhat_max`` and ``ess_min``.
    rhat_max, ess_min : float
        The convergence standard (default R-hat ≤ 1.01, bulk and tail ESS ≥ 400, whatever the
        draws: the rule of :class:`belief.posterior.fitter.FitSettings`).

    Returns
    -------
    SensitivityReport
        See the module docstring for P(most influential) and P(synergy).
    """
    if not 0 < prob < 1:
        raise InputError("sensitivity_report", f"prob must be in (0, 1), got {prob}")
    post = idata["posterior"].to_dataset()
    known = [str(p) for p in post["policy"].values]
    if policy not in known:
        raise InputError("sensitivity_report", f"policy {policy!r} has no sensitivity runs in "
                                               f"this fit; fitted policies: {known}")
    const = idata["constant_data"].to_dataset()
    s = _stack(post["S"].sel(policy=policy, drop=True))
    per_unit = _stack(post["S_per_unit"].sel(policy=policy, drop=True))
    directions = [str(d) for d in s["direction"].values]
    influence = abs(s)
    best = influence.argmax("direction").values
    p_most = np.bincount(best, minlength=len(directions)) / best.size
    import arviz_stats as az  # imported here: reading a belief needs none of ArviZ's stats

    eti = az.eti(s, prob=prob, dim="sample")
    ranking = pd.DataFrame({
        "S_mean": s.mean("sample").values, "S_sd": s.std("sample").values,
        "S_lo": eti.sel(ci_bound="lower").values, "S_hi": eti.sel(ci_bound="upper").values,
        "S_per_unit_mean": per_unit.mean("sample").values,
        "influence_mean": influence.mean("sample").values,
        "p_most_influential": p_most}, index=pd.Index(directions, name="direction"))
    ranking = ranking.sort_values(["p_most_influential", "influence_mean"], ascending=False)
    ranking["rank"] = np.arange(1, len(ranking) + 1)
    draws = xr.Dataset({"S": s, "S_per_unit": per_unit})
    synergy = pd.DataFrame(columns=["first", "second", "gamma_mean", "gamma_lo", "gamma_hi",
                                    "p_gamma_positive", "p_gamma_negative", "alone_first_mean",
                                    "alone_second_mean", "joint_mean", "p_synergy"])
    if "gamma" in post and post.sizes.get("pair", 0):
        gamma = _stack(post["gamma"])
        center = const["xi_center"]
        scale = const["xi_scale"]
        lo = (const["xi_low"] - center) / scale
        hi = (const["xi_high"] - center) / scale
        first = [str(v) for v in const["pair_first"].values]
        second = [str(v) for v in const["pair_second"].values]
        pairs = [str(p) for p in gamma["pair"].values]
        sk = s.sel(direction=xr.DataArray(first, dims="pair")).assign_coords(pair=pairs)
        sl = s.sel(direction=xr.DataArray(second, dims="pair")).assign_coords(pair=pairs)
        lo_k = xr.DataArray(lo.sel(direction=first).values, dims="pair", coords={"pair": pairs})
        hi_k = xr.DataArray(hi.sel(direction=first).values, dims="pair", coords={"pair": pairs})
        lo_l = xr.DataArray(lo.sel(direction=second).values, dims="pair",
                            coords={"pair": pairs})
        hi_l = xr.DataArray(hi.sel(direction=second).values, dims="pair",
                            coords={"pair": pairs})
        alone_k = (sk + gamma * lo_l) * (hi_k - lo_k)
        alone_l = (sl + gamma * lo_k) * (hi_l - lo_l)
        joint = alone_k + alone_l + gamma * (hi_k - lo_k) * (hi_l - lo_l)
        syn = abs(joint) > abs(alone_k) + abs(alone_l)
        g_eti = az.eti(gamma, prob=prob, dim="sample")
        synergy = pd.DataFrame({
            "first": first, "second": second,
            "gamma_mean": gamma.mean("sample").values,
            "gamma_lo": g_eti.sel(ci_bound="lower").values,
            "gamma_hi": g_eti.sel(ci_bound="upper").values,
            "p_gamma_positive": (gamma > 0).mean("sample").values,
            "p_gamma_negative": (gamma < 0).mean("sample").values,
            "alone_first_mean": alone_k.mean("sample").values,
            "alone_second_mean": alone_l.mean("sample").values,
            "joint_mean": joint.mean("sample").values,
            "p_synergy": syn.mean("sample").values}, index=pd.Index(pairs, name="pair"))
        draws = draws.assign(gamma=gamma, alone_first=alone_k, alone_second=alone_l,
                             joint=joint, synergy=syn.astype(int))
    draws.attrs.update({"policy": policy, "standardisation": idata.attrs["standardisation"],
                        "link": idata.attrs["link"]})
    conv = convergence or check_convergence(idata, CHECK_VARS["sensitivity"],
                                            rhat_max=rhat_max, ess_min=ess_min)
    return SensitivityReport(policy, draws, ranking, synergy, idata.attrs["standardisation"],
                             idata.attrs["link"], prob, conv.reliable, conv.reason)


def sensitivity_reports(idata: xr.DataTree, prob: float = 0.9, *, rhat_max: float = 1.01,
                        ess_min: float = 400.0) -> dict[str, SensitivityReport]:
    """One :class:`SensitivityReport` per fitted policy, indexed by policy (never pooled); the
    convergence check (R-hat ≤ ``rhat_max``, bulk and tail ESS ≥ ``ess_min``, no divergences),
    the same for every policy of the fit, is computed once."""
    post = idata["posterior"]
    conv = check_convergence(idata, CHECK_VARS["sensitivity"], rhat_max=rhat_max,
                             ess_min=ess_min)
    return {str(p): sensitivity_report(idata, str(p), prob, conv)
            for p in post["policy"].values}


@dataclass(frozen=True)
class Prioritisation:
    """Which candidates are worth scoring for one policy, and why.

    Attributes
    ----------
    policy : str
    directions : list of str
        The top directions (credible set of the most influential one, plus synergy partners).
    table : DataFrame
        Per candidate: ``targets``, ``top_targets``, ``best_rank`` (of its targeted swept
        directions), ``p_most_influential`` (max over its targets), ``worth_scoring`` and
        ``reason``.
    """

    policy: str
    directions: list[str]
    table: pd.DataFrame

    @property
    def worth_scoring(self) -> list[str]:
        """Candidate ids worth scoring (in candidate order)."""
        return list(self.table.index[self.table["worth_scoring"]])


def prioritise(report: SensitivityReport, candidates: CandidateSet, *, coverage: float = 0.9,
               synergy_threshold: float = 0.9) -> Prioritisation:
    """Map the top mismatch directions of one policy to the candidates that target them.

    Top directions: the smallest set of directions, taken in ranking order, whose
    P(most influential) adds up to at least ``coverage`` (a credible set for the most
    influential direction), plus every direction with P(synergy) ≥ ``synergy_threshold``
    with a direction already in the set (attribution is not additive).  A candidate is worth
    scoring when its ``targets`` include a top direction; a candidate that declares no target,
    or targets only directions the sweep did not perturb, cannot be screened and is kept; a
    candidate whose targets were all swept and none is a top direction is set aside.

    This is candidate generation: the result says which candidates to score, it is never a
    value input of the score itself.
    """
    if not 0 < coverage <= 1:
        raise InputError("prioritise", f"coverage must be in (0, 1], got {coverage}")
    if not 0 <= synergy_threshold <= 1:
        raise InputError("prioritise", f"synergy_threshold must be in [0, 1], got "
                                       f"{synergy_threshold}")
    ranking = report.ranking
    top: list[str] = []
    why: dict[str, str] = {}
    total = 0.0
    for k, row in ranking.iterrows():
        if total >= coverage - 1e-12:
            break
        top.append(str(k))
        why[str(k)] = (f"rank {int(row['rank'])}, P(most influential) "
                       f"{row['p_most_influential']:.2f}")
        total += float(row["p_most_influential"])
    for pair, row in report.synergy.iterrows():
        if row["p_synergy"] < synergy_threshold:
            continue
        for a, b in ((row["first"], row["second"]), (row["second"], row["first"])):
            if a in top and b not in top:
                top.append(b)
                why[b] = f"synergy with {a} ({pair}: P(synergy) {row['p_synergy']:.2f})"
    swept = set(ranking.index)
    rows = []
    for c in candidates:
        targets = list(c.targets)
        hit = [t for t in targets if t in top]
        in_sweep = [t for t in targets if t in swept]
        best = min((int(ranking.loc[t, "rank"]) for t in in_sweep), default=np.nan)
        p_max = max((float(ranking.loc[t, "p_most_influential"]) for t in in_sweep),
                    default=np.nan)
        if hit:
            keep, reason = True, "targets " + "; ".join(f"{t} ({why[t]})" for t in hit)
        elif not targets:
            keep, reason = True, "declares no target direction: not screened by sensitivity"
        elif not in_sweep:
            keep, reason = True, (f"targets {targets}, not perturbed in the sweep: "
                                  "sensitivity cannot screen it")
        else:
            keep, reason = False, (f"targets {in_sweep}: swept but not among the top "
                                   f"directions {top} of {report.policy}")
        rows.append({"candidate": c.id, "role": c.role, "targets": ", ".join(targets),
                     "top_targets": ", ".join(hit), "best_rank": best,
                     "p_most_influential": p_max, "worth_scoring": keep, "reason": reason})
    table = pd.DataFrame(rows).set_index("candidate")
    return Prioritisation(report.policy, top, table)
