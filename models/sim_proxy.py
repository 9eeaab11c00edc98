"""Simulated paired evaluations as a learned, correlated proxy of the real gain.

A candidate m (policy-changing, lens l(m)) has a *real* logit gain θ_m and a *sim* logit gain
θ^sim_m: the change of the success logit its intervention makes under the campaign's shared
evaluation protocol E_shared, on the robot and in simulation.  The simulator is worth what its
gains tell us about the real ones, and that is learned from the candidates evaluated in both::

    θ^sim_m = a_l + b_l · θ_m + ε_m,      ε_m ~ Normal(0, σ_l²),      l = l(m)

Real gains (pooled lens → method → candidate, as in :mod:`models.gains`)::

    θ_m         = β_method[m] + τ_candidate · z_m
    β_method[j] = β_lens[j]   + τ_method    · z_j
    β_lens[l]   = μ_0         + τ_lens      · z_l,     μ_0 ~ Normal(effect_mu_mu, effect_mu_sigma)

Calibration (a_l, b_l, σ_l), partially pooled across lenses::

    a_l     = a_0 + τ_a · u_l,             a_0 ~ Normal(0, a_sigma),   τ_a ~ HalfNormal(tau_a)
    b_l     = b_0 + τ_b · v_l,             b_0 ~ Normal(b_mu, b_sigma), τ_b ~ HalfNormal(tau_b)
    log σ_l = s_0 + τ_s · w_l,             s_0 ~ Normal(log_sigma_mu, log_sigma_sigma),
                                           τ_s ~ HalfNormal(tau_log_sigma)
    u_l, v_l, w_l ~ Normal(0, 1)

or, with ``calibration`` given, (a_l, b_l, σ_l) fixed numbers per lens (known calibration).

Observations (paired evaluations under E_shared; real and sim each with a control baseline
per policy, η_π and η^sim_π ~ Normal(baseline_mu, baseline_sigma), independent)::

    real control successes_π   ~ Binomial(n, logistic(η_π))
    real treated successes_π,m ~ Binomial(n, logistic(η_π + θ_m))
    sim  control successes_π   ~ Binomial(n, logistic(η^sim_π))
    sim  treated successes_π,m ~ Binomial(n, logistic(η^sim_π + θ^sim_m))
    real estimate_m ~ Normal(θ_m, se²),  sim estimate_m ~ Normal(θ^sim_m, se²)   (summary level)

Counts of one arm are summed over the rows of a (policy, candidate) pair (the control arm over
every row of the policy): a sum of independent binomials with one success probability is
binomial.  Several summary estimates of one candidate are combined by inverse-variance
weighting (exact for a normal likelihood with known se).

What the sim data can say about θ_m.  Given the calibration, a candidate's sim gain measured
with variance v tells θ_m what a real measurement of θ_m with mean (θ̂^sim − a_l)/b_l and
variance (σ_l² + v)/b_l² would: nothing when b_l = 0, little when σ_l is large, and never more
than the precision b_l²/σ_l² however many sim trials are run.  The priors assume nothing
about the simulator: b_0 is centred at 0 (``b_mu`` = 0) with both signs possible, a_0 at 0, and
σ_l's prior allows residuals as large as the gains themselves (log σ ~ Normal(log 0.5, 1)), so
with no candidate evaluated in both domains the sim data hardly move θ, and a simulator whose
gains do not track the real ones is learned to have b_l ≈ 0 or a large σ_l.

Assumptions (stated, not checked): the run-to-run variation of a realised gain and the
diminishing returns and order effects of :mod:`models.gains` are left out (one gain per
candidate, the same at every policy); the calibration is linear on the logit scale and the same
for every candidate of a lens; sim and real evaluations of one candidate are conditionally
independent given (θ_m, θ^sim_m); the sim and real baselines of a policy are independent a
priori (their relation is the transfer delta, :mod:`models.transfer`, not modelled here).

Geometry (what the sampler sees; the model is unchanged): θ is sampled by
:func:`models.pooling.pooled_tree` (merged single-member levels, data-informed non-centring)
with the normal approximation of its real likelihood plus what the sim data say through the
current calibration (precision b²/(σ² + v), an exact change of variables given a, b, σ);
θ^sim by :func:`models.priors.whitened_normal` given θ and the calibration; the lens
calibrations non-centred.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from models.likelihoods import binomial_logit_logp, log_binomial_coefficient
from models.pooling import PoolingStructure, pooled_tree
from models.priors import ScalePrior, check_priors, priors_as_dict, whitened_normal
from models.sampling import sample

__all__ = ["SimProxyEncoding", "SimProxyModel", "SimProxyPriors", "belief_draws",
           "encode_sim_proxy", "fit_inputs", "gain_approximation", "make_model", "sim_share",
           "synthetic_paired"]

TARGET_ACCEPT = 0.99
"""Default NUTS target acceptance.  The residual scale σ_l makes a funnel with the calibrated
gains when sim data are precise: at 0.9, 6 of 6 fits of the two learned-calibration test worlds
(tests/test_sim_proxy.py) had 1–6 divergent transitions; at 0.95, 15 of 36 benchmark fits with
sim data (``bench_sim_proxy.py --seeds 3``) still had 1–5; at 0.99, 6 of 6 of those (the ones
with the most) had none, at ≈ 1.6× the sampling time."""
_COMPILED: dict[tuple, Any] = {}
_DOMAINS = ("real", "sim")


@dataclass(frozen=True)
class SimProxyPriors:
    """Priors of the sim-proxy model (logit scale; the model in the module docstring).

    Attributes
    ----------
    baseline_mu, baseline_sigma : float
        Normal prior of a policy's real and sim control logit.
    effect_mu_mu, effect_mu_sigma : float
        Normal prior of the global mean real logit gain μ_0.
    tau_lens, tau_method, tau_candidate : ScalePrior
        Pooling scales of the real gains (a number v means HalfStudentT(ν = 3, σ = v)).
    a_sigma : float
        a_0 ~ Normal(0, a_sigma): the sim gain's offset.
    b_mu, b_sigma : float
        b_0 ~ Normal(b_mu, b_sigma): the slope of sim gain on real gain (centred at 0 by
        default: no assumption that the simulator predicts reality).
    log_sigma_mu, log_sigma_sigma : float
        s_0 ~ Normal(log_sigma_mu, log_sigma_sigma): log of the residual s.d. σ_l.
    tau_a, tau_b, tau_log_sigma : ScalePrior
        Spread of a_l, b_l and log σ_l across lenses (a number v means HalfNormal(v)).
    """

    baseline_mu: float = 0.0
    baseline_sigma: float = 1.5
    effect_mu_mu: float = 0.2
    effect_mu_sigma: float = 0.4
    tau_lens: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    tau_method: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    tau_candidate: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_student_t", sigma=0.5, nu=3.0))
    a_sigma: float = 1.0
    b_mu: float = 0.0
    b_sigma: float = 1.0
    log_sigma_mu: float = float(np.log(0.5))
    log_sigma_sigma: float = 1.0
    tau_a: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.5))
    tau_b: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.5))
    tau_log_sigma: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.5))

    SCALES: ClassVar[dict[str, str]] = {
        "tau_lens": "half_student_t", "tau_method": "half_student_t",
        "tau_candidate": "half_student_t", "tau_a": "half_normal", "tau_b": "half_normal",
        "tau_log_sigma": "half_normal"}

    def __post_init__(self) -> None:
        check_priors(self, locations=("baseline_mu", "effect_mu_mu", "b_mu", "log_sigma_mu"),
                     scales=self.SCALES)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)


@dataclass(frozen=True)
class SimProxyEncoding:
    """Counts per policy slot (and candidate) and combined summary estimates, per domain.

    ``arrays`` holds, for d in (real, sim): ``{d}_ctrl_k``, ``{d}_ctrl_n`` (P,),
    ``{d}_trt_k``, ``{d}_trt_n`` (P, M), ``{d}_est``, ``{d}_est_se``, ``{d}_has_est`` (M,).
    """

    policies: list[str]
    arrays: dict[str, np.ndarray]


def _pair_counts(df: pd.DataFrame | None, slot: Mapping[str, int], gain_ids: list[str],
                 p: int, table: str) -> dict[str, np.ndarray]:
    m = len(gain_ids)
    out = {"ctrl_k": np.zeros(p, np.int64), "ctrl_n": np.zeros(p, np.int64),
           "trt_k": np.zeros((p, m), np.int64), "trt_n": np.zeros((p, m), np.int64)}
    if df is None:
        return out
    for i, row in enumerate(df.itertuples(index=False)):
        if row.candidate not in gain_ids:
            raise InputError(table, f"candidate {row.candidate!r} has no gain in this model; "
                                    f"known: {gain_ids}", row=i)
        s, c = slot[row.policy], gain_ids.index(row.candidate)
        out["ctrl_k"][s] += row.control_successes
        out["ctrl_n"][s] += row.control_trials
        out["trt_k"][s, c] += row.treated_successes
        out["trt_n"][s, c] += row.treated_trials
    return out


def _estimates(df: pd.DataFrame | None, gain_ids: list[str], table: str
               ) -> dict[str, np.ndarray]:
    m = len(gain_ids)
    prec, wsum = np.zeros(m), np.zeros(m)
    if df is not None:
        for i, row in enumerate(df.itertuples(index=False)):
            if row.candidate not in gain_ids:
                raise InputError(table, f"candidate {row.candidate!r} has no gain in this "
                                        f"model; known: {gain_ids}", row=i)
            if not (np.isfinite(row.estimate) and np.isfinite(row.se) and row.se > 0):
                raise InputError(table, "estimate must be finite and se > 0", row=i)
            c = gain_ids.index(row.candidate)
            prec[c] += row.se**-2
            wsum[c] += row.estimate * row.se**-2
    has = prec > 0
    return {"est": np.where(has, wsum / np.where(has, prec, 1.0), 0.0),
            "est_se": np.where(has, 1.0 / np.sqrt(np.where(has, prec, 1.0)), 1.0),
            "has_est": has.astype(float)}


def encode_sim_proxy(gain_ids: list[str], max_policies: int,
                     real_paired: pd.DataFrame | None = None,
                     sim_paired: pd.DataFrame | None = None,
                     real_estimates: pd.DataFrame | None = None,
                     sim_estimates: pd.DataFrame | None = None) -> SimProxyEncoding:
    """Sum the paired counts per policy slot and arm, combine the summary estimates.

    Parameters
    ----------
    gain_ids : list of str
        The candidates with a gain, in model order.
    max_policies : int
        Policy slots (the real and sim control baselines of one policy share its slot).
    real_paired, sim_paired : DataFrame, optional
        Validated ``paired_evaluations`` / ``sim_paired_evaluations`` tables
        (:mod:`belief.inputs.tables`).
    real_estimates, sim_estimates : DataFrame, optional
        Summary-level logit-gain measurements with columns ``candidate, estimate, se``.
    """
    names: list[str] = []
    for df in (real_paired, sim_paired):
        if df is not None:
            names.extend(df["policy"])
    names = list(dict.fromkeys(names))
    if len(names) > max_policies:
        raise InputError("sim_paired_evaluations", f"{len(names)} policies exceed "
                                                   f"max_policies={max_policies}")
    slot = {p: i for i, p in enumerate(names)}
    arrays: dict[str, np.ndarray] = {}
    tables = {"real": ("paired_evaluations", real_paired, real_estimates),
              "sim": ("sim_paired_evaluations", sim_paired, sim_estimates)}
    for dom, (table, paired, est) in tables.items():
        for k, v in _pair_counts(paired, slot, gain_ids, max_policies, table).items():
            arrays[f"{dom}_{k}"] = v
        for k, v in _estimates(est, gain_ids, f"{dom} gain estimates").items():
            arrays[f"{dom}_{k}"] = v
    return SimProxyEncoding(names, arrays)


def gain_approximation(arrays: Mapping[str, np.ndarray], dom: str) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """(P, P·x̂) per candidate: a normal approximation of one domain's likelihood of its gain.

    Each (policy, candidate) pair with trials in both arms gives x̂ = logit p̂_t − logit p̂_c,
    p̂ = (k + ½)/(n + 1), with variance Σ_arms 1/((n + 1) p̂ (1 − p̂)); a summary estimate gives
    (estimate, se²).  Precisions add.  Geometry only (the sampler's change of variables).
    """
    def arm(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ph = (k + 0.5) / (n + 1.0)
        return np.log(ph) - np.log1p(-ph), 1.0 / ((n + 1.0) * ph * (1.0 - ph))

    xc, vc = arm(arrays[f"{dom}_ctrl_k"][:, None], arrays[f"{dom}_ctrl_n"][:, None])
    xt, vt = arm(arrays[f"{dom}_trt_k"], arrays[f"{dom}_trt_n"])
    both = (arrays[f"{dom}_ctrl_n"][:, None] > 0) & (arrays[f"{dom}_trt_n"] > 0)
    w = np.where(both, 1.0 / (vc + vt), 0.0)
    has = arrays[f"{dom}_has_est"]
    prec = w.sum(axis=0) + has / arrays[f"{dom}_est_se"] ** 2
    prec_x = (w * (xt - xc)).sum(axis=0) + has * arrays[f"{dom}_est"] / arrays[
        f"{dom}_est_se"] ** 2
    return prec, prec_x


@dataclass
class SimProxyModel:
    """Spec of the sim-proxy gains model for one candidate set (module docstring).

    Parameters
    ----------
    candidates : CandidateSet
        The policy-changing candidates carry a gain.
    priors : SimProxyPriors
    max_policies : int
        Policy slots compiled into the model.
    calibration : mapping lens → (a, b, σ), optional
        Known calibration: the lenses' (a_l, b_l, σ_l) are these numbers instead of being
        learned (every lens of a gain candidate must be given).

    Examples
    --------
    >>> model = SimProxyModel(candidates)                                  # doctest: +SKIP
    >>> idata = model.fit(real_paired=evidence.paired, sim_paired=sim)     # doctest: +SKIP
    >>> idata["posterior"]["theta"]                                        # doctest: +SKIP
    """

    candidates: CandidateSet
    priors: SimProxyPriors = field(default_factory=SimProxyPriors)
    max_policies: int = 8
    calibration: Mapping[str, tuple[float, float, float]] | None = None
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        cands = [c for c in self.candidates if c.changes_policy]
        if not cands:
            raise InputError(self.candidates.source, "the sim-proxy model needs at least one "
                                                     "policy-changing candidate")
        self.gain_ids = [c.id for c in cands]
        self.lenses = list(dict.fromkeys(c.lens for c in cands))
        self.lens_of = np.array([self.lenses.index(c.lens) for c in cands], dtype=np.int64)
        self.lens_onehot = (self.lens_of[:, None] == np.arange(len(self.lenses))[None, :]
                            ).astype(float)
        self.structure = PoolingStructure.from_labels(
            {"lens": [c.lens for c in cands], "method": [f"{c.lens}/{c.method}" for c in cands],
             "candidate": list(self.gain_ids)})
        if self.max_policies < 1:
            raise InputError("SimProxyModel", f"max_policies must be >= 1, got "
                                              f"{self.max_policies}")
        if self.calibration is not None:
            missing = [lv for lv in self.lenses if lv not in self.calibration]
            if missing:
                raise InputError("SimProxyModel", f"calibration misses lens(es) {missing}")
            for lv in self.lenses:
                a, b, s = (float(x) for x in self.calibration[lv])
                if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(s) and s > 0):
                    raise InputError("SimProxyModel", f"calibration of lens {lv!r} must be "
                                                      f"finite with σ > 0, got {(a, b, s)}")

    # -- build ------------------------------------------------------------------------------
    def _empty(self) -> SimProxyEncoding:
        return encode_sim_proxy(self.gain_ids, self.max_policies)

    def data(self, enc: SimProxyEncoding) -> dict[str, np.ndarray]:
        """Every data container: the counts, log C(n, k), the summary estimates and the
        normal approximations of each domain's likelihood of the gains."""
        out = dict(enc.arrays)
        for dom in _DOMAINS:
            for arm in ("ctrl", "trt"):
                out[f"{dom}_{arm}_logc"] = log_binomial_coefficient(
                    enc.arrays[f"{dom}_{arm}_n"], enc.arrays[f"{dom}_{arm}_k"])
            out[f"{dom}_prec"], out[f"{dom}_prec_x"] = gain_approximation(enc.arrays, dom)
        return out

    def _calibration(self):
        """(a, b, σ) over lenses (tensors), learned or the fixed numbers."""
        import pymc as pm
        import pytensor.tensor as pt

        if self.calibration is not None:
            fixed = np.array([[float(x) for x in self.calibration[lv]] for lv in self.lenses])
            return (pt.as_tensor(fixed[:, 0]), pt.as_tensor(fixed[:, 1]),
                    pt.as_tensor(fixed[:, 2]))
        pr = self.priors
        a0 = pm.Normal("a0", 0.0, pr.a_sigma)
        b0 = pm.Normal("b0", pr.b_mu, pr.b_sigma)
        s0 = pm.Normal("log_sigma0", pr.log_sigma_mu, pr.log_sigma_sigma)
        tau_a, tau_b, tau_s = (pr.tau_a.rv("tau_a"), pr.tau_b.rv("tau_b"),
                               pr.tau_log_sigma.rv("tau_log_sigma"))
        a = pm.Deterministic("a", a0 + tau_a * pm.Normal("z_a", 0.0, 1.0, dims="lens"),
                             dims="lens")
        b = pm.Deterministic("b", b0 + tau_b * pm.Normal("z_b", 0.0, 1.0, dims="lens"),
                             dims="lens")
        sigma = pm.Deterministic(
            "sigma", pt.exp(s0 + tau_s * pm.Normal("z_log_sigma", 0.0, 1.0, dims="lens")),
            dims="lens")
        return a, b, sigma

    def build(self, enc: SimProxyEncoding | None = None):
        """The sampled ``pm.Model`` with ``pm.Data`` containers (module docstring)."""
        import pymc as pm
        import pytensor.tensor as pt

        enc = enc or self._empty()
        pr = self.priors
        coords = {"candidate": self.gain_ids, "lens": self.lenses,
                  "policy_slot": list(range(self.max_policies))}
        with pm.Model(coords=coords) as model:
            d = {}
            for name, value in self.data(enc).items():
                dims = ("policy_slot", "candidate") if value.ndim == 2 else (
                    "policy_slot" if "ctrl" in name else "candidate")
                d[name] = pm.Data(name, value, dims=dims)
            a, b, sigma = self._calibration()
            lens = self.lens_onehot
            a_m, b_m, s_m = (pt.dot(lens, x) for x in (a, b, sigma))
            # what the sim data say about θ through the current calibration (geometry only)
            v_sim = 1.0 / pt.maximum(d["sim_prec"], 1e-12)
            has_sim = pt.gt(d["sim_prec"], 0.0)
            x_sim = d["sim_prec_x"] * v_sim
            q = pt.switch(has_sim, b_m**2 / (s_m**2 + v_sim), 0.0)
            qx = pt.switch(has_sim, b_m * (x_sim - a_m) / (s_m**2 + v_sim), 0.0)
            tau = {lv: getattr(pr, f"tau_{lv}").rv(f"tau_{lv}")
                   for lv in self.structure.used_levels}
            tree = pooled_tree(self.structure, tau, d["real_prec"] + q, d["real_prec_x"] + qx,
                               mu0_mu=pr.effect_mu_mu, mu0_sigma=pr.effect_mu_sigma,
                               member_name="theta", member_dims="candidate")
            theta = pm.Deterministic("theta", tree["member"], dims="candidate")
            theta_sim = pm.Deterministic("theta_sim", whitened_normal(
                "theta_sim", a_m + b_m * theta, s_m, d["sim_prec"], d["sim_prec_x"],
                dims="candidate"), dims="candidate")
            for dom, gain in (("real", theta), ("sim", theta_sim)):
                eta = pm.Normal(f"eta_{dom}", pr.baseline_mu, pr.baseline_sigma,
                                dims="policy_slot")
                ctrl = binomial_logit_logp(d[f"{dom}_ctrl_k"], d[f"{dom}_ctrl_n"], eta,
                                           d[f"{dom}_ctrl_logc"])
                trt = binomial_logit_logp(d[f"{dom}_trt_k"], d[f"{dom}_trt_n"],
                                          eta[:, None] + gain[None, :], d[f"{dom}_trt_logc"])
                r = (d[f"{dom}_est"] - gain) / d[f"{dom}_est_se"]
                est = d[f"{dom}_has_est"] * (-0.5 * r**2 - pt.log(d[f"{dom}_est_se"]))
                pm.Potential(f"{dom}_obs", ctrl.sum() + trt.sum() + est.sum())
        return model

    def compile_key(self) -> tuple:
        """The candidates, lenses, pooling, slots, priors and a fixed calibration."""
        cal = (None if self.calibration is None
               else tuple((lv, *map(float, self.calibration[lv])) for lv in self.lenses))
        return (tuple(self.gain_ids), tuple(self.lenses), tuple(self.structure.groups),
                self.priors, self.max_policies, cal)

    def _compiled(self):
        key = self.compile_key()
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build())
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    # -- fit --------------------------------------------------------------------------------
    def fit(self, real_paired: pd.DataFrame | None = None,
            sim_paired: pd.DataFrame | None = None, *,
            real_estimates: pd.DataFrame | None = None,
            sim_estimates: pd.DataFrame | None = None,
            draws: int = 1000, tune: int = 1000, chains: int = 4, seed: int = 0,
            target_accept: float = TARGET_ACCEPT, thin: int = 1, progressbar: bool = False,
            reference: bool = False) -> xr.DataTree:
        """Sample the joint posterior of the real and sim gains and the calibration.

        Parameters
        ----------
        real_paired, sim_paired : DataFrame, optional
            Validated paired tables (``validate_paired``, ``validate_sim_paired``).
        real_estimates, sim_estimates : DataFrame, optional
            Summary-level measurements ``candidate, estimate, se`` (logit gain).
        thin : int
            Sample ``draws × thin`` per chain and keep every ``thin``-th
            (:func:`models.sampling.sample`; the fitter's remedy for poor mixing).
        reference : bool
            Also sample the real-only posterior (the same compiled model with the sim data
            removed, seed ``default_rng([seed, 1])``): ``theta_real_only`` in ``posterior``,
            the reference of :func:`sim_share`.

        Returns
        -------
        DataTree
            ``posterior`` with ``theta`` and ``theta_sim`` over ``candidate``, ``a``, ``b``,
            ``sigma`` over ``lens`` (learned calibration only), ``eta_real``/``eta_sim`` over
            the named policies (and ``theta_real_only`` with ``reference``); ``sample_stats``;
            ``constant_data`` with the encoded counts.
        """
        enc = encode_sim_proxy(self.gain_ids, self.max_policies, real_paired, sim_paired,
                               real_estimates, sim_estimates)
        compiled = self._compiled().with_data(**self.data(enc))
        idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                       target_accept=target_accept, progressbar=progressbar, thin=thin,
                       timing=self.last_timing)
        n = len(enc.policies)
        post = idata["posterior"].to_dataset()
        if reference:
            ref_enc = encode_sim_proxy(self.gain_ids, self.max_policies, real_paired, None,
                                       real_estimates, None)
            ref = sample(self._compiled().with_data(**self.data(ref_enc)), draws=draws,
                         tune=tune, chains=chains,
                         seed=int(np.random.default_rng([seed, 1]).integers(2**31)),
                         target_accept=target_accept, progressbar=progressbar, thin=thin)
            post["theta_real_only"] = ref["posterior"]["theta"].to_dataset()["theta"]
            stats = ref["sample_stats"].to_dataset() if "sample_stats" in ref.children else {}
            idata.attrs["reference_divergences"] = int(stats["diverging"].sum()) if (
                "diverging" in stats) else 0
        post = post.drop_vars([v for v in post.data_vars if v.startswith("z_")])
        post = post.isel(policy_slot=slice(0, n)).rename({"policy_slot": "policy"})
        post = post.assign_coords(policy=enc.policies)
        const = xr.Dataset({k: (("policy", "candidate") if v.ndim == 2 else
                                ("policy",) if "ctrl" in k else ("candidate",),
                                v[:n] if "ctrl" in k or v.ndim == 2 else v)
                            for k, v in enc.arrays.items()},
                           coords={"policy": enc.policies, "candidate": self.gain_ids})
        groups = {"posterior": post, "constant_data": const}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({"model": "sim_proxy", "calibration": "learned"
                         if self.calibration is None else "fixed"})
        dt.attrs.update({k: v for k, v in idata.attrs.items()
                         if k in ("thin", "divergences_all", "reference_divergences")})
        return dt


