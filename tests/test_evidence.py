from __future__ import annotations

import pandas as pd
import pytest

from belief.errors import InputError
from belief.inputs.evidence import Evidence
from belief.inputs.lineage import policy_tree
from belief.inputs.tables import validate_paired, validate_safety


def row(**kw):
    base = {"step": 0, "candidate": "dr_1e6", "policy": "pi0", "eval_protocol": "pick_place_v1",
            "control_successes": 30, "control_trials": 100, "treated_successes": 40,
            "treated_trials": 100}
    base.update(kw)
    return base


def test_valid_table_and_default_treated_policy(world_candidates):
    out = validate_paired(pd.DataFrame([row()]), world_candidates)
    assert out["treated_policy"].tolist() == ["pi0+dr_1e6"]
    assert out["control_trials"].dtype.kind == "i"


@pytest.mark.parametrize("bad, rule", [
    ({"control_successes": -1}, "must be >= 0"),
    ({"treated_successes": 101}, "treated_successes (101) exceed treated_trials (100)"),
    ({"control_trials": 10.5}, "must be an integer count"),
    ({"control_trials": "ten"}, "must be an integer count"),
    ({"candidate": "dr_1e9"}, "unknown candidate 'dr_1e9'"),
    ({"candidate": "latency_probe"}, "paired evaluations are for policy-changing candidates"),
    ({"eval_protocol": "other"}, "differs from the campaign's shared protocol"),
    ({"policy": None}, "policy is missing"),
    ({"step": -2}, "step must be >= 0 (negative count -2)"),
])
def test_each_rule_names_table_row_and_rule(world_candidates, bad, rule):
    df = pd.DataFrame([row(), row(**{"step": 1, **bad})])
    with pytest.raises(InputError) as err:
        validate_paired(df, world_candidates)
    msg = str(err.value)
    assert msg.startswith("paired_evaluations, row 1: ")
    assert rule in msg


def test_missing_column(world_candidates):
    df = pd.DataFrame([row()]).drop(columns=["treated_trials"])
    with pytest.raises(InputError, match=r"paired_evaluations: missing required column\(s\) "
                                         r"\['treated_trials'\]"):
        validate_paired(df, world_candidates)


def test_lineage_rules(world_candidates):
    df = pd.DataFrame([row(treated_policy="pi1"),
                       row(step=1, candidate="dr_1e7", treated_policy="pi1")])
    with pytest.raises(InputError, match="row 1: treated_policy 'pi1' is produced by"):
        validate_paired(df, world_candidates)
    df = pd.DataFrame([row(treated_policy="pi0")])
    with pytest.raises(InputError, match="equals its control policy"):
        validate_paired(df, world_candidates)
    df = pd.DataFrame([row(policy="a", treated_policy="b"), row(policy="b", treated_policy="a")])
    with pytest.raises(InputError, match="cycle"):
        validate_paired(df, world_candidates)


def test_policy_tree_order_and_ancestors(world_candidates):
    df = validate_paired(pd.DataFrame([
        row(policy="pi1", treated_policy="pi2", step=1),
        row(policy="pi0", treated_policy="pi1", candidate="si_friction")]), world_candidates)
    tree = policy_tree(df, extra=("other",))
    assert tree.policies.index("pi0") < tree.policies.index("pi1") < tree.policies.index("pi2")
    assert tree.ancestors("pi2") == ["pi2", "pi1", "pi0"]
    assert tree.via["pi1"] == "si_friction"


def test_append_validates_and_keeps_original(world_candidates):
    ev = Evidence(world_candidates)
    ev2 = ev.append(paired=pd.DataFrame([row()]))
    assert len(ev.paired) == 0 and len(ev2.paired) == 1
    with pytest.raises(InputError, match=r"paired_evaluations \(new rows\), row 0"):
        ev2.append(paired=pd.DataFrame([row(control_successes=500)]))
    assert len(ev2.paired) == 1


def test_append_validates_the_joined_table_and_leaves_the_others(world_candidates, monkeypatch):
    """An appended row is checked against the old rows (a duplicate, a second producer of a
    treated policy), the result equals an Evidence built from the joined tables, and the
    tables that did not change are not validated again."""
    import belief.inputs.evidence as evidence_module

    safety = pd.DataFrame([{"step": 0, "candidate": "ft_real_100", "executions": 10,
                            "unsafe": 1}])
    ev = Evidence(world_candidates, paired=pd.DataFrame([row()]), safety=safety)
    with pytest.raises(InputError, match=r"paired_evaluations, row 1: exact duplicate of row 0"):
        ev.append(paired=pd.DataFrame([row()]))
    with pytest.raises(InputError, match="paired_evaluations"):  # pi0+dr_1e6 made twice
        ev.append(paired=pd.DataFrame([row(candidate="dr_1e7", treated_policy="pi0+dr_1e6",
                                           step=1)]))
    new = pd.DataFrame([row(step=1, policy="pi0+dr_1e6", candidate="si_friction")])
    calls: list[str] = []

    def counted(validate):
        def run(df, candidates, table):
            calls.append(table)
            return validate(df, candidates, table)
        return run

    tables = {name: (attr, counted(v)) for name, (attr, v) in evidence_module.TABLES.items()}
    monkeypatch.setattr(evidence_module, "TABLES", tables)
    got = ev.append(paired=new)
    assert calls == ["paired_evaluations (new rows)", "paired_evaluations"]
    monkeypatch.undo()
    built = Evidence(world_candidates, paired=pd.DataFrame([row(), *new.to_dict("records")]),
                     safety=safety)
    for name, table in built.tables().items():
        pd.testing.assert_frame_equal(got.tables()[name], table)


