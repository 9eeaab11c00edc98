"""On-disk cache of nutpie-compiled PyMC models: a model compiled once is loaded in a second.

``nutpie.compile_pymc_model`` spends most of its 10–30 s in numba compiling two C callbacks (the
log density with its gradient, and the "expand" function that computes the traced variables)
that close over the model's data as dynamic globals, which numba cannot cache; PyTensor's own
numba cache only keeps the functions they call.  :func:`compile_model` builds the same two
callbacks from PyTensor's compiled functions with the data read through nutpie's ``user_data``
pointer record instead (no dynamic globals), serialises their machine code with numba's own
``CompileResult`` reduction, and on a later call with the same model rebuilds them in well under
a second.  The sampler sees what nutpie would have built: the same log density (to rounding),
the same initial points, the same data layout.  A loaded entry runs the same machine code in
every process, so fits of one seed that load it agree; a process that compiles the callbacks
can draw differently (see Storage).

Key.  An entry is found by the SHA-256 of

- the model's graph, the one its log density is derived from: every random variable (free
  and observed, with its value variable and transform), potential, deterministic and observed
  value, each transform's backward map and log-Jacobian, and every traced variable
  (``model.unobserved_value_vars``), walked in topological order (random generators by type
  only: their state never enters the density), each node recorded by its
  Op's class and ``__props__`` (an Op without props that has an inner graph, such as PyMC's
  symbolic random variables, by its public attributes and its inner graph keyed the same way;
  any other Op without props by its pickle), the positions of its inputs and its output
  types, with constants by value, data containers by name, type, dtype and shape (their
  values are replaced at sampling time), and other shared variables (dimension lengths) by
  value — so the structure and every prior parameter are in it;
- the model's free-variable order, coordinates, dims and ``check_bounds``;
- the library versions (python, pymc, pytensor, nutpie, numba, llvmlite, numpy), the host CPU
  numba compiles for, PyTensor's ``floatX`` and numba fastmath flag, numba's optimisation
  level (``NUMBA_OPT``), and the source of this module.

Nothing of the key is a hand-kept list of model fields: change a prior, a dimension, a
parameterisation or a library and the key changes.

Storage.  Entries live in ``$BELIEF_CACHE_DIR`` (default ``$XDG_CACHE_HOME/belief`` or
``~/.cache/belief``), sub-folder ``compiled/``, one file ``<key>.nutpie`` each:
a magic line, the SHA-256 of the body, then the body (a numba pickle).  A file is written to a
temporary name and renamed into place, so readers see a complete entry or none, and two
processes filling the same entry at once both leave a valid file (the last rename wins).  An
entry whose checksum, key or layout does not match is ignored with a
:class:`CompileCacheWarning` and rebuilt, never used.  ``BELIEF_COMPILE_CACHE=0`` turns the
cache off: the same callbacks are compiled in the process and nothing is read or written.
A compiled callback calls its PyTensor functions through weak copies that numba links into it;
in the compiling process they bind to the function already loaded there, in a loading process
to the entry's own copy, and under fastmath the two may round differently, so a fit that
compiles (a miss, or the cache off) and one that loads (a hit) can give different draws for
the same seed — measured on the gains model at ``NUMBA_OPT=1``.  (nutpie's own
``compile_pymc_model`` builds other machine code for the same log density — its callbacks
read the data through another path, and LLVM, allowed to reassociate by PyTensor's fastmath
flag, may sum in another order —, so its draws can differ in the last bits, and then a
chain's path, though its posterior is the same.)  The body is a pickle: the
cache folder must be as trusted as the code (it is the user's own, like PyTensor's and
numba's caches).

When a model cannot be cached (an Op that can be neither keyed nor pickled, an Op holding a
local function or lambda — its name does not say what it computes —, compiled code with
dynamic globals, a nutpie whose internals moved: :func:`private_api_problems` checks the
private functions used, :data:`PRIVATE_API`, once per process) the model is compiled by
``nutpie.compile_pymc_model`` as before, with a warning, and nothing is written; its draws
are then draws of the same posterior, not necessarily the same draws.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CompileCacheWarning", "cache_dir", "cache_root", "compile_model",
           "last_compile_seconds", "library_versions", "model_key", "private_api_problems",
           "progress_line", "stats"]

FORMAT = 2
MAGIC = b"belief-compiled-model\n"
SUFFIX = ".nutpie"

#: Counts of what :func:`compile_model` did in this process: ``hit``, ``miss`` (compiled and
#: written), ``invalid`` (an entry was ignored and rebuilt), ``uncached`` (compiled without the
#: cache).
stats: Counter[str] = Counter()
_warned: set[str] = set()


class CompileCacheWarning(UserWarning):
    """A cache entry was ignored (corrupt, truncated, stale) or a model could not be cached."""


class _Uncacheable(Exception):
    pass


# -- where ----------------------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """The folder of compiled-model entries, or None when ``BELIEF_COMPILE_CACHE=0``.

    ``$BELIEF_CACHE_DIR/compiled``, else ``$XDG_CACHE_HOME/belief/compiled``, else
    ``~/.cache/belief/compiled``.
    """
    if os.environ.get("BELIEF_COMPILE_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    return cache_root() / "compiled"


def cache_root() -> Path:
    """belief's cache folder: ``$BELIEF_CACHE_DIR``, else ``$XDG_CACHE_HOME/belief``, else
    ``~/.cache/belief`` (compiled models in ``compiled/``, figures in ``figures/``)."""
    root = os.environ.get("BELIEF_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = str(Path(xdg) / "belief") if xdg else str(Path.home() / ".cache" / "belief")
    return Path(root)


# -- key ------------------------------------------------------------------------------------------
def library_versions() -> dict[str, str]:
    """Everything outside the model that the compiled machine code depends on."""
    import llvmlite
    import numba
    import nutpie
    import pymc
    import pytensor

    return {"python": f"{sys.implementation.name} {sys.version}", "pymc": pymc.__version__,
            "pytensor": pytensor.__version__, "nutpie": nutpie.__version__,
            "numba": numba.__version__, "llvmlite": llvmlite.__version__,
            "numpy": np.__version__, "cpu": _host_cpu(),
            "floatX": str(pytensor.config.floatX),
            "fastmath": str(pytensor.config.numba__fastmath),
            "numba_opt": str(numba.config.OPT),  # NUMBA_OPT: LLVM's optimisation level
            "format": str(FORMAT), "module": _own_source_digest()}


@cache
def _host_cpu() -> str:
    import llvmlite.binding as ll
    import numba

    name = numba.config.CPU_NAME or ll.get_host_cpu_name()
    features = numba.config.CPU_FEATURES or ll.get_host_cpu_features().flatten()
    return f"{sys.platform} {ll.get_process_triple()} {name} {features}"


@cache
def _own_source_digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def model_key(model: Any) -> str:
    """SHA-256 (hex) identifying the compiled form of ``model`` (see the module docstring).

    Raises ``_Uncacheable`` when some Op of the graph can be neither keyed nor pickled.
    """
    return _fingerprint(model)[0]


def _fingerprint(model: Any) -> tuple[str, dict[str, Any]]:
    """(key, data containers by name) of a built ``pm.Model``.

    The graph keyed is the generative one the log density is derived from (every random
    variable, potential, deterministic and observed value; each transform's backward map and
    log-Jacobian on its value variable), not ``model.logp()`` itself: deriving the log density
    costs ≈ 0.5 s on the gains model and is a function of this graph and the library versions.
    """
    rvs = [*model.free_RVs, *model.observed_RVs]
    jacobians = []
    records = []
    for rv in rvs:
        value = model.rvs_to_values[rv]
        transform = model.rvs_to_transforms.get(rv)
        records.append((rv.name, rv in model.observed_RVs, value.name,
                        None if transform is None
                        else (type(transform).__module__, type(transform).__qualname__)))
        if transform is not None:
            jacobians.append(transform.log_jac_det(value, *rv.owner.inputs))
    outputs = [*rvs, *model.potentials, *model.deterministics,
               *(model.rvs_to_values[rv] for rv in model.observed_RVs),
               *model.unobserved_value_vars, *jacobians]
    opaque = _opaque_density(outputs)
    if opaque is not None:  # the density is not a function of this graph: key the density too
        outputs.append(model.logp())
    data_vars = {id(v) for v in model.data_vars}
    h = hashlib.sha256()
    _feed(h, ("versions", tuple(sorted(library_versions().items()))))
    _feed(h, ("variables", tuple(records), len(model.potentials), len(model.deterministics),
              opaque is not None))
    shared = _feed_graph(h, outputs, data_vars)
    _feed(h, ("free", tuple(model.rvs_to_values[rv].name for rv in model.free_RVs)))
    _feed(h, ("coords", tuple((k, tuple(map(repr, v)) if v is not None else None)
                              for k, v in model.coords.items())))
    _feed(h, ("dims", tuple(sorted((k, tuple(v)) for k, v in model.named_vars_to_dims.items()))))
    _feed(h, ("check_bounds", bool(model.check_bounds)))
    return h.hexdigest(), shared


def _opaque_density(outputs: list[Any]) -> str | None:
    """The first Op of the graph (inner graphs included) whose log density is not determined by
    its class, props and inputs — a class made on the fly (``pm.CustomDist``: its ``logp`` is
    attached to a class that cannot be imported by name) or a density registered by a closure
    or outside PyMC and PyTensor — or None.  For such a model the key includes the derived
    ``model.logp()`` as well (what the key was before FORMAT 2)."""
    from pymc.logprob.abstract import _logcdf, _logprob
    from pytensor.graph.op import HasInnerGraph
    from pytensor.graph.traversal import graph_inputs, io_toposort

    seen: set[type] = set()
    stack = [outputs]
    while stack:
        outs = stack.pop()
        for node in io_toposort(list(graph_inputs(outs)), outs):
            op = node.op
            if isinstance(op, HasInnerGraph):
                stack.append(list(op.inner_outputs))
            cls = type(op)
            if cls in seen:
                continue
            seen.add(cls)
            target: Any = sys.modules.get(cls.__module__)
            for part in cls.__qualname__.split("."):
                target = getattr(target, part, None)
            if target is not cls:
                return f"{cls.__module__}.{cls.__qualname__}"
            if not all(_from_libraries(d.dispatch(cls)) for d in (_logprob, _logcdf)):
                return f"{cls.__module__}.{cls.__qualname__}"
    return None


def _from_libraries(obj: Any, depth: int = 3) -> bool:
    """Whether ``obj`` (a registered density) is PyMC's or PyTensor's own code, and so are the
    functions and classes its closure captures (PyMC registers every distribution's density as a
    closure over the distribution's ``logp``; a ``CustomDist`` as one over the user's)."""
    module = getattr(obj, "__module__", None) or ""
    if not (module in ("pymc", "pytensor") or module.startswith(("pymc.", "pytensor."))):
        return False
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value) and (depth == 0 or not _from_libraries(value, depth - 1)):
            return False
    return True


def _feed(h: Any, record: Any) -> None:
    h.update(repr(record).encode())
    h.update(b"\x00")


def _feed_graph(h: Any, outputs: list[Any], data_vars: set[int] | None = None) -> dict[str, Any]:
    """Feed a canonical record of the graph to ``h``; return its shared variables by name."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs, io_toposort
    from pytensor.tensor.random.type import RandomType

    inputs = list(graph_inputs(outputs))
    ids: dict[Any, int] = {}
    shared: dict[str, Any] = {}
    for v in inputs:
        ids[v] = len(ids)
        if isinstance(v.type, RandomType):  # a generator's state never enters the density
            _feed(h, ("rng", _type_key(v.type)))
        elif isinstance(v, Constant):
            _feed(h, ("const", _type_key(v.type), _value_key(v.data)))
        elif isinstance(v, SharedVariable):
            if not v.name or v.name in shared:
                raise _Uncacheable(f"shared variable without a unique name: {v.name!r}")
            shared[v.name] = v
            value = np.asarray(v.get_value(borrow=True))
            if data_vars is not None and id(v) in data_vars:  # replaced at sampling time
                _feed(h, ("data", v.name, _type_key(v.type), value.dtype.str, value.shape))
            else:
                _feed(h, ("shared", v.name, _type_key(v.type), _value_key(value)))
        else:
            _feed(h, ("input", v.name, _type_key(v.type)))
    for node in io_toposort(inputs, outputs):
        _feed(h, ("node", _op_key(node.op, node), tuple(ids[i] for i in node.inputs),
                  tuple(_type_key(o.type) for o in node.outputs)))
        for o in node.outputs:
            ids[o] = len(ids)
    _feed(h, ("outputs", tuple(ids[o] for o in outputs), tuple(o.name for o in outputs)))
    return shared


