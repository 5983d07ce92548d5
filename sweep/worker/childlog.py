"""A capped child's log file: where its stdout and stderr go, and its readers.

Each child writes to ``<temp>/sweep-child-<parent pid>-*.log``; the file is emptied as each
job (or chunk of jobs) starts. The current job's output is the file from byte
:attr:`ChildLog.start` on (0, or where the job before it in a chunk ended), and every reader
reads only that. Readers: :meth:`ChildLog.text` (what a job printed, for its record),
:meth:`ChildLog.tail` (the last lines, for errors), :meth:`ChildLog.read_from` (``sweep logs
--follow``) and :meth:`ChildLog.size`. Files of workers killed before they could remove them
are removed by :func:`remove_orphan_logs`.
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
        self.start = 0  # where the current job's output begins in the file

    def restart(self) -> None:
        """Empty the file: a new job (or chunk of jobs) starts."""
        os.truncate(self.path, 0)
        self.start = 0

    def next_job(self, at: int) -> None:
        """The next job of a chunk starts: its output begins at byte ``at`` (where the job before
        it ended; the file's size now when unknown, -1)."""
        self.start = max(self.start, at if at >= 0 else self._file_size())

    def _file_size(self) -> int:
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def size(self) -> int:
        """Bytes the current job has printed (0 once the file is gone)."""
        return max(0, self._file_size() - self.start)

    def text(self, limit: int, end: int = -1) -> str:
        """What the current job printed (up to byte ``end`` of the file, when known: a chunk's
        next job may be printing already), its last ``limit`` bytes at most."""
        if end == self.start:
            return ""  # it printed nothing: no need to read
        try:
            with open(self.path, "rb") as f:
                stop = end if end >= 0 else os.fstat(f.fileno()).st_size
                begin = max(self.start, stop - limit)
                f.seek(begin)
                return f.read(max(0, stop - begin)).decode(errors="replace")
        except OSError:
            return ""

    def read_from(self, offset: int, most: int = 4 << 20) -> tuple[int, bytes]:
        """(where it starts, bytes) of what the current job printed from byte ``offset`` of its
        output on, at most ``most`` bytes."""
        try:
            with open(self.path, "rb") as f:
                start = min(offset, max(0, os.fstat(f.fileno()).st_size - self.start))
                f.seek(self.start + start)
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
