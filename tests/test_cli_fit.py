"""The statistician's path through the CLI: fit, decide, check, report, and refused input.

Commands run in-process (``belief.cli.main.main``) so that the compiled models are shared with the
rest of the session.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from belief.cli.main import main
from belief.inputs.example import example_paths

EVIDENCE, CANDIDATES = example_paths()
FAST_DECIDE = ["--cvu-outcomes", "64"]


@pytest.fixture(scope="module")
def fitted_file(example_belief_file):
    """``belief fit`` on the shipped example data at the defaults (the session's fit)."""
    return example_belief_file


def test_default_fit_of_the_example_converges_without_divergences(fitted_file, capsys):
    """Issue 15: every model's default fit on the example passes R-hat ≤ 1.01, bulk and tail
    ESS ≥ 400 and has zero divergent transitions, and ``belief check`` exits 0."""
    from belief.workflow.belief_file import load

    fitted = load(fitted_file)
    table = fitted.convergence()
    assert table.attrs["rhat_max"] == 1.01 and table.attrs["ess_min"] == 400
    assert set(table.index.get_level_values("model")) == {"gains", "exec_risk", "transfer",
                                                          "sensitivity"}
    assert (table["divergences"] == 0).all(), table[table["divergences"] > 0]
    assert table["passed"].all(), table[~table["passed"]]
    assert fitted.settings["chains"] == 4
    assert main(["check", str(fitted_file)]) == 0
    assert "converged:" in capsys.readouterr().out


def test_gains_summary_reports_each_candidates_own_evidence_share(fitted_file):
    """own_share ∈ [0, 1] for the gain candidates, NaN outside the gains model; a candidate with
    its own paired evaluations owns more of its belief than one without any."""
    from belief.workflow.belief_file import load

    fitted = load(fitted_file)
    summary = fitted.gains_summary()
    share = summary["own_share"]
    gain_ids = [c.id for c in fitted.candidate_set if c.changes_policy]
    assert share[gain_ids].between(0.0, 1.0).all(), share
    others = [c for c in summary.index if c not in gain_ids]
    assert share[others].isna().all()
    executed = set(fitted.evidence.paired["candidate"])
    informed = executed | set(fitted.evidence.gain_estimates["candidate"])
    seen = [c for c in gain_ids if c in executed]
    unseen = [c for c in gain_ids if c not in informed]
    assert seen and unseen
    assert share[seen].mean() > share[unseen].mean(), share


def _refused(capsys, argv, *needles):
    """Run the CLI, expect exit 2 and a one-line error naming every needle."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("belief: error: ") and "\n" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _copy_example(tmp_path):
    dest = tmp_path / "evidence"
    shutil.copytree(EVIDENCE, dest)
    return dest


# -- the happy path -------------------------------------------------------------------------
def test_fit_writes_belief_posteriors_evidence_and_settings(fitted_file, capsys):
    from belief.workflow.belief_file import load

    fitted = load(fitted_file)
    assert fitted.models == ["gains", "exec_risk", "transfer", "sensitivity"]
    assert fitted.policy == "pi2" and fitted.step == 3
    assert "treated_policy of the last paired evaluation" in fitted.settings["policy_rule"]
    assert fitted.settings["draws"] == 1000 and fitted.settings["chains"] == 4
    assert fitted.settings["tune"] == 500
    assert fitted.settings["evidence_rows"]["sensitivity_runs"] == 54
    assert fitted.history() == ["dr_1e7", "si_friction", "ft_pilot"]
    assert "si_friction" not in fitted.available() and "dr_1e7" in fitted.available()
    assert len(fitted.evidence.paired) == 2 and len(fitted.costs) == 3


def test_decide_prints_table_and_writes_csv_and_figures(fitted_file, tmp_path, capsys):
    out = tmp_path / "decision"
    code = main(["decide", str(fitted_file), "--budget", "real_h=10,compute=200,eng_h=15",
                 "--weights", "real_h=0.01,compute=0.0002,eng_h=0.004", "--functional",
                 "lcb:0.2", "--beta", "1", "--alpha-exec", "0.1", "--out", str(out),
                 *FAST_DECIDE])
    text = capsys.readouterr().out
    assert code == 0
    table = pd.read_csv(out / "decision.csv")
    chosen = table.loc[table["chosen"], "candidate"].tolist()
    assert len(chosen) == 1 and f"recommendation: {chosen[0]}" in text
    assert len(table) == 9 and {"q", "u0", "cvu", "p_exec_bound"} <= set(table.columns)
    assert table.set_index("candidate").loc["si_friction", "excluded_reason"].startswith(
        "not available")
    assert "no exact refits" in text and "budget: real_h=10" in text
    for name in ("gains", "q_decomposition", "safety", "sensitivity_pi0"):
        assert (out / f"{name}.png").stat().st_size > 1000


def test_decide_budget_defaults_to_file_budget_minus_costs(fitted_file, tmp_path, capsys):
    from belief.workflow.belief_file import decide_from

    decision = decide_from(fitted_file, beta=0.0)
    # [budget] (12, 300, 20) minus realised costs (1.5, 86, 4.5) in costs.csv
    assert (decision.attrs["budget_real_h"], decision.attrs["budget_compute"],
            decision.attrs["budget_eng_h"]) == (10.5, 214.0, 15.5)
    assert "minus realised costs" in decision.attrs["budget_source"]
    assert decision.attrs["cvu_refits"] == "CVU not computed (β = 0)"


def test_cli_and_python_api_agree(fitted_file, tmp_path, capsys):
    import belief

    out = tmp_path / "d"
    assert main(["decide", str(fitted_file), "--functional", "cvar:0.3", "--out", str(out),
                 *FAST_DECIDE]) == 0
    cli = pd.read_csv(out / "decision.csv").set_index("candidate")
    py = belief.load(fitted_file).decide(functional="cvar:0.3", cvu_outcomes=64)
    np.testing.assert_allclose(cli["q"].to_numpy(), py["q"].values, equal_nan=True)
    assert cli.index[cli["chosen"]].tolist() == ([] if py.attrs["stop"] else [py.attrs["chosen"]])
    saved = xr.open_dataset(out / "decision.nc", engine="h5netcdf").load()
    np.testing.assert_allclose(saved["q"].values, py["q"].values, equal_nan=True)


HEAVY = ("pymc", "pytensor", "nutpie", "numba", "scipy.stats", "arviz_stats", "matplotlib",
         "distributed")


def _imported_after(code: str, modules: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = (f"import json, sys\n{code}\n"
             f"print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_loading_and_reading_a_belief_imports_no_sampler_and_no_scipy_stats(fitted_file):
    code = (f"import belief\nf = belief.load({str(fitted_file)!r})\n"
            "f.gains_summary(); f.budget(); f.history(); f.belief['gain'].mean().item()")
    assert _imported_after(code) == []


def test_help_imports_nothing_heavy():
    code = "from belief.cli.main import build_parser\nbuild_parser().format_help()"
    assert _imported_after(code, (*HEAVY, "numpy", "pandas", "xarray")) == []


def test_check_exit_codes(fitted_file, capsys):
    assert main(["check", str(fitted_file), "--rhat-max", "1.2", "--ess-min", "20"]) == 0
    assert "converged: 23 variables of 4 models pass" in capsys.readouterr().out
    assert main(["check", str(fitted_file), "--ess-min", "1e9"]) == 1
    out = capsys.readouterr().out
    assert "FAIL gains: effect: " in out and "bulk ESS" in out and "< 1e+09 at effect[" in out
    assert "FAIL sensitivity: S: " in out and "not converged: 23 of 23" in out
    assert "next step: gains: too few effective draws" in out and "--draws 2000" in out


def test_check_works_on_a_bare_belief_file(fitted_file, tmp_path, capsys):
    """A file from save_belief alone has no candidates: check still runs,
    with ESS ≥ 400 by default (the field's threshold, whatever the draws)."""
    from belief.workflow.belief_file import load, save_belief

    fitted = load(fitted_file)
    bare = save_belief(tmp_path / "bare.nc", fitted.belief, fitted.idata)
    assert main(["check", str(bare), "--rhat-max", "1.2"]) == 0
    out = capsys.readouterr().out
    assert "ESS ≥ 400" in out and "converged: 23 variables of 4 models pass" in out


def test_report_html_is_self_contained_and_markdown_has_figures(fitted_file, tmp_path,
                                                                  capsys):
    dec = tmp_path / "dec"
    assert main(["decide", str(fitted_file), "--out", str(dec), *FAST_DECIDE]) == 0
    html = tmp_path / "report.html"
    assert main(["report", str(fitted_file), "--decision", str(dec), "--out", str(html)]) == 0
    text = html.read_text()
    for section in ("Decision", "Posterior gains per candidate", "Execution safety against "
                    "α_exec", "Sensitivities S_k(π)", "Convergence", "Transfer delta"):
        assert section in text, section
    assert text.count("data:image/png;base64,") >= 5
    for col in ("CVU ± error", "vs stop", "reason", "CVU own", "CVU order", "CVU safety",
                "estimator", "P_exec UCB"):  # the decision table, its details, the channels
        assert f"<th>{col}</th>" in text, col
    assert "<details><summary>Details: role, MV" in text
    assert 'src="http' not in text and "<link" not in text
    md = tmp_path / "report.md"
    assert main(["report", str(fitted_file), "--out", str(md), "--beta", "0"]) == 0
    body = md.read_text()
    assert "](report_files/q_decomposition.png)" in body
    assert (tmp_path / "report_files" / "safety.png").exists()
    assert "| candidate | φ(ΔJ) | C_λ | U0 | CVU ± error | Q | vs stop | feasible | reason |" \
        in body and "| candidate | role | MV |" in body


# -- refused input: one line, exit 2, nothing written ----------------------------------------
def test_fit_refuses_missing_required_table(tmp_path, capsys):
    ev = _copy_example(tmp_path)
    (ev / "paired_evaluations.csv").unlink()
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             str(ev), "missing required table paired_evaluations.csv")
    assert not out.exists()


def test_fit_refuses_files_that_are_not_csv_or_parquet(tmp_path, capsys):
    ev = _copy_example(tmp_path)
    (ev / "safety_events.csv").rename(ev / "safety_events.xlsx")
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "safety_events.xlsx", "neither CSV (.csv) nor Parquet")
    (ev / "safety_events.xlsx").unlink()
    (ev / "safety_event.csv").write_text("step,candidate\n")
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "safety_event.csv", "not a known evidence table")
    (ev / "safety_event.csv").unlink()
    (ev / "transfer_evaluations.parquet").write_bytes(b"PAR1 this is not parquet")
    (ev / "transfer_evaluations.csv").unlink()
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "transfer_evaluations.parquet", "cannot read")
    assert not out.exists()


