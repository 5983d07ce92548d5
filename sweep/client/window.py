"""Submitting a sweep's points: a bounded window in flight, several points per task when short.

A sweep never has all its points submitted at once: :class:`Window` keeps at most
``IN_FLIGHT_PER_SLOT`` tasks per job slot of the cluster (at least ``MIN_IN_FLIGHT``) submitted
and unfinished, and submits more as they finish, so the client's memory and the scheduler's
queue stay bounded whatever the number of points (100,000 points no longer flood the
scheduler and starve the client's connection). The tasks of one fill go out in one
``Client.map``: one graph update of the scheduler for all of them.

Each task runs a *chunk* of points one after the other (:func:`sweep.worker.points.run_points`). The
first tasks hold one point each; from then on the chunk is sized from the median job time of
the points finished so far so that a task holds about ``TARGET_TASK_S`` of work (at most
``MAX_CHUNK`` points), and never more than a fair share of what is left, so the end of a
sweep still uses every slot. Jobs of a millisecond no longer pay Dask's per-task cost each;
jobs of ``TARGET_TASK_S`` or more stay one per task.
"""

from __future__ import annotations

import itertools
import logging
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dask.config
from distributed import Client, Future
from distributed.scheduler import KilledWorker

from sweep import cadence
from sweep.capacity import memory, resources
from sweep.client import plan
from sweep.client.autothreads import Calibration
from sweep.wire.placement import Placement
from sweep.wire.protocol import PointRecord
from sweep.wire.task import PointTask
from sweep.worker import batchjob
from sweep.worker.points import run_points

log = logging.getLogger(__name__)
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


ONE_CORE = Placement()  # a point of one core that asks nothing else


