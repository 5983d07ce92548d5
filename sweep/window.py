"""Submitting a sweep's points: a bounded window in flight, several points per task when short.

A sweep never has all its points submitted at once: :class:`Window` keeps at most
``IN_FLIGHT_PER_SLOT`` tasks per job slot of the cluster (at least ``MIN_IN_FLIGHT``) submitted
and unfinished, and submits more as they finish, so the client's memory and the scheduler's
queue stay bounded whatever the number of points (100,000 points no longer flood the
scheduler and starve the client's connection).

Each task runs a *chunk* of points one after the other (:func:`sweep.pool.run_points`). The
first tasks hold one point each; from then on the chunk is sized from the median job time of
the points finished so far so that a task holds about ``TARGET_TASK_S`` of work (at most
``MAX_CHUNK`` points), and never more than a fair share of what is left, so the end of a
sweep still uses every slot. Jobs of a millisecond no longer pay Dask's per-task cost each;
jobs of ``TARGET_TASK_S`` or more stay one per task.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any

import dask.config
from distributed import Client, Future
from distributed.scheduler import KilledWorker

from sweep import cadence, plan, walltime
from sweep.pool import run_points
from sweep.protocol import PointRecord
from sweep.task import PointTask

MIN_IN_FLIGHT = 16
IN_FLIGHT_PER_SLOT = 4
TARGET_TASK_S = 0.1
MAX_CHUNK = 256


def chunk_size(walls: Sequence[float], left: int, slots: int) -> int:
    """Points per task for jobs whose recent wall times are ``walls``, ``left`` points to go
    on ``slots`` job slots."""
    if not walls:
        return 1
    typical = max(statistics.median(walls), 1e-6)
    size = min(MAX_CHUNK, int(TARGET_TASK_S / typical))
    return max(1, min(size, left // (2 * max(1, slots))))


class Window:
    """Feeds ``tasks`` to ``client`` a bounded number at a time; see the module docstring."""

    def __init__(
        self,
        client: Client,
        tasks: Iterator[PointTask],
        left: int,
        names: Sequence[str],
        token: str,
        *,
        threads: int = 1,
        queue: int | None = None,
    ) -> None:
        """``threads``: the cores of each point; ``queue``: when given, at most the cluster's
        job slots plus ``queue`` points are in flight, one per task, and a task is taken from
        ``tasks`` only when there is room for it (a search asks each trial as late as it can)."""
        self.client = client
        self.threads = threads
        self.queue = queue
        self.tasks = tasks
        self.left = left  # points not yet submitted
        self.names = tuple(names)
        self.token = token
        self.in_flight: dict[Future, list[PointTask]] = {}
        self.walls: list[float] = []  # job wall times of the last finished points
        self._held: PointTask | None = None
        self._slots = (0, -math.inf)  # job slots, and when they were counted
        self._every = cadence.refresh_s()

    def slots(self, threads: int) -> int:
        """How many jobs of ``threads`` cores the cluster's workers can run at once (counted at
        most every :func:`cadence.refresh_s`: it asks the scheduler)."""
        count, when = self._slots
        if time.monotonic() - when >= self._every:
            workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
            count = sum(int(w.get("resources", {}).get("threads", 0)) // threads for w in workers)
            self._slots = (count, time.monotonic())
        return count

    def _take(self) -> PointTask | None:
        if self._held is not None:
            task, self._held = self._held, None
            return task
        return next(self.tasks, None)

    def fill(self) -> list[Future]:
        """Submit tasks until the window is full or no point is left; the new futures."""
        new: list[Future] = []
        slots = self.slots(self.threads)
        if self.queue is not None and len(self.in_flight) >= slots + self.queue:
            return new
        head = self._take()
        if head is None:
            self.left = 0
            return new
        most = max(MIN_IN_FLIGHT, IN_FLIGHT_PER_SLOT * slots) if self.queue is None else slots + self.queue
        room = most - len(self.in_flight)
        while head is not None and room > 0:
            size = chunk_size(self.walls, self.left, slots) if self.queue is None else 1
            chunk = [head, *itertools.islice(self.tasks, size - 1)]
            future = self.client.submit(
                run_points,
                chunk,
                walltime.estimate(self.walls),
                key=self._key(chunk),
                resources={"threads": head.threads},
                pure=False,
            )
            self.in_flight[future] = chunk
            new.append(future)
            self.left -= len(chunk)
            room -= 1
            head = self._take() if room > 0 else None
        self._held = head
        return new

    def finished(self, future: Future, result: Any) -> list[PointRecord]:
        """The records of a finished task (a task that raised fails each of its points)."""
        chunk = self.in_flight.pop(future)
        if isinstance(result, list) and all(isinstance(r, PointRecord) for r in result):
            self.walls = (self.walls + [r.wall_s for r in result if not math.isnan(r.wall_s)])[-64:]
            return result
        return [PointRecord(t.index, status="failed", attempts=1, error=_task_failed(result)) for t in chunk]

    def _key(self, chunk: list[PointTask]) -> str:
        key = plan.task_key(chunk[0], self.names, self.token)
        return key if len(chunk) == 1 else f"{key}+{len(chunk) - 1}"


def _task_failed(error: Any) -> str:
    """Why a point whose Dask task raised failed (a job's own failure is a record, not this);
    ``error`` is the exception, or the (type, exception, traceback) Dask's as_completed gives."""
    if isinstance(error, tuple) and len(error) == 3:
        error = error[1]
    if isinstance(error, KilledWorker):
        allowed = int(dask.config.get("distributed.scheduler.allowed-failures"))
        times = f"{allowed + 1} time{'s' if allowed else ''}"
        return (
            f"its worker was lost {times} while running it (a node lost, a batch job ended "
            "or preempted, a worker killed or out of memory); Dask gives up after "
            f"distributed.scheduler.allowed-failures ({allowed}) requeues. Find why the workers die (the "
            "batch jobs' logs, sweep -v), or raise that setting; submit again to run it again"
        )
    return f"task failed: {error!r}"
