"""What the engine asks of a model: the :class:`Model` protocol of a model object and the
:class:`ModelEntry` that registers one (:data:`models.registry.MODELS`).

A model is one module of ``models/`` (one latent quantity) with

- its priors type (a frozen dataclass with ``as_dict()``; the candidate file's
  ``[priors.<name>]`` table and the belief file's ``priors`` setting build it by field name);
- a model class satisfying :class:`Model`: built once for a candidate set and its priors
  (``pm.Data`` containers, compiled once), ``fit(data..., draws=, tune=, chains=, seed=,
  target_accept=, thin=, progressbar=)`` returning an ``xarray.DataTree`` with
  ``posterior``/``sample_stats``;
- its decision draws (posterior draws of the quantities the decision reads, one ``sample``
  dimension);
- optionally the CVU functions it offers (``simulate``/``loglik`` pairs of what executing a
  candidate would show, read by :mod:`belief.posterior.experiments`) and its SBC generator
  (a case builder of :mod:`models.sbc`).

The entry states these by name, so the registry imports no PyMC: the model's module is imported
only when the model is fitted, simulated or checked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["ROLES", "Model", "ModelEntry"]

ROLES = ("belief", "reported", "on_request")
"""How a model's fit enters the belief: ``belief`` — fitted by every ``belief fit`` that has
its data, its check joins the belief's ``reliable`` and its decision draws are q_t's;
``reported`` — fitted when it has data, its draws are reported in q_t but never scored and its
check does not gate the belief (the transfer delta); ``on_request`` — fitted on its own, never
part of q_t (the sensitivity model: candidate generation)."""


@runtime_checkable
class Model(Protocol):
    """A model object: built for a candidate set and its priors, compiled once, fitted many
    times.  ``fit`` takes the model's data (positional and keyword) and the sampler settings
    ``draws``, ``tune``, ``chains``, ``seed``, ``target_accept``, ``thin``, ``progressbar``, and
    returns the posterior as an ``xarray.DataTree``."""

    def fit(self, *data: Any, **sampler: Any) -> Any:
        """Sample the posterior given the data."""
        ...

    def build(self, *data: Any) -> Any:
        """The ``pm.Model`` (with ``pm.Data`` containers)."""
        ...


@dataclass(frozen=True)
class ModelEntry:
    """One model of the engine, by name.

    Attributes
    ----------
    name : str
        Its key: the fit settings' ``priors``, the candidate file's ``[priors.<name>]``, the
        belief file's ``/posterior/<name>``, the belief's ``<name>_*`` attributes.
    priors : type
        Its priors type (defaults: ``priors()``).
    module : str
        The module holding its model class, ``TARGET_ACCEPT``, decision draws and CVU
        functions (imported when first needed).
    model_class : str
        The name of its model class in ``module`` (satisfies :class:`Model`).
    role : str
        One of :data:`ROLES`.
    check_vars : tuple of str
        Posterior variables whose convergence is checked (every parameter the decision reads
        and every hyperparameter; absent ones are skipped).
    seed_stream : int or None
        The fit of seed s uses ``default_rng([s, seed_stream]).integers(2**31)``; None: s
        itself (the gains model).
    fed_by : str
        ``"fitter"``: the fitter's own code builds, feeds and reads it (the five first models:
        each has its own place in q_t); ``"protocol"``: the fitter feeds it through its
        module's functions ``make_model(candidates, priors, max_policies) → Model | None``,
        ``fit_inputs(model, evidence, policy) → dict | None`` (the keyword arguments of
        ``model.fit``; None: no data, not fitted) and ``belief_draws(model, idata, policy,
        rng) → Dataset | None`` (q_t variables over ``sample``, named ``<name>_*``).
    fitter_field : str or None
        The field of :class:`belief.posterior.fitter.BeliefFitter` holding its priors (the
        five first models'; a model registered later has None and its priors are in the
        fitter's ``model_priors`` mapping).
    opt_in : str or None
        A boolean field of the fit settings that must be on for the model to be fitted
        (``costs``: ``belief fit --costs``); None: fitted whenever it has data.
    cvu : tuple of str
        Functions of ``module`` CVU uses to simulate and weight what executing a candidate
        would show (:mod:`belief.posterior.experiments`).
    sbc : str or None
        Its SBC case builder (``f(priors, fit_priors, *, name=, **kwargs) → SBCCase``): a
        function of :mod:`models.sbc`, or ``"<module>:<function>"`` (e.g. in the model's own
        module); None: no SBC case yet.
    sbc_scale : str or None
        The prior scale the SBC loop's mis-specified variant changes in the fitting model.
    optional : bool
        Belief files written before this model may store no priors for it (its defaults).
    stored_defaults : mapping
        Values of priors fields older belief files lack.
    """

    name: str
    priors: type
    module: str
    model_class: str
    role: str = "belief"
    check_vars: tuple[str, ...] = ()
    seed_stream: int | None = None
    fed_by: str = "protocol"
    fitter_field: str | None = None
    opt_in: str | None = None
    cvu: tuple[str, ...] = ()
    sbc: str | None = None
    sbc_scale: str | None = None
    optional: bool = False
    stored_defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"model {self.name!r}: role must be one of {ROLES}, "
                             f"got {self.role!r}")
        if self.fed_by not in ("fitter", "protocol"):
            raise ValueError(f"model {self.name!r}: fed_by must be 'fitter' or 'protocol', "
                             f"got {self.fed_by!r}")
        if (self.sbc is None) != (self.sbc_scale is None):
            raise ValueError(f"model {self.name!r}: give sbc and sbc_scale together")

    # -- its module, imported when needed --------------------------------------------------
    def load(self) -> Any:
        """The model's module."""
        return importlib.import_module(self.module)

    @property
    def target_accept(self) -> float:
        """The module's NUTS target acceptance (``TARGET_ACCEPT``) of a first attempt."""
        return float(self.load().TARGET_ACCEPT)

    @property
    def model_type(self) -> type:
        """The model class (a :class:`Model`)."""
        return getattr(self.load(), self.model_class)

    def cvu_functions(self) -> dict[str, Callable[..., np.ndarray]]:
        """Name → the CVU function of the module (``simulate``, ``loglik``, ...)."""
        mod = self.load()
        return {f: getattr(mod, f) for f in self.cvu}

    def sbc_case(self) -> Callable[..., Any] | None:
        """Its SBC case builder (:mod:`models.sbc`), or None."""
        if self.sbc is None:
            return None
        where, _, name = self.sbc.rpartition(":")
        return getattr(importlib.import_module(where or "models.sbc"), name)

    # -- seeds and priors ------------------------------------------------------------------
    def fit_seed(self, seed: int) -> int:
        """The sampler seed of this model in a fit of seed ``seed`` (``seed_stream``)."""
        if self.seed_stream is None:
            return int(seed)
        return int(np.random.default_rng([seed, self.seed_stream]).integers(2**31))

    def stored_priors(self, stored: Mapping[str, Any]) -> Any:
        """The priors object from a belief file's ``priors`` setting (KeyError when a
        required model's entry is missing, TypeError when a field is not this version's)."""
        entry = stored.get(self.name, {}) if self.optional else stored[self.name]
        return self.priors(**{**self.stored_defaults, **entry})
