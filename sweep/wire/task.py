"""What the client sends a worker for each point: a :class:`PointTask`, defined once.

Small and picklable, and importable without the recipe model, pydantic or the search: a
Dask worker unpickles one per point (:mod:`sweep.client.plan` builds them from a recipe,
:mod:`sweep.worker.pool` runs them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.wire.protocol import Saved, Status
from sweep.wire.recycling import DEFAULT, Recycling


@dataclass(frozen=True)
class Limits:
    """What a job may use; past any of them the child's whole process tree is killed."""

    timeout: float | None = None  # wall seconds -> status "timeout"
    memory: int | None = None  # RSS bytes summed over the tree -> status "oom"
    gpu_memory: int | None = None  # device memory of the tree's processes -> status "oom"
    max_threads: int | None = None  # OS threads of the tree -> status "killed"
    stall: float | None = None  # seconds without CPU time used by the tree -> status "stalled"
    log_bytes: int = 1 << 20  # what the job printed is kept, up to its last this many bytes
    checkpoint_bytes: int = 64 << 20  # a sweep.checkpoint() state may pickle to this much

    def exceeded(
        self, elapsed: float, rss: int, threads: int, idle: float = 0.0, gpu: int = 0
    ) -> tuple[Status, str] | None:
        """The status and reason when a limit is passed (``idle``: seconds since the tree last
        used CPU time; ``gpu``: device memory held now), else None."""
        if self.timeout and elapsed >= self.timeout:
            return "timeout", f"timed out after {self.timeout:g} s (resources.timeout)"
        if self.stall and idle >= self.stall:
            why = f"stalled: its processes used no CPU time for {idle:.0f} s (resources.stall)"
            return "stalled", f"{why}; the stacks of its Python threads are in output_tail"
        if self.memory and rss > self.memory:
            used, cap = rss / 2**20, self.memory / 2**20
            return "oom", f"memory limit exceeded: RSS {used:.0f} MiB > {cap:.0f} MiB (resources.memory)"
        if self.gpu_memory and gpu > self.gpu_memory:
            used, cap = gpu / 2**20, self.gpu_memory / 2**20
            return "oom", f"device memory exceeded: {used:.0f} MiB > {cap:.0f} MiB (resources.gpu_memory)"
        if self.max_threads and threads > self.max_threads:
            why = f"{threads} threads > {self.max_threads} (on_thread_overflow: fail)"
            return "killed", f"thread budget exceeded: {why}"
        return None

    def near(self, rss: int, threads: int, share: float = 0.75) -> bool:
        """Whether ``rss`` or ``threads`` hold more than ``share`` of their limit (where one
        is set): a watch samples faster there."""
        return bool(
            (self.memory and rss > share * self.memory)
            or (self.max_threads and threads > share * self.max_threads)
        )


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point."""

    sweep: str
    index: tuple[int, ...]
    job: JobRef
    kwargs: Mapping[str, Any]
    placement: Placement = field(default_factory=Placement)
    limits: Limits = field(default_factory=Limits)
    retries: int = 0
    retry_memory: float | None = None  # an attempt after an oom gets this times more memory
    expected: float | None = None  # seconds a point takes (resources.expected), for walltimes
    config: ChildConfig = field(default_factory=ChildConfig)
    recycling: Recycling = DEFAULT
    run: str = ""  # which run of the sweep (a token of the client's): what a cancel stops
    checkpoint: Saved | None = None  # the point's last checkpoint in the store, for restore()
