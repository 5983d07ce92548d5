"""What keeps a stored point honest: an output fits the store exactly, or its point fails;
a done point whose stored outputs are gone or unreadable is not done.

Rules (README, "The result dataset"):

* The first point that returns an output fixes its schema: dims, dtype (floating and complex
  kept, integers and booleans stored as float64) and dimension coordinates.
* A later point's output must have the same dims, convert to that dtype exactly (no lost
  imaginary part, no overflow to ``inf``, no rounding) and carry the same coordinates;
  otherwise its point is ``failed`` with the reason and none of its outputs are written.
* Its shape may differ along a dim that has no coordinate and no other output uses: the
  variable then grows to the largest size seen, smaller values are padded with NaN, and each
  point's own shape is kept (the ``shapes`` variable; :func:`sweep.store.results.unpadded`).
* On resume, every done point's output chunks must exist and decode; the points of a chunk
  (or of a variable) that is missing or unreadable are not done, and run again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sweep import _compat
from sweep.errors import SweepError
from sweep.store.layout import LOGS, METADATA
from sweep.wire.protocol import Output


class StoreDamaged(SweepError, RuntimeError):
    """A metadata file of the store can't be read; the message names it."""


def check_fits(
    name: str,
    out: Output,
    dims: tuple[str, ...],
    shape: tuple[int, ...],
    dtype: np.dtype,
    shared: frozenset[str] = frozenset(),
) -> tuple[int, ...]:
    """Raise ValueError (the reason) unless ``out`` fits output ``name`` of the store (see the
    module docstring); the shape the variable needs for it (the larger along each dim).
    ``shared`` are the dims other outputs use too: their size can't change."""
    values = np.asarray(out.values)
    if tuple(out.dims) != dims:
        raise ValueError(
            f"output {name!r} has dims {out.dims} shape {values.shape} here, but {dims} shape {shape} "
            "in the store (outputs must keep their dims across points)"
        )
    for d, here, stored in zip(dims, values.shape, shape):
        if here != stored and (d in out.coords or d in shared):
            why = "has coordinates" if d in out.coords else "is used by another output too"
            raise ValueError(
                f"output {name!r}: dim {d!r} has {here} values here but {stored} in the store, and it "
                f"{why}, so its size can't change; return the same size on every point"
            )
    if not _converts_exactly(values, dtype):
        raise ValueError(
            f"output {name!r} is {values.dtype} here but {dtype} in the store (set by the first point "
            f"that returned it), and its values don't convert exactly; return one dtype on every point"
        )
    return tuple(max(a, b) for a, b in zip(values.shape, shape))


def _converts_exactly(values: np.ndarray, dtype: np.dtype) -> bool:
    if values.dtype == dtype:  # most points: no conversion to try
        return True
    if values.dtype.kind == "c" and dtype.kind != "c":
        return False
    with np.errstate(all="ignore"):
        back = values.astype(dtype).astype(values.dtype)
    return bool(np.array_equal(back, values, equal_nan=values.dtype.kind in "fc"))


def check_coords(name: str, out: Output, stored: Mapping[str, np.ndarray | None]) -> None:
    """Raise ValueError unless ``out``'s dimension coordinates are the ones the store has.

    ``stored`` maps each of ``out``'s dims to the store's coordinate values, or None when the
    store has no coordinate (or no variable yet) for that dim; a dim the store doesn't know
    yet is not in ``stored``.
    """
    for dim in out.dims:
        if dim not in stored:
            continue
        have, got = stored[dim], out.coords.get(dim)
        if have is None and got is None:
            continue
        if have is None or got is None or not np.array_equal(np.asarray(got), have):
            raise ValueError(
                f"output {name!r}: coordinate {dim!r} is {_shown(got)} here but {_shown(have)} in the "
                "store; return the same coordinates on every point"
            )


def _shown(values: Any) -> str:
    """Coordinate values for a message: all of a few, the ends and the count of many."""
    if values is None:
        return "none"
    items = np.asarray(values).tolist()
    if len(items) <= 8:
        return str(items)
    return f"[{items[0]}, {items[1]}, ..., {items[-1]}] ({len(items)} values)"


def lost_points(
    group: Any,
    path: Path,
    outputs: Mapping[str, list[str]],
    done: np.ndarray,
    returned: np.ndarray | None = None,
) -> np.ndarray:
    """Mask of done points whose stored outputs are missing or unreadable.

    ``returned`` holds, per point, the names of the outputs it returned (comma-separated): an
    output a point did not return is not looked for (it reads NaN). Without it (a store made
    before it was recorded) every done point is taken to have returned every output. The
    store writes every chunk, even one that holds only NaN, so a missing chunk is lost data.
    """
    lost = np.zeros(done.shape, dtype=bool)
    sweep_ndim = done.ndim
    for name in outputs:
        claims = done if returned is None else done & _returns(returned, name)
        if not claims.any():
            continue
        if not (path / name / METADATA).exists():
            lost |= claims
            continue
        array = group[name]
        chunks = array.chunks[:sweep_ndim]
        blocks = np.unique(np.argwhere(claims) // np.array(chunks, dtype=int), axis=0)
        for block in map(tuple, blocks.tolist()):
            if not _block_readable(array, path / name, block + (0,) * (array.ndim - sweep_ndim)):
                where = tuple(slice(b * c, (b + 1) * c) for b, c in zip(block, chunks))
                lost[where] |= claims[where]
    return lost


def _returns(returned: np.ndarray, name: str) -> np.ndarray:
    """Mask of the points whose ``returned`` names (comma-separated) include ``name``."""
    flat = (name in str(t).split(",") for t in returned.flat)
    return np.fromiter(flat, bool, returned.size).reshape(returned.shape)


def _block_readable(array: Any, folder: Path, block: tuple[int, ...]) -> bool:
    if not (folder / _compat.chunk_key(array, block)).is_file():
        return False
    try:
        array.blocks[block]
    except Exception:  # a chunk that doesn't decode, whatever the codec says
        return False
    return True


REQUIRED = ("status", "point_id")  # without these a store can't say what any point is


def check_store(path: Path) -> None:
    """Raise StoreDamaged naming the file when the store's group metadata or any of its
    variables' metadata is missing or not valid JSON (one level deep: each variable's
    ``zarr.json``; chunk folders are not walked)."""
    _check_json(path / METADATA)
    for entry in sorted(path.iterdir()):
        if entry.is_dir() and not entry.name.startswith(".") and entry.name != LOGS:
            _check_json(entry / METADATA)
    for name in REQUIRED:
        if not (path / name).is_dir():
            raise StoreDamaged(
                f"{path / name / 'zarr.json'}: missing (the store's {name!r} variable is gone); restore "
                "it, or run with --force (or another --output) to start over"
            )


def _check_json(meta: Path) -> None:
    try:
        json.loads(meta.read_text())
    except FileNotFoundError:
        raise StoreDamaged(
            f"{meta}: damaged store metadata (the file is missing); restore the file, or run with "
            "--force (or another --output) to start over"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreDamaged(
            f"{meta}: damaged store metadata ({exc}); restore the file, or run with --force "
            "(or another --output) to start over"
        ) from None


def check_metadata(path: Path) -> None:
    """Raise StoreDamaged naming the first metadata file under ``path`` that isn't valid JSON."""
    for meta in sorted(path.rglob(METADATA)):
        if meta.exists():
            _check_json(meta)