def _type_key(t: Any) -> tuple:
    return (type(t).__module__, type(t).__qualname__, str(t), str(getattr(t, "dtype", "")),
            repr(getattr(t, "shape", None)))


def _op_key(op: Any, node: Any = None) -> tuple:
    from pytensor.graph.op import HasInnerGraph

    cls = (type(op).__module__, type(op).__qualname__)
    props = getattr(op, "__props__", None)
    inner: Any = None
    if isinstance(op, HasInnerGraph):
        h = hashlib.sha256()
        _feed_graph(h, list(op.inner_outputs))
        inner = h.hexdigest()
    if props is not None:
        body: Any = tuple((p, _value_key(getattr(op, p))) for p in props)
    elif inner is not None:
        body = ("attributes", _graph_op_attributes(op, node))
    else:
        body = ("pickle", _pickle_digest(op))
    return (*cls, body, inner)


def _graph_op_attributes(op: Any, node: Any = None) -> tuple:
    """The record of an Op with an inner graph and no ``__props__`` (an ``OpFromGraph``, e.g.
    PyMC's symbolic random variables such as ``HalfStudentTRV``, or a ``Scan``): its public
    attributes but the inner graph, each by :func:`_value_key`.

    Its pickle is no key: the pickled inner graph carries each variable's auto-generated name,
    a process-wide counter, so the same model built a second time in a process pickled
    differently and missed the cache.  The inner graph is keyed canonically beside this
    record; the private attributes are caches of derived gradient Ops and patterns computed
    from the graph (and filled lazily, so keying them would make the key depend on what the
    process did before) — except the connection pattern, which a user may give and which
    changes the gradient: it is keyed as the Op reports it (given, or derived from the graph;
    a ``Scan`` derives it from its ``node``).
    """
    from pytensor.graph.fg import AbstractFunctionGraph

    record = tuple((name, _value_key(value)) for name, value in sorted(vars(op).items())
                   if not name.startswith("_") and not isinstance(value, AbstractFunctionGraph))
    try:
        pattern = op.connection_pattern(node)
    except Exception as err:  # an Op whose pattern needs its node: not keyable this way
        raise _Uncacheable(f"cannot key the connection pattern of {type(op).__qualname__}: "
                           f"{err}") from err
    return (*record, ("connection_pattern", _value_key(pattern)))


