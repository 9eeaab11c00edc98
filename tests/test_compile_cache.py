"""The on-disk compiled-model cache (models/compile_cache.py).

Every test points the cache at its own temporary folder.  A "recompile" is observed through
``compile_cache.stats`` (``miss`` = compiled and written, ``hit`` = loaded) and through the
number of entry files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from models import compile_cache
from models.compile_cache import CompileCacheWarning, compile_model

pm = pytest.importorskip("pymc")
nutpie = pytest.importorskip("nutpie")

ROOT = Path(__file__).resolve().parents[1]


def tiny(sigma: float = 1.0, n: int = 3, extra: bool = False):
    """A two-parameter model with one data container (compiles in a few seconds)."""
    with pm.Model(coords={"k": list(range(n))}) as model:
        y = pm.Data("y", np.linspace(-1.0, 1.0, n), dims="k")
        mu = pm.Normal("mu", 0.0, sigma)
        tau = pm.HalfNormal("tau", 1.0)
        if extra:
            pm.Deterministic("twice_mu", 2.0 * mu)
        pm.Normal("obs", mu, tau, observed=y, dims="k")
    return model


def draws(compiled, seed: int = 3, **data) -> dict[str, np.ndarray]:
    if data:
        compiled = compiled.with_data(**data)
    idata = nutpie.sample(compiled, draws=50, tune=50, chains=2, seed=seed, progress_bar=False)
    post = idata["posterior"]
    return {v: post[v].values for v in post.data_vars}


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "compiled").glob("*.nutpie"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BELIEF_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("BELIEF_COMPILE_CACHE", raising=False)
    compile_cache.stats.clear()
    return tmp_path


def test_cache_folder_is_configurable(tmp_path, monkeypatch):
    monkeypatch.delenv("BELIEF_CACHE_DIR", raising=False)
    monkeypatch.delenv("BELIEF_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.cache_dir() == tmp_path / "xdg" / "belief" / "compiled"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.cache_dir() == tmp_path / "home" / ".cache" / "belief" / "compiled"
    monkeypatch.setenv("BELIEF_CACHE_DIR", str(tmp_path / "mine"))
    assert compile_cache.cache_dir() == tmp_path / "mine" / "compiled"
    monkeypatch.setenv("BELIEF_COMPILE_CACHE", "0")
    assert compile_cache.cache_dir() is None


def test_a_hit_samples_exactly_what_nutpie_samples(cache):
    model = tiny()
    first = compile_model(model)
    assert compile_cache.stats == {"miss": 1} and len(entries(cache)) == 1
    again = compile_model(tiny())  # a fresh build of the same model: loaded, not compiled
    assert compile_cache.stats == {"miss": 1, "hit": 1}
    reference = nutpie.compile_pymc_model(model)
    new_y = np.array([0.5, 2.0, 3.5])
    for d in (None, new_y):  # the default data and data swapped in with with_data
        kw = {} if d is None else {"y": d}
        expected = draws(reference, **kw)
        for compiled in (first, again):
            got = draws(compiled, **kw)
            assert got.keys() == expected.keys()
            for v in expected:  # same callbacks, same initial points: bit-identical draws
                np.testing.assert_array_equal(got[v], expected[v], err_msg=v)


def test_structure_change_recompiles(cache):
    compile_model(tiny(n=3))
    compile_model(tiny(n=4))  # another dimension length
    compile_model(tiny(n=3, extra=True))  # another traced variable
    assert compile_cache.stats == {"miss": 3} and len(entries(cache)) == 3
    compile_model(tiny(n=4))
    assert compile_cache.stats["hit"] == 1


def test_prior_change_recompiles_and_another_models_entry_is_never_used(cache):
    a = compile_cache.model_key(tiny(sigma=1.0))
    assert compile_cache.model_key(tiny(sigma=1.0 + 1e-12)) != a  # any change of a prior
    compile_model(tiny(sigma=1.0))
    compile_model(tiny(sigma=2.0))
    assert compile_cache.stats == {"miss": 2} and len(entries(cache)) == 2
    folder = cache / "compiled"
    one, two = (folder / f"{compile_cache.model_key(tiny(sigma=s))}.nutpie" for s in (1.0, 2.0))
    one.write_bytes(two.read_bytes())  # sigma=1's file now holds sigma=2's (valid) entry
    with pytest.warns(CompileCacheWarning, match="another model"):
        compile_model(tiny(sigma=1.0))
    assert compile_cache.stats == {"miss": 3, "invalid": 1}


def test_transforms_potentials_and_observations_are_in_the_key(cache, monkeypatch):
    """The key is the generative graph, not the derived log density: everything the density
    adds beyond it (a transform, a potential, which variable is observed) must be keyed."""

    from pymc.distributions.transforms import Interval

    def model(transform=True, potential=0.0, observe=True, upper=None):
        with pm.Model() as m:
            y = pm.Data("y", np.array([0.1, 0.2]))
            mu = pm.Normal("mu", 0.0, 1.0)
            kw = {} if transform else {"default_transform": None}
            if upper is not None:  # the same variable, only its transform's bound differs
                kw = {"default_transform": Interval(0.0, upper)}
            tau = pm.HalfNormal("tau", 1.0, **kw)
            if potential:
                pm.Potential("extra", potential * mu**2)
            pm.Normal("obs", mu, tau, observed=y if observe else None, shape=2)
        return m

    monkeypatch.setattr(pm.Model, "logp", lambda *a, **k: pytest.fail("logp was derived"))
    keys = [compile_cache.model_key(m) for m in
            (model(), model(transform=False), model(potential=1.0), model(potential=2.0),
             model(observe=False), model(upper=5.0), model(upper=6.0))]
    assert len(set(keys)) == len(keys)
    assert compile_cache.model_key(model(potential=2.0)) == keys[3]  # and deterministic


def test_an_op_with_an_inner_graph_is_keyed_the_same_in_every_build(cache):
    """PyMC's HalfStudentT is an Op with an inner graph and no ``__props__``: its key must not
    depend on what the process built before (its pickle did: the inner variables' auto names
    come from a process-wide counter, so a second build of the same model missed the cache),
    and must still change with its inputs."""

    def model(nu=3.0):
        with pm.Model() as m:
            s = pm.HalfStudentT("s", nu=nu, sigma=1.0)
            pm.Normal("obs", 0.0, s, observed=np.array([0.3, -1.2]))
        return m

    first = compile_cache.model_key(model())
    for _ in range(3):  # builds in between, of this and of another model
        model(), model(nu=5.0), tiny()
        assert compile_cache.model_key(model()) == first
    assert compile_cache.model_key(model(nu=4.0)) != first


def test_an_inner_graph_ops_connection_pattern_is_in_the_key_and_closures_are_not_keyed(cache):
    """Two OpFromGraph of a·b that differ only in a user-given connection pattern have
    different gradients, so different keys; a local function (two closures of one factory share
    its qualified name) cannot be keyed at all — such a model is compiled without the cache."""
    import pytensor.tensor as pt
    from pytensor.compile.builders import OpFromGraph

    def model(pattern=None):
        a, b = pt.dscalar(), pt.dscalar()
        kw = {} if pattern is None else {"connection_pattern": pattern}
        op = OpFromGraph([a, b], [a * b], **kw)
        with pm.Model() as m:
            x, y = pm.Normal("x"), pm.Normal("y")
            pm.Potential("p", -op(x, y) ** 2)
        return m

    plain = compile_cache.model_key(model())
    assert compile_cache.model_key(model()) == plain
    assert compile_cache.model_key(model([[True], [False]])) != plain

    def scaled(s):
        return lambda g: g * s

    with pytest.raises(compile_cache._Uncacheable, match="local function"):
        compile_cache._value_key(scaled(1.0))


def test_the_gains_model_is_keyed_the_same_after_other_builds(cache):
    """The gains model's key in a process that built it before (a notebook that looked at the
    graph, a fit with another encoding) is the key of a fresh process (a hit, not a 20 s
    recompile)."""
    from belief.campaign.synthetic import SyntheticWorld
    from models.gains import GainsModel

    gains = GainsModel(SyntheticWorld(seed=0).candidates, max_policies=32)
    first = compile_cache.model_key(gains.build())
    gains.build()
    assert compile_cache.model_key(gains.build()) == first


def test_a_density_attached_outside_the_graph_is_keyed(cache):
    """pm.CustomDist attaches its logp to a class made on the fly: two such models have the
    same generative graph, so the key must include their derived density (else the second
    would load the first's compiled code)."""
    import pytensor.tensor as pt

    def model(k):
        with pm.Model() as m:
            mu = pm.Normal("mu")
            lp = (lambda v, mu: -0.5 * (v - mu) ** 2) if k == 0 else (lambda v, mu: -pt.abs(v - mu))
            pm.CustomDist("x", mu, logp=lp, observed=np.array([1.0, 4.0]))
        return m

    assert compile_cache.model_key(model(0)) != compile_cache.model_key(model(1))
    assert compile_cache.model_key(model(0)) == compile_cache.model_key(model(0))


def test_a_hit_never_derives_the_log_density(cache, monkeypatch):
    compile_model(tiny())
    monkeypatch.setattr(pm.Model, "logp", lambda *a, **k: pytest.fail("logp was derived"))
    monkeypatch.setattr(pm.Model, "dlogp", lambda *a, **k: pytest.fail("dlogp was derived"))
    compiled = compile_model(tiny())
    assert compile_cache.stats == {"miss": 1, "hit": 1}
    assert draws(compiled)["mu"].shape == (2, 50)


@pytest.mark.parametrize("library", ["pymc", "pytensor", "nutpie", "numba", "numpy"])
def test_library_version_change_recompiles(cache, monkeypatch, library):
    module = __import__(library)
    before = compile_cache.model_key(tiny())
    monkeypatch.setattr(module, "__version__", module.__version__ + ".post999")
    assert compile_cache.model_key(tiny()) != before
    if library == "pymc":  # one full round trip: a recompile, then the old entry again
        compile_model(tiny())
        monkeypatch.undo()
        monkeypatch.setenv("BELIEF_CACHE_DIR", str(cache))
        compile_model(tiny())
        monkeypatch.setattr(module, "__version__", module.__version__ + ".post999")
        compile_model(tiny())
        assert compile_cache.stats == {"miss": 2, "hit": 1} and len(entries(cache)) == 2


def test_numbas_optimisation_level_is_part_of_the_key(cache, monkeypatch):
    import numba

    before = compile_cache.model_key(tiny())
    monkeypatch.setattr(numba.config, "OPT", 1)
    assert compile_cache.model_key(tiny()) != before


def test_python_version_is_part_of_the_key(cache, monkeypatch):
    before = compile_cache.model_key(tiny())
    monkeypatch.setattr(compile_cache.sys, "version", sys.version + " (another build)")
    assert compile_cache.model_key(tiny()) != before


def test_a_corrupt_entry_is_ignored_with_a_warning_and_rebuilt(cache):
    reference = draws(compile_model(tiny()))
    (path,) = entries(cache)
    raw = path.read_bytes()
    i = len(raw) - 100
    damaged = {"truncated": raw[: len(raw) // 2], "empty": b"",
               "flipped byte": raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:],
               "garbage": b"\x80\x04not a cache entry" * 50}
    for n, (damage, content) in enumerate(damaged.items(), start=1):
        path.write_bytes(content)
        with pytest.warns(CompileCacheWarning, match="ignoring compiled-model cache entry"):
            rebuilt = compile_model(tiny())
        assert compile_cache.stats == {"miss": 1 + n, "invalid": n}, damage
        assert path.read_bytes() != content, damage  # rewritten
    got = draws(rebuilt)
    for v in reference:
        np.testing.assert_array_equal(got[v], reference[v], err_msg=v)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileCacheWarning)
        compile_model(tiny())  # the rewritten entry is valid again
    assert compile_cache.stats["hit"] == 1


