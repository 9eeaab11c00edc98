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

Order effects
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
  γ_{a→m} ~ Normal(mean, sd); the means and s.d. are data of the compiled model
  (``gamma_stated_mean``/``_sd``), so changing them — a prior-sensitivity analysis — re-samples
  without a new compile (which pairs are stated is part of the graph);
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
``bench_order_effects.py`` (30 varied worlds, same run): γ of interacting pairs
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

Direction effects (diagnoses that measure a mismatch direction)
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

Past campaigns (learning order effects from a team's history)
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

What one lens's evidence does to the others
-------------------------------------------
The rule the pooling follows (stated, and tested against the fitted model in
``tests/test_pooling_rule.py``; for users: docs/explanation/pooling.md).  The candidates of
one lens share a lens effect; candidates of different lenses share *only* μ_0, the campaign's
mean logit gain.  So evidence about one lens moves another lens's θ exactly as much as it
moves μ_0, and μ_0 only by the share of the evidence's surprise that the prior attributes to
"adaptations in this campaign do better or worse than expected" rather than to that lens,
method or candidate.  For one estimate y ± se of a candidate m that has not run, the only
evidence about any gain, given the scales τ::

    E[θ_j | y, τ] − μ̄ = w_j(τ) (y − μ̄),   w_j = C_j / V,
    V   = σ_0² + τ_lens² + τ_method² + τ_candidate² + se² + τ_exec²
    C_j = σ_0²                              (j of another lens)
        = σ_0² + τ_lens²                    (same lens, another method)
        = σ_0² + τ_lens² + τ_method²        (same method)

and the scales are learned: E[θ_j | y] − μ̄ = (y − μ̄) E[w_j(τ) | y], p(τ | y) ∝ p(τ)
Normal(y; μ̄, V(τ)) (:mod:`models.gains.pooling_rule` computes it).  A surprising y raises the
scales' posterior, which lowers the transfer; with the heavy-tailed default scale priors the
move of another lens's θ is *bounded over every y*: at most 0.194 logit (reached at
|y − μ̄| ≈ 1.6, falling to 0.10 at y = −6; se = 0.15), i.e. at most about the prior mean
μ̄ = 0.2 itself — one pilot can cancel the prior's optimism about other lenses but not make
them look bad.  Candidates of the pilot's own lens move more (weights 0.35–0.45 at the default
priors) and of its method more still (≈ 0.67).  With one lens observed, τ_lens is identified
by that one estimate only, so its prior governs the transfer: σ_0 (``effect_mu_sigma``) sets
how much is shared (σ_0 = 0.2 gives a bound of 0.05), and a light-tailed (HalfNormal) scale
prior removes the bound (the move keeps growing with |y − μ̄|).

Because the prior mean gain is small (0.2 logit, a predictive gain of ≈ 0.06 at J ≈ 0.3), a
strongly negative pilot that moves another lens's θ by the full 0.19 logit roughly halves that
lens's predictive gain (0.063 → 0.029 in the test's world): a large relative change of a small
number, not over-pooling.  A strongly negative pilot of FT, alone in its lens, moves μ_0 from
0.20 to ≈ 0.0 by this rule.

The model is compiled once (nutpie, numba backend) with fixed-size ``pm.Data`` containers
over ``max_policies`` policy slots and ``max_estimates`` estimate slots (unused ones masked
out); a re-fit after new evidence swaps the data without recompiling.  The sampled model
writes the binomial likelihood out on the logit scale, log C(n, k) + k η − n log(1 + e^η),
with log C(n, k) a data container (:mod:`models.likelihoods`): the same log density as
``pm.Binomial``, ≈ 30 % less time per gradient.

For the allocator, :func:`decision_draws` compresses the posterior into joint draws at the
current policy (η_π, θ, τ_exec, ρ, repeats, and the standard-normal run-to-run noise of the
next two executions of every candidate); :func:`gain_from_draws`, :func:`next_gain`,
:func:`simulate` and :func:`loglik` are the vectorised functions the CVU engine uses;
:func:`state_after` moves the draws on by one execution (the state the CVU look-ahead's second
and later steps start from).


Layout: :mod:`models.gains.spec` (:class:`GainsPriors`), :mod:`models.gains.encoding` (the
evidence encoded into policy slots), :mod:`models.gains.model` (:class:`GainsModel`: build,
compile once, fit), :mod:`models.gains.draws` (decision draws and the CVU engine's
functions) and :mod:`models.gains.pooling_rule` (the pooling rule above, computed exactly);
every public name of the first four is importable from :mod:`models.gains`.
"""

from models.gains.draws import (
    DRAW_VARS,
    ORDER_VARS,
    decision_draws,
    decision_vars,
    executed_logit,
    gain_from_draws,
    lineage_repeats,
    loglik,
    loglik_direction,
    loglik_estimate,
    next_gain,
    own_evidence_share,
    simulate,
    simulate_direction,
    simulate_estimate,
    state_after,
)
from models.gains.encoding import (
    EstimateEncoding,
    PolicyEncoding,
    encode_directions,
    encode_estimates,
    encode_policies,
    likelihood_approximation,
)
from models.gains.model import LIGHT_VARS, TARGET_ACCEPT, GainsModel
from models.gains.spec import GAMMA_PRIORS, LEVELS, GainsPriors
from models.pooling import PoolingStructure

__all__ = [
    "DRAW_VARS",
    "GAMMA_PRIORS",
    "LEVELS",
    "LIGHT_VARS",
    "ORDER_VARS",
    "TARGET_ACCEPT",
    "EstimateEncoding",
    "GainsModel",
    "GainsPriors",
    "PolicyEncoding",
    "PoolingStructure",
    "decision_draws",
    "decision_vars",
    "encode_directions",
    "encode_estimates",
    "encode_policies",
    "executed_logit",
    "gain_from_draws",
    "likelihood_approximation",
    "lineage_repeats",
    "loglik",
    "loglik_direction",
    "loglik_estimate",
    "next_gain",
    "own_evidence_share",
    "simulate",
    "simulate_direction",
    "simulate_estimate",
    "state_after",
]
