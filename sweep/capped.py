"""Thread-capped child processes: their environment, their start, and the parent's watch.

A :class:`Child` is a fresh ``python -m sweep._bootstrap`` process (spawned with
``subprocess``, never forked from a process that may hold jax) pinned to a set of cores
before it imports anything but the standard library. With capping on (the default) its
environment says, for a lease of ``k`` cores:

* ``NPROC`` and ``PJRT_NPROC`` = k: sizes XLA's PjRt client and Eigen pools;
* ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``,
  ``NUMEXPR_NUM_THREADS``, ``VECLIB_MAXIMUM_THREADS``, ``BLIS_NUM_THREADS`` = 1;
* ``JAX_PLATFORMS=cpu`` unless the config names other platforms;
* ``JAX_COMPILATION_CACHE_DIR`` (shared by every child of a sweep) with
  ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0`` when a compile cache is configured.

Affinity is what bounds XLA's codegen, foreach and LLVM pools, which ignore every
variable; a CPU quota does not. The measured result is at most ``10 + 5k`` threads per
child (:func:`thread_budget`). With capping off the child is not pinned and the
variables the Dask nanny sets for its workers are removed, so it behaves like a plain
``python`` started by a job array.

The parent runs each job by sending it down a pipe and waiting on the reply with
``select``; between wake-ups it samples the child's process tree with psutil (threads,
RSS) and kills the whole tree on a timeout, a memory limit or, when asked, a thread
budget overflow.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sweep import _serve
from sweep.job import JobRef

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
SAMPLE_S = 0.1
START_TIMEOUT_S = 120.0
SPAWN_RETRIES = 8


def default_compile_cache() -> str:
    """``$SWEEP_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/sweep/jax`` (``~/.cache/sweep/jax``)."""
    if os.environ.get("SWEEP_COMPILE_CACHE"):
        return os.environ["SWEEP_COMPILE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "sweep" / "jax")


def thread_budget(k: int) -> int:
    """Threads a capped JAX child on ``k`` cores may hold (jax-threads.md: 10 + 5k)."""
    return 10 + 5 * k


@dataclass(frozen=True)
class ChildConfig:
    """How children are started. Hashable: children with equal configs are interchangeable."""

    cap: bool = True
    compile_cache: str | None = None
    platforms: str = "cpu"
    env: tuple[tuple[str, str], ...] = ()

    def environ(self, cores: Sequence[int], base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's full environment for a lease of ``cores``."""
        env = dict(os.environ if base is None else base)
        for name in NANNY_VARS:
            env.pop(name, None)
        if self.cap:
            k = str(len(cores))
            env.update({"NPROC": k, "PJRT_NPROC": k})
            env.update(dict.fromkeys(CAPPED_TO_ONE, "1"))
        if self.platforms:
            env["JAX_PLATFORMS"] = self.platforms
        if self.compile_cache:
            env["JAX_COMPILATION_CACHE_DIR"] = self.compile_cache
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env.update(dict(self.env))
        return env


@dataclass
class Outcome:
    """What became of one job in a child: status, outputs or error, and measurements."""

    status: str  # done | failed | timeout | killed
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    wall_s: float = float("nan")
    cpu_s: float = float("nan")
    peak_threads: int = 0
    peak_rss: int = 0
    cores: tuple[int, ...] = ()
    pid: int = 0
    started: float = float("nan")
    finished: float = float("nan")
    reports: list[dict[str, Any]] = field(default_factory=list)


class ChildDied(RuntimeError):
    """The child is gone; the message has the signal or exit code and its stderr tail."""


