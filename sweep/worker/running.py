"""What a worker's children are running now, and what the last attempts printed.

A :class:`Running` belongs to a worker's :class:`~sweep.worker.pool.CorePool`; the client
reaches it through the pool's commands (:mod:`sweep.worker.commands`): stop a run's points,
prune a trial, read what an attempt printed (``sweep logs --follow``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from sweep.wire.protocol import LogChunk, PointRecord, StoppedAttempt
from sweep.worker.child import Child

log = logging.getLogger(__name__)
ENDED_LOGS_KEPT = 16  # attempts whose last output a follower may still ask for


class Running:
    """The children running a job (by pid: their run, point and child), the runs stopped here
    (``stopped``: their points don't start) and the output of the last attempts that ended."""

    def __init__(self) -> None:
        self.busy: dict[int, tuple[str, tuple[int, ...], Child]] = {}
        # (owner, point, attempt) -> (their kept output, bytes printed)
        self._ended: OrderedDict[tuple[str, tuple[int, ...], int], tuple[str, int]] = OrderedDict()
        self.stopped: set[str] = set()

    def started(self, child: Child, owner: str, point: tuple[int, ...]) -> None:
        self.busy[child.pid] = (owner, point, child)

    def finished(self, child: Child) -> None:
        self.busy.pop(child.pid, None)

    def stop(self, owner: str, log_bytes: int = 1 << 20) -> list[StoppedAttempt]:
        """Kill the children running jobs of ``owner`` (a run of a sweep) now, and start none
        of its jobs from now on; what each killed attempt had printed (its last ``log_bytes``)."""
        self.stopped.add(owner)
        doomed = [(point, child) for who, point, child in list(self.busy.values()) if who == owner]
        stopped = []
        for point, child in doomed:
            log.info("stopping child pid %d of cancelled run %s", child.pid, owner)
            stopped.append(StoppedAttempt(point, child.attempt, child.log.text(log_bytes)))
            child.stop()
        return stopped

    def _running(self, owner: str, point: tuple[int, ...]) -> Child | None:
        """The child running ``point`` of run ``owner`` here, if any."""
        return next((c for who, at, c in list(self.busy.values()) if who == owner and at == point), None)

    def prune(self, owner: str, point: tuple[int, ...]) -> bool:
        """Tell the job running ``point`` of run ``owner`` here to stop at its next report;
        whether it runs here."""
        child = self._running(owner, point)
        if child is not None:
            log.info("pruning point %s (child pid %d)", point, child.pid)
            child.prune()
        return child is not None

    def ended(
        self, owner: str, point: tuple[int, ...], attempt: int, child: Child, record: PointRecord
    ) -> None:
        """Keep an attempt's output a while for :meth:`log_chunk` (its child runs on)."""
        text = record.logs[-1] if record.logs else ""
        # a killed child's log file is gone: its kept text is then taken as all it printed
        self._ended[(owner, point, attempt)] = (text, max(child.log.size(), len(text.encode())))
        while len(self._ended) > ENDED_LOGS_KEPT:
            self._ended.popitem(last=False)

    def log_chunk(self, owner: str, point: tuple[int, ...], attempt: int, offset: int) -> LogChunk | None:
        """What attempt ``attempt`` (or a later one running now) at ``point`` of run ``owner``
        printed from byte ``offset`` on; None when it neither runs here nor ended lately."""
        kept = self._ended.get((owner, point, attempt))
        if kept is not None:
            text, size = kept
            data = text.encode()
            start = max(offset, size - len(data))
            return LogChunk(attempt, start, data[start - (size - len(data)) :], ended=True)
        child = self._running(owner, point)
        if child is None or child.attempt < attempt:
            return None
        if child.attempt > attempt:
            attempt, offset = child.attempt, 0
        start, data = child.log.read_from(offset)
        return LogChunk(attempt, start, data, ended=False)
