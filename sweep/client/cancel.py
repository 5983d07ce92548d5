"""``sweep cancel``: stop the sweep running a store, at any moment of its life.

A running driver (it holds the store's lock and has published its state) is sent SIGTERM,
which it takes as a cancel: running points are killed, finished ones kept. One in its first
seconds holds the lock before it has published its state: the cancel waits for that state,
up to :data:`STATE_WAIT_S`. One started by ``submit --detach`` that does not hold the lock
yet is found by the mark the submit left (:mod:`sweep.client.startmark`) and sent SIGTERM too:
it ends before it runs anything, or cancels once it holds the store.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from sweep.client import startmark
from sweep.client.driver import DriverState, Starting, alive, running
from sweep.errors import SweepError, UsageError
from sweep.store.lock import locked

CANCEL_TIMEOUT_S = 120.0
STATE_WAIT_S = 30.0  # how long a cancel waits for a starting run to publish its state


def cancel(output: Path, wait_s: float = CANCEL_TIMEOUT_S) -> DriverState:
    """Ask the driver running ``output`` to cancel (SIGTERM) and wait until it has ended.

    A run in its first seconds holds the store's lock before it has published its state (its
    store is still opening): the cancel waits for that state, up to ``STATE_WAIT_S``, rather
    than give up; a holder that never publishes one (a run from Python) is named instead."""
    pid = (
        None if not output.is_dir() or locked(output) else startmark.pid(output)
    )  # a detached driver not holding it yet
    if pid is not None:
        return _cancel_starting(output, pid, wait_s)
    state = _published(output)
    if state.host != socket.gethostname():
        raise UsageError(f"{output} is run from {state.host}; run `sweep cancel {output}` there")
    try:
        os.kill(state.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait_s
    while locked(output):
        if time.monotonic() > deadline:
            raise SweepError(
                f"pid {state.pid} still runs {output} after {wait_s:.0f} s; kill it (kill {state.pid})"
            )
        time.sleep(0.2)
    return state


def _cancel_starting(output: Path, pid: int, wait_s: float) -> DriverState:
    """SIGTERM the driver ``pid`` that is starting for ``output`` and wait for its end (it
    cancels once it holds the store, or ends at once before that)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait_s
    while alive(pid):
        if time.monotonic() > deadline:
            raise SweepError(f"pid {pid} still starts {output} after {wait_s:.0f} s; kill it (kill {pid})")
        time.sleep(0.1)
    return DriverState(pid=pid, host=socket.gethostname(), started=0.0, command=[])


def _published(output: Path) -> DriverState:
    """:func:`running`, waiting up to ``STATE_WAIT_S`` while the holder is still starting."""
    deadline = time.monotonic() + STATE_WAIT_S
    while True:
        try:
            return running(output)
        except Starting:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
