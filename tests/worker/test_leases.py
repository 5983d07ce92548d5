"""Core leases per node (sweep/worker/leases.py): disjoint across worker processes and sweeps."""

import os
import signal
import subprocess
import sys
import time

import pytest

from sweep import Sweep
from sweep.wire.placement import Placement
from sweep.worker import leases
from tests.helpers import (
    JOBS,
    ROOT,
    overlapping_pairs_share_no_core,
    scheduler_and_workers,
    submit_side_by_side,
)


def test_a_held_core_is_not_held_twice_and_comes_back_on_release(tmp_path):
    a, b, c = (leases.NodeLocks(tmp_path) for _ in range(3))  # three processes' handles
    first = a.hold([0, 1], 1, "first")
    assert first is not None and first.cores == (0,)
    second = b.hold([0, 1], 1, "second")
    assert second is not None and second.cores == (1,)
    assert c.hold([0, 1], 1, "third") is None
    assert "first" in leases.holders(tmp_path)[0]
    first.release()
    assert c.hold([0], 1, "again") is not None


def test_a_killed_holder_frees_its_cores_at_once(tmp_path):
    code = (
        "import sys, time; from pathlib import Path; from sweep.worker import leases; "
        f"held = leases.NodeLocks(Path({str(tmp_path)!r})).hold([0, 1], 2, 'doomed'); "
        "print('held', flush=True); "
        "time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    mine = leases.NodeLocks(tmp_path)
    assert mine.hold([0, 1], 1, "waiting") is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert mine.hold([0, 1], 2, "after") is not None


@pytest.mark.slow
def test_two_worker_processes_on_one_node_pin_to_different_cores(tmp_path):
    """Found: `dask worker --nworkers 2 --nthreads 1 --resources threads=1` on a 2-core host
    pinned every point to core 0, two at a time, while core 1 stayed idle."""
    args = ["--nworkers", "2", "--nthreads", "1", "--resources", "threads=1"]
    with scheduler_and_workers(tmp_path, args, workers=2) as address:
        ds = Sweep(
            f"{JOBS}:busy",
            {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"seconds": 2.0}},
            cluster={"kind": "address", "address": address},
            output=tmp_path / "out.zarr",
        ).run(progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert set(ds["cores"].values.tolist()) == {"0", "1"}
    assert not overlapping_pairs_share_no_core(ds)


@pytest.mark.slow
def test_two_sweeps_at_once_on_one_host_never_share_a_core(tmp_path):
    keys = {"job": "busy", "params": {"grid": {"x": [0, 1, 2]}, "fixed": {"seconds": 1.5}}}
    left, right = submit_side_by_side(tmp_path, {"left": keys, "right": keys})
    assert not overlapping_pairs_share_no_core(left, right)


def test_leases_wait_instead_of_doubling_up(tmp_path, monkeypatch):
    from sweep.wire.childconfig import ChildConfig
    from sweep.worker.pool import CorePool

    monkeypatch.setenv("SWEEP_LEASE_DIR", str(tmp_path))
    pool = CorePool()
    pool.setup()
    others = leases.NodeLocks(tmp_path).hold(pool.cores, len(pool.cores), "another sweep")
    released = []

    def release_soon():
        time.sleep(1.0)
        released.append(time.monotonic())
        others.release()

    import threading

    threading.Thread(target=release_soon).start()
    with pool.lease(Placement(1), ChildConfig(cap=True, compile_cache=None)) as child:
        assert released and time.monotonic() >= released[0]
        assert child.alive()
    pool.teardown()


def test_releasing_cores_after_the_locks_closed_is_a_no_op(tmp_path):
    """Found: a start-up cancel's prewarm teardown raised KeyError in NodeLocks.release."""
    locks = leases.NodeLocks(tmp_path)
    held = locks.hold([0, 1], 1, "test")
    assert held is not None
    locks.close()
    held.release()  # the locks went with their files: nothing to do, no KeyError
    assert leases.NodeLocks(tmp_path).hold(held.cores, 1, "again") is not None