def test_fit_refuses_a_bad_sim_paired_table_before_any_work(tmp_path, capsys, no_compute):
    """A simulated paired evaluation under another evaluation protocol: one line naming the
    file, the row (and its line) and the rule; exit 2; no belief written."""
    ev = _copy_example(tmp_path)
    paired = pd.read_csv(ev / "paired_evaluations.csv")
    sim = paired.drop(columns=[c for c in paired.columns if c not in (
        "step", "candidate", "policy", "eval_protocol", "control_successes", "control_trials",
        "treated_successes", "treated_trials")])
    sim.loc[1, "eval_protocol"] = "sim_shortcut"
    sim.to_csv(ev / "sim_paired_evaluations.csv", index=False)
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "sim_paired_evaluations.csv", "row 1 (line 3 of the file)",
             "eval_protocol 'sim_shortcut' differs from the campaign's shared protocol")
    assert not out.exists()


def test_fit_refuses_columns_of_the_wrong_type(tmp_path, capsys):
    ev = _copy_example(tmp_path)
    paired = pd.read_csv(ev / "paired_evaluations.csv")
    paired["control_trials"] = paired["control_trials"].astype(object)
    paired.loc[1, "control_trials"] = "many"
    paired.to_csv(ev / "paired_evaluations.csv", index=False)
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "paired_evaluations.csv", "row 1 (line 3 of the file)",
             "control_trials must be an integer count, got 'many'")
    assert not out.exists()


