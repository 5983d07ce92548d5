"""A search's study as a listener of the run (:mod:`sweep.client.search`): trials asked as their
tasks are taken, reports passed to the pruner, trials told how they ended.

A trial without its objective fails; when no trial of the study has given one yet the run
stops (the objective is likely misnamed) with :class:`~sweep.client.search.SearchStopped`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from sweep.client import search
from sweep.client.listeners.base import Listener, Run
from sweep.wire import events
from sweep.wire.protocol import PointRecord
from sweep.wire.task import PointTask
from sweep.worker.commands import PrunePoint, on_pool

log = logging.getLogger(__name__)


class StudyListener(Listener):
    def __init__(self, study: search.Study) -> None:
        self.study = study
        self._run: Run | None = None

    def tasks(
        self,
        todo: Iterable[tuple[int, ...]],
        make: Callable[[tuple[int, ...], Mapping[str, Any]], PointTask],
    ) -> Iterator[PointTask]:
        """The tasks of the trials, each asked of the study as the window takes it; its
        parameters are written to the store and announced."""

        def asked(slot: tuple[int, ...], params: dict[str, Any]) -> None:
            assert self._run is not None, "tasks are taken once the run has started"
            self._run.store.set_params(slot, params)
            self._run.say(events.TrialTold(slot, params, "running"))

        return self.study.tasks(todo, make, asked)

    def on_start(self, run: Run) -> None:
        self._run = run
        for told in self.study.history():
            run.say(told)

    def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.PointReported):
            self.study.reported(event.index, event.step, event.values)

    def on_tick(self, run: Run) -> None:
        """Tell the jobs of the trials the pruner stopped (their next report raises Pruned)."""
        for slot in self.study.decide():
            try:
                run.client.run(on_pool, PrunePoint(run.token, slot))
            except Exception as exc:  # a worker gone meanwhile: the trial ends anyway
                log.info("pruning trial %s: %s", slot, exc)

    def on_records(self, run: Run, records: list[PointRecord]) -> list[PointRecord]:
        out = []
        for r in records:
            try:
                told = self.study.tell(r.index, r.status, r.outputs, r.reports)
                if told is not None:
                    run.say(told)
            except search.ObjectiveNotFinite as exc:
                r = replace(r, status="failed", error=str(exc))
            except search.ObjectiveMissing as exc:
                r = replace(r, status="failed", error=str(exc))
                if not self.study.completed():
                    run.stop(search.SearchStopped(f"trial {r.index[0]} failed, so the search stopped: {exc}"))
            out.append(r)
        return out
