"""Core leases shared by every process of a user on one node.

Each CPU has a lock file in a per-user folder on the node (``$SWEEP_LEASE_DIR``, default
``/tmp/sweep-<uid>/cores``, mode 0700); a process holds CPU ``n`` while it holds an exclusive
``flock`` on ``cpu-<n>.lock``, whose text names the holder (pid, host, what for). Every Dask
worker process of the node, and every sweep the user runs there, leases from the same files,
so two jobs never run pinned to the same core, whatever the deployment (``--nworkers``,
dask-jobqueue ``processes > 1``, two sweeps on a workstation). The kernel releases a lock when
its holder dies, so a killed worker leaks no core. Cores outside a process's affinity mask
(what the batch system gave its job) are never asked for.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import SweepError


class LeaseDirError(SweepError, RuntimeError):
    """The lease folder can't be used safely; the message says why and what to set."""


def lease_dir() -> Path:
    """The node's lease folder for this user, created private if missing."""
    folder = Path(os.environ.get("SWEEP_LEASE_DIR") or f"/tmp/sweep-{os.getuid()}/cores")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    owner = folder.stat().st_uid
    if owner != os.getuid():
        raise LeaseDirError(
            f"core lease folder {folder} belongs to uid {owner}, not you; set SWEEP_LEASE_DIR to a "
            "folder of your own on the node's local disk"
        )
    return folder


TEXT_BYTES = 256  # holder text is written padded to this size: no truncate per lease


@dataclass
class Held:
    """Locks held on some CPUs; :meth:`release` (or this process's death) frees them."""

    cores: tuple[int, ...]
    locks: NodeLocks

    def release(self) -> None:
        self.locks.release(self.cores)


class NodeLocks:
    """This process's handles on the node's CPU lock files (``PREFIX-<n>.lock``; ``prefix``
    ``cpu``, or one per GPU: :mod:`sweep.worker.gpus`), opened once and kept.

    A process must not ask twice for a CPU it holds (a second ``flock`` on the same open
    file succeeds); :class:`~sweep.worker.pool.CorePool` only asks for cores it has free.
    """

    def __init__(self, folder: Path | None = None, prefix: str = "cpu") -> None:
        self.folder = folder or lease_dir()
        self.prefix = prefix
        self._fds: dict[int, int] = {}

    def _fd(self, cpu: int) -> int:
        fd = self._fds.get(cpu)
        if fd is None:
            path = self.folder / f"{self.prefix}-{cpu}.lock"
            fd = self._fds[cpu] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        return fd

    def hold(self, candidates: Iterable[int], k: int, holder: str) -> Held | None:
        """Lock ``k`` CPUs, taken from ``candidates`` in order, or none (None when fewer are free)."""
        got: list[int] = []
        for cpu in candidates:
            if len(got) == k:
                break
            try:
                fcntl.flock(self._fd(cpu), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            got.append(cpu)
        if len(got) < k:
            self.release(got)
            return None
        text = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}: {holder}"
        data = text.encode()[: TEXT_BYTES - 1].ljust(TEXT_BYTES - 1) + b"\n"
        for cpu in got:
            os.pwrite(self._fds[cpu], data, 0)
        return Held(tuple(sorted(got)), self)

    def release(self, cores: Iterable[int]) -> None:
        for cpu in cores:
            fd = self._fds.get(cpu)
            if fd is not None:  # none after close(): the lock went with its file
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)  # drops any lock still held
        self._fds.clear()


def holders(folder: Path | None = None) -> dict[int, str]:
    """CPU -> who holds it now, for every CPU whose lease is held on this node."""
    folder = folder or lease_dir()
    out = {}
    for path in sorted(folder.glob("cpu-*.lock")):
        fd = os.open(path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                out[int(path.stem.split("-")[1])] = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        finally:
            os.close(fd)
    return out
