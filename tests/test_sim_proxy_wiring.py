"""The sim-proxy model wired into the engine: fitted by ``BeliefFitter.fit`` when the evidence
has simulated paired evaluations (a belief without them is unchanged), its draws in q_t, stored
and read back with the belief file, and shown in the report (the share of each candidate's
belief from simulation, the sim-against-real figure)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from models.registry import model
from models.sim_proxy import SimProxyModel, fit_inputs, make_model, sim_share, synthetic_paired


@pytest.fixture(scope="module")
def sim_evidence(campaign_evidence, world_candidates):
    """The session's campaign evidence plus a simulated paired evaluation of every
    policy-changing candidate at the first policy (sim gain = real gain + 0.1, 400 trials
    per arm)."""
    ev, world = campaign_evidence
    gains = {c.id: 0.1 + 0.6 * (i % 3) / 2 for i, c in enumerate(world_candidates)
             if c.changes_policy}
    sim = synthetic_paired(gains, baseline=0.2, trials=400, rng=np.random.default_rng(5),
                           policy="pi0", eval_protocol=world_candidates.eval_protocol)
    return ev.append(sim_paired=sim), world


@pytest.fixture(scope="module")
def sim_fitted(fitter, sim_evidence):
    """(idata, belief) of the session's fitter on the evidence with sim rows (one compile of
    the sim-proxy model, 2 chains × 300 draws, twice: with and without the sim data)."""
    ev, world = sim_evidence
    return fitter.fit(ev, world.policy, step=4, seed=11)


def test_the_registry_line_and_the_protocol_functions(world_candidates, campaign_evidence):
    entry = model("sim_proxy")
    assert entry.role == "reported" and entry.fed_by == "protocol" and entry.optional
    assert entry.seed_stream == 7 and entry.fit_seed(3) == int(
        np.random.default_rng([3, 7]).integers(2**31))
    obj = make_model(world_candidates, entry.priors(), 8)
    assert isinstance(obj, SimProxyModel) and obj.max_policies == 8
    ev, world = campaign_evidence
    assert fit_inputs(obj, ev, world.policy) is None  # no sim rows: not fitted
    from belief.inputs.candidates import candidates_from_dict

    diag_only = candidates_from_dict({"campaign": {"eval_protocol": "E"}, "candidate": [
        {"id": "probe", "role": "diagnosis", "lens": "model", "method": "p", "cost": {}}]})
    assert make_model(diag_only, entry.priors(), 8) is None


def test_sim_share_is_one_minus_the_variance_ratio():
    """share = 1 − Var(θ | real, sim)/Var(θ | real): 0.75 when the sim data quarter the
    variance, 0 when they leave it; within the Monte Carlo error of two sample variances
    (relative s.e. √(2/n) each)."""
    rng = np.random.default_rng(0)
    n = 4000
    theta = np.stack([rng.normal(0, 1, (2, n)), rng.normal(0, 2, (2, n))], axis=-1)
    ref = rng.normal(0, 2, (2, n, 2))
    dims = ("chain", "draw", "candidate")
    dt = xr.DataTree.from_dict({"posterior": xr.Dataset(
        {"theta": (dims, theta), "theta_real_only": (dims, ref)},
        coords={"candidate": ["a", "b"]})})
    share = sim_share(dt)
    tol = 4 * np.sqrt(2 * 2 / (2 * n))  # the ratio's relative s.e., to first order
    assert abs(float(share.sel(candidate="a")) - 0.75) < 0.25 * tol
    assert abs(float(share.sel(candidate="b"))) < tol


def test_a_belief_without_sim_rows_has_no_sim_proxy_fit(fitted):
    idata, q = fitted
    assert "sim_proxy" not in idata.children
    assert not [v for v in q.data_vars if v.startswith("sim_proxy")]
    assert not [k for k in q.attrs if k.startswith("sim_proxy")]


def test_the_fitter_fits_the_sim_proxy_model_when_the_evidence_has_sim_rows(sim_fitted, fitted):
    """The sim-proxy posterior is a child of the fit, its check and escalation are recorded as
    ``sim_proxy_*`` attributes without gating ``reliable`` (role "reported"), q_t gains
    ``sim_proxy_theta`` and ``sim_proxy_sim_share`` and everything else in q_t is what the
    fit of the same real evidence gave."""
    idata, q = sim_fitted
    _, before = fitted
    assert "sim_proxy" in idata.children
    post = idata["sim_proxy"]["posterior"]
    for v in ("theta", "theta_sim", "a", "b", "sigma", "theta_real_only"):
        assert v in post, v
    assert q.attrs["sim_proxy_attempts"] == 1 and "sim_proxy_reliable" in q.attrs
    assert "sim_proxy" not in q.attrs["reliability_reason"]
    gain_ids = [c for c, p in zip(q["candidate"].values, q["changes_policy"].values,
                                  strict=True) if p]
    others = [c for c in q["candidate"].values if c not in gain_ids]
    theta = q["sim_proxy_theta"]
    assert theta.dims == ("sample", "candidate") and theta.sizes["sample"] == q.sizes["sample"]
    assert np.isfinite(theta.sel(candidate=gain_ids)).all()
    assert np.isnan(theta.sel(candidate=others)).all()
    share = q["sim_proxy_sim_share"]
    assert np.isnan(share.sel(candidate=others)).all()
    assert (share.sel(candidate=gain_ids) < 1).all()
    np.testing.assert_allclose(share.sel(candidate=gain_ids),
                               sim_share(idata["sim_proxy"]).sel(candidate=gain_ids))
    # the rest of q_t is the fit of the same real evidence
    xr.testing.assert_identical(
        q.drop_vars(["sim_proxy_theta", "sim_proxy_sim_share"]).drop_attrs(deep=False),
        before.drop_attrs(deep=False))


@pytest.fixture(scope="module")
def sim_belief(sim_fitted, sim_evidence, world_candidates):
    """The fit with sim rows as a FittedBelief (what ``belief report`` reads)."""
    from belief.inputs.candidate_file import CandidateFile, candidates_toml
    from belief.inputs.costs import empty_costs
    from belief.inputs.evidence_dir import EvidenceTables
    from belief.workflow.fitted import FittedBelief

    idata, q = sim_fitted
    ev, _ = sim_evidence
    text = candidates_toml(world_candidates, None, header="test")
    return FittedBelief(q, idata, CandidateFile(world_candidates, text, None, "c.toml"),
                        EvidenceTables(ev, empty_costs(world_candidates)), {})


def test_a_belief_file_with_sim_rows_round_trips(sim_belief, sim_fitted, sim_evidence,
                                                 tmp_path):
    from belief.workflow.belief_file import load

    _, q = sim_fitted
    ev, _ = sim_evidence
    back = load(sim_belief.save(tmp_path / "b.nc"))
    pd.testing.assert_frame_equal(back.evidence.sim_paired, ev.sim_paired, check_dtype=False)
    np.testing.assert_array_equal(back.belief["sim_proxy_sim_share"],
                                  q["sim_proxy_sim_share"])
    assert "sim_proxy" in back.idata.children


def test_fit_inputs_pass_the_real_and_sim_tables_and_ask_for_the_reference(sim_evidence):
    ev, world = sim_evidence
    obj = make_model(ev.candidates, model("sim_proxy").priors(), 8)
    inputs = fit_inputs(obj, ev, world.policy)
    assert inputs["reference"] is True and inputs["sim_paired"] is ev.sim_paired
    assert inputs["real_paired"] is ev.paired


def test_the_gains_table_says_how_much_of_each_belief_comes_from_simulation(sim_belief,
                                                                           fitted):
    summary = sim_belief.gains_summary()
    q = sim_belief.belief
    np.testing.assert_array_equal(summary["sim_share"].values, q["sim_proxy_sim_share"].values)
    assert summary.loc[~q["changes_policy"].values, "sim_share"].isna().all()
    from belief.report.document import render_report

    text, pngs = render_report(sim_belief, None, fmt="md")
    assert "sim_share" in text and "sim share: how much of each candidate's belief" in text
    assert "sim_proxy" in pngs and pngs["sim_proxy"].startswith(b"\x89PNG")


def test_the_sim_against_real_plot_draws_the_learned_calibration(sim_belief):
    """One panel per lens; the line is the posterior mean of a_l + b_l·x and the band its 90 %
    interval over the draws; one point per candidate of the lens with sim rows, at the
    posterior means of (θ, θ_sim)."""
    import matplotlib.pyplot as plt

    from belief.report.plots import plot_sim_proxy

    node = sim_belief.idata["sim_proxy"]
    lens_of = {c.id: c.lens for c in sim_belief.candidate_set}
    fig = plot_sim_proxy(node, lens_of)
    post = node["posterior"]
    lenses = [str(v) for v in post["lens"].values]
    assert len(fig.axes) == len(lenses)
    sim_ids = set(sim_belief.evidence.sim_paired["candidate"])
    for ax, lens in zip(fig.axes, lenses, strict=True):
        line = ax.get_lines()[0]
        x, y = line.get_xdata(), line.get_ydata()
        a, b = post["a"].sel(lens=lens).values.ravel(), post["b"].sel(lens=lens).values.ravel()
        np.testing.assert_allclose(y, (a[:, None] + b[:, None] * x[None, :]).mean(axis=0))
        band = ax.collections[0].get_paths()[0].vertices
        lo = np.quantile(a[:, None] + b[:, None] * x[None, :], 0.05, axis=0)
        assert np.isclose(band[:, 1].min(), lo.min())
        ids = [c for c in post["candidate"].values if lens_of[str(c)] == lens
               and c in sim_ids]
        texts = sorted(t.get_text() for t in ax.texts)
        assert texts == sorted(ids)
        for t in ax.texts:
            xy = t.xy
            th = post["theta"].sel(candidate=t.get_text()).mean()
            ts = post["theta_sim"].sel(candidate=t.get_text()).mean()
            np.testing.assert_allclose(xy, (float(th), float(ts)))
    plt.close(fig)


def test_no_decision_reads_the_sim_proxy_draws(sim_belief, sim_evidence):
    """Role "reported": the decision on the belief with sim rows is the decision on the same
    belief without the ``sim_proxy_*`` variables (β = 0: U0 and the choice)."""
    import warnings

    from belief.workflow.fitted import FittedBelief

    _, world = sim_evidence
    q = sim_belief.belief
    plain = FittedBelief(q.drop_vars(["sim_proxy_theta", "sim_proxy_sim_share"]),
                         sim_belief.idata, sim_belief.candidates, sim_belief.tables, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no all-NaN reductions on the way
        with_sim = sim_belief.decide(beta=0.0, weights=world.weight_values)
    without = plain.decide(beta=0.0, weights=world.weight_values)
    np.testing.assert_array_equal(with_sim["u0"].values, without["u0"].values)
    assert with_sim.attrs["chosen"] == without.attrs["chosen"]
