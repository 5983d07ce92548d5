"""What the client sends a worker for each point: a :class:`PointTask`, defined once.

Small and picklable, and importable without the recipe model, pydantic or the search: a
Dask worker unpickles one per point (:mod:`sweep.plan` builds them from a recipe,
:mod:`sweep.pool` runs them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.capped import ChildConfig, Limits
from sweep.job import JobRef
from sweep.protocol import Saved


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point."""

    sweep: str
    index: tuple[int, ...]
    job: JobRef
    kwargs: Mapping[str, Any]
    threads: int = 1
    gpus: float = 0.0  # devices, or a share of one (sweep.gpus)
    limits: Limits = field(default_factory=Limits)
    retries: int = 0
    retry_memory: float | None = None  # an attempt after an oom gets this times more memory
    expected: float | None = None  # seconds a point takes (resources.expected), for walltimes
    thread_budget: int = 15
    config: ChildConfig = field(default_factory=ChildConfig)
    max_jobs: int = 500
    max_rss: int | None = None
    run: str = ""  # which run of the sweep (a token of the client's): what a cancel stops
    checkpoint: Saved | None = None  # the point's last checkpoint in the store, for restore()
