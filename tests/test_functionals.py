from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from belief.decision.functional_registry import REGISTRY, FunctionalRegistry, parse_functional
from belief.decision.functionals import Cvar, Functional, Lcb, Mean, cvar, lcb, mean
from belief.errors import InputError

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


def test_parse_and_validate():
    assert parse_functional("mean") == Mean()
    assert parse_functional("lcb:0.1") == Lcb(0.1)
    assert parse_functional("cvar:1") == Cvar(1.0)
    for bad, rule in [("median", "unknown functional 'median'"), ("lcb:0", "0 < q < 1"),
                      ("lcb:1", "0 < q < 1"), ("cvar:0", "0 < α <= 1"),
                      ("cvar:1.5", "0 < α <= 1"), ("lcb:x", "cannot parse")]:
        with pytest.raises(InputError, match=rule):
            parse_functional(bad)


def test_the_registry_refuses_an_unknown_name_listing_the_registered_ones():
    with pytest.raises(InputError, match="unknown functional 'median'") as err:
        parse_functional("median:0.5")
    for name in REGISTRY.names:
        assert repr(REGISTRY[name].syntax) in str(err.value)
    assert {"mean", "lcb", "cvar"} <= set(REGISTRY.names)


def test_the_registry_refuses_a_duplicate_name_and_a_non_functional():
    registry = FunctionalRegistry((Mean, Lcb))

    @dataclass(frozen=True)
    class OtherLcb(Lcb):
        pass

    with pytest.raises(ValueError, match="'lcb' is already registered"):
        registry.register(OtherLcb)
    with pytest.raises(ValueError, match="'mean' is already registered"):
        FunctionalRegistry((Mean, Cvar, Mean))
    with pytest.raises(TypeError, match="Functional subclass"):
        registry.register(dict)
    assert registry.names == ("mean", "lcb")  # the refused ones left it as it was
    with pytest.raises(InputError, match=r"allowed: 'mean', 'lcb:Q' with 0 < Q < 1$"):
        registry.parse("cvar:0.2")


def test_every_registered_functional_reads_back_its_text():
    for fn in (Mean(), Lcb(0.1), Cvar(0.25)):
        assert parse_functional(str(fn)) == fn and REGISTRY[fn.kind] is type(fn)
    assert Lcb(0.1) != Cvar(0.1) and hash(Lcb(0.1)) == hash(parse_functional("lcb:0.1"))
    with pytest.raises(TypeError, match="base type"):
        Functional()
    with pytest.raises(InputError, match="mean takes no parameter"):
        parse_functional("mean:0.3")


def test_unweighted_lcb_matches_numpy_inverted_cdf():
    x = np.random.default_rng(0).normal(size=(3, 101))
    for q in (0.05, 0.1, 0.5, 0.9):
        np.testing.assert_allclose(lcb(x, q), np.quantile(x, q, axis=-1, method="inverted_cdf"))


def test_weighted_lcb_matches_numpy_weighted_quantile():
    rng = np.random.default_rng(1)
    x = rng.normal(size=200)
    w = rng.exponential(size=200)
    for q in (0.05, 0.3, 0.5):
        expected = np.quantile(x, q, weights=w / w.sum(), method="inverted_cdf")
        assert lcb(x, q, w) == pytest.approx(expected)


def test_cvar_hand_values_and_single_draw_tail():
    x = np.array([4.0, 1.0, 3.0, 2.0])
    assert cvar(x, 0.5) == pytest.approx(1.5)  # mean of {1, 2}
    assert cvar(x, 0.25) == pytest.approx(1.0)  # tail is exactly one draw
    assert cvar(x, 0.1) == pytest.approx(1.0)  # tail inside one draw: the minimum
    assert cvar(x, 0.375) == pytest.approx((1.0 * 0.25 + 2.0 * 0.125) / 0.375)
    assert cvar(x, 1.0) == pytest.approx(x.mean())
    assert mean(x, np.array([1.0, 0, 0, 0])) == 4.0


@settings(max_examples=200, deadline=None)
@given(arrays(float, st.integers(1, 60), elements=finite), st.floats(0.01, 1.0))
def test_cvar_below_mean_and_quantile(x, alpha):
    assert cvar(x, alpha) <= mean(x) + 1e-9 * (1 + np.abs(x).max())
    assert cvar(x, alpha) <= lcb(x, min(alpha, 0.999)) + 1e-9 * (1 + np.abs(x).max())


@settings(max_examples=200, deadline=None)
@given(arrays(float, st.integers(1, 60), elements=finite), st.floats(0.01, 0.5))
def test_lcb_below_mean_for_symmetric_draws(x, q):
    """For q ≤ 0.5, LCB ≤ mean holds for symmetric draws (it can fail for skewed ones)."""
    sym = np.concatenate([x, -x])
    assert lcb(sym, q) <= mean(sym) + 1e-9 * (1 + np.abs(x).max())


def test_lcb_can_exceed_mean_for_left_skewed_draws():
    x = np.array([0.0, 10.0, 10.0])
    assert lcb(x, 0.5) > mean(x)
