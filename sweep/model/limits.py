"""Thread arithmetic: what a sweep will hold, and whether ``ulimit -u`` leaves room for it.

``RLIMIT_NPROC`` (``ulimit -u``) counts every thread of every process of the user, and a
``pthread_create`` past it aborts a JAX process (docs/threads.md). Before a sweep starts,
:func:`check_headroom` compares the plan (concurrent jobs on this node times the per-job
thread count, plus the Dask processes) with the limit minus the threads the user already
holds. Root is exempt from the limit, so nothing is checked for root.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

import psutil

from sweep.errors import SweepError

# Dask's own threads on a node: nanny, worker (event loop, offload, profiling) and, for the
# local cluster, the client and scheduler. Measured 12 plus one per task thread; rounded up.
DASK_THREADS = 24


class HeadroomError(SweepError, RuntimeError):
    """The plan holds more threads than ``ulimit -u`` allows; the message has the numbers."""


def uncapped_threads(cpus: int) -> int:
    """Threads of an uncapped JAX child that compiled and used ``jax.random`` on ``cpus`` CPUs.

    docs/threads.md: 1 main + OpenBLAS min(A,64)-1 + 2 PjRt pools of A + 8 compiler threads
    + min(32,A) codegen + 1 alarm + A foreach (A = CPUs visible); LLVM workers, up to A more,
    come on top for larger compiles. Matches the measured 21 / 94 / 302 / 878 threads at
    A = 2 / 16 / 64 / 256 within a few threads.
    """
    a = cpus
    return 1 + (min(a, 64) - 1) + 2 * a + 8 + min(32, a) + 1 + a


def user_threads(uid: int | None = None) -> int:
    """Threads held right now by every process of ``uid`` (default: this user)."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for p in psutil.process_iter(["uids", "num_threads"]):
        uids = p.info.get("uids")
        if uids is not None and uids.real == uid:
            total += p.info.get("num_threads") or 0
    return total


def nproc_limit() -> tuple[int | None, int | None]:
    """``ulimit -u`` soft and hard limits; None means unlimited."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    inf = resource.RLIM_INFINITY
    return (None if soft == inf else soft, None if hard == inf else hard)


@dataclass(frozen=True)
class Plan:
    """Threads a node will hold: ``jobs`` concurrent jobs of ``per_job`` threads plus Dask."""

    jobs: int
    per_job: int
    dask: int

    @property
    def total(self) -> int:
        return self.jobs * self.per_job + self.dask

    def describe(self) -> str:
        return f"{self.jobs} jobs x {self.per_job} threads + {self.dask} for Dask = {self.total}"


def plan(cores: int, k: int, capped: bool, budget: int) -> Plan:
    """The plan for a node of ``cores`` cores running jobs of ``k`` cores each."""
    per_job = budget if capped else uncapped_threads(cores)
    return Plan(jobs=max(1, cores // k), per_job=per_job, dask=DASK_THREADS + cores)


def check_headroom(p: Plan) -> str | None:
    """Raise HeadroomError if ``p`` can't fit under ``ulimit -u``; a warning text if it's tight."""
    soft, _ = nproc_limit()
    if soft is None or os.getuid() == 0:
        return None
    held = user_threads()
    room = soft - held
    if p.total > room:
        raise HeadroomError(
            f"ulimit -u is {soft} and you already hold {held} threads, leaving {room}; this sweep "
            f"would hold {p.describe()}. Lower the packing (raise resources.threads), keep "
            "child.cap on, or raise the limit (ulimit -u); child.preflight: false skips this check"
        )
    if p.total > 0.8 * room:
        return f"this sweep will hold {p.describe()} threads of the {room} that ulimit -u leaves"
    return None
