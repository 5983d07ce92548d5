"""$SWEEP_REFRESH_S: how often a running sweep looks around."""

import pytest

from sweep import cadence
from sweep.errors import SweepError


def test_the_default_is_two_seconds(monkeypatch):
    monkeypatch.delenv("SWEEP_REFRESH_S", raising=False)
    assert cadence.refresh_s() == 2.0
    assert cadence.resubmit_s() == 5.0


def test_the_variable_sets_every_cadence(monkeypatch):
    monkeypatch.setenv("SWEEP_REFRESH_S", "0.25")
    assert cadence.refresh_s() == 0.25
    assert cadence.resubmit_s() == 0.625


@pytest.mark.parametrize("bad", ["fast", "0", "-1", "nan"])
def test_a_value_that_is_not_a_positive_number_is_named(monkeypatch, bad):
    monkeypatch.setenv("SWEEP_REFRESH_S", bad)
    with pytest.raises(SweepError, match=r"SWEEP_REFRESH_S=.* is not a positive number"):
        cadence.refresh_s()
