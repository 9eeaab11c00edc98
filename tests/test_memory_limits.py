"""Sizes that cannot fit in memory are refused before any work, with the estimate."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from belief.errors import InputError
from belief.validate import available_memory, fits_in_memory
from belief.workflow.fit import _draws_fit_in_memory


def test_fits_in_memory_refuses_above_what_is_available_naming_the_setting():
    fits_in_memory(10, "--x", "ten bytes", "fewer", available=10)  # exactly fits
    if available_memory() is None:  # not Linux: nothing known, nothing refused
        fits_in_memory(10**15, "--x", "a petabyte", "fewer")
    with pytest.raises(InputError, match=r"^--x: eleven bytes need about 0\.0 GB; 0\.0 GB "
                                         r"available: fewer$"):
        fits_in_memory(11, "--x", "eleven bytes", "fewer", available=10)


def _fitter(n: int, chains: int = 4, draws: int = 1000):
    pairs = [(a, m) for a in range(n) for m in range(n) if a != m]
    return SimpleNamespace(gains=SimpleNamespace(pairs=pairs), candidates=list(range(n)),
                           settings=SimpleNamespace(chains=chains, draws=draws))


def test_a_gains_fit_whose_order_effects_cannot_fit_is_refused_with_the_estimate():
    """1000 candidates: 999,000 order effects; 2 arrays × 4 chains × 1000 draws × 8 bytes is
    about 64 GB."""
    with pytest.raises(InputError, match=r"^--draws: 4 chains × 1000 draws of the 999000 order "
                                         r"effects \(γ\) of 1000 candidates need about 63\.9 GB; "
                                         r"16\.0 GB available: .*order_effects = false$"):
        _draws_fit_in_memory(_fitter(1000), available=16 * 10**9)
    _draws_fit_in_memory(_fitter(50), available=16 * 10**9)  # 50 candidates: 0.16 GB
    _draws_fit_in_memory(SimpleNamespace(gains=SimpleNamespace(pairs=[]), candidates=[1],
                                         settings=SimpleNamespace(chains=4, draws=10**9)),
                         available=1)  # no order effects: nothing to refuse
