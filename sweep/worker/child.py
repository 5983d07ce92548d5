"""The parent's handle on a thread-capped child: its start, the watch, and its replies.

A :class:`Child` is a fresh ``python -m sweep.child.bootstrap`` process (spawned with
``subprocess``, never forked from a process that may hold jax) pinned to a set of cores
before it imports anything but the standard library. With capping on (the default) its
environment caps every runtime pool to its lease of ``k`` cores: XLA's to k threads (with
computations run inline at k = 1, so host callbacks can't deadlock), BLAS and OpenMP to 1
(:meth:`sweep.wire.childconfig.ChildConfig.environ` says exactly what it sets).

Affinity is what bounds XLA's codegen, foreach and LLVM pools, which ignore every
variable; a CPU quota does not. The measured result is at most ``12 + 5k`` threads per
child (:func:`thread_budget`). With capping off the child is not pinned and the
variables the Dask nanny sets for its workers are removed, so it behaves like a plain
``python`` started by a job array.

The parent runs each job by sending a :class:`~sweep.wire.protocol.RunJob` down a pipe and
waiting on the reply with ``select``; between wake-ups it samples the child's process tree
with psutil (threads, RSS) and kills the whole tree on a timeout, a memory limit, a stall
(no CPU time used by the tree for ``resources.stall``: the stacks of the child's Python
threads are dumped into its output first, through ``faulthandler`` on SIGUSR1) or, when
asked, a thread budget overflow. What it saw becomes a :class:`~sweep.wire.protocol.PointRecord`.
The child's side is :mod:`sweep.child.bootstrap` (pinning) and :mod:`sweep.child.serving`
(serving). The thread figures are measured in ``docs/threads.md``."""

from __future__ import annotations

import logging
import math
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep.wire import protocol
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.protocol import (
    Exit,
    PointRecord,
    Prune,
    Ready,
    Report,
    RunJob,
    RunJobs,
    Status,
)
from sweep.wire.task import Limits
from sweep.worker.childlog import ChildLog
from sweep.worker.devices import Held
from sweep.worker.oomkills import OomWatch
from sweep.worker.process import ChildDied, Process, spawn
from sweep.worker.replies import Job, Replies
from sweep.worker.watch import TREE, Watch

if TYPE_CHECKING:
    from sweep.worker.checkpoints import PointCheckpoints

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0
NO_CONFIG, NO_LIMITS = ChildConfig(), Limits()


def _with_usable_cache(config: ChildConfig) -> ChildConfig:
    """``config``, without its compile cache when that folder can't be made (logged)."""
    if config.compile_cache:
        try:
            Path(config.compile_cache).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("compile cache %s unusable (%s); child runs without it", config.compile_cache, exc)
            return replace(config, compile_cache=None)
    return config


