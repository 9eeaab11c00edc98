"""Allocation policies on the small conjugate problems, and their exact expected values.

A policy maps a belief state s of a :class:`~belief.lab.small_problems.SmallProblem` to a
distribution over feasible candidates and the stop (:data:`STOP`); all policies here are
stationary in s, so :func:`policy_value` computes a policy's expected net value exactly by
enumerating every outcome (beta-binomial predictive probabilities), with a memo on s:

    V^π(s) = Σ_m π(m | s) [ U0(m | s) + Σ_y P(y | s, m) V^π(s^{m,y}) ],   (stop adds 0)

=================  ==========================================================================
name               rule (stop when the best score is ≤ 0; exact ties split evenly)
=================  ==========================================================================
bayes              argmax Q*_τ(m | s) (backward induction, :meth:`SmallProblem.q_values`)
q_exact            the engine's formula without Monte Carlo error: score U0(m) + E_y G0(s^{m,y})
                   (= Q + G0(s^∅), the DESIGN economic stop; ranking = ranking by Q); at the
                   last step Q = U0
q_exact_q>0        the same ranking, stop when Q = U0 + CVU ≤ 0 (the former rule, before the
                   engine compared with stopping; kept for the comparison)
q_engine           Q = U0 + CVU from :func:`belief.decision.cvu.continuation_value` on S joint
                   posterior draws (:func:`engine_cvu`, PSIS), DESIGN stop
q_engine_q>0       the same, stop when Q ≤ 0
u0                 argmax U0 (myopic)
thompson           one posterior draw θ: argmax G·d^k·θ − λᵀΔC (diagnoses never win), as
                   :mod:`belief.decision.allocation`; probabilities by quadrature
kg                 knowledge gradient for finite horizons (Ryzhov, Powell & Frazier 2012):
                   U0(m) + (τ − 1)·(E_y G0_b(s^{m,y}) − G0(s)), G0_b with the belief of
                   s^{m,y} and the budget and candidate set of s (pure information value,
                   counted for every later step)
lookahead_d        U0(m) + E_y V_d(s^{m,y}): d-step look-ahead (V_d truncated backward
                   induction); lookahead_1 = q_exact, lookahead_{τ−1} = bayes
rollout_d          U0(m) + E_y R_d(s^{m,y}), R_d the value of d steps of u0 on the updated
                   belief; rollout_1 = q_exact
plan               the first step of the best open-loop plan: argmax V_plan(m),
                   V_plan(m) = U0(m | s) + W(s̄^m), W the best open-loop plan's value under the
                   posterior means of s (no learning; gains are linear in θ, so this is the
                   plan's exact expected value), s̄^m the state after m without its outcome
                   (counts, budget, decay moved; the posterior of s kept) — as
                   :func:`belief.decision.planner.plan_on_belief` on the gains model
plan_voi           argmax V_plan(m) + VOI(m), VOI(m) = E_y G0(s^{m,y}) − G0(s̄^m) (the value of
                   m's information for the next decision) — the ``plan_voi`` allocation with
                   β = 1
=================  ==========================================================================
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import integrate, special

from belief.decision.cvu import CVUProblem, CVUSettings, Experiment, continuation_value
from belief.decision.functional_registry import parse_functional
from belief.decision.scores import g0
from belief.lab.small_problems import BeliefState, SmallProblem

__all__ = ["STOP", "EngineQ", "compare_policies", "engine_cvu", "exact_q_scores", "kg_scores",
           "plan_scores", "policy_value", "standard_policies", "thompson_probabilities"]

STOP = -1
Policy = Callable[[SmallProblem, BeliefState], Mapping[int, float]]


def _pick(scores: np.ndarray, feasible: np.ndarray, stop_scores: np.ndarray | None = None,
          tol: float = 1e-12) -> dict[int, float]:
    """argmax of ``scores`` over feasible candidates, exact ties (within ``tol``) split evenly;
    stop when no feasible ``stop_scores`` (default the scores) is > ``tol``."""
    stop_scores = scores if stop_scores is None else stop_scores
    if not feasible.any() or not (stop_scores[feasible] > tol).any():
        return {STOP: 1.0}
    masked = np.where(feasible, scores, -np.inf)
    best = np.flatnonzero(masked >= masked.max() - tol)
    return {int(m): 1.0 / best.size for m in best}


def policy_value(problem: SmallProblem, policy: Policy) -> float:
    """E[Σ realised gains − λᵀ spent] of ``policy`` from s_0, exactly (module docstring)."""
    memo: dict[BeliefState, float] = {}

    def v(s: BeliefState) -> float:
        if s not in memo:
            dist = policy(problem, s)
            feasible = problem.feasible(s)
            u0 = problem.u0(s)
            total = 0.0
            for m, p in dist.items():
                if m == STOP or p == 0:
                    continue
                if not feasible[m]:
                    raise ValueError(f"policy chose infeasible {problem.ids[m]!r} at {s}")
                total += p * (u0[m] + sum(q * v(s2) for q, s2 in problem.outcomes(s, m)
                                          if q > 0))
            memo[s] = total
        return memo[s]

    return v(problem.initial)


# -- exact scores ---------------------------------------------------------------------------
def exact_q_scores(problem: SmallProblem, s: BeliefState) -> tuple[np.ndarray, float]:
    """(U0(m) + E_y G0(s^{m,y}) per candidate, G0(s^∅) = G0(s)): the engine's one-step
    formula computed exactly; Q = scores − G0(s).  At the last step the scores are U0."""
    u0 = problem.u0(s)
    if problem.steps_left(s) <= 1:
        return u0, problem.g0(s)
    scores = np.full(len(problem.arms), -np.inf)
    for m in np.flatnonzero(problem.feasible(s)):
        scores[m] = u0[m] + sum(p * problem.g0(s2) for p, s2 in problem.outcomes(s, int(m)))
    return scores, problem.g0(s)


def kg_scores(problem: SmallProblem, s: BeliefState) -> np.ndarray:
    """U0(m) + (τ − 1)·(E_y G0_b(s^{m,y}) − G0(s)) (module docstring)."""
    u0 = problem.u0(s)
    tau = problem.steps_left(s)
    feasible = problem.feasible(s)
    g0_now = problem.g0(s)
    scale = problem.gain_scale(s)
    lat = [arm.latent for arm in problem.arms]
    out = np.full(len(problem.arms), -np.inf)
    for m in np.flatnonzero(feasible):
        info = 0.0
        for p, s2 in problem.outcomes(s, int(m)):
            a, b = problem.posterior(s2)
            u0_b = scale * (a / (a + b))[lat] - problem.c_lambda
            info += p * max(0.0, u0_b[feasible].max())
        out[m] = u0[m] + (tau - 1) * (info - g0_now)
    return out


class _OpenLoop:
    """The open-loop plan values at one state s (the ``plan`` rows): the posterior
    means of s held fixed, executions moving only counts (decay, budget, availability, steps).
    """

    def __init__(self, problem: SmallProblem, s: BeliefState) -> None:
        a, b = problem.posterior(s)
        self.p, self.s = problem, s
        self.mean = (a / (a + b))[[arm.latent for arm in problem.arms]]
        self.memo: dict[tuple[int, ...], float] = {}

    def moved(self, counts: tuple[int, ...], m: int) -> BeliefState:
        """s̄ after one more execution of m: counts moved, the successes of s (only counts
        are read from it: feasibility and decay)."""
        return BeliefState((*counts[:m], counts[m] + 1, *counts[m + 1:]), self.s.successes)

    def u0(self, st: BeliefState) -> np.ndarray:
        """U0 under the means of s at a moved state."""
        return self.p.gain_scale(st) * self.mean - self.p.c_lambda

    def w(self, st: BeliefState) -> float:
        """W(s̄) = max(0, max_m U0(m | s̄) + W(s̄^m)), the best open-loop plan's value."""
        if st.counts not in self.memo:
            u0 = self.u0(st)
            best = 0.0
            for m in np.flatnonzero(self.p.feasible(st)):
                best = max(best, u0[m] + self.w(self.moved(st.counts, int(m))))
            self.memo[st.counts] = best
        return self.memo[st.counts]

    def first_step(self) -> np.ndarray:
        """V_plan(m) = U0(m | s) + W(s̄^m) per arm (−inf where m is not feasible)."""
        out = np.full(len(self.p.arms), -np.inf)
        u0 = self.p.u0(self.s)
        for m in np.flatnonzero(self.p.feasible(self.s)):
            out[m] = u0[m] + self.w(self.moved(self.s.counts, int(m)))
        return out

    def voi(self, m: int) -> float:
        """E_y G0(s^{m,y}) − G0(s̄^m)."""
        st = self.moved(self.s.counts, m)
        g0_bar = float(g0(self.u0(st), self.p.feasible(st)))
        return sum(q * self.p.g0(s2) for q, s2 in self.p.outcomes(self.s, m)) - g0_bar


