"""Batched writing of finished points into the store, as the client collects them.

Results are written in batches: :data:`FLUSH_SECONDS` after the oldest waiting point
finished, or at once when :data:`FLUSH_POINTS` are waiting. A write costs about the same for
one point as for thousands (each variable's chunk is rewritten whole), so with short jobs a
batch holds about a second of results and the store keeps up with thousands of points per
second. A killed client loses at most that much finished work, which a rerun redoes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from sweep.store import Store
from sweep.wire.protocol import PointRecord

FLUSH_POINTS = 4096  # = the store's points per chunk
FLUSH_SECONDS = 1.0


class ResultWriter:
    """Collects finished points and writes them to ``store`` in batches.

    ``on_written`` is called with each batch once it is in the store (the progress display
    counts points there). ``store_s`` and ``points`` add up the time spent writing and the
    points written.
    """

    def __init__(self, store: Store, on_written: Callable[[list[PointRecord]], None]) -> None:
        self.store = store
        self.on_written = on_written
        self.pending: list[PointRecord] = []
        self.oldest = 0.0
        self.store_s = 0.0
        self.points = 0

    def add(self, records: Iterable[PointRecord]) -> None:
        new = list(records)
        if new and not self.pending:
            self.oldest = time.monotonic()
        self.pending.extend(new)

    def due(self) -> bool:
        """Whether the waiting points should be written now."""
        if not self.pending:
            return False
        return len(self.pending) >= FLUSH_POINTS or time.monotonic() - self.oldest >= FLUSH_SECONDS

    def drop(self) -> None:
        """Forget the waiting points (their store is gone)."""
        self.pending = []

    def flush(self) -> None:
        """Write every waiting point now."""
        if not self.pending:
            return
        t0 = time.perf_counter()
        written = self.store.write(self.pending)
        self.store_s += time.perf_counter() - t0
        self.points += len(written)
        self.pending = []
        self.on_written(written)
