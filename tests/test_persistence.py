from __future__ import annotations

import pytest
import xarray as xr

from belief.errors import InputError
from belief.workflow.belief_file import load_belief, save_belief


def test_round_trip_is_exact(tmp_path, fitted):
    idata, belief = fitted
    path = save_belief(tmp_path / "b.nc", belief, idata)
    b2, i2 = load_belief(path)
    xr.testing.assert_equal(b2["gain"], belief["gain"])
    for name in belief.coords:
        assert list(b2[name].values) == list(belief[name].values)
    xr.testing.assert_equal(i2["gains"]["posterior"].to_dataset(),
                            idata["gains"]["posterior"].to_dataset())
    assert b2.attrs["policy"] == belief.attrs["policy"]


def test_refuses_other_version_and_truncated(tmp_path, fitted):
    _, belief = fitted
    path = save_belief(tmp_path / "b.nc", belief)
    data = path.read_bytes()
    (tmp_path / "cut.nc").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or not netCDF"):
        load_belief(tmp_path / "cut.nc")
    dt = xr.open_datatree(path, engine="h5netcdf").load()
    dt.attrs["belief_version"] = "0.0.1"
    dt.to_netcdf(tmp_path / "old.nc", engine="h5netcdf")
    with pytest.raises(InputError, match=r"written by belief 0\.0\.1"):
        load_belief(tmp_path / "old.nc")