@dataclass(frozen=True)
class Learned:
    """What a window learned as its points ended, for the listeners: the memory each point
    asks (bytes; None when nothing was learned) and from how many points' peak RSS, and a
    ``threads: auto`` sweep's calibration (None for a fixed k)."""

    memory: int | None
    memory_from: int
    auto: Calibration | None


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
        placement: Placement = ONE_CORE,
        queue: int | None = None,
        learn_memory: bool = False,
        offers_memory: bool = False,
        auto: Calibration | None = None,
        auto_cores: int = 0,
    ) -> None:
        """``placement``: the run's one :class:`~sweep.wire.placement.Placement` (each point's
        cores, the memory it asks, ``resources.memory``, and the (resource, amount) of GPUs or
        TPUs it asks of workers that offer them); ``queue``: when given, at most the cluster's
        job slots plus ``queue`` points are in flight, one per task, and a task is taken from
        ``tasks`` only when there is room for it (a search asks each trial as late as it can).
        ``learn_memory``: without a memory ask, ask what the points that ended used
        (:func:`sweep.worker.memory.learned_ask`). Memory is asked only when ``offers_memory``
        (a cluster this run started, whose workers all offer it) or once a worker is seen to
        offer it (:mod:`sweep.worker.memory`).
        ``auto``: a ``threads: auto`` sweep's calibration, which sets each task's k (one point a
        task, and no task beyond its points, until it has decided: :mod:`sweep.client.autothreads`);
        ``auto_cores``: the cores of the largest worker to expect while none has joined."""
        self.client = client
        self.placement = placement
        self.threads = placement.cores  # a `threads: auto` calibration changes it
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
        self._learned: int | None = None  # the learned memory ask, without resources.memory
        self._learn = learn_memory and placement.memory is None
        self.learned_from = 0  # points whose peak RSS the learned ask is based on
        self._largest_peak = 0  # the largest peak RSS of the points that ended
        self._peaks_seen = 0  # how many points' peaks that is over
        self._offered: list[int] = []  # the memory each worker offers, at the last count
        self._offers_memory = offers_memory
        self.auto = auto
        self._auto_cores = auto_cores
        self._cores: list[int] = []  # the threads each worker offers, at the last count
        self.offers: list[dict[str, float]] = []  # each worker's resources, at the last count

    def learned(self) -> Learned:
        """What this window learned so far (:class:`Learned`)."""
        return Learned(self._learned, self.learned_from, self.auto)

    @property
    def memory(self) -> int | None:
        """What each point asks of memory now: the placement's, else what was learned."""
        return self.placement.memory if self.placement.memory is not None else self._learned

    def slots(self, threads: int) -> int:
        """How many jobs of ``threads`` cores (and the memory each asks) the cluster's workers
        can run at once (counted at most every :func:`cadence.refresh_s`: it asks the scheduler)."""
        count, when = self._slots
        if time.monotonic() - when >= self._every:
            workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
            self.offers = offers = [w.get("resources", {}) for w in workers]
            self._offered = [int(o[resources.MEMORY]) for o in offers if resources.MEMORY in o]
            self._cores = [resources.cores(o) for o in offers]
            ask = self._resources(threads)
            count = sum(resources.at_once(o, ask) for o in offers)
            self._slots = (count, time.monotonic())
        return count

    def _ask(self) -> int | None:
        """The memory a point asks of the scheduler: none of workers that offer none."""
        return self.memory if self._offers_memory or self._offered else None

    def asked(self) -> dict[str, float]:
        """The resources a task of this window asks now (the threads, memory, accelerator and
        amounts of its points)."""
        return self._resources(self.threads)

    def _resources(self, threads: int) -> dict[str, float]:
        return resources.ask(threads, self._ask(), self.placement.accelerator, self.placement.amounts)

    def _take(self) -> PointTask | None:
        if self._held is not None:
            task, self._held = self._held, None
            return task
        return next(self.tasks, None)

    def waiting(self) -> bool:
        """Whether points are held back until a worker joins: they ask memory only of workers
        that offer it, and no worker has been seen yet to say whether it does (a point sent
        before would ask no memory, and run on a worker whatever it offers)."""
        return self.left > 0 and self.memory is not None and not self._offers_memory and not self.offers

    def fill(self) -> list[Future]:
        """Submit tasks until the window is full or no point is left; the new futures."""
        new: list[Future] = []
        slots = self.slots(self.threads)
        if self.waiting():
            return new
        if self.auto is not None:
            self.auto.fit(self._cores or [self._auto_cores], self.left)
            if self.auto.chosen is not None and self.auto.chosen != self.threads:
                self.threads = self.auto.chosen
                self._slots = (self._slots[0], -math.inf)
                slots = self.slots(self.threads)
        if self.queue is not None and len(self.in_flight) >= slots + self.queue:
            return new
        head = self._take()
        if head is None:
            self.left = 0
            return new
        most = max(MIN_IN_FLIGHT, IN_FLIGHT_PER_SLOT * slots) if self.queue is None else slots + self.queue
        if self._learn and not self._peaks_seen:  # what a point uses is still unknown: no more than run
            most = min(most, max(1, slots))
        room = most - len(self.in_flight)
        chunks: list[list[PointTask]] = []
        while head is not None and room > 0:
            calibrating = self.auto is not None and self.auto.calibrating
            size = chunk_size(self.walls, self.left, slots) if self.queue is None and not calibrating else 1
            chunk = [head, *itertools.islice(self.tasks, size - 1)]
            if self.auto is not None:
                tuned = [self.auto.next(t) for t in chunk]
                if tuned[0] is None:  # the calibration's points are out: wait for them to end
                    break
                chunk = [t for t in tuned if t is not None]
            chunks.append(chunk)
            self.left -= len(chunk)
            room -= 1
            head = self._take() if room > 0 else None
        self._held = head
        return self._submit(chunks)

    def _submit(self, chunks: list[list[PointTask]]) -> list[Future]:
        """A task for each chunk, those of one resource ask in one ``Client.map``: one graph
        update of the scheduler for them all, where a ``submit`` each costs one a task (at
        thousands of slots, most of the scheduler's time); their futures, in order."""
        expected = batchjob.estimate(self.walls)
        new: list[Future] = []
        for cores, same in itertools.groupby(chunks, key=lambda chunk: chunk[0].placement.cores):
            group = list(same)
            futures = self.client.map(
                run_points,
                group,
                [expected] * len(group),
                key=[self._key(chunk) for chunk in group],
                resources=self._resources(cores),
                pure=False,
            )
            self.in_flight.update(zip(futures, group))
            new.extend(futures)
        return new

    def finished(self, future: Future, result: Any) -> list[PointRecord]:
        """The records of a finished task (a task that raised fails each of its points)."""
        chunk = self.in_flight.pop(future)
        if isinstance(result, list) and all(isinstance(r, PointRecord) for r in result):
            self.walls = (self.walls + [r.wall_s for r in result if not math.isnan(r.wall_s)])[-64:]
            self._learn_from(result)
            records = result
        else:
            records = [
                PointRecord(t.index, status="failed", attempts=1, error=_task_failed(result)) for t in chunk
            ]
        self._calibrated_by(records)
        return records

    def _calibrated_by(self, records: list[PointRecord]) -> None:
        """Pass ended points to a ``threads: auto`` calibration; from its decision on, slots
        are counted for the chosen k."""
        if self.auto is None or self.auto.decided:
            return
        self.auto.records_ended(records)
        if self.auto.chosen is not None:
            self.threads = self.auto.chosen
            self.walls = []  # the chunk size follows the chosen k's walls
            self._slots = (self._slots[0], -math.inf)

    def _learn_from(self, records: list[PointRecord]) -> None:
        """Raise the learned ask to what the points that ended used (never lower it)."""
        if not self._learn:
            return
        peaks = [r.peak_rss for r in records if r.peak_rss > 0]
        if not peaks:
            return
        self._peaks_seen += len(peaks)
        self._largest_peak = max(self._largest_peak, *peaks)
        ask = memory.learned_ask(self._largest_peak, max(self._offered, default=None))
        if ask is not None and ask > (self.memory or 0):
            log.info("points now ask %s each (%gx the largest peak RSS of %d points)",
                     memory.shown(ask), memory.LEARN_FACTOR, self._peaks_seen)  # fmt: skip
            self._learned, self.learned_from = ask, self._peaks_seen
            self._slots = (self._slots[0], -math.inf)  # recount with the new ask

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
