"""Coverage of decisions on synthetic worlds: gain intervals and the safety gate.

Simulation-based calibration of the models themselves is :mod:`models.sbc`; this module checks
what the allocator consumes, against the truth of :class:`belief.campaign.synthetic.SyntheticWorld`
worlds (``SyntheticWorld.varied(v)``, whose gains, interactions and risks are *not* drawn from the
models' priors, so these are checks under realistic mis-specification).

Gains: two quantities, each against its own truth
--------------------------------------------------
At a checkpoint of a scripted campaign (evidence fitted with
:class:`belief.posterior.fitter.BeliefFitter`
at the world's current policy π), for every adaptation m still in the candidate set (repeatable,
or not executed yet):

- **mean gain** μ(m | θ) = E_z[logistic(η_π + θ_m ρ^{k_m} + τ_exec z)] − logistic(η_π),
  z ~ N(0, 1) integrated out (Gauss–Hermite, 40 nodes), one value per posterior draw of
  (η_π, θ_m, ρ, τ_exec).  Its equal-tailed 90 % posterior interval is compared with the world's
  ``expected_gain(m)`` = E[ΔJ] of executing m now, averaged over the world's run-to-run noise
  (the same average, with the world's true logit, gain, interactions and decay).
- **predictive gain** ``belief["gain"]`` = ΔJ_next(m | π), one draw of the run-to-run noise per
  posterior draw (what the decision functionals use).  Its 90 % interval is compared with the
  *realised* gain of one execution of m from the current state, logistic(η'_π) − logistic(η_π)
  with the world's own noise (``world.execute`` on a copy of the world).

The posterior mean of the predictive gain is μ_ΔJ,t(m) (DESIGN.md); the interval of μ(m | θ)
is the uncertainty about that mean.

Safety gate
-----------
For every hardware candidate m, the one-sided (1 − δ) bound UCB of P_exec(unsafe | m) covers the
world's true p_unsafe(m) when p_unsafe(m) ≤ UCB.  Two bounds: Clopper–Pearson from the counts
(frequentist guarantee: coverage ≥ 1 − δ for every p) and the (1 − δ)-quantile of the
hierarchical execution-risk posterior (no frequentist guarantee; pooled across the candidates
of one hardware group).

Coverage rates are reported with exact two-sided Clopper–Pearson intervals
(:func:`binomial_interval`).  Rows of one world share its evidence and truth, so they are not
independent; the interval treats them as if they were (stated wherever it is printed), and
:func:`coverage_table` also gives a per-world breakdown so clustering can be seen.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from scipy.special import expit

from belief.campaign.synthetic import SyntheticWorld
from belief.decision.safety import SafetyGate, clopper_pearson_upper
from belief.errors import InputError
from belief.inputs.evidence import Evidence
from belief.posterior.fitter import BeliefFitter

__all__ = [
    "CoverageRun",
    "binomial_interval",
    "coverage_table",
    "cp_bench_coverage",
    "cp_exact_coverage",
    "mean_gain_draws",
    "run_world_coverage",
]

DEFAULT_SEQUENCE = ("dr_1e6", "si_friction", "ft_real_100", "dr_1e7", "cotrain", "dr_1e6")
"""Scripted executions of a coverage campaign (every hardware adaptation, one repeat)."""


def mean_gain_draws(belief: xr.Dataset, nodes: int = 40) -> xr.DataArray:
    """θ-level mean gain μ(m | θ) per posterior draw, (``sample``, ``candidate``).

    μ(m | θ) = E_z[logistic(η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z)] − logistic(η),
    z ~ N(0, 1), by Gauss–Hermite (probabilists') quadrature with ``nodes`` nodes, from the
    gains model's joint draws kept in q_t (``gains_eta``, ``gains_theta``, ``gains_rho``,
    ``gains_tau``, ``gains_repeats`` and, with order effects, ``gains_offset``).  Candidates
    without a gain get 0.
    """
    needed = ("gains_eta", "gains_theta", "gains_rho", "gains_tau", "gains_repeats")
    missing = [v for v in needed if v not in belief]
    if missing:
        raise InputError("belief", f"needs the gains model's joint draws; missing {missing}")
    eta = belief["gains_eta"].values[:, None]
    theta = belief["gains_theta"].transpose("sample", "candidate").values
    rho = belief["gains_rho"].values[:, None]
    tau = belief["gains_tau"].values[:, None]
    k = belief["gains_repeats"].values[None, :]
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    loc = eta + theta * rho**k
    if "gains_offset" in belief:
        loc = loc + belief["gains_offset"].transpose("sample", "candidate").values
    mean = (expit(loc[..., None] + tau[..., None] * x) * w).sum(-1) - expit(eta)
    return xr.DataArray(mean, dims=("sample", "candidate"),
                        coords={"candidate": belief["candidate"].values}, name="mean_gain")


def binomial_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided Clopper–Pearson interval of a proportion ``hits / n`` at ``level``."""
    if n <= 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(hits), int(n)).proportion_ci(confidence_level=level,
                                                          method="exact")
    return float(ci.low), float(ci.high)


