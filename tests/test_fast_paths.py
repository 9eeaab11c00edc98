"""The faster paths of issue 20 compute exactly what the slower ones did.

- the draws bootstrap's :class:`belief.decision.functionals.ReweightedColumns` against
  :func:`belief.decision.functionals.weighted_columns`, bit for bit;
- the safety bounds through ``scipy.special.betaincinv`` against ``scipy.stats.beta.ppf``;
- δ_J's interval through numpy's linear quantiles against ArviZ's ``eti``;
- CVU's BLAS thread limit, and a decision that imports neither scipy.stats nor ArviZ's stats.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from belief.decision.functionals import Functional, ReweightedColumns, weighted_columns


@pytest.mark.parametrize("functional", [Functional("lcb", 0.2), Functional("lcb", 0.01),
                                        Functional("lcb", 0.97), Functional("cvar", 0.2),
                                        Functional("mean")], ids=str)
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
