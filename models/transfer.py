"""Transfer delta δ_J(π) = J_real(π) − J_sim(π), pooled across policies.

The same policy π is scored in sim and in real under the shared evaluation protocol.  δ_J is
*signed*: positive when real is better than sim (then it is not a "gap"); G_J = |δ_J| is the
performance discrepancy.

Binomial family (J = success probability; counts of a policy are summed over its rows)::

    η_sim[π]   ~ Normal(sim_mu, sim_sigma)                         (logit J_sim, per policy)
    d[π]       = μ_d + τ_d · z_π,  z_π ~ N(0, 1)                    (logit shift, pooled)
    μ_d ~ Normal(0, shift_mu_sigma),  τ_d ~ shift_tau (a ScalePrior; default HalfNormal(1))
    sim_successes  ~ Binomial(sim_trials,  logistic(η_sim))
    real_successes ~ Binomial(real_trials, logistic(η_sim + d))
    δ_J(π) = logistic(η_sim + d) − logistic(η_sim),   G_J(π) = |δ_J(π)|

Normal family (J continuous; each row gives ``sim_mean ± sim_se`` and ``real_mean ± real_se``;
rows of a policy are combined by inverse-variance weighting, exact for known se).  J is
standardised, J' = (J − c) / s with c the mean and s the s.d. of all reported means (s = 1 when
they do not vary), and the results are reported back in J's units::

    J'_sim[π] ~ Normal(0, sim_sigma),   δ'[π] = μ_d + τ_d · z_π
    sim_mean' ~ Normal(J'_sim, sim_se'),   real_mean' ~ Normal(J'_sim + δ', real_se')
    δ_J(π) = s · δ'[π],   G_J(π) = |δ_J(π)|

Policies without an evaluation (e.g. the campaign's current one) get a slot with no data: their
δ_J is the pooled prediction for a new policy (binomial: with J_sim from its prior).

Geometry: the policy shifts d[π] and μ_d are sampled by data-informed non-centring
(:func:`models.priors.whitened_normal`): d[π] from the normal approximation of its likelihood
given η_sim[π] (binomial: logit p̂_real − η_sim with precision (n + 1) p̂ (1 − p̂),
p̂ = (successes + ½)/(trials + 1); normal: real_mean' − J'_sim with precision 1/real_se'²),
μ_d from the policies' sim-to-real differences, weighted at the sampled τ_d (an exact change of
variables given τ_d, as in :mod:`models.sensitivity`; at τ_d's prior median instead, 5 of 204
benchmark fits at 4 × 1000 draws had a divergent transition).  Policy slots without evaluations (the
current policy, unused slots) are then non-centred standard normals — free in geometry.  This
only shapes what the sampler sees; :meth:`TransferModel.build_generative` is the same model
written out directly (the generator of simulation-based calibration).

Compiled once per (family, policy slots, priors); a re-fit swaps the data (nutpie ``with_data``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.tables import outcome_family
from models.likelihoods import expit
from models.priors import ScalePrior, check_priors, priors_as_dict, whitened_normal
from models.sampling import sample, slot_posterior

__all__ = ["TransferEncoding", "TransferModel", "TransferPriors", "encode_transfer"]

FAMILIES = ("binomial", "normal")


@dataclass(frozen=True)
class TransferPriors:
    """Prior scales (logit scale for binomial; standardised J for normal).

    Attributes
    ----------
    sim_mu, sim_sigma : float
        Normal prior of a policy's J_sim (logit, or standardised J).
    shift_mu_sigma : float
        Normal(0, ·) prior of the mean real − sim shift μ_d (no sign assumed).
    shift_tau : ScalePrior
        Prior of τ_d, the spread of the shift across policies (a number v means
        HalfNormal(v); default HalfNormal(1)).
    """

    sim_mu: float = 0.0
    sim_sigma: float = 1.5
    shift_mu_sigma: float = 1.0
    shift_tau: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=1.0))

    SCALES: ClassVar[dict[str, str]] = {"shift_tau": "half_normal"}

    def __post_init__(self) -> None:
        check_priors(self, locations=("sim_mu",), scales=self.SCALES)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)


@dataclass(frozen=True)
class TransferEncoding:
    """Per-policy-slot sufficient statistics of a transfer table."""

    family: str
    policies: list[str]
    arrays: dict[str, np.ndarray]
    rows: np.ndarray  # (P,) rows per policy slot
    center: float = 0.0
    scale: float = 1.0


def encode_transfer(transfer: pd.DataFrame, max_policies: int, extra: tuple[str, ...] = (),
                    family: str | None = None) -> TransferEncoding:
    """Aggregate a validated ``transfer_evaluations`` table into ``max_policies`` slots.

    Binomial: successes and trials summed per policy and domain.  Normal: inverse-variance
    weighted mean and se per policy and domain, then standardised (see module docstring).
    ``extra`` policies get a slot without data.
    """
    table = "transfer_evaluations"
    family = family or outcome_family(transfer)
    if family not in FAMILIES:
        raise InputError(table, "no transfer evaluations to fit")
    names = list(dict.fromkeys([*transfer["policy"], *extra]))
    if len(names) > max_policies:
        raise InputError(table, f"{len(names)} policies exceed max_policies={max_policies}; "
                                "build the model with more slots")
    slot = {p: i for i, p in enumerate(names)}
    idx = np.array([slot[p] for p in transfer["policy"]], dtype=np.int64)
    rows = np.bincount(idx, minlength=max_policies)
    if family == "binomial":
        arrays = {}
        for col in ("sim_successes", "sim_trials", "real_successes", "real_trials"):
            arrays[col] = np.bincount(idx, weights=transfer[col].to_numpy(float),
                                      minlength=max_policies).astype(np.int64)
        return TransferEncoding(family, names, arrays, rows)
    means = np.concatenate([transfer["sim_mean"].to_numpy(float),
                            transfer["real_mean"].to_numpy(float)])
    center = float(means.mean()) if len(means) else 0.0
    scale = float(means.std()) if len(means) and means.std() > 0 else 1.0
    arrays = {}
    for dom in ("sim", "real"):
        prec = np.bincount(idx, weights=transfer[f"{dom}_se"].to_numpy(float) ** -2,
                           minlength=max_policies)
        wsum = np.bincount(idx, weights=transfer[f"{dom}_mean"].to_numpy(float)
                           * transfer[f"{dom}_se"].to_numpy(float) ** -2, minlength=max_policies)
        has = prec > 0
        mean = np.where(has, wsum / np.where(has, prec, 1.0), center)
        se = np.where(has, 1.0 / np.sqrt(np.where(has, prec, 1.0)), scale)
        arrays[f"{dom}_y"] = (mean - center) / scale
        arrays[f"{dom}_se"] = se / scale
        arrays[f"has_{dom}"] = has.astype(float)
    return TransferEncoding(family, names, arrays, rows, center, scale)


_COMPILED: dict[tuple, Any] = {}
TARGET_ACCEPT = 0.9
"""Default NUTS target acceptance of the transfer model (fit escalation raises it)."""


@dataclass
class TransferModel:
    """Spec of the pooled transfer-delta model.

    Parameters
    ----------
    priors : TransferPriors
    max_policies : int
        Policy slots compiled into the model.

    The outcome family is read from the table at :meth:`fit`; each family is compiled once.

    Examples
    --------
    >>> model = TransferModel()                                   # doctest: +SKIP
    >>> idata = model.fit(evidence.transfer, policies=("pi0",))    # compiles once per family
    >>> model.decision_draws(idata)["delta_j"]                     # (sample, policy)
    """

    priors: TransferPriors = field(default_factory=TransferPriors)
    max_policies: int = 16
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_policies < 1:
            raise InputError("TransferModel", "max_policies must be >= 1")

    def _arrays(self, family: str, encoding: TransferEncoding | None) -> dict[str, np.ndarray]:
        p = self.max_policies
        if encoding is not None:
            return encoding.arrays
        if family == "binomial":
            return {c: np.zeros(p, np.int64) for c in ("sim_successes", "sim_trials",
                                                      "real_successes", "real_trials")}
        return {"sim_y": np.zeros(p), "sim_se": np.ones(p), "has_sim": np.zeros(p),
                "real_y": np.zeros(p), "real_se": np.ones(p), "has_real": np.zeros(p)}

    def data(self, family: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The data containers: the sufficient statistics and the likelihood approximations.

        ``real_prec`` / ``real_hat`` approximate the real-domain likelihood of a policy's logit
        (binomial: p̂ = (successes + ½)/(trials + 1), logit p̂, precision (trials + 1) p̂ (1 − p̂);
        normal: the mean and 1/se²); ``mu_both``, ``mu_diff`` and ``mu_v0`` give that of μ_d
        from every policy evaluated in both domains: the difference x̂_π = x̂_real − x̂_sim with
        variance v0_π + τ_d², v0_π = 1/P_sim + 1/P_real, evaluated in the model at the sampled
        τ_d.  Geometry only, never the posterior.
        """
        if family == "binomial":
            est = {}
            for dom in ("sim", "real"):
                n = arrays[f"{dom}_trials"].astype(float)
                phat = (arrays[f"{dom}_successes"] + 0.5) / (n + 1.0)
                est[f"{dom}_prec"] = np.where(n > 0, (n + 1.0) * phat * (1.0 - phat), 0.0)
                est[f"{dom}_hat"] = np.log(phat) - np.log1p(-phat)
        else:
            est = {f"{dom}_prec": arrays[f"has_{dom}"] / arrays[f"{dom}_se"] ** 2
                   for dom in ("sim", "real")}
            est.update({f"{dom}_hat": arrays[f"{dom}_y"] for dom in ("sim", "real")})
        both = (est["sim_prec"] > 0) & (est["real_prec"] > 0)
        v0 = np.where(both, 1.0 / np.where(both, est["sim_prec"], 1.0)
                      + 1.0 / np.where(both, est["real_prec"], 1.0), 0.0)
        diff = np.where(both, est["real_hat"] - est["sim_hat"], 0.0)
        return {**arrays, "real_prec": np.where(both, est["real_prec"], 0.0),
                "real_hat": est["real_hat"], "mu_both": both.astype(float), "mu_diff": diff,
                "mu_v0": v0}

    def build(self, family: str = "binomial", encoding: TransferEncoding | None = None):
        """The sampled ``pm.Model`` of ``family`` with ``pm.Data`` containers over policy
        slots (data-informed non-centring of μ_d and the shifts; module docstring)."""
        import pymc as pm

        if family not in FAMILIES:
            raise InputError("TransferModel", f"family must be one of {FAMILIES}")
        p = self.max_policies
        pr = self.priors
        with pm.Model(coords={"policy_slot": list(range(p))}) as model:
            d = {name: pm.Data(name, value, dims="policy_slot")
                 for name, value in self.data(family, self._arrays(family, encoding)).items()}
            eta_sim = pm.Normal("eta_sim", pr.sim_mu, pr.sim_sigma, dims="policy_slot")
            tau = pr.shift_tau.rv("shift_tau")
            # μ_d's signal at the sampled τ_d: Σ q_π, Σ q_π x̂_π with q_π = 1/(v0_π + τ_d²)
            q = d["mu_both"] / (d["mu_v0"] + tau**2)
            mu = pm.Deterministic("shift_mu", whitened_normal(
                "shift_mu", 0.0, pr.shift_mu_sigma, q.sum(), (q * d["mu_diff"]).sum()))
            shift = pm.Deterministic("shift", whitened_normal(
                "shift", mu, tau, d["real_prec"], d["real_prec"] * (d["real_hat"] - eta_sim),
                dims="policy_slot"), dims="policy_slot")
            self._likelihood(family, d, eta_sim, shift)
        return model

    def build_generative(self, family: str = "binomial",
                         encoding: TransferEncoding | None = None):
        """The model of the module docstring written out directly (non-centred shifts): the
        same joint distribution as :meth:`build`; the generator of simulation-based
        calibration."""
        import pymc as pm

        if family not in FAMILIES:
            raise InputError("TransferModel", f"family must be one of {FAMILIES}")
        p = self.max_policies
        pr = self.priors
        with pm.Model(coords={"policy_slot": list(range(p))}) as model:
            d = {name: pm.Data(name, value, dims="policy_slot")
                 for name, value in self._arrays(family, encoding).items()}
            eta_sim = pm.Normal("eta_sim", pr.sim_mu, pr.sim_sigma, dims="policy_slot")
            mu = pm.Normal("shift_mu", 0.0, pr.shift_mu_sigma)
            tau = pr.shift_tau.rv("shift_tau")
            z = pm.Normal("z_shift", 0.0, 1.0, dims="policy_slot")
            shift = pm.Deterministic("shift", mu + tau * z, dims="policy_slot")
            self._likelihood(family, d, eta_sim, shift)
        return model

    @staticmethod
    def _likelihood(family: str, d: dict[str, Any], eta_sim: Any, shift: Any) -> None:
        import pymc as pm

        eta_real = eta_sim + shift
        if family == "binomial":
            pm.Binomial("sim_obs", n=d["sim_trials"], logit_p=eta_sim,
                        observed=d["sim_successes"], dims="policy_slot")
            pm.Binomial("real_obs", n=d["real_trials"], logit_p=eta_real,
                        observed=d["real_successes"], dims="policy_slot")
        else:
            for dom, mean in (("sim", eta_sim), ("real", eta_real)):
                lp = pm.logp(pm.Normal.dist(mean, d[f"{dom}_se"]), d[f"{dom}_y"])
                pm.Potential(f"{dom}_obs", (d[f"has_{dom}"] * lp).sum())

    def _compiled(self, family: str):
        key = (family, self.max_policies, self.priors)
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build(family), label=f"transfer {family}")
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    def fit(self, transfer: pd.DataFrame, policies: str | tuple[str, ...] = (), *,
            draws: int = 1000, tune: int = 500, chains: int = 4, seed: int = 0,
            target_accept: float = TARGET_ACCEPT, thin: int = 1,
            progressbar: bool = False) -> xr.DataTree:
        """Sample the posterior of δ_J(π) for every evaluated policy (and ``policies``).

        Parameters
        ----------
        transfer : DataFrame
            ``Evidence.transfer`` (validated, non-empty).
        policies : str or tuple of str
            Policies that must get a slot even without evaluations (pooled prediction).
        thin : int
            Sample ``draws × thin`` per chain and keep every ``thin``-th draw: ``draws`` draws
            come back (same sample count as other models) with less autocorrelation.  With
            few policies the pooling hyperparameters mix slowly and sampling is cheap.

        Returns
        -------
        DataTree
            ``posterior`` with ``j_sim``, ``j_real``, ``delta_j`` = J_real − J_sim and
            ``g_j`` = |δ_J| over ``policy`` (J's units: success probability for binomial),
            plus ``shift`` (logit or standardised), ``shift_mu``, ``shift_tau``;
            ``constant_data`` with the rows per policy; ``sample_stats``.
        """
        extra = (policies,) if isinstance(policies, str) else tuple(policies)
        family = outcome_family(transfer)
        enc = encode_transfer(transfer, self.max_policies, extra, family)
        compiled = self._compiled(family).with_data(**self.data(family, enc.arrays))
        if isinstance(thin, bool) or not isinstance(thin, int) or thin < 1:
            raise InputError("TransferModel.fit", f"thin must be >= 1, got {thin}")
        idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                       target_accept=target_accept, progressbar=progressbar, thin=thin,
                       timing=self.last_timing)
        return self._label(idata, enc, thin)

    def _label(self, idata: xr.DataTree, enc: TransferEncoding, thin: int = 1) -> xr.DataTree:
        n = len(enc.policies)
        post = slot_posterior(idata["posterior"].to_dataset(), enc.policies)
        if enc.family == "binomial":
            j_sim = xr.apply_ufunc(expit, post["eta_sim"])
            j_real = xr.apply_ufunc(expit, post["eta_sim"] + post["shift"])
            units = "success probability"
        else:
            j_sim = enc.center + enc.scale * post["eta_sim"]
            j_real = j_sim + enc.scale * post["shift"]
            units = "J units"
        post["j_sim"], post["j_real"] = j_sim, j_real
        post["delta_j"] = j_real - j_sim
        post["g_j"] = abs(post["delta_j"])
        post["delta_j"].attrs.update({"long_name": "transfer delta δ_J = J_real − J_sim "
                                                   "(positive: real is better)", "units": units})
        post["g_j"].attrs.update({"long_name": "performance discrepancy G_J = |δ_J|",
                                  "units": units})
        groups: dict[str, xr.Dataset] = {"posterior": post}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        groups["constant_data"] = xr.Dataset(
            {"rows": ("policy", enc.rows[:n]),
             **{k: ("policy", v[:n]) for k, v in enc.arrays.items()}},
            coords={"policy": enc.policies})
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({"model": "transfer", "family": enc.family, "units": units, "thin": thin,
                         "sign": "delta_j = J_real − J_sim; positive when real is better",
                         "y_center": enc.center, "y_scale": enc.scale,
                         **{f"prior_{k}": (v.describe() if isinstance(v, ScalePrior) else v)
                            for k, v in vars(self.priors).items()}})
        return dt

    @staticmethod
    def decision_draws(idata: xr.DataTree) -> xr.Dataset:
        """``delta_j`` and ``g_j`` as (``sample``, ``policy``) draws (sample = chain × draw)."""
        post = idata["posterior"].to_dataset()[["delta_j", "g_j"]]
        stacked = post.stack(sample=("chain", "draw")).transpose("sample", "policy")
        stacked = stacked.drop_vars(["sample", "chain", "draw"])
        return stacked.assign_coords(sample=np.arange(stacked.sizes["sample"]))
