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
