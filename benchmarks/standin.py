"""In-process stand-in children, for simulating nodes of more cores than this machine has.

    dask worker ... --preload benchmarks/standin.py

A Dask preload: in the worker process it replaces the class the core pool starts its children
from (``sweep.worker.pool.Child``, and the same name in :mod:`sweep.worker.renewal`) with
:class:`StandInChild`, which runs each job in the worker thread that leased it instead of in a
process of its own. Everything else of a point's path is the real one: the client's plan,
window, listeners and store; the scheduler; the worker's task (:mod:`sweep.worker.points`), the
pool's leases of the node's (fake) cores, its idle list and recycling; the events the points
publish. What is left out is what a child process costs: its start, its pipes, its watch.

A job run this way is not capped, limited or watched: the stand-in is for jobs that hold a slot
and little CPU (:func:`benchmarks.jobs.between`), at a scale no machine here runs children.

The preload also makes the worker's idle task threads look for work every ``IDLE_POLL_S``
instead of every second (:class:`_PatientQueue`). On a real node of 128 cores
128 idle threads waking once a second cost nothing; 12,800 of them on this machine's 2 cores
woke 12,800 times a second, spent most of the machine in the kernel (load average 1,800, 62%
system time) and so measured the simulation, not the client. A thread given work wakes at
once either way (the queue's ``put`` wakes a waiting ``get``).
"""

from __future__ import annotations

import itertools
import queue
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sweep.child.outputs import normalize_outputs
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.protocol import PointRecord
from sweep.wire.task import Limits
from sweep.worker.child import NO_CONFIG, NO_LIMITS

_PIDS = itertools.count(1 << 22)  # above any real pid: the pool keys running children by pid
IDLE_POLL_S = 60.0


class _Age:
    """What the pool asks of a child's process: its age and its memory."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def age_s(self) -> float:
        return time.monotonic() - self._t0

    def rss(self) -> int:
        return 0


class _NoLog:
    """A log nothing is written to (the job's prints go to the worker's own stdout)."""

    def size(self) -> int:
        return 0

    def text(self, limit: int, end: int = -1) -> str:
        return ""

    def tail(self, lines: int = 30) -> str:
        return ""

    def read_from(self, offset: int, most: int = 4 << 20) -> tuple[int, bytes]:
        return 0, b""

    def next_job(self, at: int) -> None:
        pass


class StandInChild:
    """A child that runs its jobs in the calling thread; the pool's view of a child otherwise."""

    what = "stand-in child"
    reusable = True

    def __init__(self, cores: Sequence[int], config: ChildConfig = NO_CONFIG, devices: Any = None) -> None:
        self.cores = tuple(sorted(cores))
        self.config = config
        self.devices = None
        self.jobs_run = 0
        self.attempt = 0
        self.unrestorable: tuple[str, ...] = ()
        self.pid = next(_PIDS)
        self.process = _Age()
        self.log = _NoLog()
        self._closed = False

    def alive(self) -> bool:
        return not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, timeout: float = 5.0) -> None:
        self._closed = True

    stop = kill = close

    def prune(self) -> None:
        pass

    def run(
        self,
        job: JobRef,
        kwargs: Mapping[str, Any],
        *,
        limits: Limits = NO_LIMITS,
        attempt: int = 1,
        **_: Any,
    ) -> PointRecord:
        """Run the job here and now: a ``done`` record with its outputs, or a ``failed`` one
        with the traceback; wall and CPU seconds are this thread's."""
        self.jobs_run += 1
        self.attempt = attempt
        record = PointRecord(index=(), cores=self.cores, pid=self.pid, started=time.time())
        t0, cpu0 = time.perf_counter(), time.thread_time()
        try:
            record.outputs, record.status = normalize_outputs(job.load()(**kwargs)), "done"
        except Exception:
            record.error = traceback.format_exc()
        record.wall_s, record.cpu_s = time.perf_counter() - t0, time.thread_time() - cpu0
        record.peak_threads, record.finished = 1, time.time()
        return record

    def run_many(
        self,
        job: JobRef,
        kwargs: Sequence[Mapping[str, Any]],
        *,
        limits: Limits = NO_LIMITS,
        hooks: Any = None,
        on_next: Callable[[int], None] | None = None,
    ) -> list[PointRecord]:
        """Each job of ``kwargs`` in turn, as :meth:`run`."""
        records = []
        for i, one in enumerate(kwargs):
            if on_next is not None:
                on_next(i)
            records.append(self.run(job, one, limits=limits))
        return records


class _PatientQueue(queue.Queue):
    """A work queue whose waits for work last ``IDLE_POLL_S`` where Dask's threads ask for 1 s."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return super().get(block, None if timeout is None else max(timeout, IDLE_POLL_S))


def dask_setup(worker: Any) -> None:
    """The preload's hook: the worker's core pool starts stand-ins from now on, and its task
    threads wait for work ``IDLE_POLL_S`` at a time (the queue they wait on is made patient)."""
    from sweep.worker import pool, renewal

    pool.Child = renewal.Child = StandInChild  # type: ignore[misc,assignment]
    worker.executors["default"]._work_queue.__class__ = _PatientQueue
