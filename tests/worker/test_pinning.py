"""Pinning verified, not assumed (sweep/worker/pinning.py): what the measurement concludes from
the CPU time two busy processes got, on this kernel for real, kept per node, and said once per
host by a run."""

import warnings

import pytest

from sweep.client.listeners.pinning import PinningListener
from sweep.errors import SweepWarning
from sweep.wire.protocol import PointRecord
from sweep.worker import pinning

S = pinning.BUSY_S


@pytest.mark.parametrize(
    ("same", "apart", "found"),
    [
        (2.0 * S, 2.0 * S, pinning.NOT_ENFORCED),  # pinned to one CPU, each got a whole one
        (1.0 * S, 2.0 * S, pinning.ENFORCED),  # they shared it, while two CPUs give two
        (1.0 * S, 1.0 * S, pinning.UNKNOWN),  # two CPUs gave one: too busy to tell
    ],
)
def test_what_the_cpu_time_of_two_pinned_processes_says(monkeypatch, same, apart, found):
    monkeypatch.setattr(pinning, "_pair", lambda cpus, seconds: same if cpus[0] == cpus[1] else apart)
    assert pinning.enforced([0, 1]) == found
    assert pinning.enforced([0]) == pinning.UNKNOWN  # one CPU: nothing to compare


def test_this_kernel_enforces_the_pin_or_is_too_busy_to_tell():
    # two processes pinned to one CPU can't get more than its time where the pin holds
    assert pinning.enforced() in (pinning.ENFORCED, pinning.UNKNOWN)


def test_a_node_measures_once_per_boot(tmp_path, monkeypatch):
    monkeypatch.setattr(pinning, "enforced", lambda: pinning.NOT_ENFORCED)
    assert pinning.of_node(tmp_path) == pinning.NOT_ENFORCED
    monkeypatch.setattr(pinning, "enforced", lambda: pytest.fail("measured twice"))
    assert pinning.of_node(tmp_path) == pinning.NOT_ENFORCED


def test_a_run_says_once_per_host_that_its_pins_are_not_enforced():
    listener = PinningListener()
    records = [
        PointRecord((i,), affinity_enforced=e, host=h)
        for i, (e, h) in enumerate([(0, "a"), (0, "a"), (1, "b")])
    ]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert listener.on_records(None, records) == records  # type: ignore[arg-type]
    said = [str(w.message) for w in seen if issubclass(w.category, SweepWarning)]
    assert len(said) == 1 and said[0].startswith("a does not enforce CPU affinity"), said
