"""Every file a sweep's store folder holds, named once.

A store is a folder, ``OUTPUT`` in a recipe::

    OUTPUT/
      zarr.json               the zarr group's metadata (METADATA); present = a store
      .sweep-store            the mark that a sweep made this store (MARK; sweep/store/ownership.py)
      <variable>/zarr.json    each variable's metadata, then its chunks
      .sweep.lock             the single writer's lock (LOCK_NAME; flock)
      .sweep.lock.held        the holder, where the file system has no flock (HELD_NAME)
      .sweep-driver.json      the running driver: pid, host, start, exit code (STATE_NAME)
      .sweep-driver.log       a detached driver's output (LOG_NAME)
      .sweep-starting         a detached driver that is starting (STARTING_NAME; sweep/client/starting.py)
      logs/<point>/<n>.txt    what attempt n of each point printed (LOGS)
      .sweep-checkpoints/<point>.pkl  the last checkpoint of each point not yet done (CHECKPOINTS)
      .sweep-adding/          new variables, built here whole and then moved in (ADDING)

and beside it, only while a rebuild for a grown space runs or was cut short,
``.OUTPUT.creating-<pid>`` (:func:`staging`) and ``.OUTPUT.replaced`` (:func:`backup`).
Standard library only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

METADATA = "zarr.json"
LOCK_NAME = ".sweep.lock"
HELD_NAME = ".sweep.lock.held"
STATE_NAME = ".sweep-driver.json"
LOG_NAME = ".sweep-driver.log"
STARTING_NAME = ".sweep-starting"
LOGS = "logs"
CHECKPOINTS = ".sweep-checkpoints"
ADDING = ".sweep-adding"
MARK = ".sweep-store"
NOT_DATA = (
    LOCK_NAME,
    HELD_NAME,
    STATE_NAME,
    LOG_NAME,
    STARTING_NAME,
    LOGS,
    CHECKPOINTS,
)  # kept through a rebuild


def is_store(path: Path) -> bool:
    """Whether ``path`` holds a store (its group metadata)."""
    return (path / METADATA).exists()


def holds_data(path: Path) -> bool:
    """Whether the folder ``path`` holds anything but what a sweep keeps beside its data
    (:data:`NOT_DATA`: its lock, driver state and log, logs, checkpoints): a store, or parts
    of one. False for a missing folder."""
    return path.is_dir() and any(e.name not in NOT_DATA for e in path.iterdir())


def mark(path: Path) -> None:
    """Mark the new store at ``path`` as one a sweep made (written before its ``zarr.json``
    is moved in, so a half-made store is marked too)."""
    (path / MARK).write_text(json.dumps({"made_by": "sweep", "format": 1}) + "\n")


def read_attrs(path: Path) -> dict[str, Any]:
    """The attributes of the store at ``path``, from its group metadata (ValueError when that
    file is not JSON, OSError when it can't be read)."""
    return dict(json.loads((path / METADATA).read_text()).get("attributes", {}))


def staging(path: Path) -> Path:
    """Where a rebuild of the store at ``path`` by this process is built."""
    return path.parent / f".{path.name}.creating-{os.getpid()}"


def stagings(path: Path) -> list[Path]:
    """Every rebuild of the store at ``path`` that was started, by any process."""
    return list(path.parent.glob(f".{path.name}.creating-*"))


def backup(path: Path) -> Path:
    """Where the old store is kept while a rebuilt one is swapped in."""
    return path.parent / f".{path.name}.replaced"
