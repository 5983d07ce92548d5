"""Adaptive search (``params.search``) with early stopping (``params.prune``), by Optuna.

A search is a sweep whose points are the ``n_trials`` slots of a ``trial`` dim
(:class:`sweep.model.space.Trials`). Optuna chooses each trial's parameters and decides which
trials to stop, through its ask/tell interface; nothing here samples or prunes by itself:

* :class:`sweep.model.searchspec.SearchSpec` is the validated recipe part (sampler, seed,
  objectives, directions, pruner), checked before anything runs.
* :class:`Study` drives one run of the search. Whenever the sweep has room for another point
  (:class:`sweep.client.window.Window`: the slots of the cluster plus a small queue), it asks the
  study for a trial, writes its parameters as the slot's coordinates and submits it; each
  :func:`sweep.report` of a running trial is passed to ``trial.report`` and, when the pruner
  says stop, the trial's job is told (:meth:`sweep.worker.pool.CorePool.prune`): its next report raises
  :class:`sweep.Pruned` and the point ends as ``pruned`` in a child that stays warm. Each
  finished point is told to the study: the objective's value (a job output, else the last
  reported value of that name), ``PRUNED`` or ``FAIL``.
* The study is kept in an Optuna journal file next to the store (``<output>.optuna.journal``,
  ``optuna-dashboard`` opens it), so a killed sweep resumes the same study: a trial left
  ``RUNNING`` by a driver that died is told ``FAIL`` and its slot asks again with the same
  parameters (the slot of each trial is its user attribute ``sweep_slot``).
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.errors import SweepError
from sweep.model.searchspec import SAMPLERS, SearchSpec, pruner
from sweep.model.space import Bounds, Choices
from sweep.store.layout import is_store
from sweep.wire.events import TrialTold

log = logging.getLogger(__name__)

JOURNAL_SUFFIX = ".optuna.journal"
SLOT_ATTR = "sweep_slot"


def _sampler(spec: SearchSpec, asked: int = 0) -> Any:
    """The sampler of ``spec`` for a study that has ``asked`` trials already. A seeded sampler
    made again replays its random stream from the start, so a resumed study's is seeded with
    ``seed + asked``: each run of the same search goes on differently, and reproducibly."""
    import optuna

    cls = getattr(optuna.samplers, SAMPLERS[spec.sampler])
    return cls(seed=None if spec.seed is None else spec.seed + asked)


def journal_path(output: Path) -> Path:
    """Where the study of the store at ``output`` is kept: next to it."""
    return output.with_name(output.name + JOURNAL_SUFFIX)


def distributions(axes: Mapping[str, Bounds | Choices]) -> dict[str, Any]:
    """The Optuna distribution of each search axis."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for name, axis in axes.items():
        if isinstance(axis, Choices):
            out[name] = CategoricalDistribution(axis.values)
        elif axis.integer:  # Bounds keeps high + 1 for its own floor() sampling
            out[name] = IntDistribution(int(axis.low), int(axis.high) - 1, log=axis.log)
        else:
            out[name] = FloatDistribution(axis.low, axis.high, log=axis.log)
    return out


class JournalDamaged(SweepError):
    """The study's journal next to the store can't be read; nothing was changed."""


def check_journal(output: Path) -> None:
    """Raise JournalDamaged naming the line when the journal of the store at ``output`` has a
    record that doesn't decode (Optuna would fail reading it, after the store grew). Only a
    last line without its newline is a torn write, from a driver killed while writing: it is
    ignored, as Optuna does; a complete line that doesn't decode is damage wherever it is."""
    path = journal_path(output)
    try:
        lines = path.read_bytes().splitlines(keepends=True)
    except FileNotFoundError:
        return
    if lines and not lines[-1].endswith(b"\n"):
        lines = lines[:-1]  # torn
    for number, line in enumerate(lines, start=1):
        try:
            json.loads(line)
        except ValueError as exc:
            raise JournalDamaged(
                f"{path}: line {number} is not a journal record ({exc}); remove the file to rebuild "
                "the study from the store's trials, or restore it"
            ) from None


class SearchStopped(SweepError):
    """A search stopped early: its first trial to finish gave no value for the objective."""

    exit_code = 1


class ObjectiveMissing(RuntimeError):
    """A finished trial has no value for an objective: neither an output nor a report key."""


class ObjectiveNotFinite(RuntimeError):
    """A finished trial's objective is NaN or infinite: Optuna counts it failed, so does the store."""