def test_fit_refuses_a_resource_the_candidates_do_not_use(tmp_path, capsys):
    ev = _copy_example(tmp_path)
    costs = pd.read_csv(ev / "costs.csv")
    costs["gpu_h"] = 1.0
    costs.to_csv(ev / "costs.csv", index=False)
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(ev), "--candidates", str(CANDIDATES), "--out", str(out)],
             "costs.csv", "['gpu_h'] name no resource of the candidates")
    assert not out.exists()


def test_fit_refuses_unknown_policy_and_bad_settings(tmp_path, capsys):
    out = tmp_path / "b.nc"
    _refused(capsys, ["fit", str(EVIDENCE), "--candidates", str(CANDIDATES), "--out", str(out),
                      "--policy", "pi9"], "--policy", "'pi9' appears in no evidence table")
    _refused(capsys, ["fit", str(EVIDENCE), "--candidates", str(CANDIDATES), "--out", str(out),
                      "--draws", "0"], "--draws", "must be an integer >= 1")
    _refused(capsys, ["fit", str(tmp_path / "nowhere"), "--candidates", str(CANDIDATES),
                      "--out", str(out)], "nowhere", "evidence folder not found")
    _refused(capsys, ["fit", str(EVIDENCE), "--candidates", str(tmp_path / "c.toml"),
                      "--out", str(out)], "c.toml", "file not found")
    (tmp_path / "c.toml").write_text("[campaign\n")
    _refused(capsys, ["fit", str(EVIDENCE), "--candidates", str(tmp_path / "c.toml"),
                      "--out", str(out)], "c.toml", "not a valid TOML file")
    assert not out.exists()


