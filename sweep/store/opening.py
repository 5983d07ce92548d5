"""Opening a store: the policy of what an existing folder may become for a recipe.

A store left half-swapped by a killed grow is finished first and stale staging removed;
``force`` clears the data; a folder with parts but no metadata is damaged (refused); a space
that grew is grown in place (:mod:`sweep.store.growth`, built in a staging folder and swapped in);
other inputs than the done points ran with are refused (:class:`StoreMismatch`) unless
``keep_done``. :func:`prepare` applies it all before :class:`~sweep.store.zarrstore.Store` opens.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweep.model import inputs
from sweep.store import attributes, consolidated, growth, integrity, layout, ownership
from sweep.store.creation import (
    RECORD_VARS,
    NewOutput,
    _add_record_vars,
    _build,
    _clean_staging,
    _create,
    _create_outputs,
    _finish_swap,
    _now,
    _open_group,
    _outputs,
    _staging,
    _swap_in,
)
from sweep.store.errors import UNWRITABLE, StoreFull, StoreMismatch
from sweep.store.layout import METADATA
from sweep.store.lock import StoreLock
from sweep.store.runs import inputs_ran

log = logging.getLogger(__name__)


def lock(path: Path) -> StoreLock:
    """Make ``path`` if needed and take its writer lock; NotAStore (nothing made, nothing
    locked) when it is a folder of other files (:func:`ownership.check`); on a full disk,
    StoreFull, and a folder made here is removed again."""
    ownership.check(path)
    made = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        return StoreLock(path)
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise StoreFull(
            f"cannot create {path}: {exc.strerror}; nothing ran. Free space and submit again"
        ) from None


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
        f"{path} was computed from other inputs:{listed}\nUse --force (Python: run(force=True)) to start "
        "over in place, --output PATH to run elsewhere, or --keep-done (run(keep_done=True)) to keep the "
        "done points and run the rest with "
        "the new inputs (recorded in the store's sweep_history)"
    )


def stored_attrs(path: Path) -> dict[str, Any]:
    try:
        return layout.read_attrs(path)
    except json.JSONDecodeError:
        integrity.check_metadata(path)
        raise


def _growth(path: Path, attrs: dict[str, Any], space: Any, keep_done: bool) -> growth.Growth:
    """How the store at ``path`` grows to ``space``; StoreMismatch when it is another sweep, or
    when points that ran would be dropped (unless ``keep_done``)."""
    g = growth.compare(_open_group(path, "r"), attrs, space)
    if g is None:
        raise StoreMismatch(
            f"{path} holds a different sweep ({attrs.get(attributes.SPACE, '?')} space over "
            f"{attrs.get(attributes.DIMS, '?')} of recipe {attrs.get(attributes.NAME, '?')!r}, "
            f"{attrs.get(attributes.POINTS, '?')} points; this recipe has a {space.kind} space over "
            f"{json.dumps(list(space.dims))}, {len(space)} points{_settings_changed(attrs, space)}). "
            "Use another --output, or --force (Python: run(force=True)) to delete it and start over"
        )
    if g.dropped and not keep_done:
        shown = "".join(f"\n  {p}" for p in g.dropped[:10])
        more = f"\n  ... and {len(g.dropped) - 10} more" if len(g.dropped) > 10 else ""
        raise StoreMismatch(
            f"{path}: this space leaves out {len(g.dropped)} point(s) that already ran:{shown}{more}\n"
            f"Use --keep-done (Python: run(keep_done=True)) to keep the {g.kept} point(s) still in the space "
            "and drop these, --output PATH to run elsewhere, or --force (run(force=True)) to delete it all "
            "and start over"
        )
    return g


def _settings_changed(attrs: Mapping[str, Any], space: Any) -> str:
    """What differs between the store's space settings (a search's sampler, objective,
    direction, axes...) and ``space``'s, as ``; key: old → new``, or ""."""
    try:
        old = json.loads(attrs.get(attributes.SPACE_SETTINGS) or "{}")
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
        keep = {k: v for k, v in old.attrs.items() if k not in new.attrs or k == attributes.CREATED}
        history = json.loads(old.attrs.get(attributes.HISTORY, "[]"))
        entry = {
            "time": _now(),
            "grew": g.summary(),
            "points": [old.attrs.get(attributes.POINTS), len(loaded.space)],
        }
        if g.dropped:
            entry["dropped"] = g.dropped
        new.attrs.update(
            {
                **keep,
                attributes.OUTPUTS: json.dumps(outputs),
                attributes.HISTORY: json.dumps([*history, entry]),
            }
        )
        _swap_in(path, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: the space changed: %s", path, g.summary())


@dataclass(frozen=True)
class Opened:
    """What :func:`prepare` made of a store folder: whether it ``created`` the store (new, or
    cleared by force), the growth it applied, the run's inputs and the input changes kept."""

    created: bool
    grown: growth.Growth | None
    inputs: inputs.Inputs
    changes: list[str]


def prepare(path: Path, loaded: Any, *, force: bool, keep_done: bool) -> Opened:
    """Make the locked folder ``path`` a store ready for ``loaded``: see the module docstring
    and :meth:`~sweep.store.zarrstore.Store.open`."""
    fingerprint = loaded.space.fingerprint()
    changes: list[str] = []
    grown: growth.Growth | None = None
    _finish_swap(path)
    _clean_staging(path)
    if (path / METADATA).exists():
        consolidated.strip(path)  # it would be stale while this run adds or grows variables
    ownership.check(path)  # again, under the lock
    has_data = layout.holds_data(path)
    if has_data and force:
        ownership.clear(path)  # start over in place: the store's own files only
    elif has_data and not (path / METADATA).exists():
        raise integrity.StoreDamaged(
            f"{path} is a store without its {path / 'zarr.json'} (moved or deleted while a sweep "
            "wrote it?); restore it, or run with --force (or another --output) to start over"
        )
    now = inputs.of(loaded)  # reads and hashes the job's source: once per open
    if (path / METADATA).exists():
        attrs = stored_attrs(path)
        ran = inputs_ran(path)
        now = inputs.of(loaded, {f for _, i in ran for f in i.sources})
        moved = attrs.get(attributes.FINGERPRINT) != fingerprint
        grown = _growth(path, attrs, loaded.space, keep_done) if moved else None
        changes = _changed_inputs(path, ran, now, keep_done=keep_done)
        if grown is not None:
            _grow(path, loaded, fingerprint, grown)
    created = not (path / METADATA).exists()
    if created:
        _create(path, loaded, fingerprint)
    else:
        _add_record_vars(path)
    return Opened(created, grown, now, changes)
