"""The result store: one zarr group per sweep, written point by point, read with xarray.

Layout (``xarray.open_zarr`` reads it as is; :func:`open_results` adds nothing but
convenience): dims are the sweep dims (the grid axes, or ``point``) plus each output's own
dims. Per point there are the bookkeeping variables of :data:`RECORD_VARS`, one per stored
field of :class:`~sweep.protocol.PointRecord`; job outputs are added when the first point
that returns them is done.

Writes go straight to the zarr arrays (xarray only creates variables). Within one batch a
point's outputs and measurements are written before its ``status``, and zarr's local store
replaces each chunk file atomically, so a point never reads as ``done`` with partial data,
whenever the writer is killed. Only one process may write: :class:`Store` holds an
exclusive ``flock`` on ``<output>/.sweep.lock``, which names the holder's pid and host.
"""

from __future__ import annotations

import copy
import errno
import json
import logging
import math
import os
import shutil
import socket
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from sweep import _compat, inputs, provenance
from sweep.errors import SweepError
from sweep.protocol import FINISHED, NOT_DONE, PointRecord, Saved, StoppedAttempt, stored_fields
from sweep.store import checkpoints, consolidated, growth, integrity, layout
from sweep.store.layout import LOGS, METADATA, NOT_DATA
from sweep.store.lock import StoreLock, locked
from sweep.store.pointmask import PointMask

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# files in the store that are not its data: kept when it is cleared or rebuilt
log = logging.getLogger(__name__)
# zarr's I/O thread pool is capped and fills up while the store is opened, before any job
# runs: once uncapped jobs have used up the user's `ulimit -u`, the client could not start
# the threads it needs to write results.
IO_THREADS = 4
POINTS_PER_CHUNK = 4096
OUTPUT_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Var:
    dtype: Any
    fill: Any
    attrs: Mapping[str, str]


# Per-point bookkeeping, in write order (``status`` last), derived from PointRecord.
RECORD_VARS: dict[str, Var] = {
    name: Var(str if meta["dtype"] == "str" else meta["dtype"], meta["fill"], meta["attrs"])
    for name, meta in stored_fields().items()
}


class StoreFull(SweepError, RuntimeError):
    """The store's file system is full (or over quota); points already written are kept."""

    exit_code = 3


class StoreGone(SweepError, RuntimeError):
    """The store's folder was moved or deleted while a sweep wrote it: the sweep stopped, and
    nothing was written at the old path."""

    exit_code = 1


class StoreMismatch(SweepError, RuntimeError):
    """The store was made by a different space or from other inputs; the message lists how."""


