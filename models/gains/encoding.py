"""Evidence encoded for the gains model: policy slots, lineages, summary-level estimates
and direction measurements, and the normal approximation of each slot's likelihood that the
data-informed non-centring uses (:mod:`models.gains`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.lineage import PolicyTree, policy_tree
from models.gains.spec import GainsPriors

__all__ = [
    "EstimateEncoding",
    "PolicyEncoding",
    "encode_directions",
    "encode_estimates",
    "encode_policies",
    "history_matrix",
    "likelihood_approximation",
    "no_rows",
    "parent_name",
]


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
    # past campaigns (:mod:`models.gains`, "Past campaigns"): campaign of every policy (0 = the
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
    1 at the measured direction (:mod:`models.gains`, "Direction effects")."""
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


def parent_name(enc: PolicyEncoding, k: int) -> str:
    """Name of the parent policy of slot k (the ancestor with the most ancestors of its own)."""
    n = len(enc.names)
    ancestors = [j for j in np.flatnonzero(enc.ancestry[k, :n]) if j != k]
    return enc.names[max(ancestors, key=lambda j: enc.ancestry[j, :n].sum())]


def history_matrix(history: np.ndarray, n_rows: int, n_actors: int) -> np.ndarray:
    """The (n_rows, n_actors) history matrix; zeros for an encoding built without actors."""
    h = np.asarray(history, dtype=float)
    if h.shape == (n_rows, n_actors):
        return h
    if h.size:
        raise ValueError(f"history of shape {h.shape}, expected {(n_rows, n_actors)}")
    return np.zeros((n_rows, n_actors))


def no_rows() -> pd.DataFrame:
    """An empty validated paired table (a model built before any evidence)."""
    from belief.inputs.tables import empty_paired

    return empty_paired()
