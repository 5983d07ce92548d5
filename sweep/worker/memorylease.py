"""More memory for a point's retry, taken from its worker's offer like a task's first ask.

A point asks its worker's Dask resource ``memory`` (:mod:`sweep.worker.memory`) for its first
attempt; a retry after an ``oom`` with ``resources.retry_memory`` runs inside the same task,
which holds only that first ask. Before the retry runs with more, it takes the difference from
the worker's available ``memory`` (the ledger Dask itself starts tasks from), so the worker
starts no other task into it, and gives it back when the attempt ends::

    task holds ask ──► oom ──► queue for more (first come, first served)
                               head of the queue: give back its own ask, then take ``more``
                               from what is available as it frees (other tasks ending)
                               ──► retry runs with ``more`` ──► give back ``more``, hold ``ask``

Only the head of the queue takes memory, and every waiting retry has given its own ask back,
so two retries never hold halves of what each needs (no deadlock), and the memory the
worker's running attempts may use never passes its offer. ``more`` is capped at the offer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sweep import _compat
from sweep.capacity.resources import MEMORY

log = logging.getLogger(__name__)
POLL_S = 0.2  # how often a waiting retry looks at what the worker has freed


class RetryMemory:
    """One worker's queue of retries waiting for more memory (see the module docstring)."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self._lock = threading.Lock()
        self._queue: deque[object] = deque()

    def offer(self) -> int | None:
        """The worker's whole ``memory`` resource, or None when it offers none."""
        total, _ = _compat.worker_resources(self.worker)
        return int(total[MEMORY]) if MEMORY in total else None

    def _change(self, amount: float) -> float:
        """Add ``amount`` to the worker's available memory (negative: take); what it has now."""
        seen: list[float] = []

        def change() -> None:
            _, available = _compat.worker_resources(self.worker)
            available[MEMORY] += amount
            seen.append(available[MEMORY])

        _compat.on_worker_loop(self.worker, change)
        return seen[0]

    def _take_up_to(self, wanted: int) -> int:
        """Take what is available of ``wanted`` now; how much was taken."""
        taken: list[int] = []

        def take() -> None:
            _, available = _compat.worker_resources(self.worker)
            amount = max(0, min(wanted, int(available[MEMORY])))
            available[MEMORY] -= amount
            taken.append(amount)

        _compat.on_worker_loop(self.worker, take)
        return taken[0]

    @contextmanager
    def held(self, ask: int, more: int) -> Iterator[None]:
        """Within: this task holds ``more`` of the worker's memory instead of its ``ask``."""
        me = object()
        with self._lock:
            self._queue.append(me)
        self._change(ask)  # a waiting retry holds nothing, so the head can always be served
        got = 0
        try:
            while got < more:
                with self._lock:
                    head = self._queue[0] is me
                if head:
                    got += self._take_up_to(more - got)
                if got < more:
                    time.sleep(POLL_S)
            with self._lock:
                self._queue.remove(me)
            yield
        finally:
            with self._lock:
                if me in self._queue:
                    self._queue.remove(me)
            self._change(got - ask)  # back to holding its first ask, which Dask returns at the end


_BY_WORKER: dict[int, RetryMemory] = {}
_BY_WORKER_LOCK = threading.Lock()


def of_worker(worker: Any) -> RetryMemory:
    """The worker's one :class:`RetryMemory`."""
    with _BY_WORKER_LOCK:
        found = _BY_WORKER.get(id(worker))
        if found is None or found.worker is not worker:
            found = _BY_WORKER[id(worker)] = RetryMemory(worker)
        return found