def _value_key(v: Any) -> Any:
    from pytensor.graph.op import Op
    from pytensor.graph.type import Type

    if v is None or isinstance(v, bool | int | float | complex | str | bytes):
        return (type(v).__name__, repr(v))
    if isinstance(v, np.ndarray | np.generic):
        a = np.ascontiguousarray(v)
        if a.dtype.hasobject:
            return ("object-array", a.shape, _pickle_digest(a))
        return ("array", a.dtype.str, a.shape, hashlib.sha256(a.tobytes()).hexdigest())
    if isinstance(v, tuple | list):
        return (type(v).__name__, tuple(_value_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((repr(k), _value_key(x)) for k, x in v.items())))
    if isinstance(v, Op):
        return ("op", _op_key(v))
    if isinstance(v, Type):
        return ("type", _type_key(v))
    if isinstance(v, type) or (callable(v) and hasattr(v, "__qualname__")):
        if "<locals>" in v.__qualname__ or "<lambda>" in v.__qualname__:
            # a closure or lambda: its name does not say what it computes (two made by one
            # factory share it), so nothing that holds one is cached
            raise _Uncacheable(f"cannot key the local function {v.__qualname__}")
        return ("callable", getattr(v, "__module__", ""), v.__qualname__)
    return ("pickle", type(v).__module__, type(v).__qualname__, _pickle_digest(v))


