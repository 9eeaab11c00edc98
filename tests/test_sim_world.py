"""The synthetic world's simulator evaluations: a documented true calibration per lens (one
well predicted, one biased, one useless), rows the sim table accepts, and a campaign whose
outcomes do not move when they are asked for."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logit

from belief.campaign.synthetic import SIM_BASELINE_SHIFT, SIM_CALIBRATION, SyntheticWorld
from belief.errors import InputError
from belief.inputs.tables import validate_sim_paired


def test_the_calibration_has_a_good_a_biased_and_a_useless_lens():
    world = SyntheticWorld(seed=0)
    assert world.sim_calibration == SIM_CALIBRATION
    lens_of = {c.id: c.lens for c in world.candidates if c.changes_policy}
    assert set(lens_of.values()) <= set(SIM_CALIBRATION)
    a, b, s = SIM_CALIBRATION["data"]
    assert (a, b) == (0.0, 1.0) and s <= 0.05  # well predicted
    a, b, _ = SIM_CALIBRATION["model"]
    assert a != 0 and b != 1  # biased
    assert SIM_CALIBRATION["optimization"][1] == 0.0  # useless: carries nothing about θ


def test_the_true_sim_gain_is_the_documented_formula():
    world = SyntheticWorld(seed=4)
    ids = [t.candidate.id for t in world.truth]
    e = np.random.default_rng([4, 50_000]).standard_normal(len(ids))
    for c in world.candidates:
        if not c.changes_policy:
            with pytest.raises(InputError, match="not a policy-changing candidate"):
                world.true_sim_gain(c.id)
            continue
        a, b, s = SIM_CALIBRATION[c.lens]
        expected = a + b * world.mean_logit_gain(c.id) + s * e[ids.index(c.id)]
        assert world.true_sim_gain(c.id) == pytest.approx(expected, abs=1e-12)


def test_sim_rows_are_valid_and_estimate_the_true_sim_gain():
    """With 10⁶ trials per arm the empirical logit gain is within 4 standard errors
    (√(1/(n p_c(1 − p_c)) + 1/(n p_t(1 − p_t)))) of θ^sim, for every adaptation."""
    world = SyntheticWorld(seed=1, sim_trials=10**6)
    base = world.policy_logit["pi0"] + SIM_BASELINE_SHIFT
    for c in world.candidates:
        if not c.changes_policy:
            continue
        row = validate_sim_paired(world.sim_evaluation(c.id, step=2), world.candidates)
        assert len(row) == 1 and row["policy"].iloc[0] == "pi0"
        r = row.iloc[0]
        pc = r.control_successes / r.control_trials
        pt = r.treated_successes / r.treated_trials
        theta = world.true_sim_gain(c.id)
        p0, p1 = 1 / (1 + np.exp(-base)), 1 / (1 + np.exp(-(base + theta)))
        se = np.sqrt(1 / (1e6 * p0 * (1 - p0)) + 1 / (1e6 * p1 * (1 - p1)))
        assert abs(logit(pt) - logit(pc) - theta) < 4 * se, c.id


def test_asking_for_sim_evaluations_moves_no_other_outcome():
    plain, asked = SyntheticWorld(seed=3), SyntheticWorld(seed=3)
    assert plain.describe() == asked.describe() == {"kind": "synthetic", "seed": 3,
                                                   "variation": None}
    sims = []
    for step, m in enumerate(["dr_1e7", "si_friction", "ft_real_100"]):
        sims += [asked.sim_evaluation(c.id, step) for c in asked.candidates
                 if c.changes_policy]
        a, b = plain.execute(m, step), asked.execute(m, step)
        assert a.paired.equals(b.paired) and a.safety.equals(b.safety)
        assert a.cost == b.cost and a.true_gain == b.true_gain
        assert plain.policy == asked.policy
    # the sim rows of a campaign form one valid table (one run per row)
    import pandas as pd

    table = validate_sim_paired(pd.concat(sims, ignore_index=True), asked.candidates)
    assert len(table) == 3 * sum(c.changes_policy for c in asked.candidates)
