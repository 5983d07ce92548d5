"""What crosses a process boundary, defined once: parent <-> child messages and the point record.

Parent and child talk over two pipes. A message is an 8-byte big-endian length followed by a
pickle of one of the dataclasses below:

* parent -> child: :class:`RunJob` (a job and its keyword arguments), :class:`RunJobs` (a
  chunk of short points of one job: the child runs them one after the other, as if each had
  come as a RunJob, without waiting for the parent in between) or :class:`Exit`;
* child -> parent: :class:`Ready` once, after start-up; then for each job any number of
  :class:`Report` (one per :func:`sweep.report` call), :class:`Checkpoint` (one per
  :func:`sweep.checkpoint` call) and :class:`RestoreAsk` (answered by the parent with a
  :class:`Restored`, :func:`sweep.restore`), and one :class:`JobDone` or
  :class:`JobFailed`, each carrying the child's :class:`Metrics` for that job and the user's
  source files it ran (:mod:`sweep.child.sources`).

A :class:`PointRecord` is what became of one point: the parent's :class:`~sweep.worker.child.Child`
fills in what the child said and what the watch saw, the worker task adds where it ran, the
client hands it to the store, whose per-point variables are derived from its fields
(:func:`stored_fields`). Standard library only: the child imports this before any job runs.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from sweep.wire.jobref import JobRef

Status = Literal["pending", "done", "failed", "timeout", "killed", "oom", "stalled", "pruned"]
STATUSES: tuple[Status, ...] = get_args(Status)
NOT_DONE: tuple[Status, ...] = ("failed", "timeout", "killed", "oom", "stalled")
FINISHED: tuple[Status, ...] = ("done", "pruned")  # ended for good: a search stopped a pruned trial

_HEADER = struct.Struct(">Q")


class Pruned(Exception):
    """Raised by :func:`sweep.report` in a trial the search's pruner stopped."""


# -- parent -> child ----------------------------------------------------------------------
@dataclass(frozen=True)
class RunJob:
    """Run ``job(**kwargs)`` and answer with a JobDone or JobFailed; a checkpoint the job saves
    may pickle to at most ``checkpoint_bytes``."""

    job: JobRef
    kwargs: dict[str, Any]
    checkpoint_bytes: int = 64 << 20


@dataclass(frozen=True)
class RunJobs:
    """Run ``job(**kw)`` for each ``kw`` of ``kwargs`` in turn, each answered as a :class:`RunJob`
    is; after a job that changed what the child can't restore (``unrestorable``) the child
    runs no more of them."""

    job: JobRef
    kwargs: list[dict[str, Any]]
    checkpoint_bytes: int = 64 << 20


@dataclass(frozen=True)
class Exit:
    """Leave the request loop and exit 0."""


@dataclass(frozen=True)
class Prune:
    """Sent while job number ``job`` (1 = the child's first) runs: its next :func:`sweep.report`
    raises :class:`sweep.Pruned`. One that arrives after that job ended is ignored."""

    job: int


@dataclass(frozen=True)
class Restored:
    """The answer to a :class:`RestoreAsk`: the point's last checkpoint, or None."""

    checkpoint: Saved | None


# -- child -> parent ----------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    """Sent once, when the child is pinned and serving (by each rank of an MPI point)."""

    pid: int
    rank: int = 0


@dataclass(frozen=True)
class Report:
    """One :func:`sweep.report` call: named float values at an optional step."""

    values: dict[str, float]
    step: int | None
    time: float

    def row(self, attempt: int) -> dict[str, Any]:
        """The report as stored (``reports`` JSON) and shown: step, time, attempt, values."""
        return {"step": self.step, "time": self.time, "attempt": attempt, **self.values}


@dataclass(frozen=True)
class Checkpoint:
    """One :func:`sweep.checkpoint` call: the job's state, pickled in the child."""

    data: bytes
    time: float


@dataclass(frozen=True)
class RestoreAsk:
    """:func:`sweep.restore` asks for the point's last checkpoint (a :class:`Restored` answers)."""


@dataclass(frozen=True)
class Saved:
    """A point's checkpoint as kept: its ``number`` (1, 2, ... over every attempt and run of the
    point), the ``attempt`` that saved it, when, and the pickled state. Crosses worker ->
    scheduler -> client as :meth:`to_msg` (Dask's metadata carries plain mappings)."""

    number: int
    attempt: int
    time: float
    data: bytes

    def to_msg(self) -> dict[str, Any]:
        return {"number": self.number, "attempt": self.attempt, "time": self.time, "data": self.data}

    @classmethod
    def from_msg(cls, msg: Any) -> Saved | None:
        """The checkpoint of a :meth:`to_msg` mapping; None for None (no checkpoint)."""
        if msg is None:
            return None
        return cls(int(msg["number"]), int(msg["attempt"]), float(msg["time"]), bytes(msg["data"]))


