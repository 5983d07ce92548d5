"""The child's request loop and the pipe framing shared with the parent (stdlib only).

A message is an 8-byte big-endian length followed by a pickle. The parent sends
``{"op": "run", "job": JobRef, "kwargs": {...}}`` or ``{"op": "exit"}``; the child answers
each run with ``{"ok": True, "outputs": ..., "metrics": ...}`` or
``{"ok": False, "error": traceback, "metrics": ...}``, after any number of
``{"report": {...}}`` messages sent by :func:`sweep.report` while the job runs. The job's
own stdout and stderr go to the child's log file, never to these pipes, so a ``print`` in
a job can't break the protocol.
"""

from __future__ import annotations

import os
import pickle
import resource
import struct
import time
import traceback
from typing import Any

_HEADER = struct.Struct(">Q")
REPORT_FD: int | None = None  # where sweep.report() writes while a job runs


def send(fd: int, message: Any) -> None:
    """Write one framed pickle to ``fd`` (blocking until all of it is written)."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> Any:
    """Read one framed pickle from ``fd``; raises ``EOFError`` when the other end is gone."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, size))


def _proc_status(field: str) -> int | None:
    """A numeric field of /proc/self/status (``Threads``, ``VmHWM`` in kB), if readable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset VmHWM so the next reading is this job's peak (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_one(request: dict) -> dict:
    """Run one job in this process and describe what happened."""
    from sweep import job as jobmod

    hwm_reset = _reset_peak_rss()
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    try:
        fn = request["job"].load()
        raw = fn(**request["kwargs"])
        outputs = jobmod.normalize_outputs(raw)
        reply: dict = {"ok": True, "outputs": outputs}
    except BaseException as exc:  # a job's failure of any kind, sys.exit() included, is reported
        reply = {"ok": False, "error": "".join(traceback.format_exception(exc))}
    peak_kb = _proc_status("VmHWM") if hwm_reset else None
    if peak_kb is None:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reply["metrics"] = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": _cpu_seconds() - cpu0,
        "threads": _proc_status("Threads") or 0,
        "peak_rss": peak_kb * 1024,
        "affinity": sorted(os.sched_getaffinity(0)),
    }
    return reply


def serve(fd_in: int, fd_out: int) -> int:
    """Answer requests until ``exit`` or until the parent closes the pipe."""
    global REPORT_FD
    REPORT_FD = fd_out
    send(fd_out, {"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        try:
            request = receive(fd_in)
        except EOFError:
            return 0
        if request.get("op") == "exit":
            return 0
        reply = run_one(request)
        try:
            send(fd_out, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            error = f"the job's outputs could not be sent back: {exc!r}"
            send(fd_out, {"ok": False, "error": error, "metrics": reply["metrics"]})
