"""What a run's allocation cost: core-hours its workers held against core-hours its points
used, and the share lost to attempts that did not end done.

A batch cluster charges the cores and hours its jobs hold, not those their points use. Per
run, :class:`Allocation` adds up:

- **held**: each worker's cores (its ``threads`` resource) from its batch job's start
  (``SWEEP_JOB_START``, which the job script exports: :mod:`sweep.worker.batchjob`; a worker
  without one, a local one: its process's start) until it was last seen at the scheduler, or
  the run's end for those still there;
- **used**: each point's cores from its start (the first attempt's, so retries inside one
  worker count) to its end, every start of it: a point started again on another worker (its
  worker lost) counts the lost span up to the new start, and a point still running when the
  run ends counts up to the end;
- **lost**: the part of ``used`` that did not end done: the spans of requeued, failed,
  killed or cancelled points and of the attempts a done point retried before its last.

:class:`AllocationListener` feeds it from the run (workers polled at the refresh cadence,
points from their events and records), tells the /sweep page (:class:`events.AllocationCost`)
and, at the run's end, appends the run's figures to the store's ``sweep_allocation`` attribute
(a JSON list, one entry per run) that the run summary and ``sweep status`` read.

Examples
--------
>>> a = Allocation()
>>> a.worker("w1", cores=2, since=0.0, now=100.0)
>>> a.started((0,), cores=1, since=10.0)
>>> a.ended((0,), cores=1, started=10.0, finished=70.0, done=True, attempts=1)
>>> figures = a.close(now=100.0)
>>> figures["held_core_s"], figures["used_core_s"], figures["lost_core_s"]
(200.0, 60.0, 0.0)
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sweep import cadence
from sweep.capacity.resources import CORES
from sweep.client.listeners.base import Listener, Run
from sweep.store import attributes
from sweep.wire import events

if TYPE_CHECKING:
    from sweep.wire.protocol import PointRecord

log = logging.getLogger(__name__)
ATTR = attributes.ALLOCATION


def held_since() -> float:
    """When this worker's allocation began (run on each worker once): its batch job's start,
    or its own process's start where the job script said none."""
    import psutil

    from sweep.worker.batchjob import job_start

    return job_start() or psutil.Process().create_time()


@dataclass
class Allocation:
    """The running sums of one run (see the module docstring); times are seconds since the epoch.

    Starts are heard on the client's event thread while the run's thread ends points and sums
    (:mod:`sweep.client.listeners.base`): every method holds the sums' lock."""

    workers: dict[str, list[float]] = field(default_factory=dict)  # name: [cores, since, last seen]
    running: dict[tuple[int, ...], tuple[float, int]] = field(default_factory=dict)  # (since, cores)
    used: float = 0.0
    lost: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def worker(self, name: str, cores: float, since: float, now: float) -> None:
        """Worker ``name`` of ``cores`` held since ``since`` is there at ``now``."""
        with self.lock:
            seen = self.workers.setdefault(name, [cores, min(since, now), now])
            seen[2] = now

    def started(self, index: tuple[int, ...], cores: int, since: float) -> None:
        """Point ``index`` started on ``cores`` cores at ``since``; a start of a point already
        running is its requeue: the earlier start's span up to now is lost."""
        with self.lock:
            before = self.running.get(index)
            if before is not None:
                self._span(before[1], before[0], since, lost=True)
            self.running[index] = (since, cores)

    def ended(
        self, index: tuple[int, ...], cores: int, started: float, finished: float, done: bool,
        attempts: int = 1,
    ) -> None:  # fmt: skip
        """Point ``index`` ended at ``finished`` after ``attempts``, its last started at
        ``started``: its span counts from its first start (its announced one, where there was
        one); a done point's attempts before its last are lost."""
        with self.lock:
            since, n = self.running.pop(index, (started, cores))
            if not done:
                self._span(n, since, finished, lost=True)
                return
            self._span(n, since, started, lost=attempts > 1)
            self._span(n, started, finished, lost=False)

    def _span(self, cores: int, start: float, end: float, lost: bool) -> None:
        if math.isfinite(start) and math.isfinite(end) and end > start:
            self.used += cores * (end - start)
            self.lost += cores * (end - start) if lost else 0.0

    def figures(self, now: float) -> dict[str, Any]:
        """The sums as of ``now`` (points still running counted up to it, lost only at the end)."""
        with self.lock:
            running = sum(n * max(0.0, now - since) for since, n in self.running.values())
            held = sum(c * max(0.0, seen - since) for c, since, seen in self.workers.values())
            used, lost, workers = self.used + running, self.lost, len(self.workers)
        return {
            "held_core_s": round(held, 3),
            "used_core_s": round(used, 3),
            "lost_core_s": round(lost, 3),
            "used_share": round(used / held, 3) if held > 0 else 0.0,
            "workers": workers,
        }

    def close(self, now: float) -> dict[str, Any]:
        """The run's figures at its end ``now``: workers still there held until now, points
        still running lost up to now."""
        with self.lock:
            ended, self.running = self.running, {}
            for since, n in ended.values():
                self._span(n, since, now, lost=True)
        return self.figures(now)


