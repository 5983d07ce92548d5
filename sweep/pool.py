"""The per-worker core pool and the task every point runs as in a Dask worker thread.

:class:`CorePool` is a ``distributed.WorkerPlugin``. It owns the CPUs in the worker
process's affinity mask (on a batch node: the cores the batch system gave the job, not the
whole node) and leases ``k`` of them to each running point, disjoint from every other lease
on that worker. Each lease comes with a warm :class:`~sweep.child.Child` pinned to exactly
those cores; when the point ends the child goes back to an idle list keyed by its cores and
config, and the next point that can take the same cores reuses it (no new ``import jax``).

Children are recycled after ``max_jobs`` jobs, above ``max_rss`` bytes, or when they died;
an idle child whose cores a new lease needs is closed first, so the live children's core
sets never overlap. Children are spawned from one long-lived thread of the pool, because
``PR_SET_PDEATHSIG`` fires when the spawning *thread* exits: this way they die with the
worker process and never outlive it, even when it is SIGKILLed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any

from distributed import WorkerPlugin, get_worker

from sweep import _compat, events
from sweep.child import Child, ChildConfig, ChildDied
from sweep.jobqueue import JOB_ID_VARS
from sweep.plan import PointTask
from sweep.protocol import PointRecord

log = logging.getLogger(__name__)

PLUGIN_NAME = "sweep-core-pool"


class CorePool(WorkerPlugin):
    """Core leases and warm children for one worker process.

    The pool owns the first ``threads`` CPUs (the worker's ``threads`` resource) of the
    worker's affinity mask, or all of them when the worker advertises no such resource.
    Registered idempotently: a second sweep on the same client finds the children of the
    first one still warm.
    """

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, log_level: int = logging.WARNING) -> None:
        self.log_level = log_level

    def setup(self, worker: Any = None) -> None:
        """Claim the cores; all state is made here so the plugin itself pickles.

        With ``log_level`` below WARNING (the client's ``sweep -v``), this worker's
        ``sweep`` loggers write to its stderr (a batch job's log file on a cluster).
        """
        _log_to_stderr(self.log_level)
        cores = tuple(sorted(os.sched_getaffinity(0)))
        wanted = _compat.worker_resources(worker).get("threads") if worker is not None else None
        self.cores = cores[: int(wanted)] if wanted else cores
        self._free: set[int] = set(self.cores)
        self._idle: list[Child] = []
        self._cond = threading.Condition()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="sweep-spawner")
        self.spawned = 0

    def teardown(self, worker: Any = None) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()
        self._spawner.shutdown(wait=False)

    @contextmanager
    def lease(
        self, k: int, config: ChildConfig, max_jobs: int = 500, max_rss: int | None = None
    ) -> Iterator[Child]:
        """Hold ``k`` cores of this worker and a warm child pinned to them.

        On release the child goes back to the idle list unless it died, has run
        ``max_jobs`` jobs, or holds more than ``max_rss`` bytes; then it is closed.
        """
        if k > len(self.cores):
            raise ValueError(
                f"a job asks for {k} cores but this worker has {len(self.cores)} "
                f"({list(self.cores)}); lower resources.threads"
            )
        with self._cond:
            self._cond.wait_for(lambda: len(self._free) >= k)
            child = self._take_idle(k, config)
            cores = child.cores if child else self._choose(k)
            self._free -= set(cores)
            stale = [c for c in self._idle if set(c.cores) & set(cores)]
            self._idle = [c for c in self._idle if c not in stale]
        try:
            for c in stale:
                c.close()
            if child is None:
                child = self._spawner.submit(Child, cores, config).result()
                self.spawned += 1
            yield child
        finally:
            self._give_back(cores, child, max_jobs, max_rss)

    def _take_idle(self, k: int, config: ChildConfig) -> Child | None:
        for child in self._idle:
            if child.config == config and len(child.cores) == k and set(child.cores) <= self._free:
                self._idle.remove(child)
                return child
        return None

    def _choose(self, k: int) -> tuple[int, ...]:
        """k free cores, preferring ones no idle child sits on (keeps warm children warm)."""
        warm = {c for child in self._idle for c in child.cores}
        order = sorted(self._free, key=lambda c: (c in warm, c))
        return tuple(sorted(order[:k]))

    def _give_back(
        self, cores: tuple[int, ...], child: Child | None, max_jobs: int, max_rss: int | None
    ) -> None:
        keep = (
            child is not None
            and child.alive()
            and child.jobs_run < max_jobs
            and (max_rss is None or child.rss() <= max_rss)
        )
        if child is not None and not keep:
            log.info(
                "recycling child pid %d after %d jobs (alive=%s, rss=%d)",
                child.pid, child.jobs_run, child.alive(), child.rss(),
            )  # fmt: skip
            child.close()
        with self._cond:
            if keep and child is not None:
                self._idle.append(child)
            self._free |= set(cores)
            self._cond.notify_all()

    @classmethod
    def of_this_worker(cls) -> CorePool:
        """The pool registered on the current worker (installed on first use if missing)."""
        worker = get_worker()
        pool = _compat.worker_plugin(worker, PLUGIN_NAME)
        if pool is None:
            log.info("core pool not registered on %s; installing it", worker.address)
            _compat.install_worker_plugin(worker, cls(), PLUGIN_NAME)
            pool = _compat.worker_plugin(worker, PLUGIN_NAME)
        return pool


def _log_to_stderr(level: int) -> None:
    root = logging.getLogger("sweep")
    if level >= logging.WARNING or root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s [%(process)d]: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


def run_point(task: PointTask) -> PointRecord:
    """Run one point in a leased, capped child, retrying up to ``task.retries`` times.

    Returns the point's record (status, outputs, error, measurements, attempts, host); a
    job's failure is a record, never an exception, so Dask retries only lost workers.
    """
    worker = get_worker()
    pool = CorePool.of_this_worker()
    host = socket.gethostname()
    say = partial(worker.log_event, events.topic(task.sweep))
    say(events.to_msg(events.PointStarted(task.index, host)))
    reports: list[dict[str, Any]] = []
    record = PointRecord(task.index)
    for attempt in range(1, task.retries + 2):
        if attempt > 1:
            log.info(
                "point %s: attempt %d after %s (%s)", task.index, attempt, record.status, record.error[:80]
            )
        record = _attempt(
            pool,
            task,
            attempt,
            lambda r, a=attempt: say(events.to_msg(events.PointReported.of(task.index, r, a))),
        )
        reports.extend(record.reports)
        if record.status == "done":
            break
    record = replace(
        record,
        index=task.index,
        attempts=attempt,
        host=host,
        batch_job=next((os.environ[v] for v in JOB_ID_VARS if os.environ.get(v)), ""),
        thread_budget=task.thread_budget,
        reports=reports,
    )
    end = events.PointEnded(
        task.index, record.status, host, record.cores, record.peak_threads, record.wall_s, attempt
    )
    say(events.to_msg(end))
    return record


def _attempt(pool: CorePool, task: PointTask, attempt: int, on_report: Any) -> PointRecord:
    """One attempt at a point in a leased child; a child that can't start fails the attempt."""
    try:
        with pool.lease(task.threads, task.config, task.max_jobs, task.max_rss) as child:
            return child.run(task.job, task.kwargs, limits=task.limits, attempt=attempt, on_report=on_report)
    except ChildDied as exc:
        return PointRecord(task.index, error=f"child could not start: {exc}", output_tail=exc.output_tail)
