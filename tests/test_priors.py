"""Every model's prior dataclass refuses non-finite numbers and non-positive scales."""

from __future__ import annotations

import pytest

from belief.errors import InputError
from models.exec_risk import ExecRiskPriors
from models.gains import GainsPriors
from models.sensitivity import SensitivityPriors
from models.transfer import TransferPriors

CASES = [(GainsPriors, "baseline_mu", "tau_lens"),
         (ExecRiskPriors, "mu0_mu", "sigma_group"),
         (SensitivityPriors, "alpha_mu", "effect_sigma"),
         (TransferPriors, "sim_mu", "shift_tau")]


@pytest.mark.parametrize(("cls", "location", "scale"), CASES)
def test_priors_refuse_bad_numbers(cls, location, scale):
    name = cls.__name__
    assert getattr(cls(**{location: -1.0}), location) == -1.0  # a location may be negative
    for bad, rule in ((0.0, "must be > 0"), (-0.5, "must be > 0"),
                      (float("inf"), "must be finite"), (True, "must be finite"),
                      ("1.0", "must be finite")):
        with pytest.raises(InputError, match=rf"^{name}: {scale} {rule}"):
            cls(**{scale: bad})
    with pytest.raises(InputError, match=rf"^{name}: {location} must be finite"):
        cls(**{location: float("nan")})