def _pickle_digest(obj: Any) -> str:
    import pickle

    try:
        return hashlib.sha256(pickle.dumps(obj, protocol=4)).hexdigest()
    except Exception as err:
        raise _Uncacheable(f"cannot key {type(obj).__qualname__}: {err}") from err


# -- the private functions the cache relies on ----------------------------------------------------
#: The nutpie and numba internals :func:`compile_model` calls, with the parameters it passes
#: (nutpie has no public way to build a compiled PyMC model from its parts).  Checked once per
#: process by :func:`private_api_problems`; any difference sends every model to nutpie's own
#: ``compile_pymc_model`` with one warning.
PRIVATE_API: dict[str, tuple[str, ...]] = {
    "nutpie.compile_pymc._make_functions": ("model", "mode", "compute_grad", "join_expanded",
                                            "pymc_initial_point_fn"),
    "nutpie.compile_pymc._wrap_with_lock": ("func",),
    "nutpie.compile_pymc._rv_dict_to_flat_array_wrapper": ("fn", "names", "shapes"),
    "nutpie.compile_pymc._prepare_dims_and_coords": ("model", "shape_info",
                                                     "reparameterized_names"),
    "nutpie.compile_pymc.make_user_data": ("shared_var_keys", "shared_data"),
    "nutpie.compile_pymc.CompiledPyMCModel": (
        "_n_dim", "dims", "_coords", "_shapes", "compiled_logp_func", "compiled_expand_func",
        "initial_point_func", "shared_data", "shared_var_keys", "user_data", "n_expanded",
        "shape_info", "logp_func", "expand_func", "reparameterized_names"),
    "numba.core.compiler.CompileResult._rebuild": (
        "target_context", "libdata", "fndesc", "env", "signature", "objectmode", "lifted",
        "typeann", "reload_init", "referenced_envs"),
    "numba.core.compiler.CompileResult._reduce": ("self",),
    "numba.core.ccallback.CFunc.__init__": ("self", "pyfunc", "sig", "locals", "options"),
    "numba.core.ccallback.CFunc._compile_uncached": ("self",),
}