def synthetic_paired(gains: Mapping[str, float], baseline: float, trials: int,
                     rng: np.random.Generator, *, policy: str = "pi0",
                     eval_protocol: str = "default", step: int = 0) -> pd.DataFrame:
    """A paired table (the ``paired_evaluations`` layout) drawn from known logit gains.

    One row per candidate of ``gains``: control ~ Binomial(trials, logistic(baseline)),
    treated ~ Binomial(trials, logistic(baseline + gain)); rows with ``trials`` = 0 are
    omitted.  For tests and benchmarks (a real or a simulated table alike).
    """
    from scipy.special import expit

    rows = []
    for cid, g in gains.items():
        if trials <= 0:
            continue
        rows.append({"step": step, "candidate": cid, "policy": policy,
                     "eval_protocol": eval_protocol,
                     "control_successes": int(rng.binomial(trials, expit(baseline))),
                     "control_trials": trials,
                     "treated_successes": int(rng.binomial(trials, expit(baseline + g))),
                     "treated_trials": trials, "run_id": f"{policy}/{cid}/{step}"})
    return pd.DataFrame(rows)


# -- what the fitter reads (the Model protocol of models/protocol.py) ------------------------
def make_model(candidates: CandidateSet, priors: SimProxyPriors,
               max_policies: int) -> SimProxyModel | None:
    """The sim-proxy model of ``candidates`` (learned calibration); None without a
    policy-changing candidate (no gain to model)."""
    if not any(c.changes_policy for c in candidates):
        return None
    return SimProxyModel(candidates, priors, max_policies)