def plan_scores(problem: SmallProblem, s: BeliefState, voi: bool) -> np.ndarray:
    """V_plan(m), plus VOI(m) when ``voi`` (module docstring: ``plan``, ``plan_voi``)."""
    ol = _OpenLoop(problem, s)
    scores = ol.first_step()
    if voi:
        for m in np.flatnonzero(np.isfinite(scores)):
            scores[m] += ol.voi(int(m))
    return scores


def _greedy_value(problem: SmallProblem, s: BeliefState, steps: int,
                  memo: dict) -> float:
    """R_d(s): expected net value of ``steps`` steps of U0-greedy (with its stop) from s."""
    key = (s, steps)
    if key not in memo:
        pick = _pick(problem.u0(s), problem.feasible(s)) if steps > 0 else {STOP: 1.0}
        memo[key] = sum(w * (problem.u0(s)[m] + sum(
            p * _greedy_value(problem, s2, steps - 1, memo) for p, s2 in problem.outcomes(s, m)))
            for m, w in pick.items() if m != STOP)
    return memo[key]


def thompson_probabilities(problem: SmallProblem, s: BeliefState) -> dict[int, float]:
    """P(Thompson picks m | s) and P(stop), by quadrature.

    With one draw θ_l ~ Beta(α_l, β_l) per latent (independent), the pick is
    argmax_m v_m = G_m d^{k_m} θ_{l(m)} − λᵀΔC(m) over feasible m, stop when no v_m > 0.
    For an adaptation m on latent l, P(m) = ∫_{I_m} p_l(θ) Π_{l' ≠ l} F_{l'}(v_m(θ)) dθ,
    where I_m is the interval of θ on which m beats its siblings on l and v_m > 0, and
    F_{l'}(v) = P(max_{m' on l'} v_{m'} < v) = BetaCDF_{l'}(min_{m'} (v + λᵀΔC(m'))/(G d^k)).
    Diagnoses (G = 0) have v = −λᵀΔC ≤ 0 and are never picked.
    """
    feasible = problem.feasible(s)
    scale = problem.gain_scale(s)
    cl = problem.c_lambda
    a, b = problem.posterior(s)
    arms = [m for m in np.flatnonzero(feasible) if scale[m] > 0]
    by_lat: dict[int, list[int]] = {}
    for m in arms:
        by_lat.setdefault(problem.arms[m].latent, []).append(int(m))

    def cdf_best(lat: int, v: float) -> float:
        thr = min((v + cl[m]) / scale[m] for m in by_lat[lat])
        return float(special.betainc(a[lat], b[lat], min(max(thr, 0.0), 1.0)))

    def pdf(t: float, lat: int) -> float:
        if t <= 0.0 or t >= 1.0:
            return 0.0
        return float(np.exp((a[lat] - 1) * np.log(t) + (b[lat] - 1) * np.log1p(-t)
                            - special.betaln(a[lat], b[lat])))

    out: dict[int, float] = {}
    for m in arms:
        lat = problem.arms[m].latent
        lo, hi = max(0.0, cl[m] / scale[m]), 1.0
        for m2 in by_lat[lat]:
            if m2 == m:
                continue
            ds, dc = scale[m] - scale[m2], cl[m] - cl[m2]
            if ds > 0:
                lo = max(lo, dc / ds)
            elif ds < 0:
                hi = min(hi, dc / ds)
            elif dc > 0 or (dc == 0 and m2 < m):
                hi = lo
        if lo >= hi:
            continue
        others = [lt for lt in by_lat if lt != lat]

        def f(t, m=m, lat=lat, others=others):
            v = scale[m] * t - cl[m]
            out = pdf(t, lat)
            for lt in others:
                out *= cdf_best(lt, v)
            return out

        p = integrate.quad(f, lo, hi, epsabs=1e-11, epsrel=1e-9, limit=200)[0]
        if p > 0:
            out[m] = p
    out[STOP] = max(0.0, 1.0 - sum(out.values()))
    return out


