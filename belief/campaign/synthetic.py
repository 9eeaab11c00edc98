"""A seeded synthetic sim-to-real world: the embedded default for demos, tests and benchmarks.

The world keeps the *true* success probability J(π) of every policy on the logit scale,
starting from J(π_0) = 0.30 under the shared evaluation protocol ``pick_place_v1``.  Executing
an adaptation m from policy π produces a new policy with

    logit J(π') = logit J(π) + g_m · Π_{a ∈ h} I[a → m] · d_m^{k_m} + ε,   ε ~ N(0, 0.15²)

where g_m is m's first-execution logit gain, I[a → m] the interaction multiplier of an earlier
action a on m (order matters), d_m the diminishing-returns factor and k_m how often m ran before.
Diagnosis and model-update candidates leave J unchanged (ΔJ = 0) but may change later gains.

Candidates (cost in robot hours, GPU hours, engineer hours):

=============  ============  ==============  ===========  ==================  ========  ====
id             role          lens            method       cost (real, gpu,    g_m       P_exec
                                                          eng)
=============  ============  ==============  ===========  ==================  ========  ====
si_friction    adaptation    model           SI           (1, 5, 3)           0.40      0.01
latency_probe  diagnosis     model           probe        (0.5, 0, 1)         0         0.005
sim_refresh    model_update  model           SI-refresh   (0, 10, 2)          0         —
dr_1e6         adaptation    data            DR           (0, 10, 0.5)        0.20      —
dr_1e7         adaptation    data            DR           (0, 80, 1)          0.50      —
da_camera      adaptation    representation  DA           (0, 30, 4)          0.15      —
ft_real_100    adaptation    optimization    FT           (5, 5, 2)           0.35      0.03
ft_pilot       diagnosis     optimization    FT pilot     (0.5, 1, 0.5)       0         0.005
cotrain        adaptation    data            co-training  (3, 60, 5)          0.45      0.02
=============  ============  ==============  ===========  ==================  ========  ====

Repeatable: dr_1e6, dr_1e7 (d = 0.6) and ft_real_100 (d = 0.5); the others run once.

``ft_pilot`` is a cheap diagnosis: 10 real trajectories of fine-tuning, evaluated quickly, that
estimate the logit gain of ``ft_real_100`` from the current policy without adopting the result
(``informs = ["ft_real_100"]``): estimate = g_ft(now) + 0.15·z_run + 0.15·ε (its own run's
noise and a measurement error with ``measurement_se = 0.15``); one ``gain_estimates`` row.

Interactions I[a → m]: SI first lowers DR's later gain (si_friction → dr_*: ×0.5); DR first
raises FT's (dr_* → ft_real_100: ×1.5); a refreshed simulator helps DR (sim_refresh → dr_*:
×1.25); representation alignment and co-training substitute (da_camera → cotrain: ×0.6).

Evidence: every adaptation is evaluated in a paired binary evaluation, 100 trials per arm
(control π, treated π'); hardware executions emit safety events (si_friction 10 runs,
latency_probe 10, ft_real_100 100, cotrain 30), unsafe ~ Binomial(runs, P_exec).  Before the
campaign, π_0 is evaluated once (100 trials) and bench tests give 60/40/150/60/100 safety runs of
the five hardware candidates (si_friction, latency_probe, ft_real_100, ft_pilot, cotrain).  Budget
b_0 = (12, 300, 20); default weights λ = (0.01, 0.0002, 0.004) success probability per unit.

Bench safety test (opt-in, :meth:`SyntheticWorld.with_bench_test`; the default world and its
demo are unchanged): ``ft_bench`` (diagnosis, cost (0.5, 0, 0.5), not gated: it runs on a
protected bench rig) runs ft_real_100's controller 60 times on the bench
(``safety_runs = 60``, ``safety_test_of = "ft_real_100"``).  Observation model: the bench
trials are executions of ft_real_100 with the *same* P_exec = 0.03; one ``safety_events`` row
of ft_real_100, unsafe ~ Binomial(60, 0.03).  In that world ft_real_100 has only 20
pre-campaign bench runs, so it starts gated (0/20: CP UCB_0.95 = 0.139 > 0.1) and the bench
test opens it when y ≤ 3 of 60 (UCB(3, 80) = 0.094; P(y ≤ 3 | p = 0.03) ≈ 0.89).

Measured direction (opt-in, :meth:`SyntheticWorld.with_latency_probe`; the default world and
its demo are unchanged): ``latency_probe`` declares ``measurement_se`` (default 0.1), so its
``targets = ["latency"]`` become a measurement (:mod:`models.gains`, "Direction effects").
Truth: a direction effect ξ_latency (default 0.3 logit) is *added* to the first-execution
logit gain g_m of every adaptation that targets latency (dr_1e6, dr_1e7, ft_real_100) before
decay and interactions; each execution of the probe gives one ``direction_estimates`` row,
estimate = ξ_latency + measurement_se·ε.  So the probe tells the allocator, before any of
them runs, whether the latency-targeting candidates gain more than the pool suggests.

Deployment safety (kept apart from execution safety): every policy has a true probability
P_deploy(unsafe | π) that a deployment episode is unsafe.  P_deploy(π_0) = 0.01; each execution
of an adaptation multiplies the odds of the parent policy by a factor: si_friction ×0.8 (a
better dynamics model avoids hard contacts), dr_1e6 and dr_1e7 ×0.9, da_camera ×1.0, cotrain
×0.85, ft_real_100 ×2.0 (fine-tuning on 100 real trajectories overfits and takes risks), so
π_0 → ft_real_100 → ft_real_100 has P_deploy ≈ 0.039.  :meth:`SyntheticWorld.deployment_evaluation`
runs 400 deployment trials of a policy: unsafe ~ Binomial(400, P_deploy(π)).

Sensitivity sweeps and sim/real transfer
--------------------------------------------------
Three mismatch directions, swept on a full 3 × 3 × 3 factorial grid in their own units:
``xi_friction`` ∈ {0, 0.15, 0.30} (Coulomb friction offset injected into the sim; the measured
real offset is 0.30), ``xi_latency`` ∈ {0, 20, 40} ms (actuation delay; real ≈ 40 ms) and
``xi_camera`` ∈ {0, 0.5, 1} (fraction of the measured real camera colour/exposure shift).  With
u_k = ξ_k / max ξ_k ∈ {0, ½, 1} the true success probability of policy π at a setting is

    logit J = α_π + Σ_k b_kπ u_k + g_fl · u_friction · u_latency

==========  ======  ==========  =========  =========  ===================================
policy      α_π     b_friction  b_latency  b_camera   role
==========  ======  ==========  =========  =========  ===================================
pi0         0.20    −0.10       −0.15      −0.05      the campaign's π_0
pi_dr       0.00    −0.05       −0.10      −2.00      a DR-trained reference policy
==========  ======  ==========  =========  =========  ===================================

with the friction × latency synergy g_fl = −1.5 for both policies (no other synergy): each alone
is small (π_0: −0.10 and −0.15 on the logit scale, −2.5 and −3.7 points of success at
J = 0.55), together large (−1.75 logit, −37 points).  One sweep
(:meth:`SyntheticWorld.sensitivity_sweep`) runs every setting under both policies with
``sweep_trials = 50`` trials each: 54 rows, successes ~ Binomial(50, J).  This is "the demo's
sample size".  :meth:`SyntheticWorld.sensitivity_truth` gives the true α, S and γ in the model's
standardised coordinates (ξ centred at the sweep mean, scaled by its s.d.), e.g. for π_0
S_friction = −0.35, S_latency = −0.37, S_camera = −0.02, γ_friction×latency = −0.25.

Transfer evaluations (:meth:`SyntheticWorld.transfer_evaluations`): each reference policy is
scored in sim and in real under ``pick_place_v1`` with ``transfer_trials = 100`` trials per
domain.  True (J_sim, J_real, δ_J = J_real − J_sim): pi0 (0.55, J(π_0) = 0.30, −0.25), pi_dr
(0.50, 0.42, −0.08), pi_ft (0.40, 0.55, +0.15: real is better, the sim is more conservative).
Randomness: ``default_rng([seed, 30_000, step, i])`` for the sweep of the i-th policy and
``default_rng([seed, 30_001, step, i])`` for its transfer evaluation.

Simulator evaluations (on request, :meth:`SyntheticWorld.sim_evaluation`; nothing in a
campaign or the demo calls it, so their outcomes are unchanged): the paired comparison of an
adaptation m run in simulation from the current policy, ``sim_trials = 400`` trials per arm, at
a compute cost of ``sim_cost = {"compute": 2}`` GPU hours each.  True sim logit gain

    θ^sim_m = a_l + b_l · g_m(h) + σ_l · e_m,      e_m ~ Normal(0, 1) once per world,

with g_m(h) the real gain of m's next execution after the history h
(:meth:`SyntheticWorld.mean_logit_gain`) and the calibration (a_l, b_l, σ_l) of m's lens
(``sim_calibration``):

==============  ====  ====  ====  =========================================================
lens            a     b     σ     the simulator on this lens
==============  ====  ====  ====  =========================================================
data            0.00  1.00  0.05  well predicted: DR and co-training are trained in the sim
model           0.30  0.50  0.10  biased: the sim's own friction makes SI look better than
                                  it is, and compresses the differences
representation  0.30  0.50  0.10  biased: the rendered camera is not the real one
optimization    0.00  0.00  0.40  useless: fine-tuning on real trajectories, scored in sim
==============  ====  ====  ====  =========================================================

The sim control arm succeeds with logit J(π) + 1.05 (the sim is easier: J_sim(π_0) = 0.55
against J(π_0) = 0.30, as in the transfer evaluations), the treated arm with that + θ^sim_m.
Randomness: e_m from ``default_rng([seed, 50_000])`` over the candidates in the world's order,
the counts from ``default_rng([seed, 50_001, step, i])`` (i the candidate's position): their
own streams, so no other outcome moves.

Randomness is drawn from ``numpy.random.default_rng([seed, step, k])``, so an outcome depends
only on (seed, step, history): replaying the same history gives the same outcomes.

Stochastic costs (``stochastic_costs=True``; off by default, so the shipped demo and every
default campaign realise exactly the nominal cost c̃_r(m)).  The candidate file's nominal
costs are estimates: each (candidate, resource) cell of the world has a true log offset
o_{r,m} = 0.25 · Z_{r,m} (drawn once per world from ``default_rng([seed, 40_001])``, over the
candidates in the world's order × the resources in name order), so the true median of ΔC_r(m) is
c̃_r(m) · e^{o_{r,m}}.  The k-th execution (at ``step``) of m consumes, with
``rng = default_rng([seed, 40_000, step, k])`` (its own stream: gains, safety and estimates do
not move)::

    ΔC_r(m) = c̃_r(m) · exp(o_{r,m} + 0.2 · Z_r),        Z_r ~ Normal(0, 1), for c̃_r(m) > 0
    ΔC_real_h(m) ×= exp(1.5 + 0.3 · Z')   with probability 0.1 (a repair: ≈ 4.5× the robot hours)

and 0 where c̃_r(m) = 0.  This is the cost model's kind (:mod:`models.costs`): log-normal about
an offset nominal cost, and in ``real_h`` the two-component repair mixture with π = 0.1,
κ = 1.5, ω = 0.3, σ = 0.2; its candidate offsets are i.i.d. (no method or lens structure, and a
resource-wide offset of 0).  The mean execution costs c̃ · e^{o + 0.02} (× 1 − 0.1 + 0.1 ·
e^{1.5 + 0.045} ≈ 1.37 more in ``real_h``; the cost model's E[ΔC | θ] formula).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit, logit

from belief.campaign.world import Outcome, outcome_records
from belief.errors import InputError
from belief.inputs.candidates import Candidate, CandidateSet
from belief.inputs.interactions import InteractionPrior
from belief.inputs.resources import make_budget
from belief.validate import integer

__all__ = ["WORLD_FAMILIES", "SyntheticWorld", "TrueCandidate", "benchmark_world",
           "world_from_spec"]

EVAL_PROTOCOL = "pick_place_v1"
COST_OFFSET, COST_NOISE, REPAIR_P, REPAIR_MU, REPAIR_SD = 0.25, 0.2, 0.1, 1.5, 0.3
"""The stochastic costs' truth (module docstring): the s.d. of the cells' log offsets, the
log-scale noise, and the repair tail of ``real_h`` (probability, and the log multiplier's mean
and s.d.)."""


@dataclass(frozen=True)
class TrueCandidate:
    """A candidate together with the world's truth about it."""

    candidate: Candidate
    logit_gain: float = 0.0
    p_unsafe: float = 0.0
    decay: float = 1.0
    runs_per_execution: int = 0
    bench_runs: int = 0