def _resolve(dotted: str) -> Any:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def private_api_problems() -> list[str]:
    """What differs in the private nutpie and numba functions the cache calls
    (:data:`PRIVATE_API`): one line per function that is missing or whose parameters are not
    the expected ones (every expected parameter present, in order), naming the nutpie and
    numba versions; empty when all match."""
    import dataclasses
    import inspect

    import numba
    import nutpie

    problems = []
    for dotted, expected in PRIVATE_API.items():
        try:
            obj = _resolve(dotted)
            if dataclasses.is_dataclass(obj):
                names = [f.name for f in dataclasses.fields(obj)]
                ok = set(expected) <= set(names)
            else:
                names = list(inspect.signature(obj).parameters)
                ok = [n for n in names if n in expected] == list(expected)
        except (ImportError, AttributeError, TypeError, ValueError) as err:
            problems.append(f"{dotted} is gone ({type(err).__name__}: {err})")
            continue
        if not ok:
            problems.append(f"{dotted}{tuple(names)} no longer takes {expected}")
    return [f"{p} (nutpie {nutpie.__version__}, numba {numba.__version__})" for p in problems]


@cache
def _private_api_problem() -> str | None:
    problems = private_api_problems()
    return "; ".join(problems) if problems else None


# -- measured compile times -----------------------------------------------------------------------
TIMES_FILE = "compile_times.json"


def last_compile_seconds(label: str) -> float | None:
    """Seconds the last full compile of the model ``label`` (``"gains"``, ``"exec_risk"``…)
    took on this machine, as :func:`compile_model` measured it (kept beside the entries in
    ``compile_times.json``), or None when none was measured."""
    import json

    folder = cache_dir()
    if folder is None:
        return None
    try:
        value = json.loads((folder / TIMES_FILE).read_text()).get(label)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def progress_line(labels: Iterable[str]) -> str:
    """What a command says while it compiles the models ``labels``: with an estimate only
    when every one of them was fully compiled on this machine before (the sum of their last
    measured compiles, :func:`last_compile_seconds`), else without one.  A model's label
    carries its size (``"gains (12 adaptations)"``, the models' ``compile_label()``), so an
    estimate is always one measured at the same size: compile time grows with the number of
    candidates.  A model already in the cache loads in about a second either way."""
    labels = list(labels)
    names = ", ".join(labels)
    if cache_dir() is None:
        return f"compiling the {names} model(s) (compiled-model cache off)"
    times = [last_compile_seconds(label) for label in labels]
    if all(t is not None for t in times):
        total = sum(t for t in times if t is not None)
        return (f"compiling the {names} model(s): about a second each if cached, else about "
                f"{total:.0f} s (their last full compile at these sizes on this machine)")
    return (f"compiling the {names} model(s): about a second each if cached; a first compile "
            "at these sizes on this machine has no estimate yet (it takes minutes)")


