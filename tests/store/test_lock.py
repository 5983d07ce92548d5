"""The store's writer lock, with flock and on a file system without it (simulated)."""

import errno
import fcntl
import os
import socket
import subprocess
import sys

import pytest

from sweep.errors import SweepWarning
from sweep.store import lock as storelock
from sweep.store.lock import HELD_NAME, StoreLock, StoreLocked, locked


@pytest.fixture
def no_flock(monkeypatch):
    """flock answers ENOLCK, as on a Lustre or NFS mount without lock support."""

    def refuse(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(storelock.fcntl, "flock", refuse)


def test_flock_lock_excludes_a_second_writer_and_is_seen(tmp_path):
    lock = StoreLock(tmp_path)
    with pytest.raises(StoreLocked, match=r"pid \d+ on"):
        StoreLock(tmp_path)
    assert locked(tmp_path)
    lock.release()
    assert not locked(tmp_path)


def test_without_flock_a_held_file_names_the_holder_once_warned(tmp_path, no_flock):
    with pytest.warns(SweepWarning, match="does not support flock"):
        lock = StoreLock(tmp_path)
    assert (tmp_path / HELD_NAME).read_text().startswith("pid ")
    assert locked(tmp_path)
    with pytest.warns(SweepWarning), pytest.raises(StoreLocked, match=f"remove {tmp_path / HELD_NAME}"):
        StoreLock(tmp_path)
    lock.release()
    assert not (tmp_path / HELD_NAME).exists() and not locked(tmp_path)


def test_without_flock_the_held_file_of_a_dead_process_is_taken_over(tmp_path, no_flock):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (tmp_path / HELD_NAME).write_text(f"pid {dead.stdout.strip()} on {socket.gethostname()} since then\n")
    assert not locked(tmp_path)
    with pytest.warns(SweepWarning):
        lock = StoreLock(tmp_path)
    assert f"pid {os.getpid()}" in (tmp_path / HELD_NAME).read_text()
    lock.release()


def test_other_flock_errors_are_not_swallowed(tmp_path, monkeypatch):
    def broken(fd, op):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(fcntl, "flock", broken)
    with pytest.raises(OSError, match="I/O error"):
        StoreLock(tmp_path)
