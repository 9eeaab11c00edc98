"""Decision draws of a fitted gains model and the vectorised functions of the CVU engine:
the next gain, the state after an execution, and the simulation and log-likelihood of every
experiment's outcome (:mod:`models.gains`, last section).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belief.errors import InputError
from models.likelihoods import expit, normal_logpdf

__all__ = [
    "DRAW_VARS",
    "ORDER_VARS",
    "decision_draws",
    "decision_vars",
    "executed_logit",
    "gain_from_draws",
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
    split CVU by channel (:mod:`belief.decision.cvu.channels`).  Without order effects in
    the draws it changes nothing.  Equal to :func:`gain_from_draws` of :func:`state_after`
    (the state after m, whose next executions these are), computed from the arrays that
    state_after changes without building its Dataset.
    """
    if m is None:
        return gain_from_draws(draws)
    eta, theta, tau, rho, k, z_now, z_next = _arrays(draws)
    offset = _offset(draws)
    change = _after(draws, m, adapts, order)
    if change is not None:  # the arrays of state_after(draws, m), without building it
        adapts, joins = change
        if adapts:
            j = [str(c) for c in draws["candidate"].values].index(m)
            eta = executed_logit(draws, m)
            k = k.copy()
            k[j] += 1
            z_now = z_next
        if joins:
            offset = _offset_after(draws, m)
    return xr.DataArray(_gain(eta, theta, tau, rho, k, z_now, offset),
                        dims=("sample", "candidate"),
                        coords={"candidate": draws["candidate"].values}, name="gain")


def _noise_free(z: np.ndarray) -> np.ndarray:
    """Columns (candidates) of noise draws z (…, S, C) that are 0 in every draw: the
    candidates that do not change the policy, which :func:`belief.posterior.belief_state.
    make_belief` zero-fills (θ, noise, offset) so that their ΔJ is exactly 0.  A sampled
    N(0, 1) column is never identically 0."""
    z = np.asarray(z)
    return ~np.any(z.reshape(-1, z.shape[-1]) != 0, axis=0)


def _after(draws: xr.Dataset, m: str, adapts: bool | None, order: bool
           ) -> tuple[bool, bool] | None:
    """What executing m changes (:func:`state_after`): (m adapts the policy, m joins the
    history), or None when nothing changes.  ``adapts`` None: m is one of the draws'
    candidates — on q_t's draws, which :func:`belief.posterior.belief_state.make_belief`
    extends to every candidate, a diagnosis too: callers pass ``adapts``."""
    ids = [str(c) for c in draws["candidate"].values]
    if adapts is None:
        adapts = m in ids
    has_order = "gains_gamma" in draws
    actors = [str(a) for a in draws["actor"].values] if has_order else []
    joins = order and has_order and m in actors and not float(
        draws["gains_history"].values[actors.index(m)]) > 0
    return (bool(adapts), bool(joins)) if adapts or joins else None


def state_after(draws: xr.Dataset, m: str, adapts: bool | None = None,
                seed: int | list[int] | tuple[int, ...] = 0, order: bool = True
                ) -> xr.Dataset:
    """The decision draws of the state after executing m once, on the same samples.

    For an adaptation m (``adapts``; default: m is one of the draws' candidates)::

        η ← η' = :func:`executed_logit` (η + θ_m ρ^{k_m} + Σ_{a ∈ h} γ_{a→m} + τ z_now,m)
        k_m ← k_m + 1,   z_now ← z_next,   z_next ← fresh N(0, 1) from ``default_rng(seed)``

    (z_next stays 0 in the columns where it is 0 in every draw — the candidates that do not
    change the policy, zero-filled in q_t so that their ΔJ is 0 in every state),

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
    change = _after(draws, m, adapts, order)
    if change is None:
        return draws
    adapts, joins = change
    ids = [str(c) for c in draws["candidate"].values]
    out = draws.copy()
    if adapts:
        j = ids.index(m)
        z_next = np.asarray(draws["gains_z_next"].values, dtype=float)
        reps = np.asarray(draws["gains_repeats"].values, dtype=float).copy()
        reps[j] += 1
        out["gains_eta"] = (draws["gains_eta"].dims, executed_logit(draws, m))
        out["gains_repeats"] = (draws["gains_repeats"].dims, reps)
        out["gains_z_now"] = (draws["gains_z_now"].dims, z_next)
        fresh = np.random.default_rng(seed).standard_normal(z_next.shape)
        fresh[..., _noise_free(z_next)] = 0.0  # no gain in any state: no noise either
        out["gains_z_next"] = (draws["gains_z_next"].dims, fresh)
    if joins:
        hist = np.asarray(draws["gains_history"].values, dtype=float).copy()
        hist[[str(a) for a in draws["actor"].values].index(m)] = 1.0
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
    mu, sd = _estimate_moments(draws, target, se)
    return normal_logpdf(y[:, None], mu[None, :], sd[None, :])


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
    y_k ~ Normal(ξ_k, se²) independently (:mod:`models.gains`, "Direction effects")."""
    xi = _xi(draws, directions)[np.asarray(idx)]
    return xi + se * rng.standard_normal(xi.shape)


def loglik_direction(draws: xr.Dataset, directions: list[str] | tuple[str, ...], se: float,
                     y: np.ndarray) -> np.ndarray:
    """Σ_k log Normal(y_jk | ξ_ik, se²) for every outcome j and draw i: shape (J, S)."""
    xi = _xi(draws, directions)
    y = np.asarray(y, dtype=float).reshape(-1, xi.shape[1])
    return normal_logpdf(y[:, None, :], xi[None, :, :], se).sum(-1)


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



def _stack(da: xr.DataArray) -> np.ndarray:
    """(chain, draw, ...) → (sample, ...) as a plain array."""
    arr = da.transpose("chain", "draw", ...).to_numpy()
    return arr.reshape(-1, *arr.shape[2:])
