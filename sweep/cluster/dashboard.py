"""A ``/sweep`` page on the Dask dashboard: every point of the running sweeps, live.

:class:`SweepPage` is a ``distributed.SchedulerPlugin``. Registered by the client (see
:meth:`sweep.Sweep.run`), it adds two routes to the scheduler's own HTTP server, next to
``/status``: ``/sweep`` (an HTML page that polls) and ``/sweep/data.json``, and names ``sweep``
in the navigation bar of Dask's own pages. It learns about
sweeps through Dask's structured events (:mod:`sweep.wire.events`): the client announces the
points, workers announce each start, each :func:`sweep.report` and each end. The page itself
is ``sweep/templates/sweep.html``. Above the sweeps it shows the memory the running points
asked of the workers against what the workers offer (:mod:`sweep.worker.memory`).
Each point carries its live samples while it runs (threads, budget, RSS, CPU seconds:
:class:`~sweep.wire.events.PointSampled`) and a curve per reported metric, kept for the
CURVED_POINTS points that reported last. The page draws those curves for every sweep (a
metric picker, a log scale), a heatmap of each point's latest reported objective for a
two-axis grid, and for a search the best objective so far against the trials. A resumed
sweep's announcement carries the stored reports of the CURVED_POINTS points that ended last,
so the page draws the earlier runs' curves too. Of a sweep of more than
:data:`sweep.wire.events.LISTED_POINTS` points, the page keeps no record of a point that ended
done or pruned (unless it keeps curves): it counts them by status, and their ends per second
over the last RATE_WINDOW_S for the rate, so that its memory stays bounded whatever the sweep's size.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from functools import cache
from importlib.resources import files
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.web import RequestHandler

from sweep import _compat
from sweep.capacity import resources
from sweep.wire import events

NAME = "sweep-dashboard"
KEEP_SWEEPS = 20
CURVE_POINTS = 400  # a point's curve of a metric keeps its last this many reports
CURVED_POINTS = 300  # points of a sweep that keep curves (the latest to report)
PAGE = "templates/sweep.html"  # package data
RATE_WINDOW_S = 300  # the rate and ETA are over the ends of this many last seconds
COUNTED = ("done", "pruned")  # a big sweep's ended points of these statuses are counted, not kept


class SweepPage(SchedulerPlugin):
    """Collects sweep events on the scheduler and serves them at ``/sweep``."""

    name = NAME
    idempotent = True

    def __init__(self) -> None:
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        app = _compat.http_application(scheduler)
        if app is not None:
            _compat.add_dashboard_page(scheduler, "sweep")
            app.add_handlers(
                r".*",
                [(r"/sweep/data.json", _Data, {"page": self}), (r"/sweep/?", _Page, {"page": self})],
            )

    def log_event(self, topic: str, msg: Any) -> None:
        name = events.sweep_of(topic)
        event = events.from_msg(msg)
        if name is None or event is None:
            return
        if isinstance(event, events.SweepAnnounced):
            self._announce(name, event)
            return
        sweep = self.sweeps.get(name)
        if sweep is None:
            return
        if isinstance(event, events.AllocationCost):
            sweep["allocation"] = asdict(event)
            return
        for one in event.ends if isinstance(event, events.PointsEnded) else (event,):
            self._record(sweep, one)

    @staticmethod
    def _record(sweep: dict[str, Any], event: events.Event) -> None:
        assert not isinstance(event, events.SweepAnnounced | events.PointsEnded | events.AllocationCost)
        key = _key(event.index)
        if isinstance(event, events.PointEnded) and _counted(sweep, key, event):
            return
        point = sweep["points"].setdefault(key, {"index": list(event.index), "params": {}})
        if isinstance(event, events.PointStarted):
            if point.get("status") == "running":  # started again: its worker was lost
                point["requeued"] = point.get("requeued", 0) + 1
            point.update(status="running", host=event.host, cores=list(event.cores))
        elif isinstance(event, events.PointReported):
            point["latest"] = event.latest
            point["reports"] = point.get("reports", 0) + 1
            _extend_curves(sweep, point, event)
        elif isinstance(event, events.PointSampled):
            if point.get("status") == "running":
                point["live"] = {k: v for k, v in asdict(event).items() if k != "index"}
        elif isinstance(event, events.CheckpointSaved):
            point["checkpoint"] = event.number
        elif isinstance(event, events.TrialTold):
            point.update(params=event.params, trial=event.state, values=list(event.values))
            ended = {"complete": "done", "pruned": "pruned", "fail": "failed"}.get(event.state)
            if ended and point.get("status") in (None, "queued", "running", "done"):
                point["status"] = ended
        else:
            point.update({k: v for k, v in asdict(event).items() if k != "index"})
            point.pop("live", None)
            point["ended_at"] = time.time()

    def _announce(self, name: str, event: events.SweepAnnounced) -> None:
        fields = asdict(event)
        self.sweeps[name] = {**fields, "name": name, "points": {}, "since": time.time()}
        for old in sorted(self.sweeps, key=lambda n: self.sweeps[n]["since"])[:-KEEP_SWEEPS]:
            del self.sweeps[old]
        sweep = self.sweeps[name]
        for p in event.points:
            stored = p.get("reports", [])
            point = {k: v for k, v in p.items() if k != "reports"} | {"status": p.get("status", "queued")}
            sweep["points"][_key(p["index"])] = point
            index = tuple(p["index"])
            for row in stored:  # an earlier run's reports: drawn as the curves of ended points
                values = {k: v for k, v in row.items() if k not in ("step", "time", "attempt")}
                self._record(
                    sweep, events.PointReported(index, row.get("step"), values, row.get("attempt", 1))
                )

    def snapshot(self) -> dict[str, Any]:
        out = []
        for sweep in sorted(self.sweeps.values(), key=lambda s: -s["since"]):
            ends = sweep.get("ends", {})
            recent = sum(n for second, n in ends.items() if second >= time.time() - RATE_WINDOW_S)
            out.append(
                {k: v for k, v in sweep.items() if k not in ("points", "curved", "ends")}
                | {"points": list(sweep["points"].values()), "recent_ends": recent}
            )
        return {"sweeps": out, "workers": self.workers(), "time": time.time()}

    def workers(self) -> list[dict[str, Any]]:
        """Each worker's offered threads and memory, and the memory its running points asked
        (:mod:`sweep.worker.memory`)."""
        if self.scheduler is None:
            return []
        return [
            {
                "address": address,
                "threads": ws.resources.get(resources.CORES, 0),
                "memory": ws.resources.get(resources.MEMORY, 0),
                "memory_asked": ws.used_resources.get(resources.MEMORY, 0),
            }
            for address, ws in self.scheduler.workers.items()
        ]


def _counted(sweep: dict[str, Any], key: str, event: events.PointEnded) -> bool:
    """Whether the end of point ``key`` was counted instead of kept: a big sweep's (over
    LISTED_POINTS) point that ended done or pruned and has no curves is counted by status and
    in its second's bucket of ``ends`` (the last RATE_WINDOW_S seconds kept), and its record
    dropped, before any of it is built (a sweep of 1,000,000 points ends thousands a second)."""
    if sweep["total"] <= events.LISTED_POINTS or event.status not in COUNTED:
        return False
    if "curves" in sweep["points"].get(key, ()):
        return False
    sweep["points"].pop(key, None)
    counted = sweep.setdefault("counted", {})
    counted[event.status] = counted.get(event.status, 0) + 1
    ends = sweep.setdefault("ends", {})
    second = int(time.time())
    ends[second] = ends.get(second, 0) + 1
    if len(ends) > RATE_WINDOW_S:
        for old in [t for t in ends if t < second - RATE_WINDOW_S]:
            del ends[old]
    return True


def _extend_curves(sweep: dict[str, Any], point: dict[str, Any], event: events.PointReported) -> None:
    """Add a report to the point's curves (one per metric, its last CURVE_POINTS reports). At
    most CURVED_POINTS points of a sweep keep curves: past that, the point that reported
    least lately loses its curves (a big sweep's page draws its latest points, not all)."""
    curves = point.setdefault("curves", {})
    for metric, value in event.values.items():
        curve = curves.setdefault(metric, [])
        curve.append([event.step if event.step is not None else len(curve), value])
        del curve[:-CURVE_POINTS]
    order: dict[str, None] = sweep.setdefault("curved", {})
    key = _key(event.index)
    order.pop(key, None)
    order[key] = None  # the most recent last
    while len(order) > CURVED_POINTS:
        oldest = next(iter(order))
        del order[oldest]
        sweep["points"].get(oldest, {}).pop("curves", None)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float as the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"``: JSON has no such numbers (a bare ``NaN`` makes the page's parse fail), and
    the page draws a string as a gap in a curve and shows it as text in a table."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


@cache
def _page() -> bytes:
    return files("sweep").joinpath(PAGE).read_bytes()


def _key(index: Any) -> str:
    return ",".join(map(str, index))


class _Data(RequestHandler):
    def initialize(self, page: SweepPage) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.write(json.dumps(finite(self.page.snapshot()), default=str, allow_nan=False))


class _Page(RequestHandler):
    def initialize(self, page: SweepPage) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "text/html")
        self.write(_page())
