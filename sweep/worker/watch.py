"""The watch of one running job: the parent's loop from the job's start to its end.

::

    Watch.run(): until the job's reply or the child's death
        wait for a message until the sample is due -> the reply table (:mod:`sweep.worker.replies`)
        sample the tree                      -> threads, RSS, CPU seconds (and each rank's)
        pass samples on every LIVE_EVERY_S   -> on_sample (the /sweep page)
        read device memory every GPU_SAMPLE_S (GPU points)
        check the limits                     -> kill the tree: timeout, stalled, oom, killed

A **stall** is a process that makes no progress: :class:`Progress` keeps, for each process it
is told of, when its CPU time last grew. A one-process point is one such process (its tree's
CPU time summed); an MPI point is each rank on its own, so a rank that sleeps for ever is a
stall even while rank 0 busy-polls in an ``allreduce`` waiting for it (Open MPI spins).

The tree is sampled every ``SAMPLE_S`` while the job is young (its first ``YOUNG_S``: imports,
the first compile, a burst of threads) or near its memory or thread limit, and every
``SAMPLE_SETTLED_S`` otherwise: ten samples a second of each of 13 points cost the 13-core
machine's jobs 5% of their time (the quickstart's fdfd job, 5.8 s a job against 5.4 s with no
watch; at one sample a second, 5.45 s: ``benchmarks/README.md``). A job's reply ends the wait at
once, whatever the interval.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sweep.wire.task import Limits
from sweep.worker import gpus
from sweep.worker.gpus import GPU

if TYPE_CHECKING:
    from sweep.worker.child import Child
    from sweep.worker.replies import Job

SAMPLE_S = 0.1
SAMPLE_SETTLED_S = 0.5  # once the job is past YOUNG_S and not near a limit
YOUNG_S = 2.0
LIVE_EVERY_S = 2.0  # how often a running job's samples are passed on (the /sweep page)
GPU_SAMPLE_S = 1.0  # how often a GPU point's device memory is read (a subprocess: nvidia-smi)
STACKS_SIGNAL = signal.SIGUSR1  # the child dumps its Python threads' stacks on it (faulthandler)
STACKS_WAIT_S = 1.0
TREE = "its processes"  # the one process a one-process point's progress is told as


class Progress:
    """When each watched process last used CPU time (see the module docstring)."""

    def __init__(self) -> None:
        self._cpu: dict[str, float] = {}
        self._busy: dict[str, float] = {}

    def see(self, cpu: Mapping[str, float], now: float) -> None:
        """CPU seconds of each process now; a process seen first starts its clock now."""
        for who, seconds in cpu.items():
            if self._cpu.get(who) != seconds:
                self._cpu[who], self._busy[who] = seconds, now

    def idle(self, now: float) -> tuple[float, str]:
        """The longest time a process has gone without CPU time, and which process."""
        if not self._busy:
            return 0.0, TREE
        who = min(self._busy, key=self._busy.__getitem__)
        return now - self._busy[who], who


class Watch:
    """Watch ``job`` on ``child`` until it ends, enforcing ``limits`` (:meth:`run`)."""

    def __init__(
        self,
        child: Child,
        job: Job,
        limits: Limits,
        t0: float,
        on_sample: Callable[[int, int, float, float], None] | None = None,
    ) -> None:
        self.child, self.job, self.limits, self.t0, self.on_sample = child, job, limits, t0, on_sample
        self.peak_threads = self.peak_rss = self.gpu = 0
        self._threads = self._rss = 0  # at the last sample
        self.progress = Progress()
        self.told = self.looked = t0  # when on_sample was last called; when device memory was read

    def run(self) -> None:
        """Wait for the job's end, sampling the tree every SAMPLE_S and enforcing the limits."""
        child, record = self.child, self.job.record
        deadline = self.t0 + self.limits.timeout if self.limits.timeout else math.inf
        due = self.t0 + SAMPLE_S  # the next sample: taken when due, however often the job says something
        while True:
            wait = max(0.0, min(due, deadline) - time.monotonic())
            if child._wait_readable(wait) and child._take_reply(self.job):
                break
            if time.monotonic() < min(due, deadline):
                continue  # a report or checkpoint came before the sample was due
            now = self._sample()
            due = now + self.interval()
            if not child.alive():
                child._record_death(record)
                break
            if self._limit_hit(now):
                break
        record.peak_threads = max(record.peak_threads, self.peak_threads)
        record.peak_rss = max(record.peak_rss, self.peak_rss)
        self._last_thread_count()

    def interval(self) -> float:
        """Seconds until the next sample (see the module docstring)."""
        young = time.monotonic() - self.t0 < YOUNG_S
        return SAMPLE_S if young or self.limits.near(self._rss, self._threads) else SAMPLE_SETTLED_S

    def _sample(self) -> float:
        """One sample of the tree: peaks, progress, samples passed on, device memory."""
        child, record = self.child, self.job.record
        threads, rss, cpu = child._sample()
        self.peak_threads, self.peak_rss = max(self.peak_threads, threads), max(self.peak_rss, rss)
        now = time.monotonic()
        self.progress.see(child.progress_cpu(cpu), now)
        if self.on_sample is not None and now - self.told >= LIVE_EVERY_S:
            self.on_sample(threads, rss, cpu, now - self.t0)
            self.told = now
        if child.devices is not None and child.devices.kind is GPU and now - self.looked >= GPU_SAMPLE_S:
            self.gpu = gpus.used_memory([child.pid, *(p.pid for p in child.process.started)])
            record.peak_gpu_memory = max(record.peak_gpu_memory, self.gpu)
            self.looked = now
        self._threads, self._rss = threads, rss
        return now

    def _limit_hit(self, now: float) -> bool:
        """Kill the tree when a limit is passed; whether one was."""
        idle, who = self.progress.idle(now)
        hit = self.limits.exceeded(now - self.t0, self._rss, self._threads, idle=idle, gpu=self.gpu)
        if not hit:
            return False
        status, why = hit
        if status == "stalled":
            dump_stacks(self.child)
            why = why.replace(TREE, who, 1)
        self.child._record_kill(self.job.record, status, why)
        return True

    def _last_thread_count(self) -> None:
        """A job shorter than SAMPLE_S is seen only by its end-of-job count and a last sample."""
        child, record = self.child, self.job.record
        if child.alive() and self.limits.max_threads:
            record.peak_threads = max(record.peak_threads, child._sample()[0])
            hit = self.limits.exceeded(0.0, 0, record.peak_threads)
            if hit:
                child._record_kill(record, *hit)


def dump_stacks(child: Child) -> None:
    """Have ``child`` write its Python threads' stacks to its output (faulthandler), waiting up
    to STACKS_WAIT_S for them."""
    size = child.log.size()
    try:
        os.kill(child.pid, STACKS_SIGNAL)
    except ProcessLookupError:
        return
    end = time.monotonic() + STACKS_WAIT_S
    while time.monotonic() < end and child.log.size() == size:
        time.sleep(0.05)
    time.sleep(0.1)  # the dump is written thread by thread
