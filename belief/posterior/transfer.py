"""Per-policy transfer delta δ_J(π) = J_real − J_sim and G_J(π) = |δ_J(π)| in the belief.

The transfer model (:mod:`models.transfer`) is fitted separately from the gains; its draws join
q_t as ``delta_j`` and ``g_j`` over (``sample``, ``transfer_policy``) — a dimension of its own so
that it never collides with other models' policy axes — with the coordinate
``transfer_rows`` (evaluations behind each policy; 0 means the value is the pooled prediction
for a policy without a sim/real evaluation).  The sample axis has the same length as the gain
draws, but the two models are independent: pairing draw i of δ_J with draw i of ΔJ carries no
joint information.

δ_J is reported, never scored: it does not enter U0, MV, CVU or Q.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["transfer_attrs", "with_transfer"]


def with_transfer(belief: xr.Dataset, draws: xr.Dataset, rows: np.ndarray,
                  reliability: dict[str, float | int | str] | None = None) -> xr.Dataset:
    """q_t with ``delta_j`` and ``g_j`` draws added.

    Parameters
    ----------
    belief : Dataset
        q_t from :func:`belief.posterior.belief_state.make_belief`.
    draws : Dataset
        ``delta_j`` and ``g_j`` over (``sample``, ``policy``) from
        :meth:`models.transfer.TransferModel.decision_draws`.
    rows : array over ``policy``
        Transfer evaluations behind each policy.
    reliability : dict, optional
        Convergence attributes of the transfer fit (stored with prefix ``transfer_``).
    """
    n = belief.sizes["sample"]
    if draws.sizes["sample"] != n:
        raise InputError("transfer draws", f"{draws.sizes['sample']} samples, but the belief has "
                                           f"{n}: fit the transfer model with the same draws × "
                                           "chains as the gains")
    tr = draws[["delta_j", "g_j"]].rename({"policy": "transfer_policy"})
    tr = tr.drop_vars("sample").assign_coords(
        transfer_rows=("transfer_policy", np.asarray(rows, dtype=int)))
    out = belief.assign(delta_j=tr["delta_j"], g_j=tr["g_j"])
    out["delta_j"].attrs.update({"long_name": "transfer delta δ_J = J_real − J_sim (positive: "
                                              "real is better)"})
    out["g_j"].attrs.update({"long_name": "performance discrepancy G_J = |δ_J|"})
    if reliability:
        out.attrs.update({f"transfer_{k}": v for k, v in reliability.items()})
    return out


def transfer_attrs(belief: xr.Dataset, policy: str, prob: float = 0.9) -> dict[str, float | str]:
    """δ_J and G_J of ``policy`` as flat attributes: mean and equal-tailed ``prob`` interval.

    Keys ``delta_j_mean``, ``delta_j_lo90``, ``delta_j_hi90``, ``g_j_mean``, ``g_j_lo90``,
    ``g_j_hi90`` (90 for ``prob=0.9``), ``delta_j_source`` and, when the fit was checked,
    ``delta_j_reliable`` with its reason; empty when the belief has no
    transfer draws, only ``delta_j_source`` when ``policy`` has none.
    """
    if "delta_j" not in belief:
        return {}
    policies = [str(p) for p in belief["transfer_policy"].values]
    if policy not in policies:
        return {"delta_j_source": f"policy {policy!r} not in the transfer fit"}
    tag = f"{100 * prob:g}"
    edge = (1 - prob) / 2
    out: dict[str, float | str] = {}
    for name in ("delta_j", "g_j"):
        da = belief[name].sel(transfer_policy=policy)
        # ArviZ's equal-tailed interval (arviz_stats.eti): numpy's linear quantiles
        lo, hi = np.quantile(da.values, [edge, 1 - edge], axis=-1, method="linear")
        out[f"{name}_mean"] = float(da.mean("sample"))
        out[f"{name}_lo{tag}"] = float(lo)
        out[f"{name}_hi{tag}"] = float(hi)
    rows = int(belief["transfer_rows"].sel(transfer_policy=policy))
    out["delta_j_source"] = (f"{rows} sim/real evaluation(s) of {policy}" if rows else
                             f"pooled prediction: {policy} has no sim/real evaluation")
    if "transfer_reliable" in belief.attrs:
        out["delta_j_reliable"] = int(belief.attrs["transfer_reliable"])
        out["delta_j_reliability_reason"] = str(belief.attrs.get("transfer_reason", ""))
    return out
