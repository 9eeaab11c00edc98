from __future__ import annotations

import textwrap

import numpy as np
import pytest

from belief.errors import InputError
from belief.inputs.candidate_file import load_candidates
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget, parse_budget

GOOD = textwrap.dedent("""
    [campaign]
    eval_protocol = "E1"
    resources = ["real_h", "compute", "eng_h"]

    [budget]
    real_h = 10
    compute = 100
    eng_h = 5

    [[candidate]]
    id = "si"
    role = "adaptation"
    lens = "model"
    method = "SI"
    cost = { real_h = 0.5, compute = 1, eng_h = 1 }
    drives_hardware = true
    hardware_group = "arm"

    [[candidate]]
    id = "probe"
    role = "diagnosis"
    lens = "model"
    method = "probe"
    cost = { real_h = 0.2 }
""")


def write(tmp_path, text):
    p = tmp_path / "cands.toml"
    p.write_text(text)
    return p


def test_load_good_file(tmp_path):
    cs = load_candidates(write(tmp_path, GOOD))
    assert cs.ids == ["si", "probe"]
    assert cs.eval_protocol == "E1"
    assert cs["si"].changes_policy and not cs["probe"].changes_policy
    costs = cs.costs()
    assert costs.dims == ("candidate", "resource")
    assert costs.sel(candidate="probe", resource="compute") == 0.0
    assert costs.sel(candidate="si", resource="real_h") == 0.5
    np.testing.assert_array_equal(cs.budget.values, [10, 100, 5])
    attrs = cs.attributes()
    assert list(attrs["role"].values) == ["adaptation", "diagnosis"]


def _doc(**override):
    cand = {"id": "a", "role": "adaptation", "lens": "data", "method": "DR",
            "cost": {"compute": 1.0}}
    cand.update(override)
    return {"campaign": {"eval_protocol": "E"}, "candidate": [cand]}


@pytest.mark.parametrize("override, rule", [
    ({"role": "tuning"}, "role must be one of"),
    ({"lens": "physics"}, "lens must be one of"),
    ({"cost": {"gpu": 1.0}}, "unknown resource 'gpu'"),
    ({"cost": {"compute": -1.0}}, "must be >= 0"),
    ({"cost": {"compute": "lots"}}, "must be a finite number"),
    ({"changes_policy": False}, "contradicts role"),
    ({"colour": "red"}, "unknown key"),
    ({"drives_hardware": "yes"}, "must be true or false"),
])
def test_candidate_rules(override, rule):
    with pytest.raises(InputError, match=rule) as err:
        candidates_from_dict(_doc(**override), source="cands.toml")
    assert "cands.toml, row 0" in str(err.value)


def test_missing_field_and_duplicate_id():
    doc = _doc()
    del doc["candidate"][0]["method"]
    with pytest.raises(InputError, match=r"row 0: missing required field 'method'"):
        candidates_from_dict(doc)
    doc = _doc()
    doc["candidate"].append(dict(doc["candidate"][0]))
    with pytest.raises(InputError, match=r"row 1: duplicate candidate id 'a'"):
        candidates_from_dict(doc)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="not a valid TOML"):
        load_candidates(write(tmp_path, "[[candidate]\nid="))
    with pytest.raises(InputError, match="file not found"):
        load_candidates(tmp_path / "nope.toml")


def test_budget_parsing_and_rules():
    b = parse_budget("real_h=2, compute=10,eng_h=1", ["real_h", "compute", "eng_h"])
    assert b.sel(resource="compute") == 10
    with pytest.raises(InputError, match="expected resource=amount"):
        parse_budget("real_h:2", ["real_h"])
    with pytest.raises(InputError, match="expected a number"):
        parse_budget("real_h=two", ["real_h"])
    with pytest.raises(InputError, match="unknown resource"):
        make_budget({"real_h": 1, "gpu": 2}, ["real_h"])
    with pytest.raises(InputError, match="missing resource"):
        make_budget({"real_h": 1}, ["real_h", "compute"])
    with pytest.raises(InputError, match=">= 0"):
        make_budget({"real_h": -1}, ["real_h"])
