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


@dataclass
class Held:
    """Locks held on some CPUs; :meth:`release` (or this process's death) frees them."""

    cores: tuple[int, ...]
    fds: tuple[int, ...]

    def release(self) -> None:
        for fd in self.fds:
            os.close(fd)  # closing the only descriptor drops the flock
        self.fds = ()


def hold(candidates: Iterable[int], k: int, holder: str, folder: Path | None = None) -> Held | None:
    """Lock ``k`` CPUs, taken from ``candidates`` in order, or none (None when fewer are free)."""
    folder = folder or lease_dir()
    got: dict[int, int] = {}
    for cpu in candidates:
        if len(got) == k:
            break
        fd = os.open(folder / f"cpu-{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        got[cpu] = fd
    if len(got) < k:
        for fd in got.values():
            os.close(fd)
        return None
    text = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}: {holder}\n"
    for fd in got.values():
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
    return Held(tuple(sorted(got)), tuple(got[c] for c in sorted(got)))


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