@dataclass(frozen=True)
class Metrics:
    """What the child measured of itself over one job."""

    wall_s: float
    cpu_s: float
    threads: int
    peak_rss: int
    cores: tuple[int, ...]
    log_end: int = -1  # the size of its log file once the job's output was flushed (-1: unknown)


@dataclass(frozen=True)
class JobDone:
    """The job returned; ``unrestorable`` lists what it changed in the child that can't be put
    back (:mod:`sweep.child.isolation`): then the parent replaces the child."""

    outputs: dict[str, Output]
    metrics: Metrics
    unrestorable: tuple[str, ...] = ()
    pruned: bool = False  # it was told to stop (Prune) and returned anyway
    sources: dict[str, str] = field(default_factory=dict)  # the user's files it ran: path -> sha256


@dataclass(frozen=True)
class JobFailed:
    """The job raised (``error`` is the traceback), or its outputs could not be sent back;
    ``pruned``: it was told to stop (Prune) and ended by raising."""

    error: str
    metrics: Metrics
    unrestorable: tuple[str, ...] = ()
    pruned: bool = False
    sources: dict[str, str] = field(default_factory=dict)


Request = RunJob | RunJobs | Exit | Prune | Restored
Reply = Ready | Report | Checkpoint | RestoreAsk | JobDone | JobFailed


def send(fd: int, message: Request | Reply) -> None:
    """Write one framed message to ``fd`` (blocking until all of it is written)."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> Any:
    """Read one framed message from ``fd``; raises ``EOFError`` when the other end is gone."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, size))


# -- the point record -----------------------------------------------------------------------
NAN = float("nan")
TIME_ATTRS = {"units": "seconds since 1970-01-01", "calendar": "proleptic_gregorian"}


def _stored(dtype: str, fill: Any, long_name: str, **attrs: str) -> Any:
    """Field metadata that makes a PointRecord field a per-point variable of the store."""
    return {"dtype": dtype, "fill": fill, "attrs": {**attrs, "long_name": long_name}}


