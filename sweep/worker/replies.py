"""How a child's parent handles each message the child sends while a job runs: a table
``{message type: handler}`` (:attr:`Replies.replies`) instead of a chain of type tests.

:class:`Replies` is a base of :class:`~sweep.worker.child.Child`; a handler is a method named
in the table, called with the message and the running job (:class:`Job`), and answers whether
the message ended the job. A kind of child with other messages, or other answers, changes
entries of the table (:class:`~sweep.worker.mpi.MpiChild` adds one of its own for its other
ranks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sweep.wire import protocol
from sweep.wire.protocol import Checkpoint, JobDone, JobFailed, PointRecord, Report, RestoreAsk, Restored

if TYPE_CHECKING:
    from sweep.worker.checkpoints import PointCheckpoints
    from sweep.worker.childlog import ChildLog

log = logging.getLogger(__name__)


@dataclass
class Job:
    """The job a child runs now, as its reply handlers see it."""

    record: PointRecord
    attempt: int
    on_report: Callable[[Report], None] | None
    checkpoints: PointCheckpoints | None
    log_end: int = -1  # the child's log file's size at the job's end, from its reply
    replied: bool = False  # the child said the job ended (it did not die or get killed first)


class Replies:
    """The reply table and its handlers; see the module docstring."""

    replies: ClassVar[dict[type, str]] = {
        Report: "_on_report",
        Checkpoint: "_on_checkpoint",
        RestoreAsk: "_on_restore_ask",
        JobDone: "_on_end",
        JobFailed: "_on_end",
    }
    pid: int
    log: ChildLog
    unrestorable: tuple[str, ...]
    _req_w: int
    _rep_r: int

    def _record_death(self, record: PointRecord) -> None:
        raise NotImplementedError

    def _take_reply(self, job: Job) -> bool:
        """Read one message and hand it to its handler (``replies``); True when it ended the
        job (a reply, or the child's death)."""
        try:
            reply = protocol.receive(self._rep_r)
        except EOFError:
            self._record_death(job.record)
            return True
        return bool(getattr(self, self.replies[type(reply)])(reply, job))

    def _on_report(self, reply: Report, job: Job) -> bool:
        job.record.reports.append(reply.row(job.attempt))
        if job.on_report is not None:
            job.on_report(reply)
        return False

    def _on_checkpoint(self, reply: Checkpoint, job: Job) -> bool:
        job.record.checkpoints += 1
        if job.checkpoints is not None:
            job.checkpoints.save(reply.data, job.attempt, reply.time)
        return False

    def _on_restore_ask(self, reply: RestoreAsk, job: Job, fd: int | None = None) -> bool:
        """Answer with the point's last checkpoint (None without one) on ``fd`` (the reply
        pipe's own by default)."""
        last = job.checkpoints.last() if job.checkpoints is not None else None
        if fd is None:
            job.record.resumed_from = last.number if last is not None else 0
        try:
            protocol.send(self._req_w if fd is None else fd, Restored(last))
        except OSError:  # the child died meanwhile: the next read says so
            pass
        return False

    def _on_end(self, reply: JobDone | JobFailed, job: Job) -> bool:
        record, m = job.record, reply.metrics
        job.log_end, job.replied = m.log_end, True
        record.wall_s, record.cpu_s, record.cores = m.wall_s, m.cpu_s, m.cores
        if reply.unrestorable:
            self.unrestorable = reply.unrestorable
            log.info(
                "child pid %d must be replaced: its job changed %s", self.pid, "; ".join(reply.unrestorable)
            )
        record.peak_threads, record.peak_rss = m.threads, m.peak_rss
        record.sources = reply.sources
        if isinstance(reply, JobDone):
            record.status, record.outputs = "done", reply.outputs
        else:
            record.error, record.output_tail = reply.error, self.log.tail()
        if reply.pruned:
            record.status, record.error = "pruned", record.error or "the search pruned this trial"
        return True
