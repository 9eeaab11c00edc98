"""The peer allocation rules (belief/decision/peers.py) against hand-computed choices on small
problems built from explicit draws (no model is compiled)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import optimize, stats

from belief.decision.allocation import POLICIES, USES_CVU, check_policy, choose
from belief.decision.peers import bwk_duals, expected_improvement, gittins_index
from belief.errors import InputError

IDS = ["a", "b", "c"]


def make(gain, c_lambda, feasible=(True, True, True), *, costs=None, budget=None, step=0,
         horizon=4, phi=None, cvu=None, cvu_status="not computed (β = 0): CVU = 0, Q = U0"):
    """(decision, belief) over IDS from explicit gain draws (S, 3) and C_λ."""
    gain = np.asarray(gain, float)
    costs = np.zeros((3, 1)) if costs is None else np.asarray(costs, float)
    res = ["real_h", "compute"][:costs.shape[1]]
    budget = np.full(len(res), 100.0) if budget is None else np.asarray(budget, float)
    belief = xr.Dataset({"gain": (("sample", "candidate"), gain)},
                        coords={"candidate": IDS})
    cand = ("candidate",)
    dec = xr.Dataset(
        {"c_lambda": (cand, np.asarray(c_lambda, float)),
         "feasible": (cand, np.asarray(feasible, bool)),
         "phi_gain": (cand, gain.mean(0) if phi is None else np.asarray(phi, float)),
         "cvu": (cand, np.zeros(3) if cvu is None else np.asarray(cvu, float)),
         **{f"cost_{r}": (cand, costs[:, k]) for k, r in enumerate(res)}},
        coords={"candidate": IDS},
        attrs={"step": step, "horizon": horizon, "cvu_status": cvu_status, "chosen": "a",
               **{f"budget_{r}": float(b) for r, b in zip(res, budget, strict=True)}})
    return dec, belief


class Cands:
    """The two things ucb_bwk reads of a CandidateSet: its resources and nominal costs."""

    def __init__(self, costs):
        self.costs_ = np.asarray(costs, float)
        self.resources = ["real_h", "compute"][:self.costs_.shape[1]]

    def costs(self):
        return xr.DataArray(self.costs_, dims=("candidate", "resource"),
                            coords={"candidate": IDS, "resource": self.resources})


def test_peers_are_allocations():
    for p in ("ei_cost", "kg_cost", "ucb_bwk", "pbgi", "ucb_bwk:0.8"):
        assert check_policy(p) == p
    assert {"ei_cost", "kg_cost", "ucb_bwk", "pbgi"} <= set(POLICIES)
    assert "kg_cost" in USES_CVU and "ei_cost" not in USES_CVU


# -- expected improvement per unit cost -----------------------------------------------------
def test_ei_per_cost_hand_computed():
    # draws: a = (−0.1, 0.3) → EI 0.15, C 0.1 → 1.5;  b = (0.02, 0.08) → EI 0.05, C 0.01 → 5;
    # c = (0.4, 0.4) → EI 0.4, C 0.2 → 2
    gain = [[-0.1, 0.02, 0.4], [0.3, 0.08, 0.4]]
    dec, bel = make(gain, [0.1, 0.01, 0.2])
    np.testing.assert_allclose(expected_improvement(np.array(gain)), [0.15, 0.05, 0.4])
    assert choose("ei_cost", dec, belief=bel).candidate == "b"
    # b not feasible: c (2) beats a (1.5)
    dec, bel = make(gain, [0.1, 0.01, 0.2], feasible=(True, False, True))
    assert choose("ei_cost", dec, belief=bel).candidate == "c"
    # every EI at or below its cost: stop (EI/C = 1 does not qualify)
    dec, bel = make(gain, [0.15, 0.05, 0.5])
    pick = choose("ei_cost", dec, belief=bel)
    assert pick.stop and "EI/C_λ > 1" in pick.reason
    # a free candidate with EI > 0 is picked first; a free one with EI = 0 never
    dec, bel = make([[0.0, 0.01, 0.4], [0.0, 0.01, 0.4]], [0.0, 0.0, 0.2])
    assert choose("ei_cost", dec, belief=bel).candidate == "b"


# -- knowledge gradient per unit cost --------------------------------------------------------
def test_kg_per_cost_hand_computed():
    gain = np.zeros((2, 3))
    # KG = φ + CVU: a 0.10 + 0.02 = 0.12 / 0.1 = 1.2; b 0 + 0.03 = 0.03 / 0.01 = 3;
    # c 0.3 − 0.05 = 0.25 / 0.2 = 1.25
    dec, _ = make(gain, [0.1, 0.01, 0.2], phi=[0.1, 0.0, 0.3], cvu=[0.02, 0.03, -0.05],
                  cvu_status="estimated")
    assert choose("kg_cost", dec).candidate == "b"
    dec, _ = make(gain, [0.1, 0.04, 0.2], phi=[0.1, 0.0, 0.3], cvu=[0.02, 0.03, -0.05],
                  cvu_status="estimated")  # b 0.75: c 1.25 > a 1.2
    assert choose("kg_cost", dec).candidate == "c"
    dec, _ = make(gain, [0.2, 0.04, 0.3], phi=[0.1, 0.0, 0.3], cvu=[0.02, 0.03, -0.05],
                  cvu_status="estimated")  # no KG above its cost, G0(s^∅) = 0: stop
    assert choose("kg_cost", dec).stop
    # with G0(s^∅) = 0.1 every KG + G0 exceeds its cost (a .02, b .09, c .05): the largest
    # ratio, c (0.833; a 0.6, b 0.75), is taken — the plain "KG > cost" rule would stop
    dec.attrs["g0_null"] = 0.1
    pick = choose("kg_cost", dec)
    assert pick.candidate == "c" and "0.8333" in pick.reason
    dec, _ = make(gain, [0.2, 0.04, 0.2], phi=[0.1, 0.0, 0.3], cvu=[0.02, np.nan, 0.05],
                  cvu_status="estimated")  # NaN CVU never picked
    assert choose("kg_cost", dec).candidate == "c"


def test_kg_refuses_a_decision_without_cvu():
    dec, _ = make(np.zeros((2, 3)), [0.1, 0.1, 0.1])
    with pytest.raises(InputError) as e:
        choose("kg_cost", dec)
    assert e.value.table == "beta"
    dec.attrs["cvu_status"] = "terminal step: CVU := 0, Q = U0"  # last step: KG = φ
    dec["phi_gain"][:] = [0.3, 0.0, 0.0]
    assert choose("kg_cost", dec).candidate == "a"


# -- the Pandora's-box Gittins index ---------------------------------------------------------
def test_gittins_index_normal_closed_form():
    """E[max(0, X − g)] = σφ(z) + (μ − g)(1 − Φ(z)), z = (g − μ)/σ, for X ~ N(μ, σ²)."""
    mu, sigma, cost, n = 0.05, 0.2, 0.03, 200_000
    x = np.random.default_rng(3).normal(mu, sigma, n)

    def ei(g):
        z = (g - mu) / sigma
        return sigma * stats.norm.pdf(z) + (mu - g) * stats.norm.sf(z)

    g_exact = optimize.brentq(lambda g: ei(g) - cost, mu - 5 * sigma, mu + 5 * sigma,
                              xtol=1e-14)
    g_hat = gittins_index(x, cost)
    # the draws' EI at g_exact has sd sd(max(0, X − g))/√n; the root moves by that over
    # |dEI/dg| = 1 − Φ(z): 4 standard errors
    se = np.maximum(x - g_exact, 0).std() / np.sqrt(n) / stats.norm.sf((g_exact - mu) / sigma)
    assert abs(g_hat - g_exact) < 4 * se
    assert se < 0.002  # the check has power: a wrong root (e.g. ignoring the cost) misses
    assert abs(np.maximum(x - g_hat, 0).mean() - cost) < 1e-10  # the root on the draws
    assert gittins_index(x, 0.0) == x.max()
    # a cost above mean − min: the root is below every draw, g = mean − cost exactly (the
    # bracket [min, max] would not hold it)
    assert gittins_index(np.array([0.1, 0.2, 0.3]), 0.15) == pytest.approx(0.05, abs=1e-15)
    assert gittins_index(np.array([0.1, 0.2, 0.3]), 0.1) == pytest.approx(0.1, abs=1e-15)
    g = gittins_index(np.array([0.1, 0.2, 0.3]), 0.05)  # (0.2 − g + 0.3 − g)/3 = 0.05
    assert g == pytest.approx(0.175, abs=1e-10)


def test_pbgi_picks_the_largest_index_and_stops_below_zero():
    rng = np.random.default_rng(4)
    gain = np.column_stack([rng.normal(0.0, 0.3, 4000), rng.normal(0.1, 0.01, 4000),
                            np.zeros(4000)])
    # a: wide, mean 0 — its index is high; b: sure 0.1, cost 0.05 → index ≈ 0.05;
    # c: a diagnosis (ΔJ = 0) → index −C
    dec, bel = make(gain, [0.05, 0.05, 0.01])
    ga = gittins_index(gain[:, 0], 0.05)
    gb = gittins_index(gain[:, 1], 0.05)
    assert ga > gb > 0 and abs(gb - 0.05) < 0.002
    assert gittins_index(gain[:, 2], 0.01) == pytest.approx(-0.01)
    assert choose("pbgi", dec, belief=bel).candidate == "a"
    dec, bel = make(gain, [0.5, 0.2, 0.01])  # EI ≤ C everywhere: every index ≤ 0
    assert choose("pbgi", dec, belief=bel).stop
    dec, bel = make(gain, [0.05, 0.05, 0.01], feasible=(False, True, True))
    assert choose("pbgi", dec, belief=bel).candidate == "b"


# -- UCB-BwK ----------------------------------------------------------------------------------
NOMINAL = [[2.0, 10.0], [1.0, 50.0], [0.5, 0.0]]  # real_h, compute per candidate


def test_bwk_duals_after_one_step():
    """b_0 = (10, 100), T = 4; u = (2, 50, 1) → B = min(5, 2, 4) = 2, d = 3,
    ε = √(ln 3 / 2); one step consuming (2, 10): c̃ = (2·2/10, 10·2/100, 1·2/4)."""
    duals = bwk_duals([10.0, 100.0, 4.0], [2.0, 50.0, 1.0], [2.0, 10.0, 1.0],
                      ("real_h", "compute", "steps"))
    eps = np.sqrt(np.log(3) / 2)
    assert duals.B == 2.0 and duals.epsilon == pytest.approx(eps)
    np.testing.assert_allclose(duals.weights, (1 + eps) ** np.array([0.4, 0.2, 0.5]))
    start = bwk_duals([10.0, 100.0, 4.0], [2.0, 50.0, 1.0], [0.0, 0.0, 0.0],
                      ("real_h", "compute", "steps"))
    np.testing.assert_allclose(start.weights, 1.0)  # v_1 = 1
    # a resource no candidate consumes is out of d and B, with weight 0
    d0 = bwk_duals([10.0, 100.0, 4.0], [2.0, 0.0, 1.0], [2.0, 0.0, 1.0],
                   ("real_h", "compute", "steps"))
    assert d0.B == 4.0 and d0.epsilon == pytest.approx(np.sqrt(np.log(2) / 4))
    assert d0.weights[1] == 0.0


def test_ucb_bwk_choice_moves_with_the_duals():
    rng = np.random.default_rng(5)
    n = 2000
    gain = np.column_stack([rng.normal(0.20, 0.05, n), rng.normal(0.27, 0.05, n),
                            np.zeros(n)])
    cands = Cands(NOMINAL)
    ucb = np.quantile(gain, 0.9, axis=0)

    def expected(budget_left, spent, step):
        b0 = np.array(budget_left) + np.array(spent)
        big_b = min(b0[0] / 2.0, b0[1] / 50.0, 4.0)
        eps = np.sqrt(np.log(3) / big_b)
        ct = np.column_stack([np.array(NOMINAL)[:, 0] * big_b / b0[0],
                              np.array(NOMINAL)[:, 1] * big_b / b0[1],
                              np.full(3, big_b / 4.0)])
        v = (1 + eps) ** np.array([spent[0] * big_b / b0[0], spent[1] * big_b / b0[1],
                                   step * big_b / 4.0])
        return IDS[int(np.argmax(ucb / (ct @ v)))], ucb / (ct @ v)

    # at the start (v = 1): a 0.2·/(0.4 + 0.2 + 0.5) vs b (0.2 + 1 + 0.5): a wins
    dec, bel = make(gain, [0, 0, 0], costs=NOMINAL, budget=[10.0, 100.0], step=0)
    pick = choose("ucb_bwk", dec, belief=bel, candidates=cands,
                  spent={"real_h": 0.0, "compute": 0.0})
    assert pick.candidate == expected([10.0, 100.0], [0.0, 0.0], 0)[0] == "a"
    # after real_h is nearly used up, its dual is high: b, cheap in real_h, wins
    dec, bel = make(gain, [0, 0, 0], costs=NOMINAL, budget=[2.0, 90.0], step=2)
    pick = choose("ucb_bwk", dec, belief=bel, candidates=cands,
                  spent={"real_h": 8.0, "compute": 10.0})
    want, ratio = expected([2.0, 90.0], [8.0, 10.0], 2)
    assert pick.candidate == want == "b"
    assert ratio[1] > ratio[0]
    # the diagnosis (UCB 0) never wins; with no positive UCB anywhere: stop
    dec, bel = make(np.zeros((5, 3)) - 0.1, [0, 0, 0], costs=NOMINAL, budget=[10.0, 100.0])
    assert choose("ucb_bwk", dec, belief=bel, candidates=cands,
                  spent={"real_h": 0.0, "compute": 0.0}).stop
    # ucb_bwk:q changes the quantile
    dec, bel = make(gain, [0, 0, 0], costs=NOMINAL, budget=[10.0, 100.0])
    assert choose("ucb_bwk:0.6", dec, belief=bel, candidates=cands,
                  spent={"real_h": 0.0, "compute": 0.0}).candidate in IDS


def test_ucb_bwk_needs_the_realised_costs():
    dec, bel = make(np.ones((3, 3)), [0, 0, 0], costs=NOMINAL, budget=[10.0, 100.0])
    with pytest.raises(InputError, match="realised costs"):
        choose("ucb_bwk", dec, belief=bel, candidates=Cands(NOMINAL))


# -- bad settings ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ucb_bwk:1.5", "ucb_bwk:0.3", "ucb_bwk:x", "ei_cost:0.9",
                                  "pbgi:2", "kg"])
def test_bad_peer_settings_are_refused_naming_the_flag(name):
    from belief.cli.flags import as_flag

    with pytest.raises(InputError) as e:
        check_policy(name)
    assert e.value.table == "allocation"
    assert as_flag(e.value, "demo").table == "--allocation"
    assert "\n" not in e.value.rule


def test_kg_cost_campaign_needs_beta_and_one_step_cvu():
    from belief.campaign.loop import CampaignSettings
    from belief.cli.flags import as_flag
    from belief.decision.settings import CVUSettings

    with pytest.raises(InputError) as e:
        CampaignSettings(allocation="kg_cost", beta=0.0)
    assert as_flag(e.value, "demo").table == "--beta"
    with pytest.raises(InputError) as e:
        CampaignSettings(allocation="kg_cost", beta=1.0,
                         cvu=CVUSettings(continuation="lookahead2"))
    assert as_flag(e.value, "demo").table == "--continuation"
    assert CampaignSettings(allocation="ucb_bwk:0.8").allocation == "ucb_bwk:0.8"


def test_gittins_index_solves_its_equation_on_any_draws():
    """Random, constant, two-valued and rounding-prone draws: E[max(0, X − g)] = cost holds on
    the draws to 1e-12 (the root of the campaign's pbgi whatever the draws)."""
    rng = np.random.default_rng(11)
    cases = [(np.full(50, 0.2), 0.05), (np.array([0.1, 0.2, 0.3]), 0.1),
             (np.array([0.0, 1.0]), 0.25), (np.zeros(10), 0.01)]
    for _ in range(200):
        x = rng.normal(rng.normal(), rng.exponential(), int(rng.integers(1, 60)))
        if rng.uniform() < 0.3:
            x = np.round(x, 1)
        cases.append((x, float(rng.exponential(0.5))))
    for x, cost in cases:
        g = gittins_index(x, cost)
        assert abs(np.maximum(x - g, 0).mean() - cost) < 1e-12 * max(1.0, np.abs(x).max()), \
            (x, cost, g)
