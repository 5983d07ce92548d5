"""Creating a store: its skeleton of per-point variables (:data:`RECORD_VARS`, one per stored
field of :class:`~sweep.wire.protocol.PointRecord`) and job outputs as they first appear, with
their chunks; the zarr group opened for reading or writing."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from sweep import provenance
from sweep._compat import text_dtype
from sweep.store import attributes, integrity, layout, ownership
from sweep.store.errors import UNWRITABLE, StoreFull
from sweep.store.layout import ADDING, METADATA, NOT_DATA
from sweep.wire.protocol import FINISHED, stored_fields

log = logging.getLogger(__name__)


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


def _chunks(shape: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Chunk the sweep dims so a chunk holds at most ``budget`` points (last dim fastest)."""
    chunks, room = [], max(1, budget)
    for n in reversed(shape):
        c = max(1, min(n, room))
        chunks.append(c)
        room = max(1, room // c)
    return tuple(reversed(chunks))


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
    return dict(json.loads(group.attrs.get(attributes.OUTPUTS, "{}")))


def _now() -> str:
    return time.strftime(TIME_FORMAT)


def _create(path: Path, loaded: Any, fingerprint: str) -> None:
    """Create the store at ``path``: built aside, then moved in with its zarr.json last, so a
    reader sees no store or a whole one, never a half-written skeleton."""
    staging = _staging(path)
    try:
        _build(staging, loaded, fingerprint)
        _swap_in(path, staging)
    except OSError as exc:
        if exc.errno in UNWRITABLE:
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
    took half an hour to store its first point.

    They are made aside (:func:`_adding`), as a reader of the running sweep may look."""
    import zarr

    if not outputs:
        return
    group = _open_group(path, "r")
    sweep_dims = tuple(json.loads(group.attrs[attributes.DIMS]))
    sweep_shape = tuple(group["status"].shape)
    coords = {d: c for out in outputs for d, c in out.coords.items() if d not in group}
    by_dtype: dict[str, list[NewOutput]] = {}
    for out in outputs:
        by_dtype.setdefault(np.dtype(out.dtype).str, []).append(out)
    with _adding(path) as aside:
        for same in by_dtype.values():
            first, *rest = same
            _create_with_xarray(aside, first, sweep_dims, sweep_shape, coords)
            coords = {}
            template = zarr.open_array(str(aside / first.name), mode="r")
            staged = cast(Any, zarr.open_group(str(aside), mode="r+"))
            for out in rest:
                staged.create_array(
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


@contextmanager
def _adding(path: Path) -> Iterator[Path]:
    """A zarr group of its own (``ADDING``) to make new variables of the store at ``path`` in;
    on leaving, each variable's folder is moved into the store whole. zarr makes a folder before
    it writes the metadata there, and a reader of a running sweep took such a folder for a
    damaged store. One left by a killed writer is cleared at the next open."""
    aside = path / ADDING
    shutil.rmtree(aside, ignore_errors=True)
    yield aside
    for entry in aside.iterdir():
        if entry.name != METADATA:
            os.replace(entry, path / entry.name)
    shutil.rmtree(aside)


def _output_chunks(sweep_shape: tuple[int, ...], out: NewOutput) -> tuple[int, ...]:
    """Chunks of an output: whole per point, as many points as fit in about OUTPUT_CHUNK_BYTES."""
    per_point = max(1, math.prod(out.shape) * np.dtype(out.dtype).itemsize)
    return _chunks(sweep_shape, min(POINTS_PER_CHUNK, OUTPUT_CHUNK_BYTES // per_point)) + tuple(out.shape)


def _create_with_xarray(
    path: Path, out: NewOutput, sweep_dims: tuple[str, ...], sweep_shape: tuple[int, ...], coords: dict
) -> None:
    """Add output ``out`` and the coordinates ``coords`` through xarray to the group at
    ``path`` (made if new; its encoding is the template the other outputs of its dtype copy)."""
    import dask.array as da
    import xarray as xr

    chunks = _output_chunks(sweep_shape, out)
    data = da.full(sweep_shape + tuple(out.shape), np.nan, dtype=out.dtype, chunks=chunks)
    ds = xr.Dataset({out.name: (sweep_dims + out.dims, data)}, coords=coords)
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
    names: list[str], dims: tuple[str, ...], shape: tuple[int, ...], *, text_in_memory: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-point variables ``names`` of :data:`RECORD_VARS`, unset, and their encodings.

    Each is :func:`_unset`, text as well: a million points' text held as NumPy object arrays
    took ~0.5 GB while the store was made. ``text_in_memory`` gives the text variables
    as NumPy arrays, to be set before writing."""
    data_vars, encoding = {}, {}
    for name in names:
        var = RECORD_VARS[name]
        text = var.dtype is str
        values, encoding[name] = _unset(shape, var.fill, text_dtype() if text else var.dtype)
        if text and text_in_memory:
            values = np.full(shape, var.fill, dtype=object)
        data_vars[name] = (dims, values, dict(var.attrs))
    return data_vars, encoding


def _unset(shape: tuple[int, ...], fill: Any, dtype: Any) -> tuple[Any, dict[str, Any]]:
    """A per-point variable of the sweep's ``shape``, all ``fill``, lazy (``to_zarr(compute=False)``
    writes none of its chunks), and its encoding. Text is of :func:`sweep._compat.text_dtype`:
    xarray computes nothing to type it, on no cluster."""
    import dask.array as da

    chunks = _chunks(shape, POINTS_PER_CHUNK)
    return da.full(shape, fill, dtype=dtype, chunks=chunks), {"chunks": chunks, "fill_value": fill}


def _add_record_vars(path: Path) -> None:
    """Add the per-point variables a store made by an earlier version lacks (unset), except
    ``returned`` of its finished points: every output the store had, as that version assumed
    (so the integrity check still looks for all of them)."""
    group = _open_group(path, "r")
    missing = [name for name in RECORD_VARS if name not in group]
    if not missing:
        return
    import xarray as xr  # only then: opening a store imports no xarray

    dims = tuple(json.loads(group.attrs[attributes.DIMS]))
    data_vars, encoding = _record_vars(missing, dims, group["status"].shape, text_in_memory=True)
    if "returned" in missing:
        finished = np.isin(np.asarray(group["status"][...], dtype=object), FINISHED)
        data_vars["returned"][1][finished] = ",".join(_outputs(group))
    with _adding(path) as aside, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.Dataset(data_vars)
        ds.to_zarr(str(aside), mode="w", compute=True, consolidated=False, encoding=encoding)


def _build(path: Path, loaded: Any, fingerprint: str) -> None:
    """Write the skeleton of a store for ``loaded`` at ``path`` (a new directory)."""
    import xarray as xr

    space = loaded.space
    dims, shape = space.dims, space.shape
    data_vars, encoding = _record_vars(list(RECORD_VARS), tuple(dims), tuple(shape))
    coords = {n: (d, v.astype(object) if v.dtype.kind in "OUS" else v) for n, (d, v) in space.coords.items()}
    ids, encoding["point_id"] = _unset(tuple(shape), "", text_dtype())
    coords["point_id"] = (dims, ids)  # written by _write_point_ids
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(
        {
            attributes.NAME: loaded.name,
            attributes.RECIPE: loaded.effective_text,
            attributes.JOB: loaded.job.label,
            attributes.SPACE: space.kind,
            attributes.SPACE_SETTINGS: space.settings,
            attributes.DIMS: json.dumps(list(dims)),
            attributes.POINTS: len(space),
            attributes.FINGERPRINT: fingerprint,
            attributes.CREATED: time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            attributes.VERSIONS: json.dumps(provenance.versions()),
            attributes.OUTPUTS: "{}",
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), mode="w", compute=False, consolidated=False, encoding=encoding)
    layout.mark(path)
    _write_point_ids(path, space)


def _write_point_ids(path: Path, space: Any) -> None:
    """Write each point's id into the new store's ``point_id``, straight through zarr (xarray
    would copy the million strings of a million points on the way)."""
    import zarr

    ids = np.empty(space.shape, dtype=object)
    for p in space.points():
        ids[p.index] = p.id
    zarr.open_array(str(path / "point_id"), mode="r+")[...] = ids


def _clean_staging(path: Path) -> None:
    """Remove what a rebuild of the store at ``path``, or an addition of variables to it, that
    was killed left behind (called under the store's lock: neither runs)."""
    for staging in [*layout.stagings(path), path / ADDING]:
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
            # the mark stays, so a swap cut short leaves a marked folder; a user's file stays put
            if entry.name not in (*NOT_DATA, layout.MARK) and ownership.own(entry):
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


TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # of the run times in the store's attributes


def _clear(path: Path) -> None:
    """Delete the store's data, keeping its logs and checkpoints (a cut-short swap's new half)."""
    ownership.clear(path, keep=NOT_DATA)