def _chunks(shape: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Chunk the sweep dims so a chunk holds at most ``budget`` points (last dim fastest)."""
    chunks, room = [], max(1, budget)
    for n in reversed(shape):
        c = max(1, min(n, room))
        chunks.append(c)
        room = max(1, room // c)
    return tuple(reversed(chunks))


class Store:
    """An open, locked result store for one sweep. Use :meth:`open` and :meth:`close`."""

    def __init__(self, path: Path, lock: StoreLock) -> None:
        self.path = path
        self._lock: StoreLock | None = lock
        self.group: Any = _open_group(path, "r+")
        self._arrays: dict[str, Any] = {}
        self.dims: tuple[str, ...] = tuple(json.loads(self.group.attrs["sweep_dims"]))
        self.shape: tuple[int, ...] = self.group["status"].shape
        # an output whose variable is gone is created again by the next point that returns it
        self.outputs: dict[str, list[str]] = {
            name: dims for name, dims in _outputs(self.group).items() if (path / name / METADATA).exists()
        }
        self._coords: dict[str, np.ndarray | None] = {}
        self.growth: growth.Growth | None = None  # set when open() grew the store to a new space
        self.created = False  # set when open() made the store (new, or cleared by force)
        self._ids: np.ndarray | None = None  # point ids, read when first needed
        self._now: inputs.Inputs | None = None  # this run's inputs (set by open)
        self._job_file: str | None = None
        self._seen: dict[str, str] = json.loads(self.group.attrs.get("sweep_inputs_seen", "{}"))
        self._ids_by_sources: dict[tuple[tuple[str, str], ...], str] = {}
        self._checkpointed = checkpoints.kept(path)  # point ids with a checkpoint kept

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(
        cls, path: str | os.PathLike, loaded: Any, *, force: bool = False, keep_done: bool = False
    ) -> Store:
        """Lock ``path`` and open its store for ``loaded`` (a LoadedRecipe), creating it if new.

        A store made for a smaller space of the same kind and dims (grid values, list points
        or random ``n`` added) is grown in place: its points are kept, matched by parameter
        values, and the new ones added as ``pending`` (:mod:`sweep.store.growth`; ``store.growth``
        says how many of each). A space that would drop points that ran, or from other inputs
        (fixed parameters, job source and the files it imports, child settings, inherited
        environment: :mod:`sweep.inputs`) than any done point ran with, raises
        :class:`StoreMismatch` listing them, unless ``keep_done`` (keep the done points: those
        still in the space, or those computed with the old inputs; the change is appended to
        the store's ``sweep_history``). Any other space is a different sweep: refused.
        ``force`` deletes the store's data first, whatever it held, and starts over in place.
        """
        path = Path(path)
        lock = _lock(path)
        _compat.start_zarr_io_threads(IO_THREADS)
        try:
            fingerprint = loaded.space.fingerprint()
            changes: list[str] = []
            grown: growth.Growth | None = None
            _finish_swap(path)
            _clean_staging(path)
            if (path / METADATA).exists():
                consolidated.strip(path)  # it would be stale while this run adds or grows variables
            has_data = any(e.name not in NOT_DATA for e in path.iterdir())
            if has_data and force:
                _clear(path)  # start over in place, whatever the store held
            elif has_data and not (path / METADATA).exists():
                raise integrity.StoreDamaged(
                    f"{path} holds parts of a store but no {path / 'zarr.json'} (a store moved or deleted "
                    "while a sweep wrote it?); restore it, or run with --force (or another --output) to "
                    "start over"
                )
            now = inputs.of(loaded)  # reads and hashes the job's source: once per open
            if (path / METADATA).exists():
                attrs = _read_attrs(path)
                ran = inputs_ran(path)
                now = inputs.of(loaded, {f for _, i in ran for f in i.sources})
                moved = attrs.get("sweep_fingerprint") != fingerprint
                grown = _growth(path, attrs, loaded.space, keep_done) if moved else None
                changes = _changed_inputs(path, ran, now, keep_done=keep_done)
                if grown is not None:
                    _grow(path, loaded, fingerprint, grown)
            created = not (path / METADATA).exists()
            if created:
                _create(path, loaded, fingerprint)
            else:
                _add_record_vars(path)
            store = cls(path, lock)
            store.created = created
            store.growth = grown
            store._record_inputs(loaded, now, changes)
            return store
        except BaseException:
            lock.release()
            raise

    def intact(self) -> bool:
        """Whether the store's folder is still the one this process locked."""
        return self._lock is None or self._lock.intact()

    def check_intact(self) -> None:
        """StoreGone unless :meth:`intact`: writing on would make a new, partial store at the old
        path (zarr creates what is missing)."""
        if not self.intact():
            raise StoreGone(
                f"{self.path} was moved or deleted while the sweep ran; it stopped and wrote nothing "
                "more there. Submit again at the store's new place (--output) to resume it"
            )

    def close(self) -> None:
        """Consolidate the store's metadata (:mod:`sweep.store.consolidated`), then release it."""
        if self._lock is not None:
            if self.intact():
                consolidated.consolidate(self.path)
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------------
    def statuses(self) -> np.ndarray:
        return np.asarray(self.group["status"][...], dtype=object)

    def latest_reports(self, limit: int) -> dict[tuple[int, ...], list[dict[str, Any]]]:
        """The stored :func:`sweep.report` rows of the ``limit`` points that ended last among
        those that reported (what the ``/sweep`` page draws of a sweep's earlier runs)."""
        text = np.asarray(self.group["reports"][...], dtype=object)
        reported = np.argwhere(text != "")
        if not len(reported):
            return {}
        ended = np.asarray(self.group["finished"][...], dtype="float64")[tuple(reported.T)]
        last = reported[np.argsort(np.nan_to_num(ended, nan=-np.inf), kind="stable")[-limit:]]
        return {tuple(int(i) for i in ix): json.loads(str(text[tuple(ix)])) for ix in last}

    def todo(self, only_failed: bool = False) -> PointMask:
        """Indices (a :class:`PointMask`) of points not yet ``done`` (pending, failed, timed out
        or killed); with ``only_failed``, only the failed, timed-out and killed ones.

        Done points whose stored outputs are missing or unreadable are set back to
        ``pending`` first (see :mod:`sweep.store.integrity`), so they are among them (unless
        ``only_failed``).
        """
        statuses = self.statuses()
        done = np.isin(statuses, FINISHED)
        lost = integrity.lost_points(self.group, self.path, _outputs(self.group), done, _returned(self.group))
        if lost.any():
            lost_ix = [tuple(int(i) for i in ix) for ix in np.argwhere(lost)]
            log.warning("%s: %d done point(s) lost their outputs; they run again", self.path, len(lost_ix))
            self._put("status", _coordinates(lost_ix), ["pending"] * len(lost_ix))
        wanted = np.isin(statuses, NOT_DONE) if only_failed else ~done | lost
        return PointMask(wanted)

    def _record_inputs(self, loaded: Any, now: inputs.Inputs, kept_over: list[str]) -> None:
        """Store the inputs this run uses; ``kept_over`` (changes accepted with keep_done) go
        to ``sweep_history`` with the time."""
        self._now, self._job_file = now, inputs.job_file(loaded.job)
        extra: dict[str, Any] = {}
        if kept_over:
            history = json.loads(self.group.attrs.get("sweep_history", "[]"))
            extra["sweep_history"] = [*history, {"time": _now(), "kept_done_over": kept_over}]
            log.warning("%s: inputs changed, done points kept: %s", self.path, "; ".join(kept_over))
        self.set_attrs(
            **extra,
            sweep_inputs=now.to_json(),
            sweep_recipe=loaded.effective_text,
            sweep_recipe_source=loaded.text,
            sweep_name_from=loaded.name_from,
            sweep_recipe_dir=str(Path(loaded.base).resolve()),
        )

    def run_started(self) -> None:
        """Mark the store as being run by this process (``sweep_run_state = running``).

        A run that ends calls :meth:`run_ended`; one whose process dies leaves ``running``
        behind with the lock released, which :func:`last_run` reports as an abnormal end.
        """
        self.set_attrs(
            sweep_last_run=_now(),
            sweep_run_state="running",
            sweep_run_by=f"pid {os.getpid()} on {socket.gethostname()}",
            sweep_run_path=str(self.path.resolve()),  # a store moved while it runs says so later
        )

    def run_ended(self, state: str) -> None:
        """Record how the run ended: ``finished``, ``cancelled``, ``interrupted`` (Ctrl-C) or
        ``failed`` (an exception).

        On a full file system this can't be written; the store then reads as ended abnormally.
        """
        if not self.intact():
            return
        try:
            self.set_attrs(sweep_last_end=_now(), sweep_run_state=state)
        except OSError as exc:
            log.warning("%s: could not record the end of the run: %s", self.path, exc)

    def attr(self, name: str) -> str | None:
        """The store attribute ``name`` as stored (JSON text for structured ones), or None."""
        value = self.group.attrs.get(name)
        return None if value is None else str(value)

    def set_attrs(self, **attrs: Any) -> None:
        self.group.attrs.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in attrs.items()})

    # -- writing ------------------------------------------------------------------------
    def write(self, records: list[PointRecord]) -> list[PointRecord]:
        """Write finished points; returns the records as written.

        A record whose outputs don't fit what the store already holds (another shape or
        dims) is written as ``failed`` with the reason.
        """
        if not records:
            return []
        self.check_intact()
        try:
            return self._write(records)
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            if len(records) == 1:
                return self._write_one(records[0])
        # the batch didn't fit: keep as many of its points as fit, one by one
        return [written for r in records for written in self._write_one(r)]

    def _write_one(self, record: PointRecord) -> list[PointRecord]:
        try:
            return self._write([record], skip_same=True)
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            raise StoreFull(f"cannot write {self.path}: {exc.strerror}") from None

    def _stamped(self, record: PointRecord) -> PointRecord:
        """The record with the outputs it returned and the id of the inputs it ran with (a new
        id is added to the store's ``sweep_inputs_seen``)."""
        key = tuple(sorted(record.sources.items()))
        ident = self._ids_by_sources.get(key)
        if ident is None and self._now is not None:
            ran = self._now.ran(record.sources, self._job_file)
            ident = self._ids_by_sources[key] = ran.ident()
            if ident not in self._seen:
                self._seen[ident] = ran.to_json()
                self.set_attrs(sweep_inputs_seen=self._seen)
        shapes = {n: list(np.shape(o.values)) for n, o in record.outputs.items() if np.ndim(o.values)}
        stamped = copy.copy(record)  # dataclasses.replace costs twice as much, per point
        stamped.returned = tuple(record.outputs)
        stamped.inputs = ident or ""
        stamped.shapes = json.dumps(shapes) if shapes else ""
        return stamped

    def _write(self, records: list[PointRecord], skip_same: bool = False) -> list[PointRecord]:
        records = [self._stamped(self._checked(r)) for r in records]
        points = _coordinates([r.index for r in records])  # once for every variable all points have
        for name in self.outputs:
            having = [r for r in records if name in r.outputs]
            values = [np.asarray(r.outputs[name].values) for r in having]
            if values and values[0].ndim == 0:
                at = points if len(having) == len(records) else _coordinates([r.index for r in having])
                self._put(name, at, values)
                continue
            for r, v in zip(having, values):
                where = r.index + (slice(None),) * v.ndim
                array = self._array(name)
                v = _padded(v, array.shape[len(self.dims) :], array.dtype)
                # after a full disk, a chunk already written whole is not written again: an
                # atomic rewrite needs room for a second copy
                if skip_same and np.array_equal(array[where], v, equal_nan=v.dtype.kind in "fc"):
                    continue
                array[where] = v
        for name, var in RECORD_VARS.items():
            values = [r.stored(name) for r in records]
            self._put(name, points, [var.fill if v is None else v for v in values])
        self._write_logs(records)
        if self._checkpointed:
            for r in records:
                if r.status in FINISHED:
                    self.drop_checkpoint(r.index)
        return records

    def point_id(self, index: tuple[int, ...]) -> str:
        """The id of the point at ``index`` (its parameters' hash: stable when the store grows)."""
        if self._ids is None:
            self._ids = np.asarray(self.group["point_id"][...], dtype=object)
        return str(self._ids[index])

    def keep_checkpoint(self, index: tuple[int, ...], saved: Saved) -> None:
        """Keep ``saved`` as the last checkpoint of the point at ``index``
        (:mod:`sweep.store.checkpoints`)."""
        self.check_intact()
        ident = self.point_id(index)
        checkpoints.write(self.path, ident, saved)
        self._checkpointed.add(ident)

    def checkpoint(self, index: tuple[int, ...]) -> Saved | None:
        """The last checkpoint kept of the point at ``index``, or None."""
        ident = self.point_id(index)
        return checkpoints.read(self.path, ident) if ident in self._checkpointed else None

    def drop_checkpoint(self, index: tuple[int, ...]) -> None:
        """Delete the checkpoint of the point at ``index`` (it is done)."""
        ident = self.point_id(index)
        if ident in self._checkpointed:
            checkpoints.remove(self.path, ident)
            self._checkpointed.discard(ident)

    def _write_logs(self, records: list[PointRecord]) -> None:
        """Each attempt's output of the points that printed anything, numbered on from the
        point's attempts of earlier runs (``sweep retry`` keeps the failing attempt's log)."""
        for r in records:
            if any(r.logs):
                self._append_logs(r.index, list(r.logs))

    def keep_logs(self, stopped: list[StoppedAttempt]) -> None:
        """Keep what attempts killed by a cancel printed (``logs/<point_id>/<n>.txt``, numbered
        on from the point's earlier attempts); their points stay ``pending``."""
        if not stopped or not self.intact():
            return
        for a in stopped:
            self._append_logs(a.index, [a.text])

    def _append_logs(self, index: tuple[int, ...], texts: list[str]) -> None:
        """Write ``texts`` as the next attempts' logs of the point at ``index``."""
        folder = self.path / LOGS / self.point_id(index)
        folder.mkdir(parents=True, exist_ok=True)
        before = max((int(p.stem) for p in folder.glob("*.txt") if p.stem.isdigit()), default=0)
        for attempt, text in enumerate(texts, start=before + 1):
            (folder / f"{attempt}.txt").write_text(text)

    def set_params(self, index: tuple[int, ...], params: Mapping[str, Any]) -> None:
        """Write a search trial's parameters as the coordinates of its slot (chosen as it starts)."""
        for name, value in params.items():
            self._put(name, _coordinates([index]), [value])

    def _put(self, name: str, where: tuple[np.ndarray, ...], values: list[Any]) -> None:
        """One point-wise write of ``values`` at the points ``where`` (:func:`_coordinates`:
        one zarr call for the batch).

        Always by ``vindex``, one point too: with numpy 1.x, zarr 3 can't set one element of a
        string array by plain indexing (numcodecs' VLenUTF8 gets an array, not a str)."""
        array = self._array(name)
        array.vindex[where] = np.array(values, dtype=object if array.dtype.kind in "OTU" else array.dtype)

    def _array(self, name: str) -> Any:
        """Variable ``name``'s zarr array, set to write every chunk, even one that holds only the
        fill value: a done point's chunk is then always on disk, and a missing one means lost
        data (:func:`sweep.store.integrity.lost_points`), never a NaN result."""
        import zarr

        array = self._arrays.get(name)
        if array is None:
            with zarr.config.set({"array.write_empty_chunks": True}):
                array = self._arrays[name] = self.group[name]
        return array

    def _checked(self, record: PointRecord) -> PointRecord:
        """The record, or a failed one with the reason when its outputs don't fit the store."""
        new, grown = [], {}
        n = len(self.dims)
        # each output dim with the outputs that use it: once per record, not once per output
        users: dict[str, set[str]] = {}
        for other, other_dims in self.outputs.items():
            for d in other_dims[n:]:
                users.setdefault(d, set()).add(other)
        try:
            for name, out in record.outputs.items():
                integrity.check_coords(name, out, self._stored_coords(out.dims, users))
                dims = self.outputs.get(name)
                if dims is None:
                    self._check_new_output(name, out)
                    new.append(name)
                    continue
                array = self._array(name)
                shared = frozenset(d for d, names in users.items() if names - {name})
                shape = integrity.check_fits(name, out, tuple(dims[n:]), array.shape[n:], array.dtype, shared)
                if shape != tuple(array.shape[n:]):
                    grown[name] = shape
        except (ValueError, TypeError) as exc:
            return replace(record, status="failed", outputs={}, error=str(exc))
        # only once every output fits: a failed point fixes no schema
        self._add_outputs({name: record.outputs[name] for name in new})
        for name, shape in grown.items():  # the new part reads NaN for every point stored before
            log.info("%s: output %r grows to shape %s", self.path, name, shape)
            self._array(name).resize(tuple(self.shape) + shape)
        return record

    def _stored_coords(self, dims: tuple[str, ...], used: Mapping[str, Any]) -> dict[str, np.ndarray | None]:
        """The store's coordinate values of each of ``dims`` some output already uses (``used``:
        the output dims in use, as keys)."""
        for d in set(dims) & set(used):
            if d not in self._coords:
                self._coords[d] = np.asarray(self.group[d][...]) if d in self.group else None
        return {d: self._coords[d] for d in dims if d in used}

    def _check_new_output(self, name: str, out: Any) -> None:
        """Raise ValueError unless output ``name``, new to the store, can be added as it is."""
        if name in RECORD_VARS or name in self.dims or name in self.group:
            raise ValueError(f"output name {name!r} clashes with a sweep variable or axis; rename it")
        clash = set(out.dims) & set(self.dims)
        if clash:
            raise ValueError(f"output {name!r} uses dims {sorted(clash)} that are sweep axes; rename them")

    def _add_outputs(self, new: dict[str, Any]) -> None:
        """Create the variables of outputs ``new`` (name: DataArray) in one write."""
        if not new:
            return
        specs = []
        for name, out in new.items():
            values = np.asarray(out.values)
            dtype = values.dtype if values.dtype.kind in "fc" else np.dtype("float64")
            coords = {d: np.asarray(c) for d, c in out.coords.items() if d not in self.group}
            specs.append(NewOutput(name, tuple(out.dims), values.shape, dtype, coords))
        _create_outputs(self.path, specs)
        for spec in specs:
            self._coords.update(spec.coords)
            self.outputs[spec.name] = list(self.dims + spec.dims)
        self.set_attrs(sweep_outputs=self.outputs)


