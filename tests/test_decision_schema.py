"""The decision Dataset has exactly the variables and attributes of ``belief.decision.schema``.

Real decisions of every kind the engine produces (no CVU; one-step CVU with its channel split;
a non-myopic continuation; uncertain costs; transfer draws; a fitted belief's decision written
to and read from a file) are checked against the schema: nothing undeclared, nothing missing
that is always present, the declared dims and types.  The generated reference page lists every
declaration.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from belief.decision import schema
from belief.decision.cvu import cvu_for_state
from belief.decision.cvu.channels import CHANNEL_COLUMNS
from belief.decision.engine import decide, decision_table
from belief.decision.schema import (
    ATTRIBUTES,
    FROM_CVU,
    TABLE_COLUMNS,
    VARIABLES,
    Attrs,
    Vars,
    check_decision,
    per_resource,
    schema_problems,
)
from belief.decision.settings import CVUSettings, DecisionSettings
from belief.decision.state import State
from belief.inputs.candidates import candidates_from_dict
from belief.inputs.resources import make_budget
from belief.posterior.belief_state import make_belief
from belief.posterior.experiments import Experiment
from belief.posterior.transfer import with_transfer

N = 2000
SE = 0.02


def _cands(resources=("r", "s")):
    rows = [("a", "adaptation", {"r": 0.001, "s": 0.0}),
            ("b", "adaptation", {"r": 0.002, "s": 1.0}),
            ("probe", "diagnosis", {"r": 0.01, "s": 0.5})]
    return candidates_from_dict({"campaign": {"eval_protocol": "E",
                                              "resources": list(resources)},
                                 "candidate": [{"id": i, "role": role, "lens": "data",
                                                "method": i, "cost": cost}
                                               for i, role, cost in rows]})


def _gain():
    z = stats.norm.ppf((np.arange(N) + 0.5) / N)
    return np.stack([0.1 * z, 0.05 + 0.02 * z[::-1], np.zeros(N)], -1)


def _state(cs, belief=None, step=0):
    if belief is None:
        belief = make_belief(xr.DataArray(_gain(), dims=("sample", "candidate"),
                                          coords={"candidate": cs.ids}), cs, step=step,
                             policy="pi0")
    return State(step=step, budget=make_budget({"r": 1.0, "s": 10.0}, ["r", "s"]),
                 policy="pi0", belief=belief)


def _experiments():
    gain = _gain()
    g_a = gain[:, 0]
    probe = Experiment(next_gain=gain,
                       simulate=lambda rng, idx: g_a[idx] + SE * rng.standard_normal(len(idx)),
                       loglik=lambda y: stats.norm.logpdf(y[:, None], g_a[None, :], SE))
    return {"probe": probe, "a": Experiment(next_gain=gain), "b": Experiment(next_gain=gain)}


def _exact(d: xr.Dataset, resources=("r", "s"), set_by=()) -> None:
    problems = schema_problems(d, list(resources), set_by=set_by)
    assert not problems, problems


def test_the_declarations_are_unique_and_complete():
    names = [v.name for v in VARIABLES]
    assert len(names) == len(set(names)) and len(names) >= 40
    attrs = [a.name for a in ATTRIBUTES]
    assert len(attrs) == len(set(attrs)) and len(attrs) >= 25
    for d in (*VARIABLES, *ATTRIBUTES):
        assert d.meaning and d.dtype in ("float", "int", "bool", "str"), d
    # the namespaces name exactly the declarations
    assert sorted(v for k, v in vars(Vars).items() if not k.startswith("_")) == sorted(names)
    assert sorted(v for k, v in vars(Attrs).items() if not k.startswith("_")) == sorted(attrs)
    # CVU's channel split is copied into the decision; the table's columns are declared
    assert set(CHANNEL_COLUMNS) <= set(FROM_CVU)
    assert set(TABLE_COLUMNS) <= set(names)
    assert per_resource(Vars.overrun, "eng_h") == "overrun_eng_h"
    with pytest.raises(ValueError, match="not a per-resource family"):
        per_resource(Vars.cvu, "eng_h")


def test_a_decision_without_cvu_has_exactly_the_declared_names():
    cs = _cands()
    d = decide(_state(cs), cs, DecisionSettings(weights={"r": 1.0, "s": 0.001}, beta=0.0))
    _exact(d)
    assert Vars.cvu_se not in d and d.attrs[Attrs.cvu_status].startswith("not computed")
    assert {per_resource(Vars.cost, r) for r in ("r", "s")} <= set(d.data_vars)


def test_a_decision_with_cvu_and_its_split_has_exactly_the_declared_names():
    cs = _cands()
    settings = DecisionSettings(weights={"r": 1.0, "s": 0.001}, beta=1.0, horizon=8,
                                cvu=CVUSettings(n_outcomes=128, seed=1))
    d = decide(_state(cs), cs, settings, experiments=_experiments())
    _exact(d)
    for name in FROM_CVU:  # one-step CVU: every CVU variable but the continuation's
        assert (name in d) == (name not in (Vars.cvu_continuation, Vars.cvu_bias_bound,
                                            Vars.cvu_inner_bad_share)), name
    # everything CVU's own Dataset holds reaches the decision
    cvu = cvu_for_state(_state(cs), cs, settings, experiments=_experiments())
    assert set(cvu.data_vars) <= {Vars.cvu, Vars.cvu_se, *FROM_CVU}


def test_a_non_myopic_decision_has_exactly_the_declared_names():
    cs = _cands()
    settings = DecisionSettings(weights={"r": 1.0, "s": 0.001}, beta=1.0, horizon=8,
                                cvu=CVUSettings(n_outcomes=32, seed=1, continuation="lookahead2",
                                                inner_outcomes=8))
    d = decide(_state(cs), cs, settings, experiments=_experiments())
    _exact(d)
    assert Attrs.continuation in d.attrs and Vars.cvu_continuation in d


def test_uncertain_costs_and_transfer_draws_have_exactly_the_declared_names():
    cs = _cands()
    belief = _state(cs).belief
    rng = np.random.default_rng(0)
    cost = np.broadcast_to(cs.costs().values, (N, 3, 2)) * rng.lognormal(0, 0.3, (N, 3, 2))
    belief = belief.assign(cost=(("sample", "candidate", "resource"), cost)).assign_coords(
        resource=list(cs.resources))
    draws = xr.Dataset({"delta_j": (("sample", "policy"), rng.normal(0, 0.1, (N, 1))),
                        "g_j": (("sample", "policy"), np.abs(rng.normal(0, 0.1, (N, 1))))},
                       coords={"policy": ["pi0"], "sample": np.arange(N)})
    belief = with_transfer(belief, draws, np.array([3]), {"reliable": 1, "reason": ""})
    d = decide(_state(cs, belief), cs,
               DecisionSettings(weights={"r": 1.0, "s": 0.001}, beta=0.0, eps_budget=0.1))
    _exact(d)
    assert {per_resource(Vars.overrun, r) for r in ("r", "s")} <= set(d.data_vars)
    assert {Attrs.delta_j_mean, Attrs.delta_j_reliable} <= set(d.attrs)
    assert [c for c in decision_table(d).columns if c.startswith("overrun_")] == \
        ["overrun_r", "overrun_s"]


def test_a_departure_is_named():
    cs = _cands()
    d = decide(_state(cs), cs, DecisionSettings(weights={"r": 1.0, "s": 0.001}, beta=0.0))
    bad = d.drop_vars(Vars.u0).assign(extra=("candidate", np.zeros(3)))
    bad.attrs = {k: v for k, v in bad.attrs.items() if k != Attrs.stop} | {"typo": 1}
    bad[Vars.feasible] = ("candidate", np.zeros(3))  # a float where a bool is declared
    problems = schema_problems(bad, ["r", "s"])
    assert sorted(problems) == sorted([
        "variable 'extra' is not declared", "variable 'u0' is missing",
        "attribute 'typo' is not declared", "attribute 'stop' is missing",
        "variable 'feasible' has dtype float64, declared bool"])
    with pytest.raises(ValueError, match="'extra' is not declared"):
        check_decision(bad, ["r", "s"])
    # a resource that is not the candidate set's is not a member of a family
    assert "variable 'cost_r' is not declared" in schema_problems(d, ["s"])


@pytest.mark.slow  # the example fitted at the defaults (shared with other tests)
def test_a_fitted_beliefs_decision_on_file_has_exactly_the_declared_names(example_belief_file,
                                                                          tmp_path):
    from belief.decision.decision_file import load_decision, save_decision
    from belief.workflow.belief_file import load

    fitted = load(example_belief_file)
    d = fitted.decide(beta=0.0)
    resources = list(fitted.candidate_set.resources)
    _exact(d, resources, set_by=("FittedBelief.decide",))
    back = load_decision(save_decision(tmp_path / "decision.nc", d))
    _exact(back, resources, set_by=("FittedBelief.decide", "save_decision"))


def test_the_reference_page_lists_every_declaration():
    docs = Path(__file__).resolve().parents[1] / "docs"
    sys.path.insert(0, str(docs / "_ext"))
    import belief_docs

    page = schema.reference_markdown()
    variables = page.split("## Variables", 1)[1].split("## Attributes", 1)[0]
    attributes = page.split("## Attributes", 1)[1]
    for v in VARIABLES:
        assert f"| `{v.name}` | {schema._cell(v.meaning)} |" in variables, v.name
    for a in ATTRIBUTES:
        assert f"| `{a.name}` | {schema._cell(a.meaning)} |" in attributes, a.name
    assert "reference/decision.md" in belief_docs.GENERATED
    assert belief_docs.decision_markdown() == page