class Study:
    """One run of a search over the Optuna study kept next to the store; see the module docstring.

    Used from the driver's thread only, except :meth:`heard`, which the client's event
    handler calls with each report.
    """

    def __init__(
        self, spec: SearchSpec, axes: Mapping[str, Bounds | Choices], output: Path, name: str
    ) -> None:
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.spec = spec
        self.path = journal_path(output)
        storage = JournalStorage(JournalFileBackend(str(self.path)))
        kwargs: dict[str, Any] = (
            {"direction": spec.directions[0]}
            if len(spec.directions) == 1
            else {"directions": list(spec.directions)}
        )
        self.study = optuna.create_study(
            storage=storage,
            study_name=name,
            sampler=_sampler(spec),
            pruner=pruner(spec.prune, spec.prune_options),
            load_if_exists=True,
            **kwargs,
        )
        self.distributions = distributions(axes)
        asked = len(self.study.get_trials(deepcopy=False))
        if not asked:
            asked = self._rebuild(output)
        if asked:
            self.study.sampler = _sampler(spec, asked)
        self.trials: dict[tuple[int, ...], Any] = {}  # slot -> its running optuna Trial
        self.told = 0  # trials told COMPLETE in this run
        self._heard: deque[tuple[tuple[int, ...], int | None, dict[str, float]]] = deque()
        self._steps: dict[tuple[int, ...], int] = {}
        self.pruned: set[tuple[int, ...]] = set()

    def _rebuild(self, output: Path) -> int:
        """A study with no trials next to a store whose trials ran (its journal was lost) gets
        them back from the store: each slot that ran, with its parameters, its state and, when
        done, its objective value. Returns how many were added."""
        from optuna.trial import TrialState, create_trial

        from sweep.store.results import open_results

        if not is_store(output):
            return 0
        ds = open_results(output)
        states = {"done": TrialState.COMPLETE, "pruned": TrialState.PRUNED}
        added = 0
        for slot, status in enumerate(ds["status"].values):
            params = {name: ds[name].values[slot] for name in self.distributions}
            if status == "pending" or any(v is None or v != v for v in params.values()):
                continue
            params = {k: v.item() if hasattr(v, "item") else v for k, v in params.items()}
            state, values = states.get(str(status), TrialState.FAIL), None
            if state == TrialState.COMPLETE:
                reports = json.loads(str(ds["reports"].values[slot]) or "[]")
                outputs = {n: _Stored(ds[n].values[slot]) for n in self.spec.objectives if n in ds}
                try:
                    values = [objective_value(n, outputs, reports) for n in self.spec.objectives]
                except ObjectiveMissing:
                    state = TrialState.FAIL
            if values is not None and not all(math.isfinite(v) for v in values):
                state, values = TrialState.FAIL, None
            trial = create_trial(
                state=state,
                params=params,
                distributions=self.distributions,
                values=values if state == TrialState.COMPLETE else None,
                user_attrs={SLOT_ATTR: slot},
            )
            self.study.add_trial(trial)
            added += 1
        if added:
            log.warning("%s was missing: the study is rebuilt from the store's %d trial(s)", self.path, added)
        return added

    # -- asking ---------------------------------------------------------------------------
    def resume(self, slots: Iterable[tuple[int, ...]]) -> dict[tuple[int, ...], dict[str, Any]]:
        """The parameters each of ``slots`` that had a trial runs again with: its last trial's
        (a trial left RUNNING by a driver that died is told FAIL first). A failed trial retried,
        or one whose run was cut short, runs its own parameters again; a slot never asked gets
        a new trial."""
        from optuna.trial import TrialState

        wanted = {int(s[0]) for s in slots}
        last: dict[int, Any] = {}
        for t in self.study.get_trials(deepcopy=False):
            slot = t.user_attrs.get(SLOT_ATTR)
            if slot in wanted:
                if t.state in (TrialState.RUNNING, TrialState.WAITING):
                    self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                if t.params:
                    last[slot] = t
        again: dict[tuple[int, ...], dict[str, Any]] = {(slot,): dict(t.params) for slot, t in last.items()}
        if again:
            log.info("%s: %d trial(s) run again with their own parameters", self.path, len(again))
        return again

    def ask(self, slot: tuple[int, ...], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A new trial for ``slot`` (with ``params``, when given: a trial asked again); its parameters."""
        if params is not None:
            self.study.enqueue_trial(params, skip_if_exists=False)
        trial = self.study.ask(self.distributions)
        trial.set_user_attr(SLOT_ATTR, int(slot[0]))
        self.trials[slot] = trial
        return dict(trial.params)

    def tasks(
        self,
        slots: Iterable[tuple[int, ...]],
        make: Callable[[tuple[int, ...], dict[str, Any]], Any],
        wrote: Callable[[tuple[int, ...], dict[str, Any]], None],
    ) -> Iterator[Any]:
        """For each slot, in order, as they are taken: a trial asked of the study, ``wrote``
        called with its parameters, and the task ``make`` builds for them."""
        todo = sorted(slots)
        again = self.resume(todo)
        for slot in todo:
            params = self.ask(slot, again.get(slot))
            wrote(slot, params)
            yield make(slot, params)

    # -- reports and pruning ----------------------------------------------------------------
    def reported(self, index: tuple[int, ...], step: int | None, values: Mapping[str, float]) -> None:
        """A report of a running trial (from the client's event thread): kept for :meth:`decide`."""
        if self.spec.prunes and self.spec.metric in values:
            self._heard.append((index, step, dict(values)))

    def decide(self) -> list[tuple[int, ...]]:
        """Pass the reports heard since the last call to their trials; the slots the pruner
        says to stop now (each once)."""
        stop: list[tuple[int, ...]] = []
        while self._heard:
            slot, step, values = self._heard.popleft()
            trial = self.trials.get(slot)
            if trial is None or slot in self.pruned:
                continue
            value = values[self.spec.metric]
            if step is None:
                step = self._steps.get(slot, -1) + 1
            if step <= self._steps.get(slot, -1) or not math.isfinite(value):
                continue
            self._steps[slot] = step
            trial.report(value, step)
            if trial.should_prune():
                self.pruned.add(slot)
                stop.append(slot)
        return stop

    def completed(self) -> bool:
        """Whether any trial of the study (this run's or an earlier one's) has completed."""
        from optuna.trial import TrialState

        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    # -- telling --------------------------------------------------------------------------------
    def tell(
        self, slot: tuple[int, ...], status: str, outputs: Mapping[str, Any], reports: list[dict]
    ) -> TrialTold | None:
        """Tell the study how the trial of ``slot`` ended; what was told (None for a slot with
        no trial running). ObjectiveMissing (the trial told FAIL) when it is done but has no
        value for an objective."""
        from optuna.trial import TrialState

        trial = self.trials.pop(slot, None)
        self._steps.pop(slot, None)
        if trial is None:
            return None
        params = dict(trial.params)
        if status == "pruned":
            self.study.tell(trial, state=TrialState.PRUNED)
            return TrialTold(slot, params, "pruned")
        if status != "done":
            self.study.tell(trial, state=TrialState.FAIL)
            return TrialTold(slot, params, "fail")
        try:
            values = [objective_value(name, outputs, reports) for name in self.spec.objectives]
        except ObjectiveMissing:
            self.study.tell(trial, state=TrialState.FAIL)
            raise
        if not all(math.isfinite(v) for v in values):
            self.study.tell(trial, state=TrialState.FAIL)
            raise ObjectiveNotFinite(
                f"objective {', '.join(self.spec.objectives)} is {', '.join(map(str, values))}: the study "
                "can't use it, so the trial is failed in the study and in the store"
            )
        self.study.tell(trial, values if len(values) > 1 else values[0])
        self.told += 1
        return TrialTold(slot, params, "complete", tuple(values))

    def history(self) -> list[TrialTold]:
        """The trials of the study that ended, by slot (for a page that joins a resumed search)."""
        from optuna.trial import TrialState

        states = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "fail"}
        return [
            TrialTold((int(t.user_attrs[SLOT_ATTR]),), dict(t.params), states[t.state], tuple(t.values or ()))
            for t in self.study.get_trials(deepcopy=False, states=tuple(states))
            if SLOT_ATTR in t.user_attrs
        ]


@dataclass(frozen=True)
class _Stored:
    """A stored output value, shaped as a job's output for :func:`objective_value`."""

    values: Any


def objective_value(name: str, outputs: Mapping[str, Any], reports: list[dict]) -> float:
    """The value of objective ``name``: the job's scalar output of that name, else its last
    report of that key."""
    import numpy as np

    if name in outputs:
        values = np.asarray(outputs[name].values)
        if values.size != 1:
            raise ObjectiveMissing(
                f"objective {name!r} is an output of shape {values.shape}; it must be a scalar"
            )
        return float(values.ravel()[0])
    for row in reversed(reports):
        if name in row:
            return float(row[name])
    keys = sorted({k for r in reports for k in r} - {"step", "time", "attempt"})
    raise ObjectiveMissing(
        f"objective {name!r} is neither an output of the job (it returned {sorted(outputs) or 'none'}) nor "
        f"a sweep.report key (reported: {keys or 'none'}); fix params.search.objective"
    )
