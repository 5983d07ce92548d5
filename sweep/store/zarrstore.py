"""The result store: one zarr group per sweep, written point by point, read with xarray.

Layout (``xarray.open_zarr`` reads it as is; :func:`open_results` adds nothing but
convenience): dims are the sweep dims (the grid axes, or ``point``) plus each output's own
dims. Per point there are the bookkeeping variables of :data:`RECORD_VARS`, one per stored
field of :class:`~sweep.wire.protocol.PointRecord`; job outputs are added when the first point
that returns them is done.

Writes go straight to the zarr arrays (xarray only creates variables). Within one batch a
point's outputs and measurements are written before its ``status``, and zarr's local store
replaces each chunk file atomically, so a point never reads as ``done`` with partial data,
whenever the writer is killed. Only one process may write: :class:`Store` holds an
exclusive ``flock`` on ``<output>/.sweep.lock``, which names the holder's pid and host.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sweep import _compat
from sweep.store import attributes, consolidated, growth, integrity, opening
from sweep.store.creation import (
    RECORD_VARS,
    _coordinates,
    _now,
    _open_group,
    _outputs,
    _padded,
)
from sweep.store.errors import UNWRITABLE, StoreFull, StoreGone, writing
from sweep.store.inputsrecord import InputsRecord
from sweep.store.layout import METADATA
from sweep.store.lock import StoreLock
from sweep.store.outputs import Outputs
from sweep.store.pointmask import PointMask
from sweep.store.runs import _returned
from sweep.store.sidecar import Sidecar
from sweep.wire.protocol import FINISHED, NOT_DONE, PointRecord, stored_column

# files in the store that are not its data: kept when it is cleared or rebuilt
log = logging.getLogger(__name__)
# zarr's I/O thread pool is capped and fills up while the store is opened, before any job
# runs: once uncapped jobs have used up the user's `ulimit -u`, the client could not start
# the threads it needs to write results.
IO_THREADS = 4


class Store:
    """An open, locked result store for one sweep. Use :meth:`open` and :meth:`close`."""

    def __init__(self, path: Path, lock: StoreLock) -> None:
        self.path = path
        self._lock: StoreLock | None = lock
        self.group: Any = _open_group(path, "r+")
        self._arrays: dict[str, Any] = {}
        self.dims: tuple[str, ...] = tuple(json.loads(self.group.attrs[attributes.DIMS]))
        self.shape: tuple[int, ...] = self.group["status"].shape
        # an output whose variable is gone is created again by the next point that returns it
        self.outputs: dict[str, list[str]] = {
            name: dims for name, dims in _outputs(self.group).items() if (path / name / METADATA).exists()
        }
        self.fit = Outputs(path, self.group, self.dims, self.shape, self.outputs, self._array, self.set_attrs)
        self.growth: growth.Growth | None = None  # set when open() grew the store to a new space
        self.created = False  # set when open() made the store (new, or cleared by force)
        self._ids: np.ndarray | None = None  # point ids, read when first needed
        self.inputs = InputsRecord(path, self.group, self.set_attrs)
        self.sidecar = Sidecar(path, self.point_id, self.check_intact, self.intact)

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
        environment: :mod:`sweep.model.inputs`) than any done point ran with, raises
        :class:`StoreMismatch` listing them, unless ``keep_done`` (keep the done points: those
        still in the space, or those computed with the old inputs; the change is appended to
        the store's ``sweep_history``). Any other space is a different sweep: refused.
        ``force`` deletes the store's data first, whatever it held, and starts over in place.
        """
        path = Path(path)
        lock = opening.lock(path)
        _compat.start_zarr_io_threads(IO_THREADS)
        try:
            opened = opening.prepare(path, loaded, force=force, keep_done=keep_done)
            store = cls(path, lock)
            store.created, store.growth = opened.created, opened.grown
            store.inputs.record(loaded, opened.inputs, opened.changes)
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
        """Indices (a :class:`PointMask`) of points not yet ``done`` (``pending``, or a status of
        :data:`~sweep.wire.protocol.NOT_DONE`); with ``only_failed``, only the latter.

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

    def run_started(self) -> None:
        """Mark the store as being run by this process (``sweep_run_state = running``). A run
        that ends calls :meth:`run_ended`; one whose process dies leaves ``running`` behind with
        the lock released, which :func:`last_run` reports as an abnormal end."""
        self.set_attrs(
            **{
                attributes.LAST_RUN: _now(),
                attributes.RUN_STATE: "running",
                attributes.RUN_BY: f"pid {os.getpid()} on {socket.gethostname()}",
                attributes.RUN_PATH: str(self.path.resolve()),  # a store moved while it runs says so later
            }
        )

    def run_ended(self, state: str) -> None:
        """Record how the run ended: ``finished``, ``cancelled``, ``interrupted`` (Ctrl-C) or
        ``failed`` (an exception).

        On a full file system this can't be written; the store then reads as ended abnormally.
        """
        if not self.intact():
            return
        try:
            self.set_attrs(**{attributes.LAST_END: _now(), attributes.RUN_STATE: state})
        except (OSError, StoreFull) as exc:
            log.warning("%s: could not record the end of the run: %s", self.path, exc)

    def attr(self, name: str) -> str | None:
        """The store attribute ``name`` as stored (JSON text for structured ones), or None."""
        value = self.group.attrs.get(name)
        return None if value is None else str(value)

    def set_attrs(self, **attrs: Any) -> None:
        """Set store attributes (JSON text for structured ones); StoreFull when the file system
        takes no more, StoreGone when the folder is gone (:meth:`check_intact`)."""
        self.check_intact()
        with writing(self.path):
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
            if exc.errno not in UNWRITABLE:
                raise
            if len(records) == 1:
                return self._write_one(records[0])
        # the batch didn't fit: keep as many of its points as fit, one by one
        return [written for r in records for written in self._write_one(r)]

    def _write_one(self, record: PointRecord) -> list[PointRecord]:
        try:
            return self._write([record], skip_same=True)
        except OSError as exc:
            if exc.errno not in UNWRITABLE:
                raise
            raise StoreFull(f"cannot write {self.path}: {exc.strerror}") from None

    def _stamped(self, record: PointRecord) -> PointRecord:
        """The record, given the outputs it returned and the id of the inputs it ran with (a new
        id is added to the store's ``sweep_inputs_seen``)."""
        ident = self.inputs.ident(record.sources)
        shapes = {n: list(np.shape(o.values)) for n, o in record.outputs.items() if np.ndim(o.values)}
        record.returned = tuple(record.outputs)  # in place: a copy per point cost a third as much again
        record.inputs = ident
        record.shapes = json.dumps(shapes) if shapes else ""
        return record

    def _write(self, records: list[PointRecord], skip_same: bool = False) -> list[PointRecord]:
        records = [self._stamped(self.fit.checked(r)) for r in records]
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
            values = stored_column(records, name)
            if None in values:
                values = [var.fill if v is None else v for v in values]
            self._put(name, points, values)
        self.sidecar.write_logs(records)
        for r in records:
            if r.status in FINISHED:
                self.sidecar.drop_checkpoint(r.index)
        return records

    def point_id(self, index: tuple[int, ...]) -> str:
        """The id of the point at ``index`` (its parameters' hash: stable when the store grows)."""
        if self._ids is None:
            self._ids = np.asarray(self.group["point_id"][...], dtype=object)
        return str(self._ids[index])

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
