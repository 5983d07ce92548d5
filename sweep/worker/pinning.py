"""Whether this node's kernel enforces CPU affinity: pinning verified, not assumed.

Every capped child is pinned to its leased cores with ``sched_setaffinity``. Some sandboxes,
containers and VMs accept the call and read the mask back but schedule the process anywhere
(measured on a gVisor sandbox: four busy processes pinned to CPU 0 each got a whole core).
The caps still hold there, since XLA, OpenBLAS and OpenMP size their pools from the mask they
read back; what is lost is isolation: co-located points can share cores.

:func:`enforced` measures it: two busy processes pinned to one CPU, then two pinned to two
CPUs, side by side for ``BUSY_S`` each; where the pin holds the first pair gets one CPU's time
between them, where it doesn't two, as the second pair does. :func:`of_node` keeps the answer
in the node's lease folder for the boot, so a node measures it once, whichever worker asks first.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sweep.worker.leases import lease_dir

log = logging.getLogger(__name__)
BUSY_S = 0.4
# Two processes pinned to one CPU can't get more than one CPU's time where the pin holds: more
# than ONE_CPU x BUSY_S together says it doesn't; a two-CPU pair that got more than TWO_CPUS x
# BUSY_S says the machine had room to show the difference.
ONE_CPU, TWO_CPUS = 1.3, 1.5
# one busy process: pin, spin BUSY_S of wall time, print the CPU seconds it got
SPIN = (
    "import os, resource, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
    "r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(r.ru_utime + r.ru_stime)\n"
)
UNKNOWN, NOT_ENFORCED, ENFORCED = -1, 0, 1
UNKNOWN_KEPT_S = 600.0


def _pair(cpus: tuple[int, int], seconds: float) -> float:
    """CPU seconds two busy processes pinned to ``cpus`` got together."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", SPIN, str(cpu), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for cpu in cpus
    ]
    return sum(float(p.communicate()[0] or 0) for p in procs)


def enforced(cpus: Sequence[int] | None = None, seconds: float = BUSY_S) -> int:
    """NOT_ENFORCED when two processes pinned to one CPU got more than one CPU's time between
    them; ENFORCED when they got at most that while two pinned to two CPUs got more; UNKNOWN with
    fewer than two CPUs, or when the machine was too busy with other work to tell."""
    mine = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    if len(mine) < 2:
        return UNKNOWN
    same = _pair((mine[0], mine[0]), seconds)
    if same > ONE_CPU * seconds:
        return NOT_ENFORCED
    apart = _pair((mine[0], mine[1]), seconds)
    return ENFORCED if apart > TWO_CPUS * seconds else UNKNOWN


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def of_node(folder: Path | None = None) -> int:
    """:func:`enforced` for this node, measured once per boot and kept in the lease folder (an
    unknown answer, from a machine too busy to tell, is measured again after UNKNOWN_KEPT_S)."""
    path = (folder or lease_dir()) / "affinity-enforced.json"
    boot = _boot_id()
    try:
        kept = json.loads(path.read_text())
        fresh = kept.get("enforced") != UNKNOWN or time.time() - kept.get("at", 0) < UNKNOWN_KEPT_S
        if kept.get("boot") == boot and fresh:
            return int(kept["enforced"])
    except (OSError, ValueError):
        pass
    found = enforced()
    if found == NOT_ENFORCED:
        log.warning(
            "CPU affinity is not enforced on this node: pinned children may share cores "
            "(their thread caps still hold); see docs/threads.md"
        )
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"boot": boot, "enforced": found, "at": time.time()}))
    os.replace(tmp, path)
    return found


def describe(found: int) -> str:
    """One line on what :func:`enforced` found, for ``sweep doctor`` and a run's summary."""
    return {
        ENFORCED: "enforced: two processes pinned to one CPU shared it",
        NOT_ENFORCED: (
            "NOT enforced: processes pinned to one CPU each got a whole CPU (a sandbox or VM); the "
            "thread caps still hold (pools are sized from the mask read back), but points may share cores"
        ),
        UNKNOWN: "unknown (fewer than two CPUs free to compare)",
    }[found]


class NodePinning:
    """:func:`of_node` measured in a thread of its own as a worker's pool starts (it takes about
    a second the first time on a node), read by each point as it ends (:meth:`result`)."""

    def __init__(self) -> None:
        self._found = UNKNOWN
        threading.Thread(target=self._measure, name="sweep-pinning", daemon=True).start()

    def _measure(self) -> None:
        try:
            self._found = of_node()
        except OSError as exc:  # no lease folder, no subprocess: it stays unknown
            log.info("could not tell whether CPU affinity is enforced: %s", exc)

    def result(self) -> int:
        """ENFORCED, NOT_ENFORCED or UNKNOWN (also while it is still being measured: a point
        never waits for it, the first points of a node may record it unknown)."""
        return self._found
