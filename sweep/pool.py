"""The per-worker core pool and the task every point runs as in a Dask worker thread.

:class:`CorePool` is a ``distributed.WorkerPlugin``. It leases ``k`` of the CPUs in the
worker process's affinity mask (on a batch node: the cores the batch system gave the job,
not the whole node) to each running point, through the node-wide leases of
:mod:`sweep.leases`: disjoint from every other lease of every worker process and sweep of
the user on the node. How many points a worker runs at once is Dask's ``threads`` resource.
Each lease comes with a warm :class:`~sweep.capped.Child` pinned to exactly
those cores; when the point ends the child goes back to an idle list keyed by its cores and
config, and the next point that can take the same cores reuses it (no new ``import jax``).

Children are recycled after ``max_jobs`` jobs, above ``max_rss`` bytes, or when they died;
an idle child whose cores a new lease needs is closed first, so the live children's core
sets never overlap. Children are spawned from long-lived threads of the pool (up to one per
core, at most MAX_SPAWNERS, so that a worker of many cores starts its children at once rather
than one after another), because ``PR_SET_PDEATHSIG`` fires when the spawning *thread*
exits: these live as long as the pool, so children die with the worker process and never
outlive it, even when it is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

import psutil
from distributed import Reschedule, WorkerPlugin, get_client, get_worker

from sweep import _compat, events, gpus, leases, memorylease, walltime
from sweep.capped import Child, ChildConfig, ChildDied, remove_orphan_logs
from sweep.checkpoints import PointCheckpoints, metadata_key
from sweep.gpus import GpuHeld
from sweep.job import JobRef
from sweep.jobqueue import batch_job_id
from sweep.logs import log_to_stderr
from sweep.mpi import MpiChild
from sweep.protocol import FINISHED, LogChunk, PointRecord, Saved, StoppedAttempt
from sweep.task import PointTask

log = logging.getLogger(__name__)
RETIRE_POLL_S = 0.5  # how often a retiring worker looks whether it can close
LEASE_POLL_S = 0.2  # how often a waiting lease looks again for cores other processes freed
WAIT_WARN_S = 30.0
MAX_SPAWNERS = 16  # children a pool starts at once (each start is mostly waiting on its imports)

PLUGIN_NAME = "sweep-core-pool"
ENDED_LOGS_KEPT = 16  # attempts whose last output a follower may still ask for
WARM_JOB = JobRef("module", "sweep.probe", "warm")


class CorePool(WorkerPlugin):
    """Core leases and warm children for one worker process.

    The pool owns the first ``threads`` CPUs (the worker's ``threads`` resource) of the
    worker's affinity mask, or all of them when the worker advertises no such resource.
    Registered idempotently: a second sweep on the same client finds the children of the
    first one still warm.
    """

    name = PLUGIN_NAME
    idempotent = True

    def __init__(
        self, log_level: int = logging.WARNING, warm: tuple[int, ChildConfig, int] | None = None
    ) -> None:
        """``warm``: (k, config, max_jobs) of the children to start and warm at setup
        (:meth:`prewarm`), so a worker that joins later warms its children too."""
        self.log_level = log_level
        self.warm = warm

    def setup(self, worker: Any = None) -> None:
        """Claim the cores; all state is made here so the plugin itself pickles.

        With ``log_level`` below WARNING (the client's ``sweep -v``), this worker's
        ``sweep`` loggers write to its stderr (a batch job's log file on a cluster).
        """
        log_to_stderr(self.log_level)
        remove_orphan_logs()  # those of workers of this node killed before they could
        self.cores = tuple(sorted(os.sched_getaffinity(0)))
        self.address = getattr(worker, "address", f"pid {os.getpid()}")
        # where this worker runs, recorded with every point (read once: HTCondor's is a file)
        self.host, self.batch_job = socket.gethostname(), batch_job_id(os.environ)
        self._free: set[int] = set(self.cores)
        self._idle: list[Child] = []
        self._cond = threading.Condition()
        # children start on these threads, several at once (a pool of many cores fills in the
        # time one child takes to start, not one after another); they live as long as the pool,
        # since a child dies with the thread that spawned it (PR_SET_PDEATHSIG)
        self._spawner = ThreadPoolExecutor(
            min(len(self.cores), MAX_SPAWNERS), thread_name_prefix="sweep-spawner"
        )
        self._locks = leases.NodeLocks()
        self.devices = gpus.detect()  # what CUDA_VISIBLE_DEVICES may name (the batch job's)
        self._gpu_locks = gpus.GpuLeases(self.devices)
        # children running a job: pid -> (owner, point, child)
        self._busy: dict[int, tuple[str, tuple[int, ...], Child]] = {}
        # the last attempts that ended: (owner, point, attempt) -> (their kept output, bytes printed)
        self._ended: OrderedDict[tuple[str, tuple[int, ...], int], tuple[str, int]] = OrderedDict()
        self.stopped: set[str] = set()  # owners (runs) cancelled: their points don't start
        self.job_end = walltime.job_end()  # when this worker's batch job ends, if known
        self.retiring = False  # no point starts here any more; closes once none runs
        self._worker = worker
        self.spawned = 0
        if self.warm is not None:
            self.prewarm(*self.warm)

    def teardown(self, worker: Any = None) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()
        self._spawner.shutdown(wait=False)
        self._locks.close()
        self._gpu_locks.close()

    @contextmanager
    def lease(
        self,
        k: int,
        config: ChildConfig,
        max_jobs: int = 500,
        max_rss: int | None = None,
        what: str = "a job",
        owner: str = "",
        point: tuple[int, ...] = (),
        gpus: float = 0.0,
    ) -> Iterator[Child]:
        """Hold ``k`` cores of the node (see :mod:`sweep.leases`), ``gpus`` devices or a share
        of one (:mod:`sweep.gpus`) and a warm child pinned to them.

        Waits while fewer than ``k`` of this worker's cores (or too few device slots) are free
        on the node (held by this worker or by another process of the user); after WAIT_WARN_S
        it logs a warning naming the holders, once. On release the child goes back to the idle
        list unless it died, has run ``max_jobs`` jobs, or holds more than ``max_rss`` bytes; a
        GPU child keeps its devices and is reused only when they are free again.
        """
        if k > len(self.cores):
            raise ValueError(
                f"a job asks for {k} cores but this worker has {len(self.cores)} "
                f"({list(self.cores)}); lower resources.threads"
            )
        if gpus and gpus.__ceil__() > len(self.devices):
            raise ValueError(
                f"a job asks for {gpus:g} GPUs but worker {self.address} has {len(self.devices)}; "
                "lower resources.gpus or run on nodes with devices (cluster.gpus)"
            )
        with self._cond:
            child, held, device = self._wait_for_cores(k, config, f"{what} on worker {self.address}", gpus)
            self._free -= set(held.cores)
            stale = [c for c in self._idle if set(c.cores) & set(held.cores)]
            self._idle = [c for c in self._idle if c not in stale]
        try:
            for c in stale:
                c.close()
            if child is None:
                kind = MpiChild if config.ranks > 1 else Child
                child = self._spawner.submit(kind, held.cores, config, device).result()
                self.spawned += 1
            self._busy[child.pid] = (owner, point, child)
            yield child
        finally:
            if child is not None:
                self._busy.pop(child.pid, None)
            if device is not None:
                device.release()
            self._give_back(held, child, max_jobs, max_rss)

    def retire(self, why: str) -> None:
        """Start no point here from now on, and close this worker gracefully once the points
        running here have ended and the client has fetched their records (a record still in
        this worker's memory would be lost with it, and its point run again); its batch job
        then ends and the cluster replaces it. Closes anyway ``MARGIN_S`` before the job ends."""
        if self.retiring or self._worker is None:
            return
        log.warning("worker %s retires: %s", self.address, why)
        self.retiring = True
        self._worker.loop.add_callback(self._close_when_drained, self._worker)

    async def _close_when_drained(self, worker: Any) -> None:
        end = (self.job_end or math.inf) - walltime.MARGIN_S / 2
        while (self._busy or len(worker.data)) and time.time() < end:
            await asyncio.sleep(RETIRE_POLL_S)
        await worker.close_gracefully(reason="sweep: batch job walltime")

    def stop(self, owner: str, log_bytes: int = 1 << 20) -> list[StoppedAttempt]:
        """Kill the children running jobs of ``owner`` (a run of a sweep) now, and start none
        of its jobs from now on; what each killed attempt had printed (its last ``log_bytes``)."""
        self.stopped.add(owner)
        doomed = [(point, child) for who, point, child in list(self._busy.values()) if who == owner]
        stopped = []
        for point, child in doomed:
            log.info("stopping child pid %d of cancelled run %s", child.pid, owner)
            stopped.append(StoppedAttempt(point, child.attempt, child.log_text(log_bytes)))
            child.stop()
        return stopped

    def _running(self, owner: str, point: tuple[int, ...]) -> Child | None:
        """The child running ``point`` of run ``owner`` here, if any."""
        return next((c for who, at, c in list(self._busy.values()) if who == owner and at == point), None)

    def prune(self, owner: str, point: tuple[int, ...]) -> bool:
        """Tell the job running ``point`` of run ``owner`` here to stop at its next report;
        whether it runs here."""
        child = self._running(owner, point)
        if child is not None:
            log.info("pruning point %s (child pid %d)", point, child.pid)
            child.prune()
        return child is not None

    def prewarm(self, k: int, config: ChildConfig, max_jobs: int = 500) -> int:
        """Start a child on each set of ``k`` of this worker's free cores, up to ``cores // k``
        warm children of ``config``, and have it import jax (:func:`sweep.probe.warm`; not for a
        config whose jobs don't use it) in the background; how many were started. Their cores
        are held while they warm, so a job that arrives meanwhile waits for the warm child
        instead of starting another. Idle
        children of another config are closed for them (as a lease of this config would);
        cores running jobs are left alone. An MPI point's world is not prewarmed (it serves
        one attempt: :mod:`sweep.mpi`), so its cores stay free while no point runs."""
        if config.ranks > 1:
            return 0
        started = 0
        while True:
            with self._cond:
                warm = sum(1 for c in self._idle if c.config == config and len(c.cores) == k)
                if started + warm >= len(self.cores) // k or len(self._free) < k:
                    return started
                mine = {c for child in self._idle if child.config == config for c in child.cores}
                held = self._locks.hold(sorted(self._free - mine), k, f"warming a child on {self.address}")
                if held is None:
                    return started
                self._free -= set(held.cores)
                stale = [c for c in self._idle if set(c.cores) & set(held.cores)]
                self._idle = [c for c in self._idle if c not in stale]
            for child in stale:
                child.close()
            threading.Thread(
                target=self._warm, args=(held, config, max_jobs), name="sweep-prewarm", daemon=True
            ).start()
            started += 1

    def _warm(self, held: leases.Held, config: ChildConfig, max_jobs: int) -> None:
        child: Child | None = None
        try:
            child = self._spawner.submit(Child, held.cores, config).result()
            self.spawned += 1
            record = child.run(WARM_JOB, {}) if config.jax else PointRecord((), status="done")
            if record.status != "done":
                log.info("warming child pid %d failed: %s", child.pid, record.error[-200:])
        except Exception as exc:  # a child that can't start: the first job will say why
            log.info("warming a child on cores %s: %s", held.cores, exc)
        finally:
            self._give_back(held, child, max_jobs, None)

    def ended(
        self, owner: str, point: tuple[int, ...], attempt: int, child: Child, record: PointRecord
    ) -> None:
        """Keep an attempt's output a while for :meth:`log_chunk` (its child runs on)."""
        text = record.logs[-1] if record.logs else ""
        # a killed child's log file is gone: its kept text is then taken as all it printed
        self._ended[(owner, point, attempt)] = (text, max(child.log_size(), len(text.encode())))
        while len(self._ended) > ENDED_LOGS_KEPT:
            self._ended.popitem(last=False)

    def log_chunk(self, owner: str, point: tuple[int, ...], attempt: int, offset: int) -> LogChunk | None:
        """What attempt ``attempt`` (or a later one running now) at ``point`` of run ``owner``
        printed from byte ``offset`` on; None when it neither runs here nor ended lately."""
        kept = self._ended.get((owner, point, attempt))
        if kept is not None:
            text, size = kept
            data = text.encode()
            start = max(offset, size - len(data))
            return LogChunk(attempt, start, data[start - (size - len(data)) :], ended=True)
        child = self._running(owner, point)
        if child is None or child.attempt < attempt:
            return None
        if child.attempt > attempt:
            attempt, offset = child.attempt, 0
        start, data = child.log_from(offset)
        return LogChunk(attempt, start, data, ended=False)

    def _wait_for_cores(
        self, k: int, config: ChildConfig, what: str, gpus: float = 0.0
    ) -> tuple[Child | None, leases.Held, GpuHeld | None]:
        """(a warm child to reuse or None, the node locks on its cores, its device slots);
        called holding _cond."""
        t0, warned = time.monotonic(), False
        while True:
            got = self._grab(k, config, what, gpus) if len(self._free) >= k else None
            if got is not None:
                return got
            if not warned and time.monotonic() - t0 > WAIT_WARN_S:
                log.warning(
                    "%s waits for %d of cores %s; held now: %s", what, k, list(self.cores), leases.holders()
                )
                warned = True
            self._cond.wait(LEASE_POLL_S)

    def _grab(
        self, k: int, config: ChildConfig, what: str, gpus: float = 0.0
    ) -> tuple[Child | None, leases.Held, GpuHeld | None] | None:
        """Lock the cores (and device slots) of a matching idle child, else k free cores no
        idle child sits on first (keeps warm children warm) and free device slots; None when
        the node has too few free."""
        for child in self._idle:
            if child.config == config and len(child.cores) == k and set(child.cores) <= self._free:
                if _share(child) != gpus:
                    continue
                held = self._locks.hold(child.cores, k, what)
                if held is None:
                    continue
                free, device = self._hold_devices(gpus, what, child)
                if not free:
                    held.release()
                    continue
                self._idle.remove(child)
                return child, held, device
        warm = {c for child in self._idle for c in child.cores}
        held = self._locks.hold(sorted(self._free, key=lambda c: (c in warm, c)), k, what)
        if held is None:
            return None
        free, device = self._hold_devices(gpus, what)
        if not free:
            held.release()
            return None
        return None, held, device

    def _hold_devices(
        self, gpus: float, what: str, child: Child | None = None
    ) -> tuple[bool, GpuHeld | None]:
        """(whether they were free, the device slots) for a point asking ``gpus`` (none asked:
        (True, None)); for a warm ``child``, its own devices only: its environment names them."""
        if not gpus:
            return True, None
        mine = child.gpus.devices if child is not None and child.gpus is not None else ()
        device = self._gpu_locks.hold(gpus, what, prefer=mine)
        if device is not None and mine and device.devices != mine:
            device.release()
            return False, None
        return device is not None, device

    def _give_back(self, held: leases.Held, child: Child | None, max_jobs: int, max_rss: int | None) -> None:
        keep = (
            child is not None
            and child.reusable
            and child.alive()
            and not child.unrestorable
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
            held.release()
            self._free |= set(held.cores)
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


def _share(child: Child) -> float:
    """The devices (or share of one) a child was started with: 0 for none."""
    return (
        0.0 if child.gpus is None else (child.gpus.share if child.gpus.share < 1 else len(child.gpus.devices))
    )


def run_point(task: PointTask, announce: bool = True) -> PointRecord:
    """Run one point in a leased, capped child, retrying up to ``task.retries`` times.

    Returns the point's record (status, outputs, error, measurements, attempts, host); a
    job's failure is a record, never an exception, so Dask retries only lost workers. With
    ``announce`` its start and end are sent as events (reports always are).
    """
    worker = get_worker()
    pool = CorePool.of_this_worker()
    host = pool.host
    say = partial(worker.log_event, events.topic(task.sweep))
    reports: list[dict[str, Any]] = []
    logs: list[str] = []
    record = PointRecord(task.index)
    checkpoints = _checkpoints(task, say)
    tried = task
    for attempt in range(1, task.retries + 2):
        if task.run and task.run in pool.stopped:
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
                    events.to_msg(events.PointSampled(task.index, seen[0], task.thread_budget, *seen[1:]))
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
                lambda r, a=attempt: say(events.to_msg(events.PointReported.of(task.index, r, a))),
                started,
                checkpoints,
                sampled,
            )
        reports.extend(record.reports)
        logs.extend(record.logs)
        if record.status in FINISHED:
            break
    record = replace(
        record,
        index=task.index,
        attempts=attempt,
        host=host,
        batch_job=pool.batch_job,
        thread_budget=task.thread_budget,
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
    by, taken from the worker's offer (:mod:`sweep.memorylease`); nothing for a first attempt,
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


def on_pool(method: str, *args: Any, dask_worker: Any = None) -> Any:
    """``client.run(on_pool, "prune", run, point)``: call a :class:`CorePool` method on each
    worker (``stop``, ``prune``, ``prewarm``, ``log_chunk``; what Dask's task API can't do:
    reach a running task's child); None on a worker without a pool."""
    pool = _compat.worker_plugin(dask_worker, PLUGIN_NAME)
    return None if pool is None else getattr(pool, method)(*args)


def run_points(tasks: list[PointTask], expected: float | None = None) -> list[PointRecord]:
    """Run several points one after the other in one Dask task (short jobs: :mod:`sweep.window`).

    A chunk's points are not announced one by one: their ends go in one event at the end.
    On a batch job that ends before the points can (:mod:`sweep.walltime`; ``expected``: the
    client's estimate of one point's wall time, unless the task carries the recipe's), none
    starts: the task goes back to the scheduler (``Reschedule``) and the worker retires."""
    pool = CorePool.of_this_worker()
    need = tasks[0].expected or expected
    if pool.retiring or not walltime.fits(None if need is None else need * len(tasks), pool.job_end):
        pool.retire(f"its batch job ends before a point of {need or 0:.0f} s could")
        raise Reschedule()
    if len(tasks) == 1:
        return [run_point(tasks[0])]
    records = [run_point(t, announce=False) for t in tasks]
    ended = events.PointsEnded(tuple(events.PointEnded.of(r) for r in records))
    get_worker().log_event(events.topic(tasks[0].sweep), events.to_msg(ended))
    return records


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
        lease = pool.lease(
            task.threads, task.config, task.max_jobs, task.max_rss, what, task.run, task.index, task.gpus
        )
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
            pool.ended(task.run, task.index, attempt, child, record)
            return record
    except ChildDied as exc:
        return PointRecord(task.index, error=f"child could not start: {exc}", output_tail=exc.output_tail)
