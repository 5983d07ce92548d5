"""Which folders a sweep may write into, and what ``--force`` may delete: only what it made.

A store is marked when it is made: :data:`~sweep.store.layout.MARK` is written into it before
its ``zarr.json`` (stores made before the mark existed are known by the ``sweep_fingerprint``
attribute of their ``zarr.json``). The rules:

- a missing folder, or one that holds nothing but a sweep's own lock and driver files, is new;
- a marked folder is a store (whole, or damaged: then ``--force`` starts it over);
- any other folder that holds something (a user's files, other stores, a project) is refused,
  with or without ``--force``, before anything is made or locked in it.

``--force`` (:func:`clear`) deletes only a store's own entries (:func:`own`): its metadata,
mark, arrays, logs, checkpoints and lock files. Anything else found beside them is kept and
named in the log. Standard library only.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from sweep.errors import UsageError
from sweep.store import attributes
from sweep.store.layout import (
    ADDING,
    CHECKPOINTS,
    HELD_NAME,
    LOCK_NAME,
    LOG_NAME,
    LOGS,
    MARK,
    METADATA,
    STARTING_NAME,
    STATE_NAME,
    read_attrs,
)

log = logging.getLogger(__name__)

# what a sweep leaves in a folder before it is a store: a refused or starting submit's lock and
# a detached driver's state and log; their names are a sweep's alone
STARTING = (LOCK_NAME, HELD_NAME, STATE_NAME, LOG_NAME, STARTING_NAME)
SHOWN = 5  # foreign entries named in a refusal


class NotAStore(UsageError):
    """The output folder holds files that no sweep made: nothing is written into it."""


def marked(path: Path) -> bool:
    """Whether ``path`` holds a store a sweep made (its mark, or a sweep's ``zarr.json``)."""
    if (path / MARK).exists():
        return True
    try:
        return attributes.FINGERPRINT in read_attrs(path)
    except (OSError, ValueError, AttributeError):
        return False


def _is_array(entry: Path) -> bool:
    try:
        return json.loads((entry / METADATA).read_text()).get("node_type") == "array"
    except (OSError, ValueError, AttributeError):
        return False


def own(entry: Path) -> bool:
    """Whether ``entry``, inside a marked store folder, is the store's own."""
    if entry.name in (METADATA, MARK, LOGS, CHECKPOINTS, ADDING, *STARTING):
        return True
    return entry.is_dir() and _is_array(entry)


def foreign(path: Path) -> list[Path]:
    """The entries of the folder ``path`` that a sweep did not make there (all of them but
    :data:`STARTING` when the folder is not marked), by name."""
    if not path.is_dir():
        return []
    entries = sorted(path.iterdir())
    if marked(path):
        return [e for e in entries if not own(e)]
    return [e for e in entries if e.name not in STARTING]


def _listed(entries: list[Path]) -> str:
    names = [e.name + ("/" if e.is_dir() else "") for e in entries[:SHOWN]]
    more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
    return ", ".join(names) + more


def check(path: Path) -> None:
    """NotAStore when ``path`` is a folder that holds something but is no store a sweep made:
    ``--force`` does not change that (it deletes only a store's own files)."""
    if not path.exists():
        return
    if not path.is_dir():
        raise NotAStore(f"output {path} is a file, not a folder; give a new folder's path (--output)")
    if marked(path):
        return
    found = foreign(path)
    if found:
        raise NotAStore(
            f"output {path} is not a sweep store and is not empty: it holds {_listed(found)}. "
            "A sweep writes only into a new or empty folder or a store it made, and --force "
            f"deletes only a store's own files; use a new folder, e.g. --output {path / 'sweep.zarr'}"
        )


def clear(path: Path, keep: tuple[str, ...] = ()) -> None:
    """Delete the store's own entries in ``path`` (``--force``) but its lock files and ``keep``;
    anything the store did not make is kept and logged."""
    kept = []
    for entry in sorted(path.iterdir()):
        if entry.name in (*STARTING, *keep):
            continue
        if not own(entry):
            kept.append(entry)
        elif entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if kept:
        log.warning("%s: --force kept what the store did not make: %s", path, _listed(kept))