def _lock(path: Path) -> StoreLock:
    """Make ``path`` if needed and take its writer lock; on a full disk, StoreFull, and a folder
    made here is removed again."""
    made = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        return StoreLock(path)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            raise
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise StoreFull(
            f"cannot create {path}: {exc.strerror}; nothing ran. Free space and submit again"
        ) from None


def _open_group(path: Path, mode: Literal["r", "r+"]) -> Any:
    """The store's zarr group; StoreDamaged naming the file when its metadata can't be read."""
    import zarr

    integrity.check_store(path)
    try:
        return cast(Any, zarr.open_group(str(path), mode=mode))
    except Exception:
        integrity.check_metadata(path)
        raise


def _coordinates(indices: list[tuple[int, ...]]) -> tuple[np.ndarray, ...]:
    """The points at ``indices`` as zarr's coordinate selection: one array of positions per dim."""
    return tuple(np.array(ix, dtype=np.intp) for ix in zip(*indices))


def _padded(values: np.ndarray, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``values`` in an array of ``shape`` (the variable's, per point), NaN where they don't reach."""
    if values.shape == tuple(shape):
        return values
    out = np.full(shape, np.nan, dtype=dtype)
    out[tuple(slice(0, s) for s in values.shape)] = values
    return out


def _outputs(group: Any) -> dict[str, list[str]]:
    return dict(json.loads(group.attrs.get("sweep_outputs", "{}")))


def _returned(group: Any) -> np.ndarray | None:
    """Per point, the names of the outputs it returned, comma-separated (None in a store made
    before they were recorded)."""
    return np.asarray(group["returned"][...], dtype=object) if "returned" in group else None


def lost_points(path: str | os.PathLike) -> np.ndarray:
    """Mask of the store's done points whose outputs are missing or unreadable (read only)."""
    group = _open_group(Path(path), "r")
    done = np.asarray(group["status"][...], dtype=object) == "done"
    return integrity.lost_points(group, Path(path), _outputs(group), done, _returned(group))


def inputs_ran(path: str | os.PathLike) -> list[tuple[int, inputs.Inputs]]:
    """The distinct inputs the store's done points ran with, each with how many points."""
    group = _open_group(Path(path), "r")
    return _inputs_by_point(group, dict(group.attrs))


def _inputs_by_point(group: Any, attrs: Mapping[str, Any]) -> list[tuple[int, inputs.Inputs]]:
    done = np.isin(np.asarray(group["status"][...], dtype=object), FINISHED)
    if not done.any():
        return []
    seen = json.loads(attrs.get("sweep_inputs_seen", "{}"))
    ids = np.asarray(group["inputs"][...], dtype=object)[done] if "inputs" in group else np.array([])
    legacy = int(done.sum()) - sum(1 for i in ids if i in seen)  # ran before points recorded theirs
    out = [
        (int(n), inputs.Inputs.from_json(seen[i]))
        for i, n in zip(*np.unique(ids, return_counts=True))
        if i in seen
    ]
    if legacy and "sweep_inputs" in attrs:
        out.append((legacy, inputs.Inputs.from_json(attrs["sweep_inputs"])))
    return out


TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # of the run times in the store's attributes


def _now() -> str:
    return time.strftime(TIME_FORMAT)


def last_run(path: str | os.PathLike, attrs: Mapping[str, Any]) -> str:
    """One line on the store's last run, from its attributes and its lock."""
    state = attrs.get("sweep_run_state")
    since, by, end = (
        attrs.get("sweep_last_run", "?"),
        attrs.get("sweep_run_by", "?"),
        attrs.get("sweep_last_end"),
    )
    if state is None:
        return "no run recorded"
    if state == "running" and locked(Path(path)):
        return f"running now (since {since}, {by})"
    ran_at = attrs.get("sweep_run_path")
    if state == "running" and ran_at and ran_at != str(Path(path).resolve()):
        return (
            f"the last run (since {since}, {by}) stopped when the store was moved from {ran_at} while "
            "it ran; what was written is here. `sweep submit` with this --output resumes it"
        )
    if state == "running":
        return (
            f"the last run (since {since}, {by}) ended abnormally: its process died before it "
            "could finish (killed, lost its terminal or its machine); `sweep submit` again resumes"
        )
    return f"the last run (since {since}, {by}) {state} at {end}"


def _changed_inputs(
    path: Path, ran: list[tuple[int, inputs.Inputs]], now: inputs.Inputs, *, keep_done: bool
) -> list[str]:
    """The inputs that differ from those the store's done points ran with (``ran``: each
    distinct inputs with its count of points); raises StoreMismatch listing them, with how
    many points each concerns, unless ``keep_done`` (they are returned)."""
    groups = [(n, inputs.differences(i, now)) for n, i in ran]
    changes = list(dict.fromkeys(c for _, diff in groups for c in diff))
    if not changes or keep_done:
        return changes
    if len(groups) == 1:
        listed = "".join(f"\n  {c}" for c in changes)
    else:
        listed = "".join(
            f"\n  {n} done point(s) ran with:" + "".join(f"\n    {c}" for c in diff)
            for n, diff in groups
            if diff
        )
    raise StoreMismatch(
        f"{path} was computed from other inputs:{listed}\nUse --force to start over in place, "
        "--output PATH to run elsewhere, or --keep-done to keep the done points and run the rest with "
        "the new inputs (recorded in the store's sweep_history)"
    )


def _read_attrs(path: Path) -> dict[str, Any]:
    try:
        return layout.read_attrs(path)
    except json.JSONDecodeError:
        integrity.check_metadata(path)
        raise


def _clear(path: Path) -> None:
    shutil.rmtree(path / LOGS, ignore_errors=True)
    checkpoints.clear(path)
    for entry in path.iterdir():
        if entry.name in NOT_DATA:
            continue
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _growth(path: Path, attrs: dict[str, Any], space: Any, keep_done: bool) -> growth.Growth:
    """How the store at ``path`` grows to ``space``; StoreMismatch when it is another sweep, or
    when points that ran would be dropped (unless ``keep_done``)."""
    g = growth.compare(_open_group(path, "r"), attrs, space)
    if g is None:
        raise StoreMismatch(
            f"{path} holds a different sweep ({attrs.get('sweep_space', '?')} space over "
            f"{attrs.get('sweep_dims', '?')} of recipe {attrs.get('sweep_name', '?')!r}, "
            f"{attrs.get('sweep_points', '?')} points; this recipe has a {space.kind} space over "
            f"{json.dumps(list(space.dims))}, {len(space)} points{_settings_changed(attrs, space)}). "
            "Use another --output, or --force to delete it and start over"
        )
    if g.dropped and not keep_done:
        shown = "".join(f"\n  {p}" for p in g.dropped[:10])
        more = f"\n  ... and {len(g.dropped) - 10} more" if len(g.dropped) > 10 else ""
        raise StoreMismatch(
            f"{path}: this space leaves out {len(g.dropped)} point(s) that already ran:{shown}{more}\n"
            f"Use --keep-done to keep the {g.kept} point(s) still in the space and drop these, "
            "--output PATH to run elsewhere, or --force to delete it all and start over"
        )
    return g


def _settings_changed(attrs: Mapping[str, Any], space: Any) -> str:
    """What differs between the store's space settings (a search's sampler, objective,
    direction, axes...) and ``space``'s, as ``; key: old → new``, or ""."""
    try:
        old = json.loads(attrs.get("sweep_space_settings") or "{}")
        new = json.loads(space.settings or "{}")
    except ValueError:
        return ""
    if not isinstance(old, dict) or not isinstance(new, dict) or old == new:
        return ""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    changed = [f"{k}: {old.get(k, '(not set)')} → {new.get(k, '(not set)')}" for k in keys]
    return "; " + ", ".join(changed)


def _grow(path: Path, loaded: Any, fingerprint: str, g: growth.Growth) -> None:
    """Rebuild the store at ``path`` for ``loaded``'s space with the points ``g`` keeps."""
    old = _open_group(path, "r")
    outputs = {n: d for n, d in _outputs(old).items() if (path / n / METADATA).exists()}
    staging = _staging(path)
    try:
        _build(staging, loaded, fingerprint)
        n = len(loaded.space.dims)
        _create_outputs(
            staging,
            [
                NewOutput(
                    name,
                    tuple(dims[n:]),
                    old[name].shape[n:],
                    old[name].dtype,
                    {d: np.asarray(old[d][...]) for d in dims[n:] if d in old},
                )
                for name, dims in outputs.items()
            ],
        )
        new = _open_group(staging, "r+")
        # a search's parameters are written as its trials start: kept trials keep theirs
        chosen = list(loaded.space.names) if loaded.space.kind == "search" else []
        growth.copy_points(old, new, g, [*RECORD_VARS, *outputs, *chosen])
        keep = {k: v for k, v in old.attrs.items() if k not in new.attrs or k == "sweep_created"}
        history = json.loads(old.attrs.get("sweep_history", "[]"))
        entry = {
            "time": _now(),
            "grew": g.summary(),
            "points": [old.attrs.get("sweep_points"), len(loaded.space)],
        }
        if g.dropped:
            entry["dropped"] = g.dropped
        new.attrs.update(
            {**keep, "sweep_outputs": json.dumps(outputs), "sweep_history": json.dumps([*history, entry])}
        )
        _swap_in(path, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: the space changed: %s", path, g.summary())


def _clean_staging(path: Path) -> None:
    """Remove what a rebuild of the store at ``path`` that was killed left beside it (called
    under the store's lock: no rebuild of it runs)."""
    for staging in layout.stagings(path):
        shutil.rmtree(staging, ignore_errors=True)


def _staging(path: Path) -> Path:
    staging = layout.staging(path)
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def _swap_in(path: Path, staging: Path) -> None:
    """Replace the store at ``path`` (if any) with the one in ``staging``: the old one is moved
    aside with its ``zarr.json`` first, the new one moved in with its ``zarr.json`` last, so a
    reader sees the old store, no store or the new one, and :func:`_finish_swap` puts the old
    one back if this is cut short."""
    backup = layout.backup(path)
    if (path / METADATA).exists():
        backup.mkdir()
        os.replace(path / METADATA, backup / METADATA)
        for entry in path.iterdir():
            if entry.name not in NOT_DATA:
                os.replace(entry, backup / entry.name)
    for entry in staging.iterdir():
        if entry.name != METADATA:
            os.replace(entry, path / entry.name)
    os.replace(staging / METADATA, path / METADATA)
    shutil.rmtree(backup, ignore_errors=True)


def _finish_swap(path: Path) -> None:
    """After a :func:`_swap_in` that was cut short: keep the new store if it is whole, else
    put the old one back."""
    backup = layout.backup(path)
    if not backup.exists():
        return
    if not (path / METADATA).exists() and (backup / METADATA).exists():
        log.warning("%s: a store rebuild was cut short; the store before it is put back", path)
        _clear(path)
        for entry in backup.iterdir():
            if entry.name != METADATA:
                os.replace(entry, path / entry.name)
        os.replace(backup / METADATA, path / METADATA)
    shutil.rmtree(backup, ignore_errors=True)


def _create(path: Path, loaded: Any, fingerprint: str) -> None:
    """Create the store at ``path``: built aside, then moved in with its zarr.json last, so a
    reader sees no store or a whole one, never a half-written skeleton."""
    staging = _staging(path)
    try:
        _build(staging, loaded, fingerprint)
        _swap_in(path, staging)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise StoreFull(
                f"cannot create {path}: {exc.strerror}; nothing ran. Free space and submit again"
            ) from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class NewOutput:
    """An output variable to add: per point ``dims`` of ``shape`` and ``dtype``, with the
    coordinates of those dims the store does not hold yet."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: Any
    coords: dict[str, Any]


def _create_outputs(path: Path, outputs: list[NewOutput]) -> None:
    """Add ``outputs`` to the store at ``path``, all NaN, each chunked to about
    OUTPUT_CHUNK_BYTES, fast: per dtype, the first through xarray (with every new coordinate),
    the rest as copies of its zarr metadata under their own names, shapes and dims. One xarray
    write per output listed every member of the group each time: a job returning 3000 scalars
    took half an hour to store its first point."""
    import zarr

    if not outputs:
        return
    group = _open_group(path, "r+")
    sweep_dims = tuple(json.loads(group.attrs["sweep_dims"]))
    sweep_shape = tuple(group["status"].shape)
    coords = {d: c for out in outputs for d, c in out.coords.items() if d not in group}
    by_dtype: dict[str, list[NewOutput]] = {}
    for out in outputs:
        by_dtype.setdefault(np.dtype(out.dtype).str, []).append(out)
    for same in by_dtype.values():
        first, *rest = same
        _create_with_xarray(path, first, sweep_dims, sweep_shape, coords)
        coords = {}
        template = zarr.open_array(str(path / first.name), mode="r")
        for out in rest:
            group.create_array(
                out.name,
                shape=sweep_shape + tuple(out.shape),
                dtype=template.dtype,
                chunks=_output_chunks(sweep_shape, out),
                fill_value=template.fill_value,
                compressors=template.compressors,
                serializer=template.serializer,
                filters=template.filters,
                attributes=dict(template.attrs),
                dimension_names=sweep_dims + out.dims,
            )


def _output_chunks(sweep_shape: tuple[int, ...], out: NewOutput) -> tuple[int, ...]:
    """Chunks of an output: whole per point, as many points as fit in about OUTPUT_CHUNK_BYTES."""
    per_point = max(1, math.prod(out.shape) * np.dtype(out.dtype).itemsize)
    return _chunks(sweep_shape, min(POINTS_PER_CHUNK, OUTPUT_CHUNK_BYTES // per_point)) + tuple(out.shape)


def _create_with_xarray(
    path: Path, out: NewOutput, sweep_dims: tuple[str, ...], sweep_shape: tuple[int, ...], coords: dict
) -> None:
    """Add output ``out`` and the coordinates ``coords`` through xarray (its encoding is the
    template the other outputs of its dtype copy)."""
    import dask.array as da
    import xarray as xr

    chunks = _output_chunks(sweep_shape, out)
    data = da.full(sweep_shape + tuple(out.shape), np.nan, dtype=out.dtype, chunks=chunks)
    ds = xr.Dataset({out.name: (sweep_dims + out.dims, data)}, coords=coords)
    ds.attrs.update(_open_group(path, "r").attrs)  # appending writes these over the group's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(
            str(path),
            mode="a",
            compute=False,
            consolidated=False,
            encoding={out.name: {"fill_value": np.nan, "chunks": chunks}},
        )


def _record_vars(
    names: list[str], dims: tuple[str, ...], shape: tuple[int, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-point variables ``names`` of :data:`RECORD_VARS`, unset, and their encodings."""
    import dask.array as da

    chunks = _chunks(shape, POINTS_PER_CHUNK)
    data_vars, encoding = {}, {}
    for name in names:
        var = RECORD_VARS[name]
        if var.dtype is str:
            values = np.full(shape, var.fill, dtype=object)
            encoding[name] = {"chunks": chunks}
        else:
            values = da.full(shape, var.fill, dtype=var.dtype, chunks=chunks)
            encoding[name] = {"chunks": chunks, "fill_value": var.fill}
        data_vars[name] = (dims, values, dict(var.attrs))
    return data_vars, encoding


def _add_record_vars(path: Path) -> None:
    """Add the per-point variables a store made by an earlier version lacks (unset), except
    ``returned`` of its finished points: every output the store had, as that version assumed
    (so the integrity check still looks for all of them)."""
    group = _open_group(path, "r")
    missing = [name for name in RECORD_VARS if name not in group]
    if not missing:
        return
    import xarray as xr  # only then: opening a store imports no xarray

    dims = tuple(json.loads(group.attrs["sweep_dims"]))
    data_vars, encoding = _record_vars(missing, dims, group["status"].shape)
    if "returned" in missing:
        finished = np.isin(np.asarray(group["status"][...], dtype=object), FINISHED)
        data_vars["returned"][1][finished] = ",".join(_outputs(group))
    ds = xr.Dataset(data_vars)
    ds.attrs.update(group.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), mode="a", compute=True, consolidated=False, encoding=encoding)


def _build(path: Path, loaded: Any, fingerprint: str) -> None:
    """Write the skeleton of a store for ``loaded`` at ``path`` (a new directory)."""
    import xarray as xr

    space = loaded.space
    dims, shape = space.dims, space.shape
    data_vars, encoding = _record_vars(list(RECORD_VARS), tuple(dims), tuple(shape))
    coords = {n: (d, v.astype(object) if v.dtype.kind in "OUS" else v) for n, (d, v) in space.coords.items()}
    ids = np.empty(shape, dtype=object)
    for p in space.points():
        ids[p.index] = p.id
    coords["point_id"] = (dims, ids)
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(
        sweep_name=loaded.name,
        sweep_recipe=loaded.effective_text,
        sweep_job=loaded.job.label,
        sweep_space=space.kind,
        sweep_space_settings=space.settings,
        sweep_dims=json.dumps(list(dims)),
        sweep_points=len(space),
        sweep_fingerprint=fingerprint,
        sweep_created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        sweep_versions=json.dumps(provenance.versions()),
        sweep_outputs="{}",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), mode="w", compute=False, consolidated=False, encoding=encoding)
