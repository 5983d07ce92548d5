"""The thread budget of a point beyond one child's: an MPI point's.

One capped child on k cores holds at most ``12 + 5k`` threads
(:func:`sweep.wire.placement.thread_budget`, measured: docs/threads.md); an accelerator's
runtime adds its own (:attr:`sweep.capacity.accelerators.Accelerator.runtime_threads`). An MPI
point of n ranks holds n such children plus Open MPI's threads in each rank and the launcher's.

Examples
--------
>>> point_budget(2, 17)
42
"""

from __future__ import annotations

RANK_THREADS = 2  # Open MPI's own threads in each rank (measured: docs/threads.md)
LAUNCHER_THREADS = 4  # mpirun's threads


def point_budget(ranks: int, per_rank: int) -> int:
    """Threads an MPI point of ``ranks`` ranks may hold, ``per_rank`` each by the JAX budget."""
    return ranks * (per_rank + RANK_THREADS) + LAUNCHER_THREADS
