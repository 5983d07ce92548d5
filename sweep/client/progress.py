"""Progress of a running sweep: counts, a live bar on a terminal, a display of its own in a
notebook (:mod:`sweep.client.notebook`), log lines elsewhere."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from sweep.client import autothreads
from sweep.client.listeners import allocation
from sweep.store import attributes
from sweep.wire import events
from sweep.wire.protocol import NOT_DONE, PointRecord

if TYPE_CHECKING:
    from sweep.client.notebook import NotebookDisplay

FINISHED_KEPT = 65_536  # written points remembered to ignore their late events


class SweepProgress:
    """Counts points by state and shows them.

    On a terminal a rich progress bar with done / failed / running / pending counts; in a
    notebook the ``notebook`` display (never rich, whose live bar redirects the kernel's
    streams); otherwise (CI, batch logs, a detached driver's log) one plain line every
    ``log_every`` seconds and at the end. ``enabled=False`` shows nothing.
    """

    def __init__(
        self,
        total: int,
        already_done: int = 0,
        *,
        enabled: bool = True,
        log_every: float = 10.0,
        notebook: NotebookDisplay | None = None,
    ) -> None:
        self.total = total
        self.counts: Counter[str] = Counter(done=already_done)
        self._done_before = already_done
        # Written by the client's event thread (on_event) and the driver's loop (points_written),
        # read by both and by SweepRun.progress(): every access holds _lock.
        self._lock = threading.Lock()
        self.latest: dict[tuple[int, ...], dict[str, Any]] = {}
        # the last FINISHED_KEPT points written to the store: a start or report of one that
        # arrives after its record is ignored (bounded: a sweep of 1,000,000 points would hold
        # them all, ~120 MB, for a race between an event and its record that is seconds wide)
        self.finished: set[tuple[int, ...]] = set()
        self._finished_order: deque[tuple[int, ...]] = deque()
        self.where: dict[tuple[int, ...], events.PointStarted] = {}  # running now: dropped as they end
        self.console = Console(file=sys.stderr)
        self.notebook = notebook if enabled else None
        self.live = enabled and notebook is None and self.console.is_terminal and not self.console.is_jupyter
        self.enabled = enabled
        self.log_every = log_every
        self._last_log = 0.0
        self._last_line = ""
        self._t0 = time.monotonic()
        self._bar: Progress | None = None
        self._task: Any = None

    @property
    def running(self) -> int:
        with self._lock:
            return len(self.where)

    @property
    def pending(self) -> int:
        return self.total - sum(self.counts.values()) - self.running

    @property
    def not_done(self) -> int:
        """Points that ended without being done (a status of :data:`~sweep.wire.protocol.NOT_DONE`)."""
        return sum(self.counts[s] for s in NOT_DONE)

    def describe(self) -> str:
        bad = self.not_done
        done, pending = self.counts["done"], max(0, self.pending)
        pruned = f"pruned {self.counts['pruned']}  " if self.counts["pruned"] else ""
        return f"done {done}  {pruned}failed {bad}  running {self.running}  pending {pending}"

    def __enter__(self) -> SweepProgress:
        if self.live:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.describe(), total=self.total, completed=self.counts["done"])
        return self

    def __exit__(self, *exc: Any) -> None:
        self.refresh(force=True)
        if self._bar is not None:
            self._bar.stop()

    def on_event(self, event: events.Event | None) -> None:
        """A worker's event for this sweep (a point started, or reported values)."""
        with self._lock:
            if isinstance(event, events.PointStarted) and event.index not in self.finished:
                self.where[event.index] = event
            elif isinstance(event, events.PointEnded):
                self.where.pop(event.index, None)
                self.latest.pop(event.index, None)
            elif isinstance(event, events.PointReported) and event.index not in self.finished:
                self.latest[event.index] = event.latest

    def running_points(self) -> list[dict[str, Any]]:
        """The points started and not yet ended: index, host, cores and start time."""
        with self._lock:
            running = list(self.where.values())
        return [
            {"index": list(e.index), "host": e.host, "cores": list(e.cores), "since": e.since}
            for e in running
        ]

    def snapshot(self) -> dict[str, Any]:
        """Counts by state and the latest reported values of the points that reported."""
        bad = self.not_done
        return {
            "total": self.total,
            "done": self.counts["done"],
            "pruned": self.counts["pruned"],
            "failed": bad,
            "running": self.running,
            "pending": max(0, self.pending),
            "latest": self._latest(),
        }

    def _latest(self) -> dict[tuple[int, ...], dict[str, Any]]:
        with self._lock:
            return dict(self.latest)

    def points_written(self, records: list[PointRecord]) -> None:
        """Count points once they are in the store, then refresh the display."""
        with self._lock:
            for r in records:
                self.finished.add(r.index)
                self._finished_order.append(r.index)
                if len(self._finished_order) > FINISHED_KEPT:
                    self.finished.discard(self._finished_order.popleft())
                self.where.pop(r.index, None)
                self.latest.pop(r.index, None)
                self.counts[r.status] += 1
        self.refresh()

    def refresh(self, force: bool = False) -> None:
        if not self.enabled:
            return
        finished = sum(self.counts.values())
        if self.notebook is not None:
            self.notebook.update(finished, self.total, self.describe(), force=force)
        elif self._bar is not None:
            self._bar.update(self._task, completed=finished, description=self.describe())
        elif force or time.monotonic() - self._last_log >= self.log_every:
            self._last_log = time.monotonic()
            rate = (finished - self._done_before) / max(1e-9, time.monotonic() - self._t0)
            left = self.total - finished
            eta = f", ETA {left / rate:.0f} s" if rate > 0 and left else ""
            counts = f"[sweep] {finished}/{self.total}  {self.describe()}"
            if counts != self._last_line:  # the same counts again with a new rate say nothing new
                print(f"{counts}  ({rate:.2f} points/s{eta})", file=sys.stderr, flush=True)
                self._last_line = counts


def notebook_display(title: str, total: int) -> NotebookDisplay | None:
    """A progress block displayed now in the running notebook cell; None outside a notebook."""
    from sweep.client.notebook import NotebookDisplay, in_notebook

    return NotebookDisplay(f"sweep {title}", total) if in_notebook() else None


def show_summary(table: Table, bar: SweepProgress | None, notebook: NotebookDisplay | None) -> None:
    """Show a run's closing ``table``: in its notebook block (under the last counts of ``bar``),
    else on stderr."""
    if notebook is None:
        Console(file=sys.stderr).print(table)
        return
    finished = sum(bar.counts.values()) if bar is not None else 0
    total = bar.total if bar is not None else finished
    notebook.finish(finished, total, bar.describe() if bar is not None else "nothing left to run", table)


def last_run_wall(attrs: Any) -> float | None:
    """Seconds between the store's last run's start and end, or None when not recorded."""
    from datetime import datetime

    from sweep.store import TIME_FORMAT

    start, end = attrs.get(attributes.LAST_RUN), attrs.get(attributes.LAST_END)
    if not start or not end:
        return None
    seconds = (datetime.strptime(end, TIME_FORMAT) - datetime.strptime(start, TIME_FORMAT)).total_seconds()
    return seconds if seconds >= 0 else None


def summary_table(ds: Any, wall_s: float | None, output: str, ran: int | None = None) -> Table:
    """A rich table summarising a result dataset: counts by status and the measurements.

    ``wall_s`` is this command's wall time, start to end, and ``ran`` the points it ran; None
    shows the store's last run instead (whole seconds from its store opening to its end,
    ``sweep_last_run`` / ``sweep_last_end``), or no row when the store has none."""
    import numpy as np

    status = ds["status"].values.ravel().astype(str)
    table = Table(title=f"sweep {ds.attrs.get(attributes.NAME, '')}: {output}", show_header=True)
    table.add_column("what")
    table.add_column("value", justify="right")
    for name, n in sorted(Counter(status).items()):
        table.add_row(f"points {name}", str(n))
    done = status == "done"
    if done.any():
        wall = ds["wall_s"].values.ravel()[done]
        table.add_row("job wall s (median / max)", f"{np.median(wall):.2f} / {wall.max():.2f}")
        table.add_row("peak threads (max)", str(int(ds["peak_threads"].values.ravel()[done].max())))
        over = int((ds["peak_threads"] > ds["thread_budget"]).where(ds["thread_budget"] > 0, False).sum())
        if over:
            table.add_row("[red]points over their thread budget", str(over))
        table.add_row("peak RSS MiB (max)", f"{ds['peak_rss'].values.ravel()[done].max() / 2**20:.0f}")
    auto = autothreads.describe(ds.attrs.get(autothreads.ATTR))
    if auto is not None:
        table.add_row("threads: auto", auto)
    runs = allocation.runs_of(ds.attrs)
    if runs:
        cost = runs[-1]
        table.add_row(
            "core-h held / used / lost, last run",
            f"{cost['held_core_s'] / 3600:.3g} / {cost['used_core_s'] / 3600:.3g} "
            f"({100 * cost['used_share']:.0f}%) / {cost['lost_core_s'] / 3600:.3g}",
        )
    if ran is not None:
        table.add_row("points run now", str(ran))
    if wall_s is not None:
        table.add_row("wall s, this command", f"{wall_s:.1f}")
    elif (last := last_run_wall(ds.attrs)) is not None:
        table.add_row("wall s, last run (store open to end)", f"{last:.0f}")
    return table
