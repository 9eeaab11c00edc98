"""The faster paths of issue 20 compute exactly what the slower ones did.

- the near-tie bootstrap's block path (per-block prefix sums, :class:`belief.decision.
  functionals.ReweightedColumns` with ``block``) and the pre-sorted functionals
  (``SortedColumns``, ``resampled``, ``column_lcbs``) against the direct computations, bit for
  bit (the resampled mean to rounding), and ``draws_bootstrap`` against its definition;
- the h5py reader of flat belief-file groups against xarray, and a load that imports no dask;

- the draws bootstrap's :class:`belief.decision.functionals.ReweightedColumns` against
  :func:`belief.decision.functionals.weighted_columns`, bit for bit;
- the safety bounds through ``scipy.special.betaincinv`` against ``scipy.stats.beta.ppf``;
- δ_J's interval through numpy's linear quantiles against ArviZ's ``eti``;
- CVU's BLAS thread limit, and a decision that imports neither scipy.stats nor ArviZ's stats;
- the PSIS memo's weighted quantiles (several levels in one pass, read on subsets) and the
  regression memo of the channel split (``cvu_regression.RegressionMemo``), bit for bit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from belief.decision.functionals import Cvar, Lcb, Mean, ReweightedColumns, weighted_columns


@pytest.mark.parametrize("functional", [Lcb(0.2), Lcb(0.01),
                                        Lcb(0.97), Cvar(0.2),
                                        Mean()], ids=str)
@pytest.mark.parametrize("chunk", [1, 7, 128, 5000])
def test_reweighted_columns_equal_weighted_columns_bit_for_bit(functional, chunk):
    rng = np.random.default_rng(3)
    n_s, n_c, n_j = 600, 4, 40
    draws = rng.normal(size=(n_s, n_c))
    draws[:, 1] = np.round(draws[:, 1], 1)  # ties
    draws[:, 2] = 0.5  # a constant column
    base = np.exp(2.0 * rng.normal(size=(n_j, n_s)))
    base[3] = 0.0  # a row without weight
    base[4, :-3] = 0.0  # weight on the last draws only
    base[5, 10] = 1e12  # one dominant draw
    columns = ReweightedColumns(functional, draws, base, chunk=chunk)
    block = np.minimum(np.arange(n_s) * 16 // n_s, 15)
    for _ in range(6):
        v = rng.poisson(1.0, 16)[block].astype(float)
        w = base * v[None, :]
        ok = w.sum(axis=1) > 0
        expected = weighted_columns(functional, draws, w[ok])
        got = columns(v, ok)
        assert got.shape == expected.shape
        assert np.array_equal(got, expected)


def test_safety_bounds_equal_scipy_stats_beta_ppf():
    from scipy import stats

    from belief.decision.safety import clopper_pearson_lower, clopper_pearson_upper

    n = np.repeat(np.arange(0, 61), 61)
    k = np.tile(np.arange(0, 61), 61)
    keep = k <= n
    n, k = n[keep], k[keep]
    for delta in (0.01, 0.05, 0.1, 0.3):
        up = clopper_pearson_upper(k, n, delta)
        ok = k < n
        assert np.array_equal(up[ok], stats.beta.ppf(1 - delta, k[ok] + 1.0, n[ok] - k[ok]))
        assert np.all(up[~ok] == 1.0)
        lo = clopper_pearson_lower(k, n, delta)
        ok = k > 0
        assert np.array_equal(lo[ok], stats.beta.ppf(delta, k[ok], n[ok] - k[ok] + 1.0))
        assert np.all(lo[~ok] == 0.0)


def test_transfer_interval_equals_arviz_eti():
    import arviz_stats as az

    from belief.posterior.transfer import transfer_attrs

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(1001, 2))
    belief = xr.Dataset({"delta_j": (("sample", "transfer_policy"), draws),
                         "g_j": (("sample", "transfer_policy"), np.abs(draws)),
                         "transfer_rows": ("transfer_policy", [2, 0])},
                        coords={"transfer_policy": ["p0", "p1"]})
    for prob in (0.9, 0.5):
        attrs = transfer_attrs(belief, "p1", prob)
        tag = f"{100 * prob:g}"
        for name in ("delta_j", "g_j"):
            eti = az.eti(belief[name].sel(transfer_policy="p1"), prob=prob, dim="sample")
            assert attrs[f"{name}_lo{tag}"] == float(eti.sel(ci_bound="lower"))
            assert attrs[f"{name}_hi{tag}"] == float(eti.sel(ci_bound="upper"))


def test_cvu_blas_threads_are_limited_and_restored():
    from threadpoolctl import threadpool_info

    from belief.decision.cvu import blas_threads
    from belief.decision.settings import CVUSettings
    from belief.errors import InputError

    def pools():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = pools()
    with blas_threads(1):
        assert set(pools()) <= {1}
    assert pools() == before
    with blas_threads(0):  # 0: the pool as it is
        assert pools() == before
    assert CVUSettings().blas_threads == 1
    with pytest.raises(InputError, match="blas_threads"):
        CVUSettings(blas_threads=-1)


def test_a_decision_imports_no_scipy_stats_and_no_arviz_stats(example_belief_file):
    heavy = ["pymc", "pytensor", "nutpie", "numba", "scipy.stats", "arviz_stats",
             "distributed"]
    code = (f"import sys, json\nimport belief\nf = belief.load({str(example_belief_file)!r})\n"
            "f.decide(functional='lcb:0.2', beta=1.0, cvu_outcomes=32)\n"
            "f.convergence(); f.sensitivity_reports()\n"
            f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


# -- issue 20, phase 3: decide and load ------------------------------------------------------
def _bootstrap_cases():
    """(draws, base, blocks) cases: ties, a constant column, rows without weight or with one
    dominant draw, and uniform rows (whose running sums hit q exactly: the sequential path)."""
    rng = np.random.default_rng(11)
    cases = []
    for n_s, n_c, n_j, n_b in [(600, 4, 40, 16), (1000, 3, 30, 32), (37, 3, 9, 5),
                               (200, 2, 12, 1)]:
        draws = rng.normal(size=(n_s, n_c))
        draws[:, 1] = np.round(draws[:, 1], 1)  # ties
        draws[:, -1] = 0.5 if n_c > 2 else draws[:, -1]  # a constant column
        base = np.exp(2.0 * rng.normal(size=(n_j, n_s)))
        base[3] = 0.0
        base[4, :-3] = 0.0
        base[5, 10] = 1e12
        base[6] = 1.0  # uniform: q·S of them sum to q exactly
        cases.append((draws, base, np.minimum(np.arange(n_s) * n_b // n_s, n_b - 1), n_b))
    return cases


@pytest.mark.parametrize("q", [0.2, 0.01, 0.5, 0.97, 0.25])
def test_reweighted_columns_block_path_equals_weighted_columns_bit_for_bit(q):
    functional = Lcb(q)
    rng = np.random.default_rng(5)
    sequential = 0
    for draws, base, block, n_b in _bootstrap_cases():
        columns = ReweightedColumns(functional, draws, base, block=block)
        for _ in range(8):
            v = rng.poisson(1.0, n_b)[block].astype(float)
            if v.sum() == 0:
                v[:] = 1.0
            w = base * v[None, :]
            ok = w.sum(axis=1) > 0
            assert np.array_equal(ok, columns.row_totals(v) > 0)  # what draws_bootstrap uses
            expected = weighted_columns(functional, draws, w[ok])
            got = columns(v, ok)
            assert got.shape == expected.shape
            assert np.array_equal(got, expected)
        sequential += columns.exact_pairs
        # weights that are not constant on the blocks take the sequential path
        v = rng.exponential(size=draws.shape[0])
        ok = (base * v).sum(axis=1) > 0
        assert np.array_equal(columns(v, ok),
                              weighted_columns(functional, draws, (base * v)[ok]))
    assert sequential > 0  # the guard's sequential sums were exercised


def test_draws_bootstrap_equals_the_reweighted_reference():
    """``draws_bootstrap`` (block path, pre-sorted G0(s^∅; v)) against its definition computed
    with ``weighted_columns`` and ``apply_functional`` replicate by replicate."""
    from belief.decision.cvu.importance import psis_weights
    from belief.decision.cvu.preposterior import NextState
    from belief.decision.cvu.psis import WeighedOutcomes, draws_bootstrap
    from belief.decision.functionals import SortedColumns
    from belief.decision.scores import g0

    rng = np.random.default_rng(2)
    n_s, n_c, n_j = 800, 5, 48
    gain = rng.normal(0.05, 0.1, size=(n_s, n_c))
    gain[:, 2] = np.round(gain[:, 2], 2)
    c_lam = np.array([0.01, 0.02, 0.0, 0.03, 0.01])
    feas = np.array([True, True, True, False, True])
    nxt = NextState(gain + 0.01, c_lam, feas)
    smooth, omega, _, ok = psis_weights(rng.normal(0, 1.5, size=(n_j, n_s)))
    assert ok.all()
    functional = Lcb(0.2)
    phi = weighted_columns(functional, nxt.gain, smooth)
    g0_j = nxt.g0(phi, feas)
    exact = np.zeros(n_j, bool)
    exact[[3, 7]] = True
    null = SortedColumns(functional, gain)
    for v in (rng.poisson(1.0, n_s).astype(float), np.ones(n_s)):
        assert np.array_equal(null(v), functional(gain.T, v))

    def g0_null(v):
        return float(g0(null(v) - c_lam, feas))

    got = draws_bootstrap(functional, nxt, WeighedOutcomes(feas, smooth, omega, g0_j, exact),
                          g0_null, np.random.default_rng(9), replicates=20, blocks=16)
    # the definition, replicate by replicate, the slow way
    r_ng = np.random.default_rng(9)
    block = np.minimum(np.arange(n_s) * 16 // n_s, 15)
    vals = []
    for _ in range(20):
        v = r_ng.poisson(1.0, 16)[block].astype(float)
        if v.sum() == 0:
            v[:] = 1.0
        w = smooth * v[None, :]
        okw = w.sum(axis=1) > 0
        phi_b = np.full((n_j, n_c), -np.inf)
        cols = np.flatnonzero(feas)
        phi_b[np.ix_(okw, cols)] = weighted_columns(functional, nxt.gain[:, cols], w[okw])
        g = np.where(exact | ~okw, g0_j, nxt.g0(phi_b, feas))
        r = omega @ v / v.mean()
        vals.append(float((r * g).sum() / r.sum())
                    - float(g0(functional(gain.T, v) - c_lam, feas)))
    assert got == float(np.std(vals, ddof=1))


@pytest.mark.parametrize("functional", [Lcb(0.2), Lcb(0.9),
                                        Cvar(0.3), Cvar(1.0),
                                        Mean()], ids=str)
def test_presorted_functionals_equal_the_direct_ones_bit_for_bit(functional):
    from belief.decision.functionals import SortedColumns, column_lcbs, lcbs, resampled

    rng = np.random.default_rng(4)
    for n_s, n_c in [(1000, 6), (41, 3)]:
        draws = rng.normal(size=(n_s, n_c))
        draws[:, 1] = np.round(draws[:, 1], 1)
        columns = SortedColumns(functional, draws)
        assert np.array_equal(columns(None), functional(draws.T))
        for v in (rng.poisson(1.0, n_s).astype(float), rng.exponential(size=n_s)):
            assert np.array_equal(columns(v), functional(draws.T, v))
        for n in (n_s, n_s // 2 + 1):
            idx = rng.integers(0, n_s, size=(30, n))
            got = resampled(functional, draws, idx)
            want = functional(np.moveaxis(draws[idx], 1, -1))
            if functional.kind == "mean":  # summed in another order: equal to rounding
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
            else:
                assert np.array_equal(got, want)
        col = rng.integers(0, n_c, 25)
        w = rng.exponential(size=(25, n_s))
        w[0, :5] = 0.0
        for qs in [(0.1, 0.3), (0.5,), (0.2, 0.9, 0.99)]:
            for a, b in zip(column_lcbs(draws, col, qs, w), lcbs(draws[:, col].T, qs, w),
                            strict=True):
                assert np.array_equal(a, b)


def test_resampled_quantile_of_resamples_far_from_the_draws_quantile():
    """A resample of the largest draws passes the q-quantile's count late in the sorted
    draws (after the head that ``resampled`` sums first): the same values as the direct
    computation."""
    from belief.decision.functionals import resampled

    rng = np.random.default_rng(6)
    draws = rng.normal(size=(2000, 3))
    top = np.argsort(draws[:, 0])[-300:]
    idx = rng.integers(0, 2000, size=(12, 2000))
    idx[:4] = rng.choice(top, size=(4, 2000))  # every draw from column 0's top 15 %
    for functional in (Lcb(0.2), Lcb(0.05)):
        got = resampled(functional, draws, idx)
        assert np.array_equal(got, functional(np.moveaxis(draws[idx], 1, -1)))
        assert (got[:4, 0] > np.quantile(draws[:, 0], 0.8)).all()  # the late rows were hit


def _assert_same_dataset(got, ref):
    xr.testing.assert_identical(got, ref)
    assert list(got.data_vars) == list(ref.data_vars)
    assert list(got.coords) == list(ref.coords)
    assert list(got.dims) == list(ref.dims)
    assert list(got.attrs) == list(ref.attrs)
    for k in ref.attrs:
        assert type(got.attrs[k]) is type(ref.attrs[k]), k
    for name in ref.variables:
        assert got[name].dtype == ref[name].dtype, name
        assert list(got[name].attrs) == list(ref[name].attrs), name
        for k in ref[name].attrs:
            assert type(got[name].attrs[k]) is type(ref[name].attrs[k]), (name, k)


def test_h5_reader_equals_xarray_on_every_flat_group_of_the_example(example_belief_file):
    import h5py

    from belief.workflow.h5read import Unsupported, read_group

    groups = []
    with h5py.File(example_belief_file, "r") as f:
        f.visititems(lambda n, o: groups.append(n) if isinstance(o, h5py.Group) and any(
            isinstance(x, h5py.Dataset) for x in o.values()) else None)
    read = 0
    for group in groups:
        ref = xr.open_dataset(example_belief_file, group=group, engine="h5netcdf").load()
        try:
            got = read_group(example_belief_file, group)
        except Unsupported:
            assert group.startswith("posterior/")  # only ArviZ groups may need xarray
            continue
        _assert_same_dataset(got, ref)
        read += 1
    assert read >= 10  # q_t, every evidence table, the stored sensitivity draws


def test_h5_reader_equals_xarray_on_edge_cases_and_refuses_what_it_does_not_decode(tmp_path):
    from belief.files import netcdf_ready
    from belief.workflow.h5read import Unsupported, read_group

    empty = xr.Dataset({"step": ("row", np.array([], dtype=int)),
                        "name": ("row", np.array([], dtype=str))},
                       coords={"row": np.arange(0)})
    mixed = xr.Dataset(
        {"x": (("s", "c"), np.where(np.eye(3, 2) > 0, np.nan, 1.5), {"long_name": "ä x",
                                                                      "n": 3, "f": 0.5}),
         "flag": ("c", np.array([True, False])),
         "label": ("c", np.array(["a", "bcd"])),
         "count": ("c", np.array([1, 2], dtype=np.int32)),
         "nodim": ("free", np.arange(4.0)),
         "scalar": ((), 2.5)},
        coords={"c": ["p", "q"], "kind": ("c", ["u", "v"])},
        attrs={"step": 3, "policy": "pi0", "ratio": 0.25})
    path = tmp_path / "t.nc"
    xr.DataTree.from_dict({"a": netcdf_ready(empty), "b": netcdf_ready(mixed)}).to_netcdf(
        path, engine="h5netcdf")
    for group in ("a", "b"):
        _assert_same_dataset(read_group(path, group),
                             xr.open_dataset(path, group=group, engine="h5netcdf").load())
    # encodings this reader does not decode are refused (the caller uses xarray)
    for var, enc in [(xr.Variable("r", np.array([1, 2])), {"_FillValue": -1}),
                     (xr.Variable("r", np.array([1.0, 2.0])), {"scale_factor": 0.5,
                                                              "dtype": "int16"}),
                     (xr.Variable("r", np.array(["2020-01-01", "2020-01-02"],
                                                dtype="datetime64[ns]")), {})]:
        odd = tmp_path / "odd.nc"
        ds = xr.Dataset({"v": var})
        ds["v"].encoding.update(enc)
        with warnings.catch_warnings():  # xarray warns about the int16 encoding
            warnings.simplefilter("ignore")
            ds.to_netcdf(odd, engine="h5netcdf", group="g")
        with pytest.raises(Unsupported):
            read_group(odd, "g")


def test_loading_a_belief_imports_no_dask_and_dask_arrays_still_work(example_belief_file):
    code = (f"import sys\nimport belief\nbelief.load({str(example_belief_file)!r})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dask'))\n"
            "import dask.array as da, xarray as xr\n"
            "x = xr.DataArray(da.ones(4, chunks=2))\n"
            "assert x.chunks == ((2, 2),) and float((x + 1).sum().compute()) == 8.0\n"
            "from xarray.namedarray.utils import is_duck_dask_array\n"
            "assert is_duck_dask_array(x.data) and not is_duck_dask_array(x.values)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_writing_a_belief_imports_no_dask_and_dask_writes_still_work(example_belief_file,
                                                                   tmp_path):
    """A save (DataTree and Dataset writes) asks xarray for the dask scheduler without
    importing dask; the file written is the same; a chunked dask array still writes."""
    code = (f"import sys\nimport belief\nimport xarray as xr\n"
            f"b = belief.load({str(example_belief_file)!r})\n"
            f"b.save({str(tmp_path / 'b.nc')!r})\n"
            f"xr.Dataset({{'v': ('x', [1.0, 2.0])}}).to_netcdf({str(tmp_path / 'd.nc')!r}, "
            "engine='h5netcdf')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dask'))\n"
            "import dask.array as da\n"
            "x = xr.Dataset({'v': ('x', da.arange(6.0, chunks=2))})\n"
            f"x.to_netcdf({str(tmp_path / 'c.nc')!r}, engine='h5netcdf')\n"
            f"back = xr.open_dataset({str(tmp_path / 'c.nc')!r}, engine='h5netcdf').load()\n"
            "assert back['v'].values.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    import belief

    a, b = belief.load(example_belief_file), belief.load(tmp_path / "b.nc")
    xr.testing.assert_identical(a.belief, b.belief)
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "d.nc", engine="h5netcdf").load(),
                                xr.Dataset({"v": ("x", [1.0, 2.0])}))


@pytest.mark.parametrize("q", [0.2, 0.5, 0.01, 0.97, 0.25])
def test_weighted_columns_lcb_sums_only_until_q_with_the_same_values(q):
    from belief.decision.functionals import _lcb_sorted

    rng = np.random.default_rng(8)
    for n_s, n_c, n_j in [(1000, 5, 40), (257, 2, 6), (1, 2, 3)]:
        draws = rng.normal(size=(n_s, n_c))
        draws[:, 0] = np.round(draws[:, 0], 1)
        w = rng.exponential(size=(n_j, n_s))
        w[0] = 1.0  # running sums that hit q exactly
        if n_j > 3:
            w[1, :-2] = 0.0
            w[2, 5 % n_s] = 1e12
        order = np.argsort(draws, axis=0, kind="stable")
        full = _lcb_sorted(np.take_along_axis(draws, order, 0).T,
                           (w / w.sum(axis=-1, keepdims=True))[:, order.T], q)  # every sum
        assert np.array_equal(weighted_columns(Lcb(q), draws, w), full)


def test_column_quantiles_at_several_levels_and_on_subsets_equal_one_level_at_a_time():
    """``weighted_column_quantiles`` takes every level from one pass of running sums, and row
    j, column c depends on that row and column only: the PSIS estimator's memo
    (``cvu_psis.OutcomeWeights``) computes the LCB with its influence levels once and the
    noise bias and the draws' influence read subsets of them — the same values as
    ``column_lcbs`` and per-level calls on the subsets, bit for bit."""
    from belief.decision.functionals import column_lcbs, column_order, weighted_column_quantiles

    rng = np.random.default_rng(9)
    for n_s, n_c, n_j in [(1000, 5, 40), (300, 3, 7)]:
        draws = rng.normal(size=(n_s, n_c))
        draws[:, 0] = np.round(draws[:, 0], 1)
        w = rng.exponential(size=(n_j, n_s)) ** 3
        w[0] = 1.0
        w[1, :-2] = 0.0
        levels = (0.2, 0.1, 0.3, 0.97)
        together = weighted_column_quantiles(draws, w, levels, column_order(draws))
        rows, cols = np.array([1, 4, 5]), np.array([0, 2])
        for q, got in zip(levels, together, strict=True):
            assert np.array_equal(got, weighted_column_quantiles(draws, w, (q,))[0])
            sub = weighted_column_quantiles(draws[:, cols], w[rows], (q,))[0]
            assert np.array_equal(got[np.ix_(rows, cols)], sub)
            col = rng.integers(0, n_c, n_j)
            assert np.array_equal(got[np.arange(n_j), col],
                                  column_lcbs(draws, col, (q,), w)[0])


@pytest.mark.parametrize("functional", [Lcb(0.2), Cvar(0.3)],
                         ids=str)
def test_noise_bias_with_given_quantiles_equals_the_computed_ones(functional):
    from belief.decision.cvu.noise import WeightedFunctionals, noise_bias, noise_draws
    from belief.decision.functionals import weighted_column_quantiles

    rng = np.random.default_rng(10)
    gain = rng.normal(size=(800, 4)) * [1.0, 1.0, 0.5, 2.0]
    w = rng.exponential(size=(30, 800)) ** 3
    w /= w.sum(axis=1, keepdims=True)
    phi = weighted_columns(functional, gain, w)
    z = noise_draws(0, 4)
    args = (functional, gain, np.zeros(4), np.ones(4, bool), z)
    asked = []

    def given(levels):
        asked.append(levels)
        return weighted_column_quantiles(gain, w, levels)

    def run(quantiles):
        f, g, c, feas, zz = args
        return noise_bias(f, g, WeightedFunctionals(phi, w, quantiles), c, feas, zz).pairs

    got = run(given)
    assert asked and np.array_equal(got, run(None))


def test_regression_memo_shares_outcomes_and_fits_with_the_same_values():
    """The channel split's regression estimates reuse the CVU's simulated outcomes (by the
    state of the outcome stream) and fits (by summaries and responses) through
    ``cvu_regression.RegressionMemo``: the same estimate as without it, bit for bit."""
    from belief.decision.cvu.noise import noise_draws
    from belief.decision.cvu.preposterior import NextState
    from belief.decision.cvu.regression import RegressionMemo, regression_estimate

    rng = np.random.default_rng(11)
    gain = rng.normal(size=(500, 3))
    calls = []

    def simulate(r, idx):
        calls.append(idx.size)
        return gain[idx, 0] + 0.3 * r.standard_normal(idx.size)

    nxt = NextState(gain, np.zeros(3), np.ones(3, bool))
    memo = RegressionMemo()
    for functional in (Lcb(0.2), Mean()):
        kw = {"replicates": 4, "noise_z": noise_draws(0, 3)}
        plain = regression_estimate(nxt, functional, simulate, np.random.default_rng(5), **kw)
        n_plain = len(calls)
        for _ in range(2):
            got = regression_estimate(nxt, functional, simulate, np.random.default_rng(5),
                                      memo=memo, **kw)
            assert got.expected_g0 == plain.expected_g0 and got.mcse == plain.mcse
            assert np.array_equal(got.terms, plain.terms)
            assert np.array_equal(got.if_draws, plain.if_draws)
            assert got.extra == plain.extra
        assert len(calls) == n_plain + (1 if functional.kind == "lcb" else 0)  # simulated once
    # the same memo (same outcome stream) with other next-gain draws: the remembered
    # outcomes are reused, the fits are not (they depend on the responses)
    gain2 = gain + rng.normal(0.0, 0.5, size=gain.shape)
    nxt2 = NextState(gain2, np.zeros(3), np.ones(3, bool))
    for functional in (Lcb(0.2), Mean()):
        kw = {"replicates": 4, "noise_z": noise_draws(0, 3)}
        plain = regression_estimate(nxt2, functional, simulate, np.random.default_rng(5), **kw)
        n_before = len(calls)
        got = regression_estimate(nxt2, functional, simulate, np.random.default_rng(5),
                                  memo=memo, **kw)
        assert len(calls) == n_before  # outcomes from the memo
        assert got.expected_g0 == plain.expected_g0 and got.mcse == plain.mcse
        assert np.array_equal(got.terms, plain.terms)
        assert np.array_equal(got.if_draws, plain.if_draws)
        old = regression_estimate(nxt, functional, simulate, np.random.default_rng(5), **kw)
        assert got.expected_g0 != old.expected_g0  # the other gain does change the estimate


def test_uniform_lcb_by_selection_equals_the_sorted_one_bit_for_bit():
    """``lcb`` without weights selects the k-th smallest value instead of sorting (the
    location–scale regression's φ of its residuals): the same bits as the sorted kernel,
    with ties, signed zeros, NaN and infinities, in 1-D and 2-D."""
    from belief.decision.functionals import _lcb_sorted, _normalised, _sorted, lcb

    rng = np.random.default_rng(12)
    for trial in range(400):
        n, rows = int(rng.integers(1, 200)), int(rng.integers(1, 4))
        x = rng.normal(size=(rows, n))
        if trial % 3 == 0:
            x = np.round(x, 1)
        if trial % 5 == 0:
            x[0, : n // 2] = 0.0
            x[0, ::3] = -0.0
        if trial % 7 == 0:
            x[-1, 0] = np.nan
        if trial % 11 == 0:
            x[0, -1] = -np.inf
        q = float(rng.choice([0.2, 0.5, 0.05, 0.95, rng.uniform(0.001, 0.999)]))
        want = _lcb_sorted(*_sorted(*_normalised(x, None)), q)
        assert lcb(x, q).tobytes() == want.tobytes()
        one, want_one = lcb(x[0], q), _lcb_sorted(*_sorted(*_normalised(x[0], None)), q)
        assert type(one) is type(want_one) and one.tobytes() == want_one.tobytes()


def test_quantile_influence_selected_per_row_equals_the_formula_bit_for_bit():
    """The q-quantile's ψ is computed as two values per row, selected by x ≤ VaR: the same
    bits as (q − 1[x ≤ VaR]) / f, including rows with no finite density (ψ = 0)."""
    from belief.decision.cvu.preposterior import influence, influence_levels
    from belief.decision.functionals import lcbs

    rng = np.random.default_rng(13)
    for n_s in (3, 50, 400):
        x = rng.normal(size=(4, n_s))
        x[1] = 0.5  # a constant row: no finite density
        w = rng.exponential(size=(4, n_s))
        for q in (0.03, 0.2, 0.5, 0.9):
            f = Lcb(q)
            phi = f(x, w)
            lo, hi = lcbs(x, influence_levels(f), w)
            h = 0.5 * min(q, 1 - q)
            with np.errstate(divide="ignore", invalid="ignore"):
                dens = np.where(hi > lo, 2 * h / (hi - lo), np.inf)[:, None]
                want = np.where(np.isfinite(dens), (q - (x <= phi[:, None])) / dens, 0.0)
            assert influence(f, x, phi, x, w).tobytes() == want.tobytes()


def test_hardening_of_the_fast_paths_found_in_review():
    """Review findings (helper-22): a level per row is refused by the selection path (the
    sorted kernel broadcasts it); the memo's outcomes are read-only without locking the array
    ``simulate`` returned; a figure's layout engine stays cleared under a user's rcParams
    that would install one again."""
    import matplotlib
    import matplotlib.pyplot as plt

    from belief.decision.cvu.regression import RegressionMemo
    from belief.decision.functionals import _lcb_sorted, _normalised, _sorted, lcb
    from belief.report.document import _tight

    rng = np.random.default_rng(13)
    x = rng.normal(size=(3, 101))
    q = np.array([[0.1], [0.5], [0.9]])
    want = _lcb_sorted(*_sorted(*_normalised(x, None)), q)
    assert lcb(x, q).tobytes() == want.tobytes()
    assert len(set(np.round(lcb(x, q), 12))) == 3  # three levels, three different values

    stored = np.arange(4.0)
    y = RegressionMemo().outcomes(lambda r, idx: stored, np.random.default_rng(0),
                                  np.arange(4))
    assert not y.flags.writeable and stored.flags.writeable
    assert np.array_equal(y, stored)

    for rc in ({"figure.constrained_layout.use": True}, {"figure.autolayout": True}):
        with matplotlib.rc_context(rc):
            fig, ax = plt.subplots()
            ax.plot([0, 1])
            _tight(fig)
            assert fig.get_layout_engine() is None, rc
            plt.close(fig)


def test_outcome_weights_remember_quantiles_per_block_of_outcomes():
    """``cvu_psis.OutcomeWeights`` remembers the weighted quantiles of a ``gain`` per block of
    outcomes: two blocks of outcomes on the same ``gain`` (the CVU's outcome chunks) each get
    their own quantiles — those ``columns`` stored for the LCB's influence levels and a level
    asked later — equal to a fresh computation under that block's weights.  A memo keyed
    without the outcomes would hand the second block the first block's values."""
    from belief.decision.cvu.preposterior import influence_levels
    from belief.decision.cvu.psis import OutcomeWeights
    from belief.decision.functionals import weighted_column_quantiles

    rng = np.random.default_rng(12)
    gain = rng.normal(size=(600, 3))

    def loglik(y: np.ndarray) -> np.ndarray:  # outcome y_j informs column 0
        return -0.5 * ((gain[:, 0][None, :] - y[:, None]) / 0.7) ** 2

    memo = OutcomeWeights(loglik)
    f = Lcb(0.2)
    levels = (*influence_levels(f), 0.5)
    for y in (np.array([-1.0, 0.0, 0.4]), np.array([1.2, 2.0, -0.3])):
        y.flags.writeable = False
        smooth = memo.weights(y)[0]
        phi = memo.columns(f, gain, smooth, y)
        assert np.array_equal(phi, weighted_column_quantiles(gain, smooth, (0.2,))[0])
        fresh = weighted_column_quantiles(gain, smooth, levels)
        for got, want in zip(memo.quantiles(gain, smooth, y, levels), fresh, strict=True):
            assert np.array_equal(got, want)


def test_outcome_weights_reuse_the_quantiles_of_shared_columns_bit_for_bit():
    """OutcomeWeights computes a second gain array's weighted quantiles only for the columns
    that differ from the first's (the channel split's next gains without m's order
    effects): every level equals the direct computation bit for bit."""
    from belief.decision.cvu.preposterior import influence_levels
    from belief.decision.cvu.psis import OutcomeWeights
    from belief.decision.functionals import weighted_column_quantiles

    rng = np.random.default_rng(8)
    gain = rng.normal(size=(800, 5))
    other = gain.copy()
    other[:, [1, 3]] += rng.normal(0.3, 0.1, size=(800, 2))  # m acts on columns 1 and 3
    y = rng.integers(0, 10, size=(20, 2))
    smooth = rng.dirichlet(np.full(800, 0.5), size=20)
    memo = OutcomeWeights(lambda y: np.zeros((y.shape[0], 800)))
    functional = Lcb(0.2)
    levels = (0.2, *influence_levels(functional))
    first = memo.columns(functional, gain, smooth, y)
    second = memo.columns(functional, other, smooth, y)
    direct = weighted_column_quantiles(other, smooth, levels)
    assert np.array_equal(first, weighted_column_quantiles(gain, smooth, (0.2,))[0])
    assert np.array_equal(second, direct[0])
    assert not np.array_equal(second[:, 1], first[:, 1])  # the changed columns were redone
    for got, want in zip(memo.quantiles(other, smooth, y, levels[1:]), direct[1:],
                         strict=True):
        assert np.array_equal(got, want)
