"""Growing a store to a changed space: keep every point it already holds, add the new ones.

A recipe whose space gained values (a grid axis), points (a ``list`` or ``zip``) or ``n``
(a ``random`` space: its first n points don't change when n grows) changes the store's
layout. :func:`compare` matches the stored points to the new space's by their parameter
values (``point_id``; repeated points of a list by their order among equals), and
:func:`copy_points` copies every matched point's bookkeeping and outputs, value for value,
into a store built for the new space; the points left are ``pending``. A change that would
drop stored points that ran (done or failed) is refused by the caller unless told to.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.model.space import Space
from sweep.store import attributes


@dataclass(frozen=True)
class Growth:
    """How the stored points map onto a new space (flat indices into each layout)."""

    old_at: np.ndarray  # flat index in the stored layout of each kept point
    new_at: np.ndarray  # ... and in the new layout
    new: int  # points of the new space the store doesn't hold
    dropped: list[dict[str, Any]]  # parameters of stored points that ran but are not in the new space

    @property
    def kept(self) -> int:
        return len(self.old_at)

    def summary(self) -> str:
        dropped = f", {len(self.dropped)} dropped" if self.dropped else ""
        return f"{self.kept} kept, {self.new} new{dropped}"


def _keyed(ids: Iterable[str]) -> list[tuple[str, int]]:
    """Each id with its occurrence number, so repeated points match in order."""
    seen: Counter[str] = Counter()
    out = []
    for i in ids:
        out.append((i, seen[i]))
        seen[i] += 1
    return out


def compare(group: Any, attrs: dict[str, Any], space: Space) -> Growth | None:
    """How the store's points map onto ``space``; None when the layouts can't be matched
    (another kind of space, or other dims: a different sweep, not a grown one)."""
    if (
        attrs.get(attributes.SPACE) != space.kind
        or json.loads(attrs.get(attributes.DIMS, "[]")) != list(space.dims)
        or attrs.get(attributes.SPACE_SETTINGS, "") != space.settings
    ):
        return None
    old_ids = np.asarray(group["point_id"][...], dtype=object).ravel()
    status = np.asarray(group["status"][...], dtype=object).ravel()
    new_index = {key: flat for flat, key in enumerate(_keyed(p.id for p in space.points()))}
    old_at, new_at, dropped = [], [], []
    params = None
    for flat, key in enumerate(_keyed(str(i) for i in old_ids)):
        target = new_index.get(key)
        if target is not None:
            old_at.append(flat)
            new_at.append(target)
        elif status[flat] != "pending":
            params = params if params is not None else _stored_params(group, space)
            dropped.append({n: _item(values.ravel()[flat]) for n, values in params.items()})
    return Growth(np.array(old_at, dtype=int), np.array(new_at, dtype=int), len(space) - len(old_at), dropped)


def _stored_params(group: Any, space: Space) -> dict[str, np.ndarray]:
    """Each parameter's stored values, broadcast to the stored layout."""
    shape = group["status"].shape
    dims = list(space.dims)
    out = {}
    for name, (coord_dims, _) in space.coords.items():
        values = np.asarray(group[name][...])
        if tuple(coord_dims) != tuple(dims):  # a grid axis: one value per position on its dim
            view = [1] * len(dims)
            view[dims.index(coord_dims[0])] = len(values)
            values = np.broadcast_to(values.reshape(view), shape)
        out[name] = values
    return out


def _item(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def copy_points(old: Any, new: Any, growth: Growth, names: Iterable[str]) -> None:
    """Copy the variables ``names`` of every kept point from group ``old`` to group ``new``
    (both already holding them; trailing output dims copied whole)."""
    n = len(old["status"].shape)
    for name in names:
        values = np.asarray(old[name][...])
        out = np.asarray(new[name][...])  # the new store's fill values
        rest = values.shape[n:]
        out.reshape((-1, *rest))[growth.new_at] = values.reshape((-1, *rest))[growth.old_at]
        new[name][...] = out
