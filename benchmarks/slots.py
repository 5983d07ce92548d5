"""One client driving 12,800 slots: 100 simulated nodes of 128 cores, 100,000 points of 30-60 s.

    .venv/bin/python -m benchmarks.slots [--nodes 100 --cores 128 --points 100000 --low 30
        --high 60] [--out slots.json]

The nodes are :mod:`benchmarks.simcluster`'s (one ``dask worker`` process each, ``cores`` fake
CPUs, a lease folder of its own, Dask's housekeeping as the sweep's local worker has it:
:data:`QUIET`) with :mod:`benchmarks.standin` preloaded:
the pool leases the node's cores and keeps its children as always, but each child is an
in-process stand-in, since 12,800 child processes don't fit this machine. The client side is
real: the plan, the window, the listeners, the store; so are the scheduler and the worker's task. The job is
:func:`benchmarks.jobs.between` (it sleeps ``low`` to ``high`` s, spread evenly over the points,
and says when it started and ended). On the same workers, one after the other:

* **raw Dask**: ``client.map`` of the same function, one task per point asking one core
  (``resources.ask(1)``), every point submitted at once, results taken as they come
  (``as_completed``), from a fresh interpreter;
* **sweep**: a ``kind: address`` sweep of the same points from a fresh interpreter
  (``child.cap: false`` and ``child.prewarm: false``: no process is started).

For each: the wall; the ramp (until the ``slots``-th point started); how busy the slots were from
the ramp until the last point started (the mean and the least of the points running, over
``slots``, sampled every 0.5 s from the jobs' own start and end times); the client's CPU seconds
and peak RSS (its interpreter's ``getrusage``), the scheduler's CPU seconds (psutil) and the
workers' (all ``nodes`` of them). For the sweep also: records written per second of wall and the
time the store took (``Sweep.stats``). ``efficiency`` is raw Dask's wall over the sweep's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from benchmarks import simcluster  # noqa: E402
from sweep.capacity import resources  # noqa: E402
from sweep.cluster import localworker  # noqa: E402
from tests.helpers import fakecpus_library  # noqa: E402

SAMPLE_S = 0.5
PATH = {"PYTHONPATH": f"{HERE}:{ROOT}"}  # raw Dask's workers and client import benchmarks/jobs.py


def _env(config: dict[str, object]) -> dict[str, str]:
    """Dask config keys as the environment variables Dask reads them from."""
    return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): str(v) for key, v in config.items()}


# Both ways' workers run as the sweep's own local worker does (sweep.cluster.localworker.QUIET):
# Dask's profiler of the task threads off (the sweep's core pool stops it anyway: with 128
# threads a worker it was half of the worker's CPU), its housekeeping slowed. Idle, a default
# worker took 1.8% of a core here, so 100 of them took the 2-core machine; quiet, 0.3%.
QUIET = _env(localworker.QUIET)


def busy(t0: np.ndarray, t1: np.ndarray, start: float, slots: int) -> dict[str, float]:
    """The ramp and how busy the slots stayed, from the points' start and end times (seconds
    since the epoch) and the moment the run began: ``ramp_s`` until the ``slots``-th start,
    then the mean and least fraction of slots running a point, up to the last start."""
    starts, ends = np.sort(t0), np.sort(t1)
    full = starts[min(slots, len(starts)) - 1]
    times = np.arange(full, starts[-1], SAMPLE_S)
    if len(times) == 0:
        times = np.array([full])
    running = np.searchsorted(starts, times, side="right") - np.searchsorted(ends, times, side="right")
    return {
        "ramp_s": float(full - start),
        "busy_mean": float(running.mean() / slots),
        "busy_least": float(running.min() / slots),
        "last_start_s": float(starts[-1] - start),
    }


def _own_use() -> dict[str, float]:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return {"client_cpu_s": use.ru_utime + use.ru_stime, "client_peak_rss_mb": use.ru_maxrss / 1024}


def raw(address: str, points: int, low: float, high: float, slots: int) -> dict[str, Any]:
    """Raw Dask's way, in this interpreter."""
    import jobs  # benchmarks/jobs.py, on the workers' path through PYTHONPATH
    from distributed import Client, as_completed

    with Client(address) as client:
        start = time.time()
        futures = client.map(
            jobs.between, range(points), low=low, high=high, resources=resources.ask(1), pure=False
        )
        out = [result for _, result in as_completed(futures, with_results=True)]
        wall = time.time() - start
    t0 = np.array([o["t0"] for o in out])
    t1 = np.array([o["t1"] for o in out])
    return {"wall_s": wall, "done": len(out), **busy(t0, t1, start, slots), **_own_use()}