def test_cache_can_be_turned_off_and_gives_the_same_draws(cache, monkeypatch):
    cached = draws(compile_model(tiny()))
    assert compile_cache.stats == {"miss": 1} and len(entries(cache)) == 1
    monkeypatch.setenv("BELIEF_COMPILE_CACHE", "0")
    monkeypatch.setattr(compile_cache, "_nutpie_compile", lambda model: "nutpie's own")
    off = compile_model(tiny())  # the same callbacks compiled here, nothing read or written
    assert compile_cache.stats == {"miss": 1, "uncached": 1} and len(entries(cache)) == 1
    got = draws(off)
    for v in cached:
        np.testing.assert_array_equal(got[v], cached[v], err_msg=v)


def test_the_private_functions_the_cache_relies_on_are_unchanged():
    """Fails, naming the nutpie version, when nutpie (or numba) removed or changed a private
    function the cache calls: update models/compile_cache.py (PRIVATE_API and its use) to
    the new internals — until then every model is compiled by nutpie, with one warning."""
    problems = compile_cache.private_api_problems()
    assert not problems, (f"nutpie {nutpie.__version__}: the compiled-model cache relies on "
                          "private functions that changed:\n" + "\n".join(problems))


def test_a_changed_private_signature_is_reported_with_the_nutpie_version(monkeypatch):
    from nutpie import compile_pymc as cp

    def _make_functions(model, *, mode, compute_grad):  # a parameter gone
        raise AssertionError("never called")

    monkeypatch.setattr(cp, "_make_functions", _make_functions)
    monkeypatch.delattr(cp, "make_user_data")
    problems = compile_cache.private_api_problems()
    assert len(problems) == 2
    assert all(f"nutpie {nutpie.__version__}" in p for p in problems)
    assert "_make_functions" in problems[0] and "make_user_data is gone" in problems[1]


