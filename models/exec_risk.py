"""Hierarchical model of the execution risk P_exec(unsafe | m) of hardware candidates.

Only candidates that drive real hardware face the execution-safety gate; each belongs to a
hardware group g(m) (``hardware_group`` in the candidate file).  Candidates sharing hardware are
partially pooled on the logit scale (logit-normal)::

    μ_0          ~ Normal(mu0_mu, mu0_sigma)        (or Logistic(mu0_mu, mu0_sigma), see below)
    σ_group      ~ sigma_group  (a ScalePrior; default HalfNormal(1))
    σ_cand       ~ sigma_candidate  (default HalfNormal(0.75))
    μ_group[g]   = μ_0 + σ_group · z_g,             z_g ~ Normal(0, 1)
    logit p_m    = μ_group[g(m)] + σ_cand · z_m,    z_m ~ Normal(0, 1)
    unsafe_m     ~ Binomial(executions_m, p_m)

so a candidate with few executions borrows strength from the other candidates of its group
(and groups from each other through μ_0).  The posterior draws of ``p_unsafe`` (= p_m) join the
belief q_t; the gate's posterior bound is their (1 − δ)-quantile.

Geometry (:mod:`models.pooling`; the model above is unchanged by it): a hardware group with one
candidate is part of that candidate's own deviation (scale √(σ_group² + σ_cand²)); when every
hardware candidate shares one group (the synthetic world's ``arm``), that group *is* the global
mean and is merged into it (μ_0 + σ_group z ~ Normal(mu0_mu, √(mu0_sigma² + σ_group²)); then
``mu0`` is not reported separately and ``group_logit`` of the one group is that value).
``group_logit`` is reported for groups of ≥ 2 candidates.  Every logit is sampled by
data-informed non-centring from the normal approximation of its binomial likelihood
(logit p̂, p̂ = (unsafe + ½)/(executions + 1), precision (executions + 1) p̂ (1 − p̂)).

Priors
------
The default (:class:`ExecRiskPriors`) centres μ_0 at logit 0.05 with a wide scale; alone, an
untested candidate's prior 95 % quantile of p is ≈ 0.6, so it does *not* pass a gate with
α_exec = 0.1 without evidence from itself or its group.

:meth:`ExecRiskPriors.flat` is the "flat" option: μ_0 ~ Logistic(0, 1), which is exactly the
logit image of p ~ Beta(1, 1) = Uniform(0, 1), and both pooling scales HalfNormal(0.01), so a
single candidate's prior on p is Uniform(0, 1) up to a negligible logit jitter and its posterior
is Beta(k + 1, n − k + 1).  With several hardware candidates the same scales pool them
*completely* (their logits differ by ≈ 0.01): one shared p, not a Beta(1, 1) per candidate — an
untested candidate inherits its siblings' evidence (0/150 unsafe of a sibling puts its 95 %
bound near 0.02).  Use it for one candidate, or when the candidates are one risk.  The
one-sided Clopper–Pearson bound is the (1 − δ)-quantile of
Beta(k + 1, n − k) (the posterior under the improper Beta(1, 0)), so with the flat option the
posterior bound sits just below CP, by one pseudo-safe execution (e.g. 0/50: 0.0570 vs 0.0582).

For the CVU engine, :func:`simulate` and :func:`loglik` are vectorised over posterior draws of
one candidate's p (plain numpy / scipy; no PyMC).

The model is compiled once per structure (nutpie, numba backend) with ``pm.Data`` containers
for the per-candidate counts; a re-fit swaps the counts without recompiling.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from models.pooling import PoolingStructure, pooled_tree
from models.priors import ScalePrior, check_priors, priors_as_dict
from models.sampling import sample, slot_posterior

__all__ = ["ExecRiskModel", "ExecRiskPriors", "loglik", "p_unsafe_draws", "population_risk",
           "simulate"]

TABLE = "safety_events"
_MU0_DISTS = ("normal", "logistic")


@dataclass(frozen=True)
class ExecRiskPriors:
    """Priors of the execution-risk model (logit scale).

    Attributes
    ----------
    mu0_mu, mu0_sigma : float
        Location and scale of the prior of the global mean logit risk μ_0 (default centre
        logit 0.05 ≈ −2.94, scale 1.5).
    mu0_dist : {"normal", "logistic"}
        Family of the prior of μ_0.  ``Logistic(0, 1)`` is the logit image of Uniform(0, 1).
    sigma_group, sigma_candidate : ScalePrior
        Priors of σ_group (between hardware groups) and σ_cand (between candidates of one
        group); a number v means HalfNormal(v).
    """

    mu0_mu: float = -2.94
    mu0_sigma: float = 1.5
    mu0_dist: str = "normal"
    sigma_group: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=1.0))
    sigma_candidate: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.75))

    SCALES: ClassVar[dict[str, str]] = {"sigma_group": "half_normal",
                                        "sigma_candidate": "half_normal"}

    def __post_init__(self) -> None:
        if self.mu0_dist not in _MU0_DISTS:
            raise InputError("ExecRiskPriors", f"mu0_dist must be one of {list(_MU0_DISTS)}, "
                                               f"got {self.mu0_dist!r}")
        check_priors(self, locations=("mu0_mu",), skip=("mu0_dist",), scales=self.SCALES)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)

    @classmethod
    def flat(cls) -> ExecRiskPriors:
        """The Beta(1, 1)-equivalent prior of *one* candidate: μ_0 ~ Logistic(0, 1), pooling
        scales ~ HN(0.01) — several hardware candidates are pooled completely under it
        (module docstring)."""
        return cls(mu0_mu=0.0, mu0_sigma=1.0, mu0_dist="logistic", sigma_group=0.01,
                   sigma_candidate=0.01)


_COMPILED: dict[tuple, Any] = {}
TARGET_ACCEPT = 0.9
"""Default NUTS target acceptance of the execution-risk model (fit escalation raises it)."""


@dataclass
class ExecRiskModel:
    """Spec of the hierarchical execution-risk model for the hardware candidates of a set.

    Parameters
    ----------
    candidates : CandidateSet
        Only candidates with ``drives_hardware = true`` are modelled; each needs a
        ``hardware_group``.
    priors : ExecRiskPriors

    Examples
    --------
    >>> model = ExecRiskModel(candidates)                          # doctest: +SKIP
    >>> idata = model.fit(*evidence.safety_counts())               # compiles once
    >>> p = p_unsafe_draws(idata)                                  # (sample, candidate)
    """

    candidates: CandidateSet
    priors: ExecRiskPriors = field(default_factory=ExecRiskPriors)
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        hw = [(i, c) for i, c in enumerate(self.candidates) if c.drives_hardware]
        if not hw:
            raise InputError(self.candidates.source, "the execution-risk model needs at least "
                                                     "one hardware candidate (drives_hardware)")
        for i, c in hw:
            if not c.hardware_group:
                raise InputError(self.candidates.source, f"hardware candidate {c.id!r} needs a "
                                                         "hardware_group", row=i)
        self.hw_ids = [c.id for _, c in hw]
        self.groups = list(dict.fromkeys(c.hardware_group for _, c in hw))
        self.group_of_candidate = np.array([self.groups.index(c.hardware_group)
                                            for _, c in hw])
        self.structure = PoolingStructure.from_labels(
            {"hw_group": [c.hardware_group for _, c in hw], "candidate": list(self.hw_ids)},
            merge_global=self.priors.mu0_dist == "normal")
        st = self.structure
        # hardware groups reported in group_logit: pooled groups, or the one all-member group
        self.reported_groups = [g.split(" ", 1)[1] for g in st.groups] \
            if not st.global_levels else list(self.groups)

    # -- build ------------------------------------------------------------------------------
    def coords(self) -> dict[str, list]:
        return {"candidate": self.hw_ids, "hw_group": self.reported_groups}

    def data(self, executions: np.ndarray, unsafe: np.ndarray) -> dict[str, np.ndarray]:
        """Every data container: the counts and the normal approximations of the likelihood.

        Each candidate's logit is ≈ Normal(logit p̂, 1/P) with p̂ = (unsafe + ½) /
        (executions + 1) and P = (executions + 1) p̂ (1 − p̂) (0 without executions);
        :func:`models.pooling.pooled_tree` passes them up with the current scales.
        These numbers shape the sampler's geometry only, never the posterior.
        """
        n = np.asarray(executions, dtype=float)
        k = np.asarray(unsafe, dtype=float)
        phat = (k + 0.5) / (n + 1.0)
        prec = np.where(n > 0, (n + 1.0) * phat * (1.0 - phat), 0.0)
        px = prec * (np.log(phat) - np.log1p(-phat))
        return {"executions": np.asarray(executions, np.int64),
                "unsafe": np.asarray(unsafe, np.int64), "member_prec": prec,
                "member_prec_x": px}

    def build(self, executions: np.ndarray | None = None, unsafe: np.ndarray | None = None):
        """The sampled ``pm.Model`` with ``pm.Data`` containers (counts and approximations)."""
        import pymc as pm

        n = len(self.hw_ids)
        executions = np.zeros(n, np.int64) if executions is None else executions
        unsafe = np.zeros(n, np.int64) if unsafe is None else unsafe
        pr, st = self.priors, self.structure
        with pm.Model(coords=self.coords()) as model:
            d = {name: pm.Data(name, value, dims="candidate" if name in
                               ("executions", "unsafe") else None)
                 for name, value in self.data(executions, unsafe).items()}
            tau = {"hw_group": pr.sigma_group.rv("sigma_group"),
                   "candidate": pr.sigma_candidate.rv("sigma_candidate")}
            mu0 = pm.Logistic("mu0", pr.mu0_mu, pr.mu0_sigma) \
                if pr.mu0_dist == "logistic" else None
            tree = pooled_tree(st, tau, d["member_prec"], d["member_prec_x"],
                               mu0_mu=pr.mu0_mu, mu0_sigma=pr.mu0_sigma,
                               member_name="logit_p", member_dims="candidate", mu0=mu0)
            if st.global_levels:
                pm.Deterministic("group_logit", tree["mu0"][None], dims="hw_group")
            else:
                if mu0 is None:
                    pm.Deterministic("mu0", tree["mu0"])
                if st.groups:
                    pm.Deterministic("group_logit", tree["group"], dims="hw_group")
            logit_p = pm.Deterministic("logit_p", tree["member"], dims="candidate")
            pm.Deterministic("p_unsafe", pm.math.invlogit(logit_p), dims="candidate")
            pm.Binomial("obs", n=d["executions"], logit_p=logit_p, observed=d["unsafe"],
                        dims="candidate")
        return model

    def build_generative(self, executions: np.ndarray | None = None,
                         unsafe: np.ndarray | None = None):
        """The model written out level by level (module docstring): every hardware group has
        its own effect.  The same joint distribution as :meth:`build`; the generator of
        simulation-based calibration."""
        import pymc as pm

        n = len(self.hw_ids)
        executions = np.zeros(n, np.int64) if executions is None else executions
        unsafe = np.zeros(n, np.int64) if unsafe is None else unsafe
        pr = self.priors
        with pm.Model(coords={"candidate": self.hw_ids, "hw_group": self.groups}) as model:
            d = {name: pm.Data(name, value, dims="candidate" if name in
                               ("executions", "unsafe") else None)
                 for name, value in self.data(executions, unsafe).items()}
            if pr.mu0_dist == "logistic":
                mu0 = pm.Logistic("mu0", pr.mu0_mu, pr.mu0_sigma)
            else:
                mu0 = pm.Normal("mu0", pr.mu0_mu, pr.mu0_sigma)
            sigma_group = pr.sigma_group.rv("sigma_group")
            sigma_cand = pr.sigma_candidate.rv("sigma_candidate")
            z_group = pm.Normal("z_group", 0.0, 1.0, dims="hw_group")
            z_cand = pm.Normal("z_candidate", 0.0, 1.0, dims="candidate")
            group_logit = pm.Deterministic("group_logit", mu0 + sigma_group * z_group,
                                           dims="hw_group")
            logit_p = pm.Deterministic(
                "logit_p", group_logit[self.group_of_candidate] + sigma_cand * z_cand,
                dims="candidate")
            pm.Deterministic("p_unsafe", pm.math.invlogit(logit_p), dims="candidate")
            pm.Binomial("obs", n=d["executions"], logit_p=logit_p, observed=d["unsafe"],
                        dims="candidate")
        return model

    def compile_label(self) -> str:
        """The name its full compiles are timed under (:func:`models.compile_cache.progress_line`):
        the model and its size, so that an estimate is never one of another size."""
        return f"exec_risk ({len(self.hw_ids)} hardware candidates)"

    def _compiled(self):
        key = (tuple(self.hw_ids), tuple(self.group_of_candidate), self.priors)
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build(), label=self.compile_label())
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    # -- data -------------------------------------------------------------------------------
    def counts(self, executions: Any, unsafe: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validated (executions, unsafe) in hardware-candidate order.

        Accepts, for each, a DataArray over ``candidate``, a mapping id → count, or an array
        either over the hardware candidates (model order) or over every candidate of the set
        (set order, as returned by :meth:`belief.inputs.evidence.Evidence.safety_counts`).

        Raises
        ------
        InputError
            Naming ``safety_events``, the candidate and the rule: counts must be finite
            non-negative integers and unsafe ≤ executions.
        """
        n = self._align(executions, "executions")
        k = self._align(unsafe, "unsafe")
        for i, cid in enumerate(self.hw_ids):
            for name, v in (("executions", n[i]), ("unsafe", k[i])):
                if not np.isfinite(v) or v != np.floor(v):
                    raise InputError(TABLE, f"{name} must be an integer count, got {v!r}",
                                     row=cid)
                if v < 0:
                    raise InputError(TABLE, f"{name} must be >= 0 (negative count {v:g})",
                                     row=cid)
            if k[i] > n[i]:
                raise InputError(TABLE, f"unsafe ({k[i]:g}) exceeds executions ({n[i]:g})",
                                 row=cid)
        return n.astype(np.int64), k.astype(np.int64)

    def _align(self, values: Any, name: str) -> np.ndarray:
        if isinstance(values, xr.DataArray):
            missing = [c for c in self.hw_ids if c not in values["candidate"].values]
            if missing:
                raise InputError(TABLE, f"{name} has no entry for hardware candidate(s) "
                                        f"{missing}")
            return values.sel(candidate=self.hw_ids).to_numpy().astype(float)
        if isinstance(values, Mapping):
            return np.array([float(values.get(c, 0)) for c in self.hw_ids])
        arr = np.asarray(values, dtype=float).ravel()
        if arr.size == len(self.hw_ids):
            return arr
        if arr.size == len(self.candidates):
            return arr[[self.candidates.index(c) for c in self.hw_ids]]
        raise InputError(TABLE, f"{name} has {arr.size} entries; expected one per hardware "
                                f"candidate ({len(self.hw_ids)}) or per candidate "
                                f"({len(self.candidates)})")

    # -- fit --------------------------------------------------------------------------------
    def fit(self, executions: Any, unsafe: Any, *, draws: int = 1000, tune: int = 500,
            chains: int = 4, seed: int = 0, target_accept: float = TARGET_ACCEPT,
            thin: int = 1, progressbar: bool = False) -> xr.DataTree:
        """Sample the posterior of P_exec(unsafe | m) given execution counts.

        Parameters
        ----------
        executions, unsafe
            Executions n_m and unsafe outcomes k_m per candidate (see :meth:`counts`).

        Returns
        -------
        DataTree
            ``posterior`` with ``p_unsafe`` and ``logit_p`` over ``candidate`` (hardware
            candidates only), ``group_logit`` over the reported ``hw_group`` (module
            docstring), ``mu0`` (unless merged), ``sigma_group``, ``sigma_candidate``;
            ``sample_stats``; ``observed_data`` (``unsafe``) and ``constant_data``
            (``executions``, ``hardware_group``).
        """
        n, k = self.counts(executions, unsafe)
        compiled = self._compiled().with_data(**self.data(n, k))
        idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                       target_accept=target_accept, progressbar=progressbar, thin=thin,
                       timing=self.last_timing)
        post = slot_posterior(idata["posterior"].to_dataset())
        groups: dict[str, xr.Dataset] = {"posterior": post}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        coords = {"candidate": self.hw_ids}
        groups["observed_data"] = xr.Dataset({"unsafe": ("candidate", k)}, coords=coords)
        groups["constant_data"] = xr.Dataset(
            {"executions": ("candidate", n),
             "hardware_group": ("candidate", [self.groups[g] for g in self.group_of_candidate])},
            coords=coords)
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({"model": "exec_risk", "pooling": self.structure.describe(),
                         **{f"prior_{a}": (v.describe() if isinstance(v, ScalePrior) else v)
                            for a, v in vars(self.priors).items()}})
        return dt


