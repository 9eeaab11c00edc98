from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from belief.campaign.synthetic import SyntheticWorld


def test_deterministic_for_a_seed():
    a, b = SyntheticWorld(seed=5), SyntheticWorld(seed=5)
    for step, m in enumerate(["dr_1e6", "si_friction", "ft_real_100"]):
        oa, ob = a.execute(m, step), b.execute(m, step)
        assert oa.paired.equals(ob.paired) and oa.safety.equals(ob.safety)
    assert a.true_success() == b.true_success()
    c = SyntheticWorld(seed=6)
    oc = c.execute("dr_1e6", 0)
    assert not oc.paired.equals(SyntheticWorld(seed=5).execute("dr_1e6", 0).paired)


def test_order_matters_and_diminishing_returns():
    w = SyntheticWorld()
    assert w.mean_logit_gain("dr_1e7", ["si_friction"]) == pytest.approx(0.25)
    assert w.mean_logit_gain("ft_real_100", ["dr_1e6"]) == pytest.approx(0.35 * 1.5)
    assert w.mean_logit_gain("dr_1e6", ["dr_1e6", "dr_1e6"]) == pytest.approx(0.2 * 0.36)
    assert w.mean_logit_gain("latency_probe", []) == 0.0


def test_expected_gain_matches_monte_carlo():
    w = SyntheticWorld(seed=1)
    from scipy.special import expit, logit

    eta = logit(0.3)
    z = np.random.default_rng(0).standard_normal(400_000)
    mc = expit(eta + 0.5 + 0.15 * z) - 0.3
    se = mc.std() / np.sqrt(mc.size)
    assert w.expected_gain("dr_1e7") == pytest.approx(mc.mean(), abs=4 * se)


def test_execution_changes_policy_only_for_adaptations():
    w = SyntheticWorld(seed=2)
    out = w.execute("latency_probe", 0)
    assert out.policy == "pi0" and out.paired.empty and len(out.safety) == 1
    out = w.execute("dr_1e6", 1)
    assert out.policy == "pi1" and out.paired["treated_policy"].tolist() == ["pi1"]
    assert out.safety.empty
    ev = w.initial_evidence()
    assert ev["policy_evaluations"]["trials"].tolist() == [100]
    assert set(ev["safety_events"]["candidate"]) == {"si_friction", "latency_probe",
                                                     "ft_real_100", "ft_pilot", "cotrain"}


def test_pilot_estimates_the_informed_gain_without_changing_policy():
    w = SyntheticWorld(seed=4)
    ests = [w.execute("ft_pilot", step).gain_estimates for step in range(400)]
    assert w.policy == "pi0"
    est = np.array([e["estimate"].item() for e in ests])
    assert set(ests[0]["candidate"]) == {"ft_real_100"} and ests[0]["se"].item() == 0.15
    # estimate = g + 0.15 z + 0.15 ε: mean g, s.d. 0.15·√2
    sd = 0.15 * np.sqrt(2)
    assert abs(est.mean() - 0.35) < 4 * sd / np.sqrt(est.size)
    assert est.std() == pytest.approx(sd, rel=0.15)


@pytest.mark.parametrize("make", [
    lambda: SyntheticWorld.with_bench_test(seed=3, ft_bench_runs=30),
    lambda: SyntheticWorld.with_bench_test(seed=1005, variation=5),
    lambda: SyntheticWorld.with_latency_probe(seed=2, latency_effect=0.4, measurement_se=0.2),
])
def test_opt_in_worlds_are_rebuilt_from_their_description(make):
    """A campaign log stores ``describe()``; resume rebuilds the world from it
    (``world_from_spec``).  The opt-in worlds used to be described as the default world, so a
    resume rebuilt another world (and refused it: other candidates)."""
    import json
    from dataclasses import replace

    from belief.campaign.synthetic import _same_world, world_from_spec

    world = make()
    spec = json.loads(json.dumps(world.describe()))  # as a log stores it
    again = world_from_spec(spec)
    assert again.candidates == world.candidates and _same_world(again, world)
    assert again.seed == world.seed
    assert world_from_spec(json.loads(json.dumps(again.describe()))).describe() == spec
    # a world changed after construction is not described as the factory's
    changed = replace(world, truth=world.truth[:-1])
    assert "factory" not in changed.describe()
    from belief.errors import InputError

    # … and no other description rebuilds it: resume refuses it rather than rebuild another
    assert changed.describe()["changed"] is True
    with pytest.raises(InputError, match="cannot be rebuilt from its description"):
        world_from_spec(json.loads(json.dumps(changed.describe())))

    with pytest.raises(InputError, match="unknown synthetic world 'varied'"):
        world_from_spec({**spec, "factory": {"name": "varied"}})