class Child:
    """One warm, pinned, capped child process serving jobs one at a time.

    ``cores`` is the lease: with ``config.cap`` the child's affinity is exactly these CPUs.
    The child is spawned in its own session, with stdout and stderr going to a log file
    (the last lines are kept for error reports), and dies with the thread that spawned it.
    """

    def __init__(self, cores: Sequence[int], config: ChildConfig = ChildConfig()) -> None:
        self.cores = tuple(sorted(cores))
        self.config = config
        self.jobs_run = 0
        if config.compile_cache:
            Path(config.compile_cache).mkdir(parents=True, exist_ok=True)
        log_fd, self.log_path = tempfile.mkstemp(prefix="sweep-child-", suffix=".log")
        os.close(log_fd)
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        pin = ",".join(map(str, self.cores)) if config.cap else ""
        args = [sys.executable, "-m", "sweep._bootstrap", pin, str(req_r), str(rep_w), str(os.getpid())]
        try:
            self.proc = self._spawn(args, (req_r, rep_w), config.environ(self.cores))
        finally:
            os.close(req_r)
            os.close(rep_w)
        self.pid = self.proc.pid
        self._ps = psutil.Process(self.pid)
        if not self._wait_readable(START_TIMEOUT_S):
            self.kill()
            raise ChildDied(f"child did not start within {START_TIMEOUT_S:.0f} s\n{self.log_tail()}")
        try:
            _serve.receive(self._rep_r)
        except EOFError:
            raise ChildDied(self._death_message()) from None

    def _spawn(self, args: list[str], fds: tuple[int, int], env: dict[str, str]) -> subprocess.Popen:
        """Popen, retried for a few seconds on EAGAIN: when another process of the user has
        just exhausted ``ulimit -u`` (a JAX child aborting in pthread_create), fork fails
        until that process is gone, and that should not cost this point."""
        for attempt in range(SPAWN_RETRIES):
            try:
                with open(self.log_path, "ab") as log:
                    return subprocess.Popen(
                        args,
                        pass_fds=fds,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            except BlockingIOError:
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
            return self._ps.memory_info().rss
        except psutil.Error:
            return 0

    def close(self, timeout: float = 5.0) -> None:
        """Ask the child to exit, kill its tree if it doesn't, release the pipes and log."""
        if self.alive():
            try:
                _serve.send(self._req_w, {"op": "exit"})
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

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
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        try:  # anything it forked while dying is still in its process group
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
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

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 8192))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _death_message(self) -> str:
        rc = self.proc.wait()
        if rc < 0:
            how = f"child died with {signal.Signals(-rc).name} (signal {-rc})"
        else:
            how = f"child exited with code {rc}"
        tail = self.log_tail()
        return f"{how}; last lines of its output:\n{tail}" if tail else how

    def _wait_readable(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._rep_r], [], [], max(0.0, timeout))
        return bool(ready)

    # -- running -------------------------------------------------------------------------
    def run(
        self,
        job: JobRef,
        kwargs: Mapping[str, Any],
        *,
        timeout: float | None = None,
        memory: int | None = None,
        max_threads: int | None = None,
        on_report: Callable[[dict[str, Any]], None] | None = None,
    ) -> Outcome:
        """Run one job and return its Outcome; never raises for the job's own faults.

        ``timeout`` (s) and ``memory`` (bytes of RSS summed over the child's tree) kill the
        tree when passed (status ``timeout`` / ``killed``), and so does ``max_threads``
        (threads of the tree). A child that dies by itself gives status ``failed`` with the
        signal and the tail of its output; after any of these the child is gone.
        Each :func:`sweep.report` of the job is kept in ``Outcome.reports`` and passed to
        ``on_report`` as it arrives.
        """
        self.jobs_run += 1
        os.truncate(self.log_path, 0)
        started = time.time()
        t0 = time.monotonic()
        deadline = t0 + timeout if timeout else float("inf")
        outcome = Outcome("failed", cores=self.cores, pid=self.pid, started=started)
        peak_threads = peak_rss = 0
        try:
            _serve.send(self._req_w, {"op": "run", "job": job, "kwargs": dict(kwargs)})
        except OSError:
            outcome.error = self._death_message()
            return self._finish(outcome, t0)
        while True:
            if self._wait_readable(min(SAMPLE_S, deadline - time.monotonic())):
                try:
                    reply = _serve.receive(self._rep_r)
                except EOFError:
                    outcome.error = self._death_message()
                    break
                if "report" in reply:
                    outcome.reports.append(reply["report"])
                    if on_report is not None:
                        on_report(reply["report"])
                    continue
                self._apply(outcome, reply)
                break
            threads, rss = self._sample()
            peak_threads, peak_rss = max(peak_threads, threads), max(peak_rss, rss)
            if not self.alive():
                outcome.error = self._death_message()
                break
            limit = self._over_limit(deadline, timeout, memory, rss, max_threads, threads)
            if limit:
                outcome.status, outcome.error = limit
                tail = self.log_tail()
                outcome.error += f"; last lines of its output:\n{tail}" if tail else ""
                self.kill()
                break
        outcome.peak_threads = max(outcome.peak_threads, peak_threads)
        outcome.peak_rss = max(outcome.peak_rss, peak_rss)
        return self._finish(outcome, t0)

    def _finish(self, outcome: Outcome, t0: float) -> Outcome:
        outcome.finished = time.time()
        if math.isnan(outcome.wall_s):  # the child never said
            outcome.wall_s = time.monotonic() - t0
        return outcome

    @staticmethod
    def _over_limit(deadline, timeout, memory, rss, max_threads, threads) -> tuple[str, str] | None:
        if time.monotonic() >= deadline:
            return "timeout", f"timed out after {timeout:g} s (resources.timeout)"
        if memory and rss > memory:
            used, cap = rss / 2**20, memory / 2**20
            return "killed", f"memory limit exceeded: RSS {used:.0f} MiB > {cap:.0f} MiB (resources.memory)"
        if max_threads and threads > max_threads:
            why = f"{threads} threads > {max_threads} (on_thread_overflow: fail)"
            return "killed", f"thread budget exceeded: {why}"
        return None

    def _apply(self, outcome: Outcome, reply: dict) -> None:
        m = reply.get("metrics", {})
        outcome.wall_s = m.get("wall_s", outcome.wall_s)
        outcome.cpu_s = m.get("cpu_s", outcome.cpu_s)
        outcome.peak_threads = m.get("threads", 0)
        outcome.peak_rss = m.get("peak_rss", 0)
        outcome.cores = tuple(m.get("affinity", self.cores))
        if reply.get("ok"):
            outcome.status, outcome.outputs = "done", reply["outputs"]
        else:
            outcome.error = reply.get("error", "unknown error")

    def _sample(self) -> tuple[int, int]:
        """Threads and RSS of the child's whole process tree now."""
        threads = rss = 0
        try:
            procs = [self._ps, *self._ps.children(recursive=True)]
        except psutil.Error:
            return 0, 0
        for p in procs:
            try:
                with p.oneshot():
                    threads += p.num_threads()
                    rss += p.memory_info().rss
            except psutil.Error:
                pass
        return threads, rss