def _record_seconds(folder: Path, label: str | None, seconds: float) -> None:
    import json

    if not label:
        return
    path = folder / TIMES_FILE
    try:
        times = json.loads(path.read_text())
        if not isinstance(times, dict):
            times = {}
    except (OSError, ValueError):
        times = {}
    times[label] = round(seconds, 1)
    tmp = path.with_name(f".{TIMES_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(times, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a measurement is a convenience: never a failure
        pass
    finally:
        tmp.unlink(missing_ok=True)


# -- compile --------------------------------------------------------------------------------------
def compile_model(model: Any, label: str | None = None) -> Any:
    """``nutpie.compile_pymc_model(model)``, loaded from the on-disk cache when possible.

    Parameters
    ----------
    model : pymc.Model
        A built model; its ``pm.Data`` containers may be swapped afterwards with
        ``compiled.with_data(...)`` exactly as with nutpie's own compiled model.

    label : str, optional
        The model's name (``"gains"``…): a full compile's duration is recorded under it
        (:func:`last_compile_seconds`), for the next progress line's estimate.

    Returns
    -------
    nutpie.compile_pymc.CompiledPyMCModel
    """
    folder = cache_dir()
    problem = _private_api_problem()
    if problem is not None:  # said once per process, not once per model
        if problem in _warned:
            stats["uncached"] += 1
            return _nutpie_compile(model)
        _warned.add(problem)
        return _uncached(model, f"nutpie's internals changed: {problem}")
    t0 = time.perf_counter()
    try:
        key, shared = _fingerprint(model)
    except _Uncacheable as err:
        return _uncached(model, f"model cannot be keyed ({err})")
    if folder is None:  # the same callbacks, compiled here, nothing read or written
        try:
            compiled, _ = _compile_entry(model, key, shared)
        except _Uncacheable as err:
            return _uncached(model, str(err))
        stats["uncached"] += 1
        return compiled
    path = folder / f"{key}{SUFFIX}"
    if path.exists():
        try:
            entry = _read_entry(path, key)
            compiled = _assemble(model, entry, shared)
        except Exception as err:
            warnings.warn(f"ignoring compiled-model cache entry {path.name}: {err}; rebuilding",
                          CompileCacheWarning, stacklevel=2)
            stats["invalid"] += 1
        else:
            stats["hit"] += 1
            return compiled
    try:
        compiled, entry = _compile_entry(model, key, shared)
    except _Uncacheable as err:
        return _uncached(model, str(err))
    try:
        _write_entry(path, entry)
    except OSError as err:
        warnings.warn(f"could not write the compiled-model cache entry {path}: {err}",
                      CompileCacheWarning, stacklevel=2)
    stats["miss"] += 1
    _record_seconds(folder, label, time.perf_counter() - t0)
    return compiled


def _nutpie_compile(model: Any) -> Any:
    import nutpie

    return nutpie.compile_pymc_model(model)


def _uncached(model: Any, reason: str) -> Any:
    warnings.warn(f"compiling without the compiled-model cache: {reason}", CompileCacheWarning,
                  stacklevel=3)
    stats["uncached"] += 1
    return _nutpie_compile(model)


def _initial_point_fn(model: Any) -> Any:
    """nutpie's default: support points with U(−1, 1) jitter on every free variable."""
    from nutpie import compile_pymc as cp
    from pymc.initial_point import make_initial_point_fn

    fn = make_initial_point_fn(model=model, overrides=None, default_strategy="support_point",
                               jitter_rvs=set(model.free_RVs), return_transformed=True)
    return cp._wrap_with_lock(fn)


#: Whether PyTensor's own numba disk cache may serve the functions a model is made of while
#: :func:`compile_model` compiles it.  Off: a function loaded from that cache is object code
#: that LLVM cannot inline into the callbacks, so the machine code — and, with PyTensor's
#: fastmath, the last bits of a sum and then the draws of a seed — would depend on what an
#: earlier process left in it.  Off, every compile of a model builds the same code from the
#: same IR (and PyTensor skips the wrapper it adds to make each small function cacheable).
PYTENSOR_NUMBA_CACHE = False


def _compile_entry(model: Any, key: str, shared: dict[str, Any]) -> tuple[Any, dict]:
    """Compile ``model`` the way nutpie does, with cacheable callbacks; return it and its entry."""
    from pytensor import config

    with config.change_flags(numba__cache=PYTENSOR_NUMBA_CACHE):
        return _compile_entry_here(model, key, shared)


def _compile_entry_here(model: Any, key: str, shared: dict[str, Any]) -> tuple[Any, dict]:
    try:
        from nutpie import compile_pymc as cp

        n_dim, n_expanded, logp_pt, expand_pt, _, shape_info, reparameterized = (
            cp._make_functions(model, mode="NUMBA", compute_grad=True, join_expanded=True,
                               pymc_initial_point_fn=None))  # only wrapped; see _assemble
    except Exception as err:
        raise _Uncacheable(f"nutpie internals changed ({type(err).__name__}: {err})") from err
    order: list[str] = []
    for v in [*logp_pt.get_shared(), *expand_pt.get_shared()]:
        if v.name not in shared or shared[v.name] is not v:
            raise _Uncacheable(f"compiled function uses shared variable {v.name!r} that is not "
                               "part of the keyed graph")
        if v.name not in order:
            order.append(v.name)
    entry = {"format": FORMAT, "key": key, "n_dim": n_dim, "n_expanded": n_expanded,
             "shape_info": shape_info, "reparameterized": reparameterized, "shared": order,
             "logp_shared": [v.name for v in logp_pt.get_shared()],
             "expand_shared": [v.name for v in expand_pt.get_shared()], "payload": {}}
    jit = {"logp": logp_pt.vm.jit_fn, "expand": expand_pt.vm.jit_fn}
    try:
        return _assemble(model, entry, shared, jit=jit), entry
    except _Uncacheable:
        raise
    except Exception as err:  # nutpie's or numba's internals moved: nutpie compiles it instead
        raise _Uncacheable(f"cannot build cacheable callbacks ({type(err).__name__}: {err})"
                           ) from err


class _CallbackLibrary:
    """A loaded C callback: its address (what nutpie uses) and the code keeping it alive."""

    def __init__(self, cres: Any) -> None:
        self.cres = cres
        self.address = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)