def shown(figures: dict[str, Any]) -> str:
    """One line: held, used (its share) and lost core-hours."""
    hours = {k: figures.get(f"{k}_core_s", 0.0) / 3600 for k in ("held", "used", "lost")}
    workers = int(figures.get("workers", 0))
    return (
        f"{hours['held']:.3g} core-h held by {workers} worker{'' if workers == 1 else 's'}, "
        f"{hours['used']:.3g} used by points ({100 * figures.get('used_share', 0.0):.0f}%), "
        f"{hours['lost']:.3g} lost to attempts that did not end done"
    )


def runs_of(attrs: Any) -> list[dict[str, Any]]:
    """The store's per-run allocation figures, oldest first (none in a store made before)."""
    try:
        runs = json.loads(attrs.get(ATTR, "[]"))
    except (TypeError, ValueError):
        return []
    return runs if isinstance(runs, list) else []


def total(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several runs added up."""
    out: dict[str, Any] = {
        k: round(sum(float(r.get(k, 0.0)) for r in runs), 3)
        for k in ("held_core_s", "used_core_s", "lost_core_s")
    }
    out["workers"] = sum(int(r.get("workers", 0)) for r in runs)
    out["used_share"] = round(out["used_core_s"] / out["held_core_s"], 3) if out["held_core_s"] else 0.0
    return out


class AllocationListener(Listener):
    """Feeds :class:`Allocation` from a run, tells the page, keeps the figures in the store."""

    def __init__(self) -> None:
        self.sums = Allocation()
        self.every = cadence.refresh_s()
        self.polled = 0.0
        self.since: dict[str, float] = {}  # worker address: when its allocation began
        self.result: dict[str, Any] = {}

    def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.PointStarted):
            self.sums.started(event.index, len(event.cores) or 1, event.since or time.time())

    def on_tick(self, run: Run) -> None:
        if time.monotonic() - self.polled < self.every:
            return
        self.polled = time.monotonic()
        self._poll(run)
        run.say(events.AllocationCost(**self.sums.figures(time.time())))

    def _poll(self, run: Run) -> None:
        """Each worker there now seen; a new one asked once when its allocation began."""
        now = time.time()
        workers = run.client.scheduler_info(n_workers=-1).get("workers", {})
        new = [a for a in workers if a not in self.since]
        if new:
            try:
                self.since.update(run.client.run(held_since, workers=new, on_error="return"))
            except Exception as exc:  # noqa: BLE001 - a worker gone meanwhile: asked next time
                log.debug("allocation: could not ask %s when they started: %s", new, exc)
        for address, info in workers.items():
            since = self.since.get(address)
            cores = (info.get("resources") or {}).get(CORES)
            if isinstance(since, float) and cores:
                self.sums.worker(str(info.get("name", address)), float(cores), since, now)

    def on_records(self, run: Run, records: list[PointRecord]) -> list[PointRecord]:
        for r in records:
            self.sums.ended(r.index, len(r.cores) or 1, r.started, r.finished, r.status == "done", r.attempts)
        return records

    def on_end(self, run: Run) -> None:
        try:
            self._poll(run)
        except Exception as exc:  # noqa: BLE001 - a cluster gone with the run: its last poll stands
            log.debug("allocation: no last look at the workers: %s", exc)
        self.result = {"run": run.token, **self.sums.close(time.time())}
        if not run.store.intact():  # moved or deleted under the run: nothing is written there
            return
        run.store.set_attrs(**{ATTR: json.dumps([*runs_of({ATTR: run.store.attr(ATTR)}), self.result])})
        log.info("allocation of run %s: %s", run.token, shown(self.result))
