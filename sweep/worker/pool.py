"""The per-worker core pool and the task every point runs as in a Dask worker thread.

:class:`CorePool` is a ``distributed.WorkerPlugin``. It leases ``k`` of the CPUs in the
worker process's affinity mask (on a batch node: the cores the batch system gave the job,
not the whole node) to each running point, through the node-wide leases of
:mod:`sweep.worker.leases`: disjoint from every other lease of every worker process and sweep of
the user on the node. How many points a worker runs at once is Dask's ``threads`` resource.
Each lease comes with a warm :class:`~sweep.worker.child.Child` pinned to exactly
those cores; when the point ends the child goes back to an idle list keyed by its cores and
config, and the next point that can take the same cores reuses it (no new ``import jax``).

Children are recycled as their :class:`~sweep.wire.recycling.Recycling` says (after
``max_jobs`` jobs, above ``max_rss`` bytes), or when they died;
an idle child whose cores a new lease needs is closed first, so the live children's core
sets never overlap. Children are spawned from long-lived threads of the pool (up to one per
core, at most MAX_SPAWNERS, so that a worker of many cores starts its children at once rather
than one after another), because ``PR_SET_PDEATHSIG`` fires when the spawning *thread*
exits: these live as long as the pool, so children die with the worker process and never
outlive it, even when it is SIGKILLed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any

from distributed import WorkerPlugin, get_worker

from sweep import _compat
from sweep.logs import log_to_stderr
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.wire.protocol import PointRecord
from sweep.wire.recycling import DEFAULT, Recycling
from sweep.worker import leases
from sweep.worker.batchjob import batch_job_id
from sweep.worker.child import Child
from sweep.worker.childlog import remove_orphan_logs
from sweep.worker.commands import PLUGIN_NAME, Prewarm
from sweep.worker.devices import Held, NodeDevices
from sweep.worker.kinds import KINDS
from sweep.worker.mpi import MpiChild
from sweep.worker.pinning import NodePinning
from sweep.worker.renewal import Renewal
from sweep.worker.retirement import Retirement
from sweep.worker.running import Running

log = logging.getLogger(__name__)
LEASE_POLL_S = 0.2  # how often a waiting lease looks again for cores other processes freed
WAIT_WARN_S = 30.0
MAX_SPAWNERS = 16  # children a pool starts at once (each start is mostly waiting on its imports)

WARM_JOB = JobRef("module", "sweep.cli.probe", "warm")


class CorePool(WorkerPlugin):
    """Core leases and warm children for one worker process.

    The pool owns the first ``threads`` CPUs (the worker's ``threads`` resource) of the
    worker's affinity mask, or all of them when the worker advertises no such resource.
    Registered idempotently: a second sweep on the same client finds the children of the
    first one still warm.
    """

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, log_level: int = logging.WARNING, warm: Prewarm | None = None) -> None:
        """``warm``: the children to start and warm at setup (:meth:`prewarm`), so a worker
        that joins later warms its children too."""
        self.log_level = log_level
        self.warm = warm

    def setup(self, worker: Any = None) -> None:
        """Claim the cores; all state is made here so the plugin itself pickles.

        With ``log_level`` below WARNING (the client's ``sweep -v``), this worker's
        ``sweep`` loggers write to its stderr (a batch job's log file on a cluster).
        """
        log_to_stderr(self.log_level)
        remove_orphan_logs()  # those of workers of this node killed before they could
        if worker is not None:
            worker.loop.add_callback(_quiet, worker)
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
        # each kind's devices this worker may use (a batch job's: what CUDA_VISIBLE_DEVICES names)
        self.accelerators = NodeDevices(KINDS)
        self.running = Running()  # the children running jobs, the last attempts' output
        self.pinning = NodePinning()  # whether this node enforces the children's CPU pins
        self.retirement = Retirement(worker, self.address, lambda: bool(self.running.busy))
        self._spawned = 0  # children started for leases and warming (replacements: renewal's)
        self.renewal = Renewal(self._spawner)
        if self.warm is not None:
            self.warm.apply(self)

    def teardown(self, worker: Any = None) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()
        self.renewal.close()
        self._spawner.shutdown(wait=False)
        self._locks.close()
        self.accelerators.close()

    @contextmanager
    def lease(
        self,
        placement: Placement,
        config: ChildConfig,
        recycling: Recycling = DEFAULT,
        what: str = "a job",
        owner: str = "",
        point: tuple[int, ...] = (),
    ) -> Iterator[Child]:
        """Hold ``placement.cores`` cores of the node (see :mod:`sweep.worker.leases`), the GPUs
        (or share of one) or TPU chips it asks for (:mod:`sweep.worker.devices`) and a warm child
        pinned to them (an MPI world of ``placement.ranks`` ranks, never warm: :mod:`sweep.worker.mpi`).

        Waits while fewer than ``k`` of this worker's cores (or too few device slots) are free
        on the node (held by this worker or by another process of the user); after WAIT_WARN_S
        it logs a warning naming the holders, once. On release the child goes back to the idle
        list unless it died or ``recycling`` replaces it (:meth:`Recycling.due`, ``max_rss``); a
        GPU child keeps its devices and is reused only when they are free again; a TPU child
        holds its chips while it lives, and serves only points that ask for them.
        """
        k, wanted = placement.cores, placement.accelerator
        if k > len(self.cores):
            raise ValueError(
                f"a job asks for {k} cores but this worker has {len(self.cores)} "
                f"({list(self.cores)}); lower resources.threads"
            )
        self.accelerators.check(wanted, self.address)
        with self._cond:
            child, held, device = self._wait_for_cores(k, config, f"{what} on worker {self.address}", wanted)
            self._free -= set(held.cores)
            stale = [c for c in self._idle if set(c.cores) & set(held.cores)]
            self._idle = [c for c in self._idle if c not in stale]
        try:
            for c in stale:
                c.close()
            if child is None:
                start: Callable[[], Child] = (
                    partial(MpiChild, held.cores, config, device, placement.ranks)
                    if placement.ranks > 1
                    else partial(Child, held.cores, config, device)
                )
                child = self._spawner.submit(start).result()
                self._spawned += 1
            self.running.started(child, owner, point)
            yield child
        finally:
            if child is not None:
                self.running.finished(child)
            if device is not None and (child is None or not device.kind.for_life):
                device.release()  # a child that holds its devices for life releases them as it exits
            self._give_back(held, child, recycling)

    def prewarm(self, placement: Placement, config: ChildConfig, recycling: Recycling = DEFAULT) -> int:
        """Start a child on each set of ``k`` (``placement.cores``) of this worker's free cores,
        up to ``cores // k`` warm children of ``config``, and have it import jax
        (:func:`sweep.cli.probe.warm`; not for a config whose jobs don't use it) in the
        background; how many were started. Their cores are held while they warm, so a job that
        arrives meanwhile waits for the warm child instead of starting another. Idle children
        of another config are closed for them (as a lease of this config would); cores running
        jobs are left alone. An MPI point's world is not prewarmed (it serves one attempt:
        :mod:`sweep.worker.mpi`), nor a GPU point's child (it starts at its lease)."""
        if placement.ranks > 1 or placement.gpus:
            return 0
        k = placement.cores
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
                target=self._warm, args=(held, config, recycling), name="sweep-prewarm", daemon=True
            ).start()
            started += 1

    def _warm(self, held: leases.Held, config: ChildConfig, recycling: Recycling) -> None:
        child: Child | None = None
        try:
            child = self._spawner.submit(Child, held.cores, config).result()
            self._spawned += 1
            record = child.run(WARM_JOB, {}) if config.jax else PointRecord((), status="done")
            if record.status != "done":
                log.info("warming child pid %d failed: %s", child.pid, record.error[-200:])
        except Exception as exc:  # a child that can't start: the first job will say why
            log.info("warming a child on cores %s: %s", held.cores, exc)
        finally:
            self._give_back(held, child, replace(recycling, max_rss=None))  # only jax in it yet

    def _wait_for_cores(
        self, k: int, config: ChildConfig, what: str, wanted: tuple[str, float] | None = None
    ) -> tuple[Child | None, leases.Held, Held | None]:
        """(a warm child to reuse or None, the node locks on its cores, its device slots);
        called holding _cond."""
        t0, warned = time.monotonic(), False
        while True:
            got = self._grab(k, config, what, wanted) if len(self._free) >= k else None
            if got is not None:
                return got
            if not warned and time.monotonic() - t0 > WAIT_WARN_S:
                log.warning(
                    "%s waits for %d of cores %s; held now: %s", what, k, list(self.cores), leases.holders()
                )
                warned = True
            self._cond.wait(LEASE_POLL_S)

    def _grab(
        self, k: int, config: ChildConfig, what: str, wanted: tuple[str, float] | None = None
    ) -> tuple[Child | None, leases.Held, Held | None] | None:
        """Lock the cores (and device slots) of a matching idle child, else k free cores no
        idle child sits on first (keeps warm children warm) and free device slots; None when
        the node has too few free. Chips an idle child holds for life are freed (the child
        closed) when a point needs them and no such child can serve it."""
        for child in self._idle:
            if child.config == config and len(child.cores) == k and set(child.cores) <= self._free:
                if _asks(child) != wanted:
                    continue
                held = self._locks.hold(child.cores, k, what)
                if held is None:
                    continue
                free, device = self.accelerators.hold(wanted, what, child.devices)
                if not free:
                    held.release()
                    continue
                self._idle.remove(child)
                return child, held, device
        warm = {c for child in self._idle for c in child.cores}
        held = self._locks.hold(sorted(self._free, key=lambda c: (c in warm, c)), k, what)
        if held is None:
            return None
        free, device = self.accelerators.hold(wanted, what)
        if not free and self._close_holder_of(wanted):
            free, device = self.accelerators.hold(wanted, what)
        if not free:
            held.release()
            return None
        return None, held, device

    def _close_holder_of(self, wanted: tuple[str, float] | None) -> bool:
        """Close an idle child that holds, for life, devices of the kind ``wanted`` asks for;
        whether there was one. Called holding _cond."""
        kind = self.accelerators.kept_for_life(wanted)
        holder = next((c for c in self._idle if kind and c.devices and c.devices.kind == kind), None)
        if holder is None:
            return False
        self._idle.remove(holder)
        log.info("closing idle child pid %d: a point needs its %s", holder.pid, kind)
        holder.kill()  # idle: nothing to lose, and _cond is held (a graceful close waits on libtpu)
        return True

    @property
    def spawned(self) -> int:
        """Children this pool started: for leases, for warming and to replace recycled ones."""
        return self._spawned + self.renewal.started

    def replace_soon(self, child: Child) -> None:
        """Start, now, the child that will take the place of ``child``, leased and serving its
        last jobs before it is recycled (:meth:`Recycling.due`): spawned on its cores while those jobs
        run, it is idle and ready once ``child`` is given back, which then closes in the
        background (:class:`~sweep.worker.renewal.Renewal`)."""
        self.renewal.start_for(child)

    def _give_back(self, held: leases.Held, child: Child | None, recycling: Recycling) -> None:
        keep = child is not None and _stays_warm(child, recycling)
        if child is not None and not keep:
            log.info(
                "recycling child pid %d after %d jobs (alive=%s, rss=%d)",
                child.pid, child.jobs_run, child.alive(), child.process.rss(),
            )  # fmt: skip
        fresh = None if child is None else self.renewal.after(child, keep)
        with self._cond:
            if keep and child is not None:
                self._idle.append(child)
            elif fresh is not None:
                self._idle.append(fresh)
            held.release()
            self._free |= set(held.cores)
            self._cond.notify_all()


def _quiet(worker: Any) -> None:
    """Stop Dask's profiler of the worker's task threads (:func:`sweep._compat.stop_task_profiler`):
    they only wait on children, and sampling each of them 100 times a second takes a node's
    cores from its jobs (47% of a simulated 128-slot worker's Python time: benchmarks/slots.py)."""
    if _compat.stop_task_profiler(worker):
        log.info("Dask's profiler of the task threads is off on %s: they wait on children", worker.address)


def _stays_warm(child: Child, recycling: Recycling) -> bool:
    """Whether a child given back goes to the idle list: alive, reusable, all its state put
    back after its last job, and not due for recycling by count, age or memory."""
    return (
        child.reusable
        and child.alive()
        and not child.unrestorable
        and not recycling.due(child.jobs_run, child.process.age_s())
        and (recycling.max_rss is None or child.process.rss() <= recycling.max_rss)
    )


def _asks(child: Child) -> tuple[str, float] | None:
    """What a point a child can serve asks of accelerators: (resource, amount) of the devices
    it was started with, or None for a child without (its environment names the devices)."""
    return None if child.devices is None else (child.devices.kind.resource, child.devices.amount)


def of_this_worker() -> CorePool:
    """The pool registered on the current worker (installed on first use if missing)."""
    worker = get_worker()
    pool = _compat.worker_plugin(worker, PLUGIN_NAME)
    if pool is None:
        log.info("core pool not registered on %s; installing it", worker.address)
        _compat.install_worker_plugin(worker, CorePool(), PLUGIN_NAME)
        pool = _compat.worker_plugin(worker, PLUGIN_NAME)
    return pool
