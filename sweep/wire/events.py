"""Events of a running sweep, defined once: what workers and the client announce, and to whom.

They travel as Dask structured events (``log_event``) on the topic ``sweep-<name>``: the
client announces the sweep (:class:`SweepAnnounced`), a worker announces each point's start,
each :func:`sweep.report`, each checkpoint saved and its end. The progress display (client side, through
``subscribe_topic``) and the ``/sweep`` dashboard page (a scheduler plugin) read them back
with :func:`from_msg`. Dask carries plain mappings, so each event is sent as
``{"event": <kind>, **fields}`` and rebuilt here; no one else reads the mapping.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sweep.wire.protocol import PointRecord, Report, Status

TOPIC_PREFIX = "sweep-"
# a sweep of more points is announced without its points, and the /sweep page keeps only
# the points that run, failed or keep curves (a record of each of 1,000,000 would be ~1 GB)
LISTED_POINTS = 10_000


def topic(sweep: str) -> str:
    """The Dask event topic of the sweep named ``sweep``."""
    return TOPIC_PREFIX + sweep


def sweep_of(topic_name: str) -> str | None:
    """The sweep name of a topic, or None for a topic that is not a sweep's."""
    return topic_name[len(TOPIC_PREFIX) :] if topic_name.startswith(TOPIC_PREFIX) else None


@dataclass(frozen=True)
class SweepAnnounced:
    """The client's announcement of a sweep: its space and every point's parameters and state."""

    kind: str
    dims: list[str]
    coords: dict[str, list[Any]]
    total: int
    job: str
    points: list[dict[str, Any]]  # {"index": [...], "params": {...}, "status": "queued" | "done"}
    search: dict[str, Any] = field(default_factory=dict)  # a search's objectives, directions, metric


@dataclass(frozen=True)
class PointStarted:
    """A point's job started: on ``host``, on ``cores``, at ``since`` (seconds since the epoch)."""

    index: tuple[int, ...]
    host: str
    cores: tuple[int, ...] = ()
    since: float = 0.0


@dataclass(frozen=True)
class PointReported:
    index: tuple[int, ...]
    step: int | None
    values: dict[str, float]
    attempt: int

    @classmethod
    def of(cls, index: tuple[int, ...], report: Report, attempt: int) -> PointReported:
        return cls(index, report.step, report.values, attempt)

    @property
    def latest(self) -> dict[str, Any]:
        """What displays show as the point's latest values: the step, then the values."""
        return {"step": self.step, **self.values}


@dataclass(frozen=True)
class PointSampled:
    """What the watcher saw of a running point's process tree (sent every few seconds): its
    threads (and the budget), resident memory, CPU seconds and seconds running."""

    index: tuple[int, ...]
    threads: int
    budget: int
    rss: int
    cpu_s: float
    elapsed: float


@dataclass(frozen=True)
class PointEnded:
    index: tuple[int, ...]
    status: Status
    host: str
    cores: tuple[int, ...]
    peak_threads: int
    wall_s: float
    attempts: int
    resumed_from: int = 0

    @classmethod
    def of(cls, record: PointRecord) -> PointEnded:
        return cls(
            record.index,
            record.status,
            record.host,
            record.cores,
            record.peak_threads,
            record.wall_s,
            record.attempts,
            record.resumed_from,
        )


@dataclass(frozen=True)
class CheckpointSaved:
    """A point's job saved checkpoint ``number`` (the state itself waits on the scheduler,
    :mod:`sweep.worker.checkpoints`)."""

    index: tuple[int, ...]
    number: int
    attempt: int
    size: int


@dataclass(frozen=True)
class TrialTold:
    """The client's word on a search trial: its parameters once asked (``state`` "running",
    ``values`` empty), then how the study was told it ended (complete, pruned or fail) with its
    objective values."""

    index: tuple[int, ...]
    params: dict[str, Any]
    state: str
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class AllocationCost:
    """The run's allocation so far (:mod:`sweep.client.listeners.allocation`): core-seconds
    held by its workers, used by its points, lost to attempts that did not end done."""

    held_core_s: float
    used_core_s: float
    lost_core_s: float
    used_share: float
    workers: int


@dataclass(frozen=True)
class PointsEnded:
    """The ends of a chunk of short points run by one task (one event instead of one each)."""

    ends: tuple[PointEnded, ...]


Event = (
    SweepAnnounced
    | PointStarted
    | PointReported
    | PointEnded
    | PointsEnded
    | TrialTold
    | CheckpointSaved
    | PointSampled
    | AllocationCost
)
_KINDS: dict[str, type] = {
    "sample": PointSampled,
    "checkpoint": CheckpointSaved,
    "sweep": SweepAnnounced,
    "start": PointStarted,
    "report": PointReported,
    "end": PointEnded,
    "ends": PointsEnded,
    "trial": TrialTold,
    "allocation": AllocationCost,
}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}


def to_msg(event: Event) -> dict[str, Any]:
    """The mapping Dask carries for ``event``."""
    return {"event": _KIND_OF[type(event)], **asdict(event)}


def from_msg(msg: Any) -> Event | None:
    """The event a mapping from :func:`to_msg` holds (keys Dask added are dropped); None if none."""
    if not isinstance(msg, dict):
        return None
    cls = _KINDS.get(msg.get("event", ""))
    if cls is None:
        return None
    if cls is PointsEnded:
        ends = (from_msg({**end, "event": "end"}) for end in msg.get("ends", []))
        return PointsEnded(tuple(e for e in ends if isinstance(e, PointEnded)))
    known = {f.name for f in fields(cls)}
    values = {k: v for k, v in msg.items() if k in known}
    for name in ("index", "cores", "values") if cls is TrialTold else ("index", "cores"):
        if name in values:
            values[name] = tuple(values[name])
    return cls(**values)