def _c(id, role, lens, method, cost, *, recipe="", batch="", hw=False, repeatable=False,
       group=None, targets=(), informs=(), measurement_se=None, **truth) -> TrueCandidate:
    cand = Candidate(id=id, role=role, lens=lens, method=method,
                     cost=dict(zip(("real_h", "compute", "eng_h"), cost, strict=True)),
                     recipe=recipe, batch=batch, drives_hardware=hw,
                     changes_policy=role == "adaptation", repeatable=repeatable,
                     hardware_group=group, targets=tuple(targets), informs=tuple(informs),
                     measurement_se=measurement_se)
    return TrueCandidate(cand, **truth)


DEFAULT_CANDIDATES = (
    _c("si_friction", "adaptation", "model", "SI", (1, 5, 3), recipe="friction calibration",
       batch="1 h on the arm", hw=True, group="arm", targets=("friction",), logit_gain=0.40,
       p_unsafe=0.01, runs_per_execution=10, bench_runs=60),
    _c("latency_probe", "diagnosis", "model", "probe", (0.5, 0, 1),
       recipe="actuation latency probe", batch="30 min", hw=True, group="arm",
       targets=("latency",), p_unsafe=0.005, runs_per_execution=10, bench_runs=40),
    _c("sim_refresh", "model_update", "model", "SI-refresh", (0, 10, 2),
       recipe="re-identify simulator from logs", batch="1 pass", targets=("friction",)),
    _c("dr_1e6", "adaptation", "data", "DR", (0, 10, 0.5), recipe="domain randomisation",
       batch="1e6 steps", repeatable=True, targets=("friction", "latency"), logit_gain=0.20,
       decay=0.6),
    _c("dr_1e7", "adaptation", "data", "DR", (0, 80, 1), recipe="domain randomisation",
       batch="1e7 steps", repeatable=True, targets=("friction", "latency"), logit_gain=0.50,
       decay=0.6),
    _c("da_camera", "adaptation", "representation", "DA", (0, 30, 4),
       recipe="camera representation alignment", batch="1 encoder", targets=("camera",),
       logit_gain=0.15),
    _c("ft_real_100", "adaptation", "optimization", "FT", (5, 5, 2),
       recipe="fine-tune on real data", batch="100 trajectories", hw=True, group="arm",
       repeatable=True, targets=("friction", "latency", "camera"), logit_gain=0.35,
       p_unsafe=0.03, decay=0.5, runs_per_execution=100, bench_runs=150),
    _c("ft_pilot", "diagnosis", "optimization", "FT pilot", (0.5, 1, 0.5),
       recipe="fine-tune pilot on 10 real trajectories", batch="10 trajectories", hw=True,
       group="arm", informs=("ft_real_100",), measurement_se=0.15, p_unsafe=0.005,
       runs_per_execution=10, bench_runs=60),
    _c("cotrain", "adaptation", "data", "co-training", (3, 60, 5),
       recipe="sim-and-real co-training", batch="30 real + 1e6 sim", hw=True, group="arm",
       targets=("camera", "friction"), logit_gain=0.45, p_unsafe=0.02, runs_per_execution=30,
       bench_runs=100),
)

