"""TPU points beside CPU points on one node, through the child layer: a worker's CorePool
(node-wide core and chip leases, warm children, the compile cache), no Dask (the TPU machine
opens no socket, not even on loopback).

    python benchmarks/tpu_points.py --out tpu_points.json [--repeat 3]

Three phases, one after the other, on the machine's cores and its TPU chip(s), ``--repeat``
times (``summary``: medians over the repeats):

1. ``cpu_alone``: ``--cpu`` CPU points (k = 1, a JAX CPU job) at once;
2. ``tpu_alone``: one TPU point (k = 1, a JAX job on the chip);
3. ``together``: ``--tpu`` TPU points and the same CPU points, all submitted at once.

And ``unleased``: two children opening the chip with no lease, at once (what a pool without
chip leases did). Per point: status, error, wall, peak threads and the point's thread budget.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sweep.capacity import accelerators
from sweep.client.plan import placement
from sweep.model.recipe import Recipe
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.worker import tpus
from sweep.worker.child import Child
from sweep.worker.pool import CorePool

JOBS = str(Path(__file__).resolve().parent / "jobs.py")
CPU_JOB = JobRef("file", JOBS, "matmul_grad")
TPU_JOB = JobRef("file", JOBS, "tpu_matmuls")
CPU_KWARGS = {"steps": 900, "n": 256}  # about 8 s on one core of the TPU machine
TPU_KWARGS = {"n": 4096, "steps": 3000}


def _placement(resources: dict[str, Any]) -> Placement:
    """Where a recipe with ``resources`` places each point: its cores (a TPU point's host
    runtime's with them) and thread budget, as a sweep's plan makes them."""
    loaded = Recipe.from_dict({"job": f"{JOBS}:noop", "params": {"grid": {"x": [0]}}, "resources": resources})
    return placement(loaded.recipe)


def _point(
    pool: CorePool, placement: Placement, config: ChildConfig, job: JobRef, kwargs: dict, t0: float
) -> dict:
    with pool.lease(placement, config) as child:
        start = time.monotonic() - t0
        record = child.run(job, kwargs)
        return {
            "kind": "tpu" if placement.tpus else "cpu",
            "status": record.status,
            "error": record.error[-300:],
            "wall_s": record.wall_s,
            "cpu_s": record.cpu_s,
            "cores": list(record.cores),
            "start_s": start,
            "end_s": time.monotonic() - t0,
            "peak_threads": record.peak_threads,
            "budget": placement.thread_budget,
            "pid": child.pid,
            "outputs": {k: float(v.values) for k, v in record.outputs.items()},
        }


def _phase(pool: CorePool, points: list[tuple[Placement, ChildConfig, JobRef, dict]]) -> list[dict]:
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(points)) as run:
        return list(run.map(lambda p: _point(pool, *p, t0), points))


def _unleased(tpu: ChildConfig) -> list[dict]:
    """Two children on the chip at once, no lease: what each job's record says."""
    cores = sorted(os.sched_getaffinity(0))
    with ThreadPoolExecutor(2) as run:
        children = list(run.map(lambda c: Child([c], tpu), cores[:2]))
        try:
            records = list(run.map(lambda child: child.run(TPU_JOB, {"steps": 50}), children))
        finally:
            for child in children:
                child.close()
    return [{"status": r.status, "error": r.error[-300:], "peak_threads": r.peak_threads} for r in records]


def scenario(cpu: int = 12, tpu: int = 2, repeat: int = 1) -> dict[str, Any]:
    """The three phases (``repeat`` times), a TPU point at k = 2 and the unleased pair; see the
    module docstring."""
    cache = tempfile.mkdtemp(prefix="sweep-tpu-cache-")
    cpu_config = ChildConfig(platforms="cpu", compile_cache=cache)
    tpu_config = ChildConfig(platforms="tpu", compile_cache=cache)
    placements = {
        "cpu_k1": _placement({}),
        "tpu_k1": _placement({"tpus": 1}),
        "tpu_k2": _placement({"tpus": 1, "threads": 2}),
    }
    budgets = {name: p.thread_budget for name, p in placements.items()}
    on_cpu = (placements["cpu_k1"], cpu_config, CPU_JOB, CPU_KWARGS)
    on_tpu = (placements["tpu_k1"], tpu_config, TPU_JOB, TPU_KWARGS)
    chips = tpus.detect()
    pool = CorePool()
    pool.setup()
    try:
        # warm the compile cache and the children first: what is compared is the packing
        _phase(pool, [on_cpu] * cpu)
        _phase(pool, [on_tpu])
        runs = [
            {
                "cpu_alone": _phase(pool, [on_cpu] * cpu),
                "tpu_alone": _phase(pool, [on_tpu]),
                "together": _phase(pool, [on_tpu] * tpu + [on_cpu] * cpu),
            }
            for _ in range(repeat)
        ]
        k2 = _phase(pool, [(placements["tpu_k2"], tpu_config, TPU_JOB, TPU_KWARGS)])
    finally:
        pool.teardown()
    return {
        "machine": {
            "cpus": len(os.sched_getaffinity(0)),
            "chips": [c.key for c in chips],
            "python": platform.python_version(),
        },
        "budgets": {**budgets, "tpu_runtime_threads": accelerators.TPU_RUNTIME_THREADS},
        "cores": {name: p.cores for name, p in placements.items()},
        "runs": runs,
        "tpu_k2": k2,
        "unleased": _unleased(tpu_config),
        "summary": summary(runs, k2),
    }


def summary(runs: list[dict[str, list[dict]]], k2: list[dict]) -> dict[str, Any]:
    """The figures the device test asserts on and benchmarks/results.json keeps: medians over
    the runs of each phase's median wall, and every point's status, lock-file error and threads."""
    rows = [r for run in runs for phase in run.values() for r in phase]

    def median(phase: str, kind: str) -> float:
        per_run = [statistics.median(r["wall_s"] for r in run[phase] if r["kind"] == kind) for run in runs]
        return statistics.median(per_run)

    def overlap(run: dict[str, list[dict]]) -> bool:
        spans = sorted((r["start_s"], r["end_s"]) for r in run["together"] if r["kind"] == "tpu")
        return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))

    alone, beside = median("cpu_alone", "cpu"), median("together", "cpu")
    return {
        "repeats": len(runs),
        "all_done": all(r["status"] == "done" for r in rows + k2),
        "lockfile_errors": sum("lockfile" in r["error"] for r in rows + k2),
        "tpu_points_overlap": any(overlap(run) for run in runs),
        "cpu_median_wall_alone_s": alone,
        "cpu_median_wall_beside_tpu_s": beside,
        "cpu_beside_tpu_ratio": beside / alone,
        "tpu_median_wall_alone_s": median("tpu_alone", "tpu"),
        "tpu_median_wall_beside_cpu_s": median("together", "tpu"),
        # the host cores a TPU point keeps busy (its CPU time over its wall: compile, runtime)
        "tpu_host_cores_busy": statistics.median(
            r["cpu_s"] / r["wall_s"] for run in runs for r in run["tpu_alone"] if r["wall_s"] > 0
        ),
        "tpu_points_cores": sorted({len(r["cores"]) for r in rows if r["kind"] == "tpu"}),
        "peak_threads_cpu_k1": max(r["peak_threads"] for r in rows if r["kind"] == "cpu"),
        "peak_threads_tpu_k1": max(r["peak_threads"] for r in rows if r["kind"] == "tpu"),
        "peak_threads_tpu_k2": max(r["peak_threads"] for r in k2),
        "over_budget": sum(r["peak_threads"] > r["budget"] for r in rows + k2),
        "ran_on_tpu": all(r["outputs"].get("tpu") == 1.0 for r in rows + k2 if r["kind"] == "tpu"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=12)
    parser.add_argument("--tpu", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="tpu_points.json")
    args = parser.parse_args()
    result = scenario(args.cpu, args.tpu, args.repeat)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1))
    print(json.dumps(result["unleased"], indent=1))


if __name__ == "__main__":
    main()