def p_unsafe_draws(idata: xr.DataTree) -> xr.DataArray:
    """Posterior draws of p_unsafe as (``sample``, ``candidate``).

    ``sample`` stacks (chain, draw) chain-major, in the same order as the gains model's draws,
    so sample i of both comes from chain i // draws.
    """
    da = idata["posterior"]["p_unsafe"].transpose("chain", "draw", "candidate")
    arr = da.to_numpy()
    return xr.DataArray(arr.reshape(-1, arr.shape[-1]), dims=("sample", "candidate"),
                        coords={"candidate": da["candidate"].values}, name="p_unsafe")


def population_risk(idata: xr.DataTree, seed: int = 0) -> xr.Dataset:
    """Population-level execution risk on the probability scale, as posterior draws.

    From the hierarchy's parameters (per posterior draw s, with fresh z ~ Normal(0, 1) seeded
    by ``seed``):

    - ``p_typical`` = logit⁻¹(μ_0): the risk of the median candidate of the median hardware
      group;
    - ``p_new_candidate`` (over ``hw_group``) = logit⁻¹(group_logit_g + σ_cand·z): the
      posterior-predictive risk of a new, untested candidate on hardware group g;
    - ``p_new_group`` = logit⁻¹(μ_0 + σ_group·z_g + σ_cand·z): the same on new hardware.

    When the hardware-group level was merged into the global mean (a single hardware group,
    see :mod:`models.pooling`), the fit sampled m = μ_0 + σ_group·z_1 (``group_logit`` of the
    one group) and the likelihood depends on μ_0 and z_1 only through m.  μ_0 is then drawn
    exactly from its conditional given m: with a = ``mu0_mu``, σ_0 = ``mu0_sigma`` and
    σ_m² = σ_group², μ_0 | m ~ Normal(a + σ_0²/(σ_0² + σ_m²)·(m − a), σ_0² σ_m²/(σ_0² + σ_m²)).
    When no hardware group holds two or more candidates (one hardware candidate, or each on its
    own group), no group value is sampled: ``p_new_candidate`` is empty over ``hw_group`` and
    only the typical and the new-hardware risks are returned.

    Returns a Dataset over ``sample`` (chain-major, as :func:`p_unsafe_draws`).
    """
    post = idata["posterior"]

    def stacked(name: str) -> np.ndarray:
        da = post[name]
        dims = ("chain", "draw", *[d for d in da.dims if d not in ("chain", "draw")])
        arr = da.transpose(*dims).to_numpy()
        return arr.reshape(-1, *arr.shape[2:])

    s_group, s_cand = stacked("sigma_group"), stacked("sigma_candidate")
    rng = np.random.default_rng([seed, 5])
    if "group_logit" not in post.data_vars:  # no group pools ≥ 2 candidates (one per group)
        mu0 = stacked("mu0")
        n = mu0.shape[0]
        from scipy.special import expit

        new_group = expit(mu0 + s_group * rng.standard_normal(n)
                          + s_cand * rng.standard_normal(n))
        return xr.Dataset({"p_typical": ("sample", expit(mu0)),
                           "p_new_candidate": (("sample", "hw_group"), np.zeros((n, 0))),
                           "p_new_group": ("sample", new_group)},
                          coords={"hw_group": np.array([], dtype=str)})
    group_logit = stacked("group_logit")  # (S, G)
    if "mu0" in post.data_vars:
        mu0 = stacked("mu0")
    else:  # hw_group merged into μ_0: split m = μ_0 + σ_group z_1 exactly (docstring)
        a = float(idata.attrs["prior_mu0_mu"])
        s0 = float(idata.attrs["prior_mu0_sigma"])
        merged = s_group**2
        shrink = s0**2 / (s0**2 + merged)
        mu0 = (a + shrink * (group_logit[:, 0] - a)
               + np.sqrt(shrink * merged) * rng.standard_normal(group_logit.shape[0]))
    n = mu0.shape[0]
    from scipy.special import expit  # not scipy.stats: reading a belief stays light
    new_cand = expit(group_logit + s_cand[:, None] * rng.standard_normal(group_logit.shape))
    new_group = expit(mu0 + s_group * rng.standard_normal(n) + s_cand * rng.standard_normal(n))
    groups = [str(g) for g in post["group_logit"]["hw_group"].values]
    return xr.Dataset({"p_typical": ("sample", expit(mu0)),
                       "p_new_candidate": (("sample", "hw_group"), new_cand),
                       "p_new_group": ("sample", new_group)},
                      coords={"hw_group": groups})


