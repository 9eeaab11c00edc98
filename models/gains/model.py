"""The gains model's spec, build and fit (:class:`GainsModel`); the model is stated in
:mod:`models.gains`.
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
from models.gains.draws import decision_draws, gain_from_draws
from models.gains.encoding import (
    EstimateEncoding,
    PolicyEncoding,
    encode_directions,
    encode_estimates,
    encode_policies,
    history_matrix,
    likelihood_approximation,
    no_rows,
    parent_name,
)
from models.gains.spec import LEVELS, GainsPriors
from models.likelihoods import binomial_logit_logp, log_binomial_coefficient
from models.pooling import PoolingStructure, pooled_tree
from models.priors import (
    ScalePrior,
    whitened_normal,
)
from models.sampling import sample, sample_arrays, slot_posterior

__all__ = [
    "LIGHT_VARS",
    "TARGET_ACCEPT",
    "GainsModel",
]


def _describe(v: Any) -> Any:
    if isinstance(v, bool):  # netCDF attributes hold no booleans
        return int(v)
    return v.describe() if isinstance(v, ScalePrior) else v


_ONE_HOT = ("via", "est_candidate")
"""Encodings :meth:`GainsModel.build` uses as one-hot matrices (``via_onehot``, ...) instead."""
_COMPILED: dict[tuple, Any] = {}
TARGET_ACCEPT = 0.9
"""Default NUTS target acceptance of the gains model (fit escalation raises it)."""


@dataclass
class GainsModel:
    """Spec of the hierarchical gains model for one candidate set.

    Parameters
    ----------
    candidates : CandidateSet
        Only policy-changing candidates carry a gain; the others have ΔJ = 0 by definition.
    priors : GainsPriors
    max_policies : int
        Number of policy slots compiled into the model (a campaign of T adaptation steps
        needs T + 1).
    max_estimates : int
        Number of summary-level gain-estimate slots.
    campaigns : int
        Number K of past campaigns fitted with the current one (:mod:`models.gains`, "Past
        campaigns"); 0 (default) is the model without a campaign level, unchanged.
    campaign_sd : float
        σ of τ_campaign ~ HalfNormal(σ) (used only with ``campaigns`` > 0).

    Notes
    -----
    Candidates of different lenses share only μ_0: one lens's evidence moves another lens's
    θ by (y − μ̄) E[σ_0²/V(τ) | y], bounded over every y with the default heavy-tailed scale
    priors (:mod:`models.gains`, "What one lens's evidence does to the others";
    :mod:`models.gains.pooling_rule`).

    Examples
    --------
    >>> model = GainsModel(candidates)                      # doctest: +SKIP
    >>> idata = model.fit(evidence, current_policy="pi0")   # compiles once, then re-uses
    >>> gains = model.predictive_gain(idata, "pi0", rng)    # (sample, candidate) draws
    """

    candidates: CandidateSet
    priors: GainsPriors = field(default_factory=GainsPriors)
    max_policies: int = 32
    max_estimates: int = 16
    max_direction_estimates: int = 8
    campaigns: int = 0
    campaign_sd: float = 0.2
    last_timing: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.gain_ids = [c.id for c in self.candidates if c.changes_policy]
        if not self.gain_ids:
            raise InputError(self.candidates.source, "the gains model needs at least one "
                                                     "policy-changing (adaptation) candidate")
        cands = [self.candidates[c] for c in self.gain_ids]
        self.methods = list(dict.fromkeys(f"{c.lens}/{c.method}" for c in cands))
        self.lenses = list(dict.fromkeys(c.lens for c in cands))
        self.method_of_candidate = np.array([self.methods.index(f"{c.lens}/{c.method}")
                                             for c in cands])
        self.lens_of_method = np.array([self.lenses.index(m.split("/", 1)[0])
                                        for m in self.methods])
        self.structure = PoolingStructure.from_labels(
            {"lens": [c.lens for c in cands], "method": [f"{c.lens}/{c.method}" for c in cands],
             "candidate": list(self.gain_ids)})
        if self.max_policies < 2:
            raise InputError("GainsModel", f"max_policies must be >= 2, got {self.max_policies}")
        if isinstance(self.campaigns, bool) or not isinstance(self.campaigns, int | np.integer) \
                or self.campaigns < 0:
            raise InputError("GainsModel", f"campaigns must be an integer >= 0, got "
                                           f"{self.campaigns!r}")
        if not (np.isfinite(self.campaign_sd) and self.campaign_sd > 0):
            raise InputError("GainsModel", f"campaign_sd must be > 0, got {self.campaign_sd!r}")
        self._order_structure()
        measured = dict.fromkeys(k for c in self.candidates for k in c.measures)
        self.directions = [k for k in measured
                           if any(k in self.candidates[m].targets for m in self.gain_ids)]
        self.direction_loading = np.array(
            [[float(k in self.candidates[m].targets) for k in self.directions]
             for m in self.gain_ids]).reshape(len(self.gain_ids), len(self.directions))

    def _order_structure(self) -> None:
        """Actors, pairs and the prior of every order effect γ_{a→m} (:mod:`models.gains`)."""
        from belief.inputs.interactions import interaction_pairs, stated_pair_priors

        actors, _, pairs = interaction_pairs(list(self.candidates))
        if not self.priors.order_effects:
            actors, pairs = [], []
        self.actors, self.pairs = actors, pairs
        stated = stated_pair_priors(list(self.candidates), self.candidates.interactions)
        label = {c.id: f"{c.lens}/{c.method}" for c in self.candidates}
        default = [p for p in pairs if p not in stated]
        members: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for a, m in default:
            members.setdefault((label[a], label[m]), []).append((a, m))
        self.gamma_groups = [g for g, ps in members.items() if len(ps) >= 2]
        group_of = {p: self.gamma_groups.index(g) for g, ps in members.items()
                    if g in self.gamma_groups for p in ps}
        self.pair_actor = np.array([actors.index(a) for a, _ in pairs], dtype=np.int64)
        self.pair_target = np.array([self.gain_ids.index(m) for _, m in pairs], dtype=np.int64)
        self.pair_stated = np.array([p in stated for p in pairs])
        self.pair_group = np.array([group_of.get(p, -1) for p in pairs], dtype=np.int64)
        self.pair_mean = np.array([stated.get(p, (0.0, 0.0))[0] for p in pairs])
        self.pair_sd = np.array([stated.get(p, (0.0, 0.0))[1] for p in pairs])

    # -- build ------------------------------------------------------------------------------
    def coords(self) -> dict[str, list]:
        out = {"candidate": self.gain_ids, "pooled_group": self.structure.groups,
               "policy_slot": list(range(self.max_policies))}
        if self.pairs:
            out.update({"actor": self.actors, "pair": [f"{a}→{m}" for a, m in self.pairs]})
        if self.directions:
            out.update({"direction": self.directions,
                        "direction_slot": list(range(self.max_direction_estimates))})
        if self.campaigns:
            out["past_campaign"] = list(range(1, self.campaigns + 1))
        return out

    def _stated_data(self) -> dict[str, np.ndarray]:
        """The stated priors' means and s.d. (``gamma_stated_mean``/``_sd``, stated pairs in
        pair order): data of the sampled and generative models, empty when none is stated."""
        if not self.pair_stated.any():
            return {}
        return {"gamma_stated_mean": self.pair_mean[self.pair_stated],
                "gamma_stated_sd": self.pair_sd[self.pair_stated]}

    def _order_effects(self, data):
        """γ over pairs and the order-effect terms Σ_{a ∈ h} γ_{a→m} of every step and
        estimate (zeros without pairs), in a model context, from the model's data containers
        (``history``, ``est_history`` and the stated priors' ``gamma_stated_*``).

        γ_{a→m} = μ_{am} + s_{am} z (stated prior, z ~ N(0, 1)) or g_{M(a)→M(m)} · σ_g + e
        (default; g ~ N(0, 1) shared by a method pair with ≥ 2 pairs, e = σ_e z_e,
        z_e ~ N(0, 1); with the sparse option e ~ Laplace(0, σ_e/√2)).
        """
        import pymc as pm
        import pytensor.tensor as pt

        if not self.pairs:
            return None, 0.0, 0.0
        pr = self.priors
        n = len(self.pairs)
        gamma = pt.zeros(n)
        default = np.flatnonzero(~self.pair_stated)
        stated = np.flatnonzero(self.pair_stated)
        if len(default):
            if pr.gamma_prior == "laplace":
                part = pm.Laplace("e_gamma", 0.0, pr.gamma_sd / np.sqrt(2.0),
                                  shape=len(default))
            else:
                part = pr.gamma_sd * pm.Normal("z_gamma", 0.0, 1.0, shape=len(default))
            grouped = self.pair_group[default] >= 0
            if self.gamma_groups:
                g = pm.Normal("z_gamma_group", 0.0, 1.0, shape=len(self.gamma_groups))
                part = part + np.where(grouped, 1.0, 0.0) * pr.gamma_group_sd * g[
                    np.maximum(self.pair_group[default], 0)]
            gamma = pt.set_subtensor(gamma[default], part)
        if len(stated):
            z = pm.Normal("z_gamma_stated", 0.0, 1.0, shape=len(stated))
            gamma = pt.set_subtensor(gamma[stated], data["gamma_stated_mean"]
                                     + data["gamma_stated_sd"] * z)
        gamma = pm.Deterministic("gamma", gamma, dims="pair")
        mat = pt.zeros((len(self.actors), len(self.gain_ids)))
        mat = pt.set_subtensor(mat[self.pair_actor, self.pair_target], gamma)
        return gamma, pt.dot(data["history"], mat), pt.dot(data["est_history"], mat)

    def _pair_prior(self, data: Mapping[str, Any]) -> tuple[Any, Any]:
        """The location and scale of every pair's γ prior (pair order): 0 and ``gamma_sd``,
        a stated pair's mean and s.d. (data ``gamma_stated_mean``/``_sd``: one compiled model
        serves every value of them, prior sensitivity without a recompile), and a grouped
        pair's location moved by its group's effect ``gamma_group_sd · z_gamma_group``
        (the free variable ``z_gamma_group`` is created here)."""
        import pymc as pm
        import pytensor.tensor as pt

        pr = self.priors
        stated = np.flatnonzero(self.pair_stated)
        mu = pt.zeros(len(self.pairs))
        sd = pt.as_tensor(np.where(self.pair_stated, 1.0, pr.gamma_sd))
        if len(stated):
            mu = pt.set_subtensor(mu[stated], data["gamma_stated_mean"])
            sd = pt.set_subtensor(sd[stated], data["gamma_stated_sd"])
        if self.gamma_groups:
            g = pm.Normal("z_gamma_group", 0.0, 1.0, shape=len(self.gamma_groups))
            grouped = (~self.pair_stated) & (self.pair_group >= 0)
            mu = mu + np.where(grouped, pr.gamma_group_sd, 0.0) * g[
                np.maximum(self.pair_group, 0)]
        return mu, sd

    def _order_effects_sampled(self, data, approx, effect, rho, tau_exec, extra_var=None):
        """:meth:`_order_effects` as sampled by :meth:`build`: the same prior, every γ_{a→m}
        by data-informed non-centring *given* θ, ρ, τ_exec and the γ of earlier actors.

        Actor by actor (candidate order), γ_{a→·} is whitened as by
        :func:`models.priors.whitened_normal` (as by :func:`models.priors.whitened_laplace` for
        the pairs without a stated prior when ``gamma_prior = "laplace"``) with the normal
        approximation of its likelihood: each evaluated step k via m with a in its history is
        ≈ N(γ_{a→m}, v_k + τ_exec²) for the residual r_k = x̂_k − θ_m ρ^{k_m} − Σ_{a' before a}
        γ_{a'→m} (later actors taken as 0), i.e. with w_k = 1/(v_k + τ_exec²) on evaluated steps::

            P_{a,m} = Σ_k H_{k,a} w_k [via(k) = m],   (P x̂)_{a,m} = Σ_k H_{k,a} w_k r_k [via(k) = m]
            r ← r − H_{·,a} γ_{a→via(·)}                       (after actor a)

        The map from the standard variables to γ is triangular, so the posterior is unchanged;
        it removes the ridge θ_m + Σ γ = const that a step informs when m ran after several
        actors.  ``extra_var`` (per policy slot) widens the approximation: τ_campaign² on the
        steps of past campaigns, whose offset is not yet sampled (:mod:`models.gains`, "Past
        campaigns").

        The graph is the same size for any number of actors and pairs: γ is laid out on the
        (actor × candidate) grid (non-pairs masked), P for every actor at once, and the
        recursion over actors is one ``pytensor.scan`` over the grid's rows carrying r.  The
        free variables are ``z_gamma_pairs`` (normal pairs, pair order) and
        ``z_gamma_pairs_lap`` (Laplace pairs), the log prior terms the potentials
        ``gamma_pairs_prior`` and ``gamma_pairs_lap_prior``.
        """
        import pymc as pm
        import pytensor
        import pytensor.tensor as pt

        from models.priors import normal_quantile_of_laplace

        pr = self.priors
        n, n_act, n_c = len(self.pairs), len(self.actors), len(self.gain_ids)
        pa, pc = self.pair_actor, self.pair_target
        mu, sd = self._pair_prior(data)
        sparse = pr.gamma_prior == "laplace"
        lap = ~self.pair_stated if sparse else np.zeros(n, dtype=bool)
        hist, via = data["history"], approx["via_onehot"]
        var = approx["step_var"] + tau_exec**2
        w = approx["step_both"] / (var if extra_var is None else var + extra_var)
        resid = approx["step_hat"] - (via * effect[None, :]).sum(axis=1) * rho ** data["repeats"]

        def grid(values, fill):
            return pt.set_subtensor(pt.as_tensor(np.full((n_act, n_c), fill))[pa, pc], values)

        on = np.zeros((n_act, n_c))
        on[pa, pc] = 1.0
        lap_on = np.zeros((n_act, n_c))
        lap_on[pa[lap], pc[lap]] = 1.0
        z = pt.as_tensor(np.zeros((n_act, n_c)))
        if (~lap).any():
            z = pt.set_subtensor(z[pa[~lap], pc[~lap]],
                                 pm.Flat("z_gamma_pairs", shape=int((~lap).sum())))
        if lap.any():
            z = pt.set_subtensor(z[pa[lap], pc[lap]],
                                 pm.Flat("z_gamma_pairs_lap", shape=int(lap.sum())))
        prec = pt.dot(hist.T, via * w[:, None])  # P_{a,m}, every actor at once
        lap_const = -np.log(np.sqrt(2.0) * pr.gamma_sd) - 0.5 * np.log(np.pi)

        def actor(h, prec_a, mu_a, sd_a, z_a, on_a, lap_a, r, via_, w_):
            prec_x = pt.dot(via_.T, h * w_ * r)
            denom = sd_a**2 * prec_a + 1.0
            f = sd_a / pt.sqrt(denom)
            x = (sd_a**2 * prec_x + mu_a) / denom + f * z_a  # whitened_normal
            term = -0.5 * ((x - mu_a) / sd_a) ** 2 - 0.5 * pt.log(denom)
            if sparse:  # whitened_laplace on the Laplace pairs (sd_a = σ_e there)
                u = z_a + normal_quantile_of_laplace(sd_a * (prec_x - prec_a * mu_a)
                                                     / pt.sqrt(denom))
                a = pt.abs(u) / np.sqrt(2.0)
                big_l = a**2 - pt.log(pt.erfcx(a))
                x = pt.where(lap_a > 0, mu_a + f * pt.sign(u) * big_l / np.sqrt(2.0), x)
                term_lap = -0.5 * u**2 + (1.0 - f / sd_a) * big_l + pt.log(f) + lap_const
            else:
                term_lap = pt.zeros_like(term)
            x = on_a * x
            return r - h * pt.dot(via_, x), x, term, term_lap

        _, grid_x, terms, terms_lap = pytensor.scan(
            actor, sequences=[hist.T, prec, grid(mu, 0.0), grid(sd, 1.0), z,
                              pt.as_tensor(on), pt.as_tensor(lap_on)],
            outputs_info=[resid, None, None, None], non_sequences=[via, w],
            n_steps=n_act, return_list=True, return_updates=False)
        if (~lap).any():
            pm.Potential("gamma_pairs_prior", ((on - lap_on) * terms).sum())
        if lap.any():
            pm.Potential("gamma_pairs_lap_prior", (lap_on * terms_lap).sum())
        gamma = pm.Deterministic("gamma", grid_x[pa, pc], dims="pair")
        return gamma, pt.dot(hist, grid_x), pt.dot(data["est_history"], grid_x)

    def _defaults(self, encoding, estimates):
        if encoding is None:
            encoding = self.encode(no_rows())
        if estimates is None:
            estimates = encode_estimates(None, encoding, self.gain_ids, self.max_estimates,
                                         self.actors)
        return encoding, estimates

    def _containers(self, encoding: PolicyEncoding, estimates: EstimateEncoding,
                    skip: tuple[str, ...] = ()):
        import pymc as pm

        data = {name: pm.Data(name, value, dims=("policy_slot", "policy_slot")
                              if name == "ancestry" else "policy_slot")
                for name, value in encoding.data().items() if name not in skip}
        data.update({name: pm.Data(name, value, dims="estimate_slot")
                     for name, value in estimates.data().items() if name not in skip})
        if self.pairs:
            n_act = len(self.actors)
            data["history"] = pm.Data("history",
                                      history_matrix(encoding.history, self.max_policies, n_act),
                                      dims=("policy_slot", "actor"))
            data["est_history"] = pm.Data("est_history",
                                          history_matrix(estimates.history, self.max_estimates,
                                                 n_act),
                                          dims=("estimate_slot", "actor"))
        data.update({name: pm.Data(name, value) for name, value in self._stated_data().items()})
        if self.campaigns:
            data["policy_campaign"] = pm.Data("policy_campaign",
                                              encoding.campaign_onehot(self.campaigns),
                                              dims=("policy_slot", "past_campaign"))
            data["est_campaign"] = pm.Data("est_campaign",
                                           estimates.campaign_onehot(self.campaigns),
                                           dims=("estimate_slot", "past_campaign"))
        return data

    def _campaign_offsets(self, data, approx, tau_c, tau_exec, at_step, at_est, rk, ek, order,
                          order_est):
        """The past campaigns' offsets of θ at every step and estimate, in a model context.

        θ_{m,c} = θ_m + o_{c,m}, o_{c,m} ~ Normal(0, τ_campaign), τ_campaign ~
        HalfNormal(campaign_sd), for past campaigns c = 1..K (the current campaign, c = 0, is
        the reference: its θ is θ_m).  o is sampled by data-informed non-centring
        (:func:`models.priors.whitened_normal`) given θ, ρ, γ and τ_exec: each evaluated step
        (and estimate) of m in campaign c is ≈ N(ρ^k o_{c,m}, v + τ_exec²) for the residual
        x̂ − ρ^k θ_m − Σ γ; an exact change of variables (geometry only), all (c, m) at once.
        (θ and γ, sampled before o, see the past steps with variance v + τ_exec² +
        τ_campaign²: o integrated out.)  Returns the offsets o_{c(k), via(k)} of the policy
        slots and of the estimate slots.
        """
        import pymc as pm
        import pytensor.tensor as pt

        pc, ec = data["policy_campaign"], data["est_campaign"]
        via, eon = approx["via_onehot"], approx["est_onehot"]
        w = approx["step_both"] / (approx["step_var"] + tau_exec**2)
        resid = approx["step_hat"] - at_step * rk - order
        we = data["est_mask"] / (data["est_se"] ** 2 + tau_exec**2)
        resid_e = data["est_value"] - at_est * ek - order_est
        prec = pt.dot(pc.T, via * (w * rk**2)[:, None]) \
            + pt.dot(ec.T, eon * (we * ek**2)[:, None])
        prec_x = pt.dot(pc.T, via * (w * rk * resid)[:, None]) \
            + pt.dot(ec.T, eon * (we * ek * resid_e)[:, None])
        off = pm.Deterministic(
            "campaign_offset", whitened_normal("campaign_offset", 0.0, tau_c, prec, prec_x,
                                               dims=("past_campaign", "candidate")),
            dims=("past_campaign", "candidate"))
        return (via * pt.dot(pc, off)).sum(axis=1), (eon * pt.dot(ec, off)).sum(axis=1)

    def _scales(self):
        """The scale RVs τ_level (levels in use only) and τ_exec, in a model context."""
        pr = self.priors
        tau = {lv: getattr(pr, f"tau_{lv}").rv(f"tau_{lv}") for lv in self.structure.used_levels}
        return tau, pr.tau_exec.rv("tau_exec")

    def _direction_effects(self, dirs: dict[str, np.ndarray] | None, generative: bool):
        """ξ over the measured directions, the shift L ξ of every candidate's θ and the
        likelihood of the direction estimates, in a model context (None, 0 without measured
        directions; :mod:`models.gains`, "Direction effects")."""
        import pymc as pm
        import pytensor.tensor as pt

        if not self.directions:
            return None, 0.0
        if dirs is None:
            dirs = encode_directions(None, self.directions, self.max_direction_estimates)
        dd = {name: pm.Data(name, value, dims=("direction_slot", "direction")
                            if name == "dir_onehot" else "direction_slot")
              for name, value in dirs.items()}
        sd = self.priors.direction_sd
        if generative:
            xi = pm.Normal("xi", 0.0, sd, dims="direction")
        else:
            w = dd["dir_mask"] / dd["dir_se"] ** 2
            xi = pm.Deterministic("xi", whitened_normal(
                "xi", 0.0, sd, pt.dot(w, dd["dir_onehot"]),
                pt.dot(w * dd["dir_value"], dd["dir_onehot"]), dims="direction"),
                dims="direction")
        at = pt.dot(dd["dir_onehot"], xi)
        r = (dd["dir_value"] - at) / dd["dir_se"]
        pm.Potential("direction_estimates",
                     (dd["dir_mask"] * (-0.5 * r**2 - pt.log(dd["dir_se"]))).sum())
        return xi, pt.dot(self.direction_loading, xi)

    def build(self, encoding: PolicyEncoding | None = None,
              estimates: EstimateEncoding | None = None,
              directions: dict[str, np.ndarray] | None = None):
        """The sampled ``pm.Model`` (data-informed non-centring) with ``pm.Data`` containers.

        The joint distribution of :meth:`build_generative`; every normal latent (μ_0, the
        group values, θ, the policy steps) is sampled by
        :func:`models.priors.whitened_normal` with the normal approximation of its
        likelihood passed up the tree (:mod:`models.gains`, "Geometry").
        """
        import pymc as pm
        import pytensor.tensor as pt

        encoding, estimates = self._defaults(encoding, estimates)
        pr, st = self.priors, self.structure
        coords = {**self.coords(), "estimate_slot": list(range(self.max_estimates))}
        with pm.Model(coords=coords) as model:
            data = self._containers(encoding, estimates, skip=_ONE_HOT)
            approx = {name: pm.Data(name, value) for name, value in likelihood_approximation(
                encoding, estimates, len(self.gain_ids), pr).items()}
            approx["log_binom"] = pm.Data("log_binom", log_binomial_coefficient(
                encoding.trials, encoding.successes), dims="policy_slot")
            tau, tau_exec = self._scales()
            rho = pm.Beta("rho", pr.repeat_alpha, pr.repeat_beta)
            root = data["is_root"]
            child = 1.0 - root
            rk = rho ** data["repeats"]
            ek = rho ** data["est_repeats"]
            # θ's likelihood approximation with the current τ_exec (:mod:`models.gains`)
            var_step = approx["step_var"] + tau_exec**2
            var_est = data["est_se"] ** 2 + tau_exec**2
            camp_var = None
            if self.campaigns:  # θ's approximation with the past offsets integrated out
                tau_c = ScalePrior("half_normal", sigma=self.campaign_sd).rv("tau_campaign")
                camp_var = tau_c**2 * data["policy_campaign"].sum(axis=1)
                var_step = var_step + camp_var
                var_est = var_est + tau_c**2 * data["est_campaign"].sum(axis=1)
            v_step = 1.0 / var_step
            v_est = 1.0 / var_est
            prec = (approx["step_w"] * v_step).sum(axis=1) + (approx["est_w"] * v_est).sum(axis=1)
            prec_x = (approx["step_wx"] * v_step).sum(axis=1) \
                + (approx["est_wx"] * v_est).sum(axis=1)
            _, shift = self._direction_effects(directions, generative=False)
            prec_x = prec_x - prec * shift  # the tree's member is θ − L ξ
            tree = pooled_tree(st, tau, prec, prec_x, mu0_mu=pr.effect_mu_mu,
                               mu0_sigma=pr.effect_mu_sigma, member_name="effect",
                               member_dims="candidate")
            pm.Deterministic("mu0", tree["mu0"])
            if st.groups:
                pm.Deterministic("group_effect", tree["group"], dims="pooled_group")
            pm.Deterministic("pool_mean", tree["pool"] + shift, dims="candidate")
            pm.Deterministic("own_scale", tree["own"], dims="candidate")
            effect = pm.Deterministic("effect", tree["member"] + shift, dims="candidate")
            # θ at each step and estimate as a product with a one-hot data matrix (cheaper
            # gradients than indexing)
            at_step = (approx["via_onehot"] * effect[None, :]).sum(axis=1)
            at_est = (approx["est_onehot"] * effect[None, :]).sum(axis=1)
            order, order_est = 0.0, 0.0
            if self.pairs:
                _, order, order_est = self._order_effects_sampled(data, approx, effect, rho,
                                                                  tau_exec, camp_var)
                order = (approx["via_onehot"] * order).sum(axis=1)
                order_est = (approx["est_onehot"] * order_est).sum(axis=1)
            theta_step, theta_est = at_step, at_est  # θ_{m,c} (θ_m without past campaigns)
            if self.campaigns:
                off_step, off_est = self._campaign_offsets(data, approx, tau_c, tau_exec,
                                                           at_step, at_est, rk, ek, order,
                                                           order_est)
                theta_step, theta_est = at_step + off_step, at_est + off_est
            step_mean = root * pr.baseline_mu + child * (theta_step * rk + order)
            step_sd = root * pr.baseline_sigma + child * tau_exec
            step = pm.Deterministic(
                "policy_step", whitened_normal("step", step_mean, step_sd, approx["slot_prec"],
                                               approx["slot_prec_x"], dims="policy_slot"),
                dims="policy_slot")
            eta = pm.Deterministic("policy_logit", pt.dot(data["ancestry"], step),
                                   dims="policy_slot")
            # the Binomial(trials, logistic(η)) likelihood with log C(n, k) as data
            # (:mod:`models.likelihoods`): the same log density, a third less work per call
            pm.Potential("obs", binomial_logit_logp(data["successes"], data["trials"], eta,
                                                    approx["log_binom"]).sum())
            est_var = data["est_se"] ** 2 + tau_exec**2
            est_logp = -0.5 * ((data["est_value"] - theta_est * ek - order_est) ** 2
                               / est_var + pt.log(2 * np.pi * est_var))
            pm.Potential("estimates", (data["est_mask"] * est_logp).sum())
        return model

    def build_generative(self, encoding: PolicyEncoding | None = None,
                         estimates: EstimateEncoding | None = None,
                         directions: dict[str, np.ndarray] | None = None):
        """The model written out level by level (non-centred), exactly as in the module
        docstring: every lens, method and candidate has its own effect.

        The same joint distribution as :meth:`build` (which merges single-member levels and
        samples otherwise): the generator of simulation-based calibration, so that SBC also
        checks that the merging is exact.
        """
        import pymc as pm
        import pytensor.tensor as pt

        encoding, estimates = self._defaults(encoding, estimates)
        pr = self.priors
        coords = {**self.coords(), "lens": self.lenses, "method": self.methods,
                  "estimate_slot": list(range(self.max_estimates))}
        with pm.Model(coords=coords) as model:
            data = self._containers(encoding, estimates)
            tau = {lv: getattr(pr, f"tau_{lv}").rv(f"tau_{lv}") for lv in LEVELS}
            tau_exec = pr.tau_exec.rv("tau_exec")
            mu0 = pm.Normal("mu0", pr.effect_mu_mu, pr.effect_mu_sigma)
            z_l = pm.Normal("z_lens", 0.0, 1.0, dims="lens")
            z_j = pm.Normal("z_method", 0.0, 1.0, dims="method")
            z_m = pm.Normal("z_candidate", 0.0, 1.0, dims="candidate")
            lens = pm.Deterministic("lens_effect", mu0 + tau["lens"] * z_l, dims="lens")
            method = pm.Deterministic(
                "method_effect", lens[self.lens_of_method] + tau["method"] * z_j, dims="method")
            _, shift = self._direction_effects(directions, generative=True)
            effect = pm.Deterministic(
                "effect", method[self.method_of_candidate] + tau["candidate"] * z_m + shift,
                dims="candidate")
            rho = pm.Beta("rho", pr.repeat_alpha, pr.repeat_beta)
            root = data["is_root"]
            _, order, order_est = self._order_effects(data)
            if self.pairs:
                order = order[pt.arange(self.max_policies), data["via"]]
                order_est = order_est[pt.arange(self.max_estimates), data["est_candidate"]]
            theta_step, theta_est = effect[data["via"]], effect[data["est_candidate"]]
            if self.campaigns:  # θ_{m,c} = θ_m + τ_campaign u_{c,m} (non-centred)
                tau_c = ScalePrior("half_normal", sigma=self.campaign_sd).rv("tau_campaign")
                u = pm.Normal("z_campaign", 0.0, 1.0, dims=("past_campaign", "candidate"))
                off = pm.Deterministic("campaign_offset", tau_c * u,
                                       dims=("past_campaign", "candidate"))
                theta_step = theta_step + pt.dot(data["policy_campaign"], off)[
                    pt.arange(self.max_policies), data["via"]]
                theta_est = theta_est + pt.dot(data["est_campaign"], off)[
                    pt.arange(self.max_estimates), data["est_candidate"]]
            step_mean = root * pr.baseline_mu + (1.0 - root) * (
                theta_step * rho ** data["repeats"] + order)
            step_sd = root * pr.baseline_sigma + (1.0 - root) * tau_exec
            z = pm.Normal("z_step", 0.0, 1.0, dims="policy_slot")
            step = pm.Deterministic("policy_step", step_mean + step_sd * z, dims="policy_slot")
            eta = pm.Deterministic("policy_logit", pt.dot(data["ancestry"], step),
                                   dims="policy_slot")
            pm.Binomial("obs", n=data["trials"], logit_p=eta, observed=data["successes"],
                        dims="policy_slot")
            est_mu = theta_est * rho ** data["est_repeats"] + order_est
            est_sd = pt.sqrt(data["est_se"] ** 2 + tau_exec**2)
            est_logp = pm.logp(pm.Normal.dist(est_mu, est_sd), data["est_value"])
            pm.Potential("estimates", (data["est_mask"] * est_logp).sum())
        return model

    def data(self, enc: PolicyEncoding, est: EstimateEncoding,
             directions: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Every data container of :meth:`build` for these encodings."""
        if self.directions:
            est_dirs = directions if directions is not None else encode_directions(
                None, self.directions, self.max_direction_estimates)
        else:
            est_dirs = {}
        out = {**enc.data(), **est.data(), **est_dirs,
               **likelihood_approximation(enc, est, len(self.gain_ids), self.priors),
               "log_binom": log_binomial_coefficient(enc.trials, enc.successes)}
        if self.pairs:
            out["history"] = history_matrix(enc.history, self.max_policies, len(self.actors))
            out["est_history"] = history_matrix(est.history, self.max_estimates, len(self.actors))
        elif not self.campaigns:  # only the order effects and the campaign offsets read them
            out.pop("step_hat")  # (a compiled model knows used data only)
            out.pop("step_both")
        out.update(self._stated_data())
        if self.campaigns:
            out["policy_campaign"] = enc.campaign_onehot(self.campaigns)
            out["est_campaign"] = est.campaign_onehot(self.campaigns)
        return {k: v for k, v in out.items() if k not in _ONE_HOT}

    def compile_key(self) -> tuple:
        """What identifies this model's compiled graph: the candidates, priors, slot counts,
        the order-effect pairs and which of them have a stated prior — not the stated means
        and s.d., which are data, so models that differ only in them share one compile."""
        key = (tuple(self.gain_ids), tuple(self.methods), tuple(self.lenses),
               tuple(self.structure.groups), self.priors, self.max_policies,
               self.max_estimates, tuple(self.pairs), tuple(self.pair_stated),
               tuple(self.pair_group),  # the stated priors' values are data (not in the key)
               tuple(self.directions), self.direction_loading.tobytes(),
               self.max_direction_estimates)
        if self.campaigns:  # the default key (and model) is unchanged without past campaigns
            key = (*key, "campaigns", self.campaigns, self.campaign_sd)
        return key

    def compile_label(self) -> str:
        """The name its full compiles are timed under (:func:`models.compile_cache.progress_line`):
        the model and its size, so that an estimate is never one of another size."""
        return f"gains ({len(self.gain_ids)} adaptations)"

    def _compiled(self):
        key = self.compile_key()
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build(), label=self.compile_label())
            self.last_timing["compile_s"] = time.perf_counter() - t0
        return _COMPILED[key]

    def encode(self, paired: pd.DataFrame, current: tuple[str, ...] = (),
               policy_evals: pd.DataFrame | None = None,
               gain_estimates: pd.DataFrame | None = None,
               model_updates: pd.DataFrame | None = None,
               campaign_of: Mapping[str, int] | None = None) -> PolicyEncoding:
        """:func:`encode_policies` with this model's candidates, slots and actors."""
        if campaign_of and max(campaign_of.values()) > self.campaigns:
            raise InputError("GainsModel", f"evidence of past campaign "
                                           f"{max(campaign_of.values())} but the model was "
                                           f"built for {self.campaigns} past campaigns")
        return encode_policies(paired, self.gain_ids, self.max_policies, tuple(current),
                               policy_evals, gain_estimates, model_updates, self.actors,
                               campaign_of)

    # -- fit --------------------------------------------------------------------------------
    def fit(self, paired: pd.DataFrame, current_policy: str | tuple[str, ...] = (), *,
            policy_evals: pd.DataFrame | None = None,
            gain_estimates: pd.DataFrame | None = None,
            model_updates: pd.DataFrame | None = None,
            direction_estimates: pd.DataFrame | None = None,
            draws: int = 1000, tune: int = 500, chains: int = 4, seed: int = 0,
            target_accept: float = TARGET_ACCEPT, thin: int = 1,
            progressbar: bool = False, light: bool = False,
            campaign_of: Mapping[str, int] | None = None) -> xr.DataTree:
        """Sample the posterior given a validated paired table.

        Parameters
        ----------
        paired : DataFrame
            ``Evidence.paired`` (validated).
        current_policy : str or tuple of str
            Policies that must have a slot even without evidence (the campaign's current one).
        policy_evals : DataFrame, optional
            ``Evidence.policy_evals``: stand-alone evaluations of policies.
        gain_estimates : DataFrame, optional
            ``Evidence.gain_estimates``: summary-level logit-gain measurements.
        model_updates : DataFrame, optional
            ``Evidence.model_updates``: executed model updates (step, candidate), the sources
            of order effects besides the adaptations on a lineage.
        direction_estimates : DataFrame, optional
            ``Evidence.direction_estimates``: measurements of the direction effects ξ_k by
            diagnoses (:mod:`models.gains`, "Direction effects").
        thin : int
            Sample ``draws × thin`` per chain and keep every ``thin``-th (see
            :func:`models.sampling.sample`).
        light : bool
            Keep only the posterior variables the decision draws read (:data:`LIGHT_VARS`),
            read straight from the sampler (:func:`models.sampling.sample_arrays`): the same
            draws for the same seed, no ``sample_stats``.  For exact CVU refits, which need
            nothing else.
        campaign_of : mapping, optional
            With past campaigns (``campaigns`` > 0): policy → its past campaign 1..K (the
            tables hold the stacked evidence, :mod:`belief.inputs.past_campaigns`;
            ``model_updates`` then has a ``campaign`` column).

        Returns
        -------
        DataTree
            ``posterior`` with ``policy_logit`` over named policies (unused slots dropped),
            ``effect``, ``pool_mean``, ``own_scale`` over candidates, ``group_effect`` over
            the pooled groups; ``sample_stats``, and ``constant_data`` with the encoded counts.
        """
        current = (current_policy,) if isinstance(current_policy, str) else tuple(current_policy)
        enc = self.encode(paired, current, policy_evals, gain_estimates, model_updates,
                          campaign_of)
        est = encode_estimates(gain_estimates, enc, self.gain_ids, self.max_estimates,
                               self.actors)
        dirs = (encode_directions(direction_estimates, self.directions,
                                  self.max_direction_estimates) if self.directions else None)
        compiled = self._compiled().with_data(**self.data(enc, est, dirs))
        if light:
            idata = sample_arrays(compiled, LIGHT_VARS, draws=draws, tune=tune, chains=chains,
                                  seed=seed, target_accept=target_accept, thin=thin,
                                  timing=self.last_timing)
        else:
            idata = sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                           target_accept=target_accept, progressbar=progressbar, thin=thin,
                           timing=self.last_timing)
        if self.pairs:
            idata = self._gamma_from_prior(idata, self.informed_pairs(enc, est),
                                           np.random.default_rng([seed, 16]))
        return self._label(idata, enc)

    def informed_pairs(self, enc: PolicyEncoding, est: EstimateEncoding) -> np.ndarray:
        """Which γ_{a→m} enter the likelihood (bool over ``pairs``).

        γ_{a→m} appears in the joint density only through the step mean of a policy slot
        produced by m with a in its history, or the mean of an estimate of m with a in its
        history.  When neither exists it appears in its prior alone: a posteriori it is
        independent of everything else given the method-pair term g, with its prior
        conditional law (:mod:`models.gains`, "Exact prior draws").
        """
        n = len(enc.names)
        child = np.flatnonzero(enc.is_root[:n] == 0)
        out = np.zeros(len(self.pairs), dtype=bool)
        hist = history_matrix(enc.history, self.max_policies, len(self.actors))
        ehist = history_matrix(est.history, self.max_estimates, len(self.actors))
        on = np.flatnonzero(est.mask > 0)
        for p, (a, m) in enumerate(zip(self.pair_actor, self.pair_target, strict=True)):
            out[p] = (bool((hist[child, a] * (enc.via[child] == m)).any())
                      or bool((ehist[on, a] * (est.candidate[on] == m)).any()))
        return out

    def _gamma_from_prior(self, idata: xr.DataTree, informed: np.ndarray,
                          rng: np.random.Generator) -> xr.DataTree:
        """Replace the MCMC draws of the uninformed γ by exact draws of their posterior.

        For a pair outside the likelihood (:meth:`informed_pairs`) the posterior is
        γ = μ + s ε, ε ~ N(0, 1) independent of every other variable: μ, s the stated mean
        and sd, or μ = σ_g g_{M(a)→M(m)} (0 outside a group) and s = σ_e (with the sparse
        option, ε ~ Laplace(0, 1/√2) instead, s.d. 1).  The group term g
        keeps its MCMC draws when some pair of its group is informed; otherwise it is itself
        only in its prior and is drawn exactly too.  The replaced elements are marked by the
        coordinate ``exact_prior_draw`` = 1 on ``pair``, and the convergence checks skip them
        (:func:`belief.posterior.diagnostics.diagnostics_table`): they are independent draws
        of their exact posterior, not a Markov chain.
        """
        post = idata["posterior"].to_dataset()
        shape = (post.sizes["chain"], post.sizes["draw"])
        free = np.flatnonzero(~informed)
        if len(free):
            pr = self.priors
            gamma = post["gamma"].transpose("chain", "draw", "pair").to_numpy().copy()
            mu = np.where(self.pair_stated, self.pair_mean, 0.0)[None, None, :] \
                * np.ones(shape)[..., None]
            if self.gamma_groups:
                g_da = post["z_gamma_group"].transpose("chain", "draw", ...)
                g = g_da.to_numpy().copy()
                for j in range(len(self.gamma_groups)):
                    if not (informed & (self.pair_group == j) & ~self.pair_stated).any():
                        g[..., j] = rng.standard_normal(shape)
                grouped = (~self.pair_stated) & (self.pair_group >= 0)
                mu = mu + np.where(grouped, pr.gamma_group_sd, 0.0) \
                    * g[..., np.maximum(self.pair_group, 0)]
            sd = np.where(self.pair_stated, self.pair_sd, pr.gamma_sd)
            eps = rng.standard_normal((*shape, len(free)))
            if pr.gamma_prior == "laplace":  # e = σ_e · Laplace(0, 1/√2) for default pairs
                lap = rng.laplace(size=eps.shape) / np.sqrt(2.0)
                eps = np.where(self.pair_stated[free], eps, lap)
            gamma[..., free] = mu[..., free] + sd[free] * eps
            post["gamma"] = (("chain", "draw", "pair"), gamma)
            if self.gamma_groups:
                post["z_gamma_group"] = (g_da.dims, g)
        post = post.assign_coords(exact_prior_draw=("pair", (~informed).astype(np.int8)))
        groups = {name: idata[name].to_dataset() for name in idata.children}
        groups["posterior"] = post
        out = xr.DataTree.from_dict(groups)
        out.attrs.update(idata.attrs)
        return out

    def _label(self, idata: xr.DataTree, enc: PolicyEncoding) -> xr.DataTree:
        n = len(enc.names)
        post = slot_posterior(idata["posterior"].to_dataset(), enc.names)
        groups: dict[str, xr.Dataset] = {"posterior": post}
        if "sample_stats" in idata.children:
            groups["sample_stats"] = idata["sample_stats"].to_dataset()
        parents = [""] * n
        vias = [""] * n
        for k in range(n):
            if not enc.is_root[k]:
                parents[k] = parent_name(enc, k)
                vias[k] = self.gain_ids[int(enc.via[k])]
        groups["constant_data"] = xr.Dataset(
            {"trials": ("policy", enc.trials[:n]), "parent": ("policy", parents),
             "via": ("policy", vias), "repeats": ("policy", enc.repeats[:n])},
            coords={"policy": enc.names})
        groups["observed_data"] = xr.Dataset({"successes": ("policy", enc.successes[:n])},
                                             coords={"policy": enc.names})
        if self.pairs:
            const = groups["constant_data"]
            const["model_update_done"] = ("actor", np.array(
                [float(a in enc.updates) for a in self.actors]))
            hist = history_matrix(enc.history, self.max_policies, len(self.actors))
            const["history"] = (("policy", "actor"), hist[:n])
            const = const.assign_coords(
                actor=self.actors,
                pair_source=("pair", [a for a, _ in self.pairs]),
                pair_target=("pair", [m for _, m in self.pairs]),
                pair_stated=("pair", self.pair_stated.astype(int)),
                pair=[f"{a}→{m}" for a, m in self.pairs])
            groups["constant_data"] = const
        if self.campaigns:
            groups["constant_data"]["campaign"] = ("policy", np.array(
                [enc.campaign_of.get(p, 0) for p in enc.names], dtype=np.int64))
        dt = xr.DataTree.from_dict(groups)
        dt.attrs.update({"model": "gains", "max_policies": self.max_policies,
                         "pooled_groups": "; ".join(
                             f"{g} (scale of {'+'.join(lv)})" for g, lv in
                             zip(self.structure.groups, self.structure.group_levels,
                                 strict=True)) or "none",
                         **{f"prior_{k}": _describe(v) for k, v in vars(self.priors).items()}})
        if self.campaigns:
            dt.attrs.update({"past_campaigns": self.campaigns,
                             "prior_tau_campaign": f"half_normal(sigma={self.campaign_sd:g})"})
        return dt

    # -- decision quantities ----------------------------------------------------------------
    def decision_draws(self, idata: xr.DataTree, policy: str,
                       rng: np.random.Generator) -> xr.Dataset:
        """Joint draws at ``policy`` for the allocator (see :func:`decision_draws`)."""
        return decision_draws(idata, policy, self.gain_ids, rng)

    def predictive_gain(self, idata: xr.DataTree, policy: str,
                        rng: np.random.Generator) -> xr.DataArray:
        """Posterior-predictive gain of the next execution of every gain candidate from ``policy``.

        ΔJ_next(m | π) = logistic(η_π + θ_m ρ^{k_m(π)} + Σ_{a ∈ h(π)} γ_{a→m} + τ_exec · z)
        − logistic(η_π), z ~ N(0, 1) drawn once per posterior draw and candidate, h(π) the
        actors in π's history (the γ term only with order effects).

        Returns
        -------
        DataArray
            Dims (``sample``, ``candidate``), on the success-probability scale.
        """
        return gain_from_draws(self.decision_draws(idata, policy, rng))


LIGHT_VARS = ("policy_logit", "effect", "tau_exec", "rho", "gamma", "z_gamma_group", "xi")
"""The posterior variables :func:`decision_draws` and ``GainsModel._gamma_from_prior`` read
(``fit(light=True)`` keeps only these)."""
