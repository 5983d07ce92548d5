"""The live progress display as a listener: workers' events move its running points."""

from __future__ import annotations

from sweep.client.listeners.base import Listener
from sweep.client.progress import SweepProgress
from sweep.wire import events


class ProgressListener(Listener):
    """Passes each event to ``bar``; the points it counts as done are those written (the
    loop's writer calls :meth:`~sweep.client.progress.SweepProgress.points_written`)."""

    def __init__(self, bar: SweepProgress) -> None:
        self.bar = bar

    def on_event(self, event: events.Event) -> None:
        self.bar.on_event(event)