def test_a_changed_private_api_falls_back_to_nutpie_with_one_warning_and_the_same_posterior(
        cache, monkeypatch):
    """The fast path made to fail: every model compiled by nutpie itself, one warning per
    process, nothing written, and the posterior of a fixed seed the same within Monte Carlo
    error (mu | y ~ N(0, 1) prior, three observations of s.d. τ)."""
    import arviz_stats  # noqa: F401

    fast = nutpie.sample(compile_model(tiny()), draws=1000, tune=500, chains=2, seed=5,
                         progress_bar=False)
    monkeypatch.setattr(compile_cache, "_private_api_problem",
                        lambda: "nutpie.compile_pymc._make_functions is gone")
    monkeypatch.setattr(compile_cache, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain = compile_model(tiny())
        compile_model(tiny(sigma=2.0))  # a second model: no second warning
    said = [w for w in caught if issubclass(w.category, CompileCacheWarning)]
    assert len(said) == 1 and "_make_functions is gone" in str(said[0].message)
    assert type(plain).__name__ == "CompiledPyMCModel" and plain.logp_func is not None
    assert len(entries(cache)) == 1  # only the fast path's entry
    slow = nutpie.sample(plain, draws=1000, tune=500, chains=2, seed=5, progress_bar=False)
    for v in ("mu", "tau"):
        a, b = fast["posterior"][v], slow["posterior"][v]
        se = np.hypot(float(a.azstats.mcse(method="mean")), float(b.azstats.mcse(method="mean")))
        assert abs(float(a.mean()) - float(b.mean())) < 4 * se, v


def test_a_full_compile_records_its_duration_for_the_next_progress_line(cache):
    assert compile_cache.last_compile_seconds("tiny") is None
    assert "no estimate" in compile_cache.progress_line(["tiny"])
    compile_model(tiny(), label="tiny")
    seconds = compile_cache.last_compile_seconds("tiny")
    assert seconds is not None and seconds > 0
    line = compile_cache.progress_line(["tiny"])
    assert f"about {seconds:.0f} s" in line and "last full compile at these sizes" in line
    compile_model(tiny(), label="tiny")  # a hit measures nothing
    assert compile_cache.last_compile_seconds("tiny") == seconds
    assert "no estimate" in compile_cache.progress_line(["tiny", "other"])
    (cache / "compiled" / compile_cache.TIMES_FILE).write_text("{not json")
    assert compile_cache.last_compile_seconds("tiny") is None  # unreadable: no estimate


FILL = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    warnings.simplefilter("error", UserWarning)   # any cache warning fails the child
    sys.path.insert(0, {tests!r})
    from test_compile_cache import draws, tiny
    from models import compile_cache
    from pathlib import Path
    import os, time
    barrier = Path({barrier!r})
    (barrier / str(os.getpid())).touch()
    while len(list(barrier.iterdir())) < 2:   # both children look at the cache together
        time.sleep(0.01)
    compiled = compile_cache.compile_model(tiny())
    out = {{"stats": dict(compile_cache.stats), "mu": draws(compiled)["mu"].tolist()}}
    print(json.dumps(out))
""")


def test_two_processes_filling_the_cache_at_once_leave_it_valid(cache):
    barrier = cache / "barrier"
    barrier.mkdir()
    script = FILL.format(tests=str(ROOT / "tests"), barrier=str(barrier))
    env = {**os.environ, "BELIEF_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["stats"] for r in results] == [{"miss": 1}, {"miss": 1}]  # both compiled
    assert len(entries(cache)) == 1
    assert not [p for p in (cache / "compiled").iterdir() if p.suffix != ".nutpie"]  # no tmp
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileCacheWarning)
        compiled = compile_model(tiny())
    assert compile_cache.stats == {"hit": 1}
    mu = draws(compiled)["mu"]
    for r in results:
        np.testing.assert_array_equal(np.asarray(r["mu"]), mu)


ONE = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("error", UserWarning)
    sys.path.insert(0, {tests!r})
    from test_compile_cache import tiny
    from models import compile_cache
    compile_cache.compile_model(tiny(sigma={sigma!r}))
    assert dict(compile_cache.stats) == {{"miss": 1}}, compile_cache.stats
""")