@dataclass
class PointRecord:
    """What became of one point. Fields with store metadata are the store's per-point
    variables, in this order (``status`` last: a point reads done only once all else is written).
    """

    index: tuple[int, ...]
    outputs: dict[str, Output] = field(default_factory=dict)
    attempts: int = field(default=0, metadata=_stored("int32", 0, "attempts made (1 + retries used)"))
    wall_s: float = field(
        default=NAN, metadata=_stored("float64", NAN, "job wall time in the child", units="s")
    )
    cpu_s: float = field(
        default=NAN, metadata=_stored("float64", NAN, "CPU time of the child and its children", units="s")
    )
    peak_threads: int = field(
        default=0, metadata=_stored("int32", 0, "most OS threads the child's tree held")
    )
    thread_budget: int = field(
        default=0, metadata=_stored("int32", 0, "threads the job was allowed (12 + 5k by default)")
    )
    peak_rss: int = field(
        default=0, metadata=_stored("int64", 0, "peak resident memory of the job", units="bytes")
    )
    cores: tuple[int, ...] = field(
        default=(), metadata=_stored("str", "", "CPU ids the child was pinned to, comma-separated")
    )
    rank_threads: tuple[int, ...] = field(
        default=(), metadata=_stored("str", "", "peak threads of each MPI rank, comma-separated")
    )
    rank_rss: tuple[int, ...] = field(
        default=(), metadata=_stored("str", "", "peak RSS of each MPI rank (bytes), comma-separated")
    )
    gpus: tuple[str, ...] = field(
        default=(), metadata=_stored("str", "", "devices the child was given (CUDA_VISIBLE_DEVICES)")
    )
    tpus: tuple[str, ...] = field(
        default=(), metadata=_stored("str", "", "TPU chips the child held, for its whole life")
    )
    peak_gpu_memory: int = field(
        default=0, metadata=_stored("int64", 0, "peak device memory of the job's processes", units="bytes")
    )
    host: str = field(default="", metadata=_stored("str", "", "host the job ran on"))
    affinity_enforced: int = field(
        default=-1,
        metadata=_stored(
            "int64",
            -1,
            "whether the node enforced the CPU pin: 1 yes, 0 no (cores may be shared), -1 unknown",
        ),
    )
    batch_job: str = field(
        default="",
        metadata=_stored(
            "str",
            "",
            'batch system job id of the worker (SLURM, PBS, ...); "ID (restart N)": a requeued '
            "SLURM job's run N+1",
        ),
    )
    pid: int = field(default=0, metadata=_stored("int64", 0, "pid of the child that ran the job"))
    started: float = field(default=NAN, metadata=_stored("float64", NAN, "job start", **TIME_ATTRS))
    finished: float = field(default=NAN, metadata=_stored("float64", NAN, "job end", **TIME_ATTRS))
    error: str = field(
        default="",
        metadata=_stored("str", "", "the job's traceback, the limit it hit, or how its child died"),
    )
    signal: str = field(
        default="", metadata=_stored("str", "", "signal that killed the child by itself (e.g. SIGSEGV)")
    )
    exit_code: int = field(
        default=0, metadata=_stored("int32", 0, "exit code of a child that exited by itself mid-job")
    )
    output_tail: str = field(
        default="",
        metadata=_stored(
            "str", "", "last lines of the child's output when the job failed, or the child died or was killed"
        ),
    )
    reports: list[dict[str, Any]] = field(
        default_factory=list, metadata=_stored("str", "", "JSON list of the job's sweep.report() calls")
    )
    returned: tuple[str, ...] = field(
        default=(), metadata=_stored("str", "", "names of the outputs the job returned, comma-separated")
    )
    shapes: str = field(
        default="",
        metadata=_stored("str", "", "JSON: the shape of each array output the job returned (as returned)"),
    )
    inputs: str = field(
        default="",
        metadata=_stored("str", "", "id of the inputs the point ran with (a key of sweep_inputs_seen)"),
    )
    resumed_from: int = field(
        default=0,
        metadata=_stored("int32", 0, "number of the checkpoint its last attempt restored (0: none)"),
    )
    checkpoints: int = field(
        default=0, metadata=_stored("int32", 0, "checkpoints its attempts saved (sweep.checkpoint)")
    )
    requeued: int = field(
        default=0,
        metadata=_stored("int32", 0, "times it ran again because its worker was lost (no retry spent)"),
    )
    logs: list[str] = field(default_factory=list)  # what each attempt printed (kept in OUTPUT/logs)
    sources: dict[str, str] = field(
        default_factory=dict
    )  # the user's files the job ran (sweep.child.sources)
    status: Status = field(
        default="failed", metadata=_stored("str", "pending", "one of " + ", ".join(STATUSES))
    )

    def stored(self, name: str) -> Any:
        """The value of field ``name`` as the store holds it (tuples joined, reports as JSON)."""
        return stored_column([self], name)[0]


_JOINED = frozenset(("cores", "returned", "rank_threads", "rank_rss", "gpus", "tpus"))


def stored_column(records: list[PointRecord], name: str) -> list[Any]:
    """Field ``name`` of each of ``records`` as the store holds it (:meth:`PointRecord.stored`),
    for a batch at once."""
    values = list(map(attrgetter(name), records))
    if name in _JOINED:
        return [",".join(map(str, v)) for v in values]
    if name == "reports":
        import json

        return [json.dumps(v) if v else "" for v in values]
    return values


def stored_fields() -> dict[str, dict[str, Any]]:
    """The store's per-point variables: name -> {dtype, fill, attrs}, in write order."""
    return {f.name: dict(f.metadata) for f in fields(PointRecord) if f.metadata}


# -- worker -> a follower (``sweep logs --follow``) -----------------------------------------
@dataclass(frozen=True)
class LogChunk:
    """Part of what one attempt at a point has printed so far, read on its worker.

    ``data`` starts at byte ``start`` of the attempt's output; ``ended`` says the attempt is
    over and ``data`` runs to its end. ``start`` past the offset asked for means the bytes in
    between are no longer kept (more than ``child.log_bytes`` were printed since).
    """

    attempt: int
    start: int
    data: bytes
    ended: bool


@dataclass(frozen=True)
class StoppedAttempt:
    """What a running attempt had printed when a cancel killed its child (a worker's answer to
    ``stop``): kept in the store's logs, as a finished attempt's output is."""

    index: tuple[int, ...]
    attempt: int
    text: str


@dataclass
class Output:
    """One named job output: values (a numpy array or a Python number), dim names, dim coords."""

    values: Any
    dims: tuple[str, ...]
    coords: dict[str, Any] = field(default_factory=dict)
