"""Batch job submissions: a failed ``sbatch`` / ``qsub`` ends the sweep instead of a hang.

dask-jobqueue submits batch jobs from its event loop; a submission that fails is an exception
logged there (a traceback), and the sweep would wait for workers forever. A
:class:`SubmissionWatch` records every submission of a cluster, through a subclass of the
cluster's job class, and decides when to give up: at the first failure when no submission has
succeeded yet (a wrong ``SLURM_CONF``, partition or account), or after
:data:`FAILURES_IN_A_ROW` failures in a row later on (resubmitting lost jobs). Giving up calls
``on_fatal`` with the scheduler's own message and a hint for the batch system; the failed
jobs are forgotten by the cluster so that its next ``scale`` submits them again.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from distributed.core import Status

from sweep import _compat
from sweep.capacity.backends import BACKENDS

FAILURES_IN_A_ROW = 3
log = logging.getLogger(__name__)


class SubmitFailed(RuntimeError):
    """One batch submission failed; already reported, so not logged again as a traceback."""


class _Unlogged(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], SubmitFailed))


def scheduler_message(exc: BaseException) -> str:
    """What the batch system said, from dask-jobqueue's error (its stderr, else the error)."""
    text = str(exc)
    match = re.search(r"\nstderr:\n(.*)", text, flags=re.S)
    said = (match.group(1) if match else "").strip()
    return said or text.strip()


class SubmissionWatch:
    """The submissions of one dask-jobqueue cluster of ``kind``; see the module docstring."""

    def __init__(self, kind: str, on_fatal: Callable[[str], None]) -> None:
        self.kind = kind
        self.on_fatal = on_fatal
        self.succeeded = 0
        self.in_a_row = 0
        self.failed: list[Any] = []  # names of failed jobs the cluster has not forgotten yet
        self.fatal: str | None = None
        self._lock = threading.Lock()

    def install(self, cluster: Any) -> None:
        """Start ``cluster``'s batch jobs through a class that reports to this watch."""
        watch, base = self, cluster.job_cls

        class Watched(base):  # type: ignore[misc, valid-type]
            async def start(self) -> None:
                try:
                    await super().start()
                except Exception as exc:
                    self.status = Status.failed  # what SpecCluster expects of a worker that never started
                    watch.submission_failed(self.name, exc)
                    raise SubmitFailed(scheduler_message(exc)) from None
                watch.submission_succeeded()

        Watched.__name__ = Watched.__qualname__ = base.__name__
        _compat.set_batch_job_class(cluster, Watched)
        logging.getLogger("tornado.application").addFilter(_Unlogged())

    def submission_succeeded(self) -> None:
        with self._lock:
            self.succeeded += 1
            self.in_a_row = 0

    def submission_failed(self, name: Any, exc: BaseException) -> None:
        said = scheduler_message(exc)
        with self._lock:
            self.in_a_row += 1
            self.failed.append(name)
            give_up = self.fatal is None and (not self.succeeded or self.in_a_row >= FAILURES_IN_A_ROW)
            if give_up:
                tries = "" if not self.succeeded else f" ({self.in_a_row} failures in a row)"
                backend = BACKENDS.get(self.kind)
                hint = backend.hint if backend else "check the batch system on this host"
                self.fatal = (
                    f"could not submit a {self.kind} batch job{tries}: {said}\n"
                    f"{hint}; the store is kept "
                    "and `sweep submit` again resumes"
                )
        (log.info if give_up else log.warning)(
            "batch job submission failed (%d in a row): %s", self.in_a_row, said
        )
        if give_up and self.fatal:
            self.on_fatal(self.fatal)

    def give_up(self, message: str) -> None:
        """End the sweep with ``message`` (once) for a reason other than a submission."""
        with self._lock:
            first, self.fatal = self.fatal is None, self.fatal or message
        if first:
            self.on_fatal(message)

    def forget_failed(self, cluster: Any) -> None:
        """Let the cluster submit the failed jobs again at its next ``scale`` (any thread)."""
        with self._lock:
            names, self.failed = self.failed, []
        if names and self.fatal is None:
            cluster.sync(_compat.forget_batch_jobs, cluster, names)
