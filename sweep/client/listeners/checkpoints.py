"""The client's side of a run's checkpoints, a listener of the run: copied from the scheduler
into the store, sent along with the tasks of their points, and each point's starts counted
(requeues).

Where a checkpoint is kept and which one an attempt restores is :mod:`sweep.worker.checkpoints`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from sweep.client.listeners.base import Listener, Run
from sweep.wire import events
from sweep.wire.protocol import FINISHED, PointRecord, Saved
from sweep.worker.checkpoints import metadata_key

if TYPE_CHECKING:
    from distributed import Client

    from sweep.store import Store
    from sweep.wire.task import PointTask


class RunCheckpoints(Listener):
    """The client's side of one run: checkpoints announced by workers copied from the scheduler
    into the store, the store's sent along with the tasks of the points they belong to, and
    each point's starts counted (a point started twice in one run was requeued: its worker
    was lost and Dask ran its task again elsewhere, without spending a retry)."""

    def __init__(self, run: str) -> None:
        self.run = run
        self._lock = threading.Lock()
        self._noticed: set[tuple[int, ...]] = set()
        self._starts: Counter[tuple[int, ...]] = Counter()

    def on_event(self, event: events.Event) -> None:
        """Note a worker's checkpoint or point start (the client's event thread)."""
        with self._lock:
            if isinstance(event, events.CheckpointSaved):
                self._noticed.add(event.index)
            elif isinstance(event, events.PointStarted):
                self._starts[event.index] += 1

    def keep(self, client: Client, store: Store) -> int:
        """Copy the checkpoints announced since the last call from the scheduler into the store
        (the last of each point; one a finished point took with it is gone); how many."""
        with self._lock:
            noticed, self._noticed = self._noticed, set()
        kept = 0
        for index in sorted(noticed):
            saved = Saved.from_msg(client.get_metadata(metadata_key(self.run, index), default=None))
            if saved is not None:
                store.sidecar.keep_checkpoint(index, saved)
                kept += 1
        return kept

    def on_tick(self, run: Run) -> None:
        self.keep(run.client, run.store)

    def on_records(self, run: Run, records: list[PointRecord]) -> list[PointRecord]:
        return self.ended(run.client, records)

    def ended(self, client: Client, records: list[PointRecord]) -> list[PointRecord]:
        """The records with their requeues counted; the scheduler's copy of the checkpoints of
        points that finished (done, pruned) is dropped."""
        out = []
        for r in records:
            with self._lock:
                starts = self._starts.pop(r.index, 0)
            if r.status in FINISHED and (r.checkpoints or r.resumed_from):
                client.set_metadata(metadata_key(self.run, r.index), None)
            out.append(replace(r, requeued=max(0, starts - 1)) if starts > 1 else r)
        return out

    @staticmethod
    def carried(store: Store, tasks: Iterable[PointTask]) -> Iterator[PointTask]:
        """``tasks``, each with its point's last checkpoint in the store (if any) sent along."""
        for task in tasks:
            saved = store.sidecar.checkpoint(task.index)
            yield task if saved is None else replace(task, checkpoint=saved)
