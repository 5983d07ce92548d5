"""The child's side of the protocol: serve :class:`~sweep.wire.protocol.RunJob` requests one at a
time (a :class:`~sweep.wire.protocol.RunJobs` chunk as so many RunJobs, back to back) until
:class:`~sweep.wire.protocol.Exit` or until the parent closes the pipe.

Runs in the capped child after :mod:`sweep.child.bootstrap` has pinned it. Standard library only
at import; numpy loads lazily, per job, only if a job's outputs need it. The job's own stdout
and stderr go to the child's log file, never to these pipes, so a ``print`` in a job can't
break the protocol.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import resource
import select
import signal
import stat
import sys
import time
import traceback

from sweep.child import isolation, ranks, sources, wholelines
from sweep.wire.protocol import (
    Checkpoint,
    Exit,
    JobDone,
    JobFailed,
    Metrics,
    Prune,
    Pruned,
    Ready,
    Report,
    RestoreAsk,
    Restored,
    RunJob,
    RunJobs,
    Saved,
    receive,
    send,
)

STACKS_SIGNAL = signal.SIGUSR1  # = sweep.worker.watch.STACKS_SIGNAL (not imported: psutil)
_report_fd: int | None = None  # where sweep.report() writes while this child serves
_request_fd: int | None = None  # where a Prune for the running job arrives
_job = 0  # the number of the job running (1 = this child's first)
_pruned = False  # the running job was told to stop
_checkpoint_bytes = 64 << 20  # the running job's checkpoint size cap (RunJob.checkpoint_bytes)
_NOT_THE_JOBS = (sources.PACKAGE, "<frozen importlib")  # where a job's traceback doesn't start
_rank = 0  # of an MPI point (sweep.child.ranks); other ranks' reports and checkpoints aren't sent


def report(message: Report) -> bool:
    """Send a report to the parent; False outside a sweep's child (then nothing happens).
    Raises Pruned once a Prune for the running job has arrived."""
    if _report_fd is None:
        return False
    if _rank:  # an MPI point's reports are rank 0's
        return True
    send(_report_fd, message)
    if not _pruned and _request_fd is not None and select.select([_request_fd], [], [], 0)[0]:
        _take_prune(receive(_request_fd))  # mid-job the parent sends nothing else unasked
    if _pruned:
        raise Pruned(f"the search pruned this trial at step {message.step}")
    return True


def _take_prune(message: object) -> None:
    """Note a Prune for the running job (one for a job that ended is ignored)."""
    global _pruned
    if isinstance(message, Prune) and message.job == _job:
        _pruned = True


def checkpoint(message: Checkpoint) -> bool:
    """Send a checkpoint to the parent; False outside a sweep's child (then nothing happens).
    Raises ValueError when it is over the running job's ``checkpoint_bytes``."""
    if _report_fd is None:
        return False
    if len(message.data) > _checkpoint_bytes:
        size, cap = len(message.data) / 2**20, _checkpoint_bytes / 2**20
        raise ValueError(
            f"sweep.checkpoint: the state pickles to {size:.1f} MiB, over resources.checkpoint_bytes "
            f"({cap:.1f} MiB); save less (e.g. the design and the optimiser's state, not the fields) "
            "or raise resources.checkpoint_bytes"
        )
    if not _rank:  # an MPI point's checkpoints are rank 0's
        send(_report_fd, message)
    return True


def ask_restore() -> tuple[bool, Saved | None]:
    """Ask the parent for the point's last checkpoint: (in a sweep's child, the checkpoint or
    None); (False, None) outside one."""
    if _report_fd is None or _request_fd is None:
        return False, None
    send(_report_fd, RestoreAsk())
    while True:  # a Prune may come first
        message = receive(_request_fd)
        if isinstance(message, Restored):
            return True, message.checkpoint
        _take_prune(message)


def _proc_status(*names: str) -> dict[str, int]:
    """Numeric fields of /proc/self/status (``Threads``, ``VmHWM`` in kB) by name, those readable."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in names:
                    found[name] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return found


def _reset_peak_rss() -> bool:
    """Reset VmHWM so the next reading is this job's peak (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _children() -> set[int]:
    """This process's child processes (all its threads' children)."""
    pids: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:  # no /proc/*/children: scan every process's parent
        me = str(os.getpid())
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if entry.isdigit() and f.read().rpartition(")")[2].split()[1] == me:
                        pids.add(int(entry))
            except (OSError, IndexError):
                pass
    return pids


