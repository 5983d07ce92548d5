"""PointMask: the store's points left to do as a boolean array that reads as a set."""

import numpy as np

from sweep.store.pointmask import PointMask


def test_a_mask_reads_as_the_set_of_its_true_indices():
    mask = np.zeros((3, 4), dtype=bool)
    mask[0, 1] = mask[2, 0] = mask[2, 3] = True
    todo = PointMask(mask)
    assert len(todo) == 3 and bool(todo)
    assert list(todo) == [(0, 1), (2, 0), (2, 3)]  # the layout's order
    assert todo == {(0, 1), (2, 0), (2, 3)}
    assert (2, 3) in todo and (1, 1) not in todo
    assert (5, 0) not in todo and (0,) not in todo and "x" not in todo  # outside: not in, no error
    assert all(isinstance(i, int) for ix in todo for i in ix)
    assert not PointMask(np.zeros(5, dtype=bool))


def test_iteration_crosses_its_blocks():
    mask = np.zeros(200_000, dtype=bool)
    mask[::3] = True
    assert sum(1 for _ in PointMask(mask)) == len(range(0, 200_000, 3))
