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

__all__ = ["sample", "sample_arrays", "slot_posterior"]


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
    _check_thin(thin)
    t0 = time.perf_counter()
    idata = _run(compiled, draws=draws * thin, tune=tune, chains=chains, seed=seed,
                 target_accept=target_accept, progressbar=progressbar, raw=False)
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


def _check_thin(thin: Any) -> None:
    if isinstance(thin, bool) or not isinstance(thin, int) or thin < 1:
        raise InputError("thin", f"thin must be an integer >= 1, got {thin!r}")


def _run(compiled: Any, *, draws: int, tune: int, chains: int, seed: int,
         target_accept: float, progressbar: bool, raw: bool) -> Any:
    import nutpie

    sampler = nutpie.sample(compiled, draws=draws, tune=tune, chains=chains, seed=seed,
                            progress_bar=progressbar, target_accept=target_accept,
                            save_warmup=False, blocking=False, return_raw_trace=raw)
    try:
        return sampler.wait()
    except BaseException:  # KeyboardInterrupt included: stop the sampler threads, no trace
        sampler.cancel()
        raise


def sample_arrays(compiled: Any, var_names: Sequence[str], *, draws: int, tune: int,
                  chains: int, seed: int, target_accept: float, thin: int = 1,
                  timing: MutableMapping[str, float] | None = None) -> xr.DataTree:
    """:func:`sample` for callers that need only some posterior draws (exact CVU refits).

    The same nutpie run (same seed → the same draws as :func:`sample`), read straight from
    nutpie's raw Arrow trace into a ``posterior`` group holding only ``var_names`` (those the
    model has), with ``attrs["divergences_all"]``; no ArviZ conversion, no ``sample_stats``.
    """
    _check_thin(thin)
    t0 = time.perf_counter()
    results = _run(compiled, draws=draws * thin, tune=tune, chains=chains, seed=seed,
                   target_accept=target_accept, progressbar=False, raw=True)
    import pyarrow

    draw_batches, stat_batches = results.get_arrow_trace()

    def column(batch: Any, name: str) -> np.ndarray:
        col = pyarrow.array(batch.column(name))
        if hasattr(col, "flatten"):
            col = col.flatten()
        return np.asarray(col.to_numpy(False))

    coords = {k: list(v) for k, v in compiled.coords.items()}
    wanted = set(var_names)
    per_var: dict[str, list[np.ndarray]] = {}
    dims: dict[str, list[str]] = {}
    divergences = 0
    for batch, stat in zip(draw_batches, stat_batches, strict=True):
        tuning = column(stat, "tuning").astype(bool)
        post = ~tuning
        divergences += int(column(stat, "diverging")[post].sum())
        n = int(post.sum())
        if n < draws * thin:  # an interrupt nutpie caught itself: never a fit
            raise KeyboardInterrupt(f"sampling stopped after {n} of {draws * thin} draws")
        kept = np.flatnonzero(post)[thin - 1: draws * thin: thin]
        for name in batch.column_names:
            if name not in wanted:
                continue
            meta = batch.column(name).field.metadata or {}
            shape = [int(x) for x in meta.get(b"shape", b"").decode().split(",") if x]
            dims[name] = [d for d in meta.get(b"dims", b"").decode().split(",") if d]
            values = column(batch, name)
            per_var.setdefault(name, []).append(values.reshape(batch.num_rows, *shape)[kept])
    data = {name: (["chain", "draw", *dims[name]], np.stack(arrs))
            for name, arrs in per_var.items()}
    used = {d for _, (ds, _) in data.items() for d in ds[2:]}
    post_ds = xr.Dataset(data, coords={"chain": np.arange(len(draw_batches)),
                                       "draw": np.arange(draws),
                                       **{d: coords[d] for d in used if d in coords}})
    if timing is not None:
        timing["sample_s"] = time.perf_counter() - t0
    out = xr.DataTree.from_dict({"posterior": post_ds})
    out.attrs.update({"thin": thin, "divergences_all": divergences})
    return out


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
