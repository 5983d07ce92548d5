"""Points that are MPI programs: ``resources.ranks: n`` runs the job on n ranks of one node.

An :class:`MpiChild` is a fresh MPI world per attempt (warm children don't apply: an MPI
world can't be reused for another job, and its cores are given back as soon as the attempt
ends). It holds ``n * k`` leased cores (``k`` = ``resources.threads``) and starts::

    python -m sweep.child.launch WORKER_PID  mpirun -np n --bind-to none --oversubscribe \\
        --mca plm isolated --mca ras ^slurm,gridengine --tag-output \\
        python -m sweep.child.bootstrap 0,1/2,3 @SOCKET @ 0

* **Pinning.** The launcher is told not to bind; each rank pins itself, before anything but
  the standard library loads, to its own k cores (rank r: the r-th group), so the thread
  pools numpy, BLAS and XLA size are sized per rank exactly as in a one-process point, with
  the same capped environment (``NPROC`` = k, BLAS pools 1: :class:`sweep.wire.childconfig.ChildConfig`).
* **One node, the lease only.** ``--mca plm isolated`` starts every rank on this node by
  fork, and the Slurm and Grid Engine allocators are switched off, so inside a batch job
  the launcher neither calls ``srun`` nor spreads ranks over the allocation: the ranks run
  on the cores this worker leased, never on cores another point holds.
* **Talking to the worker.** Each rank connects to a Unix socket in a private (0700) folder
  and says which rank it is (:class:`~sweep.wire.protocol.Ready`); every rank is sent the job and
  runs it, as ``mpirun python script.py`` would. Rank 0's return value, reports and
  checkpoints are the point's; other ranks' are ignored, and :func:`sweep.restore` answers
  every rank with rank 0's last checkpoint.
* **Limits.** Timeout, memory (RSS summed over the launcher and all ranks) and thread
  overflow apply to the whole tree; a stall is judged rank by rank: a rank whose own CPU time
  does not grow for ``resources.stall`` while the others spin waiting for it. A rank that fails
  or dies mid-job fails the point, naming the rank; the whole tree is then killed, so nothing
  is left running. The thread budget of an MPI point is
  :func:`sweep.capacity.budget.point_budget`.
* **Measured.** Peak threads and RSS are summed over the tree, as for any point, and kept
  per rank too (``rank_threads``, ``rank_rss``).

Only Open MPI's ``mpirun`` is supported (found on PATH, or ``child.mpirun``); as root it is
allowed to run (``OMPI_ALLOW_RUN_AS_ROOT``). The measured figures are in docs/threads.md.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psutil

from sweep.errors import SweepError
from sweep.wire import protocol
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.protocol import JobDone, JobFailed, PointRecord, Ready, RestoreAsk
from sweep.worker.child import START_TIMEOUT_S, Child
from sweep.worker.process import ChildDied, spawn
from sweep.worker.replies import Job

if TYPE_CHECKING:
    pass

DEATH_WAIT_S = 10.0  # how long the launcher may take to notice a dead rank and exit
LAUNCH_FLAGS = (
    "--bind-to", "none", "--oversubscribe", "--tag-output",
    "--mca", "plm", "isolated", "--mca", "ras", "^slurm,gridengine",
)  # fmt: skip


class MpiMissing(SweepError, RuntimeError):
    """No usable MPI launcher."""


def launcher(command: str = "") -> list[str]:
    """The MPI launcher's command line (``command``, else ``mpirun`` on PATH), checked to be
    Open MPI's; MpiMissing says what to install or set otherwise."""
    words = shlex.split(command) if command else []
    found = shutil.which(words[0]) if words else shutil.which("mpirun")
    if found is None:
        what = f"child.mpirun {command!r} is not a command on PATH" if words else "no mpirun on PATH"
        raise MpiMissing(
            f"resources.ranks > 1 needs an MPI launcher, but {what}: install Open MPI "
            "(Debian: apt-get install openmpi-bin) or set child.mpirun to its mpirun"
        )
    flavour = version(found)
    if "Open MPI" not in flavour:
        raise MpiMissing(
            f"{found} is {flavour or 'not an MPI launcher this tool knows'}; resources.ranks supports "
            "Open MPI's mpirun: set child.mpirun to it"
        )
    return [found, *words[1:]]


@functools.cache
def version(path: str) -> str:
    """The first line ``PATH --version`` prints (e.g. ``mpirun (Open MPI) 4.1.4``), or ''."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""


def preflight(ranks: int, mpirun: str, local: bool, job: JobRef) -> None:
    """Checks of an MPI point before anything starts (MpiMissing says what to fix): a
    launcher that works (here, for a local cluster; a batch job's nodes are checked by its
    first attempt) and, when the job's file imports mpi4py, mpi4py importable here."""
    if ranks == 1:
        return
    if local:
        launcher(mpirun)
    if _imports_mpi4py(job) and importlib.util.find_spec("mpi4py") is None:
        raise MpiMissing(
            f"job {job.label} imports mpi4py, which {sys.executable} lacks: pip install mpi4py "
            "(or this project's mpi extra)"
        )