class Child(Replies):
    """One warm, pinned, capped child process serving jobs one at a time.

    ``cores`` is the lease: with ``config.cap`` the child's affinity is exactly these CPUs.
    The child is spawned in its own session (:mod:`sweep.worker.process`), with stdout and
    stderr going to its log file (:mod:`sweep.worker.childlog`), and dies with the thread
    that spawned it.

    A subclass (a backend of another kind of child, like :class:`~sweep.worker.mpi.MpiChild`)
    may change: ``what`` (how logs name it), ``reusable`` (whether it serves another job),
    ``replies`` (the handler of each message type the child sends: a method name, called
    with the message and the job, answering whether the message ended the job), and the
    hooks ``_start`` (spawn), ``_await_ready``, ``_wait_readable``, ``_sample``,
    ``_record_death``, ``progress_cpu``, ``close`` and ``kill``. Everything else is the same for every child.
    """

    what = "child"
    reusable = True  # may serve another job (an MPI point's world serves one)

    def __init__(
        self, cores: Sequence[int], config: ChildConfig = NO_CONFIG, devices: Held | None = None
    ) -> None:
        self.cores = tuple(sorted(cores))
        self.config = config
        self.devices = devices  # its accelerators (sweep.worker.devices): its environment names them
        self.jobs_run = 0
        self.attempt = 0  # of the job running or last run
        self.unrestorable: tuple[str, ...] = ()  # what a job changed here that can't be undone
        self._log_bytes = Limits.log_bytes
        self.log = ChildLog()
        self._req_w = self._rep_r = -1
        self.process = Process(self._start(_with_usable_cache(config)))
        self.proc, self.pid, self._ps = self.process.proc, self.process.pid, self.process.ps
        self._oom = OomWatch(self.pid)
        self._await_ready()
        log.info("spawned %s pid %d on cores %s (cap=%s)", self.what, self.pid, list(self.cores), config.cap)

    def _start(self, config: ChildConfig) -> Any:
        """Spawn ``python -m sweep.child.bootstrap`` with a pipe each way."""
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        pin = ",".join(map(str, self.cores)) if config.cap else ""
        args = [sys.executable, "-m", "sweep.child.bootstrap", pin, str(req_r), str(rep_w), str(os.getpid())]
        try:
            return spawn(args, (req_r, rep_w), self.environ(config), self.log.path)
        finally:
            os.close(req_r)
            os.close(rep_w)

    def environ(self, config: ChildConfig, cores: Sequence[int] | None = None) -> dict[str, str]:
        """The child's environment: ``config``'s for ``cores`` (default its lease), and its
        devices' (:meth:`sweep.worker.devices.Held.environ`) when it holds some."""
        env = config.environ(self.cores if cores is None else cores)
        return env if self.devices is None else env | self.devices.environ()

    def _await_ready(self) -> None:
        """Wait for the child's Ready (ChildDied when it doesn't come)."""
        if not self._wait_readable(START_TIMEOUT_S):
            self.kill()
            raise ChildDied(f"child did not start within {START_TIMEOUT_S:.0f} s", self.log.tail())
        try:
            ready = protocol.receive(self._rep_r)
        except EOFError:
            raise ChildDied(self.process.how_it_ended()[2], self.log.tail()) from None
        assert isinstance(ready, Ready), ready

    # -- lifecycle ---------------------------------------------------------------------
    def alive(self) -> bool:
        return self.process.alive()

    @property
    def closed(self) -> bool:
        """Whether this parent killed or closed the child (its pipes are released)."""
        return self._req_w < 0

    def close(self, timeout: float = 5.0) -> None:
        """Ask the child to exit, kill its tree if it doesn't, release the pipes and log."""
        if self.alive():
            try:
                protocol.send(self._req_w, Exit())
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def stop(self) -> None:
        """SIGKILL the child's process tree, from any thread; the thread running its job sees
        it die (and :meth:`kill` cleans up there)."""
        self.process.kill_tree()

    def kill(self) -> None:
        """SIGKILL the child and everything it started, wait for them, release the pipes and
        the log file; idempotent."""
        self.process.reap(self.process.kill_tree())
        if self.devices is not None and self.devices.kind.for_life:
            self.devices.release()  # the process that opened them is gone
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._rep_r = -1
        self.log.remove()

    def prune(self) -> None:
        """Tell the running job to stop: its next :func:`sweep.report` raises Pruned (from any
        thread; a job that has ended meanwhile ignores it)."""
        try:
            protocol.send(self._req_w, Prune(self.jobs_run))
        except OSError:  # the child is gone
            pass

    def _wait_readable(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._rep_r], [], [], max(0.0, timeout))
        return bool(ready)

    # -- running -------------------------------------------------------------------------
    def run(
        self,
        job: JobRef,
        kwargs: Mapping[str, Any],
        *,
        limits: Limits = NO_LIMITS,
        attempt: int = 1,
        on_report: Callable[[Report], None] | None = None,
        checkpoints: PointCheckpoints | None = None,
        on_sample: Callable[[int, int, float, float], None] | None = None,
    ) -> PointRecord:
        """Run one job and return what became of it; never raises for the job's own faults.

        The record has the status (``done``, ``failed``, or ``timeout`` / ``oom`` / ``killed``
        / ``stalled`` when a limit was passed and the tree killed, ``oom`` also when the
        kernel's OOM killer killed the child: :mod:`sweep.worker.oomkills`), the outputs or the
        error, the child's measurements, and a child that died by itself is described by ``signal`` or
        ``exit_code`` and ``output_tail``; after any of these the child is gone. Each
        :func:`sweep.report` of the job is kept in ``reports`` (tagged with ``attempt``) and
        passed to ``on_report`` as it arrives. Each :func:`sweep.checkpoint` goes to
        ``checkpoints`` (counted in ``checkpoints``), and :func:`sweep.restore` is answered from
        it (None without one; ``resumed_from`` says which). ``on_sample`` is called every
        LIVE_EVERY_S with the tree's threads, RSS, CPU seconds and the seconds since the job
        started. ``index`` is left empty for the caller.
        """
        self.jobs_run += 1
        self.attempt = attempt
        self._begin(limits)
        record = self._new_record()
        t0 = time.monotonic()
        job_ = Job(record, attempt, on_report, checkpoints)
        try:
            protocol.send(self._req_w, RunJob(job, dict(kwargs), limits.checkpoint_bytes))
        except OSError:
            self._record_death(record)
        else:
            Watch(self, job_, limits, t0, on_sample).run()
        return self._end(job_, limits, t0)

    def run_many(
        self,
        job: JobRef,
        kwargs: Sequence[Mapping[str, Any]],
        *,
        limits: Limits = NO_LIMITS,
        hooks: Callable[[int], tuple[Callable[[Report], None] | None, PointCheckpoints | None]] | None = None,
        on_next: Callable[[int], None] | None = None,
    ) -> list[PointRecord]:
        """Run the jobs of ``kwargs`` one after the other in one exchange (a RunJobs): the child
        goes from one to the next without waiting for its parent. Each is watched, limited and
        recorded as :meth:`run` does a first attempt: its ``limits`` count from the end of the
        one before, its output is what the child printed since then, its reports and
        checkpoints go to ``hooks(i)``'s (on_report, checkpoints); ``on_next(i)`` is called as
        job ``i`` starts. Returns the records of the jobs that ran, in order: all of them, or
        fewer when the child died, was killed by a limit or must be replaced (a job changed
        what it can't restore); it then serves no more.
        """
        self.attempt = 1
        self._begin(limits)
        t0 = time.monotonic()
        try:
            request = RunJobs(job, [dict(k) for k in kwargs], limits.checkpoint_bytes)
            protocol.send(self._req_w, request)
        except OSError:
            record = self._new_record()
            self._record_death(record)
            return [self._end(Job(record, 1, None, None), limits, t0)]
        records: list[PointRecord] = []
        for i in range(len(kwargs)):
            self.jobs_run += 1
            if on_next is not None:
                on_next(i)
            on_report, checkpoints = hooks(i) if hooks is not None else (None, None)
            one = Job(self._new_record(), 1, on_report, checkpoints)
            Watch(self, one, limits, t0).run()
            records.append(self._end(one, limits, t0))
            if not one.replied or self.closed or self.unrestorable:  # gone, or to be replaced
                break
            self.log.next_job(one.log_end)
            t0 = time.monotonic()
        return records

    def _begin(self, limits: Limits) -> None:
        """Get ready for a job (or a chunk of them): the last one's processes are gone, its
        output too."""
        self.process.rescan()
        self._log_bytes = limits.log_bytes
        self.log.restart()

    def _new_record(self) -> PointRecord:
        record = PointRecord(index=(), cores=self.cores, pid=self.pid, started=time.time())
        if self.devices is not None:
            setattr(record, self.devices.kind.resource, tuple(d.index for d in self.devices.devices))
        return record

    def _end(self, job: Job, limits: Limits, t0: float) -> PointRecord:
        """The job's record once it ended: its output (when no kill kept it already), when it
        finished, its wall time when the child never said."""
        record = job.record
        if not record.logs:
            record.logs = [self.log.text(limits.log_bytes, job.log_end)]
        record.finished = time.time()
        if math.isnan(record.wall_s):  # the child never said
            record.wall_s = time.monotonic() - t0
        return record

    def progress_cpu(self, cpu: float) -> dict[str, float]:
        """The processes whose progress a stall is judged by, with their CPU seconds: the whole
        tree's, for a one-process point (:class:`sweep.worker.watch.Progress`)."""
        return {TREE: cpu}

    def _record_death(self, record: PointRecord) -> None:
        record.signal, record.exit_code, record.error = self.process.how_it_ended()
        record.output_tail = self.log.tail()
        if record.signal == "SIGKILL" and self._oom.struck():
            record.status = "oom"
            record.error = (
                f"killed by the kernel's out-of-memory killer (oom_kill count of {self._oom.cgroup} rose); "
                "its memory at the last look is in peak_rss"
            )
        log.info("child pid %d: %s", self.pid, record.error)

    def _record_kill(self, record: PointRecord, status: Status, why: str) -> None:
        lines = 200 if status == "stalled" else 30
        record.status, record.error, record.output_tail = status, why, self.log.tail(lines)
        record.logs = [self.log.text(self._log_bytes)]
        log.info("killing child pid %d and its tree: %s", self.pid, why)
        self.kill()

    def _sample(self) -> tuple[int, int, float]:
        """Threads, RSS and CPU seconds of the child's process tree now (:meth:`Process.sample`)."""
        return self.process.sample()
