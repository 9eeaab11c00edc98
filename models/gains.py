"""Hierarchical model of the gains ΔJ(m) of policy-changing interventions.

Every policy π has a success probability J(π) under the shared evaluation protocol, on the
logit scale ``η_π``.  A root policy has its own baseline; a policy produced from ``parent`` by
executing candidate m adds that execution's logit gain::

    η_root  ~ Normal(baseline_mu, baseline_sigma)
    η_child = η_parent + δ_child,     δ_child ~ Normal(s_child, τ_exec),   s_child = θ_m · ρ^{k}

where k is how often m was executed before on the child's lineage (diminishing returns,
ρ ~ Beta(repeat_alpha, repeat_beta)) and τ_exec the run-to-run variation of a realised gain.
``s_child`` is the *step mean*; the order effects Σ_{a ∈ h} γ_{a→m} are one more additive
term of it (section "Order effects") and change nothing else below.  The candidate effects θ_m
are pooled candidate → method → lens → global::

    θ_m         = β_method[m] + τ_candidate · z_m
    β_method[j] = β_lens[j]   + τ_method    · z_j
    β_lens[l]   = μ_0         + τ_lens      · z_l,      μ_0 ~ Normal(effect_mu_mu, effect_mu_sigma)

    successes_π ~ Binomial(trials_π, logistic(η_π))       (control and treated arms alike)
    estimate_e  ~ Normal(θ_m · ρ^{k}, sqrt(se_e² + τ_exec²))   (summary-level gain estimates,
                                                              e.g. a diagnosis pilot)

Scale priors
------------
τ_lens, τ_method, τ_candidate and τ_exec each have a :class:`models.priors.ScalePrior`
(HalfNormal, HalfStudentT, HalfCauchy or Exponential).  The defaults
(:class:`GainsPriors`) are HalfStudentT(ν = 3, σ = 0.5) for the three pooling scales — a
typical spread of 0.38 logit per level, with a heavy tail so that the data can set the pooling
(one candidate that differs from its lens is explained by its own deviation rather than by
moving μ_0 and every other candidate) — and HalfNormal(0.2) for τ_exec.

Geometry (what the sampler sees; the model above is unchanged by it)
--------------------------------------------------------------------
*Levels with a single member are merged, exactly.*  A lens with one method and that method
are the same group; a method (or lens) with one candidate is part of that candidate's own
deviation.  Because a sum of independent normals is normal, the prior of θ is unchanged when
each distinct group of ≥ 2 candidates gets one latent effect with scale √(Σ τ_level²) over
the levels that coincide in it, and each candidate one own deviation with scale
√(Σ τ_level²) over its single-member levels ("own_scale").  Only levels that pool at least
two candidates are estimated: with the synthetic world's six adaptations (four lenses, five
methods) that is two group effects (lens ``data``, method ``data/DR``) and six own deviations,
instead of 4 + 5 + 6 latent effects.

*Each latent is sampled by data-informed non-centring* (:func:`models.priors.whitened_normal`
through :func:`models.pooling.pooled_tree`; the normal approximations of the likelihood,
:func:`likelihood_approximation`, are data containers, so no recompilation): policy steps by
their paired evaluations, own deviations by their candidate's steps and estimates, group
effects by their members.  Candidates executed several times are (nearly) centred, untried
ones non-centred.  This shapes only the sampler's geometry, never the posterior.

*Unused policy and estimate slots* are roots without trials (independent Normal(baseline_mu,
baseline_sigma) draws, fixed scale, no funnel) and masked estimates (no latent variable).

Order effects (issue 16)
------------------------
Interventions are not independent arms: executing a can change the later gain of m.  The step
mean of an execution of m with history h is::

    s_child = θ_m · ρ^{k} + Σ_{a ∈ h} γ_{a→m}

where h is the set of *actors* that ran before it — the adaptations on the lineage of the
parent policy and the model updates executed at an earlier step (``Evidence.model_updates``);
each actor counts once however often it ran (a diagnosis is never an actor: it acts through
what it measures).  γ_{m→m} = 0 (repeats are ρ).  Summary-level estimates of m from a policy
carry the same term.  Prior, per pair (a, m), a ≠ m:

- stated in the candidate file (``[[interaction]]``, :mod:`belief.inputs.interactions`):
  γ_{a→m} ~ Normal(mean, sd);
- otherwise a shrinkage prior centred at "no interaction", partially pooled by the method
  pair: γ_{a→m} = σ_g · g_{M(a)→M(m)} + σ_e · e_{a→m}, g, e ~ N(0, 1), g shared by the
  candidate pairs of a method pair with ≥ 2 of them (method = lens/method label); defaults
  σ_g = 0.05, σ_e = 0.25 (prior sd ≈ 0.255 logit: the framework's own example, SI first
  halving DR's gain — ≈ −0.25 logit in the shipped world — is a one-sd interaction).

*The scale.*  Until December 2026 σ_e was 0.14 (prior sd ≈ 0.15).  That prior called the
example above a 1.7-sd event and its 90 % interval (±0.245) excluded it.  One campaign hardly
informs a γ (m's step informs θ_m + Σ γ, and θ_m and γ_{a→m} are told apart only by other
orders or past campaigns): the posterior 90 % width of γ is ≈ 0.95 of its prior width in
``bench_order_effects.py``, so the coverage of truly interacting pairs is the prior's and was
0.79.  A common scale τ_γ ~ HalfNormal(0.3) learned from the informed pairs was tried and
rejected: most pairs are truly 0, so τ_γ shrank to ≈ 0.11 (median over 30 varied worlds),
the strong pairs stayed under-covered (0.83) and the fits failed the convergence standard in
9 of 30 worlds (R-hat at τ_γ, single divergences).  A global scale cannot be sparse.

*The sparse option* (``gamma_prior = "laplace"``): e ~ Laplace(0, σ_e/√2), the same s.d. as
the normal, peaked at "no interaction" with exponential tails (the Bayesian lasso's prior;
log-concave in γ).  It is sampled by
:func:`models.priors.whitened_laplace`: the same data-informed non-centring, through the map
T = F⁻¹ ∘ Φ that makes the Laplace a standard normal, placed so that the Laplace's kink and
T's fall on the same point (without that alignment the sampler's steps were 4× shorter).
``bench_order_effects.py`` (30 varied worlds, same run, 2026-12-05): γ of interacting pairs
covered 0.906 [0.853, 0.944] against the normal's 0.911 [0.860, 0.948], with 90 % intervals
5 % narrower (0.739 against 0.777); step gains after an interacting one 0.969 against 0.985;
30/30 fits converged against 29/30; SBC of the gains model with it passes (100 replications,
Bonferroni-adjusted p 0.50, no divergent fit; weak evidence for the Laplace itself — a normal
fit to Laplace-generated data passes too, p 0.10 — whose potential tests/test_gamma_sparse.py
checks exactly).  It costs ≈ 1.6× per gradient (705 graph
nodes against 563, op overhead) and 2.3× in median fit time (6.0 s against 2.6 s), and the
demo and every campaign refit the gains model at each step, so the normal stays the default.
A continuous spike and slab (e ~ 0.7 N(0, 0.05²) + 0.3 N(0, 0.4²), whitened with the
mixture's s.d.) was tried and dropped: 15/30 fits converged (R-hat 1.010–1.014 at informed
γ, the chains crossing between spike and slab), and γ of interacting pairs covered 0.861.

Every scale is fixed, so γ adds no funnel.  A heavy-tailed (Student-t, ν = 3) e was tried
first and failed the convergence standard: when m runs after several actors only the sum
θ_m + Σ γ is identified, and the ridge with t tails mixed badly (``bench_order_effects.py``
world 0: R-hat 1.015, tail ESS 178 at γ[dr_1e7→ft_real_100]; with normal e: R-hat ≤ 1.006,
ESS ≥ 611).  Without evidence of a pair its γ is its prior
(centred at 0), so the model reduces to the one without order effects in expectation; the
predictive gain of m after a is wider by γ's prior.  They are **on by default**
(``GainsPriors(order_effects=False)``, or ``[priors.gains] order_effects = false`` in the
candidate file, turns them off).

*Exact prior draws.*  Most pairs have no evidence: no policy step of m and no estimate of m had a in
its history (:meth:`GainsModel.informed_pairs`).  Such a γ_{a→m} enters the joint density only
through its own prior term, so a posteriori it is independent of every other variable given its
method-pair term g: γ | rest ~ Normal(σ_g g, σ_e²) (σ_g g + the Laplace with the sparse option, or
the stated Normal(mean, sd²)).  After sampling, its MCMC draws are replaced by exact draws of that
law (and g too when no pair of its group is informed), and the convergence checks skip it (a
coordinate ``exact_prior_draw`` = 1 on ``pair``): independent draws of the exact posterior have no
Markov-chain error to diagnose.  The pairs left to MCMC are the ones a step or an estimate
informs.  Before this (and before γ was whitened), short fits failed the R-hat check at γ without
data too often, which kept order effects opt-in: a 2 × 300 test fit showed R-hat 1.0114 at a γ
without data, and 8-step campaigns at 4 × 500 passed 19/30 against 25/30 without order effects.
:func:`belief.posterior.order_effects.order_effects_table` summarises γ
(complements and substitutes) from q_t.

Direction effects (issue 16: diagnoses that measure a mismatch direction)
------------------------------------------------------------------------
A diagnosis d with ``targets = ["latency"]`` and a ``measurement_se`` measures the mismatch
direction k = latency (:attr:`belief.inputs.candidates.Candidate.measures`).  Every measured
direction k that some adaptation targets has a *direction effect* ξ_k: the part of the logit
gain shared by every adaptation that targets k — how much closing mismatch k is worth on the
success logit of the current line of policies.  It enters the candidate effect::

    θ_m = (pooled tree of m, as above) + Σ_{k ∈ targets(m), k measured} ξ_k,
    ξ_k ~ Normal(0, direction_sd²)    (default 0.2 logit, GainsPriors.direction_sd)

(a crossed random effect: candidates of different lenses that target the same direction
share it), and each execution of d gives one ``direction_estimates`` row per direction::

    y_{d,k} ~ Normal(ξ_k, se_d²)      (se_d = d's measurement_se)

i.e. the diagnosis reports the mismatch along k *on the logit-gain scale* (the user calibrates
it: "closing latency is worth about y logit").  So a measured direction moves the prior mean of
every candidate that targets it, by ξ_k's posterior, before any of them runs; an execution of
one of them informs ξ_k, and with it the others that target k.  Assumptions stated: ξ_k is a
constant of the campaign (it does not depend on the policy the diagnosis runs from, and it is
not used up when a candidate closes k — repeats shrink θ_m as a whole by ρ); the measurement
error is normal with known se and independent across directions and executions; targets of a
diagnosis without ``measurement_se`` only label it (candidate prioritisation) and have no ξ.
Without measured directions the model is the one above (no ξ, nothing compiled for it).
Geometry: ξ is whitened by its direct measurements; the tree's θ-likelihood approximation is
taken for θ − Lξ given ξ (exact change of variables, as everywhere here).  For CVU,
:func:`simulate_direction` and :func:`loglik_direction` give the diagnosis' outcome and its
likelihood under the joint draws ``gains_xi`` of q_t.

Past campaigns (issue 16: learning order effects from a team's history)
----------------------------------------------------------------------
With ``campaigns`` = K > 0 the model is fitted on the current campaign's evidence stacked with
the evidence of K past campaigns of the same candidate set (:mod:`belief.inputs.past_campaigns`:
policies renamed ``label:policy``, each campaign with its own roots; a model update acts only
within its campaign).  Campaign is a level of the candidate effect::

    θ_{m,0} = θ_m                                   (the current campaign: the reference)
    θ_{m,c} = θ_m + o_{c,m},  o_{c,m} ~ Normal(0, τ_campaign²),   c = 1..K (past campaigns)
    τ_campaign ~ HalfNormal(campaign_sd),  campaign_sd = 0.2 by default

and a step of campaign c has step mean θ_{m,c} ρ^k + Σ_{a ∈ h} γ_{a→m} (estimates likewise).
γ, ρ, τ_exec, μ_0 and the pooling scales are *shared* by every campaign: that sharing is how
past campaigns inform the order effects (and the run-to-run scale) of the current one.  The
current campaign is the reference, so θ_m, q_t's ``gains_theta`` and every decision quantity
keep their meaning; a past campaign may differ from it by τ_campaign per candidate (its
baseline η_root is its own root's).  The offsets are sampled by data-informed non-centring
(all (c, m) at once, no per-campaign graph nodes; :meth:`GainsModel._campaign_offsets`), after
θ and γ, whose likelihood approximations see a past campaign's step with variance
v + τ_exec² + τ_campaign² (its offset integrated out).  Without that widening θ and γ were
whitened as if past steps measured them directly, and a 2 × 300 test fit failed at R-hat
1.0118 (campaign_offset of a past dr_1e7); with it the 12 benchmark fits (K = 2–8, 4 × 1000)
passed at the first attempt, R-hat ≤ 1.009 (``benchmarks/bench_past_campaigns.py``).  With
o = 0 the density of the model as written (:meth:`build_generative`) is the model without a
campaign level on the stacked evidence plus the prior terms of τ_campaign and u
(``tests/test_campaigns.py`` checks it).  Without past
campaigns (K = 0, the default) nothing of this is built: the model, its compile key and its
draws are those of the model without a campaign level.

The *next* execution of m from policy π with history h has predictive gain::

    ΔJ_next(m | π, h) = logistic(η_π + θ_m ρ^{k_m(π)} + Σ_{a ∈ h} γ_{a→m} + τ_exec z_new)
                        − logistic(η_π)

Assumption stated for the allocator: after a policy change, a candidate's logit gain is again
θ_m (shrunk by ρ per earlier execution of m on the lineage) plus the order effects of what ran
before plus fresh run-to-run noise; order effects add (on the logit scale) and do not depend
on how often or in which order the actors ran.  Arms of a paired evaluation are treated as
independent binomials (the pairing's positive correlation is ignored, which is conservative
for differences).

**Own evidence vs pooled** (:func:`own_evidence_share`): with ε_m = θ_m − (μ_0 + the group
effects of m) the candidate's own deviation and σ_m its prior scale (``own_scale``),
share_m = 1 − Var_post(ε_m) / E_post[σ_m²] ∈ [0, 1]: 0 when m's posterior deviation is its
prior (everything m is believed to gain comes from the pool), → 1 when m's own evidence pins it
down.  In a normal–normal model with known scales and a known pool mean this is the shrinkage
weight σ²/(σ² + s²).

The model is compiled once (nutpie, numba backend) with fixed-size ``pm.Data`` containers
over ``max_policies`` policy slots and ``max_estimates`` estimate slots (unused ones masked
out); a re-fit after new evidence swaps the data without recompiling.

For the allocator, :func:`decision_draws` compresses the posterior into joint draws at the
current policy (η_π, θ, τ_exec, ρ, repeats, and the standard-normal run-to-run noise of the
next two executions of every candidate); :func:`gain_from_draws`, :func:`next_gain`,
:func:`simulate` and :func:`loglik` are the vectorised functions the CVU engine uses;
:func:`state_after` moves the draws on by one execution (the state the CVU look-ahead's second
and later steps start from).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet
from belief.inputs.lineage import PolicyTree, policy_tree
from models.pooling import PoolingStructure, pooled_tree
from models.priors import (
    ScalePrior,
    check_priors,
    priors_as_dict,
    whitened_laplace,
    whitened_normal,
)
from models.sampling import sample, sample_arrays, slot_posterior

__all__ = [
    "GainsModel",
    "GainsPriors",
    "PoolingStructure",
    "decision_draws",
    "decision_vars",
    "encode_directions",
    "encode_estimates",
    "encode_policies",
    "gain_from_draws",
    "likelihood_approximation",
    "loglik",
    "loglik_direction",
    "next_gain",
    "own_evidence_share",
    "simulate",
    "simulate_direction",
    "state_after",
]

LEVELS = ("lens", "method", "candidate")
GAMMA_PRIORS = ("normal", "laplace")
"""The allowed laws of an order effect's own deviation e (``GainsPriors.gamma_prior``)."""


