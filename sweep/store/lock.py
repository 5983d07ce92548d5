"""The single-writer lock of a result store, and whether a live process holds it.

The writer holds an exclusive ``flock`` on ``<output>/.sweep.lock``, whose text names the
holder (pid, host, since); the kernel drops it when the holder dies, so a killed sweep never
leaves its store locked. On a file system without ``flock`` (some Lustre and NFS mounts
answer ENOLCK, ENOSYS or EOPNOTSUPP) the writer instead creates ``<output>/.sweep.lock.held``
exclusively, with the same text, and removes it on close; that one can outlive a killed
holder, so a held file whose pid is gone on this host is taken over, and one from another
host is reported with the command to remove it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
import warnings
from pathlib import Path

from sweep.errors import SweepError, SweepWarning
from sweep.store.layout import HELD_NAME, LOCK_NAME

NO_FLOCK = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP)


class StoreLocked(SweepError, RuntimeError):
    """Another process writes this store; the message names it."""


def _holder_text() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {time.ctime()}\n"


class StoreLock:
    """The writer lock of the store at ``path``, held from construction until :meth:`release`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._folder = _identity(path)
        self._fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        self._held: Path | None = None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 4096, 0).decode(errors="replace").strip() or "another process"
            os.close(self._fd)
            raise StoreLocked(_busy(path, holder, path / LOCK_NAME)) from None
        except OSError as exc:
            if exc.errno not in NO_FLOCK:
                os.close(self._fd)
                raise
            self._held = self._hold_file(exc)
            return
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, _holder_text().encode(), 0)
        except OSError:  # a full disk: the caller says so
            os.close(self._fd)
            raise

    def _hold_file(self, exc: OSError) -> Path:
        held = self.path / HELD_NAME
        warnings.warn(
            f"{self.path}: its file system does not support flock ({exc.strerror}); locking with "
            f"{held} (holder's pid and host) instead",
            SweepWarning,
            stacklevel=4,
        )
        for _ in range(2):
            try:
                fd = os.open(held, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if not _stale(held):
                    os.close(self._fd)
                    holder = held.read_text(errors="replace").strip() or "another process"
                    raise StoreLocked(
                        _busy(self.path, holder, held) + f"; if that process is gone, remove {held}"
                    ) from None
                held.unlink(missing_ok=True)  # its holder died on this host: take it over
                continue
            os.write(fd, _holder_text().encode())
            os.close(fd)
            return held
        raise StoreLocked(_busy(self.path, "another process", held))

    def intact(self) -> bool:
        """Whether the store's folder is still where it was locked (not moved, deleted or
        replaced by another folder of the same name)."""
        return _identity(self.path) == self._folder

    def release(self) -> None:
        if self._held is not None:
            self._held.unlink(missing_ok=True)
            self._held = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _busy(path: Path, holder: str, lock: Path) -> str:
    return (
        f"{path} is being written by {holder} (lock {lock}); wait for that sweep to end or choose "
        "another --output"
    )


def _stale(held: Path) -> bool:
    """Whether a held-file names a process of this host that is gone."""
    words = held.read_text(errors="replace").split()
    try:
        pid, host = int(words[1]), words[3]
    except (IndexError, ValueError):
        return False
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def holder(path: Path) -> tuple[int, str] | None:
    """(pid, host) of the process holding the store's writer lock now, or None when none does
    (or its lock file names nobody yet)."""
    if not locked(path):
        return None
    for name in (HELD_NAME, LOCK_NAME):
        try:
            words = (path / name).read_text(errors="replace").split()
            return int(words[1]), words[3]
        except (OSError, IndexError, ValueError):
            continue
    return None


def locked(path: Path) -> bool:
    """Whether a live process holds the store's writer lock right now."""
    held = path / HELD_NAME
    if held.exists() and not _stale(held):
        return True
    try:
        fd = os.open(path / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as exc:
        if exc.errno not in NO_FLOCK:
            raise
    finally:
        os.close(fd)
    return False