_bench = _c("ft_bench", "diagnosis", "optimization", "bench safety test", (0.5, 0, 0.5),
            recipe="ft_real_100's controller on the bench rig", batch="60 bench trials",
            runs_per_execution=60)
BENCH_TEST = TrueCandidate(replace(_bench.candidate, safety_runs=60,
                                   safety_test_of="ft_real_100"), runs_per_execution=60)
"""The bench safety test of :meth:`SyntheticWorld.with_bench_test` (module docstring)."""

DEFAULT_INTERACTIONS = {
    ("si_friction", "dr_1e6"): 0.5, ("si_friction", "dr_1e7"): 0.5,
    ("dr_1e6", "ft_real_100"): 1.5, ("dr_1e7", "ft_real_100"): 1.5,
    ("sim_refresh", "dr_1e6"): 1.25, ("sim_refresh", "dr_1e7"): 1.25,
    ("da_camera", "cotrain"): 0.6,
}

DEFAULT_DEPLOY_ODDS = {"si_friction": 0.8, "dr_1e6": 0.9, "dr_1e7": 0.9, "da_camera": 1.0,
                       "cotrain": 0.85, "ft_real_100": 2.0}


# -- sensitivity sweeps and transfer evaluations (numbers in the module docstring) ----------
SWEEP_GRID = {"friction": (0.0, 0.15, 0.30), "latency": (0.0, 20.0, 40.0),
              "camera": (0.0, 0.5, 1.0)}
DEFAULT_SENSITIVITY = {  # policy → (α_π, {direction: b_kπ}) on u_k = ξ_k / max ξ_k
    "pi0": (0.20, {"friction": -0.10, "latency": -0.15, "camera": -0.05}),
    "pi_dr": (0.00, {"friction": -0.05, "latency": -0.10, "camera": -2.00}),
}
DEFAULT_SYNERGY = {("friction", "latency"): -1.5}  # g_kl on u_k · u_l, shared by all policies
DEFAULT_TRANSFER = {"pi0": (0.55, None), "pi_dr": (0.50, 0.42), "pi_ft": (0.40, 0.55)}
"""policy → (J_sim, J_real); None = the world's J(π_0)."""

SIM_CALIBRATION = {"data": (0.0, 1.0, 0.05), "model": (0.3, 0.5, 0.1),
                   "representation": (0.3, 0.5, 0.1), "optimization": (0.0, 0.0, 0.4)}
"""lens → the simulator's true calibration (a_l, b_l, σ_l): θ^sim = a + b·θ + σ·e (module
docstring, "Simulator evaluations")."""
SIM_BASELINE_SHIFT = float(logit(0.55) - logit(0.30))
"""The sim control arm's logit above the real J(π): J_sim(π_0) = 0.55 against 0.30."""