@dataclass(frozen=True)
class GainsPriors:
    """Priors of the gains model (logit scale).

    Attributes
    ----------
    baseline_mu, baseline_sigma : float
        Normal prior of a root policy's logit success probability.
    effect_mu_mu, effect_mu_sigma : float
        Normal prior of the global mean logit gain μ_0 (the default expects interventions to
        help a little: mean 0.2 on the logit scale, about +4 points at J = 0.3).
    tau_lens, tau_method, tau_candidate : ScalePrior
        Priors of the pooling scales (a number v means HalfStudentT(ν = 3, σ = v)).
    tau_exec : ScalePrior
        Prior of the run-to-run scale (a number v means HalfNormal(v)).
    repeat_alpha, repeat_beta : float
        Beta prior of the diminishing-returns factor ρ (mean 0.75 by default).
    order_effects : bool
        Whether the step mean carries the order effects γ_{a→m} (module docstring, "Order
        effects").  On by default; ``GainsPriors(order_effects=False)`` or
        ``[priors.gains] order_effects = false`` gives the model without them.
    gamma_group_sd, gamma_sd : float
        Default prior of an order effect without a stated prior: γ_{a→m} = g_{M(a)→M(m)} + e,
        g ~ Normal(0, gamma_group_sd) shared by the candidate pairs of a method pair (when it
        holds ≥ 2 of them), e ~ Normal(0, gamma_sd): sd ≈ 0.255 logit, a shrinkage prior
        centred at "no interaction" (module docstring: why not a heavy-tailed one).
    gamma_prior : {"normal", "laplace"}
        The law of e: Normal(0, gamma_sd) (default) or the sparse ``"laplace"``,
        e ~ Laplace(0, gamma_sd/√2) — the same s.d., peaked at "no interaction", exponential
        tails (module docstring, "The sparse option").  Stated pairs keep their stated
        normal; ignored when ``order_effects`` is false.
    direction_sd : float
        Prior sd of a direction effect ξ_k ~ Normal(0, direction_sd) (module docstring,
        "Direction effects"; only directions a diagnosis measures have one).
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
    tau_exec: ScalePrior | float = field(
        default_factory=lambda: ScalePrior("half_normal", sigma=0.2))
    repeat_alpha: float = 6.0
    repeat_beta: float = 2.0
    order_effects: bool = True
    gamma_group_sd: float = 0.05
    gamma_sd: float = 0.25
    gamma_prior: str = "normal"
    direction_sd: float = 0.2

    SCALES: ClassVar[dict[str, str]] = {
        "tau_lens": "half_student_t", "tau_method": "half_student_t",
        "tau_candidate": "half_student_t", "tau_exec": "half_normal"}

    def __post_init__(self) -> None:
        if not isinstance(self.order_effects, bool):
            raise InputError("GainsPriors", f"order_effects must be true or false, got "
                                            f"{self.order_effects!r}")
        if self.gamma_prior not in GAMMA_PRIORS:
            raise InputError("GainsPriors", f"gamma_prior must be one of {list(GAMMA_PRIORS)}, "
                                            f"got {self.gamma_prior!r}")
        check_priors(self, locations=("baseline_mu", "effect_mu_mu"), scales=self.SCALES,
                     skip=("order_effects", "gamma_prior"))

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (scale priors as ``{"family": ..., ...}``)."""
        return priors_as_dict(self)


