"""Order effects γ_{a→m} in q_t: complements and substitutes, with intervals.

The gains model (:mod:`models.gains`, "Order effects") gives every later execution of m after
an actor a (an adaptation on the lineage, or an executed model update) the additive logit
term γ_{a→m}.  q_t keeps its joint draws (``gains_gamma``, sample × actor × candidate) with
``gains_gamma_pair``, ``gains_gamma_evidence`` and ``gains_gamma_stated``; this module reads
them into a table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["ORDER_COLUMNS", "order_effects_table"]

ORDER_COLUMNS = ("source", "target", "mean", "sd", "lower", "upper", "p_positive", "stated",
                 "evidence", "kind")


def order_effects_table(belief: xr.Dataset, interval: float = 0.9,
                        evidenced_only: bool = False) -> pd.DataFrame:
    """One row per order effect γ_{a→m} of the belief (empty without order effects).

    Columns :data:`ORDER_COLUMNS`: ``mean``, ``sd`` and the central ``interval`` bounds
    ``lower``/``upper`` of γ's posterior (logit scale), ``p_positive`` = Pr(γ > 0 | D);
    ``stated`` (the prior was stated in the candidate file), ``evidence`` (how many evaluated
    executions of m had a in their history) and ``kind``: "complement" when the interval lies
    above 0, "substitute" below it, "unclear" otherwise.  ``evidenced_only`` keeps the rows
    with evidence or a stated prior.
    """
    if "gains_gamma" not in belief:
        return pd.DataFrame(columns=list(ORDER_COLUMNS))
    g = belief["gains_gamma"].transpose("sample", "actor", "candidate").values
    pair = belief["gains_gamma_pair"].transpose("actor", "candidate").values > 0
    ev = belief["gains_gamma_evidence"].transpose("actor", "candidate").values
    stated = belief["gains_gamma_stated"].transpose("actor", "candidate").values > 0
    actors = [str(a) for a in belief["actor"].values]
    cands = [str(c) for c in belief["candidate"].values]
    lo_q, hi_q = (1 - interval) / 2, (1 + interval) / 2
    rows = []
    for i, a in enumerate(actors):
        for j, m in enumerate(cands):
            if not pair[i, j] or (evidenced_only and ev[i, j] == 0 and not stated[i, j]):
                continue
            x = g[:, i, j]
            lo, hi = np.quantile(x, [lo_q, hi_q])
            kind = "complement" if lo > 0 else "substitute" if hi < 0 else "unclear"
            rows.append({"source": a, "target": m, "mean": float(x.mean()),
                         "sd": float(x.std()), "lower": float(lo), "upper": float(hi),
                         "p_positive": float((x > 0).mean()), "stated": bool(stated[i, j]),
                         "evidence": int(ev[i, j]), "kind": kind})
    return pd.DataFrame(rows, columns=list(ORDER_COLUMNS))