def fit_inputs(model: SimProxyModel, evidence: Any, policy: str) -> dict[str, Any] | None:
    """``fit``'s keyword arguments from an :class:`~belief.inputs.evidence.Evidence`: the real
    and simulated paired evaluations, the real summary-level gain estimates of the gain
    candidates, and ``reference=True`` (the real-only fit :func:`sim_share` compares with);
    None without simulated paired evaluations (nothing for this model to add)."""
    sim = evidence.sim_paired
    if not len(sim):
        return None
    est = evidence.gain_estimates
    est = est[est["candidate"].isin(model.gain_ids)]
    return {"real_paired": evidence.paired, "sim_paired": sim,
            "real_estimates": est if len(est) else None, "reference": True}


def sim_share(idata: xr.DataTree) -> xr.DataArray:
    """How much of each candidate's belief about its real gain comes from simulation.

    ``share_m = 1 − Var_post(θ_m | real and sim data) / Var_post(θ_m | real data only)``,
    both posterior variances of the real logit gain θ_m under this model (the second from the
    reference fit, ``theta_real_only``: the same model and priors without the sim data).
    0: the sim evaluations did not narrow the belief (no sim data of the candidate or its
    lens, or a simulator learned not to predict reality); 0.5: they halved its variance, as
    many real trials again would have; → 1: the belief rests on simulation.  Unlike
    b_l²/(σ_l² + v_m) at posterior draws of the calibration, it counts the information the
    sim data spend on learning the calibration itself.  Each variance carries Monte Carlo
    error (relative s.e. ≈ √(2/ESS)), so a share within a few ×√(2/ESS) of 0 is 0, and it
    may come out slightly negative; it is not clipped.
    """
    post = idata["posterior"]
    with_sim = post["theta"].var(("chain", "draw"))
    real_only = post["theta_real_only"].var(("chain", "draw"))
    share = 1.0 - with_sim / real_only
    share.attrs["long_name"] = ("share of the real gain's posterior precision from "
                                "simulation: 1 − Var(θ | real, sim) / Var(θ | real)")
    return share


