"""The models as the layers above the posterior see them: their priors (from a candidate file,
from Python, from a belief file), read from the model registry (:data:`models.registry.MODELS`)
so that no workflow module names a model or imports ``models``; and what they share of the
models' machinery (the compile cache's folder and progress line, the population summary of the
execution risk).

Priors are resolved in order: each model's defaults, then the candidate file's
``[priors.<model>]`` tables, then the Python mapping (model → priors object, or a mapping of
its fields); a name that is no registered model is refused naming the closest one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from belief.errors import InputError
from models.compile_cache import cache_root, progress_line
from models.exec_risk import population_risk
from models.priors import priors_from_dict
from models.registry import MODELS, model_names, prior_classes, refuse_unknown_models

__all__ = ["cache_root", "check_stored_priors", "model_names", "population_risk", "priors_setting",
           "progress_line", "refuse_unknown_models", "resolve_priors", "stored_priors"]


def resolve_priors(file_priors: Mapping[str, Any] | None = None, source: str | None = None,
                   priors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The priors object of every registered model: defaults, then ``file_priors`` (the
    candidate file ``source``'s ``[priors.<model>]`` tables), then ``priors``.

    Raises
    ------
    InputError
        Naming ``<source> [priors.<model>]`` (or ``priors[<model>]``), the key and the
        allowed values; an unknown model naming the closest registered one.
    """
    classes = prior_classes()
    out = {name: cls() for name, cls in classes.items()}
    for from_file, given in ((True, file_priors or {}), (False, priors or {})):
        refuse_unknown_models(given, f"{source} [priors]" if from_file else "priors")
        for name, value in given.items():
            if isinstance(value, classes[name]):
                out[name] = value
                continue
            table = f"{source} [priors.{name}]" if from_file else f"priors[{name!r}]"
            out[name] = priors_from_dict(classes[name], value, table)
    return out


def priors_setting(fitter: Any) -> dict[str, dict[str, Any]]:
    """What a belief file stores of the priors: model name → ``as_dict()`` of the fitter's
    priors (:meth:`belief.posterior.fitter.BeliefFitter.priors_of`), in registry order."""
    return {m.name: fitter.priors_of(m.name).as_dict() for m in MODELS}


def stored_priors(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Model name → priors object from a belief file's ``priors`` setting (older files: the
    registry's ``optional`` and ``stored_defaults``).  KeyError or TypeError when the setting
    does not fit this version (:func:`check_stored_priors` words it)."""
    return {m.name: m.stored_priors(stored) for m in MODELS}


def check_stored_priors(stored: Mapping[str, Any], label: str) -> None:
    """Refuse (InputError naming ``label`` and the model) stored priors that do not build this
    version's priors objects."""
    for m in MODELS:
        try:
            m.stored_priors(stored)
        except (KeyError, TypeError) as err:
            raise InputError(label, f"stored {m.name} priors do not fit this version "
                                    f"({type(err).__name__}: {err})") from None