@dataclass(frozen=True)
class PolicyEncoding:
    """Fixed-size arrays describing policies and their evaluation counts."""

    names: list[str]
    ancestry: np.ndarray  # (P, P): ancestry[k, j] = 1 if j is k or an ancestor of k
    is_root: np.ndarray  # (P,)
    via: np.ndarray  # (P,) index into gain candidates (0 for roots)
    repeats: np.ndarray  # (P,) earlier executions of `via` on the lineage
    successes: np.ndarray  # (P,)
    trials: np.ndarray  # (P,)
    history: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    # (P, A): history[k, a] = 1 if actor a ran before the step that produced slot k
    steps: dict[str, int] = field(default_factory=dict)  # policy → step that produced it
    updates: dict[str, int] = field(default_factory=dict)  # model update → first step it ran
    # past campaigns (module docstring, "Past campaigns"): campaign of every policy (0 = the
    # current one, 1..K past) and the model updates of each past campaign
    campaign_of: dict[str, int] = field(default_factory=dict)
    past_updates: dict[int, dict[str, int]] = field(default_factory=dict)

    def data(self) -> dict[str, np.ndarray]:
        return {"ancestry": self.ancestry, "is_root": self.is_root, "via": self.via,
                "repeats": self.repeats, "successes": self.successes, "trials": self.trials}

    def actors_before(self, policy: str, step: float, gain_ids: list[str],
                      actors: list[str]) -> np.ndarray:
        """Indicator over ``actors`` of what ran before the next execution from ``policy`` at
        ``step``: the adaptations on the lineage of ``policy`` (``policy`` included) and the
        model updates executed at a step < ``step``."""
        out = np.zeros(len(actors))
        counts = self.repeats_from(policy, gain_ids)
        for j, c in enumerate(gain_ids):
            if counts[j] > 0 and c in actors:
                out[actors.index(c)] = 1.0
        camp = self.campaign_of.get(policy, 0)
        updates = self.updates if camp == 0 else self.past_updates.get(camp, {})
        for u, t in updates.items():
            if u in actors and t < step:
                out[actors.index(u)] = 1.0
        return out

    def campaign_onehot(self, campaigns: int) -> np.ndarray:
        """(P, K): 1 where a policy slot belongs to past campaign k + 1 (all 0 for the
        current campaign and unused slots)."""
        out = np.zeros((len(self.is_root), campaigns))
        for k, p in enumerate(self.names):
            c = self.campaign_of.get(p, 0)
            if c:
                out[k, c - 1] = 1.0
        return out

    def repeats_from(self, policy: str, gain_ids: list[str]) -> np.ndarray:
        """How often each gain candidate was executed on the lineage of ``policy``."""
        n = len(self.names)
        k = self.names.index(policy)
        counts = np.zeros(len(gain_ids))
        for j in np.flatnonzero(self.ancestry[k, :n]):
            if not self.is_root[j]:
                counts[self.via[j]] += 1
        return counts