def _has_children() -> bool:
    """Whether this process has any child, alive or not reaped (one syscall: the common case of
    a job that started nothing costs no /proc reads)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def end_leftovers() -> int:
    """SIGKILL and reap every process the last job left running; returns how many.

    The child is a subreaper (:mod:`sweep.child.bootstrap`), so whatever the job started, daemons
    in their own session included, is a child of this process, or becomes one when its own
    parent is killed here.
    """
    if not _has_children():
        return 0
    ended = 0
    for _ in range(100):
        kids = _children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        ended += len(kids)
    return ended


def _traceback_from_the_job(exc: BaseException) -> str:
    """``exc``'s traceback without its first frames in sweep's own code or in the import
    machinery (this loop, loading the job), so it starts where the user's code does; the last
    frame is always kept, for an error sweep raised about what the job returned."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_NOT_THE_JOBS):
            break
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def run_one(request: RunJob) -> JobDone | JobFailed:
    """Run one job in this process; a JobDone, or a JobFailed with the traceback."""
    from sweep.child.outputs import normalize_outputs

    global _job, _pruned, _checkpoint_bytes
    _job, _pruned, _checkpoint_bytes = _job + 1, False, request.checkpoint_bytes

    hwm_reset = _reset_peak_rss()
    stale = sources.forget_stale(request.job)
    if stale:
        print(
            f"sweep: {', '.join(stale)} changed since this child imported it: importing again",
            file=sys.stderr,
        )
    before = isolation.snapshot()
    modules = set(sys.modules)
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    outputs, error = None, ""
    code: dict[str, str] = {}
    try:
        fn = request.job.load(sources.ExactLoader)
        code = sources.note(request.job, modules)  # as compiled, before the job runs (it may edit them)
        outputs = normalize_outputs(fn(**request.kwargs))
    except Pruned as exc:
        error = str(exc)
    except BaseException as exc:  # a job's failure of any kind, sys.exit() included, is reported
        error = _traceback_from_the_job(exc)
    code = sources.note(request.job, modules)  # and what it imported as it ran
    left = end_leftovers()
    if left:
        print(f"sweep: ended {left} process(es) the job left running", file=sys.stderr, flush=True)
    unrestorable = tuple(isolation.restore(before) + (isolation.half_imported(modules) if error else []))
    faulthandler.register(STACKS_SIGNAL, all_threads=True)  # again, in case the job took the signal
    _flush()  # what the job printed is in the log file before the parent reads it (and log_end)
    status = _proc_status("Threads", "VmHWM")
    peak_kb = status.get("VmHWM") if hwm_reset else None
    if peak_kb is None:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    metrics = Metrics(
        wall_s=time.perf_counter() - t0,
        cpu_s=_cpu_seconds() - cpu0,
        threads=status.get("Threads", 0),
        peak_rss=peak_kb * 1024,
        cores=tuple(sorted(os.sched_getaffinity(0))),
        log_end=_log_size(),
    )
    if outputs is None:
        return JobFailed(error, metrics, unrestorable, pruned=_pruned, sources=code)
    return JobDone(outputs, metrics, unrestorable, pruned=_pruned, sources=code)


def _log_size() -> int:
    """The size of the log file the job's output goes to (its stdout), -1 when unknown (not a
    file: an MPI rank's goes through ``mpirun``)."""
    try:
        st = os.fstat(1)
    except OSError:
        return -1
    return st.st_size if stat.S_ISREG(st.st_mode) else -1


def _line_buffered() -> None:
    """The job's stdout and stderr go to the log file line by line, whatever PYTHONUNBUFFERED
    says (a file is block-buffered by default): ``sweep logs --follow`` sees each line as it is
    printed."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)


def _flush() -> None:
    wholelines.end_lines()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a job that closed or broke its stream
            pass


def serve(fd_in: int, fd_out: int) -> int:
    """Answer requests until Exit or until the parent closes the pipe; returns the exit code."""
    global _report_fd, _request_fd, _rank
    _report_fd, _request_fd, _rank = fd_out, fd_in, ranks.rank()
    if ranks.ranks() > 1:  # Open MPI tags each write: a rank writes whole lines only
        wholelines.wrap_streams()
    sources.install()  # a user file's hash is of what the child compiled, before the snapshot
    isolation.start()
    faulthandler.register(STACKS_SIGNAL, all_threads=True)  # the parent asks for stacks on a stall
    _line_buffered()
    send(fd_out, Ready(os.getpid(), _rank))
    while True:
        try:
            request = receive(fd_in)
        except EOFError:
            return 0
        if isinstance(request, Exit):
            return 0
        if isinstance(request, Prune):  # for a job that has ended meanwhile
            continue
        if isinstance(request, RunJobs):
            for kwargs in request.kwargs:
                if _answer(RunJob(request.job, kwargs, request.checkpoint_bytes), fd_out).unrestorable:
                    break  # the parent replaces this child: the chunk's other jobs run elsewhere
            continue
        _answer(request, fd_out)


def _answer(request: RunJob, fd_out: int) -> JobDone | JobFailed:
    """Run one job and send its reply (a JobFailed when its outputs can't be sent); the reply."""
    reply = run_one(request)
    try:
        send(fd_out, reply)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        error = f"the job's outputs could not be sent back: {exc!r}"
        send(fd_out, JobFailed(error, reply.metrics, reply.unrestorable, sources=reply.sources))
    return reply
