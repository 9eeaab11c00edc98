"""Hierarchical model of the realised costs ΔC_r(m) of executed actions, per resource r.

The candidate file gives every candidate a nominal cost c̃_r(m); the ``costs`` table
(:mod:`belief.inputs.costs`) records what each executed action actually consumed.  For every
(candidate, resource) cell with c̃_r(m) > 0, the realised amounts are log-normal about the
nominal cost, with an offset δ_{r,m} partially pooled candidate → method → lens → resource::

    log ΔC_r(m)_i = log c̃_r(m) + δ_{r,m} + σ_r · ε_i,   ε_i ~ Normal(0, 1)
                                          (a two-component mixture for a heavy-tailed r, below)
    δ_{r,m}       ~ Normal(β_{r,method(m)}, τ_cand,r)
    β_{r,j}       = α_{r,lens(j)} + τ_method,r · z_{r,j}
    α_{r,l}       = μ_r + τ_lens,r · z_{r,l}
    μ_r           ~ Normal(offset_mu, offset_sigma)
    τ_·,r         ~ tau_lens / tau_method / tau_candidate   (ScalePrior: half_normal,
                                                 half_student_t, half_cauchy, exponential;
                                                 or known, ``known_scales``)
    σ_r           = noise_floor + σ̃_r,   σ̃_r ~ sigma (ScalePrior)   (or σ_r known)

With offset_mu = 0 the prior median of δ is 0, so the nominal cost c̃ is the prior median of
every realised cost (and of the predictive of a never-executed candidate) — for a resource
without the repair tail below; with it (π ~ Beta(1, 9), κ ~ LogNormal(0, 0.5)) the prior
predictive median is ≈ 1.04 c̃ (its log ≈ +0.04, by Monte Carlo).  A method is the
pair (lens, method label), as in :mod:`models.gains`.

Repair tail (``heavy_tailed``, e.g. real-robot hours).  A heavy-tailed resource r is a
two-component log-normal mixture: an execution is ordinary with probability 1 − π_r, or a
"repair" with probability π_r that adds a positive shift κ_r and a known extra spread ω to the
log cost::

    log ΔC_r(m)_i = log c̃_r(m) + δ_{r,m} + σ_r · ε_i                       (1 − π_r)
                  = log c̃_r(m) + δ_{r,m} + κ_r + √(σ_r² + ω²) · ε_i        (π_r)
    π_r ~ Beta(tail_prob_a, tail_prob_b),   κ_r ~ LogNormal(log tail_shift, tail_shift_sd),
    ω = tail_sd (known)

(the repair indicator is marginalised in the likelihood).  So a rare multi-fold overrun is
explained by the tail instead of dragging δ, and — unlike a Student-t on the log scale, whose
E[e^t] is infinite — every moment of ΔC is finite.  Given the parameters θ = (δ, σ, π, κ)::

    E[ΔC_r(m) | θ]       = c̃ · e^{δ + σ²/2} · (1 − π + π · e^{κ + ω²/2})
    Pr(ΔC_r(m) ≤ b | θ)  = (1 − π) · Φ((log(b/c̃) − δ)/σ)
                           + π · Φ((log(b/c̃) − δ − κ)/√(σ² + ω²))

(:func:`conditional_mean`, :func:`conditional_cdf`; a resource without a tail is π = 0).  π_r
and κ_r are shared by the candidates of resource r (a repair is a property of the hardware, not
of the method), so the tail is pooled completely across candidates, and δ keeps the partial
pooling above.  With a few realised costs per campaign π_r and κ_r stay close to their prior:
the defaults (π ≈ 0.1 with a Beta(1, 9), κ with median 1 — a repair costs ≈ e^1 = 2.7× — and
log-s.d. 0.5, ω = 0.3) are a stated belief about robot repairs, not learned values.

Default priors.  They state how far a candidate file's nominal costs are from the truth: a
never-executed candidate's prior predictive log cost has s.d. ≈ 0.35 (δ: √(0.15² + 0.1² + 0.1²
+ E τ_cand²) ≈ 0.29; noise σ ≈ 0.2), i.e. its 90 % interval is ≈ ×0.56–1.8 the nominal.  (Before
the calibration check of the cost model the defaults were μ_r ~ Normal(0, 0.5) and every scale
HalfNormal(0.3): a prior predictive s.d. ≈ 0.78, a factor 2.2 at one s.d., whose 90 % intervals
covered ≈ 99 % of the synthetic world's realised costs in short campaigns — the prior, not the
predictive machinery, was too wide.)

Zero nominal costs stay exactly zero: a cell with c̃_r(m) = 0 has no parameters and its
predictive cost is 0 in every draw.  Data the model cannot represent are refused, naming the
``costs`` table, the row and the rule: a zero realised amount where c̃ > 0 (log-normal costs are
positive) and a positive one where c̃ = 0 (zero nominal costs are exact).

Noise floor.  Realised costs are often recorded exactly at the nominal amount (a cluster that
always bills 80 GPU-h); two equal realised amounts of one cell make the likelihood grow like
σ_r^{-1} as σ_r → 0, which no scale prior that is finite at 0 can tame (the posterior would be
improper).  ``noise_floor`` (default 0.01 on the log scale, ≈ 1 % relative) is the recording
resolution below which spreads are not resolved; it keeps the posterior proper.

Geometry (the model above is unchanged by it).  Each resource's modelled cells are one pooled
tree (:mod:`models.pooling`, as the gains and execution-risk models): a method or lens with a
single modelled candidate is part of that candidate's own deviation (scale √(Σ τ²) over its
single-member levels), levels with the same members are one group, a level holding every
member is merged into μ_r — a sum of independent normals is normal, so the prior is
unchanged.  Without the merge, a chain candidate → method → lens of single members is a
ridge (only the sum is identified) that the sampler crosses slowly: 6 of 40 fits of the
benchmark at 4 × 500 draws had R-hat 1.011–1.012 (on ``method_offset``, ``lens_offset``,
``mu``).  Every latent value is sampled by data-informed non-centring
(:func:`models.priors.whitened_normal`) from the normal approximation of its likelihood: a
cell's precision P = n_{r,m}·w/σ_r² (w = 1 without a tail) about its mean log residual
x̂, passed up the tree with the current scales.  (For a heavy-tailed resource the
precision is scaled by w = 1 − E[π], the prior share of ordinary executions: a repair tells
little about δ.  This only shapes the geometry.)  So neither the funnel at small τ nor the
inverse funnel at large τ appears — realised costs recorded exactly at the nominal amount pin
every level at once.

Not modelled: correlation between the resources of one execution (a repair that costs robot
hours and engineer hours at once) — the noise ε is independent across resources given δ and
σ; and any dependence of cost on the policy or the step.

The model is compiled once per candidate structure (nutpie, numba backend) with fixed-size
``pm.Data`` containers over ``max_observations`` observation slots (unused ones masked out);
a re-fit after new realised costs swaps the data without recompiling.

For the allocator, :func:`decision_draws` gives joint predictive draws of ΔC_r(m) over
(``sample``, ``candidate``, ``resource``) for the next execution of every candidate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.costs import validate_costs
from models.pooling import PoolingStructure, pooled_tree
from models.priors import ScalePrior, check_priors, priors_as_dict
from models.sampling import sample, slot_posterior

__all__ = ["SCALES", "TARGET_ACCEPT", "CostEncoding", "CostModel", "CostPriors",
           "conditional_cdf", "conditional_mean", "decision_draws", "encode_costs"]

TABLE = "costs"
SCALES = ("tau_lens", "tau_method", "tau_candidate", "sigma")
"""The scale parameters of the cost model (each a :class:`models.priors.ScalePrior`)."""
TARGET_ACCEPT = 0.9
"""Default NUTS target acceptance of the cost model (fit escalation raises it)."""


@dataclass(frozen=True)
class CostPriors:
    """Priors of the cost model (log scale: δ = log realised − log nominal, in nepers).

    Attributes
    ----------
    offset_mu, offset_sigma : float
        Normal prior of the resource-wide offset μ_r (0: the nominal cost is the prior
        median; 0.15 ≈ a factor e^{±0.15} = 0.86–1.16 at one s.d.).  The defaults (μ_r
        0.15, τ_lens and τ_method HalfNormal(0.1), τ_cand and σ̃ HalfNormal(0.2)) put a
        never-executed candidate's log cost at ≈ 0.35 s.d. about the nominal (δ ≈ 0.29,
        noise ≈ 0.2): a nominal cost is an estimate good to about ±40 % (module docstring,
        "Default priors").
    tau_lens, tau_method, tau_candidate : ScalePrior
        Priors of the pooling scales τ_lens,r, τ_method,r, τ_cand,r (one per resource, same
        prior); a number v means HalfNormal(v) (:func:`models.priors.scale_prior`).
    sigma : ScalePrior
        Prior of the run-to-run spread σ̃_r of the log cost (σ_r = noise_floor + σ̃_r).
    noise_floor : float
        Recording resolution of the log cost, ≥ 0 (see the module docstring; 0 lets two
        equal realised amounts make the posterior improper).
    heavy_tailed : tuple of str
        Resources with a repair tail (the two-component mixture of the module docstring, e.g.
        ``("real_h",)``); each must be a resource of the candidate set.
    tail_prob_a, tail_prob_b : float
        Beta prior of the repair probability π_r (default Beta(1, 9): mean 0.1).
    tail_shift, tail_shift_sd : float
        LogNormal prior of the repair's log-cost shift κ_r: median ``tail_shift`` (nepers;
        1 ≈ a 2.7× cost) and log-s.d. ``tail_shift_sd``.  κ_r > 0: a repair costs more.
    tail_sd : float
        ω, the repair's known extra spread of the log cost (the repair component has s.d.
        √(σ_r² + ω²)).
    known_scales : mapping name → value, optional
        Scales held at a known value instead of being sampled (names from :data:`SCALES`;
        a known ``sigma`` is σ_r itself, no floor added) — e.g. the conjugate check.
        Stored as a sorted tuple of (name, value) pairs.

    Raises
    ------
    InputError
        Naming ``CostPriors``, the field and the allowed values.
    """

    offset_mu: float = 0.0
    offset_sigma: float = 0.15
    tau_lens: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.1))
    tau_method: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.1))
    tau_candidate: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.2))
    sigma: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.2))
    noise_floor: float = 0.01
    heavy_tailed: tuple[str, ...] = ()
    tail_prob_a: float = 1.0
    tail_prob_b: float = 9.0
    tail_shift: float = 1.0
    tail_shift_sd: float = 0.5
    tail_sd: float = 0.3
    known_scales: Any = ()

    def __post_init__(self) -> None:
        heavy = self.heavy_tailed
        if isinstance(heavy, str) or not isinstance(heavy, tuple | list) \
                or not all(isinstance(r, str) for r in heavy):
            raise InputError("CostPriors", "heavy_tailed must be a tuple of resource names "
                                           f"(e.g. ('real_h',)), got {heavy!r}")
        object.__setattr__(self, "heavy_tailed", tuple(heavy))
        known = self.known_scales
        pairs = list(known.items()) if isinstance(known, Mapping) else known
        try:
            pairs = [(str(k), v) for k, v in pairs]
        except (TypeError, ValueError):
            raise InputError("CostPriors", "known_scales must map scale names to values, got "
                                           f"{known!r}") from None
        for k, v in pairs:
            if k not in SCALES:
                raise InputError("CostPriors", f"known_scales names {k!r}; allowed: "
                                               f"{list(SCALES)}")
            if isinstance(v, bool) or not isinstance(v, int | float | np.number) \
                    or not np.isfinite(v) or v <= 0:
                raise InputError("CostPriors", f"known_scales[{k!r}] must be a finite number "
                                               f"> 0, got {v!r}")
        object.__setattr__(self, "known_scales", tuple(sorted((k, float(v)) for k, v in pairs)))
        check_priors(self, locations=("offset_mu", "noise_floor"),
                     skip=("heavy_tailed", "known_scales"),
                     scales={name: "half_normal" for name in SCALES})
        if self.noise_floor < 0:
            raise InputError("CostPriors", f"noise_floor must be >= 0, got {self.noise_floor}")

    @property
    def known(self) -> dict[str, float]:
        """The known scales as a dict."""
        return dict(self.known_scales)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        out = priors_as_dict(self)
        out["heavy_tailed"] = list(self.heavy_tailed)
        out["known_scales"] = dict(self.known_scales)
        return out


@dataclass(frozen=True)
class CostEncoding:
    """Fixed-size arrays of realised log costs (unused slots masked) and per-cell summaries.

    ``y`` (N,) log realised amounts; ``resource``/``candidate`` (N,) their cell (indices into
    the model's resources and candidates); ``mask`` (N,) 1 for used slots; ``count`` and
    ``resid_mean`` (R, C): the number of realised amounts per cell and their mean log
    residual log ΔC − log c̃ (0 without data).
    """

    y: np.ndarray
    resource: np.ndarray
    candidate: np.ndarray
    mask: np.ndarray
    count: np.ndarray
    resid_mean: np.ndarray

    def data(self) -> dict[str, np.ndarray]:
        return {"obs_y": self.y, "obs_resource": self.resource, "obs_candidate": self.candidate,
                "obs_mask": self.mask, "cell_count": self.count,
                "cell_resid_mean": self.resid_mean}


def encode_costs(costs: pd.DataFrame, ids: list[str], resources: list[str],
                 nominal: np.ndarray, max_observations: int) -> CostEncoding:
    """Encode a validated costs table into ``max_observations`` slots.

    Parameters
    ----------
    costs : DataFrame
        Validated by :func:`belief.inputs.costs.validate_costs`.
    ids, resources : list of str
        The modelled candidates and resources (those with a positive nominal cost).
    nominal : array (C, R)
        c̃_r(m) of the modelled cells, in ``ids`` × ``resources`` order.
    max_observations : int

    Raises
    ------
    InputError
        Naming ``costs`` and the row: a zero realised amount where c̃ > 0, a positive one
        where c̃ = 0, or more realised amounts than observation slots.
    """
    y, res_idx, cand_idx = [], [], []
    row_ids = costs["candidate"].astype(str).to_numpy()
    for i, cid in enumerate(row_ids):
        for r_name in costs.columns:
            if r_name in ("step", "candidate", "policy", "note"):
                continue
            amount = float(costs[r_name].iloc[i])
            in_model = cid in ids and r_name in resources
            c_nom = nominal[ids.index(cid), resources.index(r_name)] if in_model else 0.0
            if c_nom <= 0:
                if amount > 0:
                    raise InputError(TABLE, f"{r_name} = {amount:g} realised for {cid!r}, whose "
                                            f"nominal {r_name} cost is 0: zero nominal costs "
                                            "are exact in the cost model; give the candidate "
                                            "file a positive nominal cost", row=i)
                continue
            if amount <= 0:
                raise InputError(TABLE, f"{r_name} = 0 realised for {cid!r}, whose nominal "
                                        f"{r_name} cost is {c_nom:g}: the log-normal cost model "
                                        "needs a positive realised amount", row=i)
            y.append(np.log(amount))
            res_idx.append(resources.index(r_name))
            cand_idx.append(ids.index(cid))
    n = len(y)
    if n > max_observations:
        raise InputError(TABLE, f"{n} realised amounts exceed max_observations="
                                f"{max_observations}; build the cost model with more slots")
    pad = max_observations - n
    y_arr = np.concatenate([np.asarray(y, float), np.zeros(pad)])
    r_arr = np.concatenate([np.asarray(res_idx, np.int64), np.zeros(pad, np.int64)])
    c_arr = np.concatenate([np.asarray(cand_idx, np.int64), np.zeros(pad, np.int64)])
    mask = np.concatenate([np.ones(n), np.zeros(pad)])
    count = np.zeros((len(resources), len(ids)))
    total = np.zeros((len(resources), len(ids)))
    for k in range(n):
        count[r_arr[k], c_arr[k]] += 1.0
        total[r_arr[k], c_arr[k]] += y_arr[k] - np.log(nominal[c_arr[k], r_arr[k]])
    resid_mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    return CostEncoding(y_arr, r_arr, c_arr, mask, count, resid_mean)


_COMPILED: dict[tuple, Any] = {}


@dataclass
class CostModel:
    """Spec of the hierarchical cost model for one candidate set.

    Parameters
    ----------
    candidates : CandidateSet
        The nominal costs c̃_r(m) are ``candidates.costs()``; only cells with c̃ > 0 are
        modelled (the modelled candidates and resources are those with at least one).
    priors : CostPriors
    max_observations : int
        Realised-amount slots compiled into the model (one per executed action and resource
        with a positive nominal cost).

    Examples
    --------
    >>> model = CostModel(candidates, CostPriors(heavy_tailed=("real_h",)))  # doctest: +SKIP
    >>> idata = model.fit(costs)                     # compiles once, then re-uses
    >>> q = model.decision_draws(idata, rng)         # (sample, candidate, resource) draws
    """

    candidates: CandidateSet
    priors: CostPriors = field(default_factory=CostPriors)
    max_observations: int = 256
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.priors, CostPriors):
            raise InputError("CostModel.priors", f"expected CostPriors, got "
                                                 f"{type(self.priors).__name__}")
        mo = self.max_observations
        if isinstance(mo, bool) or not isinstance(mo, int | np.integer) or mo < 1:
            raise InputError("CostModel.max_observations", f"must be an integer >= 1, got {mo!r}")
        all_res = list(self.candidates.resources)
        unknown = [r for r in self.priors.heavy_tailed if r not in all_res]
        if unknown:
            raise InputError("CostPriors", f"heavy_tailed names {unknown}, which are not "
                                           f"resources of the candidates; resources: {all_res}")
        nominal = np.asarray(self.candidates.costs().values, dtype=float)  # (C_all, R_all)
        positive = nominal > 0
        if not positive.any():
            raise InputError(self.candidates.source, "the cost model needs at least one "
                                                     "candidate with a positive nominal cost")
        self.ids = [c for c, keep in zip(self.candidates.ids, positive.any(axis=1), strict=True)
                    if keep]
        self.resources = [r for r, keep in zip(all_res, positive.any(axis=0), strict=True)
                          if keep]
        rows = [self.candidates.ids.index(c) for c in self.ids]
        cols = [all_res.index(r) for r in self.resources]
        self.nominal = nominal[np.ix_(rows, cols)]  # (C, R)
        cands = [self.candidates[c] for c in self.ids]
        self.methods = list(dict.fromkeys(f"{c.lens}/{c.method}" for c in cands))
        self.lenses = list(dict.fromkeys(c.lens for c in cands))
        self.method_of_candidate = np.array([self.methods.index(f"{c.lens}/{c.method}")
                                             for c in cands])
        self.lens_of_method = np.array([self.lenses.index(m.split("/", 1)[0])
                                        for m in self.methods])
        self.heavy = np.array([r in self.priors.heavy_tailed for r in self.resources])
        # per resource: the modelled cells (c̃_r > 0) and their pooling tree, with every
        # single-member level merged exactly into the member's own deviation
        self.members = [np.flatnonzero(self.nominal[:, k] > 0) for k in range(len(self.resources))]
        self.structures = [PoolingStructure.from_labels(
            {"lens": [cands[i].lens for i in idx],
             "method": [self.methods[self.method_of_candidate[i]] for i in idx],
             "candidate": [self.ids[i] for i in idx]}) for idx in self.members]

    # -- build ------------------------------------------------------------------------------
    def coords(self) -> dict[str, list]:
        return {"resource": self.resources, "candidate": self.ids,
                "obs_slot": list(range(self.max_observations)),
                **({"tail_resource": [r for r, h in zip(self.resources, self.heavy, strict=True)
                                      if h]} if self.heavy.any() else {})}

    def describe(self) -> str:
        """The merged pooling structure of every resource, in words."""
        return "; ".join(f"{r}: {st.describe()}"
                         for r, st in zip(self.resources, self.structures, strict=True))

    def build(self, encoding: CostEncoding | None = None):
        """The ``pm.Model`` with ``pm.Data`` containers of the realised log costs.

        Per resource r, the offsets δ_{r,m} of its modelled cells are one pooled tree
        (:func:`models.pooling.pooled_tree`: candidate → method → lens → μ_r, single-member
        levels merged exactly, every latent value whitened with the data's normal
        approximation n·w/σ_r², w = 1 − E[π] for a resource with a repair tail).  A repair
        tail adds ``tail_prob`` π and ``tail_shift`` κ over ``tail_resource``; its likelihood
        is the two-component mixture with the repair indicator marginalised.
        """
        import pymc as pm
        import pytensor.tensor as pt

        if encoding is None:
            encoding = encode_costs(_no_rows(self.candidates), self.ids, self.resources,
                                    self.nominal, self.max_observations)
        pr = self.priors
        known = pr.known
        n_r, n_c = len(self.resources), len(self.ids)
        log_nominal = np.log(np.where(self.nominal > 0, self.nominal, 1.0)).T  # (R, C)
        with pm.Model(coords=self.coords()) as model:
            d = {name: pm.Data(name, value, dims="obs_slot" if name.startswith("obs_")
                               else ("resource", "candidate"))
                 for name, value in encoding.data().items()}
            scales = {}
            for name in SCALES:
                if name in known:
                    scales[name] = pm.Deterministic(name, pt.ones(n_r) * known[name],
                                                    dims="resource")
                else:
                    scales[name] = _scale_rv(name if name != "sigma" else "sigma_free",
                                             getattr(pr, name))
            sigma = scales["sigma"] if "sigma" in known else \
                pm.Deterministic("sigma", pr.noise_floor + scales["sigma"], dims="resource")
            weight = np.where(self.heavy, pr.tail_prob_b / (pr.tail_prob_a + pr.tail_prob_b),
                              1.0)
            rows, mus = [], []
            for k, (idx, st) in enumerate(zip(self.members, self.structures, strict=True)):
                tau = {lv: scales[f"tau_{lv}"][k] for lv in st.used_levels}
                prec = d["cell_count"][k, idx] * weight[k] / sigma[k] ** 2
                prec_x = prec * d["cell_resid_mean"][k, idx]
                tree = pooled_tree(st, tau, prec, prec_x, mu0_mu=pr.offset_mu,
                                   mu0_sigma=pr.offset_sigma, member_name=f"delta_{k}",
                                   prefix=f"r{k}_")
                place = np.zeros((len(idx), n_c))
                place[np.arange(len(idx)), idx] = 1.0
                rows.append(pt.dot(tree["member"], place))  # zeros at unmodelled cells
                mus.append(tree["mu0"])
            delta = pm.Deterministic("delta", pt.stack(rows), dims=("resource", "candidate"))
            pm.Deterministic("mu", pt.stack(mus), dims="resource")
            r_i, c_i = d["obs_resource"], d["obs_candidate"]
            centre = pt.as_tensor(log_nominal)[r_i, c_i] + delta[r_i, c_i]
            scale = sigma[r_i]
            logp = pm.logp(pm.Normal.dist(centre, scale), d["obs_y"])
            if self.heavy.any():  # the repair tail: a mixture, the indicator marginalised
                prob = pm.Beta("tail_prob", pr.tail_prob_a, pr.tail_prob_b, dims="tail_resource")
                shift = pm.LogNormal("tail_shift", np.log(pr.tail_shift), pr.tail_shift_sd,
                                     dims="tail_resource")
                slot = np.cumsum(self.heavy) - 1  # resource → its tail_resource index
                slot_i = pt.as_tensor(np.where(self.heavy, slot, 0))[r_i]
                p_i, k_i = prob[slot_i], shift[slot_i]
                logp_tail = pm.logp(pm.Normal.dist(centre + k_i,
                                                   pt.sqrt(scale ** 2 + pr.tail_sd ** 2)),
                                    d["obs_y"])
                mixed = pt.logaddexp(pt.log1p(-p_i) + logp, pt.log(p_i) + logp_tail)
                logp = pt.switch(pt.as_tensor(self.heavy)[r_i], mixed, logp)
            pm.Potential("realised", (d["obs_mask"] * logp).sum())
        return model

    def compile_label(self) -> str:
        """The name its full compiles are timed under (:func:`models.compile_cache.progress_line`):
        the model and its size, so that an estimate is never one of another size."""
        return f"costs ({len(self.ids)} candidates)"

    def _compiled(self):
        key = (tuple(self.ids), tuple(self.resources), tuple(self.methods), tuple(self.lenses),
               tuple(self.method_of_candidate), tuple(self.lens_of_method),
               self.nominal.tobytes(), self.priors, self.max_observations)
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build(), label=self.compile_label())
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    # -- fit --------------------------------------------------------------------------------
    def encode(self, costs: pd.DataFrame) -> CostEncoding:
        """Validate ``costs`` (:func:`validate_costs`) and encode it (:func:`encode_costs`)."""
        clean = validate_costs(costs, self.candidates)
        return encode_costs(clean, self.ids, self.resources, self.nominal,
                            self.max_observations)

    def fit(self, costs: pd.DataFrame, *, draws: int = 1000, tune: int = 500, chains: int = 4,
            seed: int = 0, target_accept: float = TARGET_ACCEPT, thin: int = 1,
            progressbar: bool = False) -> xr.DataTree:
        """Sample the posterior of the cost model given a realised-costs table.

        Returns
        -------
        DataTree
            ``posterior`` with ``delta`` (resource, candidate; 0 at unmodelled cells),
            ``sigma``, ``mu`` and the pooling scales ``tau_*`` over ``resource``, and the
            whitened group values of each resource's tree (``r<k>_group_<depth>``);
            ``sample_stats``; ``constant_data`` with ``nominal`` (candidate, resource) and the
            realised amounts per cell (``count``).  Attributes record the priors and the
            heavy-tailed resources.
        """
        enc = self.encode(costs)
        self.last_timing.pop("compile_s", None)
        compiled = self._compiled().with_data(**enc.data())
        idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                       target_accept=target_accept, progressbar=progressbar, thin=thin,
                       timing=self.last_timing)
        post = slot_posterior(idata["posterior"].to_dataset()).drop_vars("sigma_free",
                                                                         errors="ignore")
        groups: dict[str, xr.Dataset] = {"posterior": post}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        coords = {"candidate": self.ids, "resource": self.resources}
        groups["constant_data"] = xr.Dataset(
            {"nominal": (("candidate", "resource"), self.nominal),
             "count": (("candidate", "resource"), enc.count.T)}, coords=coords)
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({"model": "costs", "max_observations": self.max_observations,
                         "pooling": self.describe(),
                         "heavy_tailed": ",".join(self.priors.heavy_tailed),
                         "known_scales": ",".join(f"{k}={v:g}"
                                                  for k, v in self.priors.known_scales),
                         **{f"prior_{k}": (v.describe() if isinstance(v, ScalePrior) else v)
                            for k, v in vars(self.priors).items()
                            if k not in ("heavy_tailed", "known_scales")}})
        return dt

    # -- decision quantities ----------------------------------------------------------------
    def decision_draws(self, idata: xr.DataTree, rng: np.random.Generator) -> xr.Dataset:
        """Joint predictive cost draws of the next execution (see :func:`decision_draws`)."""
        return decision_draws(idata, self.candidates, rng)


@dataclass(frozen=True)
class _Params:
    """A cost fit's parameters per posterior draw, over every candidate and resource of the
    set (set order): ``log_med`` (S, C, R) = log c̃ + δ (−inf where c̃ = 0), ``sigma`` (S, R),
    the repair tail's ``prob`` π and ``shift`` κ (S, R; 0 for a resource without a tail) and
    ``omega`` ω."""

    log_med: np.ndarray
    sigma: np.ndarray
    prob: np.ndarray
    shift: np.ndarray
    omega: float
    heavy: list[str]


def _params(idata: xr.DataTree, candidates: CandidateSet) -> _Params:
    post = idata["posterior"].to_dataset()
    ids, resources = list(candidates.ids), list(candidates.resources)
    nominal = np.asarray(candidates.costs().sel(candidate=ids, resource=resources).values,
                         dtype=float)
    m_ids = [str(c) for c in post["candidate"].values]
    m_res = [str(r) for r in post["resource"].values]
    fitted = idata["constant_data"]["nominal"].sel(candidate=m_ids, resource=m_res).values
    if not (set(m_ids) <= set(ids) and set(m_res) <= set(resources)):
        raise InputError("CostModel.decision_draws", "the cost fit is of another candidate set "
                                                     f"(it models {m_ids} × {m_res})")
    rows = [ids.index(c) for c in m_ids]
    cols = [resources.index(r) for r in m_res]
    if not np.array_equal(nominal[np.ix_(rows, cols)], fitted) \
            or int((nominal > 0).sum()) != int((fitted > 0).sum()):
        raise InputError("CostModel.decision_draws", "the cost fit is of another candidate set "
                                                     "(its nominal costs differ)")
    delta = _stack(post["delta"].transpose("chain", "draw", "candidate", "resource"))
    n = delta.shape[0]
    sub = np.where(fitted[None] > 0, np.log(np.where(fitted > 0, fitted, 1.0)) + delta, -np.inf)
    log_med = np.full((n, len(ids), len(resources)), -np.inf)
    log_med[np.ix_(np.arange(n), rows, cols)] = sub
    sigma, prob, shift = (np.zeros((n, len(resources))) for _ in range(3))
    sigma[:, cols] = _stack(post["sigma"].transpose("chain", "draw", "resource"))
    heavy = [str(r) for r in post["tail_resource"].values] if "tail_prob" in post else []
    for r in heavy:
        k = resources.index(r)
        prob[:, k] = _stack(post["tail_prob"].sel(tail_resource=r))
        shift[:, k] = _stack(post["tail_shift"].sel(tail_resource=r))
    return _Params(log_med, sigma, prob, shift, float(idata.attrs.get("prior_tail_sd", 0.0)),
                   heavy)


def decision_draws(idata: xr.DataTree, candidates: CandidateSet,
                   rng: np.random.Generator) -> xr.Dataset:
    """Joint posterior-predictive draws of ΔC_r(m) for the next execution of every candidate.

    Per posterior draw s (chain-major, as the other models' draws)::

        ΔC_r(m)^(s) = c̃_r(m) · exp(δ_{r,m}^(s) + σ_r^(s) · ε),   ε ~ Normal(0, 1),
                      fresh per (s, m, r); for a resource with a repair tail, with a fresh
                      B ~ Bernoulli(π_r^(s)):  exp(δ + B·κ_r^(s) + √(σ_r² + B·ω²) · ε);
        ΔC_r(m)^(s) = 0 where c̃_r(m) = 0.

    Parameters
    ----------
    idata : DataTree
        A fit of :class:`CostModel` on ``candidates``.
    candidates : CandidateSet
    rng : numpy Generator

    Returns
    -------
    Dataset
        ``cost`` (sample, candidate, resource) over every candidate and resource of the set
        (set order); ``cost_median`` (sample, candidate, resource) = c̃ · e^δ, the median of
        the ordinary component given the draw; ``cost_sigma`` (sample, resource) = σ_r (0 for
        a resource without a positive nominal cost).  Attributes: ``heavy_tailed``.
    """
    p = _params(idata, candidates)
    eps = rng.standard_normal(p.log_med.shape)
    repair = np.zeros(p.log_med.shape, dtype=bool)
    for r in p.heavy:
        k = list(candidates.resources).index(r)
        repair[:, :, k] = rng.random(repair.shape[:2]) < p.prob[:, None, k]
    log_cost = (p.log_med + repair * p.shift[:, None, :]
                + np.sqrt(p.sigma[:, None, :] ** 2 + repair * p.omega ** 2) * eps)
    finite = np.isfinite(p.log_med)
    cost = np.where(finite, np.exp(np.where(finite, log_cost, 0.0)), 0.0)
    median = np.where(finite, np.exp(np.where(finite, p.log_med, 0.0)), 0.0)
    coords = {"candidate": list(candidates.ids), "resource": list(candidates.resources)}
    return xr.Dataset({"cost": (("sample", "candidate", "resource"), cost),
                       "cost_median": (("sample", "candidate", "resource"), median),
                       "cost_sigma": (("sample", "resource"), p.sigma)},
                      coords=coords, attrs={"heavy_tailed": ",".join(p.heavy)})


def conditional_mean(idata: xr.DataTree, candidates: CandidateSet) -> np.ndarray:
    """E[ΔC_r(m) | θ^(s)] per posterior draw, (S, C, R) in set order (module docstring)::

        E[ΔC | θ] = c̃ · e^{δ + σ²/2} · (1 − π + π · e^{κ + ω²/2})     (π = 0 without a tail)

    and 0 where c̃ = 0.  Its mean over s is the predictive mean E[ΔC_r(m)] without the Monte
    Carlo noise of the predictive draws.
    """
    p = _params(idata, candidates)
    finite = np.isfinite(p.log_med)
    base = np.exp(np.where(finite, p.log_med, 0.0) + p.sigma[:, None, :] ** 2 / 2)
    tail = 1.0 - p.prob + p.prob * np.exp(p.shift + p.omega ** 2 / 2)
    return np.where(finite, base * tail[:, None, :], 0.0)


def conditional_cdf(idata: xr.DataTree, candidates: CandidateSet,
                    amount: np.ndarray) -> np.ndarray:
    """Pr(ΔC_r(m) ≤ amount | θ^(s)) per posterior draw, (S, C, R) in set order::

        (1 − π) · Φ((log(b/c̃) − δ)/σ) + π · Φ((log(b/c̃) − δ − κ)/√(σ² + ω²))

    (π = 0 without a tail); where c̃ = 0 it is 1 for b ≥ 0.  ``amount`` broadcasts against
    (C, R) (e.g. a budget (R,)).  Its mean over s is the predictive Pr(ΔC_r(m) ≤ b).
    """
    from scipy.special import ndtr

    p = _params(idata, candidates)
    b = np.broadcast_to(np.asarray(amount, dtype=float), p.log_med.shape[1:])
    finite = np.isfinite(p.log_med)
    with np.errstate(divide="ignore"):
        z = np.log(b)[None] - np.where(finite, p.log_med, 0.0)
    sig = p.sigma[:, None, :]
    sig_tail = np.sqrt(sig ** 2 + p.omega ** 2)
    prob = p.prob[:, None, :]
    cdf = (1 - prob) * ndtr(z / np.where(sig > 0, sig, 1.0)) \
        + prob * ndtr((z - p.shift[:, None, :]) / sig_tail)
    return np.where(finite, cdf, (b >= 0)[None] * 1.0)


def _scale_rv(name: str, prior: ScalePrior):
    """A scale parameter over ``resource`` with the prior's family (inside a model context)."""
    import pymc as pm

    dist = {"half_normal": pm.HalfNormal, "half_student_t": pm.HalfStudentT,
            "half_cauchy": pm.HalfCauchy, "exponential": pm.Exponential}[prior.family]
    return dist(name, **prior.params, dims="resource")


def _stack(da: xr.DataArray) -> np.ndarray:
    """(chain, draw, ...) → (sample, ...) as a plain array."""
    arr = da.to_numpy()
    return arr.reshape(-1, *arr.shape[2:])


def _no_rows(candidates: CandidateSet) -> pd.DataFrame:
    from belief.inputs.costs import empty_costs

    return empty_costs(candidates)