@dataclass
class CoverageRun:
    """Rows of a world-coverage run.

    Attributes
    ----------
    gains : DataFrame
        One row per (world, checkpoint, scored adaptation): ``mean_lo``, ``mean_hi``,
        ``expected_gain`` (truth), ``covered_mean``, ``pit_mean`` (the share of the mean-gain
        draws ≤ the truth: uniform over worlds when the posterior is calibrated, piled up near
        0.5 when it is too wide, near 0 and 1 when too narrow); ``pred_lo``, ``pred_hi``,
        ``realised_gain`` (truth), ``covered_pred``; ``reliable`` (the fit's convergence flag);
        ``executed_before`` (how often the world had executed m: 0 means its interval rests on
        the priors and on pooling only).
    gate : DataFrame
        One row per (world, checkpoint, hardware candidate): ``executions``, ``unsafe``,
        ``p_true``, ``ucb_cp``, ``ucb_posterior``, ``covered_cp``, ``covered_posterior``.
    level, delta : float
        Central interval probability of the gains; one-sided δ of the gate.
    seconds : float
    """

    gains: pd.DataFrame
    gate: pd.DataFrame
    level: float
    delta: float
    seconds: float


def run_world_coverage(fitter: BeliefFitter, variations: Sequence[int], *,
                       sequence: Sequence[str] = DEFAULT_SEQUENCE,
                       checkpoints: Sequence[int] = (2, 5), level: float = 0.90,
                       delta: float = 0.05, seed: int = 0) -> CoverageRun:
    """Scripted campaigns on ``SyntheticWorld.varied(v, seed=v)``: intervals vs the truth.

    Each world starts from its initial evidence (baseline evaluation of π_0 and bench safety
    runs) and executes ``sequence`` in order; after ``c`` executions for every ``c`` in
    ``checkpoints`` the evidence is fitted (``fitter.fit``, seed derived from
    ``(seed, v, c)``) and every adaptation's intervals and every hardware candidate's bounds
    are compared with the world's truth (module docstring).

    Parameters
    ----------
    fitter : BeliefFitter
        Fitted on the world's candidates (all ``varied`` worlds share the candidate ids).
    variations : sequence of int
    sequence : sequence of str
        Candidate ids executed in order.
    checkpoints : sequence of int
        Numbers of executions after which to fit (0 = initial evidence only).
    level : float
        Probability of the central gain intervals (default 0.90).
    delta : float
        The gate's one-sided level is 1 − δ.
    """
    import time

    if not 0 < level < 1:
        raise InputError("coverage", f"level must be in (0, 1), got {level!r}")
    if any(c < 0 or c > len(sequence) for c in checkpoints):
        raise InputError("coverage", f"checkpoints must lie in 0..{len(sequence)}")
    gate = SafetyGate(delta=delta)
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    gain_rows, gate_rows = [], []
    t0 = time.perf_counter()
    for v in variations:
        world = SyntheticWorld.varied(int(v), seed=int(v))
        cands = world.candidates
        unknown = [m for m in sequence if m not in cands.ids]
        if unknown:
            raise InputError("coverage", f"unknown candidates in sequence: {unknown}")
        p_true = {t.candidate.id: t.p_unsafe for t in world.truth}
        init = world.initial_evidence()
        ev = Evidence(cands).append(policy_evals=init["policy_evaluations"],
                                    safety=init["safety_events"])
        done = 0
        for c in sorted(set(checkpoints)):
            while done < c:
                out = world.execute(sequence[done], done)
                ev = ev.append(paired=out.paired, safety=out.safety,
                               gain_estimates=out.gain_estimates)
                done += 1
            fit_seed = int(np.random.default_rng([seed, int(v), c]).integers(2**31))
            _, belief = fitter.fit(ev, world.policy, step=c, seed=fit_seed)
            reliable = int(belief.attrs.get("reliable", 1))
            mean = mean_gain_draws(belief)
            pred = belief["gain"]
            # a non-repeatable adaptation that already ran has left the candidate set: the
            # world has no "next execution" of it to compare with
            scored = [x.id for x in cands if x.changes_policy
                      and (x.repeatable or x.id not in world.history)]
            for m in scored:
                mq = mean.sel(candidate=m).quantile([lo_q, hi_q], dim="sample").values
                pq = pred.sel(candidate=m).quantile([lo_q, hi_q], dim="sample").values
                truth = world.expected_gain(m)
                realised = copy.deepcopy(world).execute(m, c).true_gain
                gain_rows.append({
                    "world": int(v), "checkpoint": c, "candidate": m, "reliable": reliable,
                    "executed_before": world.history.count(m),
                    "mean_lo": mq[0], "mean_hi": mq[1], "expected_gain": truth,
                    "covered_mean": bool(mq[0] <= truth <= mq[1]),
                    "pit_mean": float((mean.sel(candidate=m).values <= truth).mean()),
                    "pred_lo": pq[0], "pred_hi": pq[1], "realised_gain": realised,
                    "covered_pred": bool(pq[0] <= realised <= pq[1])})
            bounds = gate.evaluate(cands, belief["executions"], belief["unsafe"],
                                   belief.get("p_unsafe"))
            for x in cands:
                if not x.drives_hardware:
                    continue
                b = bounds.sel(candidate=x.id)
                p = p_true[x.id]
                gate_rows.append({
                    "world": int(v), "checkpoint": c, "candidate": x.id,
                    "executions": int(belief["executions"].sel(candidate=x.id)),
                    "unsafe": int(belief["unsafe"].sel(candidate=x.id)), "p_true": p,
                    "ucb_cp": float(b["ucb_clopper_pearson"]),
                    "ucb_posterior": float(b["ucb_posterior"]),
                    "covered_cp": bool(p <= float(b["ucb_clopper_pearson"])),
                    "covered_posterior": bool(p <= float(b["ucb_posterior"]))})
    return CoverageRun(pd.DataFrame(gain_rows), pd.DataFrame(gate_rows), level, delta,
                       time.perf_counter() - t0)


