"""When a warm child is replaced: :class:`Recycling`, made once from the recipe's ``child``
section (:meth:`Recycling.of`) and carried by every :class:`~sweep.wire.task.PointTask` to the
worker's :meth:`~sweep.worker.pool.CorePool.lease`.

A child is replaced after ``max_jobs`` jobs (a job's leaks stay bounded), above ``max_rss``
bytes after a job, or when it died. Left to its default, ``max_jobs`` counts only once the child
has also lived :data:`MIN_LIFE_S`: points of a millisecond would otherwise start a child every
few tenths of a second on each core, a process start (interpreter, the child's imports, about
60 ms of CPU) for every 500 points. 100,000 no-op points on 2 cores took 33.9 s with 2 children
against 35.6 s with 201 (benchmarks/README.md, ``recycling``). Points of 0.12 s and more
(500 of them fill a minute) reach 500 jobs after the minute anyway: for them nothing changes. A ``max_jobs``
the recipe sets is kept exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_JOBS = 500
"""Jobs a warm child runs before it is replaced, by default."""

MIN_LIFE_S = 60.0
"""Seconds a warm child lives at least before the default ``max_jobs`` replaces it."""


@dataclass(frozen=True)
class Recycling:
    """When a warm child is replaced: after ``max_jobs`` jobs once it has lived ``min_life_s``
    seconds, or above ``max_rss`` bytes (None: no limit) after a job. ``Recycling()`` is the
    default, :data:`DEFAULT`."""

    max_jobs: int = MAX_JOBS
    max_rss: int | None = None
    min_life_s: float = MIN_LIFE_S

    @classmethod
    def of(cls, max_jobs: int | None, max_rss: int | None) -> Recycling:
        """The recipe's ``child.max_jobs`` (None: the default, :data:`MAX_JOBS` after
        :data:`MIN_LIFE_S`) and ``child.max_rss``."""
        if max_jobs is None:
            return cls(max_rss=max_rss)
        return cls(max_jobs, max_rss, min_life_s=0.0)

    def due(self, jobs_run: int, age_s: float) -> bool:
        """Whether a child that has run ``jobs_run`` jobs in ``age_s`` seconds is replaced
        (its RSS aside)."""
        return jobs_run >= self.max_jobs and age_s >= self.min_life_s

    def jobs_left(self, jobs_run: int, age_s: float) -> int:
        """How many jobs a child may run in one go before it is next checked (at least 1): up to
        ``max_jobs``, and another ``max_jobs`` while it is younger than ``min_life_s``."""
        if jobs_run < self.max_jobs:
            return self.max_jobs - jobs_run
        return self.max_jobs if age_s < self.min_life_s else 1


DEFAULT = Recycling()
"""The recycling of a recipe that sets neither ``child.max_jobs`` nor ``child.max_rss``."""
