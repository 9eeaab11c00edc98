"""Python API of the statistician's path: evidence folders, costs, policy rule, persistence."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import xarray as xr

import belief
from belief.campaign.example import write_example
from belief.errors import InputError
from belief.inputs.candidate_file import (
    candidates_toml,
    diff_candidates,
    load_candidate_file,
    parse_candidate_text,
)
from belief.inputs.evidence_dir import infer_policy, read_evidence_dir
from belief.inputs.example import example_paths

EVIDENCE, CANDIDATES = example_paths()


@pytest.fixture(scope="module")
def example_fit(fitter):
    """belief.fit on the shipped example with the session's compiled fitter."""
    return belief.fit(EVIDENCE, CANDIDATES, fitter=fitter, seed=3)


def test_save_load_round_trip_is_exact(example_fit, tmp_path):
    path = example_fit.save(tmp_path / "b.nc")
    back = belief.load(path)
    xr.testing.assert_identical(back.belief, example_fit.belief)
    paths = [node.path for node in example_fit.idata.subtree]
    assert paths == [node.path for node in back.idata.subtree]
    for p in paths:
        xr.testing.assert_identical(back.idata[p].to_dataset(inherit=False),
                                    example_fit.idata[p].to_dataset(inherit=False))
    assert back.idata["sensitivity"].attrs["standardisation"]  # model-level attrs survive
    assert back.settings == example_fit.settings
    assert back.candidates.text == example_fit.candidates.text
    for name, table in example_fit.evidence.tables().items():
        pd.testing.assert_frame_equal(back.evidence.tables()[name].reset_index(drop=True),
                                      table.reset_index(drop=True), check_dtype=False)
    pd.testing.assert_frame_equal(back.costs, example_fit.costs, check_dtype=False)
    assert back.sensitivity_reports().keys() == example_fit.sensitivity_reports().keys()


def _edited(path, tmp_path, name, **attrs):
    """A copy of ``path`` with root attributes replaced (in place with h5py: fast)."""
    import h5py

    out = tmp_path / name
    shutil.copy(path, out)
    with h5py.File(out, "r+") as f:
        for key, value in attrs.items():
            f.attrs[key] = value
    return out


def test_load_checks_settings_and_candidate_hash(example_fit, tmp_path):
    path = example_fit.save(tmp_path / "b.nc")
    text = example_fit.candidates.text.replace("0.01", "0.02")
    with pytest.raises(InputError, match="does not match its SHA-256"):
        belief.load(_edited(path, tmp_path, "edited.nc", candidates_toml=text))
    settings = dict(example_fit.settings, step=7)
    with pytest.raises(InputError, match=r"settings \(policy 'pi2', step 7\) disagree"):
        belief.load(_edited(path, tmp_path, "step.nc", settings=json.dumps(settings)))
    del settings["priors"]
    with pytest.raises(InputError, match=r"settings lack \['priors'\]"):
        belief.load(_edited(path, tmp_path, "nopriors.nc", settings=json.dumps(settings)))
    with pytest.raises(InputError, match="not valid JSON"):
        belief.load(_edited(path, tmp_path, "json.nc", settings="{draws: 3"))


def test_bare_save_belief_file_needs_candidates(example_fit, tmp_path):
    from belief.workflow.belief_file import save_belief

    path = save_belief(tmp_path / "bare.nc", example_fit.belief, example_fit.idata)
    with pytest.raises(InputError, match="holds no candidate set"):
        belief.load(path)
    fitted = belief.load(path, CANDIDATES)
    decision = fitted.decide(beta=0.0)
    assert decision.attrs["chosen"] in [*fitted.candidate_set.ids, "(stop)"]
    again = belief.load(fitted.save(tmp_path / "again.nc"))  # now with its candidate set
    assert again.settings == {} and again.candidates.text == fitted.candidates.text


def test_decide_takes_settings_or_changes_never_both(example_fit):
    from belief.decision.settings import DecisionSettings, settings_from_options
    from belief.workflow.fitted import DECIDE_CHANGES

    with pytest.raises(InputError, match=r"^settings: .*settings= or as changes "
                                         r"\(functional=, beta=\), not both"):
        example_fit.decide(DecisionSettings(beta=0.0), functional="lcb:0.2", beta=0.0)
    with pytest.raises(TypeError, match=r"\['betta'\].*functional, beta, alpha_exec"):
        example_fit.decide(betta=0.0)
    assert {"functional", "beta", "cvu_outcomes", "max_refits"} <= set(DECIDE_CHANGES)
    # the changes build the settings the caller could have built: the same decision
    by_changes = example_fit.decide(functional="lcb:0.2", beta=0.0, stability_resamples=0)
    built = settings_from_options(**{**DECIDE_CHANGES, "functional": "lcb:0.2", "beta": 0.0,
                                     "stability_resamples": 0})
    by_settings = example_fit.decide(built)
    assert by_changes.attrs["functional"] == "lcb:0.2" == by_settings.attrs["functional"]
    xr.testing.assert_identical(by_changes.drop_attrs(), by_settings.drop_attrs())


