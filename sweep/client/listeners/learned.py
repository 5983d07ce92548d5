"""What a run learned, kept in its store for the next: the k ``threads: auto`` chose
(:mod:`sweep.client.autothreads`, attribute ``sweep_threads_auto``) and the memory each point
asks once learned from the points that ended (:mod:`sweep.worker.memory`, ``sweep_memory_ask``)."""

from __future__ import annotations

import json

from sweep.client import autothreads
from sweep.client.listeners.base import Listener, Run

MEMORY_ATTR = "sweep_memory_ask"


class LearnedListener(Listener):
    """Writes what the run's window learned to the store as the run ends (if the store is
    still there)."""

    def on_end(self, run: Run) -> None:
        auto, window = run.window.auto, run.window
        if not run.store.intact():
            return
        if auto is not None and auto.decided_here:
            run.store.set_attrs(**{autothreads.ATTR: json.dumps(auto.summary())})
        if window.learned_from:
            ask = {"bytes": window.memory, "learned_from": window.learned_from}
            run.store.set_attrs(**{MEMORY_ATTR: json.dumps(ask)})