def test_entries_compiled_in_different_processes_load_together(cache):
    """Two fresh processes compiling in the same order would get the same numba function ids
    from numba's per-process counter, hence the same callback symbols (numba/numba#10486); two
    such entries loaded into one process must still each run their own code."""
    env = {**os.environ, "BELIEF_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c",
                               ONE.format(tests=str(ROOT / "tests"), sigma=s)],
                              env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for s in (1.0, 0.1)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    assert len(entries(cache)) == 2
    loaded = [compile_model(tiny(sigma=s)) for s in (1.0, 0.1)]
    assert compile_cache.stats == {"hit": 2}
    symbols = [{c.cres.fndesc.llvm_cfunc_wrapper_name
                for c in (m.compiled_logp_func, m.compiled_expand_func)} for m in loaded]
    assert not symbols[0] & symbols[1]
    for compiled, s in zip(loaded, (1.0, 0.1), strict=True):
        expected = draws(nutpie.compile_pymc_model(tiny(sigma=s)))
        got = draws(compiled)
        for v in expected:  # sigma=0.1 and sigma=1 give different draws: no code is shared
            np.testing.assert_array_equal(got[v], expected[v], err_msg=f"sigma={s} {v}")


def test_nutpie_internals_that_moved_fall_back_to_nutpie_with_a_warning(cache, monkeypatch):
    from nutpie import compile_pymc as cp

    def moved(**kwargs):
        raise TypeError("CompiledPyMCModel() got an unexpected keyword argument")

    monkeypatch.setattr(cp, "CompiledPyMCModel", moved)
    monkeypatch.setattr(compile_cache, "_nutpie_compile", lambda model: "nutpie's own")
    with pytest.warns(CompileCacheWarning, match="without the compiled-model cache"):
        assert compile_model(tiny()) == "nutpie's own"
    assert compile_cache.stats == {"uncached": 1} and not entries(cache)