def test_safety_rules(world_candidates):
    ok = pd.DataFrame([{"step": 0, "candidate": "ft_real_100", "executions": 10, "unsafe": 1}])
    assert validate_safety(ok, world_candidates)["unsafe"].tolist() == [1]
    bad = ok.assign(unsafe=11)
    with pytest.raises(InputError, match=r"safety_events, row 0: unsafe \(11\) exceeds"):
        validate_safety(bad, world_candidates)
    bad = ok.assign(candidate="dr_1e6")
    with pytest.raises(InputError, match="does not drive hardware"):
        validate_safety(bad, world_candidates)
    ev = Evidence(world_candidates, safety=ok)
    n, k = ev.safety_counts()
    assert n[world_candidates.index("ft_real_100")] == 10 and k.sum() == 1


def test_until_filters_by_step(campaign_evidence):
    ev, _ = campaign_evidence
    assert len(ev.until(2).paired) == 2
    assert (ev.until(2).safety["step"] < 2).all()


# -- simulated paired evaluations: an optional table of Evidence and of evidence folders ----
def sim_row(**kw):
    return row(**{"step": 1, "candidate": "dr_1e7", "control_successes": 50,
                  "treated_successes": 62, **kw})


def test_sim_paired_is_an_optional_validated_evidence_table(world_candidates):
    ev = Evidence(world_candidates)
    assert len(ev.sim_paired) == 0
    assert "sim_paired_evaluations" not in ev.tables()  # omitted while empty
    ev2 = ev.append(sim_paired=pd.DataFrame([sim_row(), sim_row(step=3, run_id="b")]))
    assert len(ev2.sim_paired) == 2 and len(ev.sim_paired) == 0
    assert ev2.tables()["sim_paired_evaluations"] is ev2.sim_paired
    assert ev2.sim_paired["treated_policy"].tolist() == ["pi0+dr_1e7", "pi0+dr_1e7"]
    assert len(ev2.until(2).sim_paired) == 1
    again = Evidence.from_tables(world_candidates, ev2.tables())
    pd.testing.assert_frame_equal(again.sim_paired, ev2.sim_paired)
    with pytest.raises(InputError) as err:
        Evidence(world_candidates, sim_paired=pd.DataFrame(
            [sim_row(), sim_row(eval_protocol="sim_only")]))
    assert str(err.value).startswith("sim_paired_evaluations, row 1: eval_protocol 'sim_only'")
    # one run, one row (as in paired_evaluations); a run_id tells runs apart
    with pytest.raises(InputError, match=r"^sim_paired_evaluations \(new rows\), row 1: "):
        ev.append(sim_paired=pd.DataFrame([sim_row(), sim_row()]))
    with pytest.raises(InputError, match=r"^sim_paired_evaluations, row 3: run_id 'c' is also "
                                         r"on row 2: a run is one row"):
        ev2.append(sim_paired=pd.DataFrame([sim_row(step=3, run_id="c")])).append(
            sim_paired=pd.DataFrame([sim_row(step=3, run_id="c")]))


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_an_evidence_folder_reads_sim_paired_evaluations(world_candidates, tmp_path, suffix):
    from belief.inputs.evidence_dir import read_evidence_dir

    pd.DataFrame([row()]).to_csv(tmp_path / "paired_evaluations.csv", index=False)
    sim = pd.DataFrame([sim_row(), sim_row(candidate="dr_1e6", run_id="x")])
    path = tmp_path / f"sim_paired_evaluations{suffix}"
    sim.to_csv(path, index=False) if suffix == ".csv" else sim.to_parquet(path)
    tables = read_evidence_dir(tmp_path, world_candidates)
    assert tables.evidence.sim_paired["candidate"].tolist() == ["dr_1e7", "dr_1e6"]
    assert tables.rows()["sim_paired_evaluations"] == 2
    assert tables.files["sim_paired_evaluations"] == str(path)


def test_a_bad_sim_table_in_a_folder_names_file_row_line_and_rule(world_candidates, tmp_path):
    from belief.inputs.evidence_dir import read_evidence_dir

    pd.DataFrame([row()]).to_csv(tmp_path / "paired_evaluations.csv", index=False)
    path = tmp_path / "sim_paired_evaluations.csv"
    pd.DataFrame([sim_row(), sim_row(treated_successes=120)]).to_csv(path, index=False)
    with pytest.raises(InputError) as err:
        read_evidence_dir(tmp_path, world_candidates)
    assert str(err.value) == (f"{path}, row 1 (line 3 of the file): treated_successes (120) "
                              "exceed treated_trials (100)")
    pd.DataFrame([sim_row(treatd_policy="x")]).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"unknown column 'treatd_policy' \(did you mean "
                                         r"'treated_policy'\?\)"):
        read_evidence_dir(tmp_path, world_candidates)
