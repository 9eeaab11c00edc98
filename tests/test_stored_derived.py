"""What fit computed once is stored in the belief file and read back, never silently wrong.

The convergence table and the sensitivity reports are stored when the belief is saved
(:mod:`belief.workflow.derived`); ``check``, ``decide`` and ``report`` read them.  These tests
check that the stored ones are exactly those recomputed from the stored draws, that a file
without them (written before they were stored) still loads and has them recomputed (saying so
once), and that ``check --recompute`` refuses stored figures that disagree with the draws.
"""

from __future__ import annotations

import json
import shutil
import warnings

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from belief.cli.main import main
from belief.errors import InputError
from belief.workflow.belief_file import check_file, load
from belief.workflow.derived import DERIVED_FORMAT
from belief.workflow.fitted import DerivedMissingWarning, posterior_convergence


def _without_derived(src, dest):
    """A copy of a belief file as written before the diagnostics were stored."""
    shutil.copy(src, dest)
    with h5py.File(dest, "r+") as f:
        del f.attrs["derived"]
        del f["derived"]
    return dest


def test_stored_and_recomputed_diagnostics_are_identical(example_belief_file):
    fitted = load(example_belief_file)
    with h5py.File(example_belief_file, "r") as f:
        assert json.loads(f.attrs["derived"])["format"] == DERIVED_FORMAT
    with warnings.catch_warnings():
        warnings.simplefilter("error", DerivedMissingWarning)  # read, not recomputed
        stored = fitted.derived
    fresh = fitted.recompute_derived()
    pd.testing.assert_frame_equal(stored.convergence, fresh.convergence, check_exact=True)
    assert stored.posterior_sha256 == fresh.posterior_sha256
    assert len(stored.convergence) == 23  # the checked variables of the four models (γ too)
    assert sorted(stored.sensitivity) == sorted(fresh.sensitivity) == ["pi0", "pi_dr"]
    for policy, rep in stored.sensitivity.items():
        new = fresh.sensitivity[policy]
        pd.testing.assert_frame_equal(rep.ranking, new.ranking, check_exact=True)
        pd.testing.assert_frame_equal(rep.synergy, new.synergy, check_exact=True)
        assert (rep.standardisation, rep.link, rep.prob, rep.reliable,
                rep.reliability_reason) == (new.standardisation, new.link, new.prob,
                                            new.reliable, new.reliability_reason)
        xr.testing.assert_equal(rep.draws, new.draws)  # read from /derived on first use
        assert rep.draws.attrs == new.draws.attrs
    # the judged tables: stored, recomputed by check, and the former path from the draws
    table = check_file(example_belief_file)
    assert table.attrs["diagnostics"] == "stored at fit time"
    again = check_file(example_belief_file, recompute=True)
    assert again.attrs["diagnostics"].startswith("recomputed from the stored draws")
    direct = posterior_convergence(fitted.idata, fitted.settings)
    for other in (again, direct, fitted.convergence()):
        pd.testing.assert_frame_equal(table, other, check_exact=True)
    assert table.attrs["rhat_max"] == direct.attrs["rhat_max"]
    assert table.attrs["ess_min"] == direct.attrs["ess_min"]


def test_a_file_without_stored_diagnostics_still_loads_and_says_so_once(example_belief_file,
                                                                         tmp_path, capsys):
    old = _without_derived(example_belief_file, tmp_path / "old.nc")
    expected = load(example_belief_file)
    fitted = load(old)
    with pytest.warns(DerivedMissingWarning, match="holds no stored diagnostics"):
        table = fitted.convergence()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DerivedMissingWarning)  # once per loaded belief
        reports = fitted.sensitivity_reports()
        fitted.convergence()
    pd.testing.assert_frame_equal(table, expected.convergence(), check_exact=True)
    for policy, rep in expected.sensitivity_reports().items():
        pd.testing.assert_frame_equal(reports[policy].ranking, rep.ranking, check_exact=True)
    with pytest.warns(DerivedMissingWarning):
        checked = check_file(old)
    assert checked.attrs["diagnostics"] == "recomputed from the draws (none stored)"
    pd.testing.assert_frame_equal(checked, table, check_exact=True)
    with pytest.warns(DerivedMissingWarning):
        assert main(["check", str(old), "--rhat-max", "1.2", "--ess-min", "20"]) == 0
    # decide reads the reports in its figure worker, which passes the warning on
    with pytest.warns(DerivedMissingWarning, match="holds no stored diagnostics"):
        assert main(["decide", str(old), "--out", str(tmp_path / "dec"),
                     "--cvu-outcomes", "32"]) == 0
    out = capsys.readouterr().out
    assert "diagnostics recomputed from the draws (none stored)" in out
    assert "converged: 23 variables of 4 models pass" in out
    # saving it again stores them
    resaved = fitted.save(tmp_path / "resaved.nc")
    pd.testing.assert_frame_equal(check_file(resaved), table, check_exact=True)


def test_check_recompute_refuses_stored_diagnostics_that_disagree(example_belief_file,
                                                                   tmp_path, capsys):
    assert main(["check", str(example_belief_file), "--recompute", "--rhat-max", "1.2",
                 "--ess-min", "20"]) == 0
    assert "recomputed from the stored draws: the same as those stored" in \
        capsys.readouterr().out
    edited = tmp_path / "edited.nc"
    shutil.copy(example_belief_file, edited)
    with h5py.File(edited, "r+") as f:
        doc = json.loads(f.attrs["derived"])
        doc["convergence"]["rows"][0][2] = 1.0  # R-hat of gains: effect
        f.attrs["derived"] = json.dumps(doc)
    assert check_file(edited)["rhat"].iloc[0] == 1.0  # without --recompute: stored, as told
    with pytest.raises(InputError, match=r"disagree with the stored draws.*gains: effect: rhat"):
        check_file(edited, recompute=True)
    code = main(["check", str(edited), "--recompute"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("belief: error: ") and "\n" not in err
    draws = tmp_path / "draws.nc"
    shutil.copy(example_belief_file, draws)
    with h5py.File(draws, "r+") as f:
        var = f["posterior/transfer/posterior/shift_mu"]
        var[0, 0] = var[0, 0] + 1.0
    with pytest.raises(InputError, match="draws of transfer are not those"):
        check_file(draws, recompute=True)
    damaged = tmp_path / "damaged.nc"
    shutil.copy(example_belief_file, damaged)
    with h5py.File(damaged, "r+") as f:
        f.attrs["derived"] = "{not json"
    with pytest.raises(InputError, match="not valid JSON"):
        check_file(damaged)
    with h5py.File(damaged, "r+") as f:
        f.attrs["derived"] = json.dumps({"format": DERIVED_FORMAT, "convergence": {}})
    with pytest.raises(InputError, match=r"stored diagnostics .* are damaged"):
        load(damaged)


def test_a_file_of_another_derived_format_is_recomputed(example_belief_file, tmp_path):
    other = tmp_path / "other.nc"
    shutil.copy(example_belief_file, other)
    with h5py.File(other, "r+") as f:
        f.attrs["derived"] = json.dumps({"format": "belief-derived-0"})
    with pytest.warns(DerivedMissingWarning):
        table = load(other).convergence()
    pd.testing.assert_frame_equal(table, load(example_belief_file).convergence(),
                                  check_exact=True)
    assert np.isfinite(table["rhat"]).all()