GAINS_DRAWS = textwrap.dedent("""
    import hashlib, json
    import numpy as np
    from belief.campaign.synthetic import SyntheticWorld
    from belief.inputs.evidence import Evidence
    from models import compile_cache
    from models.gains import GainsModel
    world = SyntheticWorld(seed=3)
    init = world.initial_evidence()
    ev = Evidence(world.candidates).append(policy_evals=init["policy_evaluations"])
    for step, m in enumerate(["dr_1e7", "si_friction"]):
        ev = ev.append(paired=world.execute(m, step).paired)
    idata = GainsModel(world.candidates).fit(ev.paired, world.policy,
                                              policy_evals=ev.policy_evals, draws=100,
                                              tune=100, chains=2, seed=3)
    post = idata["posterior"]
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(post[v].values).tobytes()
                                     for v in sorted(post.data_vars))).hexdigest()
    print(json.dumps({"stats": dict(compile_cache.stats), "draws": digest}))
""")


@pytest.mark.slow
@pytest.mark.parametrize("numba_opt", ["1", "3"])
def test_the_gains_model_gives_the_same_draws_for_the_same_seed_and_cache_state(tmp_path,
                                                                                 numba_opt):
    """What the compile-cache how-to promises, on the real gains model, seed 3, each run a
    fresh process on an empty machine: every run that loads the entry gives the same draws, at
    the command line's optimisation level (1) and numba's default (3).  A compiling run (the
    miss) may differ from them (the how-to says why); that is not asserted.  (Slow: a full
    compile per level.)"""
    env = {**os.environ, "BELIEF_CACHE_DIR": str(tmp_path / "belief"),
           "PYTENSOR_FLAGS": f"base_compiledir={tmp_path / 'pytensor'}",
           "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "NUMBA_OPT": numba_opt}
    env.pop("BELIEF_COMPILE_CACHE", None)

    def run() -> dict:
        p = subprocess.run([sys.executable, "-c", GAINS_DRAWS], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=1800)
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    miss, hit, again = run(), run(), run()
    assert miss["stats"] == {"miss": 1}
    assert hit["stats"] == {"hit": 1} == again["stats"]
    assert hit["draws"] == again["draws"]