def test_decide_refuses_bad_budget_weights_and_options(fitted_file, tmp_path, capsys):
    out = tmp_path / "dec"
    base = ["decide", str(fitted_file), "--out", str(out)]
    _refused(capsys, [*base, "--budget", "real_h=ten,compute=1,eng_h=1"], "--budget",
             "cannot parse amount 'ten' of 'real_h'")
    _refused(capsys, [*base, "--budget", "real_h 10"], "--budget", "expected resource=amount")
    _refused(capsys, [*base, "--budget", "real_h=1,compute=1,eng_h=1,gpu=3"], "--budget",
             "unknown resource(s) ['gpu']")
    _refused(capsys, [*base, "--weights", "real_h=0.01,compute=0.1,eng_h=0.1,gpu=1"],
             "--weights", "['gpu'] that the candidates do not use")
    _refused(capsys, [*base, "--functional", "median"], "unknown functional 'median'")
    _refused(capsys, [*base, "--alpha-exec", "1.5"], "--alpha-exec")
    _refused(capsys, [*base, "--delta", "0"], "--delta: delta must satisfy 0 < delta < 1")
    _refused(capsys, [*base, "--gate", "wald"], "--gate: method must be one of ['anytime', "
                                                "'clopper_pearson', 'posterior'], got 'wald'")
    _refused(capsys, [*base, "--cvu-estimator", "exact"], "--cvu-estimator",
             "'auto', 'psis', 'regression'")
    assert not out.exists()


