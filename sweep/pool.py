"""The per-worker core pool and the task every point runs as in a Dask worker thread.

:class:`CorePool` is a ``distributed.WorkerPlugin``. It owns the CPUs in the worker
process's affinity mask (on a batch node: the cores the batch system gave the job, not the
whole node) and leases ``k`` of them to each running point, disjoint from every other lease
on that worker. Each lease comes with a warm :class:`~sweep.capped.Child` pinned to exactly
those cores; when the point ends the child goes back to an idle list keyed by its cores and
config, and the next point that can take the same cores reuses it (no new ``import jax``).

Children are recycled after ``max_jobs`` jobs, above ``max_rss`` bytes, or when they died;
an idle child whose cores a new lease needs is closed first, so the live children's core
sets never overlap. Children are spawned from one long-lived thread of the pool, because
``PR_SET_PDEATHSIG`` fires when the spawning *thread* exits: this way they die with the
worker process and never outlive it, even when it is SIGKILLed.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from distributed import WorkerPlugin, get_worker

from sweep.capped import Child, ChildConfig, ChildDied, Outcome
from sweep.job import JobRef
from sweep.jobqueue import JOB_ID_VARS

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

    def setup(self, worker: Any = None) -> None:
        """Claim the cores; all state is made here so the plugin itself pickles."""
        cores = tuple(sorted(os.sched_getaffinity(0)))
        wanted = getattr(getattr(worker, "state", None), "total_resources", {}).get("threads")
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
            child.close()
        with self._cond:
            if keep:
                self._idle.append(child)
            self._free |= set(cores)
            self._cond.notify_all()

    @classmethod
    def of_this_worker(cls) -> CorePool:
        """The pool registered on the current worker (installed on first use if missing)."""
        worker = get_worker()
        pool = worker.plugins.get(PLUGIN_NAME)
        if pool is None:
            pool = cls()
            pool.setup(worker)
            worker.plugins[PLUGIN_NAME] = pool
        return pool


@dataclass
class PointTask:
    """Everything a worker needs to run one point; small and picklable."""

    sweep: str
    index: tuple[int, ...]
    job: JobRef
    kwargs: Mapping[str, Any]
    threads: int = 1
    timeout: float | None = None
    memory: int | None = None
    retries: int = 0
    thread_budget: int = 15
    kill_over_budget: bool = False
    config: ChildConfig = field(default_factory=ChildConfig)
    max_jobs: int = 500
    max_rss: int | None = None


def run_point(task: PointTask) -> dict[str, Any]:
    """Run one point in a leased, capped child, retrying up to ``task.retries`` times.

    Returns a record (status, outputs, error, measurements, attempts, host); a job's
    failure is a record, never an exception, so Dask retries only lost workers.
    """
    worker = get_worker()
    pool = CorePool.of_this_worker()
    topic, host = f"sweep-{task.sweep}", socket.gethostname()
    worker.log_event(topic, {"event": "start", "index": task.index, "host": host})
    outcome = Outcome("failed")
    reports: list[dict[str, Any]] = []
    attempts = 0
    while attempts <= task.retries:
        attempts += 1

        def forward(report: dict[str, Any], attempt: int = attempts) -> None:
            report["attempt"] = attempt
            reports.append(report)
            worker.log_event(topic, {"event": "report", "index": task.index, **report})

        try:
            with pool.lease(task.threads, task.config, task.max_jobs, task.max_rss) as child:
                outcome = child.run(
                    task.job,
                    task.kwargs,
                    timeout=task.timeout,
                    memory=task.memory,
                    max_threads=task.thread_budget if task.kill_over_budget else None,
                    on_report=forward,
                )
        except ChildDied as exc:
            outcome = Outcome("failed", error=f"child could not start: {exc}")
        if outcome.status == "done":
            break
    record = dict(vars(outcome))
    record.update(
        index=task.index,
        attempts=attempts,
        host=host,
        batch_job=next((os.environ[v] for v in JOB_ID_VARS if os.environ.get(v)), ""),
        thread_budget=task.thread_budget,
        reports=reports,
    )
    summary = {k: record[k] for k in ("status", "host", "peak_threads", "wall_s", "attempts")}
    worker.log_event(topic, {"event": "end", "index": task.index, "cores": list(outcome.cores), **summary})
    return record
