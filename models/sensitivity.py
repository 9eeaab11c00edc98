"""Intervention sensitivities S_k(π) and pairwise synergies γ_kl from sensitivity runs.

A sensitivity run perturbs mismatch directions by settings ξ_k (one ``xi_<direction>`` column
each, in the direction's own units) and records the outcome J under one policy.  The model is

    η_r  = α_π + Σ_k S_kπ ξ'_k,r + Σ_{k<l} γ_kl ξ'_k,r ξ'_l,r
    binomial:  successes_r ~ Binomial(trials_r, logistic(η_r))           (J = success probability)
    normal:    y'_r ~ Normal(η_r, sqrt(σ² + se'_r²))                     (J continuous)

    α_π   ~ Normal(alpha_mu, alpha_sigma)
    S_kπ  = μ_k + τ_S · z_kπ,   z ~ N(0, 1)        (partial pooling of S_kπ across policies)
    μ_k   ~ Normal(0, effect_sigma),   τ_S ~ S_tau (a ScalePrior; default HalfNormal(0.5))
    γ_kl  ~ Normal(0, synergy_sigma)               (shared by all policies)
    σ     ~ sigma (default HalfNormal(1))           (normal family only)

**Standardisation** (stated on every output): ξ'_k = (ξ_k − c_k) / s_k with c_k the mean and
s_k the (population) standard deviation of ξ_k over the runs of the fitted table.  Hence S_kπ
is the *average local response* of η over the swept region per one standard deviation of ξ_k
(units differ across ξ_k; standardising is what makes directions comparable *within* a policy),
and γ_kl the change of the response to ξ_k per standard deviation of ξ_l.  For the normal family
J is standardised too, y' = (y − c_J) / s_J, se' = se / s_J, and every coefficient is reported
back in J's units (α = c_J + s_J α', S = s_J S', γ = s_J γ', σ = s_J σ').  η is on the logit
scale for the binomial family and on J's scale for the normal one.

The posterior is *policy-conditional*: S_kπ ranks directions within π; it is not comparable
across policies and is never a value input of the allocator.

Geometry: μ_k and S_kπ are sampled by data-informed non-centring
(:func:`models.priors.whitened_normal`) from per-policy regressions of the runs
(:meth:`SensitivityModel.approximation`): S of a policy with a sweep is (nearly) centred —
its data dominate — and S of a policy slot without runs is a non-centred standard normal, so
τ_S never meets a funnel, whether one policy or several were swept.  This shapes only what the
sampler sees; :meth:`SensitivityModel.build_generative` is the model written out directly.

Compiled once per structure (family, directions, policy slots, priors) with ``pm.Data``
containers whose row count may change between fits (nutpie ``with_data``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.tables import XI_PREFIX, outcome_family, xi_directions
from models.priors import ScalePrior, check_priors, priors_as_dict, whitened_normal
from models.sampling import sample, slot_posterior

__all__ = ["SensitivityEncoding", "SensitivityModel", "SensitivityPriors", "encode_sensitivity",
           "pair_label"]

FAMILIES = ("binomial", "normal")


def _logistic_fit(x: np.ndarray, successes: np.ndarray, trials: np.ndarray,
                  ridge: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """Ridge-regularised logistic regression by IRLS: (β̂, (Xᵀ W X + ridge I)⁻¹)."""
    from scipy.special import expit

    beta = np.zeros(x.shape[1])
    pen = ridge * np.eye(x.shape[1])
    for _ in range(50):
        p = expit(x @ beta)
        w = trials * p * (1.0 - p)
        hess = x.T @ (w[:, None] * x) + pen
        step = np.linalg.solve(hess, x.T @ (successes - trials * p) - ridge * beta)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-8:
            break
    p = expit(x @ beta)
    hess = x.T @ ((trials * p * (1.0 - p))[:, None] * x) + pen
    return beta, np.linalg.inv(hess)


def _weighted_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray,
                  ridge: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """Ridge-regularised weighted least squares: (β̂, (Xᵀ W X + ridge I)⁻¹)."""
    hess = x.T @ (w[:, None] * x) + ridge * np.eye(x.shape[1])
    cov = np.linalg.inv(hess)
    return cov @ (x.T @ (w * y)), cov


def pair_label(first: str, second: str) -> str:
    """Name of the synergy pair (k, l): ``"k×l"``."""
    return f"{first}×{second}"


@dataclass(frozen=True)
class SensitivityPriors:
    """Prior scales on the standardised scale (see module docstring).

    Attributes
    ----------
    alpha_mu, alpha_sigma : float
        Normal prior of the intercept α_π (logit, or standardised J).
    effect_sigma : float
        Normal(0, ·) prior of the mean sensitivity μ_k across policies.
    S_tau : ScalePrior
        Prior of τ_S, the spread of S_kπ across policies (a number v means HalfNormal(v);
        default HalfNormal(0.5)).
    synergy_sigma : float
        Normal(0, ·) prior of γ_kl.
    sigma : ScalePrior
        Prior of the residual s.d. σ (normal family; default HalfNormal(1)).
    """

    alpha_mu: float = 0.0
    alpha_sigma: float = 1.5
    effect_sigma: float = 1.0
    S_tau: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.5))
    synergy_sigma: float = 1.0
    sigma: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=1.0))

    SCALES: ClassVar[dict[str, str]] = {"S_tau": "half_normal", "sigma": "half_normal"}

    def __post_init__(self) -> None:
        check_priors(self, locations=("alpha_mu",), scales=self.SCALES)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)


@dataclass(frozen=True)
class SensitivityEncoding:
    """Standardised design and outcomes of a sensitivity table."""

    family: str
    directions: list[str]
    policies: list[str]
    policy_idx: np.ndarray  # (R,)
    xi: np.ndarray  # (R, K) standardised
    center: np.ndarray  # (K,)
    scale: np.ndarray  # (K,)
    lo: np.ndarray  # (K,) smallest raw setting
    hi: np.ndarray  # (K,) largest raw setting
    successes: np.ndarray  # (R,) binomial
    trials: np.ndarray  # (R,) binomial
    y: np.ndarray  # (R,) normal, standardised
    se: np.ndarray  # (R,) normal, standardised
    y_center: float = 0.0
    y_scale: float = 1.0

    def data(self) -> dict[str, np.ndarray]:
        common = {"policy_idx": self.policy_idx, "xi": self.xi}
        if self.family == "binomial":
            return {**common, "successes": self.successes, "trials": self.trials}
        return {**common, "y": self.y, "se": self.se}


def encode_sensitivity(runs: pd.DataFrame, directions: list[str] | None = None,
                       policies: list[str] | None = None) -> SensitivityEncoding:
    """Standardise a validated ``sensitivity_runs`` table (see module docstring).

    Parameters
    ----------
    runs : DataFrame
        ``Evidence.sensitivity`` (validated; one outcome family).
    directions : list of str, optional
        Order of the directions (default: the table's ``xi_`` columns in order).
    policies : list of str, optional
        Order of the policies (default: order of first appearance).
    """
    table = "sensitivity_runs"
    if not len(runs):
        raise InputError(table, "no sensitivity runs to fit")
    family = outcome_family(runs)
    dirs = list(directions) if directions is not None else xi_directions(runs)
    missing = [k for k in dirs if f"{XI_PREFIX}{k}" not in runs.columns]
    if missing:
        raise InputError(table, f"missing ξ columns {[XI_PREFIX + k for k in missing]}")
    names = list(policies) if policies is not None else list(dict.fromkeys(runs["policy"]))
    unknown = sorted(set(runs["policy"]) - set(names))
    if unknown:
        raise InputError(table, f"policies {unknown} are not among {names}")
    raw = runs[[f"{XI_PREFIX}{k}" for k in dirs]].to_numpy(float)
    center = raw.mean(axis=0)
    scale = raw.std(axis=0)
    if np.any(scale <= 0):
        k = dirs[int(np.flatnonzero(scale <= 0)[0])]
        raise InputError(table, f"{XI_PREFIX}{k} is constant: no information about S_{k}")
    xi = (raw - center) / scale
    idx = np.array([names.index(p) for p in runs["policy"]], dtype=np.int64)
    n = len(runs)
    if family == "binomial":
        return SensitivityEncoding(family, dirs, names, idx, xi, center, scale, raw.min(0),
                                   raw.max(0), runs["successes"].to_numpy(np.int64),
                                   runs["trials"].to_numpy(np.int64), np.zeros(n), np.ones(n))
    y = runs["mean"].to_numpy(float)
    se = runs["se"].to_numpy(float) if "se" in runs.columns else np.zeros(n)
    y_center = float(y.mean())
    y_scale = float(y.std()) if y.std() > 0 else 1.0
    return SensitivityEncoding(family, dirs, names, idx, xi, center, scale, raw.min(0),
                               raw.max(0), np.zeros(n, np.int64), np.zeros(n, np.int64),
                               (y - y_center) / y_scale, se / y_scale, y_center, y_scale)


_COMPILED: dict[tuple, Any] = {}
TARGET_ACCEPT = 0.9
"""Default NUTS target acceptance of the sensitivity model (fit escalation raises it)."""


@dataclass
class SensitivityModel:
    """Spec of the sensitivity model for a fixed set of mismatch directions.

    Parameters
    ----------
    directions : tuple of str
        Mismatch directions (the ``<direction>`` of the ``xi_<direction>`` columns).
    family : {"binomial", "normal"}
    priors : SensitivityPriors
    max_policies : int
        Policy slots compiled into the model (unused slots sample from the prior).

    Examples
    --------
    >>> model = SensitivityModel(("friction", "latency"))          # doctest: +SKIP
    >>> idata = model.fit(evidence.sensitivity, seed=0)             # compiles once
    >>> idata["posterior"]["S"].sel(policy="pi0")                   # (chain, draw, direction)
    """

    directions: tuple[str, ...]
    family: str = "binomial"
    priors: SensitivityPriors = field(default_factory=SensitivityPriors)
    max_policies: int = 8
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.directions = tuple(self.directions)
        if not self.directions:
            raise InputError("SensitivityModel", "at least one direction is required")
        if len(set(self.directions)) != len(self.directions):
            raise InputError("SensitivityModel", f"duplicate directions {self.directions}")
        if self.family not in FAMILIES:
            raise InputError("SensitivityModel", f"family must be one of {FAMILIES}, got "
                                                 f"{self.family!r}")
        if self.max_policies < 1:
            raise InputError("SensitivityModel", "max_policies must be >= 1")
        self.pairs = list(combinations(range(len(self.directions)), 2))

    @property
    def pair_names(self) -> list[str]:
        return [pair_label(self.directions[a], self.directions[b]) for a, b in self.pairs]

    def coords(self) -> dict[str, list]:
        return {"direction": list(self.directions), "pair": self.pair_names,
                "policy_slot": list(range(self.max_policies))}

    # -- build ------------------------------------------------------------------------------
    def _data(self, encoding: SensitivityEncoding | None) -> dict[str, np.ndarray]:
        if encoding is not None:
            return encoding.data()
        k = len(self.directions)
        data = {"policy_idx": np.zeros(2, np.int64), "xi": np.zeros((2, k))}
        data.update({"successes": np.zeros(2, np.int64), "trials": np.ones(2, np.int64)}
                    if self.family == "binomial" else {"y": np.zeros(2), "se": np.ones(2)})
        return data

    def build(self, encoding: SensitivityEncoding | None = None):
        """The sampled ``pm.Model`` with ``pm.Data`` containers (filled with ``encoding`` or a
        stub): μ_k and S_kπ by data-informed non-centring (:meth:`approximation`)."""
        import pymc as pm

        pr = self.priors
        with pm.Model(coords=self.coords()) as model:
            d = {name: pm.Data(name, value) for name, value in self._data(encoding).items()}
            approx = {name: pm.Data(name, value) for name, value in
                      self.approximation(encoding).items()}
            alpha = pm.Normal("alpha", pr.alpha_mu, pr.alpha_sigma, dims="policy_slot")
            tau = pr.S_tau.rv("S_tau")
            # μ_k's message from the policies at the *current* τ_S (a policy with likelihood
            # N(Ŝ, 1/P) and prior N(μ, τ²) tells μ N(Ŝ, 1/P + τ²)): Q = Σ P/(1 + τ²P),
            # Q·μ̂ = Σ P Ŝ/(1 + τ²P).  Then μ's whitening is right for every τ, also the small
            # τ at which one swept policy ties μ to its S (the funnel of a fixed τ̂)
            denom = 1.0 + tau**2 * approx["s_prec"]
            mu = pm.Deterministic("S_mu", whitened_normal(
                "S_mu", 0.0, pr.effect_sigma, (approx["s_prec"] / denom).sum(axis=1),
                (approx["s_prec_x"] / denom).sum(axis=1), dims="direction"), dims="direction")
            s = pm.Deterministic("S", whitened_normal(
                "S", mu[:, None], tau, approx["s_prec"], approx["s_prec_x"],
                dims=("direction", "policy_slot")), dims=("direction", "policy_slot"))
            self._likelihood(d, alpha, s)
        return model

    def build_generative(self, encoding: SensitivityEncoding | None = None):
        """The model of the module docstring written out directly (S_kπ = μ_k + τ_S z_kπ):
        the same joint distribution as :meth:`build`; the generator of simulation-based
        calibration."""
        import pymc as pm

        pr = self.priors
        with pm.Model(coords=self.coords()) as model:
            d = {name: pm.Data(name, value) for name, value in self._data(encoding).items()}
            alpha = pm.Normal("alpha", pr.alpha_mu, pr.alpha_sigma, dims="policy_slot")
            mu = pm.Normal("S_mu", 0.0, pr.effect_sigma, dims="direction")
            tau = pr.S_tau.rv("S_tau")
            z = pm.Normal("z_S", 0.0, 1.0, dims=("direction", "policy_slot"))
            s = pm.Deterministic("S", mu[:, None] + tau * z, dims=("direction", "policy_slot"))
            self._likelihood(d, alpha, s)
        return model

    def _likelihood(self, d: dict[str, Any], alpha: Any, s: Any) -> None:
        import pymc as pm
        import pytensor.tensor as pt

        pr = self.priors
        first = np.array([a for a, _ in self.pairs], dtype=np.int64)
        second = np.array([b for _, b in self.pairs], dtype=np.int64)
        eta = alpha[d["policy_idx"]] + (d["xi"] * s[:, d["policy_idx"]].T).sum(axis=1)
        if self.pairs:
            gamma = pm.Normal("gamma", 0.0, pr.synergy_sigma, dims="pair")
            eta = eta + pt.dot(d["xi"][:, first] * d["xi"][:, second], gamma)
        if self.family == "binomial":
            pm.Binomial("obs", n=d["trials"], logit_p=eta, observed=d["successes"])
        else:
            sigma = pr.sigma.rv("sigma")
            pm.Normal("obs", mu=eta, sigma=pt.sqrt(sigma**2 + d["se"] ** 2), observed=d["y"])

    def approximation(self, encoding: SensitivityEncoding | None) -> dict[str, np.ndarray]:
        """Normal approximations (P, P·x̂) of the likelihood of every S_kπ.

        Per policy, a regression of its own runs on [1, ξ', ξ'_k ξ'_l] (logistic by
        iteratively reweighted least squares for the binomial family, weighted least squares
        with weights 1/(σ̂² + se'²) for the normal one, σ̂ the prior median of σ; ridge
        1/10² on every coefficient) gives Ŝ_kπ and its marginal variance V_kπ: x̂ = Ŝ, P = 1/V
        (0 for policy slots without runs).  In the model, μ_k receives N(Ŝ_kπ, V_kπ + τ_S²)
        from every policy with runs, at the sampled τ_S.  These shape the sampler's geometry
        only (:func:`models.priors.whitened_normal`), never the posterior.
        """
        k, p = len(self.directions), self.max_policies
        s_prec, s_px = np.zeros((k, p)), np.zeros((k, p))
        if encoding is not None:
            pairs = self.pairs
            for j in range(len(encoding.policies)):
                rows = encoding.policy_idx == j
                if not rows.any():
                    continue
                xi = encoding.xi[rows]
                x = np.column_stack([np.ones(len(xi)), xi]
                                    + [xi[:, a] * xi[:, b] for a, b in pairs])
                if self.family == "binomial":
                    beta, cov = _logistic_fit(x, encoding.successes[rows],
                                              encoding.trials[rows])
                else:
                    w = 1.0 / (self.priors.sigma.median() ** 2 + encoding.se[rows] ** 2)
                    beta, cov = _weighted_fit(x, encoding.y[rows], w)
                var = np.diag(cov)[1:1 + k]
                s_prec[:, j] = 1.0 / var
                s_px[:, j] = beta[1:1 + k] / var
        return {"s_prec": s_prec, "s_prec_x": s_px}

    def _compiled(self):
        key = (self.family, self.directions, self.max_policies, self.priors)
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build(), label="sensitivity")
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    # -- fit --------------------------------------------------------------------------------
    def fit(self, runs: pd.DataFrame, *, draws: int = 1000, tune: int = 500, chains: int = 4,
            seed: int = 0, target_accept: float = TARGET_ACCEPT, thin: int = 1,
            progressbar: bool = False) -> xr.DataTree:
        """Sample the posterior of S_kπ and γ_kl given a validated sensitivity table.

        Returns
        -------
        DataTree
            ``posterior`` with ``S`` (``direction``, ``policy``), ``S_per_unit`` (per unit of
            ξ_k rather than per s.d.), ``gamma`` (``pair``), ``alpha`` and ``S_mu``, ``S_tau``
            (and ``sigma``), in the units stated in the module docstring; ``constant_data``
            with the standardisation (``xi_center``, ``xi_scale``, ``xi_low``, ``xi_high``)
            and the pair structure; ``sample_stats``.  ``attrs["standardisation"]`` states it
            in words.
        """
        family = outcome_family(runs)
        if family != self.family:
            raise InputError("sensitivity_runs", f"the table's outcome family is {family!r}; "
                                                 f"this model was built for {self.family!r}")
        extra = [c[len(XI_PREFIX):] for c in runs.columns if isinstance(c, str)
                 and c.startswith(XI_PREFIX) and c[len(XI_PREFIX):] not in self.directions]
        if extra:
            raise InputError("sensitivity_runs", f"directions {extra} are not in this model's "
                                                 f"{list(self.directions)}")
        enc = encode_sensitivity(runs, list(self.directions))
        if len(enc.policies) > self.max_policies:
            raise InputError("sensitivity_runs", f"{len(enc.policies)} policies exceed "
                                                 f"max_policies={self.max_policies}")
        compiled = self._compiled().with_data(**enc.data(), **self.approximation(enc))
        idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                       target_accept=target_accept, progressbar=progressbar, thin=thin,
                       timing=self.last_timing)
        return self._label(idata, enc)

    def _label(self, idata: xr.DataTree, enc: SensitivityEncoding) -> xr.DataTree:
        n = len(enc.policies)
        post = slot_posterior(idata["posterior"].to_dataset(), enc.policies)
        ys = enc.y_scale
        for name in ("S", "S_mu", "S_tau", "gamma", "sigma"):
            if name in post:
                post[name] = post[name] * ys
        post["alpha"] = enc.y_center + ys * post["alpha"]
        scale = xr.DataArray(enc.scale, dims="direction", coords={"direction": enc.directions})
        post["S_per_unit"] = post["S"] / scale
        link = "logit of the success probability" if enc.family == "binomial" else \
            "the outcome J"
        post["S"].attrs.update({"long_name": "sensitivity S_kπ: average response of η over the "
                                             "swept region per one s.d. of ξ_k",
                                "units": f"{link} per s.d. of ξ_k"})
        post["S_per_unit"].attrs.update({"long_name": "sensitivity per unit of ξ_k (at the "
                                                      "sweep centre)",
                                         "units": f"{link} per unit of ξ_k"})
        if "gamma" in post:
            post["gamma"].attrs.update({"long_name": "synergy γ_kl (standardised ξ)",
                                        "units": f"{link} per s.d. of ξ_k per s.d. of ξ_l"})
        groups: dict[str, xr.Dataset] = {"posterior": post}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        pair_dims = {"pair": self.pair_names}
        groups["constant_data"] = xr.Dataset(
            {"xi_center": ("direction", enc.center), "xi_scale": ("direction", enc.scale),
             "xi_low": ("direction", enc.lo), "xi_high": ("direction", enc.hi),
             "pair_first": ("pair", [self.directions[a] for a, _ in self.pairs]),
             "pair_second": ("pair", [self.directions[b] for _, b in self.pairs]),
             "runs": ("policy", np.bincount(enc.policy_idx, minlength=n))},
            coords={"direction": enc.directions, "policy": enc.policies, **pair_dims})
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({
            "model": "sensitivity", "family": enc.family, "link": link,
            "standardisation": "ξ'_k = (ξ_k − xi_center_k) / xi_scale_k (mean and population "
                               "s.d. of ξ_k over the fitted runs); S is per s.d. of ξ_k, "
                               "S_per_unit per unit of ξ_k, both averaged over the swept "
                               "region" + ("" if enc.family == "binomial" else
                                           f"; J standardised with centre {enc.y_center:g} "
                                           f"and scale {enc.y_scale:g}, reported in J units"),
            "y_center": enc.y_center, "y_scale": enc.y_scale,
            **{f"xi_center_{k}": float(c) for k, c in zip(enc.directions, enc.center,
                                                          strict=True)},
            **{f"xi_scale_{k}": float(s) for k, s in zip(enc.directions, enc.scale,
                                                         strict=True)},
            **{f"prior_{k}": (v.describe() if isinstance(v, ScalePrior) else v)
               for k, v in vars(self.priors).items()}})
        return dt