def encode_policies(paired: pd.DataFrame, gain_ids: list[str], max_policies: int,
                    current: tuple[str, ...] = (),
                    policy_evals: pd.DataFrame | None = None,
                    gain_estimates: pd.DataFrame | None = None,
                    model_updates: pd.DataFrame | None = None,
                    actors: list[str] | None = None,
                    campaign_of: Mapping[str, int] | None = None) -> PolicyEncoding:
    """Encode the policy tree and aggregated binomial counts into ``max_policies`` slots.

    Counts of a policy are summed over every arm it appeared in and every stand-alone
    evaluation of it (binomial sufficient statistics).  Unused slots are roots with no trials
    (they sample from the prior).  ``history`` (slots × ``actors``) marks, for every step
    π ← parent via m, the actors that ran before it: the adaptations on the parent's lineage
    and the model updates (``model_updates`` rows: step, candidate) executed at a step below
    the step of the paired evaluation that produced π.

    With past campaigns, ``campaign_of`` maps every policy of a past campaign to its index
    1..K (others are the current campaign, 0) and ``model_updates`` carries a ``campaign``
    column: a model update counts only in the history of its own campaign's steps.
    """
    extra = tuple(current)
    for table in (policy_evals, gain_estimates):
        if table is not None and len(table):
            extra = (*extra, *table["policy"])
    tree: PolicyTree = policy_tree(paired, extra=extra)
    n = len(tree.policies)
    if n > max_policies:
        raise InputError("paired_evaluations", f"{n} distinct policies exceed max_policies="
                                               f"{max_policies}; build the model with more slots")
    slot = {p: i for i, p in enumerate(tree.policies)}
    anc = np.zeros((max_policies, max_policies))
    is_root = np.ones(max_policies)
    via = np.zeros(max_policies, dtype=np.int64)
    repeats = np.zeros(max_policies)
    for p, k in slot.items():
        for a in tree.ancestors(p):
            anc[k, slot[a]] = 1.0
        if p in tree.parent:
            is_root[k] = 0.0
            via[k] = gain_ids.index(tree.via[p])
            repeats[k] = sum(tree.via.get(a) == tree.via[p] for a in tree.ancestors(p)[1:])
    for k in range(n, max_policies):
        anc[k, k] = 1.0
    succ = np.zeros(max_policies, dtype=np.int64)
    trials = np.zeros(max_policies, dtype=np.int64)
    for arm, pol in (("control", "policy"), ("treated", "treated_policy")):
        sums = paired.groupby(pol)[[f"{arm}_successes", f"{arm}_trials"]].sum()
        for p, row in sums.iterrows():
            succ[slot[p]] += int(row[f"{arm}_successes"])
            trials[slot[p]] += int(row[f"{arm}_trials"])
    if policy_evals is not None and len(policy_evals):
        sums = policy_evals.groupby("policy")[["successes", "trials"]].sum()
        for p, row in sums.iterrows():
            succ[slot[p]] += int(row["successes"])
            trials[slot[p]] += int(row["trials"])
    steps: dict[str, int] = {}
    for p, t in zip(paired.get("treated_policy", []), paired.get("step", []), strict=True):
        steps[str(p)] = min(int(t), steps.get(str(p), int(t)))
    by_campaign: dict[int, dict[str, int]] = {0: {}}
    if model_updates is not None and len(model_updates):
        camps = (model_updates["campaign"] if "campaign" in model_updates
                 else np.zeros(len(model_updates), dtype=int))
        for c, t, k in zip(model_updates["candidate"], model_updates["step"], camps,
                           strict=True):
            ups = by_campaign.setdefault(int(k), {})
            ups[str(c)] = min(int(t), ups.get(str(c), int(t)))
    updates = by_campaign.pop(0)
    enc = PolicyEncoding(list(tree.policies), anc, is_root, via, repeats, succ, trials,
                         steps=steps, updates=updates, campaign_of=dict(campaign_of or {}),
                         past_updates=by_campaign)
    actors = list(actors or [])
    history = np.zeros((max_policies, len(actors)))
    for p, k in slot.items():
        if p in tree.parent:
            history[k] = enc.actors_before(tree.parent[p], steps.get(p, np.inf), gain_ids,
                                           actors)
    return replace(enc, history=history)


@dataclass(frozen=True)
class EstimateEncoding:
    """Fixed-size arrays of summary-level gain estimates (unused slots masked)."""

    value: np.ndarray
    se: np.ndarray
    candidate: np.ndarray
    repeats: np.ndarray
    mask: np.ndarray
    history: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (E, A)
    campaign: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # (E,): campaign of the row's policy (0 = current, 1..K past)

    def data(self) -> dict[str, np.ndarray]:
        return {"est_value": self.value, "est_se": self.se, "est_candidate": self.candidate,
                "est_repeats": self.repeats, "est_mask": self.mask}

    def campaign_onehot(self, campaigns: int) -> np.ndarray:
        """(E, K): 1 where an estimate slot belongs to past campaign k + 1."""
        out = np.zeros((len(self.mask), campaigns))
        for e, c in enumerate(self.campaign):
            if c:
                out[e, int(c) - 1] = 1.0
        return out


def encode_estimates(gain_estimates: pd.DataFrame | None, enc: PolicyEncoding,
                     gain_ids: list[str], max_estimates: int,
                     actors: list[str] | None = None) -> EstimateEncoding:
    """Encode ``gain_estimates`` rows into ``max_estimates`` slots.

    ``repeats`` is how often the estimated candidate had run on the lineage of the row's policy
    (the estimate is of the *next* execution from that policy); ``history`` (slots ×
    ``actors``) what ran before it (:meth:`PolicyEncoding.actors_before` at the row's step).
    """
    actors = list(actors or [])
    history = np.zeros((max_estimates, len(actors)))
    value = np.zeros(max_estimates)
    se = np.ones(max_estimates)
    cand = np.zeros(max_estimates, dtype=np.int64)
    repeats = np.zeros(max_estimates)
    mask = np.zeros(max_estimates)
    camp = np.zeros(max_estimates, dtype=np.int64)
    rows = gain_estimates if gain_estimates is not None else pd.DataFrame()
    if len(rows) > max_estimates:
        raise InputError("gain_estimates", f"{len(rows)} rows exceed max_estimates="
                                           f"{max_estimates}; build the model with more slots")
    for e, (c, p, v, s_, t) in enumerate(zip(
            rows.get("candidate", []), rows.get("policy", []), rows.get("estimate", []),
            rows.get("se", []), rows.get("step", []), strict=True)):
        j = gain_ids.index(c)
        value[e], se[e], cand[e], mask[e] = v, s_, j, 1.0
        repeats[e] = enc.repeats_from(p, gain_ids)[j]
        history[e] = enc.actors_before(p, int(t), gain_ids, actors)
        camp[e] = enc.campaign_of.get(p, 0)
    return EstimateEncoding(value, se, cand, repeats, mask, history, camp)

def encode_directions(direction_estimates: pd.DataFrame | None, directions: list[str],
                      max_slots: int) -> dict[str, np.ndarray]:
    """Encode ``direction_estimates`` rows into ``max_slots`` slots (unused ones masked):
    ``dir_value``, ``dir_se``, ``dir_mask`` over slots and ``dir_onehot`` (slot × direction),
    1 at the measured direction (module docstring, "Direction effects")."""
    value, se, mask = np.zeros(max_slots), np.ones(max_slots), np.zeros(max_slots)
    onehot = np.zeros((max_slots, len(directions)))
    rows = direction_estimates if direction_estimates is not None else pd.DataFrame()
    if len(rows) and not directions:
        raise InputError("direction_estimates", "the gains model has no measured direction "
                                                "(no diagnosis with targets and measurement_se)")
    if len(rows) > max_slots:
        raise InputError("direction_estimates", f"{len(rows)} rows exceed "
                                                f"max_direction_estimates={max_slots}; build "
                                                "the model with more slots")
    for e, (k, v, s_) in enumerate(zip(rows.get("direction", []), rows.get("estimate", []),
                                       rows.get("se", []), strict=True)):
        if k not in directions:
            raise InputError("direction_estimates", f"direction {k!r} is not one the gains "
                                                    f"model has ({directions})", row=e)
        value[e], se[e], mask[e] = v, s_, 1.0
        onehot[e, directions.index(k)] = 1.0
    return {"dir_value": value, "dir_se": se, "dir_mask": mask, "dir_onehot": onehot}


