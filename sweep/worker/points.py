"""The Dask tasks a sweep's points run as, in a worker thread: one point (:func:`run_point`)
or a chunk of short ones (:func:`run_points`), each attempt in a child leased from the
worker's :class:`~sweep.worker.pool.CorePool`.

A job's failure is a record, never an exception, so Dask retries only lost workers; a
point's retries (``resources.retries``) are attempts here, an attempt after an ``oom`` with
``resources.retry_memory`` asking more memory of the worker's offer
(:mod:`sweep.worker.memorylease`). Each point's start, reports, checkpoints and end are
published on the sweep's topic (:mod:`sweep.wire.events`).
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

import psutil
from distributed import Reschedule, get_client, get_worker

from sweep.wire import events
from sweep.wire.protocol import FINISHED, PointRecord, Saved
from sweep.wire.task import PointTask
from sweep.worker import batchjob, memorylease
from sweep.worker.checkpoints import PointCheckpoints, metadata_key
from sweep.worker.pool import CorePool, of_this_worker
from sweep.worker.process import ChildDied

log = logging.getLogger(__name__)


def run_point(
    task: PointTask, announce: bool = True, first: tuple[PointRecord, PointCheckpoints] | None = None
) -> PointRecord:
    """Run one point in a leased, capped child, retrying up to ``task.retries`` times.

    Returns the point's record (status, outputs, error, measurements, attempts, host); a
    job's failure is a record, never an exception, so Dask retries only lost workers. With
    ``announce`` its start and end are sent as events (reports always are). ``first``: the
    record of a first attempt already made (in a chunk: :func:`run_points`) and its checkpoints.
    """
    worker = get_worker()
    pool = of_this_worker()
    host = pool.host
    say = partial(worker.log_event, events.topic(task.sweep))
    reports: list[dict[str, Any]] = []
    logs: list[str] = []
    record, attempt = (first[0], 1) if first else (PointRecord(task.index), 0)
    checkpoints = first[1] if first else _checkpoints(task, say)
    reports.extend(record.reports)
    logs.extend(record.logs)
    tried = task
    while record.status not in FINISHED and attempt <= task.retries:
        attempt += 1
        if task.run and task.run in pool.running.stopped:
            record = PointRecord(task.index, status="failed", error="cancelled")
            break
        if attempt > 1:
            log.info(
                "point %s: attempt %d after %s (%s)", task.index, attempt, record.status, record.error[:80]
            )
        started = (
            (lambda cores: say(events.to_msg(events.PointStarted(task.index, host, cores, time.time()))))
            if announce and attempt == 1
            else None
        )
        tried = _more_memory(tried, record) if attempt > 1 else tried
        sampled = (
            (
                lambda *seen: say(
                    events.to_msg(
                        events.PointSampled(task.index, seen[0], task.placement.thread_budget, *seen[1:])
                    )
                )
            )
            if announce
            else None
        )
        with _memory_held(task, tried):
            record = _attempt(
                pool,
                tried,
                attempt,
                partial(_say_report, say, task.index, attempt),
                started,
                checkpoints,
                sampled,
            )
        reports.extend(record.reports)
        logs.extend(record.logs)
    record = replace(
        record,
        index=task.index,
        attempts=attempt,
        host=host,
        affinity_enforced=pool.pinning.result(),
        batch_job=pool.batch_job,
        thread_budget=task.placement.thread_budget,
        reports=reports,
        logs=logs,
        checkpoints=checkpoints.saved,
    )
    if announce:
        say(events.to_msg(events.PointEnded.of(record)))
    return record


def _more_memory(task: PointTask, record: PointRecord) -> PointTask:
    """The task for the attempt after ``record``'s: after an ``oom`` with ``retry_memory`` set,
    its memory limit times that factor, up to what this worker has (the ``memory`` it offers,
    else its Dask memory limit or the node's memory); otherwise as it was."""
    memory = task.limits.memory
    if record.status != "oom" or not task.retry_memory or memory is None:
        return task
    worker = get_worker()
    offer = memorylease.of_worker(worker).offer()
    has = (
        [offer]
        if offer
        else [psutil.virtual_memory().total, getattr(worker.memory_manager, "memory_limit", None)]
    )
    more = min(int(memory * task.retry_memory), *(m for m in has if m))
    if more <= memory:
        log.warning(
            "point %s: out of memory at %d MiB and this worker has no more to give", task.index, memory >> 20
        )
        return task
    log.info("point %s: retrying with %d MiB instead of %d MiB", task.index, more >> 20, memory >> 20)
    return replace(task, limits=replace(task.limits, memory=more))


def _memory_held(first: PointTask, tried: PointTask) -> AbstractContextManager[None]:
    """While an attempt of ``tried`` runs: the memory its limit passes the first attempt's ask
    by, taken from the worker's offer (:mod:`sweep.worker.memorylease`); nothing for a first attempt,
    or on a worker that offers no memory."""
    ask, more = first.limits.memory, tried.limits.memory
    retry = memorylease.of_worker(get_worker())
    if ask is None or more is None or more <= ask or retry.offer() is None:
        return nullcontext()
    return retry.held(ask, more)


def _checkpoints(task: PointTask, say: Any) -> PointCheckpoints:
    """The point's checkpoints on this worker: sent on to the scheduler (where an attempt on
    another worker finds them) and announced to the client (which keeps them in the store)."""
    key = metadata_key(task.run, task.index)

    def publish(saved: Saved) -> None:
        get_client().set_metadata(key, saved.to_msg())
        say(events.to_msg(events.CheckpointSaved(task.index, saved.number, saved.attempt, len(saved.data))))

    def lookup() -> Saved | None:
        return Saved.from_msg(get_client().get_metadata(key, default=None))

    return PointCheckpoints(f"sweep {task.sweep} point {task.index}", task.checkpoint, publish, lookup)


def run_points(tasks: list[PointTask], expected: float | None = None) -> list[PointRecord]:
    """Run several points one after the other in one Dask task (short jobs: :mod:`sweep.client.window`).

    Their first attempts run in as few exchanges with a child as its recycling allows
    (:func:`_first_attempts`); a point whose first attempt did not finish it goes on as
    :func:`run_point` does. A chunk's points are not announced one by one: their ends go in
    one event at the end.
    On a batch job that ends before the points can (:mod:`sweep.worker.batchjob`; ``expected``: the
    client's estimate of one point's wall time, unless the task carries the recipe's), none
    starts: the task goes back to the scheduler (``Reschedule``) and the worker retires."""
    pool = of_this_worker()
    need = tasks[0].expected or expected
    ending = pool.retirement
    if ending.retiring or not batchjob.fits(None if need is None else need * len(tasks), ending.job_end):
        ending.retire(f"its batch job ends before a point of {need or 0:.0f} s could")
        raise Reschedule()
    if len(tasks) == 1:
        return [run_point(tasks[0])]
    firsts = _first_attempts(pool, tasks) if _one_kind(tasks) else {}
    records = [run_point(t, announce=False, first=firsts.get(i)) for i, t in enumerate(tasks)]
    ended = events.PointsEnded(tuple(events.PointEnded.of(r) for r in records))
    get_worker().log_event(events.topic(tasks[0].sweep), events.to_msg(ended))
    return records


def _one_kind(tasks: list[PointTask]) -> bool:
    """Whether ``tasks`` can share a child's exchanges: one job, child, placement and limits
    (an MPI point's world serves one job)."""
    first = tasks[0]
    return first.placement.ranks == 1 and all(
        (t.job, t.config, t.placement, t.limits, t.recycling, t.run)
        == (first.job, first.config, first.placement, first.limits, first.recycling, first.run)
        for t in tasks[1:]
    )


def _first_attempts(
    pool: CorePool, tasks: list[PointTask]
) -> dict[int, tuple[PointRecord, PointCheckpoints]]:
    """First attempts at ``tasks`` (positions in the list -> record and checkpoints), run in
    chunks in leased children (:meth:`~sweep.worker.child.Child.run_many`), a chunk at most what
    the child may serve before it is next checked for recycling
    (:meth:`~sweep.wire.recycling.Recycling.jobs_left`). When a child dies, is killed or
    must be replaced, the points after its last go to another; the points left out (the run was
    cancelled, or no child could start) have no first attempt yet."""
    first = tasks[0]
    say = partial(get_worker().log_event, events.topic(first.sweep))
    made: dict[int, tuple[PointRecord, PointCheckpoints]] = {}
    todo = list(range(len(tasks)))
    while todo and not (first.run and first.run in pool.running.stopped):
        at = tasks[todo[0]].index
        what = f"sweep {first.sweep} points {at} and on"
        try:
            lease = pool.lease(first.placement, first.config, first.recycling, what, first.run, at)
            with lease as child:
                age = child.process.age_s()
                chunk = todo[: first.recycling.jobs_left(child.jobs_run, age)]
                if first.recycling.due(child.jobs_run + len(chunk), age):
                    pool.replace_soon(child)  # it is recycled after this chunk
                kept = [_checkpoints(tasks[i], say) for i in chunk]

                def hooks(n: int, chunk: list[int] = chunk, kept: list[PointCheckpoints] = kept) -> Any:
                    task = tasks[chunk[n]]
                    return partial(_say_report, say, task.index, 1), kept[n]

                def on_next(n: int, chunk: list[int] = chunk, child: Any = child) -> None:
                    pool.running.started(child, first.run, tasks[chunk[n]].index)

                kwargs = [tasks[i].kwargs for i in chunk]
                ran = child.run_many(first.job, kwargs, limits=first.limits, hooks=hooks, on_next=on_next)
                for i, record, saved in zip(chunk, ran, kept):
                    pool.running.ended(first.run, tasks[i].index, 1, child, record)
                    made[i] = (record, saved)
                todo = todo[len(ran) :]
        except ChildDied:
            break  # each point left tries (and records) a start of its own
    return made


def _say_report(say: Any, index: tuple[int, ...], attempt: int, report: Any) -> None:
    say(events.to_msg(events.PointReported.of(index, report, attempt)))


def _attempt(
    pool: CorePool,
    task: PointTask,
    attempt: int,
    on_report: Any,
    on_start: Any = None,
    checkpoints: PointCheckpoints | None = None,
    on_sample: Any = None,
) -> PointRecord:
    """One attempt at a point in a leased child (``on_start`` is called with its cores once it
    holds them); a child that can't start fails the attempt."""
    try:
        what = f"sweep {task.sweep} point {task.index}"
        lease = pool.lease(task.placement, task.config, task.recycling, what, task.run, task.index)
        with lease as child:
            if on_start is not None:
                on_start(child.cores)
            record = child.run(
                task.job,
                task.kwargs,
                limits=task.limits,
                attempt=attempt,
                on_report=on_report,
                checkpoints=checkpoints,
                on_sample=on_sample,
            )
            pool.running.ended(task.run, task.index, attempt, child, record)
            return record
    except ChildDied as exc:
        return PointRecord(task.index, error=f"child could not start: {exc}", output_tail=exc.output_tail)
