"""The parent's handle on a thread-capped child: its environment, its start, and the watch.

A :class:`Child` is a fresh ``python -m sweep.child.bootstrap`` process (spawned with
``subprocess``, never forked from a process that may hold jax) pinned to a set of cores
before it imports anything but the standard library. With capping on (the default) its
environment says, for a lease of ``k`` cores:

* ``NPROC`` and ``PJRT_NPROC`` = max(2, k): sizes XLA's PjRt client and Eigen pools;
  never 1, since a job whose host callback (``jax.pure_callback``) waits on an array XLA's
  one client thread has still to compute deadlocks (docs/threads.md, "Host callbacks need
  two XLA client threads");
* ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
  ``NUMEXPR_NUM_THREADS``, ``VECLIB_MAXIMUM_THREADS``, ``BLIS_NUM_THREADS`` = 1;
* ``JE_ARROW_MALLOC_CONF=background_thread:false`` (pyarrow's jemalloc, which a job that
  imports xarray or pandas loads, starts no background thread) unless already set;
* ``JAX_PLATFORMS=cpu`` unless the config names other platforms;
* ``JAX_COMPILATION_CACHE_DIR`` (shared by every child of a sweep) with
  ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0`` when a compile cache is configured.

Affinity is what bounds XLA's codegen, foreach and LLVM pools, which ignore every
variable; a CPU quota does not. The measured result is at most ``12 + 5k`` threads per
child (:func:`thread_budget`). With capping off the child is not pinned and the
variables the Dask nanny sets for its workers are removed, so it behaves like a plain
``python`` started by a job array.

The parent runs each job by sending a :class:`~sweep.protocol.RunJob` down a pipe and
waiting on the reply with ``select``; between wake-ups it samples the child's process tree
with psutil (threads, RSS) and kills the whole tree on a timeout, a memory limit, a stall
(no CPU time used by the tree for ``resources.stall``: the stacks of the child's Python
threads are dumped into its output first, through ``faulthandler`` on SIGUSR1) or, when
asked, a thread budget overflow. What it saw becomes a :class:`~sweep.protocol.PointRecord`.
The child's side is :mod:`sweep.child.bootstrap` (pinning) and :mod:`sweep.child.loop`
(serving). The thread figures are measured in ``docs/threads.md``."""

from __future__ import annotations

import logging
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from sweep import gpus, protocol
from sweep.gpus import GpuHeld
from sweep.job import JobRef
from sweep.oomkills import OomWatch
from sweep.protocol import (
    Checkpoint,
    Exit,
    JobDone,
    JobFailed,
    PointRecord,
    Prune,
    Ready,
    Report,
    RestoreAsk,
    Restored,
    RunJob,
    Status,
)

if TYPE_CHECKING:
    from sweep.checkpoints import PointCheckpoints

log = logging.getLogger(__name__)

CAPPED_TO_ONE = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
)
# Set by distributed's nanny in every worker (distributed.nanny.pre-spawn-environ).
NANNY_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_")
# Background threads of allocators bundled by libraries a job may import (pyarrow's jemalloc,
# pulled in by xarray -> pandas): one thread each that no CPU count sizes, switched off.
ALLOCATOR_THREADS_OFF = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}
MULTIPLYING_FLAGS = ("--xla_force_host_platform_device_count",)
MULTIPLYING_VARS = ("JAX_NUM_CPU_DEVICES",)
SAMPLE_S = 0.1
# How often the sampler looks for the processes a job started: finding them reads every
# process's /proc entry (a node's thousands), their threads and memory are read every SAMPLE_S.
SCAN_S = 0.5
LIVE_EVERY_S = 2.0  # how often a running job's samples are passed on (the /sweep page)
GPU_SAMPLE_S = 1.0  # how often a GPU point's device memory is read (a subprocess: nvidia-smi)
MIN_XLA_THREADS = 2  # XLA's client pool never below this (host callbacks deadlock with 1)
STACKS_SIGNAL = signal.SIGUSR1  # the child dumps its Python threads' stacks on it (faulthandler)
STACKS_WAIT_S = 1.0
START_TIMEOUT_S = 120.0
LOG_PREFIX = "sweep-child-"  # then the parent's pid: a child's log file in the temp folder
SPAWN_RETRIES = 8


