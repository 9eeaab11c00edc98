"""PyMC models of the latent quantities, each knowing nothing about allocation.

Each model follows spec → build → fit: a small spec object (structure and priors), ``build()``
returning a ``pm.Model`` with ``pm.Data`` containers, and ``fit(...)`` returning an
``xarray.DataTree``.  For the allocator each model also offers posterior draws of its decision
quantities.  What the engine reads of a model is the protocol of :mod:`models.protocol`; the
models are registered, one line each, in :data:`models.registry.MODELS`.
"""