def _check_runs(runs: int) -> int:
    if isinstance(runs, bool) or not float(runs).is_integer() or runs < 0:
        raise InputError("runs", f"runs must be an integer >= 0, got {runs!r}")
    return int(runs)


def simulate(p_draws: np.ndarray, runs: int, rng: np.random.Generator) -> np.ndarray:
    """Unsafe counts of a future batch of ``runs`` executions, one per posterior draw.

    Y_s ~ Binomial(runs, p_s) for every draw p_s of P_exec(unsafe | m).

    Parameters
    ----------
    p_draws : array (S,)
        Posterior draws of one candidate's p_unsafe.
    runs : int
        Executions in the batch (≥ 0).
    rng : numpy Generator

    Returns
    -------
    array (S,) of int
    """
    p = np.asarray(p_draws, dtype=float)
    return rng.binomial(_check_runs(runs), p)


def loglik(p_draws: np.ndarray, runs: int, y: np.ndarray) -> np.ndarray:
    """Binomial log-likelihood of observed unsafe counts under every posterior draw.

    log p(y_j | p_s) = log Binomial(y_j; runs, p_s)  (``models.likelihoods.binomial_logpmf``).

    Parameters
    ----------
    p_draws : array (S,)
    runs : int
    y : array (J,)
        Unsafe counts, integers in [0, runs].

    Returns
    -------
    array (J, S)
    """
    runs = _check_runs(runs)
    y = np.asarray(y)
    if np.any(y < 0) or np.any(y > runs) or np.any(y != np.floor(y)):
        raise InputError("y", f"unsafe counts must be integers in [0, runs={runs}]")
    p = np.asarray(p_draws, dtype=float)
    from models.likelihoods import binomial_logpmf  # a decision needs no scipy.stats

    return binomial_logpmf(y.reshape(-1)[:, None], runs, p.reshape(-1)[None, :])
