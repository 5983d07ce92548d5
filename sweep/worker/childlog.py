"""A capped child's log file: where its stdout and stderr go, and its readers.

Each child writes to ``<temp>/sweep-child-<parent pid>-*.log``; the file is emptied as each
job starts, so it holds the running (or last) job's output. Readers: :meth:`ChildLog.text`
(what a job printed, for its record), :meth:`ChildLog.tail` (the last lines, for errors),
:meth:`ChildLog.read_from` (``sweep logs --follow``) and :meth:`ChildLog.size`. Files of
workers killed before they could remove them are removed by :func:`remove_orphan_logs`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psutil

LOG_PREFIX = "sweep-child-"  # then the parent's pid: a child's log file in the temp folder


class ChildLog:
    """One child's log file, made in the temp folder (removed by :meth:`remove`)."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix=f"{LOG_PREFIX}{os.getpid()}-", suffix=".log")
        os.close(fd)

    def restart(self) -> None:
        """Empty the file: a new job starts."""
        os.truncate(self.path, 0)

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def size(self) -> int:
        """Bytes the current job has printed (0 once the file is gone)."""
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def text(self, limit: int) -> str:
        """What the current job printed, its last ``limit`` bytes at most."""
        try:
            with open(self.path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def read_from(self, offset: int, most: int = 4 << 20) -> tuple[int, bytes]:
        """(where it starts, bytes) of what the current job printed from byte ``offset`` on, at
        most ``most`` bytes."""
        try:
            with open(self.path, "rb") as f:
                start = min(offset, os.fstat(f.fileno()).st_size)
                f.seek(start)
                return start, f.read(most)
        except OSError:
            return offset, b""

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines the child (and its job) printed."""
        text = self.text(300 * lines)
        return "\n".join(text.splitlines()[-lines:])


def remove_orphan_logs(folder: str | None = None) -> int:
    """Remove this user's child log files in ``folder`` (the temp folder) whose parent process
    is gone: a worker killed with SIGKILL can't remove its children's; how many were removed."""
    removed = 0
    for path in Path(folder or tempfile.gettempdir()).glob(f"{LOG_PREFIX}*.log"):
        pid = path.name.removeprefix(LOG_PREFIX).partition("-")[0]
        try:
            if pid.isdigit() and not psutil.pid_exists(int(pid)) and path.stat().st_uid == os.getuid():
                path.unlink()
                removed += 1
        except OSError:
            pass  # another worker removed it first
    return removed