def without_multipliers(env: dict[str, str]) -> dict[str, str]:
    """``env`` less what makes one JAX process hold several CPU devices: the
    ``--xla_force_host_platform_device_count`` token of ``XLA_FLAGS`` and ``JAX_NUM_CPU_DEVICES``.
    Each device brings its own PjRt threads, so a user's shell setting would break the budget."""
    flags = env.get("XLA_FLAGS", "").split()
    kept = [f for f in flags if not f.startswith(MULTIPLYING_FLAGS)]
    if len(kept) != len(flags):
        env["XLA_FLAGS"] = " ".join(kept)
        if not kept:
            del env["XLA_FLAGS"]
    for name in MULTIPLYING_VARS:
        env.pop(name, None)
    return env


def multipliers(env: Mapping[str, str]) -> list[str]:
    """The settings in ``env`` that :func:`without_multipliers` drops, for a warning."""
    found = [f for f in env.get("XLA_FLAGS", "").split() if f.startswith(MULTIPLYING_FLAGS)]
    return found + [f"{n}={env[n]}" for n in MULTIPLYING_VARS if n in env]


def remove_orphan_logs(folder: str | None = None) -> int:
    """Remove this user's child log files in ``folder`` (the temp folder) whose parent process
    is gone: a worker killed with SIGKILL can't remove its children's; how many were removed."""
    removed = 0
    for path in Path(folder or tempfile.gettempdir()).glob(f"{LOG_PREFIX}*.log"):
        pid = path.name.removeprefix(LOG_PREFIX).partition("-")[0]
        try:
            if pid.isdigit() and not psutil.pid_exists(int(pid)) and path.stat().st_uid == os.getuid():
                path.unlink()
                removed += 1
        except OSError:
            pass  # another worker removed it first
    return removed