def likelihood_approximation(enc: PolicyEncoding, est: EstimateEncoding,
                             n_candidates: int, priors: GainsPriors) -> dict[str, np.ndarray]:
    """Normal approximations of the binomial likelihoods, for the sampler's geometry only.

    They set the data-informed non-centring (:func:`models.priors.whitened_normal`) and
    nothing else: the posterior does not depend on them.  With p̂ = (successes + ½) /
    (trials + 1):

    - a slot's logit is ≈ N(logit p̂, 1/P), P = (trials + 1) p̂ (1 − p̂) (0 without trials);
      a step π ← parent ≈ N(x̂ = logit p̂_π − logit p̂_parent, 1/P_π) given the parent
      (``slot_prec``, ``slot_prec_x``; a root: its own logit);
    - θ_m: each step via m is ≈ N(ρ̂^k θ_m, v + τ_exec²) with v = 1/P_π + 1/P_parent and ρ̂
      the prior mean of ρ, each estimate ≈ N(ρ̂^k θ_m, se² + τ_exec²): ``step_w`` (C × P) =
      ρ̂^{2k} on m's steps, ``step_wx`` = ρ̂^k x̂, ``step_var`` = v; ``est_w``, ``est_wx``
      (C × E) likewise with ``est_se``.  The model sums them with the current τ_exec.

    ``step_hat`` (x̂, 0 unless both ends are evaluated) and ``step_both`` give the order
    effects their own approximation (:meth:`GainsModel._order_effects_sampled`); θ's leaves
    them out (it shapes only the geometry; their prior is centred at 0).
    """
    p = len(enc.is_root)
    has = enc.trials > 0
    phat = (enc.successes + 0.5) / (enc.trials + 1.0)
    logit = np.log(phat) - np.log1p(-phat)
    prec = np.where(has, (enc.trials + 1.0) * phat * (1.0 - phat), 0.0)
    parent = np.array([_parent_slot(enc, k) for k in range(p)])
    child = enc.is_root == 0
    both = child & has & has[parent]
    step_hat = np.where(both, logit - logit[parent], 0.0)
    slot_x = np.where(child, step_hat, logit)
    slot_prec = np.where(child, np.where(both, prec, 0.0), prec)
    rho = priors.repeat_alpha / (priors.repeat_alpha + priors.repeat_beta)
    onehot = (enc.via[None, :] == np.arange(n_candidates)[:, None]) & both[None, :]
    r = rho ** enc.repeats
    with np.errstate(divide="ignore"):
        var = np.where(both, 1.0 / np.where(has, prec, 1.0)
                       + 1.0 / np.where(has[parent], prec[parent], 1.0), 1.0)
    e_on = (est.candidate[None, :] == np.arange(n_candidates)[:, None]) & (est.mask > 0)
    re = rho ** est.repeats
    via_onehot = (enc.via[:, None] == np.arange(n_candidates)[None, :]) & child[:, None]
    est_onehot = (est.candidate[:, None] == np.arange(n_candidates)[None, :])
    return {"slot_prec": slot_prec, "slot_prec_x": slot_prec * slot_x,
            "step_hat": step_hat, "step_both": both.astype(float),
            "step_w": onehot * r**2, "step_wx": onehot * r * step_hat, "step_var": var,
            "est_w": e_on * re**2, "est_wx": e_on * re * est.value,
            "via_onehot": via_onehot.astype(float), "est_onehot": est_onehot.astype(float)}


def _parent_slot(enc: PolicyEncoding, k: int) -> int:
    """Slot of the parent of slot k (k itself for a root)."""
    if enc.is_root[k]:
        return k
    anc = [j for j in np.flatnonzero(enc.ancestry[k]) if j != k]
    return max(anc, key=lambda j: enc.ancestry[j].sum())


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
        Number K of past campaigns fitted with the current one (module docstring, "Past
        campaigns"); 0 (default) is the model without a campaign level, unchanged.
    campaign_sd : float
        σ of τ_campaign ~ HalfNormal(σ) (used only with ``campaigns`` > 0).

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
        """Actors, pairs and the prior of every order effect γ_{a→m} (module docstring)."""
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

    def _order_effects(self, history, est_history):
        """γ over pairs and the order-effect terms Σ_{a ∈ h} γ_{a→m} of every step and
        estimate (zeros without pairs), in a model context.

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
            gamma = pt.set_subtensor(gamma[stated], self.pair_mean[stated]
                                     + self.pair_sd[stated] * z)
        gamma = pm.Deterministic("gamma", gamma, dims="pair")
        mat = pt.zeros((len(self.actors), len(self.gain_ids)))
        mat = pt.set_subtensor(mat[self.pair_actor, self.pair_target], gamma)
        return gamma, pt.dot(history, mat), pt.dot(est_history, mat)

    def _order_effects_sampled(self, data, approx, effect, rho, tau_exec, extra_var=None):
        """:meth:`_order_effects` as sampled by :meth:`build`: the same prior, every γ_{a→m}
        by data-informed non-centring *given* θ, ρ, τ_exec and the γ of earlier actors.

        Actor by actor (candidate order), γ_{a→·} is :func:`models.priors.whitened_normal`
        (:func:`models.priors.whitened_laplace` for the pairs without a stated prior when
        ``gamma_prior = "laplace"``) with the normal approximation of its likelihood: each evaluated
        step k via m with a in its history is ≈ N(γ_{a→m}, v_k + τ_exec²) for the residual x̂_k −
        θ_m ρ^{k_m} − Σ_{a' before a} γ_{a'→m} (later actors taken as 0).  The map from the standard
        variables to γ is triangular, so the posterior is unchanged; it removes the ridge θ_m + Σ γ
        = const that a step informs when m ran after several actors.
        ``extra_var`` (per policy slot) widens the approximation: τ_campaign² on the steps of
        past campaigns, whose offset is not yet sampled (module docstring, "Past campaigns").
        """
        import pymc as pm
        import pytensor.tensor as pt

        pr = self.priors
        n = len(self.pairs)
        mu = pt.as_tensor(np.where(self.pair_stated, self.pair_mean, 0.0))
        if self.gamma_groups:
            g = pm.Normal("z_gamma_group", 0.0, 1.0, shape=len(self.gamma_groups))
            grouped = (~self.pair_stated) & (self.pair_group >= 0)
            mu = mu + np.where(grouped, pr.gamma_group_sd, 0.0) * g[
                np.maximum(self.pair_group, 0)]
        sd = np.where(self.pair_stated, self.pair_sd, pr.gamma_sd)
        sparse = pr.gamma_prior == "laplace"
        hist, via = data["history"], approx["via_onehot"]
        var = approx["step_var"] + tau_exec**2
        w = approx["step_both"] / (var if extra_var is None else var + extra_var)
        resid = approx["step_hat"] - (via * effect[None, :]).sum(axis=1) * rho ** data["repeats"]
        gamma = pt.zeros(n)
        for i in range(len(self.actors)):
            idx = np.flatnonzero(self.pair_actor == i)
            if not len(idx):
                continue
            tgt = self.pair_target[idx]
            hw = hist[:, i] * w
            prec = (via[:, tgt] * hw[:, None]).sum(axis=0)
            prec_x = (via[:, tgt] * (hw * resid)[:, None]).sum(axis=0)
            lap = ~self.pair_stated[idx] if sparse else np.zeros(len(idx), dtype=bool)
            if not lap.any():
                x = whitened_normal(f"gamma_{i}", mu[idx], sd[idx], prec, prec_x,
                                    shape=len(idx))
            elif lap.all():
                x = whitened_laplace(f"gamma_lap_{i}", mu[idx], pr.gamma_sd, prec, prec_x,
                                     shape=len(idx))
            else:  # stated pairs stay normal; the others are Laplace
                x = pt.zeros(len(idx))
                k = np.flatnonzero(~lap)
                x = pt.set_subtensor(x[k], whitened_normal(
                    f"gamma_{i}", mu[idx[k]], sd[idx[k]], prec[k], prec_x[k], shape=len(k)))
                k = np.flatnonzero(lap)
                x = pt.set_subtensor(x[k], whitened_laplace(
                    f"gamma_lap_{i}", mu[idx[k]], pr.gamma_sd, prec[k], prec_x[k],
                    shape=len(k)))
            gamma = pt.set_subtensor(gamma[idx], x)
            row = pt.set_subtensor(pt.zeros(len(self.gain_ids))[tgt], x)
            resid = resid - hist[:, i] * (via * row[None, :]).sum(axis=1)
        gamma = pm.Deterministic("gamma", gamma, dims="pair")
        mat = pt.zeros((len(self.actors), len(self.gain_ids)))
        mat = pt.set_subtensor(mat[self.pair_actor, self.pair_target], gamma)
        return gamma, pt.dot(hist, mat), pt.dot(data["est_history"], mat)

    def _defaults(self, encoding, estimates):
        if encoding is None:
            encoding = self.encode(_no_rows())
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
                                      _width(encoding.history, self.max_policies, n_act),
                                      dims=("policy_slot", "actor"))
            data["est_history"] = pm.Data("est_history",
                                          _width(estimates.history, self.max_estimates,
                                                 n_act),
                                          dims=("estimate_slot", "actor"))
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
        directions; module docstring, "Direction effects")."""
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
        likelihood passed up the tree (module docstring, "Geometry").
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
            tau, tau_exec = self._scales()
            rho = pm.Beta("rho", pr.repeat_alpha, pr.repeat_beta)
            root = data["is_root"]
            child = 1.0 - root
            rk = rho ** data["repeats"]
            ek = rho ** data["est_repeats"]
            # θ's likelihood approximation with the current τ_exec (module docstring)
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
            pm.Binomial("obs", n=data["trials"], logit_p=eta, observed=data["successes"],
                        dims="policy_slot")
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
            _, order, order_est = self._order_effects(data.get("history"),
                                                      data.get("est_history"))
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
               **likelihood_approximation(enc, est, len(self.gain_ids), self.priors)}
        if self.pairs:
            out["history"] = _width(enc.history, self.max_policies, len(self.actors))
            out["est_history"] = _width(est.history, self.max_estimates, len(self.actors))
        elif not self.campaigns:  # only the order effects and the campaign offsets read them
            out.pop("step_hat")  # (a compiled model knows used data only)
            out.pop("step_both")
        if self.campaigns:
            out["policy_campaign"] = enc.campaign_onehot(self.campaigns)
            out["est_campaign"] = est.campaign_onehot(self.campaigns)
        return {k: v for k, v in out.items() if k not in _ONE_HOT}

    def _compiled(self):
        key = (tuple(self.gain_ids), tuple(self.methods), tuple(self.lenses),
               tuple(self.structure.groups), self.priors, self.max_policies,
               self.max_estimates, tuple(self.pairs), tuple(self.pair_stated),
               tuple(self.pair_mean), tuple(self.pair_sd), tuple(self.pair_group),
               tuple(self.directions), self.direction_loading.tobytes(),
               self.max_direction_estimates)
        if self.campaigns:  # the default key (and model) is unchanged without past campaigns
            key = (*key, "campaigns", self.campaigns, self.campaign_sd)
        if key not in _COMPILED:
            from models.compile_cache import compile_model

            t0 = time.perf_counter()
            _COMPILED[key] = compile_model(self.build())
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
            diagnoses (module docstring, "Direction effects").
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
        conditional law (module docstring, "Exact prior draws").
        """
        n = len(enc.names)
        child = np.flatnonzero(enc.is_root[:n] == 0)
        out = np.zeros(len(self.pairs), dtype=bool)
        hist = _width(enc.history, self.max_policies, len(self.actors))
        ehist = _width(est.history, self.max_estimates, len(self.actors))
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
                parents[k] = _parent_name(enc, k)
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
            const["history"] = (("policy", "actor"),
                                _width(enc.history, self.max_policies, len(self.actors))[:n])
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

        ΔJ_next(m | π) = logistic(η_π + θ_m ρ^{k_m(π)} + τ_exec · z) − logistic(η_π),
        z ~ N(0, 1) drawn once per posterior draw and candidate.

        Returns
        -------
        DataArray
            Dims (``sample``, ``candidate``), on the success-probability scale.
        """
        return gain_from_draws(self.decision_draws(idata, policy, rng))


