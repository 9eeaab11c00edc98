"""Fuzzed inputs: malformed tables, candidate files, budgets and logs raise InputError only,
and nothing is written or changed."""

from __future__ import annotations

import inspect
import json
import math
import string

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belief.errors import InputError
from belief.inputs.candidate_file import load_candidates
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.evidence import Evidence
from belief.inputs.resources import make_budget, parse_budget
from belief.inputs.tables import (
    GAIN_ESTIMATE_COLUMNS,
    PAIRED_COLUMNS,
    POLICY_EVAL_COLUMNS,
    SAFETY_COLUMNS,
    validate_gain_estimates,
    validate_paired,
    validate_policy_evals,
    validate_safety,
)

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

cell = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                 st.floats(allow_nan=True, allow_infinity=True),
                 st.text(string.printable, max_size=12),
                 st.sampled_from(["dr_1e6", "ft_real_100", "latency_probe", "pi0", "pi1",
                                  "pick_place_v1", "other", "3", "-1", "1.5"]))

TABLES = [(validate_paired, PAIRED_COLUMNS), (validate_safety, SAFETY_COLUMNS),
          (validate_policy_evals, POLICY_EVAL_COLUMNS),
          (validate_gain_estimates, GAIN_ESTIMATE_COLUMNS)]


@st.composite
def frames(draw, columns):
    cols = draw(st.lists(st.sampled_from([*columns, "treated_policy", "extra"]), unique=True,
                         min_size=0, max_size=len(columns) + 2))
    n = draw(st.integers(0, 4))
    return pd.DataFrame({c: [draw(cell) for _ in range(n)] for c in cols})


@pytest.mark.parametrize("validate, columns", TABLES, ids=[t[0].__name__ for t in TABLES])
def test_evidence_validators_raise_only_input_error(validate, columns, world_candidates):
    @FUZZ
    @given(frames(columns))
    def run(df):
        try:
            out = validate(df, world_candidates)
        except InputError as err:  # names the table (the validator's default), row and rule
            table = inspect.signature(validate).parameters["table"].default
            assert err.table.startswith(table) and err.rule
            assert str(err).startswith(f"{err.table}, row {err.row}: " if err.row is not None
                                       else f"{err.table}: ")
            return
        assert isinstance(out, pd.DataFrame)

    run()


def test_evidence_append_is_all_or_nothing(world_candidates):
    ev = Evidence(world_candidates)

    @FUZZ
    @given(frames(PAIRED_COLUMNS), frames(SAFETY_COLUMNS))
    def run(paired, safety):
        try:
            new = ev.append(paired=paired, safety=safety)
        except InputError:
            new = None
        assert len(ev.paired) == 0 and len(ev.safety) == 0  # the original never changes
        if new is not None:
            assert len(new.paired) == len(paired) or len(paired) == 0

    run()


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
              st.text(string.ascii_letters + "_", max_size=8)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(string.ascii_letters + "_", max_size=8),
                                               children, max_size=4)),
    max_leaves=12)


@st.composite
def candidate_docs(draw):
    base = {"id": draw(st.sampled_from(["a", "b", "", 3])),
            "role": draw(st.sampled_from(["adaptation", "diagnosis", "model_update", "x", 1])),
            "lens": draw(st.sampled_from(["model", "data", "representation", "optimization",
                                          "none"])),
            "method": draw(st.sampled_from(["DR", "", None])),
            "cost": draw(st.one_of(st.dictionaries(
                st.sampled_from(["real_h", "compute", "eng_h", "gpu"]),
                st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3),
                          st.text(max_size=3)), max_size=3), json_values))}
    for key in draw(st.lists(st.sampled_from(["drives_hardware", "repeatable", "targets",
                                              "informs", "measurement_se", "hardware_group",
                                              "changes_policy", "colour"]), max_size=3)):
        base[key] = draw(json_values)
    for key in draw(st.lists(st.sampled_from(list(base)), max_size=2)):
        base.pop(key, None)
    doc = {"campaign": draw(st.one_of(st.just({"eval_protocol": "E"}), json_values)),
           "candidate": draw(st.one_of(st.lists(st.just(base), max_size=2), json_values))}
    if draw(st.booleans()):
        doc["budget"] = draw(json_values)
    return doc