def default_compile_cache() -> str:
    """``$SWEEP_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/sweep/jax`` (``~/.cache/sweep/jax``)."""
    if os.environ.get("SWEEP_COMPILE_CACHE"):
        return os.environ["SWEEP_COMPILE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "sweep" / "jax")


def thread_budget(k: int) -> int:
    """Threads a capped JAX child on ``k`` cores may hold: 12 + 5k (docs/threads.md)."""
    return 12 + 5 * k


@dataclass(frozen=True)
class ChildConfig:
    """How children are started. Hashable: children with equal configs are interchangeable."""

    cap: bool = True
    compile_cache: str | None = None
    platforms: str = "cpu"
    env: tuple[tuple[str, str], ...] = ()
    ranks: int = 1  # MPI ranks per point (sweep.mpi): each on its own len(cores) / ranks cores
    mpirun: str = ""  # the MPI launcher's command; "" finds mpirun on PATH
    # whether its jobs may use JAX (sweep.job.may_use_jax): a child for jobs that don't is never
    # prewarmed with it and, its config differing, never serves a JAX job that would load it
    jax: bool = True

    def environ(self, cores: Sequence[int], base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's full environment for a lease of ``cores``.

        Inherited settings that multiply XLA's CPU devices (and with them its pools) are
        dropped (:func:`without_multipliers`); ``child.env`` may set them on purpose.
        """
        env = without_multipliers(dict(os.environ if base is None else base))
        for name in NANNY_VARS:
            env.pop(name, None)
        if self.cap:
            k = str(max(MIN_XLA_THREADS, len(cores)))
            env.update({"NPROC": k, "PJRT_NPROC": k})
            env.update(dict.fromkeys(CAPPED_TO_ONE, "1"))
            env.update({name: value for name, value in ALLOCATOR_THREADS_OFF.items() if name not in env})
        if self.platforms:
            env["JAX_PLATFORMS"] = self.platforms
        if self.compile_cache:
            env["JAX_COMPILATION_CACHE_DIR"] = self.compile_cache
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env.update(dict(self.env))
        return env


class ChildDied(RuntimeError):
    """The child could not start or is gone; ``output_tail`` has the last lines it printed."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


@dataclass(frozen=True)
class Limits:
    """What a job may use; past any of them the child's whole process tree is killed."""

    timeout: float | None = None  # wall seconds -> status "timeout"
    memory: int | None = None  # RSS bytes summed over the tree -> status "oom"
    gpu_memory: int | None = None  # device memory of the tree's processes -> status "oom"
    max_threads: int | None = None  # OS threads of the tree -> status "killed"
    stall: float | None = None  # seconds without CPU time used by the tree -> status "stalled"
    log_bytes: int = 1 << 20  # what the job printed is kept, up to its last this many bytes
    checkpoint_bytes: int = 64 << 20  # a sweep.checkpoint() state may pickle to this much

    def exceeded(
        self, elapsed: float, rss: int, threads: int, idle: float = 0.0, gpu: int = 0
    ) -> tuple[Status, str] | None:
        """The status and reason when a limit is passed (``idle``: seconds since the tree last
        used CPU time; ``gpu``: device memory held now), else None."""
        if self.timeout and elapsed >= self.timeout:
            return "timeout", f"timed out after {self.timeout:g} s (resources.timeout)"
        if self.stall and idle >= self.stall:
            why = f"stalled: its processes used no CPU time for {idle:.0f} s (resources.stall)"
            return "stalled", f"{why}; the stacks of its Python threads are in output_tail"
        if self.memory and rss > self.memory:
            used, cap = rss / 2**20, self.memory / 2**20
            return "oom", f"memory limit exceeded: RSS {used:.0f} MiB > {cap:.0f} MiB (resources.memory)"
        if self.gpu_memory and gpu > self.gpu_memory:
            used, cap = gpu / 2**20, self.gpu_memory / 2**20
            return "oom", f"device memory exceeded: {used:.0f} MiB > {cap:.0f} MiB (resources.gpu_memory)"
        if self.max_threads and threads > self.max_threads:
            why = f"{threads} threads > {self.max_threads} (on_thread_overflow: fail)"
            return "killed", f"thread budget exceeded: {why}"
        return None


class Child:
    """One warm, pinned, capped child process serving jobs one at a time.

    ``cores`` is the lease: with ``config.cap`` the child's affinity is exactly these CPUs.
    The child is spawned in its own session, with stdout and stderr going to a log file
    (the last lines are kept for error reports), and dies with the thread that spawned it.
    """

    def __init__(
        self, cores: Sequence[int], config: ChildConfig = ChildConfig(), gpus: GpuHeld | None = None
    ) -> None:
        self.cores = tuple(sorted(cores))
        self.config = config
        self.gpus = gpus  # the device slots it was started with (sweep.gpus), kept while it lives
        self.jobs_run = 0
        self.attempt = 0  # of the job running or last run
        self.unrestorable: tuple[str, ...] = ()  # what a job changed here that can't be undone
        self._log_bytes = Limits.log_bytes
        spawn_config = config
        if config.compile_cache:
            try:
                Path(config.compile_cache).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log.warning(
                    "compile cache %s unusable (%s); child runs without it", config.compile_cache, exc
                )
                spawn_config = replace(config, compile_cache=None)
        log_fd, self.log_path = tempfile.mkstemp(prefix=f"{LOG_PREFIX}{os.getpid()}-", suffix=".log")
        os.close(log_fd)
        self._req_w = self._rep_r = -1
        self.proc = self._start(spawn_config)
        self.pid = self.proc.pid
        self._ps = psutil.Process(self.pid)
        self._oom = OomWatch(self.pid)
        self._tree: list[psutil.Process] = []  # the job's processes at the last scan
        self._scanned = -math.inf
        self._await_ready()
        log.info("spawned %s pid %d on cores %s (cap=%s)", self.what, self.pid, list(self.cores), config.cap)

    what = "child"
    reusable = True  # may serve another job (an MPI point's world serves one)

    def _start(self, config: ChildConfig) -> subprocess.Popen:
        """Spawn ``python -m sweep.child.bootstrap`` with a pipe each way."""
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        pin = ",".join(map(str, self.cores)) if config.cap else ""
        args = [sys.executable, "-m", "sweep.child.bootstrap", pin, str(req_r), str(rep_w), str(os.getpid())]
        try:
            return self._spawn(args, (req_r, rep_w), self.environ(config))
        finally:
            os.close(req_r)
            os.close(rep_w)

    def environ(self, config: ChildConfig, cores: Sequence[int] | None = None) -> dict[str, str]:
        """The child's environment: ``config``'s for ``cores`` (default its lease), and its
        devices' (:meth:`sweep.gpus.GpuHeld.environ`) when it holds some."""
        env = config.environ(self.cores if cores is None else cores)
        return env if self.gpus is None else env | self.gpus.environ()

    def _await_ready(self) -> None:
        """Wait for the child's Ready (ChildDied when it doesn't come)."""
        if not self._wait_readable(START_TIMEOUT_S):
            self.kill()
            raise ChildDied(f"child did not start within {START_TIMEOUT_S:.0f} s", self.log_tail())
        try:
            ready = protocol.receive(self._rep_r)
        except EOFError:
            raise ChildDied(self._how_it_ended()[2], self.log_tail()) from None
        assert isinstance(ready, Ready), ready

    def _spawn(self, args: list[str], fds: tuple[int, ...], env: dict[str, str]) -> subprocess.Popen:
        """Popen, retried for a few seconds on EAGAIN: when another process of the user has
        just exhausted ``ulimit -u`` (a JAX child aborting in pthread_create), fork fails
        until that process is gone, and that should not cost this point."""
        for attempt in range(SPAWN_RETRIES):
            try:
                with open(self.log_path, "ab") as out:
                    return subprocess.Popen(
                        args,
                        pass_fds=fds,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            except BlockingIOError:
                log.info("fork failed with EAGAIN (ulimit -u); retry %d of %d", attempt + 1, SPAWN_RETRIES)
                time.sleep(0.25 * (attempt + 1))
        raise ChildDied(
            "could not fork a child: the user's process/thread limit (ulimit -u) is exhausted; "
            "see `sweep doctor`"
        )

    # -- lifecycle ---------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss(self) -> int:
        """Resident memory of the child now (bytes), 0 if it is gone."""
        try:
            return int(self._ps.memory_info().rss)
        except psutil.Error:
            return 0

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
        try:
            tree = [self._ps, *self._ps.children(recursive=True)]
        except psutil.Error:
            tree = [self._ps]
        for p in tree:
            try:
                p.kill()
            except psutil.Error:
                pass

    def kill(self) -> None:
        """SIGKILL the child and everything it started; idempotent."""
        tree = []
        try:
            tree = self._ps.children(recursive=True)
        except psutil.Error:
            pass
        for p in [self._ps, *tree]:
            try:
                p.kill()
            except psutil.Error:
                pass
        self._killpg()
        self.proc.wait()
        self._killpg()  # anything it forked while dying is still in its process group
        psutil.wait_procs(tree, timeout=5)
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._rep_r = -1
        try:
            os.unlink(self.log_path)
        except OSError:
            pass

    def _killpg(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def log_text(self, limit: int) -> str:
        """What the current job printed, its last ``limit`` bytes at most."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def prune(self) -> None:
        """Tell the running job to stop: its next :func:`sweep.report` raises Pruned (from any
        thread; a job that has ended meanwhile ignores it)."""
        try:
            protocol.send(self._req_w, Prune(self.jobs_run))
        except OSError:  # the child is gone
            pass

    def log_from(self, offset: int, most: int = 4 << 20) -> tuple[int, bytes]:
        """(where it starts, bytes) of what the current job printed from byte ``offset`` on, at
        most ``most`` bytes (the log file holds all of a running job's output)."""
        try:
            with open(self.log_path, "rb") as f:
                start = min(offset, os.fstat(f.fileno()).st_size)
                f.seek(start)
                return start, f.read(most)
        except OSError:
            return offset, b""

    def log_size(self) -> int:
        """Bytes the current job has printed."""
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines the child (and its job) printed."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 300 * lines))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _how_it_ended(self) -> tuple[str, int, str]:
        """(signal name, exit code, one-line description) of a child that ended by itself."""
        rc = self.proc.wait()
        if rc < 0:
            name = signal.Signals(-rc).name
            return name, 0, f"child died with {name} (signal {-rc})"
        return "", rc, f"child exited with code {rc}"

    def _wait_readable(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._rep_r], [], [], max(0.0, timeout))
        return bool(ready)

    # -- running -------------------------------------------------------------------------
    def run(
        self,
        job: JobRef,
        kwargs: Mapping[str, Any],
        *,
        limits: Limits = Limits(),
        attempt: int = 1,
        on_report: Callable[[Report], None] | None = None,
        checkpoints: PointCheckpoints | None = None,
        on_sample: Callable[[int, int, float, float], None] | None = None,
    ) -> PointRecord:
        """Run one job and return what became of it; never raises for the job's own faults.

        The record has the status (``done``, ``failed``, or ``timeout`` / ``oom`` / ``killed``
        / ``stalled`` when a limit was passed and the tree killed, ``oom`` also when the
        kernel's OOM killer killed the child: :mod:`sweep.oomkills`), the outputs or the error, the child's
        measurements, and a child that died by itself is described by ``signal`` or
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
        self._tree, self._scanned = [], -math.inf  # the last job's processes are gone
        self._log_bytes = limits.log_bytes
        os.truncate(self.log_path, 0)
        record = PointRecord(index=(), cores=self.cores, pid=self.pid, started=time.time())
        if self.gpus is not None:
            record.gpus = tuple(d.index for d in self.gpus.devices)
        t0 = time.monotonic()
        try:
            protocol.send(self._req_w, RunJob(job, dict(kwargs), limits.checkpoint_bytes))
        except OSError:
            self._record_death(record)
        else:
            self._watch(record, limits, t0, attempt, on_report, checkpoints, on_sample)
        if not record.logs:
            record.logs = [self.log_text(limits.log_bytes)]
        record.finished = time.time()
        if math.isnan(record.wall_s):  # the child never said
            record.wall_s = time.monotonic() - t0
        return record

    def _watch(
        self,
        record: PointRecord,
        limits: Limits,
        t0: float,
        attempt: int,
        on_report: Callable[[Report], None] | None,
        checkpoints: PointCheckpoints | None = None,
        on_sample: Callable[[int, int, float, float], None] | None = None,
    ) -> None:
        """Wait for the job's end, sampling the tree every SAMPLE_S and enforcing ``limits``."""
        deadline = t0 + limits.timeout if limits.timeout else math.inf
        peak_threads = peak_rss = gpu = 0
        cpu, busy = -1.0, t0  # the tree's CPU seconds at the last sample; when they last grew
        told = looked = t0  # when on_sample was last called; when device memory was last read
        while True:
            if self._wait_readable(min(SAMPLE_S, deadline - time.monotonic())):
                if self._take_reply(record, attempt, on_report, checkpoints):
                    break
                continue
            threads, rss, cpu_now = self._sample()
            peak_threads, peak_rss = max(peak_threads, threads), max(peak_rss, rss)
            now = time.monotonic()
            if cpu_now != cpu:
                cpu, busy = cpu_now, now
            if on_sample is not None and now - told >= LIVE_EVERY_S:
                on_sample(threads, rss, cpu_now, now - t0)
                told = now
            if self.gpus is not None and now - looked >= GPU_SAMPLE_S:
                gpu = gpus.used_memory([self.pid, *(p.pid for p in self._tree)])
                record.peak_gpu_memory = max(record.peak_gpu_memory, gpu)
                looked = now
            if not self.alive():
                self._record_death(record)
                break
            hit = limits.exceeded(now - t0, rss, threads, idle=now - busy, gpu=gpu)
            if hit:
                if hit[0] == "stalled":
                    self._dump_stacks()
                self._record_kill(record, *hit)
                break
        record.peak_threads = max(record.peak_threads, peak_threads)
        record.peak_rss = max(record.peak_rss, peak_rss)
        # a job shorter than SAMPLE_S is seen only by its end-of-job count and a last sample
        if self.alive() and limits.max_threads:
            record.peak_threads = max(record.peak_threads, self._sample()[0])
            hit = limits.exceeded(0.0, 0, record.peak_threads)
            if hit:
                self._record_kill(record, *hit)

    def _take_reply(
        self,
        record: PointRecord,
        attempt: int,
        on_report: Callable[[Report], None] | None,
        checkpoints: PointCheckpoints | None = None,
    ) -> bool:
        """Read one message; True when it ended the job (a reply, or the child's death)."""
        try:
            reply = protocol.receive(self._rep_r)
        except EOFError:
            self._record_death(record)
            return True
        if isinstance(reply, Report):
            record.reports.append(reply.row(attempt))
            if on_report is not None:
                on_report(reply)
            return False
        if isinstance(reply, Checkpoint):
            record.checkpoints += 1
            if checkpoints is not None:
                checkpoints.save(reply.data, attempt, reply.time)
            return False
        if isinstance(reply, RestoreAsk):
            last = checkpoints.last() if checkpoints is not None else None
            record.resumed_from = last.number if last is not None else 0
            try:
                protocol.send(self._req_w, Restored(last))
            except OSError:  # the child died meanwhile: the next read says so
                pass
            return False
        m = reply.metrics
        record.wall_s, record.cpu_s, record.cores = m.wall_s, m.cpu_s, m.cores
        if reply.unrestorable:
            self.unrestorable = reply.unrestorable
            log.info(
                "child pid %d must be replaced: its job changed %s", self.pid, "; ".join(reply.unrestorable)
            )
        record.peak_threads, record.peak_rss = m.threads, m.peak_rss
        record.sources = reply.sources
        if isinstance(reply, JobDone):
            record.status, record.outputs = "done", reply.outputs
        elif isinstance(reply, JobFailed):
            record.error, record.output_tail = reply.error, self.log_tail()
        if reply.pruned:
            record.status, record.error = "pruned", record.error or "the search pruned this trial"
        return True

    def _record_death(self, record: PointRecord) -> None:
        record.signal, record.exit_code, record.error = self._how_it_ended()
        record.output_tail = self.log_tail()
        if record.signal == "SIGKILL" and self._oom.struck():
            record.status = "oom"
            record.error = (
                f"killed by the kernel's out-of-memory killer (oom_kill count of {self._oom.cgroup} rose); "
                "its memory at the last look is in peak_rss"
            )
        log.info("child pid %d: %s", self.pid, record.error)

    def _dump_stacks(self) -> None:
        """Have the child write its Python threads' stacks to its output (faulthandler)."""
        size = os.path.getsize(self.log_path)
        try:
            os.kill(self.pid, STACKS_SIGNAL)
        except ProcessLookupError:
            return
        end = time.monotonic() + STACKS_WAIT_S
        while time.monotonic() < end and os.path.getsize(self.log_path) == size:
            time.sleep(0.05)
        time.sleep(0.1)  # the dump is written thread by thread

    def _record_kill(self, record: PointRecord, status: Status, why: str) -> None:
        lines = 200 if status == "stalled" else 30
        record.status, record.error, record.output_tail = status, why, self.log_tail(lines)
        record.logs = [self.log_text(self._log_bytes)]
        log.info("killing child pid %d and its tree: %s", self.pid, why)
        self.kill()

    def _sample(self) -> tuple[int, int, float]:
        """Threads, RSS and CPU seconds (user + system, as far as the tree's processes are
        still alive) of the child's whole process tree now: the child's own every call, the
        processes its job started as found by the last scan (at most SCAN_S old)."""
        threads = rss = 0
        cpu = 0.0
        now = time.monotonic()
        if now - self._scanned >= SCAN_S:
            try:
                self._tree = self._ps.children(recursive=True)
            except psutil.Error:
                return 0, 0, 0.0
            self._scanned = now
        for p in [self._ps, *self._tree]:
            try:
                with p.oneshot():
                    threads += p.num_threads()
                    rss += p.memory_info().rss
                    times = p.cpu_times()
                    cpu += times.user + times.system + times.children_user + times.children_system
            except psutil.Error:
                pass
        return threads, rss, cpu
