"""A child's operating-system process: spawned (never forked from a process that may hold
JAX), watched for life, measured, and killed with everything it started.

:func:`spawn` starts it in a session of its own with its output in a log file, retrying
while the user's ``ulimit -u`` is momentarily exhausted; :class:`Process` kills its whole tree
in one place (:meth:`Process.kill_tree`), used by a stop from any thread and by the cleanup.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import time

import psutil

log = logging.getLogger(__name__)
SPAWN_RETRIES = 8
# How often the processes a job started are looked for: finding them reads every process's
# /proc entry (a node's thousands; 13 children scanning twice a second took a quarter of a core
# on the 13-core machine), their threads and memory are read at every sample. A scan that finds
# what the last one did waits twice as long for the next, up to SCAN_MAX_S; a new process
# brings it back to SCAN_S (so does a new job).
SCAN_S = 0.5
SCAN_MAX_S = 4.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat(pid: int) -> tuple[int, int, float] | None:
    """Threads, RSS bytes and CPU seconds (its own and its reaped children's) of process
    ``pid`` from one read of ``/proc/PID/stat``; None where there is no such file (not Linux,
    or the process is gone). psutil reads three files for the same (``status``, ``statm``,
    ``stat``), and a watch reads them ten times a second per running point."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()  # after the command name, which may hold spaces
    # fields[0] is field 3 of proc(5): utime 14, stime 15, cutime 16, cstime 17, threads 20, rss 24
    cpu = sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICKS
    return int(fields[17]), int(fields[21]) * _PAGE, cpu


class ChildDied(RuntimeError):
    """The child could not start or is gone; ``output_tail`` has the last lines it printed."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


def spawn(args: list[str], fds: tuple[int, ...], env: dict[str, str], log_path: str) -> subprocess.Popen:
    """Popen in a new session, output appended to ``log_path``, retried for a few seconds on
    EAGAIN: when another process of the user has just exhausted ``ulimit -u`` (a JAX child
    aborting in pthread_create), fork fails until that process is gone, and that should not
    cost this point."""
    for attempt in range(SPAWN_RETRIES):
        try:
            with open(log_path, "ab") as out:
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
        "could not fork a child: the user's process/thread limit (ulimit -u) is exhausted; see `sweep doctor`"
    )


class Process:
    """The process of ``proc`` and, through psutil, the processes it started."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.ps = psutil.Process(self.pid)
        self.started: list[psutil.Process] = []  # the processes it started, at the last scan
        self._scanned = -math.inf
        self._scan_every = SCAN_S
        self._born = time.monotonic()

    def age_s(self) -> float:
        """Seconds since the process was started (since this handle was made)."""
        return time.monotonic() - self._born

    def rescan(self) -> None:
        """Forget the processes seen: a new job starts (the last one's are gone)."""
        self.started, self._scanned, self._scan_every = [], -math.inf, SCAN_S

    def sample(self) -> tuple[int, int, float]:
        """Threads, RSS and CPU seconds (user + system, as far as the tree's processes are
        still alive) of the whole process tree now: the process's own every call, the
        processes it started as found by the last scan (at most SCAN_MAX_S old, SCAN_S after a
        change; :meth:`rescan` forgets it)."""
        threads = rss = 0
        cpu = 0.0
        now = time.monotonic()
        if now - self._scanned >= self._scan_every:
            try:
                found = self.ps.children(recursive=True)
            except psutil.Error:
                return 0, 0, 0.0
            same = {p.pid for p in found} == {p.pid for p in self.started}
            self._scan_every = min(2 * self._scan_every, SCAN_MAX_S) if same else SCAN_S
            self.started, self._scanned = found, now
        for p in [self.ps, *self.started]:
            seen = stat(p.pid) or _psutil_stat(p)
            if seen is not None:
                threads, rss, cpu = threads + seen[0], rss + seen[1], cpu + seen[2]
        return threads, rss, cpu

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss(self) -> int:
        """Resident memory of the process now (bytes), 0 if it is gone."""
        try:
            return int(self.ps.memory_info().rss)
        except psutil.Error:
            return 0

    def tree(self) -> list[psutil.Process]:
        """The processes it started, recursively (none once it is gone)."""
        try:
            return self.ps.children(recursive=True)
        except psutil.Error:
            return []

    def kill_tree(self) -> list[psutil.Process]:
        """SIGKILL the process, everything it started and its process group, from any
        thread; the processes it had started."""
        tree = self.tree()
        for p in [self.ps, *tree]:
            try:
                p.kill()
            except psutil.Error:
                pass
        self.killpg()
        return tree

    def killpg(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def reap(self, tree: list[psutil.Process]) -> None:
        """Wait for a killed process and ``tree``; kill what it forked while dying."""
        self.proc.wait()
        self.killpg()  # anything it forked while dying is still in its process group
        psutil.wait_procs(tree, timeout=5)

    def how_it_ended(self) -> tuple[str, int, str]:
        """(signal name, exit code, one-line description) of a process that ended by itself."""
        rc = self.proc.wait()
        if rc < 0:
            name = signal.Signals(-rc).name
            return name, 0, f"child died with {name} (signal {-rc})"
        return "", rc, f"child exited with code {rc}"


def _psutil_stat(p: psutil.Process) -> tuple[int, int, float] | None:
    """:func:`stat` through psutil, where ``/proc`` can't be read (None: the process is gone)."""
    try:
        with p.oneshot():
            times = p.cpu_times()
            cpu = times.user + times.system + times.children_user + times.children_system
            return p.num_threads(), p.memory_info().rss, cpu
    except psutil.Error:
        return None
