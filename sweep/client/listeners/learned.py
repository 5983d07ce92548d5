"""What a run learned, kept in its store for the next: the k ``threads: auto`` chose
(:mod:`sweep.client.autothreads`, attribute ``sweep_threads_auto``) and the memory each point
asks once learned from the points that ended (:mod:`sweep.capacity.memory`, ``sweep_memory_ask``)."""

from __future__ import annotations

import json

from sweep.client.listeners.base import Listener, Run
from sweep.store import attributes


class LearnedListener(Listener):
    """Writes what the run's window learned (:meth:`~sweep.client.window.Window.learned`) to the
    store as the run ends (if the store is still there)."""

    def on_end(self, run: Run) -> None:
        if not run.store.intact():
            return
        learned = run.window.learned()
        if learned.auto is not None and learned.auto.decided_here:
            run.store.set_attrs(**{attributes.THREADS_AUTO: json.dumps(learned.auto.summary())})
        if learned.memory is not None:
            ask = {"bytes": learned.memory, "learned_from": learned.memory_from}
            run.store.set_attrs(**{attributes.MEMORY_ASK: json.dumps(ask)})
