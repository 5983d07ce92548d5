"""How busy the slots stayed (benchmarks/slots.py), from the points' own start and end times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.slots import busy  # noqa: E402


def test_the_ramp_ends_at_the_slots_th_start_and_busy_counts_what_runs_until_the_last_start():
    # 2 slots, the run began at 0: the first two points start at 1 and 2 (the ramp ends at 2) and
    # end at 5 and 6; the next two take the slots at 5.5 and 6
    t0 = np.array([1.0, 2.0, 5.5, 6.0])
    t1 = np.array([5.0, 6.0, 9.5, 10.0])
    got = busy(t0, t1, start=0.0, slots=2)
    assert got["ramp_s"] == 2.0 and got["last_start_s"] == 6.0
    # samples at 2, 2.5, ..., 5.5: 2 running at each but at 5.0 (one ended, the next not begun)
    assert got["busy_least"] == 0.5
    assert got["busy_mean"] == (7 * 2 + 1) / 8 / 2


def test_the_stand_in_preload_reaches_dasks_work_queue_as_it_is_there():
    """benchmarks/standin.py makes a worker's idle task threads patient by changing the class of
    its default executor's ``_work_queue`` (distributed's private attribute): pinned here, so a
    distributed that renames it fails this test rather than the benchmark's figures."""
    import queue

    from distributed.threadpoolexecutor import ThreadPoolExecutor

    from benchmarks.standin import _PatientQueue

    executor = ThreadPoolExecutor(1)
    try:
        assert type(executor._work_queue) is queue.Queue
        executor._work_queue.__class__ = _PatientQueue
        assert executor.submit(lambda: 7).result(timeout=10) == 7
    finally:
        executor.shutdown()
