"""``resources.threads: auto``: the first points of a sweep measure which k the rest use.

A :class:`Calibration` gives the first points of a sweep (a grid's, a list's or a search's first
trials alike) a k each from the candidates (``resources.threads_auto``, default 1, 2 and 4;
those above the largest worker's cores are dropped): ``ROUNDS`` points per job slot of that k
(a cluster whose workers offer 2 cores has 2 slots of k=1 and 1 of k=2), so that each round
fills the cluster and every slot's second point runs in a warm child. The ks run one after the
other: the points of a k are submitted once those of the k before have ended, since a pool
closes an idle child whose cores a lease of another k needs (:mod:`sweep.worker.pool`), and
mixing ks would leave every k with cold children only.

The smallest k runs first, on the children the workers started ahead (the smallest k is the
sweep's k until a choice is made): it is the one that most often wins, and measuring it costs
nothing a sweep at that k would not pay. Its points tell how long a cold and a warm point take;
the larger ks (largest first) are measured only when the sweep is long enough to repay them:
when what they would cost if they lost, ``ROUNDS`` cold rounds each plus one cold round of the
smallest k to come back to (their children are closed), is at most ``REPAY`` of the rest of
the sweep at the smallest k. A shorter sweep keeps the smallest k (the reason says so), giving
up what a larger k could have gained. No other point is submitted until the calibration has
ended. Each k is scored by the points per second per core it gave, ``1 / (k x median job
wall)`` (a node of N cores runs N / k such points at once), over its points that ended ``done``
and were not the first job of their child process: a child's first job compiles (and a child
of a k other than the prewarmed one imports jax too), which the rest of the sweep's points, run
by warm children, don't pay. A k none of whose points ran in a warm child is scored from its
first jobs. The k with the highest score wins and every later point of the sweep runs with it;
when no calibration point is done the smallest candidate is used. Calibration points are real
points of the sweep: their results are kept, with the cores they ran on.

A sweep of fewer than ``MIN_POINTS_FACTOR`` x the calibration's points is not calibrated (the
smallest candidate is used, and the reason recorded). The choice and the measurements are
stored in the store's ``sweep_threads_auto`` attribute (:meth:`Calibration.summary`); a resumed
sweep reads it back and does not calibrate again.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sweep.store import attributes
from sweep.wire.placement import Placement
from sweep.wire.protocol import PointRecord
from sweep.wire.task import PointTask

log = logging.getLogger(__name__)
ROUNDS = 2  # calibration points per job slot of each k: a cold one, then a warm one
MIN_POINTS_FACTOR = 2  # a sweep of fewer than this many times the calibration's points isn't calibrated
REPAY = 0.05  # the larger ks are measured only if losing costs at most this share of the sweep's rest
ATTR = attributes.THREADS_AUTO


@dataclass
class Measured:
    """What the calibration points of one k gave."""

    k: int
    walls: list[float] = field(default_factory=list)  # job wall seconds of its done points
    warm: list[float] = field(default_factory=list)  # those of them not their child's first job
    first: list[float] = field(default_factory=list)  # those of them that were
    failed: int = 0  # its points that ended otherwise

    def scored(self) -> list[float]:
        """The walls it is scored by: its warm children's, else all."""
        return self.warm or self.walls

    def score(self) -> float:
        """Points per second per core: 1 / (k x median wall); 0 when none is done."""
        if not self.walls:
            return 0.0
        return 1.0 / (self.k * max(statistics.median(self.scored()), 1e-9))

    def cold(self) -> float:
        """The median wall of its points that were their child's first job (of all, if none)."""
        return statistics.median(self.first or self.walls)


