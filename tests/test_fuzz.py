"""Fuzzed inputs: malformed tables, candidate files, budgets and logs raise InputError only,
and nothing is written or changed; the campaign commands and every output path of the CLI
refuse malformed flags and unwritable paths with one line on stderr and exit code 2, before
any model is compiled, writing nothing and changing nothing that exists."""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
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
def valid_run(tmp_path_factory, fitter):
    """A finished two-step campaign folder (log, belief.nc, evidence, ...)."""
    from belief.campaign.loop import Campaign, CampaignSettings
    from belief.campaign.synthetic import SyntheticWorld
    from belief.posterior.fitter import FitSettings

    out = tmp_path_factory.mktemp("log")
    s = CampaignSettings(horizon=2, seed=4, fit=FitSettings(draws=200, tune=200),
                         act_on_unreliable=True, stability_resamples=20)
    Campaign(SyntheticWorld(seed=4), s, out, fitter).run()
    return out


@pytest.fixture(scope="module")
def valid_log(valid_run):
    return (valid_run / "campaign_log.jsonl").read_text().splitlines()


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



# -- the campaign commands and the output paths (issue 19) ----------------------------------------
RESOURCES = ("real_h", "compute", "eng_h")


def _refuses(check, text) -> bool:
    try:
        check(text)
    except (InputError, ValueError, TypeError):
        return True
    return False


def _int(text: str, minimum: int) -> None:
    if int(text) < minimum:
        raise ValueError


def _real(text: str, low: float, high: float = math.inf, open_low: bool = False) -> None:
    v = float(text)
    if not (math.isfinite(v) and (v > low if open_low else v >= low) and v <= high):
        raise ValueError


def _fraction(text: str) -> None:
    v = float(text)
    if not (0 < v < 1):
        raise ValueError


def _functional(text: str) -> None:
    from belief.decision.functional_registry import parse_functional

    parse_functional(text)


def _allocation(text: str) -> None:
    from belief.decision.allocation import check_policy

    check_policy(text)


def _gate(text: str) -> None:
    from belief.decision.safety import SafetyGate

    SafetyGate(method=text)


def _weights(text: str) -> None:
    from belief.decision.weights import FixedWeights

    FixedWeights.parse(text).bind(RESOURCES)


def _budget(text: str) -> None:
    parse_budget(text, RESOURCES)


_numbers = st.one_of(st.integers(-10**6, 10**6).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr))
_pairs = st.lists(st.tuples(st.sampled_from([*RESOURCES, "gpu", "", "real_h "]), _numbers),
                  max_size=4).map(lambda kv: ",".join(f"{k}={v}" for k, v in kv))
words = st.one_of(
    _numbers, _pairs,  # near misses: a number out of range, a resource vector with a flaw
    st.sampled_from(["mean", "lcb", "cvar"]).flatmap(
        lambda f: _numbers.map(lambda v: f"{f}:{v}")),
    st.text(string.printable, max_size=14),
    st.sampled_from(["", "nan", "inf", "-inf", "1e400", "0", "-1", "1.5", "abc", "lcb:1",
                     "cvar:0", "lcb:", "mean:2", "real_h=1", "real_h=1,real_h=2",
                     "real_h=-1,compute=1,eng_h=1", "real_h=1,compute=1,eng_h=nan", "gpu=1",
                     "=", ","]))


def bad(check) -> st.SearchStrategy[str]:
    """Flag values that ``check`` refuses (the oracle: the project's own parsers)."""
    return words.filter(lambda t: _refuses(check, t))


POS_INT, NONNEG_INT = bad(lambda t: _int(t, 1)), bad(lambda t: _int(t, 0))
FLAGS = {
    "demo": {"--steps": POS_INT, "--draws": POS_INT, "--seed": NONNEG_INT,
             "--functional": bad(_functional), "--beta": bad(lambda t: _real(t, 0.0)),
             "--allocation": bad(_allocation), "--gate": bad(_gate)},
    "manual": {"--steps": POS_INT, "--draws": POS_INT, "--seed": NONNEG_INT,
               "--beta": bad(lambda t: _real(t, 0.0)), "--weights": bad(_weights),
               "--gate": bad(_gate)},
    "replay": {"--draws": POS_INT, "--seed": NONNEG_INT, "--beta": bad(lambda t: _real(t, 0.0)),
               "--functional": bad(_functional), "--alpha-exec": bad(_fraction),
               "--weights": bad(_weights), "--workers": POS_INT, "--gate": bad(_gate)},
    "fit": {"--draws": POS_INT, "--chains": POS_INT, "--tune": POS_INT, "--step": NONNEG_INT},
    "decide": {"--budget": bad(_budget), "--weights": bad(_weights),
               "--functional": bad(_functional), "--beta": bad(lambda t: _real(t, 0.0)),
               "--alpha-exec": bad(_fraction), "--delta": bad(_fraction),
               "--horizon": POS_INT, "--gate": bad(_gate),
               "--cvu-outcomes": bad(lambda t: _int(t, 2))},
    "report": {"--alpha-deploy": bad(_fraction), "--beta": bad(lambda t: _real(t, 0.0))},
}
# output paths that cannot be written, relative to the arena (``ro`` refuses writes)
FOLDER_OUTS = ["afile", "afile/sub", "afile/a/b", "ro", "ro/new"]
OUTS = {"demo": [*FOLDER_OUTS, "mine", "run"], "manual": [*FOLDER_OUTS, "mine", "run"],
        "replay": FOLDER_OUTS, "decide": FOLDER_OUTS,
        "fit": ["folder", "afile/b.nc", "b.txt", "ro/b.nc", "folder/"],
        "report": ["folder", "afile/r.html", "r.pdf", "ro/r.html", "rep.md"]}


