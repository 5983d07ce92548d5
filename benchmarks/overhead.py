"""Per-job overhead of warm vs cold children, and no-op points end to end.

    .venv/bin/python benchmarks/overhead.py [--jobs 200] [--points 1000] [--json out.json]

1. Pool level (no Dask): lease a core, run a no-op job in the child, give it back. "warm"
   reuses the child; "cold" recycles it after every job (``max_jobs=1``), so each job pays
   a fresh ``python`` process. Median ms per job over ``--jobs`` jobs, and the ratio.
2. End to end: ``--points`` no-op points through ``Sweep.run`` on a LocalCluster with every
   core (the cluster is started before the clock starts): wall time and ms per point.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from distributed import Client

from sweep import Sweep
from sweep.cluster.clusters import local_cluster
from sweep.model.job import parse_job
from sweep.wire.childconfig import ChildConfig
from sweep.wire.placement import Placement
from sweep.wire.recycling import Recycling
from sweep.worker.pool import CorePool

NOOP = Path(__file__).resolve().parents[1] / "recipes" / "jobs" / "fdfd.py"


def pool_overhead(jobs: int, warm: bool) -> list[float]:
    pool = CorePool()
    pool.setup()
    ref = parse_job(f"{NOOP}:noop")
    times = []
    try:
        for _ in range(jobs):
            t0 = time.perf_counter()
            with pool.lease(Placement(1), ChildConfig(), Recycling.of(10**9 if warm else 1, None)) as child:
                outcome = child.run(ref, {})
            times.append(time.perf_counter() - t0)
            assert outcome.status == "done", outcome.error
    finally:
        pool.teardown()
    return times[1:] if warm else times  # the first warm job pays the spawn


def end_to_end(points: int) -> dict:
    with (
        local_cluster(dashboard="127.0.0.1:0") as cluster,
        Client(cluster) as client,
        tempfile.TemporaryDirectory() as tmp,
    ):
        s = Sweep(f"{NOOP}:noop", {"zip": {"i": list(range(points))}}, output=f"{tmp}/noop.zarr")
        t0 = time.perf_counter()
        ds = s.run(client=client, progress=False)
        wall = time.perf_counter() - t0
        done = int((ds["status"] == "done").sum())
    return {"points": points, "done": done, "wall_s": wall, "ms_per_point": 1e3 * wall / points}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--points", type=int, default=1000)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    warm = pool_overhead(args.jobs, warm=True)
    cold = pool_overhead(max(10, args.jobs // 10), warm=False)
    result = {
        "warm_ms_median": 1e3 * statistics.median(warm),
        "cold_ms_median": 1e3 * statistics.median(cold),
        "end_to_end": end_to_end(args.points),
    }
    result["cold_over_warm"] = result["cold_ms_median"] / result["warm_ms_median"]
    print(f"per-job overhead, warm child: {result['warm_ms_median']:.2f} ms (median of {len(warm)})")
    print(f"per-job overhead, cold child: {result['cold_ms_median']:.1f} ms (median of {len(cold)})")
    print(f"cold / warm: {result['cold_over_warm']:.0f}x")
    e = result["end_to_end"]
    print(f"{e['points']} no-op points end to end: {e['wall_s']:.1f} s ({e['ms_per_point']:.1f} ms/point)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
