"""Entry point of a capped child process: ``python -m sweep.child.bootstrap CORES FD_IN FD_OUT PPID``.

An MPI point's ranks start as ``python -m sweep.child.bootstrap GROUPS @SOCKET @ 0``: each
rank pins itself to its own group of GROUPS (``0,1/2,3``, by its rank:
:mod:`sweep.child.ranks`), connects to the worker's Unix socket SOCKET for both directions,
and dies with its launcher (its parent) rather than with the worker (:mod:`sweep.worker.mpi`).

The first thing this module does, before any third-party import, is pin the process to CORES
(``os.sched_setaffinity``) so that every thread pool numpy, OpenBLAS and XLA size from the
visible CPUs is sized to the lease (see docs/threads.md). It then asks the kernel to SIGKILL
it if the spawning thread dies (``PR_SET_PDEATHSIG``), so no child outlives its worker,
becomes a subreaper so that what its jobs start can't escape, and serves requests from the
parent over two pipes until told to exit or the pipe closes. Everything above the pinning
uses the standard library only; keep it that way.
"""

import os
import sys


def _pin(cores_arg: str) -> None:
    cores = {int(c) for c in cores_arg.split(",") if c}
    if cores:
        os.sched_setaffinity(0, cores)


def _die_with_parent(ppid: int) -> None:
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != ppid:  # the parent died before prctl took effect
        os._exit(1)


def _adopt_orphans() -> None:
    """Become a subreaper (``PR_SET_CHILD_SUBREAPER``): processes a job starts that lose their
    parent (double forks, ``setsid`` daemons) become this process's children, so they can be
    ended with the job (:func:`sweep.child.serving.end_leftovers`) instead of escaping to init."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _connect(path: str) -> tuple[int, int]:
    """(requests, replies) file descriptors of a connection to the worker's Unix socket."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    fd = sock.detach()
    return fd, os.dup(fd)


def main(argv: list[str]) -> int:
    cores_arg, fd_in, fd_out, ppid = argv
    rank_of_mpi = fd_in.startswith("@")
    if rank_of_mpi:
        from sweep.child.ranks import my_cores  # stdlib only

        cores_arg = my_cores(cores_arg)
    _pin(cores_arg)
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a worker may have it blocked
    _die_with_parent(os.getppid() if rank_of_mpi else int(ppid))
    _adopt_orphans()
    if rank_of_mpi:
        fd_in, fd_out = map(str, _connect(fd_in[1:]))
    preloaded = sorted(m for m in ("numpy", "jax", "jaxlib") if m in sys.modules)
    if preloaded:
        print(f"sweep: {preloaded} imported before pinning (a .pth file?)", file=sys.stderr)
    from sweep.child import serving  # stdlib-only at import; numpy loads lazily per job

    return serving.serve(int(fd_in), int(fd_out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