# -- the engine -----------------------------------------------------------------------------
def _posterior_draws(problem: SmallProblem, s: BeliefState, draws: int, seed: int
                     ) -> tuple[np.ndarray, np.random.Generator]:
    """S independent joint draws (S, L) of the latents' Beta posteriors at s, and the
    generator (seeded by ``seed`` and s) that made them."""
    rng = np.random.default_rng([seed, 18_001, *s.counts, *s.successes])
    a, b = problem.posterior(s)
    return rng.beta(a, b, size=(draws, len(a))), rng


def _binom_loglik(y: np.ndarray, n: int, theta: np.ndarray) -> np.ndarray:
    """log Binomial(y_j | n, θ_i) as a (J, S) array (the same numbers as
    ``stats.binom.logpmf``, as one outer product)."""
    y = np.asarray(y, float)
    coef = special.gammaln(n + 1.0) - special.gammaln(y + 1.0) - special.gammaln(n - y + 1.0)
    return (coef[:, None] + special.xlogy(y[:, None], theta[None, :])
            + special.xlog1py(n - y[:, None], -theta[None, :]))


def engine_cvu(problem: SmallProblem, s: BeliefState, *, draws: int = 1000,
               n_outcomes: int = 256, seed: int = 0, continuation: str = "one_step",
               rollout_depth: int = 2, inner_outcomes: int = 32, estimator: str = "auto",
               noise_correction: bool = True) -> dict[str, np.ndarray | float]:
    """The engine's U0 and CVU at s, from S joint draws of the conjugate posterior.

    The one adapter between the small problems and :func:`belief.decision.cvu.
    continuation_value` (its signature is the only thing here that follows the decision
    layer).  Draws θ_l ~ Beta(α_l, β_l) (seeded by ``seed`` and s); gain draws G d^k θ_{l(m)};
    each candidate's Experiment simulates Y ~ Binomial(n_m, θ) and scores log p(Y | θ_i);
    its next gains are the current ones with m's own gain × d_m (its next repeat), and so from
    any state (``Experiment.after``: column m × d_m, exact).  U0 is φ = mean of the gain draws
    − λᵀΔC, as in the engine.  ``continuation``, ``rollout_depth``, ``inner_outcomes``,
    ``estimator`` and ``noise_correction`` are those of
    :class:`~belief.decision.settings.CVUSettings`; the steps left after m are the
    problem's (T − executions − 1).

    Returns
    -------
    dict with ``u0``, ``cvu``, ``cvu_mcse`` (arrays over candidates, NaN where infeasible)
    and ``g0_null`` = G0(s^∅) from the draws (V(s^∅) for a non-myopic continuation, which
    adds ``cvu_bias_bound``).
    """
    theta, rng = _posterior_draws(problem, s, draws, seed)
    lat = [arm.latent for arm in problem.arms]
    gain_now = theta[:, lat] * problem.gain_scale(s)
    feasible = problem.feasible(s)
    exps = {}
    for m in np.flatnonzero(feasible):
        arm = problem.arms[m]
        nxt = gain_now.copy()
        nxt[:, m] *= arm.decay

        def after(g, m=int(m), d=arm.decay):
            out = np.array(g, float)
            out[:, m] *= d
            return out

        if arm.trials == 0:
            exps[arm.id] = Experiment(next_gain=nxt, after=after)
            continue
        th = theta[:, arm.latent]
        exps[arm.id] = Experiment(
            next_gain=nxt, after=after,
            simulate=lambda r, idx, th=th, n=arm.trials: r.binomial(n, th[idx]),
            loglik=lambda y, th=th, n=arm.trials: _binom_loglik(y, n, th))
    lam = np.array(problem.weights, float)
    fn = parse_functional("mean")
    ds = continuation_value(CVUProblem(
        gain_now, exps, problem.ids, problem.costs, problem.budget_left(s), lambda _b: lam,
        fn, available=problem.available(s),
        repeatable=np.array([arm.repeatable for arm in problem.arms]),
        settings=CVUSettings(n_outcomes=n_outcomes, max_refits=0,
                             seed=int(rng.integers(2**31)), continuation=continuation,
                             rollout_depth=rollout_depth, inner_outcomes=inner_outcomes,
                             estimator=estimator, noise_correction=noise_correction),
        steps_after=problem.steps_left(s) - 1))
    out = {"u0": fn(gain_now.T) - problem.c_lambda, "cvu": ds["cvu"].values.astype(float),
           "cvu_mcse": ds["cvu_mcse"].values.astype(float), "g0_null": ds.attrs["g0_null"]}
    if "cvu_bias_bound" in ds:
        out["cvu_bias_bound"] = ds["cvu_bias_bound"].values.astype(float)
    return out