LIGHT_VARS = ("policy_logit", "effect", "tau_exec", "rho", "gamma", "z_gamma_group", "xi")
"""The posterior variables :func:`decision_draws` and ``GainsModel._gamma_from_prior`` read
(``fit(light=True)`` keeps only these)."""

DRAW_VARS = ("gains_eta", "gains_theta", "gains_tau", "gains_rho", "gains_repeats",
             "gains_z_now", "gains_z_next")


def decision_draws(idata: xr.DataTree, policy: str, gain_ids: list[str],
                   rng: np.random.Generator) -> xr.Dataset:
    """Compress a gains posterior into joint draws at the current policy π.

    Returns a Dataset over ``sample`` (chain × draw) and ``candidate`` (gain candidates):
    ``gains_eta`` = η_π, ``gains_theta`` = θ_m, ``gains_tau`` = τ_exec, ``gains_rho`` = ρ,
    ``gains_repeats`` = k_m(π), and standard-normal noise ``gains_z_now`` / ``gains_z_next``
    of the next and the following execution of every candidate (drawn with ``rng``).  With
    order effects: ``gains_gamma`` (sample, actor, candidate) = γ_{a→m} (0 where a = m),
    ``gains_history`` (actor) = 1 for the actors in the history h of the next execution from π
    (the adaptations on π's lineage and the executed model updates) and ``gains_offset``
    (sample, candidate) = Σ_{a ∈ h} γ_{a→m}; for the report ``gains_gamma_pair`` (1 where γ_{a→m}
    is a parameter), ``gains_gamma_evidence`` (how many evaluated steps of m had a in their
    history) and ``gains_gamma_stated`` (1 for a stated prior), over (actor, candidate).
    """
    post = idata["posterior"].to_dataset()
    if policy not in post["policy"].values:
        raise InputError("GainsModel.predictive_gain", f"policy {policy!r} was not part of "
                                                       "the fit; pass it as current_policy")
    eta = _stack(post["policy_logit"].sel(policy=policy))
    theta = _stack(post["effect"].sel(candidate=gain_ids))
    shape = theta.shape
    out = xr.Dataset(
        {"gains_eta": ("sample", eta), "gains_theta": (("sample", "candidate"), theta),
         "gains_tau": ("sample", _stack(post["tau_exec"])),
         "gains_rho": ("sample", _stack(post["rho"])),
         "gains_repeats": ("candidate", lineage_repeats(idata, policy, gain_ids)),
         "gains_z_now": (("sample", "candidate"), rng.standard_normal(shape)),
         "gains_z_next": (("sample", "candidate"), rng.standard_normal(shape))},
        coords={"candidate": gain_ids})
    if "gamma" in post:
        const = idata["constant_data"].to_dataset()
        actors = [str(a) for a in const["actor"].values]
        mat = np.zeros((shape[0], len(actors), len(gain_ids)))
        g = _stack(post["gamma"])
        for p, (a, m) in enumerate(zip(const["pair_source"].values, const["pair_target"].values,
                                       strict=True)):
            mat[:, actors.index(str(a)), gain_ids.index(str(m))] = g[:, p]
        hist = np.asarray(const["model_update_done"].values, dtype=float).copy()
        reps = lineage_repeats(idata, policy, gain_ids)
        for j, c in enumerate(gain_ids):
            if reps[j] > 0 and c in actors:
                hist[actors.index(c)] = 1.0
        # how many evaluated steps of m had a in their history; whether the prior was stated
        evidence = np.zeros((len(actors), len(gain_ids)))
        vias = [str(v) for v in const["via"].values]
        for k, v in enumerate(vias):
            if v and const["trials"].values[k] > 0:
                evidence[:, gain_ids.index(v)] += const["history"].values[k]
        stated = np.zeros((len(actors), len(gain_ids)))
        for p, (a, m) in enumerate(zip(const["pair_source"].values, const["pair_target"].values,
                                       strict=True)):
            stated[actors.index(str(a)), gain_ids.index(str(m))] = const["pair_stated"].values[p]
        pair = np.zeros((len(actors), len(gain_ids)))
        for a, m in zip(const["pair_source"].values, const["pair_target"].values, strict=True):
            pair[actors.index(str(a)), gain_ids.index(str(m))] = 1.0
        out["gains_gamma"] = (("sample", "actor", "candidate"), mat)
        out["gains_history"] = ("actor", hist)
        out["gains_gamma_pair"] = (("actor", "candidate"), pair)
        out["gains_gamma_evidence"] = (("actor", "candidate"), evidence)
        out["gains_gamma_stated"] = (("actor", "candidate"), stated)
        out["gains_offset"] = (("sample", "candidate"), np.einsum("a,sac->sc", hist, mat))
        out = out.assign_coords(actor=actors)
    if "xi" in post:
        out["gains_xi"] = (("sample", "measured_direction"), _stack(post["xi"]))
        out = out.assign_coords(measured_direction=[str(k) for k in post["direction"].values])
    return out


