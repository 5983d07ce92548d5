"""The whole thread budget of a point: the threads it may hold before it is over budget.

One capped child on k cores holds at most ``12 + 5k`` threads
(:func:`sweep.wire.placement.thread_budget`, measured: docs/threads.md); the job's own extra
threads (``resources.extra_threads``) and an accelerator's runtime
(:attr:`sweep.capacity.accelerators.Accelerator.runtime_threads`) add theirs, and
``resources.thread_budget`` replaces the sum. An MPI point of n ranks holds n such children
plus Open MPI's threads in each rank and the launcher's.

Examples
--------
>>> point_budget(2, 17)
42
>>> point_threads(2, extra=3)
25
>>> point_threads(1, ranks=2)
42
"""

from __future__ import annotations

from sweep.capacity.accelerators import GPU, TPU
from sweep.wire.placement import thread_budget

RANK_THREADS = 2  # Open MPI's own threads in each rank (measured: docs/threads.md)
LAUNCHER_THREADS = 4  # mpirun's threads


def point_budget(ranks: int, per_rank: int) -> int:
    """Threads an MPI point of ``ranks`` ranks may hold, ``per_rank`` each by the JAX budget."""
    return ranks * (per_rank + RANK_THREADS) + LAUNCHER_THREADS


def point_threads(
    k: int, ranks: int = 1, extra: int = 0, gpus: float = 0, tpus: int = 0, given: int = 0
) -> int:
    """Threads a point on ``k`` cores per rank may hold: per rank ``12 + 5k`` plus ``extra``
    plus the runtime threads of the devices it asks for (``given``, when not 0, instead), and
    for ``ranks`` > 1 those of :func:`point_budget`."""
    runtime = (GPU.runtime_threads if gpus else 0) + (TPU.runtime_threads if tpus else 0)
    per_rank = given or thread_budget(k) + extra + runtime
    return per_rank if ranks == 1 else point_budget(ranks, per_rank)