@pytest.fixture(scope="module")
def arena(tmp_path_factory, valid_run):
    """A folder with everything the commands read, files in the way of their outputs, a
    folder that refuses writes (``ro``), a user's folder (``mine``) and a campaign (``run``)."""
    from belief.inputs.example import example_paths

    root = tmp_path_factory.mktemp("arena")
    evidence, candidates = example_paths()
    shutil.copytree(evidence, root / "evidence")
    shutil.copy(candidates, root / "cands.toml")
    shutil.copytree(valid_run, root / "run")
    (root / "afile").write_text("a user's file")
    (root / "folder").mkdir()
    (root / "folder" / "keep.txt").write_text("keep")
    (root / "ro").mkdir()
    (root / "mine").mkdir()
    (root / "mine" / "candidates.toml").write_text("# a user's own file")
    (root / "rep_files").write_text("a file where the report's figures would go")
    return root


def _argv(root, command: str, flag: str | None, value: str | None, out: str) -> list[str]:
    base = {"demo": ["demo", "--steps", "1", "--draws", "50"],
            "manual": ["manual", "--candidates", str(root / "cands.toml"), "--steps", "1"],
            "replay": ["replay", str(root / "run")],
            "fit": ["fit", str(root / "evidence"), "--candidates", str(root / "cands.toml")],
            "decide": ["decide", str(root / "run" / "belief.nc")],
            "report": ["report", str(root / "run" / "belief.nc")]}[command]
    argv = [*base, "--out", out]
    if flag is not None:
        argv += [flag, value]
    return argv


@st.composite
def malformed_commands(draw):
    """A command with exactly one malformed flag or one unwritable output path."""
    command = draw(st.sampled_from(sorted(FLAGS)))
    if draw(st.booleans()):
        flag = draw(st.sampled_from(sorted(FLAGS[command])))
        return command, flag, draw(FLAGS[command][flag]), None
    return command, None, None, draw(st.sampled_from(OUTS[command]))


def _tree(root):
    """Every entry under ``root`` with its bytes' hash and mtime (folders: their entries)."""
    import hashlib

    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(p.read_bytes()).hexdigest()
                                       + f"@{p.stat().st_mtime_ns}")
            for p in sorted(root.rglob("*"))}


def test_campaign_commands_and_outputs_refuse_cleanly(arena, monkeypatch, capsys, no_compute):
    from belief.cli.main import main

    real_access = os.access
    ro = str(arena / "ro")
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if str(p) == ro and mode & os.W_OK else real_access(p, mode, **kw)))
    before = _tree(arena)

    @settings(FUZZ, max_examples=200)
    @given(malformed_commands())
    def run(case):
        command, flag, value, out = case
        target = str(arena / (out or "fresh"))
        if command == "report" and out is None:
            target = str(arena / "fresh.html")
        argv = _argv(arena, command, flag, value, target)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: a value it cannot even parse
            code = exc.code
        err = capsys.readouterr().err.strip()
        assert code == 2, (argv, err)
        assert err and "\n" not in err and ": error: " in err, (argv, err)
        assert "Traceback" not in err
        assert _tree(arena) == before, argv  # nothing written, nothing existing changed

    run()


@FUZZ
@given(st.text(max_size=300))
def test_manual_refuses_fuzzed_candidate_files_before_anything(tmp_path_factory, text):
    from belief.cli.main import main
    from belief.inputs.candidate_file import parse_candidate_text

    try:
        parse_candidate_text(text, "c.toml")
    except InputError:
        pass
    else:  # a valid file would start a campaign: not this test's business
        return
    root = tmp_path_factory.mktemp("manual_fuzz")
    (root / "c.toml").write_text(text, encoding="utf-8", errors="surrogateescape")
    before = _tree(root)
    code = main(["manual", "--candidates", str(root / "c.toml"), "--out", str(root / "m")])
    assert code == 2
    assert _tree(root) == before
