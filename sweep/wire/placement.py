"""Where one point sits on a node: :class:`Placement`, made once and consumed as it is.

The recipe says ``resources.threads: k`` (cores per rank), ``ranks``, ``memory``, ``gpus`` and
the thread budget's overrides; :func:`sweep.client.plan.placement` turns them into one
Placement, carried by every :class:`~sweep.wire.task.PointTask` and taken whole by the
worker's :meth:`~sweep.worker.pool.CorePool.lease`. Nothing downstream recomputes any of it.

Words: **cores** are CPUs leased to a point and pinned (Dask's ``threads`` resource counts
them: a worker advertises its cores under that name); **threads** are OS threads, counted in
a point's process tree (``peak_threads``) and bounded by ``thread_budget``.

A GPU share is a whole number of a device's ``GPU_SLOTS`` lock files (:mod:`sweep.worker.gpus`):
:func:`gpu_slots` checks it here, where the recipe is validated, and the worker holds that many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GPUS, TPUS = "gpus", "tpus"  # the accelerators' recipe keys, Dask resources and cluster keys
GPU_SLOTS = 12  # lock files per device: shares of 1/2, 1/3, 1/4, 1/6 and 1/12 are whole slots
SHARE_TOLERANCE = 1e-4  # how near a whole number of slots a written share must come, relatively
# threads a capped JAX child holds beyond its cores: JAX_BASE_THREADS + JAX_THREADS_PER_CORE * k
# (docs/threads.md: 15 on one core and 20 on two measured; the budget keeps 2 to spare)
JAX_BASE_THREADS, JAX_THREADS_PER_CORE = 12, 5


def thread_budget(k: int) -> int:
    """Threads a capped JAX child on ``k`` cores may hold (docs/threads.md)."""
    return JAX_BASE_THREADS + JAX_THREADS_PER_CORE * k


@dataclass(frozen=True)
class Placement:
    """One point's share of a node.

    ``cores``: CPUs leased and pinned, all ranks together (``threads`` x ``ranks`` in the
    recipe); ``ranks``: MPI ranks, each on ``cores // ranks`` of them; ``thread_budget``: OS
    threads the point's processes may hold; ``memory``: bytes the point asks of its worker
    (``resources.memory``; None: none asked, or learned by the client); ``gpus``: whole devices,
    or a share of one; ``tpus``: whole TPU chips (a point asks for one kind of accelerator);
    ``amounts``: (name, how much) of each plain amount it asks (``resources.<name>`` of
    :data:`sweep.capacity.resources.AMOUNTS`), which Dask packs by and nothing else reads.
    """

    cores: int = 1
    thread_budget: int = thread_budget(1)
    memory: int | None = None
    gpus: float = 0.0
    ranks: int = 1
    tpus: int = 0
    amounts: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.cores < 1 or self.ranks < 1 or self.cores % self.ranks:
            raise ValueError(f"{self}: cores must be a positive multiple of ranks")
        if self.gpus and self.tpus:
            raise ValueError(f"{self}: a point asks for GPUs or TPUs, not both")

    @property
    def accelerator(self) -> tuple[str, float] | None:
        """(its resource name, how many) of the accelerator the point asks for, if any."""
        if self.gpus:
            return GPUS, self.gpus
        if self.tpus:
            return TPUS, float(self.tpus)
        return None


def gpu_slots(gpus: float) -> tuple[int, int]:
    """(devices, slots on each) a point asking ``gpus`` holds; ValueError naming the fix for a
    share that is not a whole number of slots."""
    if gpus >= 1:
        if gpus != int(gpus):
            raise ValueError(f"resources.gpus={gpus:g}: more than one device must be a whole number")
        return int(gpus), GPU_SLOTS
    each = gpus * GPU_SLOTS
    # relative: a third written as 0.333333 is 3.999996 slots; 0.33 (3.96) is no whole number
    if gpus <= 0 or round(each) == 0 or not math.isclose(each, round(each), rel_tol=SHARE_TOLERANCE):
        raise ValueError(
            f"resources.gpus={gpus:g}: a share of a device must be 1/2, 1/3, 1/4, 1/6 or 1/12 of it "
            '(or a multiple of 1/12); write a third as "1/3" or 0.333333'
        )
    return 1, round(each)
