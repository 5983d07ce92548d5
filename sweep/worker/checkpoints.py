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
  worker tells the client (a :class:`~sweep.wire.events.CheckpointSaved` event), the client
  fetches it from the scheduler and writes it. A later run (a resume after the driver was
  killed, ``sweep retry``) sends it along with the point's task (``PointTask.checkpoint``).

:func:`sweep.restore` in an attempt gets the newest of these: the worker's own, else the
newer of the scheduler's and the task's. A point that ends done or pruned has its
checkpoints deleted; a failed one keeps its last, so that ``sweep retry`` goes on from it.
``--force`` deletes them with the store's data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sweep.wire.protocol import Saved

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