@dataclass
class EngineQ:
    """The engine's Q = U0 + CVU on a small problem, as a (seeded, deterministic) policy.

    ``stop="design"``: stop when U0 + CVU + G0(s^∅) ≤ 0 for every feasible m (DESIGN.md);
    ``stop="q>0"``: stop when no Q > 0 (the former rule; ``engine.decide`` uses the DESIGN
    stop).  At the last step Q = U0 (from the draws).  ``cache`` (shared between instances)
    keeps every engine call's result by (problem, s, draws, outcomes, seed, continuation), so
    the two stop rules reuse one computation; ``calls`` counts the engine calls this instance
    made.  ``continuation``, ``rollout_depth``, ``inner_outcomes``: CVU's continuation, and
    ``noise_correction`` (:class:`~belief.decision.settings.CVUSettings`); with a non-myopic
    one the DESIGN stop
    compares U0 + E_Y[V(s^{m,Y})] with stopping.
    """

    draws: int = 1000
    n_outcomes: int = 256
    seed: int = 0
    stop: str = "design"
    cache: dict = field(default_factory=dict, repr=False)
    calls: int = 0
    continuation: str = "one_step"
    rollout_depth: int = 2
    inner_outcomes: int = 32
    noise_correction: bool = True

    def __post_init__(self) -> None:
        if self.stop not in ("design", "q>0"):
            raise ValueError(f"stop must be 'design' or 'q>0', got {self.stop!r}")

    def __call__(self, problem: SmallProblem, s: BeliefState) -> dict[int, float]:
        feasible = problem.feasible(s)
        if not feasible.any():
            return {STOP: 1.0}
        if problem.steps_left(s) <= 1:  # the last step: CVU := 0, Q = U0 (from the draws)
            theta = _posterior_draws(problem, s, self.draws, self.seed)[0]
            lat = [arm.latent for arm in problem.arms]
            return _pick((theta[:, lat] * problem.gain_scale(s)).mean(0) - problem.c_lambda,
                         feasible)
        key = (problem, s, self.draws, self.n_outcomes, self.seed, self.continuation,
               self.rollout_depth, self.inner_outcomes, self.noise_correction)
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = engine_cvu(problem, s, draws=self.draws,
                                         n_outcomes=self.n_outcomes, seed=self.seed,
                                         continuation=self.continuation,
                                         rollout_depth=self.rollout_depth,
                                         inner_outcomes=self.inner_outcomes,
                                         noise_correction=self.noise_correction)
        e = self.cache[key]
        q = np.where(feasible, e["u0"] + e["cvu"], -np.inf)
        return _pick(q, feasible, q + e["g0_null"] if self.stop == "design" else q)