def _assemble(model: Any, entry: dict, shared: dict[str, Any],
              jit: dict[str, Any] | None = None) -> Any:
    """nutpie's CompiledPyMCModel from an entry (compiling its callbacks when ``jit`` given)."""
    from numba.core.compiler import CompileResult
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    from nutpie import compile_pymc as cp

    missing = [n for n in entry["shared"] if n not in shared]
    if missing:
        raise ValueError(f"the entry's data containers {missing} are not in the model")
    keys = {shared[n]: f"v{i}" for i, n in enumerate(entry["shared"])}
    shared_data = {k: np.array(v.get_value(), order="C", copy=True) for v, k in keys.items()}
    for value in shared_data.values():
        value.flags.writeable = False
    user_data = cp.make_user_data(keys, shared_data)
    layout = _layout(user_data, shared_data)
    if jit is None and entry.get("layout") != layout:
        raise ValueError("the data layout differs from the one the entry was compiled for")
    entry["layout"] = layout
    callbacks = {}
    with global_compiler_lock:
        cpu_target.target_context.refresh()
        for kind in ("logp", "expand"):
            if jit is None:
                cres = CompileResult._rebuild(cpu_target.target_context, *entry["payload"][kind])
            else:
                names = [keys[shared[n]] for n in entry[f"{kind}_shared"]]
                cres = _compile_callback(kind, entry, names, layout, jit[kind])
                entry["payload"][kind] = cres._reduce()
            callbacks[kind] = _CallbackLibrary(cres)
    shape_info = entry["shape_info"]
    n_free = len(model.free_RVs)
    initial_point = cp._rv_dict_to_flat_array_wrapper(
        _initial_point_fn(model), names=shape_info[0][:n_free], shapes=shape_info[2][:n_free])
    dims, coords = cp._prepare_dims_and_coords(model, shape_info, entry["reparameterized"])
    return cp.CompiledPyMCModel(
        _n_dim=entry["n_dim"], dims=dims, _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=callbacks["logp"], compiled_expand_func=callbacks["expand"],
        initial_point_func=initial_point, shared_data=shared_data, shared_var_keys=keys,
        user_data=user_data, n_expanded=entry["n_expanded"], shape_info=shape_info,
        logp_func=None, expand_func=None, reparameterized_names=entry["reparameterized"])