@pytest.mark.parametrize("change", [
    {"budget_values": {"real_h": 6.0, "compute": 150.0, "eng_h": 10.0}},  # --budget-scale
    {"stated_interactions": "priors"},  # --stated-sd
])
def test_a_changed_world_is_not_logged_as_the_world_it_came_from(change):
    """A varied world with scaled budgets or stated order effects used to be described as
    the plain varied world, so a resume from its log rebuilt another world with other
    budgets or beliefs and carried on silently; its description now says it was changed,
    and rebuilding from it is refused.  Unchanged worlds keep their former description."""
    from dataclasses import replace

    from belief.campaign.synthetic import world_from_spec
    from belief.errors import InputError

    world = SyntheticWorld.varied(5, seed=1005)
    assert world.describe() == {"kind": "synthetic", "seed": 1005, "variation": 5}
    assert SyntheticWorld(seed=2).describe() == {"kind": "synthetic", "seed": 2,
                                                 "variation": None}
    if change.get("stated_interactions") == "priors":
        change = {"stated_interactions": world.interaction_priors(0.1)}
    changed = replace(world, **change)
    assert changed.describe() == {"kind": "synthetic", "seed": 1005, "variation": 5,
                                  "changed": True}
    with pytest.raises(InputError, match=r"campaign log: .*cannot be rebuilt"):
        world_from_spec(changed.describe())
    # a new seed is not a change: the outcomes are seeded by it, and it is recorded
    assert replace(world, seed=7).describe() == {"kind": "synthetic", "seed": 7, "variation": 5}


def test_worlds_built_with_other_values_or_subclassed_are_marked_and_numpy_is_logged_as_json():
    """No description rebuilds a world built with other values or a subclass: both are marked
    changed; a numpy variation is logged as a JSON number (it broke the log's header)."""
    import json
    from dataclasses import dataclass

    assert SyntheticWorld(initial_success=0.5).describe()["changed"] is True

    @dataclass
    class Other(SyntheticWorld):
        pass

    assert Other(seed=3).describe()["changed"] is True
    # a numpy variation is logged as a JSON number
    assert json.loads(json.dumps(SyntheticWorld.varied(np.int64(5), seed=1005).describe())
                      ) == {"kind": "synthetic", "seed": 1005, "variation": 5}


def test_interaction_priors_state_the_truth_at_the_first_execution():
    """Each stated mean is the world's own change of m's logit gain when a ran just before m's
    first execution: mean_logit_gain(m, [a]) − mean_logit_gain(m, []) (the world multiplies,
    the gains model adds; they agree there), and the priors pass the candidate file's rules."""
    from dataclasses import replace

    from belief.errors import InputError
    from belief.inputs.interactions import parse_interactions

    for world in (SyntheticWorld(), SyntheticWorld.varied(3, seed=3)):
        stated = world.interaction_priors(0.1)
        assert len(stated) == len(world.interactions) > 0
        for p in stated:
            change = world.mean_logit_gain(p.target, [p.source]) - world.mean_logit_gain(
                p.target, [])
            assert p.mean == pytest.approx(change, rel=1e-12, abs=1e-15)
            assert p.sd == 0.1 and p.kind == "pair"
        informed = replace(world, stated_interactions=stated)
        cands = informed.candidates
        assert parse_interactions([s.as_dict() for s in cands.interactions],
                                  cands.candidates) == stated
    assert SyntheticWorld().interaction_priors(0.1)[0].mean == pytest.approx(
        (0.5 - 1.0) * 0.20)  # si_friction → dr_1e6: ×0.5 of a logit gain 0.20
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(InputError, match="sd must be a finite number > 0"):
            SyntheticWorld().interaction_priors(bad)


def test_bench_test_family_is_the_varied_world_with_a_gated_ft_and_its_bench_test():
    """``benchmark_world(v, seed, "bench_test")``: every true number of ``varied(v)`` (gains,
    costs, risks, interactions, J_0) and every other candidate's pre-campaign evidence,
    ft_real_100 with 20 bench runs and 100 safety runs, and ``ft_bench`` appended last; at
    the start the engine's gate closes ft_real_100 (it does not in the varied world); an
    unknown family is refused naming the allowed ones."""
    from dataclasses import replace

    from belief.campaign.synthetic import BENCH_TEST, benchmark_world
    from belief.errors import InputError
    from belief.lab.clairvoyant import start_gate_closed

    for v in (0, 7):
        base = benchmark_world(v, v, "varied")
        fam = benchmark_world(v, v, "bench_test")
        assert fam.variation == v and fam.initial_success == base.initial_success
        assert fam.interactions == base.interactions
        ids = [t.candidate.id for t in fam.truth]
        assert ids == [*(t.candidate.id for t in base.truth), "ft_bench"]  # appended last
        # every other candidate's pre-campaign bench evidence is the varied world's
        mine_safety = fam.initial_safety().set_index("candidate")
        base_safety = base.initial_safety().set_index("candidate")
        others = base_safety.index.drop("ft_real_100")
        pd.testing.assert_frame_equal(mine_safety.loc[others], base_safety.loc[others])
        assert mine_safety.loc["ft_real_100", "executions"] == 20
        mine = {t.candidate.id: t for t in fam.truth}
        for t in base.truth:
            if t.candidate.id == "ft_real_100":
                assert mine[t.candidate.id] == replace(
                    t, candidate=replace(t.candidate, safety_runs=100), bench_runs=20)
            else:
                assert mine[t.candidate.id] == t
        assert mine["ft_bench"] == BENCH_TEST
        assert "ft_real_100" in start_gate_closed(fam)
        assert "ft_real_100" not in start_gate_closed(base)
    with pytest.raises(InputError, match="unknown world family 'other'; allowed: varied, "
                                         "bench_test"):
        benchmark_world(0, 0, "other")