def test_the_model_registry_is_what_a_fit_stores_and_the_fitter_holds(example_fit):
    import dataclasses

    from belief.posterior.fitter import BeliefFitter
    from models.registry import MODELS

    assert set(example_fit.settings["priors"]) == {m.name for m in MODELS}
    fields = {f.name for f in dataclasses.fields(BeliefFitter)}
    assert all(m.fitter_field in fields for m in MODELS if m.fed_by == "fitter")
    fitter = example_fit._fitter()  # rebuilt from the stored priors through the registry
    for m in MODELS:
        assert fitter.priors_of(m.name) == m.priors(**example_fit.settings["priors"][m.name])
        if m.fitter_field is not None:
            assert getattr(fitter, m.fitter_field) == fitter.priors_of(m.name)
    old = {k: v for k, v in example_fit.settings["priors"].items() if k != "costs"}
    gains = {k: v for k, v in old["gains"].items() if k != "order_effects"}
    by_name = {m.name: m for m in MODELS}
    assert by_name["costs"].stored_priors(old) == by_name["costs"].priors()  # older file
    assert by_name["gains"].stored_priors({"gains": gains}).order_effects is False


def test_refit_option_re_samples_where_khat_is_high(example_fit):
    decision = example_fit.decide(cvu_outcomes=8, refit=True)
    assert decision.attrs["cvu_refits"].startswith("exact refits")
    assert set(decision["cvu_method"].values) <= {
        "psis", "psis+cv", "psis+refit", "psis+cv+refit", "regression", "regression+ls",
        "no outcome", "not computed"}


def test_parquet_tables_read_like_csv(tmp_path):
    cands = load_candidate_file(CANDIDATES).candidates
    ev = tmp_path / "ev"
    shutil.copytree(EVIDENCE, ev)
    for name in ("paired_evaluations", "sensitivity_runs", "costs"):
        pd.read_csv(ev / f"{name}.csv").to_parquet(ev / f"{name}.parquet")
        (ev / f"{name}.csv").unlink()
    (ev / "notes.txt").write_text("not a table")
    a = read_evidence_dir(EVIDENCE, cands)
    b = read_evidence_dir(ev, cands)
    assert b.ignored == ["notes.txt"]
    for name, table in a.evidence.tables().items():
        pd.testing.assert_frame_equal(b.evidence.tables()[name], table, check_dtype=False)
    pd.testing.assert_frame_equal(b.costs, a.costs, check_dtype=False)
    (ev / "costs.csv").write_text("step,candidate,real_h,compute,eng_h\n")
    with pytest.raises(InputError, match="table 'costs' is given twice"):
        read_evidence_dir(ev, cands)


def test_costs_budget_and_history_rules():
    from belief.inputs.costs import executed_actions, remaining_budget, validate_costs

    cands = load_candidate_file(CANDIDATES).candidates
    costs = validate_costs(pd.DataFrame({"step": [0, 1], "candidate": ["dr_1e6", "cotrain"],
                                         "real_h": [0, 3.5], "compute": [10, 60],
                                         "eng_h": [0.5, 5]}), cands)
    left = remaining_budget(cands, costs)
    assert left.sel(resource="real_h").item() == 12 - 3.5
    assert executed_actions(costs) == ["dr_1e6", "cotrain"]
    paired = pd.DataFrame({"step": [0], "candidate": ["si_friction"]})
    assert executed_actions(costs.iloc[:0], paired) == ["si_friction"]  # fallback: no costs
    assert executed_actions(costs.iloc[:0], paired, costs_complete=True) == []
    over = costs.assign(compute=[250.0, 60.0])  # an overrun: clamped at 0, as a campaign does
    clamped = remaining_budget(cands, over)
    assert clamped.sel(resource="compute").item() == 0.0
    assert clamped.attrs["overspent"] == "compute: spent 310 > budget 300"
    with pytest.raises(InputError, match=r"costs, row 1: real_h must be >= 0"):
        validate_costs(costs.assign(real_h=[0.0, -1.0]), cands)
    with pytest.raises(InputError, match=r"missing required column\(s\) \['eng_h'\]"):
        validate_costs(costs.drop(columns="eng_h"), cands)
    with pytest.raises(InputError, match="unknown candidate 'dr_9'"):
        validate_costs(costs.assign(candidate=["dr_9", "cotrain"]), cands)


