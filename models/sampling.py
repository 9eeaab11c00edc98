"""Sampling helpers shared by the models: one nutpie call, one slot-to-policy relabelling.

Every model is compiled once (``nutpie.compile_pymc_model``) with fixed-size data slots and
re-sampled with new data through ``with_data``; these two functions are the common tail of
their ``fit`` methods.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping, Sequence
from typing import Any

import xarray as xr

__all__ = ["sample", "slot_posterior"]


def sample(compiled: Any, *, draws: int, tune: int, chains: int, seed: int,
           target_accept: float, progressbar: bool,
           timing: MutableMapping[str, float] | None = None) -> xr.DataTree:
    """NUTS with nutpie on a compiled model (no warm-up draws kept).

    ``timing["sample_s"]`` receives the wall time of the call.

    Ctrl-C stops the sampler and propagates as KeyboardInterrupt.  (``nutpie.sample`` itself
    catches the interrupt and returns the draws made so far — a short, unconverged trace that
    a caller would take for a fit; so the sampler runs in the background here and the wait is
    ours.)
    """
    import nutpie

    t0 = time.perf_counter()
    sampler = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                            progress_bar=progressbar, target_accept=target_accept,
                            save_warmup=False, blocking=False)
    try:
        idata = sampler.wait()
    except BaseException:  # KeyboardInterrupt included: stop the sampler threads, no trace
        sampler.cancel()
        raise
    if timing is not None:
        timing["sample_s"] = time.perf_counter() - t0
    return idata


def slot_posterior(post: xr.Dataset, names: Sequence[str] | None = None) -> xr.Dataset:
    """The posterior without the non-centred ``z_*`` variables, and, with ``names``, cut to
    the first ``len(names)`` of its ``policy_slot`` entries and relabelled as ``policy``."""
    post = post.drop_vars([v for v in post.data_vars if v.startswith("z_")])
    if names is None:
        return post
    post = post.isel(policy_slot=slice(0, len(names))).rename({"policy_slot": "policy"})
    return post.assign_coords(policy=list(names))