ORDER_VARS = ("gains_gamma", "gains_history", "gains_offset", "gains_xi")
"""Optional decision draws: of the order effects (absent without order effects) and of the
direction effects ξ (``gains_xi``, absent without measured directions)."""


def decision_vars(belief: xr.Dataset) -> list[str]:
    """The gains draws a belief holds: :data:`DRAW_VARS` and whichever :data:`ORDER_VARS`."""
    return [*DRAW_VARS, *(v for v in ORDER_VARS if v in belief)]


def _offset(draws: xr.Dataset) -> np.ndarray | float:
    """Σ_{a ∈ h} γ_{a→m} (S, C), or 0 without order effects."""
    if "gains_offset" not in draws:
        return 0.0
    return np.asarray(draws["gains_offset"].values, dtype=float)


def _offset_after(draws: xr.Dataset, m: str) -> np.ndarray | float:
    """The offset after executing m: Σ_{a ∈ h ∪ {m}} γ_{a→·} (m joins the history once)."""
    off = _offset(draws)
    if "gains_gamma" not in draws:
        return off
    actors = [str(a) for a in draws["actor"].values]
    if m not in actors:
        return off
    i = actors.index(m)
    if float(draws["gains_history"].values[i]) > 0:
        return off
    return off + np.asarray(draws["gains_gamma"].values[:, i, :], dtype=float)


def _arrays(draws: xr.Dataset) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(draws[v].values, dtype=float) for v in DRAW_VARS)


def _gain(eta, theta, tau, rho, k, z, offset=0.0) -> np.ndarray:
    new = eta[:, None] + theta * rho[:, None] ** k[None, :] + offset + tau[:, None] * z
    return expit(new) - expit(eta)[:, None]


def gain_from_draws(draws: xr.Dataset) -> xr.DataArray:
    """ΔJ_next(m | π, h) = logistic(η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z_now,m)
    − logistic(η), (sample, candidate)."""
    eta, theta, tau, rho, k, z_now, _ = _arrays(draws)
    return xr.DataArray(_gain(eta, theta, tau, rho, k, z_now, _offset(draws)),
                        dims=("sample", "candidate"),
                        coords={"candidate": draws["candidate"].values}, name="gain")


def executed_logit(draws: xr.Dataset, m: str) -> np.ndarray:
    """η' = η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z_now,m: the logit of the policy that
    executing m produces."""
    eta, theta, tau, rho, k, z_now, _ = _arrays(draws)
    j = list(draws["candidate"].values).index(m)
    off = _offset(draws)
    off_j = off[:, j] if isinstance(off, np.ndarray) else off
    return eta + theta[:, j] * rho ** k[j] + off_j + tau * z_now[:, j]


def next_gain(draws: xr.Dataset, m: str | None, adapts: bool | None = None,
              order: bool = True) -> xr.DataArray:
    """Joint draws of every candidate's next gain in the state after executing ``m``.

    For an adaptation m (``adapts``; default: m is one of the draws' candidates) the policy
    becomes π' with η' = :func:`executed_logit`, m's repeat count rises by one, m joins the
    history h (every candidate c gains γ_{m→c}), and the following execution of every
    candidate uses fresh noise z_next.  For a model update (``adapts=False``) the policy is
    unchanged but m joins h: ΔJ = logistic(η + θ ρ^k + Σ_{a ∈ h ∪ {m}} γ_{a→·} + τ z_now) −
    logistic(η).  For ``m`` None the gains are :func:`gain_from_draws`.

    ``order=False`` leaves m out of the history of the later executions (offset Σ_{a ∈ h}
    γ_{a→·} instead of Σ_{a ∈ h ∪ {m}}): the next gains without m's order effects, used to
    split CVU by channel (:mod:`belief.decision.cvu_channels`).  Without order effects in
    the draws it changes nothing.  Computed as :func:`gain_from_draws` of
    :func:`state_after` (the state after m, whose next executions these are).
    """
    if m is None:
        return gain_from_draws(draws)
    return gain_from_draws(state_after(draws, m, adapts, order=order))


def state_after(draws: xr.Dataset, m: str, adapts: bool | None = None,
                seed: int | list[int] | tuple[int, ...] = 0, order: bool = True
                ) -> xr.Dataset:
    """The decision draws of the state after executing m once, on the same samples.

    For an adaptation m (``adapts``; default: m is one of the draws' candidates)::

        η ← η' = :func:`executed_logit` (η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z_now,m)
        k_m ← k_m + 1,   z_now ← z_next,   z_next ← fresh N(0, 1) from ``default_rng(seed)``

    and, with order effects, an actor m joins the history once: ``gains_history`` [m] = 1,
    ``gains_offset`` ← Σ_{a ∈ h ∪ {m}} γ_{a→·} (:func:`_offset_after`).  A model update
    (``adapts`` False) only joins the history (the policy and the noise are unchanged, as in
    :func:`next_gain`); anything else (a diagnosis, or m not in the draws) leaves the state as
    it is and returns ``draws`` itself.  ``order=False`` leaves m out of the history (the
    state without m's order effects, for :func:`next_gain`'s channel split).  So, for every
    candidate c,

        :func:`gain_from_draws` (state_after(d, m)) = :func:`next_gain` (d, m)  (its definition)
        :func:`next_gain` (state_after(d, m), c)     = the gains after m then c,

    and :func:`simulate` / :func:`loglik` on the result are c's experiment from the state after
    m (η' as control arm, γ_{m→c} in c's step).  The samples stay aligned (draw i of the result
    is draw i of ``draws`` moved on by one execution), so importance weights over them carry
    over.  The fresh noise is the run-to-run noise of the execution after the next one; a fixed
    ``seed`` gives common random numbers across whatever is compared from the same state (the
    CVU look-ahead derives it from the depth, :mod:`belief.posterior.experiments`).
    """
    ids = [str(c) for c in draws["candidate"].values]
    if adapts is None:
        adapts = m in ids
    has_order = "gains_gamma" in draws
    actors = [str(a) for a in draws["actor"].values] if has_order else []
    joins = order and has_order and m in actors and not float(
        draws["gains_history"].values[actors.index(m)]) > 0
    if not adapts and not joins:
        return draws
    out = draws.copy()
    if adapts:
        j = ids.index(m)
        z_next = np.asarray(draws["gains_z_next"].values, dtype=float)
        reps = np.asarray(draws["gains_repeats"].values, dtype=float).copy()
        reps[j] += 1
        out["gains_eta"] = (draws["gains_eta"].dims, executed_logit(draws, m))
        out["gains_repeats"] = (draws["gains_repeats"].dims, reps)
        out["gains_z_now"] = (draws["gains_z_now"].dims, z_next)
        out["gains_z_next"] = (draws["gains_z_next"].dims,
                               np.random.default_rng(seed).standard_normal(z_next.shape))
    if joins:
        hist = np.asarray(draws["gains_history"].values, dtype=float).copy()
        hist[actors.index(m)] = 1.0
        out["gains_offset"] = (draws["gains_offset"].dims, _offset_after(draws, m))
        out["gains_history"] = (draws["gains_history"].dims, hist)
    return out


