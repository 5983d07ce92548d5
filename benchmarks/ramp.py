"""The ramp on a node of many cores, simulated: sweep against raw Dask on the same workers.

    .venv/bin/python benchmarks/run.py --only ramp [--repeat 3]

A real 128-core node isn't here, so one is simulated: ``NODES`` ``dask worker`` processes of
``CORES_PER`` fake CPUs each (``tests/fakecpus.c`` preloaded: an unpinned process sees
``FAKE_NCPUS`` CPUs), each with its own lease folder (``SWEEP_LEASE_DIR``: a node each), all
on one ``dask scheduler``. ``JOBS`` sleep jobs of ``SECONDS`` s run on them twice per repeat, on
fresh workers each repeat (a pool keeps its children warm between sweeps):

* **sweep**: a ``kind: address`` sweep of ``benchmarks/jobs.py:sleeper``, children unpinned
  (``child.cap: false``: the fake CPUs can't be pinned to) and not prewarmed (each prewarmed
  child imports JAX; 128 of them on 2 real cores would measure this machine's CPUs, not the
  ramp), so every slot's first job waits for its child to start;
* **raw Dask**: ``client.map`` of the same function on the same workers, one per ``threads``
  slot (``resources.ask(1)``), no child process;
* **sweep, warm**: the same sweep again on the same workers, whose pools kept their children:
  no child starts. Cold less warm is what the children's starts cost; warm less raw Dask is
  everything else (dispatch, the pool's leases, records, the store).

Reported, medians over repeats: each wall, sweep's over raw Dask's, and for sweep the time
from ``Sweep.run`` to the moment every slot ran a point (the ``NODES * CORES_PER``-th start
in the store), against the ideal ``JOBS * SECONDS / slots``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from benchmarks import simcluster  # noqa: E402
from sweep.capacity import resources  # noqa: E402
from tests.helpers import fakecpus_library  # noqa: E402  (also builds it for the tests)

NODES, CORES_PER = 8, 16
JOBS, SECONDS = 1024, 3.0


def _sweep(address: str, folder: Path, run: int | str) -> dict[str, float]:
    from sweep import Sweep

    s = Sweep(
        f"{HERE / 'jobs.py'}:sleeper",
        {"zip": {"i": list(range(JOBS))}, "fixed": {"seconds": SECONDS}},
        output=folder / f"ramp-{run}.zarr",
        cluster={"kind": "address", "address": address},
        child={"cap": False, "prewarm": False, "preflight": False},
    )
    t0 = time.time()
    ds = s.run(progress=False)
    wall = time.time() - t0
    assert (ds["status"] == "done").all(), ds["error"].values[:3]
    starts = np.sort(ds["started"].values.astype("datetime64[ns]").astype(np.int64) / 1e9)
    return {
        "wall_s": wall,
        "first_start_s": float(starts[0] - t0),
        "all_busy_s": float(starts[NODES * CORES_PER - 1] - t0),
    }


def _raw(address: str) -> float:
    import jobs  # benchmarks/jobs.py, on the workers' path through PYTHONPATH
    from distributed import Client

    with Client(address) as client:
        t0 = time.time()
        one_core = resources.ask(1)
        futures = client.map(jobs.sleeper, range(JOBS), seconds=SECONDS, resources=one_core, pure=False)
        client.gather(futures)
        return time.time() - t0


def _child_start_cpu_s(tries: int = 10) -> float:
    """CPU seconds one child takes to start (interpreter and the bootstrap's imports), median."""
    import resource

    costs = []
    for _ in range(tries):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, "-c", "import sweep.child.bootstrap, sweep.child.serving"], check=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        costs.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(costs)


def bench_ramp(repeat: int) -> dict[str, Any]:
    runs: list[dict[str, float]] = []
    start_cpu = _child_start_cpu_s()
    with tempfile.TemporaryDirectory(prefix="sweep-ramp-") as tmp:
        folder = Path(tmp)
        lib = fakecpus_library(folder)
        for r in range(repeat):  # fresh workers each time: no child left warm by the last run
            run_folder = folder / f"run-{r}"
            run_folder.mkdir()
            address, procs = simcluster.start(run_folder, lib, NODES, CORES_PER)
            try:
                simcluster.wait_for_workers(address, NODES)
                swept = _sweep(address, run_folder, r)
                raw = _raw(address)
                warm = _sweep(address, run_folder, f"{r}-warm")  # the same workers: children warm
                runs.append({**swept, "dask_wall_s": raw, "warm_wall_s": warm["wall_s"]})
                print(f"ramp run {r + 1}: {runs[-1]}", file=sys.stderr)
            finally:
                simcluster.stop(procs)
    med = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    return {
        "nodes": NODES,
        "cores_per_node": CORES_PER,
        "slots": NODES * CORES_PER,
        "jobs": JOBS,
        "seconds": SECONDS,
        "ideal_s": JOBS * SECONDS / (NODES * CORES_PER),
        "sweep_wall_s": med["wall_s"],
        "dask_wall_s": med["dask_wall_s"],
        "sweep_over_dask": med["wall_s"] / med["dask_wall_s"],
        # the split of sweep's wall over raw Dask's: its children's starts (cold less warm) and
        # everything else (warm less raw: dispatch, the pool, records, the store)
        "warm_wall_s": med["warm_wall_s"],
        "warm_over_dask": med["warm_wall_s"] / med["dask_wall_s"],
        "child_starts_s": med["wall_s"] - med["warm_wall_s"],
        "everything_else_s": med["warm_wall_s"] - med["dask_wall_s"],
        "all_busy_s": med["all_busy_s"],
        "first_start_s": med["first_start_s"],
        # the slots' children start on this machine's few real cores: the least time that takes
        "start_floor_s": NODES * CORES_PER * start_cpu / (os.cpu_count() or 1),
        "child_start_cpu_s": start_cpu,
        "runs": runs,
    }
