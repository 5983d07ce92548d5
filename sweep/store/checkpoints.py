"""The last checkpoint of each point not yet done, in the store folder.

``OUTPUT/.sweep-checkpoints/<point_id>.pkl`` holds a pickled :class:`~sweep.wire.protocol.Saved` (number,
attempt, time, the job's pickled state). Written by the store's single writer (the driver)
as checkpoints arrive, each atomically (a temporary file, fsynced, renamed over the last), so
a driver killed mid-write leaves the previous checkpoint whole. Named by point id, so a
store grown to a larger space keeps them. :mod:`sweep.worker.checkpoints` says when they are written,
read and deleted.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
from pathlib import Path

from sweep.store.layout import CHECKPOINTS
from sweep.wire.protocol import Saved

log = logging.getLogger(__name__)
SUFFIX = ".pkl"


def folder(store: Path) -> Path:
    return Path(store) / CHECKPOINTS


def write(store: Path, point_id: str, saved: Saved) -> None:
    """Keep ``saved`` as the last checkpoint of ``point_id``, replacing the one before whole."""
    where = folder(store)
    where.mkdir(exist_ok=True)
    final = where / f"{point_id}{SUFFIX}"
    part = where / f".{point_id}.{os.getpid()}.part"
    with open(part, "wb") as f:
        pickle.dump(saved, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, final)


def read(store: Path, point_id: str) -> Saved | None:
    """The last checkpoint of ``point_id``, or None (none kept, or unreadable: logged)."""
    path = folder(store) / f"{point_id}{SUFFIX}"
    try:
        with open(path, "rb") as f:
            saved = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as exc:
        log.warning("checkpoint %s can't be read (%s); the point starts over", path, exc)
        return None
    return saved if isinstance(saved, Saved) else None


def kept(store: Path) -> set[str]:
    """The point ids that have a checkpoint kept."""
    try:
        names = os.listdir(folder(store))
    except FileNotFoundError:
        return set()
    return {n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith(".")}


def remove(store: Path, point_id: str) -> None:
    """Delete the checkpoint of ``point_id``, if any."""
    (folder(store) / f"{point_id}{SUFFIX}").unlink(missing_ok=True)


def clear(store: Path) -> None:
    """Delete every checkpoint of the store (``--force``)."""
    shutil.rmtree(folder(store), ignore_errors=True)