def test_decide_refuses_other_version_truncated_and_not_a_belief(fitted_file, tmp_path,
                                                                   capsys):
    out = tmp_path / "dec"
    import h5py

    old = tmp_path / "old.nc"
    shutil.copy(fitted_file, old)
    with h5py.File(old, "r+") as f:
        f.attrs["belief_version"] = "0.0.9"
    _refused(capsys, ["decide", str(old), "--out", str(out)], "old.nc",
             "written by belief 0.0.9")
    cut = tmp_path / "cut.nc"
    data = fitted_file.read_bytes()
    cut.write_bytes(data[: len(data) // 3])
    _refused(capsys, ["decide", str(cut), "--out", str(out)], "cut.nc",
             "truncated or not netCDF")
    _refused(capsys, ["check", str(CANDIDATES)], "candidates.toml", "not netCDF")
    assert not out.exists()


def test_decide_refuses_candidates_that_differ_from_the_fit(fitted_file, tmp_path, capsys):
    text = CANDIDATES.read_text().replace('id = "cotrain"', 'id = "cotrain_v2"')
    text = text.replace("cost = { real_h = 0.0, compute = 10.0, eng_h = 0.5 }",
                        "cost = { real_h = 0.0, compute = 12.0, eng_h = 0.5 }")
    other = tmp_path / "other.toml"
    other.write_text(text)
    out = tmp_path / "dec"
    err = _refused(capsys, ["decide", str(fitted_file), "--candidates", str(other),
                            "--out", str(out)], "other.toml",
                   "candidates differ from those the belief", "['cotrain'] missing",
                   "['cotrain_v2'] not in the fitted belief", "dr_1e6.cost")
    assert "compute': 10.0" in err and "compute': 12.0" in err
    assert not out.exists()
    # the same candidates with another budget are accepted: the budget is a decision input
    same = tmp_path / "same.toml"
    same.write_text(CANDIDATES.read_text().replace("real_h = 12.0", "real_h = 6.0"))
    assert main(["decide", str(fitted_file), "--candidates", str(same), "--beta", "0",
                 "--out", str(out)]) == 0
    assert "budget: real_h=4.5" in capsys.readouterr().out


def test_report_refuses_bad_suffix_and_foreign_decision(fitted_file, tmp_path, capsys):
    _refused(capsys, ["report", str(fitted_file), "--out", str(tmp_path / "r.pdf")],
             "--out", "expected a .html or .htm or .md or .markdown file")
    _refused(capsys, ["report", str(fitted_file), "--decision", str(tmp_path / "none.nc"),
                      "--out", str(tmp_path / "r.html")], "none.nc", "file not found")
    assert not (tmp_path / "r.html").exists()


def test_one_decide_parses_the_functional_once_and_validates_lambda_once(fitted_file, tmp_path,
                                                                          capsys):
    """The settings are parsed at the boundary and handed on as objects (issue 13's goal)."""
    import sys

    counts = {"functional": 0, "lambda": 0, "beta": 0}

    def hook(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("belief"):
            return
        name, local = frame.f_code.co_name, frame.f_locals
        if name == "__post_init__" and "Functional" in [
                c.__name__ for c in type(local.get("self")).__mro__]:
            counts["functional"] += 1
        elif name == "resource_vector" and local.get("what") == "λ" \
                and local.get("table") in ("--weights", "weights"):  # not the file's [weights]
            counts["lambda"] += 1
        elif name == "real" and local.get("name") in ("beta", "--beta"):
            counts["beta"] += 1

    argv = ["decide", str(fitted_file), "--functional", "lcb:0.2", "--beta", "1",
            "--weights", "real_h=0.01,compute=0.0002,eng_h=0.004", *FAST_DECIDE,
            "--out", str(tmp_path / "dec")]
    sys.setprofile(hook)
    try:
        code = main(argv)
    finally:
        sys.setprofile(None)
    assert code == 0, capsys.readouterr().err
    assert counts == {"functional": 1, "lambda": 1, "beta": 1}, counts


def test_decide_with_a_rollout_continuation_from_the_cli_and_the_api(fitted_file, tmp_path,
                                                                      capsys):
    """``--continuation rollout --rollout-depth 2 --inner-outcomes 8`` reaches CVU (every
    scored candidate says which continuation it used, and it is the same for all of them) and
    gives the same decision and CVU as the Python API with the same settings."""
    from belief.workflow.belief_file import load

    out = tmp_path / "dec"
    assert main(["decide", str(fitted_file), "--out", str(out), "--cvu-outcomes", "32",
                 "--continuation", "rollout", "--rollout-depth", "2",
                 "--inner-outcomes", "8"]) == 0
    capsys.readouterr()
    table = pd.read_csv(out / "decision.csv").set_index("candidate")
    scored = table[table.feasible]
    # every scored candidate gets the rollout of depth 2, by one estimator: importance
    # weights, or nested regression for all when the one-step estimator used regression for
    # any (an informative paired evaluation)
    regression = scored["cvu_method"].str.startswith("regression")
    suffix = "+rollout-by-regression" if regression.any() else "+rollout"
    assert (scored["cvu_continuation"] == "rollout(d=2)").all()
    assert scored["cvu_method"].str.endswith(suffix).all(), scored["cvu_method"]
    api = load(fitted_file).decide(cvu_outcomes=32, continuation="rollout", rollout_depth=2,
                                   inner_outcomes=8)
    assert api.attrs["continuation"] == "rollout"
    assert api.attrs["continuation_used"] == "rollout(d=2)"
    assert api.attrs["continuation_depth"] == 2
    assert api.attrs["continuation_inner_outcomes"] == 8
    chosen = table.index[table.chosen].tolist()
    assert chosen == [api.attrs["chosen"]]
    np.testing.assert_allclose(scored["cvu"].values,
                               api["cvu"].sel(candidate=list(scored.index)).values, rtol=1e-9)


def test_decide_max_refits_reaches_cvu_from_the_cli_and_the_api(fitted_file, tmp_path,
                                                                monkeypatch):
    """``--refit --max-refits 3`` (and ``decide(refit=True, max_refits=3)``) caps CVU's exact
    refits per candidate at 3, and the decision's ``cvu_refits`` says so; the default is 16;
    ``max_refits=0`` refits nothing and says why."""
    import belief.decision.engine as engine
    import belief.posterior.refit as refit_mod
    from belief.workflow.belief_file import load

    seen = []

    class Stop(Exception):
        pass

    def capture(state, candidates, settings, **kw):
        seen.append((settings.cvu.max_refits, kw["refit"]))
        if len(seen) == 1:  # the CLI: stop before it writes
            raise Stop
        return xr.Dataset(attrs={"cvu_status": "estimated"})

    monkeypatch.setattr(engine, "decide", capture)
    monkeypatch.setattr(refit_mod, "exact_refit", lambda *a, **k: "refit-fn")  # no compile
    with pytest.raises(Stop):
        main(["decide", str(fitted_file), "--out", str(tmp_path / "d"), "--refit",
              "--max-refits", "3"])
    fitted = load(fitted_file)
    three, default, none = (fitted.decide(refit=True, **kw) for kw in (
        {"max_refits": 3}, {}, {"max_refits": 0}))
    assert seen == [(3, "refit-fn"), (3, "refit-fn"), (16, "refit-fn"), (0, None)]
    assert "at most 3 per candidate" in three.attrs["cvu_refits"]
    assert "at most 16 per candidate" in default.attrs["cvu_refits"]
    assert none.attrs["cvu_refits"].startswith("no exact refits (--max-refits 0)")


def test_decide_with_a_forced_estimator_from_the_cli_and_the_api(fitted_file, tmp_path,
                                                                 capsys):
    """``--cvu-estimator regression --continuation lookahead2`` scores every candidate by
    regression with the nested-regression look-ahead, records the estimator, and gives the
    decision of the Python API; ``psis`` forces importance weights for every candidate
    that has a likelihood."""
    from belief.workflow.belief_file import load

    fitted = load(fitted_file)
    for estimator, continuation, prefix, suffix in [
            ("regression", "lookahead2", "regression", "+lookahead2-by-regression"),
            ("psis", "one_step", "psis", "")]:
        out = tmp_path / estimator
        assert main(["decide", str(fitted_file), "--out", str(out), "--cvu-outcomes", "32",
                     "--continuation", continuation, "--cvu-estimator", estimator]) == 0
        capsys.readouterr()
        table = pd.read_csv(out / "decision.csv").set_index("candidate")
        scored = table[table.feasible & table["cvu_method"].notna()
                       & ~table["cvu_method"].str.startswith("no outcome", na=False)]
        assert len(scored) >= 2, table["cvu_method"]
        assert scored["cvu_method"].str.startswith(prefix).all(), scored["cvu_method"]
        assert scored["cvu_method"].str.endswith(suffix).all(), scored["cvu_method"]
        api = fitted.decide(cvu_outcomes=32, continuation=continuation,
                            cvu_estimator=estimator)
        assert api.attrs["cvu_estimator"] == estimator
        assert table.index[table.chosen].tolist() == [api.attrs["chosen"]]
        np.testing.assert_allclose(scored["cvu"].values,
                                   api["cvu"].sel(candidate=list(scored.index)).values,
                                   rtol=1e-9)


def test_check_status_shows_the_convergence_note():
    import pandas as pd

    from belief.cli.statistician import _check_status

    exact = pd.Series({"passed": True, "problem": "", "note": "all 400 exact draws (no data)"})
    assert _check_status(exact) == "ok: all 400 exact draws (no data)"
    assert _check_status(pd.Series({"passed": True, "problem": "", "note": ""})) == "ok"
    failed = pd.Series({"passed": False, "problem": "R-hat 1.05 > 1.01",
                        "note": "3 exact draws left out"})
    assert _check_status(failed) == "R-hat 1.05 > 1.01 (3 exact draws left out)"
    assert _check_status(pd.Series({"passed": True, "problem": ""})) == "ok"  # older tables
