"""Where a point's checkpoints are kept, and which one an attempt restores.

A job's :func:`sweep.checkpoint` (:mod:`sweep.child.checkpoints`) reaches its worker through
the child's pipe. The worker's :class:`PointCheckpoints` for that point numbers it (1, 2, ...
over every attempt and run of the point) and keeps the last one in three places:

* on the worker, for the point's next attempt there (a retry after a timeout, a kill, a
  stall or a memory limit);
* on the scheduler (Dask metadata under :func:`metadata_key`), for an attempt on another
  worker when this one is lost (node gone, batch job preempted or ended): Dask runs the task
  again there;
* in the store folder (``.sweep-checkpoints/<point_id>.pkl``, :mod:`sweep.store.checkpoints`): the
  worker tells the client (a :class:`~sweep.events.CheckpointSaved` event), the client
  fetches it from the scheduler and writes it. A later run (a resume after the driver was
  killed, ``sweep retry``) sends it along with the point's task (``PointTask.checkpoint``).

:func:`sweep.restore` in an attempt gets the newest of these: the worker's own, else the
newer of the scheduler's and the task's. A point that ends done or pruned has its
checkpoints deleted; a failed one keeps its last, so that ``sweep retry`` goes on from it.
``--force`` deletes them with the store's data.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from sweep import events
from sweep.protocol import FINISHED, PointRecord, Saved

if TYPE_CHECKING:
    from distributed import Client

    from sweep.store import Store
    from sweep.task import PointTask

log = logging.getLogger(__name__)
METADATA = "sweep-checkpoints"


def metadata_key(run: str, index: tuple[int, ...]) -> list[str]:
    """The scheduler metadata key of a point's last checkpoint in run ``run``."""
    return [METADATA, run, ".".join(map(str, index))]


class PointCheckpoints:
    """The checkpoints of one point on the worker running it (one per Dask task run).

    ``carried``: the checkpoint the client sent along (the store's); ``publish``: sends a new
    checkpoint on (scheduler and client); ``lookup``: the scheduler's copy, asked only when an
    attempt restores and this worker has none of its own.
    """

    def __init__(
        self,
        where: str,
        carried: Saved | None,
        publish: Callable[[Saved], None],
        lookup: Callable[[], Saved | None],
    ) -> None:
        self.where = where
        self.carried = carried
        self.kept: Saved | None = None
        self.saved = 0  # checkpoints saved by this task's attempts
        self._publish, self._lookup = publish, lookup

    def save(self, data: bytes, attempt: int, when: float) -> Saved:
        """Keep a checkpoint the job just saved and send it on; a failure to send it on is
        logged (the attempt goes on: the worker still has it for the point's next attempt)."""
        last = self.kept or self.carried
        self.kept = Saved((last.number if last else 0) + 1, attempt, when, data)
        self.saved += 1
        try:
            self._publish(self.kept)
        except Exception as exc:
            number = self.kept.number
            log.warning("checkpoint %d of %s was kept on its worker only: %s", number, self.where, exc)
        return self.kept

    def last(self) -> Saved | None:
        """The checkpoint an attempt restores: this worker's own, else the newer of the
        scheduler's and the carried one; None when there is none."""
        if self.kept is not None:
            return self.kept
        try:
            found = self._lookup()
        except Exception as exc:  # the scheduler unreachable: the carried one is all there is
            log.warning("looking up the last checkpoint of %s: %s", self.where, exc)
            found = None
        known = [c for c in (found, self.carried) if c is not None]
        self.kept = max(known, key=lambda c: c.number, default=None)
        return self.kept


class RunCheckpoints:
    """The client's side of one run: checkpoints announced by workers copied from the scheduler
    into the store, the store's sent along with the tasks of the points they belong to, and
    each point's starts counted (a point started twice in one run was requeued: its worker
    was lost and Dask ran its task again elsewhere, without spending a retry)."""

    def __init__(self, run: str) -> None:
        self.run = run
        self._lock = threading.Lock()
        self._noticed: set[tuple[int, ...]] = set()
        self._starts: Counter[tuple[int, ...]] = Counter()

    def heard(self, event: events.Event | None) -> None:
        """Note a worker's event (called from the client's event thread)."""
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
                store.keep_checkpoint(index, saved)
                kept += 1
        return kept

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
            saved = store.checkpoint(task.index)
            yield task if saved is None else replace(task, checkpoint=saved)
