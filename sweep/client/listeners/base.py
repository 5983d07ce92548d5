"""The contract between the run loop and its listeners.

A :class:`Listener` is told of a run at five moments, always in this order and each from a
known thread:

1. :meth:`~Listener.on_start` once, on the run's thread, after the window is made and before
   the first task is submitted;
2. :meth:`~Listener.on_event` for each event a worker publishes on the sweep's topic, on the
   Dask client's event thread (so concurrently with the others: keep it short and lock what
   it shares);
3. :meth:`~Listener.on_tick` on each turn of the loop, on the run's thread (every few
   milliseconds while results come, up to ``POLL_MAX_S`` apart when none does; a listener
   that must not run so often keeps its own cadence), and once more after a cancel;
4. :meth:`~Listener.on_records` with the records of finished points, on the run's thread,
   before they are written: it returns them, changed or not; listeners are chained in order;
5. :meth:`~Listener.on_end` once, on the run's thread, after the loop ends however it ends
   (finished, cancelled or raising), for every listener even when one before it raised
   (:func:`end_listeners`). An error inside ``on_end`` never replaces the one that ended the
   run (it is logged); when the run ended well, the first such error is raised after all
   listeners have ended.

A listener may end the run with an error (:meth:`Run.stop`): queued and running points are
cancelled, finished ones kept, and the error is raised once the store is closed. It must not
write the store's points (the loop's writer does), nor block. :class:`Listener` does nothing
at every moment: a listener overrides the moments it needs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sweep.wire import events

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from distributed import Client

    from sweep.client.window import Window
    from sweep.store import Store
    from sweep.wire.protocol import PointRecord


@dataclass
class Run:
    """What listeners see of the running run: its client, store, window, token (which run
    the workers' pools know it by) and Dask topic."""

    client: Client
    store: Store
    window: Window
    token: str
    topic: str
    cancel: threading.Event
    failure: BaseException | None = field(default=None, init=False)

    def say(self, event: events.Event) -> None:
        """Publish ``event`` on the sweep's topic (the /sweep page and the listeners hear it)."""
        self.client.log_event(self.topic, events.to_msg(event))

    def stop(self, error: BaseException) -> None:
        """End the run with ``error`` (the first one given is raised); see the module docstring."""
        if self.failure is None:
            self.failure = error
        self.cancel.set()


class Listener:
    """A listener of a run that does nothing at every moment; see the module docstring."""

    def on_start(self, run: Run) -> None:
        """The run is about to submit its first task."""

    def on_event(self, event: events.Event) -> None:
        """A worker's event (the client's event thread)."""

    def on_tick(self, run: Run) -> None:
        """A turn of the loop."""

    def on_records(self, run: Run, records: list[PointRecord]) -> list[PointRecord]:
        """Finished points, before they are written: returned as they should be written."""
        return records

    def on_end(self, run: Run) -> None:
        """The loop has ended."""


def end_listeners(run: Run, listeners: list[Listener], ending: BaseException | None) -> None:
    """Call every listener's :meth:`~Listener.on_end`; see the module docstring. ``ending``:
    the error that ended the loop, if any (it goes on; nothing here replaces it).

    Examples
    --------
    >>> class Fails(Listener):
    ...     def on_end(self, run): raise OSError(28, "No space left on device")
    >>> ended = []
    >>> class Notes(Listener):
    ...     def on_end(self, run): ended.append(True)
    >>> end_listeners(None, [Fails(), Notes()], KeyboardInterrupt())  # logged, not raised
    >>> ended
    [True]
    """
    first: Exception | None = None
    for listener in listeners:
        try:
            listener.on_end(run)
        except Exception as exc:
            if ending is None and (run is None or run.failure is None) and first is None:
                first = exc
            else:
                log.warning("%s could not end (%s) after the run's own end", type(listener).__name__, exc)
    if first is not None:
        raise first