@FUZZ
@given(candidate_docs())
def test_candidate_documents_raise_only_input_error(doc):
    try:
        candidates_from_dict(doc, source="fuzz.toml")
    except InputError as err:
        assert str(err).startswith("fuzz.toml")


@FUZZ
@given(st.text(max_size=200))
def test_candidate_files_raise_only_input_error(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    try:
        load_candidates(path)
    except InputError:
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@FUZZ
@given(st.text(string.printable, max_size=60))
def test_budget_strings_raise_only_input_error(text):
    try:
        b = parse_budget(text, ["real_h", "compute", "eng_h"])
    except InputError:
        return
    assert all(math.isfinite(v) and v >= 0 for v in b.values)


@FUZZ
@given(st.dictionaries(st.text(max_size=8), st.one_of(st.floats(allow_nan=True),
                                                       st.integers(), st.text(max_size=3),
                                                       st.none()), max_size=4))
def test_budget_mappings_raise_only_input_error(values):
    try:
        b = make_budget(values, ["real_h", "compute"])
    except InputError:
        return
    assert list(b["resource"].values) == ["real_h", "compute"]
    assert all(math.isfinite(v) and v >= 0 for v in b.values)


@pytest.fixture(scope="module")
def valid_log(tmp_path_factory, fitter):
    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.synthetic import SyntheticWorld
    from belief.posterior.fitter import FitSettings

    out = tmp_path_factory.mktemp("log")
    s = CampaignSettings(horizon=2, seed=4, fit=FitSettings(draws=200, tune=200),
                         act_on_unreliable=True, stability_resamples=20)
    Campaign(SyntheticWorld(seed=4), s, out, fitter).run()
    return (out / "campaign_log.jsonl").read_text().splitlines()


@st.composite
def mutated_logs(draw, lines):
    recs = [json.loads(x) for x in lines]
    i = draw(st.integers(0, len(recs) - 1))
    rec = recs[i]
    key = draw(st.sampled_from(sorted(rec)))
    rec[key] = draw(json_values)
    text = [json.dumps(r) for r in recs]
    if draw(st.booleans()):
        j = draw(st.integers(0, len(text) - 1))
        text[j] = text[j][: draw(st.integers(0, len(text[j])))]
    return "\n".join(text) + draw(st.sampled_from(["\n", ""]))


def test_logs_raise_only_input_error_and_write_nothing(valid_log, tmp_path):
    from belief.campaign.log import read_log
    from belief.campaign.replay import load_campaign

    @FUZZ
    @given(st.one_of(mutated_logs(valid_log), st.binary(max_size=300).map(
        lambda b: b.decode("latin-1"))))
    def run(text):
        folder = tmp_path / "fuzzlog"
        folder.mkdir(exist_ok=True)
        path = folder / "campaign_log.jsonl"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        data = path.read_bytes()
        for fn in (read_log, load_campaign):
            try:
                fn(path)
            except InputError as err:
                assert str(path) in str(err)
        assert path.read_bytes() == data
        assert [p.name for p in folder.iterdir()] == ["campaign_log.jsonl"]

    run()


def test_replay_cli_on_fuzzed_logs_exits_cleanly(valid_log, tmp_path, capsys):
    from belief.cli.main import main

    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.binary(max_size=200))
    def run(blob):
        path = tmp_path / "x.jsonl"
        path.write_bytes(blob)
        out = tmp_path / "never"
        assert main(["replay", str(path), "--out", str(out)]) == 2
        assert not out.exists()
        assert "Traceback" not in capsys.readouterr().err

    run()

