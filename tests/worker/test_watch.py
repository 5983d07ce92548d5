"""A running job's watch (worker/watch.py, worker/process.py): how often it looks, and that
its one /proc read says what psutil says."""

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from sweep.wire.task import Limits
from sweep.worker import process, watch
from sweep.worker.watch import Watch


def test_one_proc_read_gives_psutils_threads_and_cpu():
    stop = threading.Event()
    extra = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in extra:
        t.start()
    try:
        threads, rss, cpu = process.stat(os.getpid())
        me = psutil.Process()
        assert threads == me.num_threads()
        assert abs(rss - me.memory_info().rss) < 16 << 20
        times = me.cpu_times()
        assert abs(cpu - (times.user + times.system + times.children_user + times.children_system)) < 0.1
    finally:
        stop.set()
    assert process.stat(2**22 + 12345) is None  # no such process


class _Child:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        self.process = process.Process(self.proc)


def test_the_subprocess_scan_backs_off_while_nothing_changes_and_a_new_job_resets_it():
    child = _Child()
    try:
        p = child.process
        seen = []
        for _ in range(4):
            p._scanned = -1e9  # due now
            p.sample()
            seen.append(p._scan_every)
        assert seen == [1.0, 2.0, 4.0, 4.0]  # the same (no) processes each time
        p.rescan()
        assert p._scan_every == process.SCAN_S
    finally:
        child.proc.kill()
        child.proc.wait()


def test_a_job_is_sampled_often_while_young_or_near_a_limit():
    w = Watch.__new__(Watch)
    w.limits, w._rss, w._threads = Limits(memory=1000, max_threads=100), 0, 0
    w.t0 = time.monotonic()
    assert w.interval() == watch.SAMPLE_S  # young
    w.t0 = time.monotonic() - 60
    assert w.interval() == watch.SAMPLE_SETTLED_S
    w._rss = 900  # near its memory limit
    assert w.interval() == watch.SAMPLE_S
    w._rss, w._threads = 0, 90  # near its thread limit
    assert w.interval() == watch.SAMPLE_S


@pytest.mark.slow
def test_a_job_that_reports_more_often_than_the_watch_samples_is_still_held_to_its_limits(client, tmp_path):
    """Found: each message of the job (a report) woke the watch, which went back to waiting
    without sampling, so a job reporting more often than the interval was never sampled: no
    live figures on the /sweep page, no memory or thread limit enforced."""
    from sweep import Sweep
    from tests.helpers import JOBS

    s = Sweep(
        f"{JOBS}:chatty_hog",
        {"grid": {"x": [0]}, "fixed": {"mb": 300, "seconds": 20.0, "every": 0.001}},
        output=tmp_path / "out.zarr",
        resources={"memory": "200MiB"},
    )
    ds = s.run(client=client, progress=False)
    assert ds["status"].values.tolist() == ["oom"], ds["error"].values
