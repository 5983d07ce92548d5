"""The process state a job may change in its warm child, beyond Python's: taken before each
job and put back after it, or reported when it can't be (the parent then replaces the child).

Covered (``man 2`` and the ``os``, ``resource``, ``signal`` and ``threading`` modules), each
put back after a job changed it, unless said otherwise:

- the umask (``os.umask``);
- every resource limit (``resource.RLIMIT_*``): a hard limit that can't be raised again
  replaces the child;
- CPU affinity (``os.sched_getaffinity`` of every thread): the main thread's is put back, and
  any other thread off the lease's cores replaces the child;
- the priority (``os.getpriority``): where it may not be raised again, the child is replaced;
- the signal mask (``signal.pthread_sigmask``); the real, virtual and profiling timers (cleared);
- threads (``threading.enumerate``): one the job left running replaces the child;
- open files (``/proc/self/fd``: files and folders, not pipes or sockets): one the job left
  open replaces the child.

A descriptor or a thread can't be closed or stopped safely from outside the code that owns
it (a closed descriptor's number is reused under a file object that will close it again),
so the child goes instead. Standard library only.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
from dataclasses import dataclass

LIMITS = {name: getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}
TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)


@dataclass(frozen=True)
class ProcessState:
    umask: int
    limits: dict[str, tuple[int, int]]
    affinity: frozenset[int]
    nice: int
    sigmask: frozenset[int]
    threads: frozenset[int]
    fds: dict[int, str]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fds() -> dict[int, str]:
    """The open descriptors that are files or folders (not pipes, sockets or devices), each
    with its path; the listing's own descriptor, closed by the time it is read, is left out."""
    try:
        listed = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: not checked
        return {}
    found = {}
    for fd in listed:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith("/dev/"):
            found[int(fd)] = target
    return found


def _limits() -> dict[str, tuple[int, int]]:
    found = {}
    for name, which in LIMITS.items():
        try:
            found[name] = resource.getrlimit(which)
        except (OSError, ValueError):
            continue
    return found


def snapshot() -> ProcessState:
    return ProcessState(
        umask=_umask(),
        limits=_limits(),
        affinity=frozenset(os.sched_getaffinity(0)),
        nice=os.getpriority(os.PRIO_PROCESS, 0),
        sigmask=frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        threads=frozenset(t.ident for t in threading.enumerate() if t.ident is not None),
        fds=_fds(),
    )


def restore(before: ProcessState) -> list[str]:
    """Put back what a job changed; returns what could not be put back (the child must go)."""
    lost: list[str] = []
    if _umask() != before.umask:
        os.umask(before.umask)
    for timer in TIMERS:
        signal.setitimer(timer, 0)
    if frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])) != before.sigmask:
        signal.pthread_sigmask(signal.SIG_SETMASK, before.sigmask)
    lost += _restore_limits(before.limits)
    lost += _restore_nice(before.nice)
    lost += _restore_affinity(before.affinity)
    lost += _left_threads(before.threads)
    lost += _left_fds(before.fds)
    return lost


def _restore_limits(before: dict[str, tuple[int, int]]) -> list[str]:
    lost = []
    for name, now in _limits().items():
        if name in before and now != before[name]:
            try:
                resource.setrlimit(LIMITS[name], before[name])
            except (OSError, ValueError) as exc:
                lost.append(f"the job changed {name} to {now} and it can't be put back ({exc})")
    return lost


def _restore_nice(before: int) -> list[str]:
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if now == before:
        return []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before)
    except OSError as exc:
        return [f"the job changed its priority (nice {before} → {now}) and it can't be put back ({exc})"]
    return []


def _restore_affinity(before: frozenset[int]) -> list[str]:
    if frozenset(os.sched_getaffinity(0)) != before:
        os.sched_setaffinity(0, before)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []
    off = []
    for tid in tids:
        try:
            if frozenset(os.sched_getaffinity(tid)) != before:
                off.append(tid)
        except OSError:  # the thread ended meanwhile
            continue
    if not off:
        return []
    return [f"{len(off)} thread(s) of the child run on CPUs outside its lease {sorted(before)}"]


def _left_threads(before: frozenset[int]) -> list[str]:
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    return [f"the job left {len(left)} thread(s) running: {', '.join(left[:5])}"] if left else []


def _left_fds(before: dict[int, str]) -> list[str]:
    # a path open before may be open again (the child's log, reopened for a stdout the job closed)
    known = set(before.values())
    left = [f"{fd} ({path})" for fd, path in sorted(_fds().items()) if path not in known]
    return [f"the job left {len(left)} file(s) open: {', '.join(left[:5])}"] if left else []
