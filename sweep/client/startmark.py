"""The mark a detached submit leaves while its driver starts, so that a cancel at any moment
finds it.

``sweep submit --detach`` starts its driver in the background; the driver holds the store's
lock and publishes its state (``.sweep-driver.json``) only once its store is open, up to
seconds later. Between the two, :data:`~sweep.store.layout.STARTING_NAME` in the output
folder names the starting driver (pid, host, when); the submit removes it as soon as the
driver has published its state or has ended. :func:`pid` reads it: the pid, only while
that process lives on this host and is a sweep (a mark left by a killed submit names a pid
that may be gone or reused).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

import psutil

from sweep.store.layout import STARTING_NAME

log = logging.getLogger(__name__)


def mark(output: Path, pid: int) -> None:
    """Note that the driver ``pid`` is starting for ``output`` (not on a disk too full for the
    mark: the driver's own end then says why)."""
    tmp = output / f"{STARTING_NAME}.{os.getpid()}"
    try:
        tmp.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "since": time.time()}))
        os.replace(tmp, output / STARTING_NAME)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.info("%s: no mark of the starting driver (%s)", output, exc)


def clear(output: Path) -> None:
    """The driver has published its state, or ended: the mark goes."""
    (output / STARTING_NAME).unlink(missing_ok=True)


def pid(output: Path) -> int | None:
    """The pid of the driver starting for ``output`` on this host, or None."""
    try:
        seen = json.loads((output / STARTING_NAME).read_text())
        pid = int(seen["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if seen.get("host") != socket.gethostname():
        return None
    try:
        process = psutil.Process(pid)
        command = " ".join(process.cmdline())
    except psutil.Error:
        return None
    return pid if "sweep" in command and process.create_time() <= float(seen.get("since", 0)) + 1 else None
