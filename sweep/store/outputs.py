"""A store's job outputs: which exist and with which dims, whether a record's outputs fit
them (:mod:`sweep.store.integrity`), and the variables of outputs seen for the first time.

An output is created when the first point that returns it is done; a point whose outputs
don't fit (other dims, a shape that can't grow, a name that clashes) fails with the reason,
and fixes no schema.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sweep.store import attributes, integrity
from sweep.store.creation import RECORD_VARS, NewOutput, _create_outputs
from sweep.wire.protocol import PointRecord

log = logging.getLogger(__name__)


class Outputs:
    """The outputs of the store at ``path`` (``group``: its zarr group, ``dims`` and ``shape``:
    the sweep's); ``names``: output name -> its dims, shared with the store; ``array(name)``:
    a variable's zarr array; ``set_attrs``: writes the store's attributes."""

    def __init__(
        self,
        path: Path,
        group: Any,
        dims: tuple[str, ...],
        shape: tuple[int, ...],
        names: dict[str, list[str]],
        array: Callable[[str], Any],
        set_attrs: Callable[..., None],
    ) -> None:
        self.path, self.group, self.dims, self.shape = path, group, dims, shape
        self.names, self.array, self.set_attrs = names, array, set_attrs
        self._coords: dict[str, np.ndarray | None] = {}
        self._users_cache: dict[str, set[str]] = {}
        self._users_of = -1  # how many outputs the store had when _users_cache was worked out

    def checked(self, record: PointRecord) -> PointRecord:
        """The record, or a failed one with the reason when its outputs don't fit the store."""
        new, grown = [], {}
        n = len(self.dims)
        users = self._users()
        try:
            for name, out in record.outputs.items():
                integrity.check_coords(name, out, self._stored_coords(out.dims, users))
                dims = self.names.get(name)
                if dims is None:
                    self._check_new(name, out)
                    new.append(name)
                    continue
                array = self.array(name)
                shared = frozenset(d for d, names in users.items() if names - {name})
                shape = integrity.check_fits(name, out, tuple(dims[n:]), array.shape[n:], array.dtype, shared)
                if shape != tuple(array.shape[n:]):
                    grown[name] = shape
        except (ValueError, TypeError) as exc:
            return replace(record, status="failed", outputs={}, error=str(exc))
        # only once every output fits: a failed point fixes no schema
        self._add({name: record.outputs[name] for name in new})
        for name, shape in grown.items():  # the new part reads NaN for every point stored before
            log.info("%s: output %r grows to shape %s", self.path, name, shape)
            self.array(name).resize(tuple(self.shape) + shape)
        return record

    def _users(self) -> dict[str, set[str]]:
        """Each output dim with the outputs that use it (worked out again only when an output
        was added)."""
        if self._users_of != len(self.names):
            n, users = len(self.dims), dict[str, set[str]]()
            for other, other_dims in self.names.items():
                for d in other_dims[n:]:
                    users.setdefault(d, set()).add(other)
            self._users_cache, self._users_of = users, len(self.names)
        return self._users_cache

    def _stored_coords(self, dims: tuple[str, ...], used: Mapping[str, Any]) -> dict[str, np.ndarray | None]:
        """The store's coordinate values of each of ``dims`` some output already uses (``used``:
        the output dims in use, as keys)."""
        for d in set(dims) & set(used):
            if d not in self._coords:
                self._coords[d] = np.asarray(self.group[d][...]) if d in self.group else None
        return {d: self._coords[d] for d in dims if d in used}

    def _check_new(self, name: str, out: Any) -> None:
        """Raise ValueError unless output ``name``, new to the store, can be added as it is."""
        if name in RECORD_VARS or name in self.dims or name in self.group:
            raise ValueError(f"output name {name!r} clashes with a sweep variable or axis; rename it")
        clash = set(out.dims) & set(self.dims)
        if clash:
            raise ValueError(f"output {name!r} uses dims {sorted(clash)} that are sweep axes; rename them")

    def _add(self, new: dict[str, Any]) -> None:
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
            self.names[spec.name] = list(self.dims + spec.dims)
        self.set_attrs(**{attributes.OUTPUTS: self.names})
