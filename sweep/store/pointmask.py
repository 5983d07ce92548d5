"""A set of a store's point indices kept as one byte a point: :class:`PointMask`.

What :meth:`sweep.store.Store.todo` returns. A Python set of index tuples costs about 120 bytes
a point (the tuple, its ints, the set's slot): 120 MB for a sweep of 1,000,000 points, held
for the whole run. A boolean array over the store's layout holds the same in 1 MB.
"""

from __future__ import annotations

from collections.abc import Iterator, Set

import numpy as np


class PointMask(Set[tuple[int, ...]]):
    """The indices where ``mask`` (an array of the store's point layout) is true: a read-only
    set of index tuples (``in``, ``len``, iteration in the layout's order, comparisons)."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = np.asarray(mask, dtype=bool)
        self._count = int(self.mask.sum())

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, tuple) or len(index) != self.mask.ndim:
            return False
        try:
            return bool(self.mask[index])
        except (IndexError, TypeError):
            return False

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        flat = np.flatnonzero(self.mask)
        for start in range(0, len(flat), 65536):  # unravelled a block at a time
            block = np.unravel_index(flat[start : start + 65536], self.mask.shape)
            yield from (tuple(int(i) for i in ix) for ix in zip(*block))

    def __repr__(self) -> str:
        return f"PointMask({self._count} of {self.mask.size} points)"