def simulate(draws: xr.Dataset, m: str, rng: np.random.Generator, idx: np.ndarray,
             trials: int = 100) -> np.ndarray:
    """Outcomes of m's paired evaluation (``trials`` per arm) under the draws ``idx``.

    Returns an integer array (len(idx), 2): control successes ~ Bin(trials, logistic(η)),
    treated successes ~ Bin(trials, logistic(η')) with η' from :func:`executed_logit`.
    """
    eta = draws["gains_eta"].values[idx]
    eta2 = executed_logit(draws, m)[idx]
    return np.stack([rng.binomial(trials, expit(eta)), rng.binomial(trials, expit(eta2))], -1)


def _binom_logpmf(y: np.ndarray, n: int, logit_p: np.ndarray) -> np.ndarray:
    """log Bin(y_j | n, logistic(η_i)) as an outer (J, S) array.

    = log C(n, y_j) + y_j·log p_i + (n − y_j)·log(1 − p_i), with log p = −log1p(e^{−η}) and
    log(1 − p) = −log1p(e^{η}) (stable for any η); the binomial coefficient is computed once
    per outcome.
    """
    from scipy.special import gammaln

    y = np.asarray(y, dtype=float)
    log_p = -np.logaddexp(0.0, -logit_p)
    log_q = -np.logaddexp(0.0, logit_p)
    coef = gammaln(n + 1.0) - gammaln(y + 1.0) - gammaln(n - y + 1.0)
    return coef[:, None] + np.outer(y, log_p) + np.outer(n - y, log_q)


def loglik(draws: xr.Dataset, m: str, y: np.ndarray, trials: int = 100) -> np.ndarray:
    """log p(Y_j | draw i) of paired outcomes ``y`` (J, 2) for every draw: shape (J, S)."""
    return (_binom_logpmf(y[:, 0], trials, draws["gains_eta"].values)
            + _binom_logpmf(y[:, 1], trials, executed_logit(draws, m)))


def _estimate_moments(draws: xr.Dataset, target: str, se: float) -> tuple[np.ndarray, ...]:
    _eta, theta, tau, rho, k, _, _ = _arrays(draws)
    j = list(draws["candidate"].values).index(target)
    off = _offset(draws)
    off_j = off[:, j] if isinstance(off, np.ndarray) else off
    return theta[:, j] * rho ** k[j] + off_j, np.sqrt(se**2 + tau**2)


def simulate_estimate(draws: xr.Dataset, target: str, se: float, rng: np.random.Generator,
                      idx: np.ndarray) -> np.ndarray:
    """A diagnosis' estimate of ``target``'s logit gain under draws ``idx``, shape (J,).

    y ~ Normal(θ ρ^k + Σ_{a ∈ h} γ_{a→target}, sqrt(se² + τ_exec²)): the pilot is its own
    small run (its own run-to-run noise) measured with standard error ``se`` — the same
    likelihood as in the model.
    """
    mu, sd = _estimate_moments(draws, target, se)
    return mu[idx] + sd[idx] * rng.standard_normal(len(idx))


def loglik_estimate(draws: xr.Dataset, target: str, se: float, y: np.ndarray) -> np.ndarray:
    """log Normal(y_j | θ ρ^k + Σ_{a ∈ h} γ_{a→target}, sqrt(se² + τ_exec²)) for every draw:
    shape (J, S)."""
    from scipy.stats import norm

    mu, sd = _estimate_moments(draws, target, se)
    return norm.logpdf(y[:, None], loc=mu[None, :], scale=sd[None, :])


def _xi(draws: xr.Dataset, directions: list[str] | tuple[str, ...]) -> np.ndarray:
    """Draws (S, K) of ξ_k for ``directions`` (``gains_xi``)."""
    if "gains_xi" not in draws:
        raise InputError("belief", "no direction effects in q_t (gains_xi): the gains model "
                                   "has a ξ only for directions a diagnosis measures")
    known = [str(k) for k in draws["measured_direction"].values]
    return np.asarray(draws["gains_xi"].values, dtype=float)[
        :, [known.index(k) for k in directions]]


def simulate_direction(draws: xr.Dataset, directions: list[str] | tuple[str, ...], se: float,
                       rng: np.random.Generator, idx: np.ndarray) -> np.ndarray:
    """A diagnosis' measurements of ``directions`` under draws ``idx``, shape (J, K):
    y_k ~ Normal(ξ_k, se²) independently (module docstring, "Direction effects")."""
    xi = _xi(draws, directions)[np.asarray(idx)]
    return xi + se * rng.standard_normal(xi.shape)


def loglik_direction(draws: xr.Dataset, directions: list[str] | tuple[str, ...], se: float,
                     y: np.ndarray) -> np.ndarray:
    """Σ_k log Normal(y_jk | ξ_ik, se²) for every outcome j and draw i: shape (J, S)."""
    from scipy.stats import norm

    xi = _xi(draws, directions)
    y = np.asarray(y, dtype=float).reshape(-1, xi.shape[1])
    return norm.logpdf(y[:, None, :], loc=xi[None, :, :], scale=se).sum(-1)


def own_evidence_share(idata: xr.DataTree) -> xr.DataArray:
    """Share of each candidate's posterior that comes from its own evidence, over ``candidate``.

    share_m = 1 − Var_post(ε_m) / E_post[σ_m²] clipped to [0, 1], with ε_m = θ_m − pool_m the
    candidate's own deviation from what the pooled levels predict (``effect − pool_mean``) and
    σ_m its prior scale (``own_scale``): 0 when the deviation's posterior is its prior (the
    candidate's belief is all pooled), 1 when its own evidence pins the deviation down.  For a
    normal–normal model with known scales and a known pool mean it equals the shrinkage
    weight σ²/(σ² + s²).
    """
    post = idata["posterior"]
    dev = post["effect"] - post["pool_mean"]
    ratio = dev.var(("chain", "draw")) / (post["own_scale"] ** 2).mean(("chain", "draw"))
    share = (1.0 - ratio).clip(0.0, 1.0)
    share.name = "own_evidence_share"
    share.attrs["long_name"] = "share of the posterior from the candidate's own evidence"
    return share


def lineage_repeats(idata: xr.DataTree, policy: str, gain_ids: list[str]) -> np.ndarray:
    """Earlier executions of every gain candidate on the lineage of ``policy`` (from the fit)."""
    const = idata["constant_data"].to_dataset()
    parent = dict(zip(const["policy"].values.tolist(), const["parent"].values.tolist(),
                      strict=True))
    via = dict(zip(const["policy"].values.tolist(), const["via"].values.tolist(), strict=True))
    counts = np.zeros(len(gain_ids))
    p = policy
    while parent.get(p):
        counts[gain_ids.index(via[p])] += 1
        p = parent[p]
    return counts


def _parent_name(enc: PolicyEncoding, k: int) -> str:
    n = len(enc.names)
    ancestors = [j for j in np.flatnonzero(enc.ancestry[k, :n]) if j != k]
    # the parent is the ancestor with the most ancestors of its own
    return enc.names[max(ancestors, key=lambda j: enc.ancestry[j, :n].sum())]


def _stack(da: xr.DataArray) -> np.ndarray:
    """(chain, draw, ...) → (sample, ...) as a plain array."""
    arr = da.transpose("chain", "draw", ...).to_numpy()
    return arr.reshape(-1, *arr.shape[2:])


def _width(history: np.ndarray, n_rows: int, n_actors: int) -> np.ndarray:
    """The (n_rows, n_actors) history matrix; zeros for an encoding built without actors."""
    h = np.asarray(history, dtype=float)
    if h.shape == (n_rows, n_actors):
        return h
    if h.size:
        raise ValueError(f"history of shape {h.shape}, expected {(n_rows, n_actors)}")
    return np.zeros((n_rows, n_actors))


def _no_rows() -> pd.DataFrame:
    from belief.inputs.tables import empty_paired

    return empty_paired()