def cp_bench_coverage(variations: Sequence[int], replications: int,
                      delta: float = 0.05) -> pd.DataFrame:
    """Clopper–Pearson coverage over simulated bench runs of varied worlds (no fitting).

    For every world ``SyntheticWorld.varied(v, seed=r)``, r = 0..``replications``−1, the bench
    safety runs (``initial_safety``) give (n_m, k_m) per hardware candidate; the row records
    whether p_unsafe(m) ≤ UCB_{1−δ}(k_m, n_m).

    Returns
    -------
    DataFrame
        ``world``, ``replication``, ``candidate``, ``executions``, ``unsafe``, ``p_true``,
        ``ucb_cp``, ``covered_cp``.
    """
    rows = []
    for v in variations:
        for r in range(replications):
            world = SyntheticWorld.varied(int(v), seed=r)
            p_true = {t.candidate.id: t.p_unsafe for t in world.truth}
            bench = world.initial_safety()
            ucb = clopper_pearson_upper(bench["unsafe"].to_numpy(),
                                        bench["executions"].to_numpy(), delta)
            for (_, row), u in zip(bench.iterrows(), ucb, strict=True):
                p = p_true[row["candidate"]]
                rows.append({"world": int(v), "replication": r, "candidate": row["candidate"],
                             "executions": int(row["executions"]),
                             "unsafe": int(row["unsafe"]), "p_true": p, "ucb_cp": float(u),
                             "covered_cp": bool(p <= u)})
    return pd.DataFrame(rows)


def cp_exact_coverage(p: float, n: int, delta: float = 0.05) -> float:
    """Exact coverage P_p(p ≤ UCB_{1−δ}(K, n)) = Σ_k Bin(k; n, p) · 1[p ≤ UCB(k, n)].

    ≥ 1 − δ for every p (the Clopper–Pearson guarantee).
    """
    k = np.arange(n + 1)
    ucb = clopper_pearson_upper(k, np.full_like(k, n), delta)
    return float(stats.binom.pmf(k, n, p)[p <= ucb].sum())


def coverage_table(frame: pd.DataFrame, column: str, by: str | None = None,
                   level: float = 0.95) -> pd.DataFrame:
    """Coverage ``hits / n`` of boolean ``column`` with its Clopper–Pearson ``level`` interval.

    Overall, or per value of ``by`` (e.g. ``"candidate"``, ``"checkpoint"``).
    """
    groups = [("all", frame)] if by is None else list(frame.groupby(by))
    rows = []
    for key, g in groups:
        hits, n = int(g[column].sum()), len(g)
        lo, hi = binomial_interval(hits, n, level)
        rows.append({"group": key, "hits": hits, "n": n,
                     "coverage": hits / n if n else float("nan"), "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)