def belief_draws(model: SimProxyModel, idata: xr.DataTree, policy: str,
                 rng: np.random.Generator) -> xr.Dataset:
    """q_t's ``sim_proxy_theta`` (sample, candidate): posterior draws of the real logit gain
    θ_m given the real and the sim evaluations (NaN for candidates without a gain), and
    ``sim_proxy_sim_share`` (candidate): :func:`sim_share` (NaN without a reference fit or a
    gain).  Reported beside the gains model's ``gain``; no decision reads them."""
    ids = list(model.candidates.ids)
    theta = idata["posterior"]["theta"].stack(sample=("chain", "draw")).transpose(
        "sample", "candidate").reindex(candidate=ids)
    out = xr.Dataset({"sim_proxy_theta": (("sample", "candidate"), theta.values)},
                     coords={"candidate": ids})
    out["sim_proxy_theta"].attrs["long_name"] = ("real logit gain θ_m given the real and "
                                                 "simulated paired evaluations")
    share = (sim_share(idata).reindex(candidate=ids) if "theta_real_only" in idata["posterior"]
             else xr.DataArray(np.full(len(ids), np.nan), coords={"candidate": ids}))
    out["sim_proxy_sim_share"] = ("candidate", share.values)
    out["sim_proxy_sim_share"].attrs["long_name"] = share.attrs.get(
        "long_name", "share of the belief from simulation")
    return out
