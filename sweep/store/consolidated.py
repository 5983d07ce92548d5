"""Consolidated metadata: a finished store opens in plain xarray/zarr without listing its folder.

``xarray.open_zarr(OUTPUT)`` first looks for consolidated metadata (every array's metadata
copied into the group's ``zarr.json``); without it, it warns and lists the folder, and then
warns again for each of the driver's side files (lock, state, logs: :mod:`sweep.store.layout`),
which are not zarr members. So the writer consolidates as it closes the store, and removes the
copy as it opens it: while a run adds variables or grows dims the copy would be stale, and a
zarr reader trusting it would miss them (sweep's own readers never use it).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

from sweep.store.layout import METADATA

log = logging.getLogger(__name__)
KEY = "consolidated_metadata"  # where zarr v3 keeps the copy, in the group's zarr.json


def strip(path: Path) -> None:
    """Remove the consolidated copy from the store at ``path`` (atomically; nothing if none)."""
    meta = path / METADATA
    doc = json.loads(meta.read_text())
    if doc.pop(KEY, None) is None:
        return
    tmp = meta.with_name(f"{METADATA}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, meta)


def consolidate(path: Path) -> None:
    """Write the consolidated copy of the store at ``path``'s metadata; a failure (a full disk)
    is logged and leaves the store readable as it was, unconsolidated."""
    import zarr

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the side files are not members: zarr says so, once each
            zarr.consolidate_metadata(str(path))
    except OSError as exc:
        log.warning("%s: could not consolidate its metadata (%s); it reads as it is", path, exc)
