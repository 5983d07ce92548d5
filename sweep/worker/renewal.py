"""Children that take the place of recycled ones, and the closing of the ones they replace.

A warm child due to be recycled (:meth:`~sweep.wire.recycling.Recycling.due`) serves its last
jobs while its replacement starts on the same cores (:meth:`Renewal.start_for`); when the
old child is given back, :meth:`Renewal.after` hands the pool the replacement, ready, and
closes the old one in the background, so nothing waits for its end. A child that is kept
after all has its replacement closed instead. Children start and close on the pool's
spawner threads (a child dies with the thread that spawned it: ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from typing import Any

from sweep.worker.child import Child

log = logging.getLogger(__name__)


class Renewal:
    """Replacements started ahead, by the pid of the child each replaces, and closings in the
    background; ``started`` counts the replacements that did start."""

    def __init__(self, spawner: ThreadPoolExecutor) -> None:
        self._spawner = spawner
        self._replacements: dict[int, Future[Child]] = {}
        self._closing: list[Future[None]] = []
        self.started = 0

    def start_for(self, child: Child) -> None:
        """Start, now, the child that will take the place of ``child`` on its cores. Not for a
        child holding devices (its replacement needs them free)."""
        if child.devices is None and child.reusable and child.pid not in self._replacements:
            self._replacements[child.pid] = self._spawner.submit(Child, child.cores, child.config)

    def replacement_of(self, child: Child) -> Future[Child] | None:
        """The replacement started for ``child``, if any (still its own until :meth:`after`)."""
        return self._replacements.get(child.pid)

    def after(self, child: Child, keep: bool) -> Child | None:
        """``child`` given back: kept (``keep``), its replacement, if one was started, is closed
        in the background and None returned; else ``child`` closes (in the background when its
        replacement is ready) and the ready replacement is returned, or None without one."""
        replacement = self._replacements.pop(child.pid, None)
        if keep:
            if replacement is not None:
                self.in_background(self._discard, replacement)
            return None
        fresh = self._ready(replacement)
        if fresh is None:
            child.close()
        else:
            self.in_background(child.close)
        return fresh

    def in_background(self, close: Callable[..., None], *args: Any) -> None:
        """Close a child on a spawner thread (:meth:`close` waits for it)."""
        self._closing = [f for f in self._closing if not f.done()] + [self._spawner.submit(close, *args)]

    def close(self) -> None:
        """Close every replacement not handed out and wait for the closings in the background."""
        for replacement in list(self._replacements.values()):
            with suppress(Exception):  # one that could not start has nothing to close
                replacement.result().close()
        wait(self._closing)

    def _discard(self, replacement: Future[Child]) -> None:
        fresh = self._ready(replacement)
        if fresh is not None:
            fresh.close()

    def _ready(self, replacement: Future[Child] | None) -> Child | None:
        """The replacement child once it has started; None without one, or when it could not
        start (the next lease starts one, and says why it can't)."""
        if replacement is None:
            return None
        try:
            fresh = replacement.result()
        except Exception as exc:
            log.info("a replacement child could not start: %s", exc)
            return None
        self.started += 1
        return fresh
