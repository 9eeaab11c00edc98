"""Sampling helpers shared by the models: one nutpie call, one slot-to-policy relabelling.

Every model is compiled once (``nutpie.compile_pymc_model``) with fixed-size data slots and
re-sampled with new data through ``with_data``; these two functions are the common tail of
their ``fit`` methods.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from belief.errors import InputError

__all__ = ["sample", "slot_posterior"]


def sample(compiled: Any, *, draws: int, tune: int, chains: int, seed: int,
           target_accept: float, progressbar: bool, thin: int = 1,
           timing: MutableMapping[str, float] | None = None) -> xr.DataTree:
    """NUTS with nutpie on a compiled model (no warm-up draws kept).

    With ``thin`` > 1, ``draws × thin`` draws are sampled per chain and every ``thin``-th is
    kept (the last of each block), so ``draws`` come back with less autocorrelation; a kept
    draw is flagged ``diverging`` when any transition of its block diverged, and
    ``attrs["divergences_all"]`` counts every divergent transition of the run.
    ``timing["sample_s"]`` receives the wall time of the call.

    Ctrl-C stops the sampler and propagates as KeyboardInterrupt.  (``nutpie.sample`` itself
    catches the interrupt and returns the draws made so far — a short, unconverged trace that
    a caller would take for a fit; so the sampler runs in the background here and the wait is
    ours.)
    """
    import nutpie

    if isinstance(thin, bool) or not isinstance(thin, int) or thin < 1:
        raise InputError("thin", f"thin must be an integer >= 1, got {thin!r}")
    t0 = time.perf_counter()
    sampler = nutpie.sample(compiled, draws=draws * thin, tune=tune, chains=chains, seed=seed,
                            progress_bar=progressbar, target_accept=target_accept,
                            save_warmup=False, blocking=False)
    try:
        idata = sampler.wait()
    except BaseException:  # KeyboardInterrupt included: stop the sampler threads, no trace
        sampler.cancel()
        raise
    got = idata["posterior"].sizes.get("draw", 0) if "posterior" in idata.children else 0
    if got < draws * thin:  # an interrupt nutpie caught itself: never a fit
        raise KeyboardInterrupt(f"sampling stopped after {got} of {draws * thin} draws")
    if timing is not None:
        timing["sample_s"] = time.perf_counter() - t0
    stats = idata["sample_stats"].to_dataset() if "sample_stats" in idata.children else None
    total = int(stats["diverging"].sum()) if stats is not None and "diverging" in stats else 0
    if thin > 1:
        idata = _thinned(idata, draws, thin)
    idata.attrs.update({"thin": thin, "divergences_all": total})
    return idata


def _thinned(idata: xr.DataTree, draws: int, thin: int) -> xr.DataTree:
    keep = slice(thin - 1, draws * thin, thin)
    groups = {}
    for name in idata.children:
        ds = idata[name].to_dataset()
        if "draw" not in ds.dims:
            groups[name] = ds
            continue
        kept = ds.isel(draw=keep).assign_coords(draw=np.arange(draws))
        if name == "sample_stats" and "diverging" in ds:
            div = ds["diverging"].transpose("chain", "draw").to_numpy()[:, : draws * thin]
            kept["diverging"] = (("chain", "draw"), div.reshape(div.shape[0], draws, thin)
                                 .any(axis=-1))
        groups[name] = kept
    out = xr.DataTree.from_dict(groups)
    out.attrs.update(idata.attrs)
    return out


def slot_posterior(post: xr.Dataset, names: Sequence[str] | None = None) -> xr.Dataset:
    """The posterior without the non-centred ``z_*`` variables, and, with ``names``, cut to
    the first ``len(names)`` of its ``policy_slot`` entries and relabelled as ``policy``."""
    post = post.drop_vars([v for v in post.data_vars if v.startswith("z_")])
    if names is None:
        return post
    post = post.isel(policy_slot=slice(0, len(names))).rename({"policy_slot": "policy"})
    return post.assign_coords(policy=list(names))