def _layout(user_data: np.ndarray, shared_data: dict[str, np.ndarray]) -> dict:
    """uint64 word offsets of each container's data pointer and shape in nutpie's record."""
    record = user_data.dtype
    if record.itemsize % 8:
        raise _Uncacheable("nutpie's user_data record is not made of 64-bit words")
    base = record.fields["shared"][1]
    sub = record["shared"]
    words = {}
    for name, value in shared_data.items():
        data = base + sub.fields["data"][1] + sub["data"].fields[name][1]
        shape = base + sub.fields["shape"][1] + sub["shape"].fields[name][1]
        words[name] = (data // 8, shape // 8, value.ndim, value.dtype.str)
    return {"words": record.itemsize // 8, "fields": words}


def _compile_callback(kind: str, entry: dict, names: Iterable[str], layout: dict,
                      jit_fn: Any) -> Any:
    """Compile nutpie's logp or expand C callback for ``jit_fn`` (no dynamic globals)."""
    import numba
    import pytensor.link.numba.cache  # noqa: F401 - gives numba functions random, unique ids
    from numba.core.ccallback import CFunc

    # The symbols of an entry must never clash with another entry's loaded into the same
    # process; PyTensor's numba cache module replaces numba's per-process function counter by
    # random 128-bit ids (numba/numba#10486), so importing it first makes them unique.
    n_dim, n_expanded = entry["n_dim"], entry["n_expanded"]
    unpack, args = [], ["x"]
    for i, name in enumerate(names):
        data, shape, ndim, dtype = layout["fields"][name]
        dims = "".join(f"ud[{shape + j}], " for j in range(ndim))
        unpack.append(f"        a{i} = numba.carray(_void_ptr(ud[{data}]), ({dims}), "
                      f"np.dtype({np.dtype(dtype).name!r}))")
        args.append(f"a{i}")
    body = "\n".join(unpack)
    call = ", ".join(args)
    if kind == "logp":
        src = f"""
def logp_callback(dim, x_, out_, logp_, user_data_):
    if dim != {n_dim}:
        return -1
    try:
        ud = numba.carray(user_data_, ({layout['words']},), np.uint64)
        x = numba.carray(x_, ({n_dim},))
        out = numba.carray(out_, ({n_dim},))
        logp = numba.carray(logp_, ())
{body}
        logp_val, grad = jit_fn({call})
        logp[()] = logp_val
        out[...] = grad
        if not np.all(np.isfinite(out)):
            return 3
        if not np.isfinite(logp_val):
            return 4
    except Exception:
        return 1
    return 0
"""
    else:
        src = f"""
def expand_callback(dim, expanded, x_, out_, user_data_):
    if dim != {n_dim}:
        return -1
    if expanded != {n_expanded}:
        return -1
    try:
        ud = numba.carray(user_data_, ({layout['words']},), np.uint64)
        x = numba.carray(x_, ({n_dim},))
        out = numba.carray(out_, ({n_expanded},))
{body}
        (values,) = jit_fn({call})
        out[...] = values
    except Exception:
        return -2
    return 0
"""
    env = {"__name__": __name__, "numba": numba, "np": np, "_void_ptr": _void_ptr(),
           "jit_fn": jit_fn}
    exec(compile(src, f"<belief compiled {kind} callback>", "exec"), env)
    sig = _signatures()[kind]
    cres = CFunc(env[f"{kind}_callback"], (sig.args, sig.return_type), {}, {})._compile_uncached()
    if cres.library.has_dynamic_globals:
        raise _Uncacheable("the compiled model refers to dynamic globals (large constants?)")
    return cres


@cache
def _signatures() -> dict[str, Any]:
    from numba import types as t

    ptr = t.CPointer(t.double)
    return {"logp": t.int64(t.uint64, ptr, ptr, ptr, t.voidptr),
            "expand": t.int64(t.uint64, t.uint64, ptr, ptr, t.voidptr)}


@cache
def _void_ptr() -> Any:
    """A numba intrinsic turning an integer address into a ``void*``."""
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def void_ptr(typingctx, src):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(src), codegen

    return void_ptr


# -- entries --------------------------------------------------------------------------------------
def _write_entry(path: Path, entry: dict) -> None:
    """Write ``entry`` atomically (temporary file in the same folder, fsync, rename)."""
    from numba.core.serialize import dumps

    body = dumps(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read_entry(path: Path, key: str) -> dict:
    """The entry at ``path``; ValueError unless it is complete, intact and for ``key``."""
    import pickle

    raw = path.read_bytes()
    head = len(MAGIC) + 65
    if not raw.startswith(MAGIC) or len(raw) <= head or raw[head - 1:head] != b"\n":
        raise ValueError("not a compiled-model entry (truncated or foreign file)")
    digest, body = raw[len(MAGIC):head - 1].decode("ascii", "replace"), raw[head:]
    if hashlib.sha256(body).hexdigest() != digest:
        raise ValueError("checksum mismatch (truncated or corrupt)")
    entry = pickle.loads(body)  # the user's own cache folder (see the module docstring)
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
        raise ValueError("entry belongs to another model or cache format")
    return entry
