"""What a client asks of every worker's core pool beside its tasks, as typed commands.

``client.run(on_pool, command)`` calls :func:`on_pool` on each worker, which hands the
command to the worker's :class:`~sweep.worker.pool.CorePool`: what Dask's task API can't do,
reach a running task's child. Each command is a small frozen object pickled to the workers;
a worker without a pool answers None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweep import _compat
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import Placement
from sweep.wire.protocol import LogChunk, StoppedAttempt
from sweep.wire.recycling import DEFAULT, Recycling

if TYPE_CHECKING:
    from sweep.worker.pool import CorePool

PLUGIN_NAME = "sweep-core-pool"


@dataclass(frozen=True)
class StopRun:
    """Kill the children running points of run ``run`` and start none of its points; answers
    what each killed attempt had printed (its last ``log_bytes``)."""

    run: str
    log_bytes: int = 1 << 20

    def apply(self, pool: CorePool) -> list[StoppedAttempt]:
        return pool.running.stop(self.run, self.log_bytes)


@dataclass(frozen=True)
class PrunePoint:
    """Tell the job running ``point`` of run ``run`` to stop at its next report; answers
    whether it runs on that worker."""

    run: str
    point: tuple[int, ...]

    def apply(self, pool: CorePool) -> bool:
        return pool.running.prune(self.run, self.point)


@dataclass(frozen=True)
class Prewarm:
    """Start and warm the children of ``config`` on the worker's free cores; answers how many."""

    placement: Placement
    config: ChildConfig
    recycling: Recycling = DEFAULT

    def apply(self, pool: CorePool) -> int:
        return pool.prewarm(self.placement, self.config, self.recycling)


@dataclass(frozen=True)
class ReadLog:
    """What attempt ``attempt`` at ``point`` of run ``run`` printed from byte ``offset`` on."""

    run: str
    point: tuple[int, ...]
    attempt: int
    offset: int

    def apply(self, pool: CorePool) -> LogChunk | None:
        return pool.running.log_chunk(self.run, self.point, self.attempt, self.offset)


Command = StopRun | PrunePoint | Prewarm | ReadLog


def on_pool(command: Command, dask_worker: Any = None) -> Any:
    """``client.run(on_pool, command)``: the command applied to this worker's pool; None on a
    worker without one."""
    pool = _compat.worker_plugin(dask_worker, PLUGIN_NAME)
    return None if pool is None else command.apply(pool)