def test_current_policy_rule():
    cands = load_candidate_file(CANDIDATES).candidates
    tables = read_evidence_dir(EVIDENCE, cands)
    assert infer_policy(tables.evidence)[0] == "pi2"
    only_baseline = belief.Evidence(cands).append(
        policy_evals=tables.evidence.policy_evals)
    assert infer_policy(only_baseline) == ("pi0", "the single policy evaluated (no paired "
                                                      "evaluations)")
    two = only_baseline.append(policy_evals=tables.evidence.policy_evals.assign(policy="pi_x"))
    with pytest.raises(InputError, match="several evaluated policies"):
        infer_policy(two)
    with pytest.raises(InputError, match="cannot tell the current policy"):
        infer_policy(belief.Evidence(cands))


def test_candidates_toml_round_trip_and_diff(world_candidates):
    text = candidates_toml(world_candidates, {"real_h": 0.01, "compute": 0.0, "eng_h": 1})
    back = parse_candidate_text(text, "t.toml")
    assert diff_candidates(world_candidates, back.candidates) == []
    assert back.weights == {"real_h": 0.01, "compute": 0.0, "eng_h": 1.0}
    with pytest.raises(InputError, match=r"t.toml \[weights\]: unknown resource\(s\) \['gpu'\]"):
        parse_candidate_text(text.replace("eng_h = 1.0\n", "eng_h = 1.0\ngpu = 2.0\n", 1),
                                  "t.toml")


def test_example_generator_writes_valid_tables(tmp_path):
    ev, toml = write_example(tmp_path / "ex")
    cf = load_candidate_file(toml)
    tables = read_evidence_dir(ev, cf.candidates)
    assert tables.rows() == read_evidence_dir(EVIDENCE, cf.candidates).rows()
    assert cf.weights is not None and cf.candidates.budget is not None
    assert sorted(p.name for p in ev.iterdir()) == sorted(p.name for p in EVIDENCE.iterdir())


def test_header_only_paired_table_before_any_adaptation(tmp_path):
    cands = load_candidate_file(CANDIDATES).candidates
    ev = tmp_path / "ev"
    ev.mkdir()
    header = pd.read_csv(EVIDENCE / "paired_evaluations.csv").iloc[:0]
    header.to_csv(ev / "paired_evaluations.csv", index=False)
    shutil.copy(EVIDENCE / "policy_evaluations.csv", ev)
    tables = read_evidence_dir(ev, cands)
    assert len(tables.evidence.paired) == 0 and len(tables.costs) == 0
    assert infer_policy(tables.evidence)[0] == "pi0"
    (ev / "paired_evaluations.csv").write_text("")
    with pytest.raises(InputError, match=r"paired_evaluations\.csv: cannot read"):
        read_evidence_dir(ev, cands)


def test_decide_takes_an_effort_level_under_the_explicit_changes(example_fit):
    """``effort=`` sets the level's CVU preset (as ``--effort``); an explicit CVU change wins
    over it; an unknown level and ``effort`` with ``settings=`` are refused naming them."""
    from belief.decision.settings import EFFORTS, DecisionSettings, settings_from_options
    from belief.workflow.fitted import DECIDE_CHANGES, _with_effort

    base = settings_from_options(**DECIDE_CHANGES)
    fast, refit = _with_effort(base, "fast", {}, None)
    assert (fast.cvu.n_outcomes, fast.cvu.channel_split, refit) == (64, False, False)
    thorough, refit = _with_effort(base, "thorough", {}, None)
    assert refit and thorough.cvu.continuation == "lookahead2"
    assert thorough.cvu.inner_outcomes == EFFORTS["thorough"].cvu["inner_outcomes"]
    given = settings_from_options(**{**DECIDE_CHANGES, "cvu_outcomes": 96})
    mixed, _ = _with_effort(given, "thorough", {"cvu_outcomes": 96}, None)
    assert (mixed.cvu.n_outcomes, mixed.cvu.continuation) == (96, "lookahead2")
    assert _with_effort(base, "default", {}, None)[0] == base  # the default level: defaults
    assert _with_effort(base, "thorough", {}, False)[1] is False  # refit= given wins
    with pytest.raises(InputError, match=r"^effort: .*fast.*default.*thorough"):
        example_fit.decide(effort="slow", beta=0.0)
    with pytest.raises(InputError, match=r"^settings: .*\(effort=\), not both"):
        example_fit.decide(DecisionSettings(beta=0.0), effort="fast")
    d = example_fit.decide(effort="fast", stability_resamples=0)
    assert int(d.attrs["cvu_outcomes"]) == 64
