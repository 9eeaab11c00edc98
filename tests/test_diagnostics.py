"""Convergence summaries: the whole-fit check is the worst row of the per-variable table."""

from __future__ import annotations

import numpy as np
import xarray as xr

from belief.posterior.diagnostics import check_convergence, convergence_table


def _fit(shift: float, divergent: int) -> xr.DataTree:
    """Two chains × 500 iid normal draws; element ``b`` of ``y`` differs by ``shift`` between
    chains (R-hat ≫ 1.01 for shift = 3, ≈ 1 for 0)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 500))
    y = rng.normal(size=(2, 500, 3))
    y[1, :, 1] += shift
    div = np.zeros((2, 500), dtype=bool)
    div[0, :divergent] = True
    coords = {"chain": [0, 1], "draw": np.arange(500)}
    post = xr.Dataset({"x": (("chain", "draw"), x), "y": (("chain", "draw", "k"), y)},
                      coords={**coords, "k": ["a", "b", "c"]})
    stats = xr.Dataset({"diverging": (("chain", "draw"), div)}, coords=coords)
    return xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})


def test_check_is_the_worst_row_of_the_table():
    idata = _fit(shift=3.0, divergent=2)
    table = convergence_table(idata, ess_min=100)
    conv = check_convergence(idata, ess_min=100)
    assert conv.rhat_max == table["rhat"].max() > 1.5
    assert conv.ess_bulk_min == table["ess_bulk"].min()
    assert conv.ess_tail_min == table["ess_tail"].min()
    assert table.loc["y", "rhat_at"] == "y[b]"
    assert not table.loc["x", "passed"]  # divergences belong to the whole fit, so every row
    assert conv.divergences == 2 and not conv.reliable
    assert "at y[b]" in conv.reason and "2 divergent transitions > 0" in conv.reason


def test_a_converged_fit_passes():
    conv = check_convergence(_fit(shift=0.0, divergent=2), ess_min=100, max_divergences=2)
    assert conv.reliable and conv.reason == "converged" and conv.rhat_max < 1.01
    assert not check_convergence(_fit(shift=0.0, divergent=0), ess_min=5000).reliable


def test_the_table_of_the_same_draws_is_computed_once(monkeypatch):
    """A fit's check and its saved belief need the same table: the second is not recomputed,
    but any change of the draws, their labels or the divergences is."""
    import arviz_stats

    from belief.posterior import diagnostics

    monkeypatch.setattr(diagnostics, "_TABLES", {})
    idata = _fit(shift=3.0, divergent=2)
    first = diagnostics.diagnostics_table(idata)
    copy = xr.DataTree.from_dict({k: idata[k].to_dataset().copy(deep=True)
                                  for k in ("posterior", "sample_stats")})
    real_rhat = arviz_stats.rhat
    calls = []
    monkeypatch.setattr(arviz_stats, "rhat", lambda *a, **k: calls.append(1) or real_rhat(*a, **k))
    again = diagnostics.diagnostics_table(copy)  # equal content, another object
    assert not calls
    assert again.equals(first)
    again.loc["x", "rhat"] = -1.0  # the caller's copy: the stored table is untouched
    assert diagnostics.diagnostics_table(copy).equals(first)
    changed = [_fit(shift=2.0, divergent=2), _fit(shift=3.0, divergent=1)]
    relabelled = _fit(shift=3.0, divergent=2)
    relabelled["posterior"] = relabelled["posterior"].to_dataset().assign_coords(k=["a", "z", "c"])
    for other in (*changed, relabelled):
        diagnostics.diagnostics_table(other)
    assert len(calls) == 3
    assert diagnostics.diagnostics_table(relabelled).loc["y", "rhat_at"] == "y[z]"


def _exact_fit(exact: list[int]) -> xr.DataTree:
    """A gains-like fit: ``gamma`` over three pairs whose chains disagree (R-hat ≫ 1.01 if it
    were a Markov chain), marked exact draws by ``exact_prior_draw``, and a well-mixed ``mu0``."""
    rng = np.random.default_rng(3)
    gamma = rng.normal(size=(4, 500, 3))
    gamma[0] += 3.0
    post = xr.Dataset({"gamma": (("chain", "draw", "pair"), gamma),
                       "mu0": (("chain", "draw"), rng.normal(size=(4, 500)))},
                      coords={"pair": ["a→b", "a→c", "b→c"],
                              "exact_prior_draw": ("pair", np.array(exact, dtype=np.int8))})
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((4, 500), dtype=bool))})
    return xr.DataTree.from_dict({"gains/posterior": post, "gains/sample_stats": stats})


def test_a_variable_of_exact_draws_only_is_noted_not_failed():
    """Every γ an exact draw (no data inform any pair): the table and the whole-fit check agree
    — the row is not judged (passed, no problem) and its note says why, instead of a NaN
    row marked failing next to a fit called reliable."""
    from belief.workflow.derived import judge_models, posterior_diagnostics

    idata = _exact_fit([1, 1, 1])
    raw = posterior_diagnostics(idata)
    assert raw.loc[("gains", "gamma"), "exact_draws"] == 3
    assert np.isnan(raw.loc[("gains", "gamma"), "rhat"])
    table = judge_models(raw)
    row = table.loc[("gains", "gamma")]
    assert bool(row["passed"]) and row["problem"] == ""
    assert row["note"].startswith("all 3 exact draws (no data: the prior)")
    assert table.loc[("gains", "mu0"), "note"] == ""
    assert table["passed"].all()
    assert check_convergence(idata["gains"]).reliable


def test_exact_draws_are_counted_and_a_sampled_element_is_still_judged():
    """One γ informed (a Markov chain) with a stuck chain: that row fails, at that element,
    and notes the two elements left out; the whole-fit check fails there too."""
    from belief.workflow.derived import judge_models, posterior_diagnostics

    idata = _exact_fit([1, 0, 1])
    table = judge_models(posterior_diagnostics(idata))
    row = table.loc[("gains", "gamma")]
    assert row["exact_draws"] == 2 and row["rhat_at"] == "gamma[a→c]" and row["rhat"] > 1.2
    assert not bool(row["passed"]) and "R-hat" in row["problem"]
    assert row["note"] == "2 exact draws left out"
    conv = check_convergence(idata["gains"])
    assert not conv.reliable and "gamma[a→c]" in conv.reason
    # a NaN row without exact draws (e.g. a constant) still counts as broken
    raw = posterior_diagnostics(idata)
    raw.loc[("gains", "mu0"), ["rhat", "ess_bulk", "ess_tail"]] = np.nan
    assert not bool(judge_models(raw).loc[("gains", "mu0"), "passed"])


def test_the_exact_draw_count_survives_the_belief_file():
    """The stored diagnostics (root attribute ``derived``) keep ``exact_draws``, so a belief
    read back judges the row as the fit did."""
    from belief.workflow.derived import (
        Derived,
        judge_models,
        posterior_diagnostics,
        read_derived,
        to_file,
    )

    raw = posterior_diagnostics(_exact_fit([1, 1, 1]))
    text, _ = to_file(Derived(raw, {}, {"gains": "x"}))
    back = read_derived(text, lambda g: None, "belief.nc")
    assert back is not None and back.convergence.loc[("gains", "gamma"), "exact_draws"] == 3
    assert judge_models(back.convergence).equals(judge_models(raw))