# -- the policies ---------------------------------------------------------------------------
def standard_policies(lookahead: Sequence[int] = (2,), rollout: Sequence[int] = (2,)
                      ) -> dict[str, Policy]:
    """The exact policies of the module table (the engine's are built with :class:`EngineQ`)."""

    def bayes(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        return _pick(p.q_values(s), p.feasible(s))

    def q_exact(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        scores, _ = exact_q_scores(p, s)
        return _pick(scores, p.feasible(s))

    def q_exact_positive(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        scores, g0_null = exact_q_scores(p, s)
        q = scores if p.steps_left(s) <= 1 else scores - g0_null
        return _pick(q, p.feasible(s))

    def u0(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        return _pick(p.u0(s), p.feasible(s))

    def kg(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        return _pick(kg_scores(p, s), p.feasible(s))

    def plan(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        return _pick(plan_scores(p, s, voi=False), p.feasible(s))

    def plan_voi(p: SmallProblem, s: BeliefState) -> dict[int, float]:
        return _pick(plan_scores(p, s, voi=True), p.feasible(s))

    out: dict[str, Policy] = {"bayes": bayes, "q_exact": q_exact,
                              "q_exact_q>0": q_exact_positive, "u0": u0,
                              "thompson": thompson_probabilities, "kg": kg, "plan": plan,
                              "plan_voi": plan_voi}
    for d in lookahead:
        out[f"lookahead_{d}"] = lambda p, s, d=d: _pick(p.q_values(s, d + 1), p.feasible(s))
    for d in rollout:
        memo: dict = {}

        def roll(p: SmallProblem, s: BeliefState, d=d, memo=memo) -> dict[int, float]:
            u0v = p.u0(s)
            scores = np.full(len(p.arms), -np.inf)
            for m in np.flatnonzero(p.feasible(s)):
                tail = 0.0 if p.steps_left(s) <= 1 else sum(
                    q * _greedy_value(p, s2, d, memo.setdefault(p, {}))
                    for q, s2 in p.outcomes(s, int(m)))
                scores[m] = u0v[m] + tail
            return _pick(scores, p.feasible(s))

        out[f"rollout_{d}"] = roll
    return out


def compare_policies(problems: Sequence[SmallProblem], policies: Mapping[str, Policy],
                     engine_seeds: Sequence[int] = (), engine_draws: int = 1000,
                     engine_outcomes: int = 256,
                     engine_variants: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """One row per (problem, policy): expected value, the Bayes-optimal value, the fraction
    captured; the engine rows are the mean over ``engine_seeds`` (each seed is a different,
    deterministic policy) with the standard error over seeds as ``mcse``.

    ``engine_variants`` (name → :class:`EngineQ` keyword arguments, e.g. ``{"continuation":
    "lookahead2"}``) adds one engine row per variant (DESIGN stop); every engine row also
    holds ``seconds`` (wall time of its engine calls over all seeds) and ``calls`` (the states
    it scored), so ``seconds / calls`` is the wall time per decision."""
    rows = []
    cache: dict = {}
    variants: dict[str, tuple[str, Mapping]] = {}
    if engine_seeds:
        variants = {"q_engine": ("design", {}), "q_engine_q>0": ("q>0", {})}
        variants.update({name: ("design", dict(kw))
                         for name, kw in (engine_variants or {}).items()})
    for prob in problems:
        v_star = prob.bayes_value()
        for name, pol in policies.items():
            v = policy_value(prob, pol)
            rows.append({"problem": prob.name, "policy": name, "value": v, "mcse": 0.0,
                         "bayes": v_star})
        for name, (stop, kw) in variants.items():
            vals, calls = [], 0
            t0 = time.perf_counter()
            for sd in engine_seeds:
                pol = EngineQ(engine_draws, engine_outcomes, sd, stop, cache, **kw)
                vals.append(policy_value(prob, pol))
                calls += pol.calls
            rows.append({"problem": prob.name, "policy": name, "value": float(np.mean(vals)),
                         "mcse": float(np.std(vals, ddof=1) / np.sqrt(len(vals)))
                         if len(vals) > 1 else float("nan"), "bayes": v_star,
                         "seconds": time.perf_counter() - t0, "calls": calls})
    df = pd.DataFrame(rows)
    df["fraction"] = df.value / df.bayes
    df["gap"] = df.bayes - df.value
    return df
