"""A simulated cluster of many-core nodes on this machine: a ``dask scheduler`` and one ``dask
worker`` process per node, each seeing ``cores`` fake CPUs (``tests/fakecpus.c`` preloaded: an
unpinned process sees ``FAKE_NCPUS`` CPUs) with its own core lease folder (``SWEEP_LEASE_DIR``),
advertising ``threads=cores``. Used by :mod:`benchmarks.ramp` and :mod:`benchmarks.slots`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sweep.capacity import resources


def start(
    folder: Path,
    lib: Path,
    nodes: int,
    cores: int,
    preload: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[str, list[subprocess.Popen]]:
    """The scheduler and ``nodes`` workers; the scheduler's address and the processes
    (the scheduler first). ``preload``: a ``--preload`` for every worker; ``env``: more of every
    process's environment (the scheduler unpickles the tasks too)."""
    bin_dir = Path(sys.executable).parent
    file = folder / "scheduler.json"
    scheduler = subprocess.Popen(
        [str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(file)],
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    while not file.exists():
        time.sleep(0.1)
    procs = [scheduler]
    extra = ["--preload", preload] if preload else []
    for i in range(nodes):
        node_env = {
            **os.environ,
            "LD_PRELOAD": str(lib),
            "FAKE_NCPUS": str(cores),
            "SWEEP_LEASE_DIR": str(folder / f"leases-{i}"),
            **(env or {}),
        }
        procs.append(subprocess.Popen(
            [str(bin_dir / "dask"), "worker", "--scheduler-file", str(file), "--nthreads", str(cores),
             "--resources", f"{resources.CORES}={cores}", "--host", "127.0.0.1", "--dashboard-address",
             "127.0.0.1:0", "--no-nanny", *extra],
            env=node_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
    return json.loads(file.read_text())["address"], procs


def wait_for_workers(address: str, n: int, timeout: float = 120) -> None:
    """Until ``n`` workers have joined the scheduler at ``address``."""
    from distributed import Client

    with Client(address) as client:
        client.wait_for_workers(n, timeout=timeout)


def stop(procs: list[subprocess.Popen]) -> None:
    """Workers first: a worker whose scheduler went first keeps trying to reach it."""
    for p in reversed(procs):
        p.terminate()
    for p in reversed(procs):
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