def _imports_mpi4py(job: JobRef) -> bool:
    """Whether the job's own source file imports mpi4py (read as text, not run)."""
    if job.kind == "file":
        path: str | None = job.target
    elif job.kind == "module":
        try:
            spec = importlib.util.find_spec(job.target)
        except (ImportError, ValueError):
            return False
        path = spec.origin if spec is not None else None
    else:
        return False
    try:
        text = Path(path).read_text(errors="replace") if path else ""
    except OSError:
        return False
    return re.search(r"^\s*(from|import)\s+mpi4py\b", text, re.MULTILINE) is not None


def launcher_env() -> dict[str, str]:
    """What the launcher's environment needs on top of the ranks' capped one."""
    if os.geteuid() == 0:  # Open MPI refuses root unless told twice
        return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return {}


class MpiChild(Child):
    """One MPI world of ``ranks`` ranks on ``cores`` (split into equal groups in order),
    serving one job; see the module docstring."""

    what = "MPI world"
    reusable = False
    # the other ranks' messages, by type (rank 0's are any child's: ``Child.replies``); a handler
    # is called with the message, the job and the rank. Reports and checkpoints are rank 0's.
    rank_replies: ClassVar[dict[type, str]] = {
        RestoreAsk: "_rank_restore_ask",
        JobFailed: "_rank_failed",
        JobDone: "_rank_done",
    }

    def __init__(self, cores: Any, config: ChildConfig, devices: Any = None, ranks: int = 2) -> None:
        self.ranks = n = ranks
        ordered = sorted(cores)
        k = len(ordered) // n
        if k < 1 or k * n != len(ordered):
            raise ValueError(f"{len(ordered)} cores can't be split among {n} ranks evenly")
        self.groups = [tuple(ordered[r * k : (r + 1) * k]) for r in range(n)]
        self.rank_fds: dict[int, int] = {}
        self.rank_procs: dict[int, psutil.Process] = {}
        self.rank_peaks: dict[int, tuple[int, int]] = {}
        self.rank_cpu: dict[int, float] = {}  # each rank's CPU seconds at the last sample
        self._ready_fd = -1
        self._dead_rank: int | None = None
        super().__init__(cores, config, devices)

    def _start(self, config: ChildConfig) -> subprocess.Popen:
        try:
            command = launcher(config.mpirun)
        except MpiMissing as exc:  # a worker without MPI: the attempt fails saying so
            self.log.remove()
            raise ChildDied(str(exc)) from None
        self._folder = tempfile.mkdtemp(prefix="sweep-mpi-")  # 0700: only this user connects
        path = os.path.join(self._folder, "s")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(self.ranks)
        groups = "/".join(",".join(map(str, g)) for g in self.groups) if config.cap else ""
        rank = [sys.executable, "-m", "sweep.child.bootstrap", groups, "@" + path, "@", "0"]
        args = [
            sys.executable, "-m", "sweep.child.launch", str(os.getpid()),
            *command, "-np", str(self.ranks), *LAUNCH_FLAGS, *rank,
        ]  # fmt: skip
        return spawn(args, (), self.environ(config, self.groups[0]) | launcher_env(), self.log.path)

    def _await_ready(self) -> None:
        """Accept each rank's connection and Ready (ChildDied when one doesn't come)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while len(self.rank_fds) < self.ranks:
                ready, _, _ = select.select([self._listener], [], [], 0.2)
                if not ready:
                    if not self.alive():
                        raise ChildDied(self.process.how_it_ended()[2], self.log.tail())
                    if time.monotonic() > deadline:
                        raise ChildDied(
                            f"{len(self.rank_fds)} of {self.ranks} MPI ranks started within "
                            f"{START_TIMEOUT_S:.0f} s",
                            self.log.tail(),
                        )
                    continue
                conn, _ = self._listener.accept()
                fd = conn.detach()
                hello = protocol.receive(fd)
                assert isinstance(hello, Ready), hello
                self.rank_fds[hello.rank] = fd
                self.rank_procs[hello.rank] = psutil.Process(hello.pid)
        except (ChildDied, EOFError) as exc:
            self.kill()
            if isinstance(exc, ChildDied):
                raise
            raise ChildDied("an MPI rank closed its connection at start", self.log.tail()) from None
        finally:
            self._listener.close()
            shutil.rmtree(self._folder, ignore_errors=True)
        self._req_w, self._rep_r = self.rank_fds[0], os.dup(self.rank_fds[0])

    # -- a job -----------------------------------------------------------------------------
    def run(self, job: Any, kwargs: Any, **options: Any) -> PointRecord:
        """Send the job to every rank, then watch it as :meth:`Child.run` does (rank 0's reply
        ends it); the record's ``cores`` are every rank's."""
        from sweep.wire.protocol import RunJob

        limits = options.get("limits")
        cap = limits.checkpoint_bytes if limits is not None else 64 << 20
        for r, fd in self.rank_fds.items():
            if r:
                try:
                    protocol.send(fd, RunJob(job, dict(kwargs), cap))
                except OSError:
                    self._dead_rank = r
        record = super().run(job, kwargs, **options)
        record.cores = self.cores
        record.rank_threads = tuple(self.rank_peaks.get(r, (0, 0))[0] for r in range(self.ranks))
        record.rank_rss = tuple(self.rank_peaks.get(r, (0, 0))[1] for r in range(self.ranks))
        return record

    def _wait_readable(self, timeout: float) -> bool:
        fds = [self._rep_r, *(fd for r, fd in self.rank_fds.items() if r)]
        ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
        self._ready_fd = ready[0] if ready else -1
        return bool(ready)

    def _take_reply(self, job: Job) -> bool:
        """Rank 0's messages as any child's; another rank's through ``rank_replies``."""
        if self._ready_fd == self._rep_r:
            return super()._take_reply(job)
        r = next(r for r, fd in self.rank_fds.items() if fd == self._ready_fd)
        try:
            reply = protocol.receive(self._ready_fd)
        except EOFError:
            self._dead_rank = r
            self._record_death(job.record)
            return True
        handler = self.rank_replies.get(type(reply))
        return handler is not None and bool(getattr(self, handler)(reply, job, r))

    def _rank_restore_ask(self, reply: RestoreAsk, job: Job, rank: int) -> bool:
        return self._on_restore_ask(reply, job, fd=self.rank_fds[rank])

    def _rank_failed(self, reply: JobFailed, job: Job, rank: int) -> bool:
        """Another rank's failure fails the point at once (a pruned rank waits for rank 0)."""
        if reply.pruned:
            return False
        job.record.status = "failed"
        job.record.error = f"rank {rank} of {self.ranks} failed:\n{reply.error}"
        job.record.output_tail = self.log.tail()
        self.kill()
        return True

    def _rank_done(self, reply: JobDone, job: Job, rank: int) -> bool:
        """A rank done: no longer watched (rank 0's reply ends the job)."""
        fd = self.rank_fds.pop(rank)
        os.close(fd)
        return False

    def _record_death(self, record: PointRecord) -> None:
        """A rank (or the launcher) died mid-job: the launcher is given DEATH_WAIT_S to notice
        and end the others, then the tree is killed; the error names the rank."""
        try:
            self.proc.wait(DEATH_WAIT_S)
        except subprocess.TimeoutExpired:
            self.stop()
        super()._record_death(record)
        if self._dead_rank is None:  # the launcher's pipe to rank 0 said it: which one is gone?
            gone = [r for r, p in sorted(self.rank_procs.items()) if not _running(p)]
            self._dead_rank = gone[0] if gone else None
        who = "the MPI launcher" if self._dead_rank is None else f"rank {self._dead_rank}"
        ended = record.error.removeprefix("child ")
        record.error = (
            f"{who} of an MPI point of {self.ranks} ranks died mid-job; the launcher then {ended} "
            "(its report is in output_tail)"
        )

    def _sample(self) -> tuple[int, int, float]:
        sampled = super()._sample()
        for r, p in self.rank_procs.items():
            try:
                with p.oneshot():
                    threads, rss, times = p.num_threads(), p.memory_info().rss, p.cpu_times()
            except psutil.Error:
                continue
            t, m = self.rank_peaks.get(r, (0, 0))
            self.rank_peaks[r] = (max(t, threads), max(m, rss))
            self.rank_cpu[r] = times.user + times.system + times.children_user + times.children_system
        return sampled

    def progress_cpu(self, cpu: float) -> dict[str, float]:
        """Each rank's own CPU seconds: a rank that makes no progress is a stall, even while
        rank 0 busy-polls waiting for it (see :mod:`sweep.worker.watch`)."""
        if not self.rank_cpu:
            return super().progress_cpu(cpu)
        return {f"rank {r}": c for r, c in sorted(self.rank_cpu.items())}

    def close(self, timeout: float = 5.0) -> None:
        """Tell every rank to exit, then as :meth:`Child.close`."""
        for r, fd in self.rank_fds.items():
            if r:
                try:
                    protocol.send(fd, protocol.Exit())
                except OSError:
                    pass
        super().close(timeout)

    def kill(self) -> None:
        """As :meth:`Child.kill`, and the other ranks' connections closed."""
        super().kill()
        for r, fd in self.rank_fds.items():
            if r:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.rank_fds = {}


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
