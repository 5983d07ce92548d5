"""The run loop: submit a sweep's points through a window and write their records as they
finish, telling the run's listeners at each step.

Data flow (one run; the listeners are :mod:`sweep.client.listeners`)::

    tasks ─► Window.fill() ─► Dask ─► workers ─┬─► records ─► on_records ─► ResultWriter ─► Store
                                               └─► topic events ─► on_event (event thread)
    each turn: on_tick (prune, checkpoints, driver state), refill, store still there?, cancelled?

:meth:`RunLoop.run` is a short loop of named steps; it ends when every task has finished and
the window holds none back (:meth:`~sweep.client.window.Window.waiting`), or when the run is
cancelled (``cancel`` set by the user, by ``sweep cancel`` or by a listener's
:meth:`~sweep.client.listeners.base.Run.stop`): queued points are cancelled, running ones
killed (what they printed kept in the store), finished ones written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from distributed import Future, as_completed

from sweep import cadence
from sweep.client.listeners.base import Listener, Run
from sweep.store.writer import ResultWriter
from sweep.wire.protocol import PointRecord, StoppedAttempt
from sweep.worker.commands import StopRun, on_pool

log = logging.getLogger(__name__)
# The client looks for results every POLL_MIN_S while they come, backing off to POLL_MAX_S
# when none does (a job's next task is queued on its worker already: the wait costs no core).
POLL_MIN_S, POLL_MAX_S = 0.005, 0.1


class RunLoop:
    """One run's loop; ``mark(moment)`` notes when the first submit and result happened."""

    def __init__(
        self,
        run: Run,
        writer: ResultWriter,
        listeners: Sequence[Listener],
        mark: Callable[[str], None],
        log_bytes: int = 1 << 20,
    ) -> None:
        self.run, self.writer, self.listeners = run, writer, list(listeners)
        self.mark, self.log_bytes = mark, log_bytes
        self.every = cadence.refresh_s()
        self._refilled = self._checked = time.monotonic()
        self._idle_s = POLL_MIN_S

    def loop(self) -> None:
        """Run until every task has finished or the run is cancelled; see the module docstring."""
        self.mark("first_submit")
        done = as_completed(self.run.window.fill(), with_results=True, raise_errors=False)
        try:
            while not done.is_empty() or self.run.window.waiting():
                self._tick()
                self._refill(done, due=time.monotonic() - self._refilled >= self.every)
                self._check_store()
                if self.run.cancel.is_set():
                    self._cancel()
                    break
                batch = done.next_batch(block=False)
                self._write(batch)
                self._refill(done, due=bool(batch))
                self._flush_or_wait(bool(batch), done.is_empty() and not self.run.window.waiting())
        except BaseException:
            self.run.client.cancel(list(self.run.window.in_flight))
            raise
        finally:
            self.writer.flush()

    def _tick(self) -> None:
        for listener in self.listeners:
            listener.on_tick(self.run)

    def _refill(self, done: as_completed, due: bool) -> None:
        """Submit what the window has room for (workers may have joined, tasks finished)."""
        if due:
            done.update(self.run.window.fill())
            self._refilled = time.monotonic()

    def _check_store(self) -> None:
        """Every few seconds: a store folder removed under the run stops it (StoreGone)."""
        if time.monotonic() - self._checked < self.every:
            return
        self._checked = time.monotonic()
        if not self.writer.store.intact():
            self._stop_points()
            self.writer.drop()  # nowhere to write them
            self.writer.store.check_intact()

    def _cancel(self) -> None:
        """Stop the run's points, keep what the killed ones printed, and let the listeners
        catch up (checkpoints saved as it was cancelled)."""
        self.writer.store.sidecar.keep_logs(self._stop_points())
        self._tick()

    def _stop_points(self) -> list[StoppedAttempt]:
        """Cancel what is queued and kill what runs (Dask's cancel leaves running tasks be);
        what the killed attempts had printed."""
        client = self.run.client
        client.cancel(list(self.run.window.in_flight))
        try:
            replies = client.run(on_pool, StopRun(self.run.token, self.log_bytes))
        except Exception as exc:  # a worker gone meanwhile: its children went with it
            log.info("stopping the run's children: %s", exc)
            return []
        return [a for stopped in replies.values() if stopped for a in stopped]

    def _write(self, batch: list[tuple[Future, Any]]) -> None:
        """Hand the records of finished tasks, passed through the listeners, to the writer. A
        method of its own so that no local name keeps a finished future alive: its record would
        stay in the worker's memory (and a retiring worker would wait for it)."""
        for future, result in batch:
            self.mark("first_result")
            records: list[PointRecord] = self.run.window.finished(future, result)
            for listener in self.listeners:
                records = listener.on_records(self.run, records)
            self.writer.add(records)

    def _flush_or_wait(self, got: bool, empty: bool) -> None:
        """Write the waiting records when due; else, when nothing came, wait a little (the
        longer none comes, the longer, up to POLL_MAX_S)."""
        if self.writer.due() or empty:
            self.writer.flush()
        elif not got:
            time.sleep(self._idle_s)
        self._idle_s = POLL_MIN_S if got else min(POLL_MAX_S, self._idle_s * 1.5)