@dataclass
class SyntheticWorld:
    """The embedded synthetic world (see module docstring for every number).

    Parameters
    ----------
    seed : int
        Seeds every outcome (together with the step).
    initial_success : float
        J(π_0).
    eval_trials : int
        Trials per arm of a paired evaluation.
    execution_sd : float
        Run-to-run s.d. of a realised logit gain.
    deploy_base : float
        P_deploy(unsafe | π_0).
    deploy_trials : int
        Deployment trials run by :meth:`deployment_evaluation`.
    deploy_odds : dict
        Odds multiplier of P_deploy per execution of an adaptation (missing: ×1).
    sweep_grid, sweep_trials, sensitivity_policies, synergy : see module docstring
        The sensitivity sweep: grid per direction, trials per setting, (α_π, b_kπ) per policy
        and the synergies g_kl.
    transfer_truth, transfer_trials : see module docstring
        (J_sim, J_real) per reference policy and trials per domain.
    stated_interactions : tuple of InteractionPrior
        Prior knowledge of order effects the allocator is given (``[[interaction]]`` of the
        candidate set, :mod:`belief.inputs.interactions`); the truth is ``interactions``.
    direction_effects : dict
        True direction effects ξ_k (logit), added to g_m of every adaptation targeting k and
        measured by the diagnoses that measure k (module docstring, "Measured direction").
    sim_calibration, sim_trials, sim_cost : see module docstring
        The simulator's true calibration (a_l, b_l, σ_l) per lens, the trials per arm of a
        simulated paired evaluation and its cost (:meth:`sim_evaluation`).
    """

    seed: int = 0
    initial_success: float = 0.30
    eval_trials: int = 100
    execution_sd: float = 0.15
    truth: tuple[TrueCandidate, ...] = DEFAULT_CANDIDATES
    interactions: dict[tuple[str, str], float] = field(
        default_factory=lambda: dict(DEFAULT_INTERACTIONS))
    budget_values: dict[str, float] = field(
        default_factory=lambda: {"real_h": 12.0, "compute": 300.0, "eng_h": 20.0})
    weight_values: dict[str, float] = field(
        default_factory=lambda: {"real_h": 0.01, "compute": 0.0002, "eng_h": 0.004})
    deploy_base: float = 0.01
    deploy_trials: int = 400
    deploy_odds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DEPLOY_ODDS))
    # sensitivity sweeps and transfer evaluations
    sweep_grid: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(SWEEP_GRID))
    sweep_trials: int = 50
    sensitivity_policies: dict[str, tuple[float, dict[str, float]]] = field(
        default_factory=lambda: dict(DEFAULT_SENSITIVITY))
    synergy: dict[tuple[str, str], float] = field(default_factory=lambda: dict(DEFAULT_SYNERGY))
    transfer_truth: dict[str, tuple[float, float | None]] = field(
        default_factory=lambda: dict(DEFAULT_TRANSFER))
    transfer_trials: int = 100
    variation: int | None = None
    stochastic_costs: bool = False
    stated_interactions: tuple[InteractionPrior, ...] = ()
    direction_effects: dict[str, float] = field(default_factory=dict)
    factory: dict[str, object] | None = None  # the opt-in constructor and its arguments
    # simulator evaluations (on request: sim_evaluation)
    sim_calibration: dict[str, tuple[float, float, float]] = field(
        default_factory=lambda: dict(SIM_CALIBRATION))
    sim_trials: int = 400
    sim_cost: dict[str, float] = field(default_factory=lambda: {"compute": 2.0})

    @classmethod
    def varied(cls, variation: int, seed: int = 0) -> SyntheticWorld:
        """A perturbed copy of the default world, for benchmarks over many worlds.

        With ``rng = default_rng([variation, 30_000])``: J(π_0) ~ U(0.2, 0.45); every
        adaptation's logit gain × LogNormal(0, 0.4); every cost × LogNormal(0, 0.3); every
        interaction multiplier raised to a power U(0, 2) (so it can vanish or double);
        every P_exec × LogNormal(0, 0.6), capped at 0.3.  ``seed`` still seeds the outcomes.
        """
        from dataclasses import replace as _replace

        rng = np.random.default_rng([variation, 30_000])
        truth = []
        for t in DEFAULT_CANDIDATES:
            c = t.candidate
            cost = {r: float(v * rng.lognormal(0.0, 0.3)) for r, v in c.cost.items()}
            truth.append(_replace(
                t, candidate=_replace(c, cost=cost),
                logit_gain=float(t.logit_gain * rng.lognormal(0.0, 0.4)),
                p_unsafe=float(min(0.3, t.p_unsafe * rng.lognormal(0.0, 0.6)))))
        interactions = {k: float(v ** rng.uniform(0.0, 2.0))
                        for k, v in DEFAULT_INTERACTIONS.items()}
        return cls(seed=seed, initial_success=float(rng.uniform(0.2, 0.45)), truth=tuple(truth),
                   interactions=interactions, variation=variation)

    def __post_init__(self) -> None:
        self.seed = integer(self.seed, "seed", minimum=0)
        if not isinstance(self.stochastic_costs, bool | np.bool_):
            raise InputError("stochastic_costs", f"must be True or False, got "
                                                 f"{self.stochastic_costs!r}")
        self._truth = {t.candidate.id: t for t in self.truth}
        self.reset()

    # -- public description ------------------------------------------------------------------
    @property
    def candidates(self) -> CandidateSet:
        """The candidate set (what an allocator may know)."""
        return CandidateSet(tuple(t.candidate for t in self.truth), ("real_h", "compute",
                                                                    "eng_h"), EVAL_PROTOCOL,
                            self.initial_budget, "synthetic world", None,
                            tuple(self.stated_interactions))

    @property
    def initial_budget(self) -> xr.DataArray:
        return make_budget(self.budget_values, ("real_h", "compute", "eng_h"))

    @property
    def initial_policy(self) -> str:
        return "pi0"

    def reset(self) -> None:
        """Forget every execution: back to π_0."""
        self.policy = self.initial_policy
        self.history: list[str] = []
        self.policy_logit = {self.policy: float(logit(self.initial_success))}
        self.deploy_logit = {self.policy: float(logit(self.deploy_base))}

    def initial_evidence(self) -> dict[str, pd.DataFrame]:
        """Evidence before the campaign: a baseline evaluation of π_0 and the bench safety runs."""
        rng = np.random.default_rng([self.seed, 10_001])
        baseline = pd.DataFrame([{
            "step": 0, "policy": self.initial_policy, "eval_protocol": EVAL_PROTOCOL,
            "successes": int(rng.binomial(self.eval_trials, self.initial_success)),
            "trials": self.eval_trials}])
        return {"policy_evaluations": baseline, "safety_events": self.initial_safety()}

    def initial_safety(self) -> pd.DataFrame:
        """Bench safety runs of the hardware candidates before the campaign (step 0 rows)."""
        rows = []
        for k, t in enumerate(self.truth):
            if t.candidate.drives_hardware and t.bench_runs:
                rng = np.random.default_rng([self.seed, 10_000, k])
                rows.append({"step": 0, "candidate": t.candidate.id,
                             "executions": t.bench_runs,
                             "unsafe": int(rng.binomial(t.bench_runs, t.p_unsafe)),
                             "policy": self.initial_policy})
        return pd.DataFrame(rows)

    # -- truth ------------------------------------------------------------------------------
    def mean_logit_gain(self, candidate_id: str, history: list[str] | None = None) -> float:
        """Expected logit gain of the next execution of m after ``history``."""
        history = self.history if history is None else history
        t = self._truth[candidate_id]
        if not t.candidate.changes_policy:
            return 0.0
        g = (t.logit_gain + sum(self.direction_effects.get(k, 0.0)
                                for k in t.candidate.targets)) \
            * t.decay ** history.count(candidate_id)
        for a in dict.fromkeys(history):
            g *= self.interactions.get((a, candidate_id), 1.0)
        return g

    def interaction_priors(self, sd: float) -> tuple[InteractionPrior, ...]:
        """The world's order effects stated as pair priors γ_{a→m} ~ N(mean, sd²): what an
        expert who knew the truth would tell the allocator (benchmarks of what knowing the
        order effects is worth to a policy).

        The world multiplies m's logit gain by f_{a→m} once a has run
        (:meth:`mean_logit_gain`); the gains model adds γ_{a→m} on the logit scale.  The mean
        is the additive equivalent at m's first execution with a the only actor before it,
        mean = (f_{a→m} − 1)·g_m, g_m = m's first-execution logit gain (direction effects
        included).  After repeats (the world's decay multiplies the effect too) or several
        actors the two differ: a well-centred prior, not the truth itself.
        """
        if isinstance(sd, bool) or not isinstance(sd, int | float) or not (
                np.isfinite(sd) and sd > 0):
            raise InputError("interaction_priors", f"sd must be a finite number > 0, got "
                                                   f"{sd!r}")
        return tuple(
            InteractionPrior(a, m, float((f - 1.0) * self.mean_logit_gain(m, [])), float(sd))
            for (a, m), f in self.interactions.items()
            if a in self._truth and m in self._truth
            and self._truth[m].candidate.changes_policy)

    def true_success(self, policy: str | None = None) -> float:
        """J(π) of a policy the world has produced (default: the current one)."""
        return float(expit(self.policy_logit[policy or self.policy]))

    def true_p_deploy(self, policy: str | None = None) -> float:
        """P_deploy(unsafe | π) of a policy the world has produced (default: the current one)."""
        return float(expit(self.deploy_logit[policy or self.policy]))

    def deployment_evaluation(self, step: int, policy: str | None = None,
                              trials: int | None = None) -> pd.DataFrame:
        """Deployment-safety trials of ``policy`` (default: the current one).

        unsafe ~ Binomial(trials, P_deploy(unsafe | π)); one ``deployment_safety`` row.  Drawn
        from ``default_rng([seed, 20_000, step, len(history)])``.
        """
        policy = policy or self.policy
        trials = self.deploy_trials if trials is None else int(trials)
        rng = np.random.default_rng([self.seed, 20_000, step, len(self.history)])
        return pd.DataFrame([{"step": step, "policy": policy, "trials": trials,
                              "unsafe": int(rng.binomial(trials, self.true_p_deploy(policy)))}])

    def expected_gain(self, candidate_id: str) -> float:
        """E[ΔJ] of executing m now, over the run-to-run noise (Gauss–Hermite, 40 nodes)."""
        if not self._truth[candidate_id].candidate.changes_policy:
            return 0.0
        eta = self.policy_logit[self.policy]
        nodes, wts = np.polynomial.hermite_e.hermegauss(40)
        mu = eta + self.mean_logit_gain(candidate_id)
        val = float((wts * expit(mu + self.execution_sd * nodes)).sum() / wts.sum())
        return val - float(expit(eta))

    @classmethod
    def with_bench_test(cls, seed: int = 0, ft_bench_runs: int = 20,
                        variation: int | None = None, **kw) -> SyntheticWorld:
        """The default world with ``ft_real_100`` gated and a bench safety test that can open
        it (module docstring, "Bench safety test"): ft_real_100 gets ``ft_bench_runs``
        pre-campaign bench runs instead of 150 (0/20 unsafe: CP UCB_0.95 = 0.139 > α_exec
        0.1) and declares ``safety_runs = 100``; ``ft_bench`` is added after it.  Every true
        gain, P_exec and interaction is the default world's, or with ``variation`` those of
        :meth:`varied` (``variation``) — the bench-test family of the policy benchmark, where
        a test can open a candidate (ft_bench runs ft_real_100's controller, so it has the
        varied world's P_exec of ft_real_100, which may exceed α_exec: then the test keeps
        the gate closed).  With ``variation`` the test is appended *last*: the pre-campaign
        bench runs and cost offsets are seeded by a candidate's position, so every other
        candidate keeps the varied world's evidence and the two families differ only in
        ft_real_100's bench runs and the test (without it, after ft_real_100, as logs of
        earlier campaigns have it)."""
        base = None if variation is None else cls.varied(variation, seed=seed)
        truth = []
        for t in (DEFAULT_CANDIDATES if base is None else base.truth):
            if t.candidate.id == "ft_real_100":
                t = TrueCandidate(replace(t.candidate, safety_runs=100), t.logit_gain,
                                  t.p_unsafe, t.decay, t.runs_per_execution, ft_bench_runs)
            truth.append(t)
            if t.candidate.id == "ft_real_100" and base is None:
                truth.append(BENCH_TEST)
        factory: dict[str, object] = {"name": "with_bench_test",
                                      "ft_bench_runs": int(ft_bench_runs)}
        if base is not None:
            truth.append(BENCH_TEST)
            factory["variation"] = int(variation)
            kw = {"initial_success": base.initial_success,
                  "interactions": dict(base.interactions), "variation": int(variation), **kw}
        return cls(seed=seed, truth=tuple(truth), factory=factory, **kw)

    @classmethod
    def with_latency_probe(cls, seed: int = 0, latency_effect: float = 0.3,
                           measurement_se: float = 0.1, **kw) -> SyntheticWorld:
        """The default world where ``latency_probe`` measures the latency direction (module
        docstring, "Measured direction"): it declares ``measurement_se``, and the true
        direction effect ξ_latency = ``latency_effect`` is added to the logit gain of every
        adaptation targeting latency."""
        truth = tuple(
            replace(t, candidate=replace(t.candidate, measurement_se=measurement_se))
            if t.candidate.id == "latency_probe" else t for t in DEFAULT_CANDIDATES)
        return cls(seed=seed, truth=truth, direction_effects={"latency": latency_effect},
                   factory={"name": "with_latency_probe", "latency_effect": float(latency_effect),
                            "measurement_se": float(measurement_se)}, **kw)

    # -- simulator evaluations (module docstring, "Simulator evaluations") -----------------
    def true_sim_gain(self, candidate_id: str, history: list[str] | None = None) -> float:
        """θ^sim_m = a_l + b_l · g_m(h) + σ_l · e_m: the simulator's logit gain of m after
        ``history`` (default: the world's), with (a_l, b_l, σ_l) = ``sim_calibration`` of m's
        lens and e_m ~ Normal(0, 1) drawn once per world."""
        t = self._truth.get(candidate_id)
        if t is None or not t.candidate.changes_policy:
            raise InputError("sim_evaluation", f"{candidate_id!r} is not a policy-changing "
                                               "candidate of the world: a simulated paired "
                                               "evaluation compares a policy with its change")
        lens = t.candidate.lens
        if lens not in self.sim_calibration:
            raise InputError("sim_calibration", f"no calibration for lens {lens!r}; given: "
                                                f"{sorted(self.sim_calibration)}")
        a, b, sigma = (float(x) for x in self.sim_calibration[lens])
        i = [x.candidate.id for x in self.truth].index(candidate_id)
        e = np.random.default_rng([self.seed, 50_000]).standard_normal(len(self.truth))[i]
        return a + b * self.mean_logit_gain(candidate_id, history) + sigma * float(e)

    def sim_evaluation(self, candidate_id: str, step: int) -> pd.DataFrame:
        """A simulated paired evaluation of m from the current policy: one
        ``sim_paired_evaluations`` row (:func:`belief.inputs.tables.validate_sim_paired`),
        ``sim_trials`` trials per arm, control ~ Binomial(n, logistic(logit J(π) + 1.05)),
        treated ~ Binomial(n, logistic(logit J(π) + 1.05 + θ^sim_m)).  The world does not
        change (no policy, history or budget moves); its cost is ``sim_cost``."""
        theta_sim = self.true_sim_gain(candidate_id)
        i = [x.candidate.id for x in self.truth].index(candidate_id)
        rng = np.random.default_rng([self.seed, 50_001, int(step), i])
        base = self.policy_logit[self.policy] + SIM_BASELINE_SHIFT
        n = int(self.sim_trials)
        return pd.DataFrame([{
            "step": int(step), "candidate": candidate_id, "policy": self.policy,
            "eval_protocol": EVAL_PROTOCOL,
            "control_successes": int(rng.binomial(n, expit(base))), "control_trials": n,
            "treated_successes": int(rng.binomial(n, expit(base + theta_sim))),
            "treated_trials": n,
            "run_id": f"sim/{self.policy}/{candidate_id}/{int(step)}"}])

    # -- execution --------------------------------------------------------------------------
    def execute(self, candidate_id: str, step: int) -> Outcome:
        """Run m at ``step`` from the current policy: evidence rows, cost, next policy."""
        t = self._truth[candidate_id]
        k = len(self.history)
        rng = np.random.default_rng([self.seed, step, k])
        cand = t.candidate
        control = self.policy
        eta = self.policy_logit[control]
        paired = pd.DataFrame()
        true_gain = 0.0
        if cand.changes_policy:
            new_eta = eta + self.mean_logit_gain(candidate_id) + self.execution_sd * \
                rng.standard_normal()
            new_policy = f"pi{len(self.policy_logit)}"
            self.policy_logit[new_policy] = float(new_eta)
            self.deploy_logit[new_policy] = self.deploy_logit[control] + float(
                np.log(self.deploy_odds.get(candidate_id, 1.0)))
            n = self.eval_trials
            paired = pd.DataFrame([{
                "step": step, "candidate": candidate_id, "policy": control,
                "eval_protocol": EVAL_PROTOCOL,
                "control_successes": int(rng.binomial(n, expit(eta))), "control_trials": n,
                "treated_successes": int(rng.binomial(n, expit(new_eta))), "treated_trials": n,
                "treated_policy": new_policy}])
            true_gain = float(expit(new_eta) - expit(eta))
            self.policy = new_policy
        estimates = pd.DataFrame([{
            "step": step, "candidate": target, "policy": control,
            "eval_protocol": EVAL_PROTOCOL, "source": candidate_id,
            "estimate": float(self.mean_logit_gain(target)
                              + self.execution_sd * rng.standard_normal()
                              + cand.measurement_se * rng.standard_normal()),
            "se": float(cand.measurement_se)} for target in cand.informs])
        directions = pd.DataFrame([{
            "step": step, "candidate": candidate_id, "direction": k, "policy": control,
            "estimate": float(self.direction_effects.get(k, 0.0)
                              + cand.measurement_se * rng.standard_normal()),
            "se": float(cand.measurement_se)} for k in cand.measures])
        safety = pd.DataFrame()
        if cand.safety_test_of is not None and t.runs_per_execution:
            # a bench safety test: executions of the target's controller, same p_unsafe
            tgt = self._truth[cand.safety_test_of]
            safety = pd.DataFrame([{
                "step": step, "candidate": cand.safety_test_of,
                "executions": t.runs_per_execution,
                "unsafe": int(rng.binomial(t.runs_per_execution, tgt.p_unsafe)),
                "policy": control}])
        elif cand.drives_hardware and t.runs_per_execution:
            safety = pd.DataFrame([{
                "step": step, "candidate": candidate_id, "executions": t.runs_per_execution,
                "unsafe": int(rng.binomial(t.runs_per_execution, t.p_unsafe)),
                "policy": control}])
        self.history.append(candidate_id)
        return Outcome(candidate_id, step, paired, safety, self.realised_cost(cand, step, k),
                       self.policy, true_gain, estimates, directions)

    def realised_cost(self, cand: Candidate, step: int, k: int) -> dict[str, float]:
        """ΔC(m) of the k-th execution, at ``step``: the nominal cost, or with
        ``stochastic_costs`` the documented truth (module docstring)."""
        if not self.stochastic_costs:
            return dict(cand.cost)
        offset = self.cost_offsets()[cand.id]
        rng = np.random.default_rng([self.seed, 40_000, step, k])
        out = {r: float(v * np.exp(offset[r] + COST_NOISE * rng.standard_normal()))
               if v > 0 else 0.0 for r, v in cand.cost.items()}
        repair = rng.random() < REPAIR_P
        shift = REPAIR_MU + REPAIR_SD * rng.standard_normal()
        if repair and out.get("real_h", 0.0) > 0:
            out["real_h"] *= float(np.exp(shift))
        return out

    def cost_offsets(self) -> dict[str, dict[str, float]]:
        """The true log offsets o_{r,m} of the stochastic costs (module docstring): candidate →
        resource → offset (0 without ``stochastic_costs``)."""
        cands = [t.candidate for t in self.truth]
        resources = sorted({r for c in cands for r in c.cost})
        z = np.random.default_rng([self.seed, 40_001]).standard_normal((len(cands),
                                                                         len(resources)))
        scale = COST_OFFSET if self.stochastic_costs else 0.0
        return {c.id: {r: float(scale * z[i, k]) for k, r in enumerate(resources)}
                for i, c in enumerate(cands)}

    def observe(self, outcome: Outcome) -> None:
        """Nothing to learn: this world produced the outcome itself (see :class:`World`)."""

    def resume_step(self, logged: Outcome) -> None:
        """Re-execute the logged step (outcomes depend only on seed, step and history) and
        refuse a log this world would not have produced."""
        replayed = self.execute(logged.candidate, logged.step)
        for name, rows in outcome_records(replayed).items():
            if rows != outcome_records(logged)[name]:
                raise InputError("campaign log", f"step {logged.step}: the world's {name} "
                                                 "differ from the log (different world or "
                                                 "seed?)")
        if replayed.policy != logged.policy:
            raise InputError("campaign log", f"step {logged.step}: the world's policy differs "
                                             "from the log")

    # -- sensitivity sweeps and sim/real transfer -------------------------------------------
    def _sweep_logit(self, policy: str, u: dict[str, np.ndarray]) -> np.ndarray:
        alpha, b = self.sensitivity_policies[policy]
        eta = alpha + sum(b[k] * u[k] for k in self.sweep_grid)
        for (k, k2), g in self.synergy.items():
            eta = eta + g * u[k] * u[k2]
        return eta

    def sensitivity_sweep(self, step: int = 0,
                          policies: tuple[str, ...] | None = None) -> pd.DataFrame:
        """One sensitivity sweep: every grid setting under each policy, ``sweep_trials`` each.

        Returns ``sensitivity_runs`` rows: ``step, policy, eval_protocol, xi_<direction>...,
        successes, trials`` with successes ~ Binomial(sweep_trials, J(ξ)) (module docstring).
        """
        policies = tuple(self.sensitivity_policies) if policies is None else tuple(policies)
        dirs = list(self.sweep_grid)
        grid = np.array(np.meshgrid(*[self.sweep_grid[k] for k in dirs], indexing="ij"))
        grid = grid.reshape(len(dirs), -1)
        u = {k: grid[i] / max(self.sweep_grid[k]) for i, k in enumerate(dirs)}
        frames = []
        for i, policy in enumerate(policies):
            rng = np.random.default_rng([self.seed, 30_000, step, i])
            p = expit(self._sweep_logit(policy, u))
            frames.append(pd.DataFrame({
                "step": step, "policy": policy, "eval_protocol": EVAL_PROTOCOL,
                **{f"xi_{k}": grid[j] for j, k in enumerate(dirs)},
                "successes": rng.binomial(self.sweep_trials, p),
                "trials": self.sweep_trials}))
        return pd.concat(frames, ignore_index=True)

    def sensitivity_truth(self, center: dict[str, float] | None = None,
                          scale: dict[str, float] | None = None) -> xr.Dataset:
        """True α_π, S_kπ and γ_kl in standardised coordinates ξ' = (ξ − c) / s.

        With raw coefficients β_k = b_k / max ξ_k and γ^raw_kl = g_kl / (max ξ_k · max ξ_l):
        S_kπ = s_k (β_kπ + Σ_{l≠k} γ^raw_kl c_l), γ_kl = s_k s_l γ^raw_kl and
        α'_π = α_π + Σ_k β_kπ c_k + Σ_{k<l} γ^raw_kl c_k c_l.  Defaults for c and s: the mean
        and population s.d. of the sweep grid (what :mod:`models.sensitivity` uses on one
        sweep).  Pairs are named ``"k×l"`` in grid order.
        """
        dirs = list(self.sweep_grid)
        grid = np.array(np.meshgrid(*[self.sweep_grid[k] for k in dirs], indexing="ij"))
        grid = grid.reshape(len(dirs), -1)
        c = {k: grid[i].mean() for i, k in enumerate(dirs)} if center is None else center
        s = {k: grid[i].std() for i, k in enumerate(dirs)} if scale is None else scale
        top = {k: max(self.sweep_grid[k]) for k in dirs}
        g_raw = {}
        for i, k in enumerate(dirs):
            for k2 in dirs[i + 1:]:
                g = self.synergy.get((k, k2), self.synergy.get((k2, k), 0.0))
                g_raw[(k, k2)] = g / (top[k] * top[k2])
        policies = list(self.sensitivity_policies)
        S = np.zeros((len(dirs), len(policies)))
        alpha = np.zeros(len(policies))
        for j, p in enumerate(policies):
            a, b = self.sensitivity_policies[p]
            beta = {k: b[k] / top[k] for k in dirs}
            alpha[j] = a + sum(beta[k] * c[k] for k in dirs) + sum(
                g * c[k] * c[k2] for (k, k2), g in g_raw.items())
            for i, k in enumerate(dirs):
                inter = sum(g * c[k2 if k == k1 else k1] for (k1, k2), g in g_raw.items()
                            if k in (k1, k2))
                S[i, j] = s[k] * (beta[k] + inter)
        pairs = [f"{k}×{k2}" for k, k2 in g_raw]
        gamma = [s[k] * s[k2] * g for (k, k2), g in g_raw.items()]
        return xr.Dataset({"S": (("direction", "policy"), S), "alpha": ("policy", alpha),
                           "gamma": ("pair", np.array(gamma))},
                          coords={"direction": dirs, "policy": policies, "pair": pairs})

    def true_delta_j(self, policy: str) -> float:
        """δ_J(π) = J_real(π) − J_sim(π) of a reference policy."""
        j_sim, j_real = self.transfer_truth[policy]
        return (self.initial_success if j_real is None else j_real) - j_sim

    def transfer_evaluations(self, step: int = 0,
                             policies: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Sim and real evaluations of each reference policy under the shared protocol.

        ``transfer_evaluations`` rows: ``step, policy, eval_protocol, sim_successes, sim_trials,
        real_successes, real_trials`` with ``transfer_trials`` trials per domain.
        """
        policies = tuple(self.transfer_truth) if policies is None else tuple(policies)
        rows = []
        for i, policy in enumerate(policies):
            rng = np.random.default_rng([self.seed, 30_001, step, i])
            j_sim = self.transfer_truth[policy][0]
            j_real = j_sim + self.true_delta_j(policy)
            n = self.transfer_trials
            rows.append({"step": step, "policy": policy, "eval_protocol": EVAL_PROTOCOL,
                         "sim_successes": int(rng.binomial(n, j_sim)), "sim_trials": n,
                         "real_successes": int(rng.binomial(n, j_real)), "real_trials": n})
        return pd.DataFrame(rows)

    # -- resume -----------------------------------------------------------------------------
    def describe(self) -> dict[str, object]:
        """How to rebuild this world (:func:`world_from_spec`), stored in campaign logs.

        ``{"kind", "seed", "variation"}``, plus ``"stochastic_costs"`` when set and the opt-in
        constructor's name and arguments (``"factory"``) when they rebuild this world.  A world
        that description does not rebuild — any constructor field differs from what it
        rebuilds (a world built with other values, or changed after it was built: budgets,
        stated priors, truth, …), or a subclass — is described with ``"changed": True``, and
        :func:`world_from_spec` refuses such a description rather than rebuild another world.
        """
        spec: dict[str, object] = {"kind": "synthetic", "seed": self.seed,
                                   "variation": None if self.variation is None
                                   else int(self.variation)}
        if self.stochastic_costs:  # absent by default: logs of earlier campaigns unchanged
            spec["stochastic_costs"] = True
        if self.factory is not None:  # an opt-in world (with_bench_test, with_latency_probe)
            with_factory = {**spec, "factory": dict(self.factory)}
            if _same_world(world_from_spec(with_factory), self):
                spec = with_factory
        if type(self) is not SyntheticWorld or not _same_world(world_from_spec(spec), self):
            spec["changed"] = True
        return spec


def _same_world(a: SyntheticWorld, b: SyntheticWorld) -> bool:
    """Whether every constructor field but ``factory`` is equal (the outcomes and evidence
    of a synthetic world are functions of these)."""
    return all(getattr(a, f.name) == getattr(b, f.name)
               for f in fields(SyntheticWorld) if f.init and f.name != "factory")


FACTORIES = ("with_bench_test", "with_latency_probe")
"""The opt-in worlds :meth:`SyntheticWorld.describe` records by name and arguments."""

WORLD_FAMILIES = ("varied", "bench_test")
"""The world families of the policy benchmark (:func:`benchmark_world`)."""


def benchmark_world(variation: int, seed: int, family: str = "varied") -> SyntheticWorld:
    """World ``variation`` of a benchmark family, its outcomes seeded ``seed``.

    ``varied``: :meth:`SyntheticWorld.varied` (true gains, costs, interactions and risks
    perturbed); ``bench_test``: the same world with ft_real_100 gated at the start and a bench
    safety test that can open it (:meth:`SyntheticWorld.with_bench_test` with ``variation``):
    a family where a diagnosis opens (or keeps closed) a candidate."""
    if family not in WORLD_FAMILIES:
        raise InputError("family", f"unknown world family {family!r}; allowed: "
                                   f"{', '.join(WORLD_FAMILIES)}")
    if family == "bench_test":
        return SyntheticWorld.with_bench_test(seed=seed, variation=variation)
    return SyntheticWorld.varied(variation, seed=seed)


def world_from_spec(spec: dict[str, object]) -> SyntheticWorld:
    """Rebuild a world from :meth:`SyntheticWorld.describe` (logged campaigns)."""
    if spec.get("kind") != "synthetic":
        raise InputError("campaign log", f"cannot rebuild a {spec.get('kind')!r} world from the "
                                         "log; pass the world to resume")
    from dataclasses import replace

    if spec.get("changed"):
        raise InputError("campaign log", "the logged synthetic world cannot be rebuilt from "
                                         "its description (built with other values or changed "
                                         "after it was built: budgets, stated priors, truth, "
                                         "…); pass the world to resume")
    variation = spec.get("variation")
    factory = spec.get("factory")
    if factory is not None:
        args = dict(factory)
        name = args.pop("name", None)
        if name not in FACTORIES:
            raise InputError("campaign log", f"unknown synthetic world {name!r}; known: "
                                             f"{sorted(FACTORIES)}")
        world = getattr(SyntheticWorld, name)(seed=int(spec["seed"]), **args)
    elif variation is None:
        world = SyntheticWorld(seed=int(spec["seed"]))
    else:
        world = SyntheticWorld.varied(int(variation), seed=int(spec["seed"]))
    if spec.get("stochastic_costs"):
        world = replace(world, stochastic_costs=True)
    return world
