"""Nested partial pooling with exactly merged single-member levels, sampled without funnels.

A hierarchical model pools members (candidates) through levels from the top down, e.g. lens →
method → candidate (:mod:`models.gains`) or hardware group → candidate
(:mod:`models.exec_risk`)::

    x_m = μ_0 + Σ_levels τ_level · z_{level, group of m at that level},    z ~ Normal(0, 1)

**Merging (exact).**  A level's group with a single member is part of that member's own
deviation; groups of different levels with the same members (a lens with one method) are one
group; a group holding every member is the global mean itself (merged into μ_0 when μ_0 is
normal).  A sum of independent normals is normal, so the prior of x is unchanged when each
distinct group of ≥ 2 (but not all) members gets one latent value with scale √(Σ τ²) over the
levels that coincide in it, each member one own deviation with scale √(Σ τ²) over its
single-member levels, and μ_0 the scale √(σ_0² + Σ τ²) over the all-member levels.  Only
levels that pool at least two members (and not all of them) are estimated.

**Sampling** (:func:`pooled_tree`): every latent value (μ_0, the group values, the members) is
drawn by data-informed non-centring (:func:`models.priors.whitened_normal`) with a normal
approximation of its likelihood passed up the tree with the current scales — a child with
likelihood N(x̂, 1/P) and prior scale σ tells its parent N(x̂, 1/P + σ²).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.priors import whitened_normal

__all__ = ["PoolingStructure", "pooled_tree"]


@dataclass(frozen=True)
class PoolingStructure:
    """The pooling levels of a set of members after merging (module docstring).

    Attributes
    ----------
    levels : tuple of str
        The levels, top first (e.g. ``("lens", "method", "candidate")``).
    groups : list of str
        Labels of the distinct groups of ≥ 2 (not all) members by depth, parents first, e.g.
        ``"lens data"``, ``"method data/DR"``, ``"lens+method optimization/FT"``.
    group_levels : list of tuple of str
        The levels that coincide in each group (its scale is √(Σ τ²) over them).
    group_parent : array (G,) of int
        Index of the enclosing group, −1 for μ_0.
    group_depth : array (G,) of int
        1 for groups directly under μ_0, 2 below those, ...
    member_group : array (C,) of int
        Index of the smallest group of each member, −1 for μ_0.
    own_levels : list of tuple of str
        The single-member levels of each member, merged into its own deviation.
    global_levels : tuple of str
        Levels whose group holds every member (merged into μ_0 when μ_0 is normal).
    members : list of tuple of int
        Member indices of each group.
    """

    levels: tuple[str, ...]
    groups: list[str]
    group_levels: list[tuple[str, ...]]
    group_parent: np.ndarray
    group_depth: np.ndarray
    member_group: np.ndarray
    own_levels: list[tuple[str, ...]]
    global_levels: tuple[str, ...]
    members: list[tuple[int, ...]]

    @classmethod
    def from_labels(cls, labels: Mapping[str, Sequence[str]],
                    merge_global: bool = True) -> PoolingStructure:
        """From each member's group label at every level (``{level: [label per member]}``,
        top level first; the last level is usually the member itself).

        With ``merge_global`` False an all-member group stays a group (for a non-normal μ_0).
        """
        levels = tuple(labels)
        n = len(next(iter(labels.values())))
        sets: dict[frozenset, list[str]] = {}
        names: dict[frozenset, str] = {}
        own: list[list[str]] = [[] for _ in range(n)]
        glob: list[str] = []
        for level in levels:
            lab = list(labels[level])
            for i in range(n):
                members = frozenset(j for j in range(n) if lab[j] == lab[i])
                if len(members) == 1:
                    own[i].append(level)
                elif merge_global and len(members) == n:
                    if level not in glob:
                        glob.append(level)
                elif level not in sets.setdefault(members, []):
                    sets[members].append(level)
                    names[members] = lab[i]
        parent_set = {s: min((t for t in sets if s < t), key=len, default=None) for s in sets}

        def depth_of(s: frozenset) -> int:
            return 1 if parent_set[s] is None else 1 + depth_of(parent_set[s])

        order = sorted(sets, key=lambda s: (depth_of(s), -len(s), min(s)))
        index = {s: g for g, s in enumerate(order)}
        parent = np.array([-1 if parent_set[s] is None else index[parent_set[s]]
                           for s in order], dtype=np.int64)
        depth = np.array([depth_of(s) for s in order], dtype=np.int64)
        smallest = []
        for i in range(n):
            mine = [s for s in order if i in s]
            smallest.append(index[min(mine, key=len)] if mine else -1)
        return cls(levels, [f"{'+'.join(sets[s])} {names[s]}" for s in order],
                   [tuple(sets[s]) for s in order], parent, depth,
                   np.array(smallest, dtype=np.int64), [tuple(o) for o in own], tuple(glob),
                   [tuple(sorted(s)) for s in order])

    @property
    def used_levels(self) -> list[str]:
        """Levels that have a scale parameter in the model (every level with a role)."""
        used = {lv for lvs in (*self.group_levels, *self.own_levels) for lv in lvs}
        used |= set(self.global_levels)
        return [lv for lv in self.levels if lv in used]

    def describe(self) -> str:
        """The merged structure in words."""
        parts = [f"{g} (scale √Σ of {'+'.join(lv)})" if len(lv) > 1 else f"{g}"
                 for g, lv in zip(self.groups, self.group_levels, strict=True)]
        text = "pooled groups: " + (", ".join(parts) if parts else "none")
        if self.global_levels:
            text += f"; merged into the global mean: {', '.join(self.global_levels)}"
        return text


def _scale(tau: Mapping[str, Any], levels: Sequence[str], extra: Any = None):
    """√(Σ τ_level² (+ extra²)) over ``levels`` (τ itself for one level and no extra)."""
    import pytensor.tensor as pt

    if len(levels) == 1 and extra is None:
        return tau[levels[0]]
    total = sum(tau[lv] ** 2 for lv in levels)
    return pt.sqrt(total + (extra**2 if extra is not None else 0.0))


def pooled_tree(structure: PoolingStructure, tau: Mapping[str, Any], member_prec: Any,
                member_prec_x: Any, *, mu0_mu: float, mu0_sigma: float, member_name: str,
                member_dims: str | None = None, mu0: Any = None,
                prefix: str = "") -> dict[str, Any]:
    """Build μ_0, the group values and the members of a pooled tree (inside a model context).

    Parameters
    ----------
    structure : PoolingStructure
    tau : mapping level → scale tensor
        Every level of ``structure.used_levels``.
    member_prec, member_prec_x : tensors (C,)
        P and P·x̂ of the normal approximation of each member's likelihood (0 without data).
        The messages to the groups and to μ_0 are computed from them with the current
        scales (a child N(x̂, 1/P) with prior s.d. σ tells its parent N(x̂, 1/P + σ²)).
    mu0_mu, mu0_sigma : float
        Normal prior of μ_0 (its scale widened by the all-member levels, see the module
        docstring).
    member_name : str
        Name of the members' free variable (``z_<member_name>``).
    member_dims : str, optional
        Its dimension name (without it, its shape is the number of members).
    mu0 : tensor, optional
        A μ_0 built by the caller (e.g. a Logistic one); then no all-member level may be
        merged into it.
    prefix : str
        Prepended to the names of μ_0 and the group values (``<prefix>mu0``,
        ``<prefix>group_<depth>``), so that one model can hold several trees.

    Returns
    -------
    dict
        ``mu0``, ``group`` (G values, or None), ``pool`` (each member's parent value),
        ``own`` (each member's own scale), ``member`` (the member values).
    """
    import pytensor.tensor as pt

    # every sum over members or groups is a product with a constant 0/1 mask: no indexing in
    # the gradient (advanced-index gradients dominate the cost of a small model)
    st = structure
    n, g_n = len(st.own_levels), len(st.groups)
    levels = st.used_levels
    tau2 = pt.stack([tau[lv] ** 2 for lv in levels])
    own_mask = np.array([[lv in own for lv in levels] for own in st.own_levels], dtype=float)
    own = pt.sqrt((own_mask * tau2[None, :]).sum(axis=1))
    denom = 1.0 + own**2 * member_prec
    q_c, qx_c = member_prec / denom, member_prec_x / denom
    of_member = (st.member_group[:, None] == np.arange(g_n)[None, :]).astype(float)  # (C, G)
    of_group = (st.group_parent[:, None] == np.arange(g_n)[None, :]).astype(float)  # (G, G)
    if g_n:
        g_mask = np.array([[lv in gl for lv in levels] for gl in st.group_levels], dtype=float)
        scale = pt.sqrt((g_mask * tau2[None, :]).sum(axis=1))
    prec, prec_x, q = {}, {}, {}
    for d in sorted(set(st.group_depth.tolist()), reverse=True):  # messages up, deepest first
        idx = np.flatnonzero(st.group_depth == d)
        p = (q_c[:, None] * of_member[:, idx]).sum(axis=0)
        px = (qx_c[:, None] * of_member[:, idx]).sum(axis=0)
        for e, (qe, qxe) in q.items():
            kids = of_group[np.flatnonzero(st.group_depth == e)][:, idx]
            if kids.any():
                p = p + (qe[:, None] * kids).sum(axis=0)
                px = px + (qxe[:, None] * kids).sum(axis=0)
        sc = scale[idx[0]:idx[-1] + 1]  # groups are sorted by depth: a slice
        prec[d], prec_x[d] = p, px
        q[d] = (p / (1.0 + sc**2 * p), px / (1.0 + sc**2 * p))
    if mu0 is None:
        glob = [tau[lv] for lv in st.global_levels]
        sigma0 = pt.sqrt(mu0_sigma**2 + sum(t**2 for t in glob)) if glob else mu0_sigma
        top_c = (st.member_group < 0).astype(float)
        p0, px0 = (q_c * top_c).sum(), (qx_c * top_c).sum()
        if 1 in q:
            p0, px0 = p0 + q[1][0].sum(), px0 + q[1][1].sum()
        mu0 = whitened_normal(f"{prefix}mu0", mu0_mu, sigma0, p0, px0)
    elif st.global_levels:
        raise ValueError("an all-member level cannot be merged into a caller's μ_0")
    values: dict[int, Any] = {}
    for d in sorted(prec):  # values down, parents first
        idx = np.flatnonzero(st.group_depth == d)
        if d == 1:
            parent = mu0 * pt.ones(len(idx))
        else:
            up = np.flatnonzero(st.group_depth == d - 1)
            parent = (values[d - 1][None, :] * of_group[idx][:, up]).sum(axis=1)
        sc = scale[idx[0]:idx[-1] + 1]  # groups are sorted by depth: a slice
        values[d] = whitened_normal(f"{prefix}group_{d}", parent, sc, prec[d], prec_x[d],
                                    shape=len(idx))
    group = pt.concatenate([values[d] for d in sorted(values)]) if values else None
    if group is not None:
        top_c = (st.member_group < 0).astype(float)
        pool = mu0 * top_c + (group[None, :] * of_member).sum(axis=1)
    else:
        pool = mu0 * pt.ones(n)
    member = whitened_normal(member_name, pool, own, member_prec, member_prec_x,
                             dims=member_dims, shape=None if member_dims else n)
    return {"mu0": mu0, "group": group, "pool": pool, "own": own, "member": member}