class Calibration:
    """Which k each task of a ``threads: auto`` sweep gets; see the module docstring.

    ``retune(task, k)`` makes a task run on k cores (its budget and limits follow k:
    :func:`sweep.client.plan.retuned`). ``chosen``: a k decided before (a resumed sweep's), used for
    every task without calibrating."""

    def __init__(
        self,
        candidates: Sequence[int],
        retune: Callable[[PointTask, int], PointTask],
        *,
        chosen: int | None = None,
        rounds: int = ROUNDS,
    ) -> None:
        if not candidates:
            raise ValueError("threads_auto needs at least one candidate k")
        self.candidates = tuple(sorted(set(candidates)))
        self.retune = retune
        self.rounds = rounds
        self.measured = {k: Measured(k) for k in self.candidates}
        self.chosen = chosen
        self.reason = "chosen by an earlier run of this sweep" if chosen is not None else ""
        self.decided_here = False  # whether this run decided (and so should store it)
        self._plan: list[int] = []  # the k of each calibration point not yet submitted
        self._later: list[int] = []  # the ks measured after the smallest, if the sweep repays them
        self._left = 0  # the sweep's points not yet given a k
        self._slots: dict[int, int] = {}  # job slots of each k over the workers
        self._out: dict[tuple[int, ...], int] = {}  # calibration points in flight -> their k
        self._children: set[int] = set()  # pids of the children that ran a calibration point
        self._fitted = chosen is not None

    # -- what the window asks ------------------------------------------------------------------
    def fit(self, workers: Sequence[int], points: int) -> None:
        """Drop the candidates above the largest of ``workers`` (the cores each worker offers,
        or those expected while none has joined) and plan the calibration for a sweep of
        ``points`` points left (none when too few); called before the first task."""
        if self._fitted:
            return
        self._fitted = True
        largest_worker = max(workers, default=0)
        fits = [k for k in self.candidates if k <= largest_worker] or [min(self.candidates)]
        if len(fits) < len(self.candidates):
            log.info("threads auto: candidates %s (workers have at most %d cores)", fits, largest_worker)
        self.candidates = tuple(fits)
        self.measured = {k: Measured(k) for k in self.candidates}
        self._slots = {k: max(1, sum(w // k for w in workers)) for k in self.candidates}
        needed = sum(self._points_of(k) for k in self.candidates)
        if len(self.candidates) == 1:
            only = f"the only candidate that fits a worker of {largest_worker} cores"
            self._decide(self.candidates[0], only)
        elif points < MIN_POINTS_FACTOR * needed:
            self._decide(
                self.candidates[0],
                f"not calibrated: {points} points, fewer than {MIN_POINTS_FACTOR * needed} "
                f"({MIN_POINTS_FACTOR} x {needed} calibration points)",
            )
        else:
            smallest, *larger = self.candidates
            self._left = points
            self._plan = [smallest] * self._points_of(smallest)
            self._later = list(reversed(larger))

    def _points_of(self, k: int) -> int:
        """The calibration points of k: ``rounds`` of its job slots over the workers."""
        return self.rounds * self._slots[k]

    @property
    def decided(self) -> bool:
        return self.chosen is not None

    @property
    def calibrating(self) -> bool:
        """Whether calibration points are still to submit or still running."""
        return not self.decided

    def next(self, task: PointTask) -> PointTask | None:
        """``task`` made to run on its k: the chosen k, the next calibration k, or None when
        it must wait for the calibration to end."""
        if self.chosen is not None:
            return self.retune(task, self.chosen)
        if not self._plan or (self._out and self._plan[0] not in self._out.values()):
            return None  # the calibration's points are out, or the k before's still run
        k = self._plan.pop(0)
        self._out[task.index] = k
        self._left -= 1
        return self.retune(task, k)

    def records_ended(self, records: Sequence[PointRecord]) -> None:
        """Note the calibration points among ``records``; decide once all have ended."""
        for r in records:
            k = self._out.pop(r.index, None)
            if k is None:
                continue
            warm = r.pid in self._children
            self._children.add(r.pid)
            if r.status == "done" and not math.isnan(r.wall_s):
                self.measured[k].walls.append(r.wall_s)
                (self.measured[k].warm if warm else self.measured[k].first).append(r.wall_s)
            else:
                self.measured[k].failed += 1
        if self.decided or self._plan or self._out:
            return
        if self._later:
            self._go_on_or_stop()
        else:
            scored = {k: m.score() for k, m in self.measured.items()}
            best = max(scored, key=lambda k: (scored[k], -k))
            if scored[best] > 0:
                self._decide(best, "the most points per second per core")
            else:
                self._decide(self.candidates[0], "no calibration point ended done")

    def _go_on_or_stop(self) -> None:
        """The smallest k's points have ended: plan the larger ks' if the rest of the sweep
        repays what they cost should they lose (see the module docstring), else keep it."""
        smallest = self.candidates[0]
        m = self.measured[smallest]
        if m.walls:  # with none done the smallest k can't be the choice: measure the others
            cost = (self.rounds * len(self._later) + 1) * m.cold()
            rest = math.ceil(self._left / self._slots[smallest]) * statistics.median(m.scored())
            if cost > REPAY * rest:
                self._later = []
                self._decide(
                    smallest,
                    f"the larger ks not measured: losing would cost ~{cost:.3g} s, more than "
                    f"{REPAY:.0%} of the rest of the sweep at k={smallest} (~{rest:.3g} s)",
                )
                return
        self._plan = [k for k in self._later for _ in range(self._points_of(k))]
        self._later = []

    def _decide(self, k: int, reason: str) -> None:
        self.chosen, self.reason, self.decided_here = k, reason, True
        log.info("threads auto: k = %d (%s); %s", k, reason, self.describe_measured())

    # -- what is kept ---------------------------------------------------------------------------
    def describe_measured(self) -> str:
        def one(m: Measured) -> str:
            text = f"k={m.k}: {len(m.walls)} done ({len(m.warm)} by a warm child)"
            if m.walls:
                text += f", median wall {statistics.median(m.scored()):.3g} s, {m.score():.3g} points/s/core"
            return text + (f", {m.failed} not done" if m.failed else "")

        return ", ".join(one(m) for m in self.measured.values())

    def summary(self) -> dict[str, Any]:
        """What the store keeps (``sweep_threads_auto``): the choice, why, and per k its
        calibration points' walls and score."""
        return {
            "chosen": self.chosen,
            "reason": self.reason,
            "candidates": list(self.candidates),
            "measured": {
                str(k): {
                    "walls": m.walls,
                    "warm_walls": m.warm,
                    "failed": m.failed,
                    "points_per_s_per_core": m.score(),
                }
                for k, m in self.measured.items()
            },
        }


def stored_choice(raw: str | None) -> int | None:
    """The k a store's earlier run chose (its ``sweep_threads_auto`` attribute, ``raw``), if
    it ran with ``threads: auto``."""
    if not raw:
        return None
    chosen = json.loads(raw).get("chosen")
    return int(chosen) if chosen is not None else None


def describe(raw: str | None) -> str | None:
    """One line on a store's ``threads: auto`` choice (its ``sweep_threads_auto`` attribute,
    ``raw``) for ``sweep status`` and ``sweep results``, or None."""
    if not raw:
        return None
    s = json.loads(raw)
    scores = ", ".join(
        f"k={k} {m['points_per_s_per_core']:.3g}" for k, m in s["measured"].items() if m["walls"]
    )
    measured = f"; points/s/core {scores}" if scores else ""
    return f"k = {s['chosen']} ({s['reason']}{measured})"


def placed(task: PointTask, placement: Placement, enforce: bool) -> PointTask:
    """``task`` at ``placement`` (a candidate k's cores and budget), its budget enforced as a
    limit when ``enforce`` (``on_thread_overflow: fail``)."""
    if task.placement == placement:
        return task
    limits = replace(task.limits, max_threads=placement.thread_budget if enforce else None)
    return replace(task, placement=placement, limits=limits)