def sweep(address: str, points: int, low: float, high: float, slots: int, folder: str) -> dict[str, Any]:
    """The sweep's way, in this interpreter."""
    from sweep import Sweep

    s = Sweep(
        f"{HERE / 'jobs.py'}:between",
        {"zip": {"i": list(range(points))}, "fixed": {"low": low, "high": high}},
        output=f"{folder}/slots.zarr",
        cluster={"kind": "address", "address": address},
        child={"cap": False, "prewarm": False, "preflight": False},
    )
    start = time.time()
    ds = s.run(progress=False)
    wall = time.time() - start
    done = int((ds["status"] == "done").sum())
    t0, t1 = ds["t0"].values.ravel(), ds["t1"].values.ravel()
    ok = ~np.isnan(t0)
    return {
        "wall_s": wall,
        "done": done,
        **busy(t0[ok], t1[ok], start, slots),
        "records_per_s": done / wall,
        "store_s": s.stats["store_s"],
        **_own_use(),
    }


def _fresh(way: str, address: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One way in a fresh interpreter (its CPU and RSS are the client's alone)."""
    cmd = [
        sys.executable, str(Path(__file__)), "--way", way, "--address", address, "--points",
        str(args.points), "--low", str(args.low), "--high", str(args.high), "--nodes", str(args.nodes),
        "--cores", str(args.cores), "--folder", str(folder),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **PATH}, check=False)
    if out.returncode:
        raise RuntimeError(f"{way} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cpu(procs: list[subprocess.Popen]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = psutil.Process(p.pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def bench_slots(args: argparse.Namespace) -> dict[str, Any]:
    slots = args.nodes * args.cores
    ways: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="sweep-slots-") as tmp:
        folder = Path(tmp)
        lib = fakecpus_library(folder)
        t = time.time()
        standin, env = str(HERE / "standin.py"), QUIET | PATH
        address, procs = simcluster.start(folder, lib, args.nodes, args.cores, preload=standin, env=env)
        try:
            simcluster.wait_for_workers(address, args.nodes, timeout=600)
            started_s = time.time() - t
            print(f"{args.nodes} workers up in {started_s:.0f} s", file=sys.stderr)
            for way in ("raw_dask", "sweep"):
                scheduler0, workers0 = _cpu(procs[:1]), _cpu(procs[1:])
                ways[way] = _fresh(way, address, args, folder)
                ways[way]["scheduler_cpu_s"] = _cpu(procs[:1]) - scheduler0
                ways[way]["workers_cpu_s"] = _cpu(procs[1:]) - workers0
                print(f"{way}: {ways[way]}", file=sys.stderr)
        finally:
            simcluster.stop(procs)
    mean = (args.low + args.high) / 2
    return {
        "nodes": args.nodes,
        "cores_per_node": args.cores,
        "slots": slots,
        "points": args.points,
        "seconds": [args.low, args.high],
        "ideal_s": args.points * mean / slots,
        "workers_start_s": started_s,
        **ways,
        "efficiency": ways["raw_dask"]["wall_s"] / ways["sweep"]["wall_s"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--cores", type=int, default=128)
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--low", type=float, default=30.0)
    p.add_argument("--high", type=float, default=60.0)
    p.add_argument("--out", default="")
    p.add_argument("--way", choices=("raw_dask", "sweep"), help=argparse.SUPPRESS)
    p.add_argument("--address", help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    args = p.parse_args()
    slots = args.nodes * args.cores
    if args.way == "raw_dask":
        print(json.dumps(raw(args.address, args.points, args.low, args.high, slots)))
        return
    if args.way == "sweep":
        print(json.dumps(sweep(args.address, args.points, args.low, args.high, slots, args.folder)))
        return
    result = bench_slots(args)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
