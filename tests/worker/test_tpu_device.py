"""TPU points on a real chip: run where the node has one and JAX has libtpu; skipped elsewhere
(no accelerator is lent to CI). Two TPU points and twelve CPU points through the child layer
(benchmarks/tpu_points.py): the chip leases serialise the TPU points (both done, never
libtpu's lock-file error), the CPU points are not slowed, and every point's peak threads are
within its budget.

Run it on a machine with a chip: ``python -m pytest --noconftest tests/worker/test_tpu_device.py``.
"""

import importlib.util
import os

import pytest

from sweep.worker import tpus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not tpus.detect() or tpus.FAKE in os.environ, reason="needs a TPU chip"),
    pytest.mark.skipif(
        importlib.util.find_spec("libtpu") is None, reason='needs JAX with libtpu ("jax[tpu]")'
    ),
]


def test_two_tpu_points_and_twelve_cpu_points_share_the_node():
    from benchmarks.tpu_points import scenario

    result = scenario(cpu=12, tpu=2, repeat=1)
    s = result["summary"]
    assert s["all_done"] and s["lockfile_errors"] == 0, result["runs"]
    assert not s["tpu_points_overlap"] and s["ran_on_tpu"], result["runs"]
    assert s["over_budget"] == 0, (s, result["budgets"])
    assert s["cpu_beside_tpu_ratio"] < 1.10, s  # the TPU child's host runtime on cores of its own
    # without the leases, the second of two children opening the chip fails in libtpu
    assert sorted(r["status"] for r in result["unleased"]) == ["done", "failed"], result["unleased"]
