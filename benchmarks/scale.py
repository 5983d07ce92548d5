"""No-op points at scale, one sweep in a fresh process of its own: its peak RSS is the client's.

    .venv/bin/python benchmarks/scale.py POINTS [--max-jobs N]   # prints one line of JSON

``benchmarks/jobs.py:noop`` over a ``zip`` of POINTS values on a local cluster of every core,
``child.max_jobs`` set to N when given. What ``scale``, ``million`` and ``recycling`` of
``benchmarks/run.py`` run (:func:`in_fresh_process`): the wall, the client's peak RSS, the time
spent writing the store and how many children ran the points.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def sweep_noop(points: int, max_jobs: int | None = None) -> dict[str, Any]:
    """The sweep, in this process."""
    from distributed import Client

    from sweep import Sweep
    from sweep.cluster.clusters import local_cluster

    child = {} if max_jobs is None else {"max_jobs": max_jobs}
    with (
        local_cluster(dashboard="127.0.0.1:0") as c,
        Client(c) as client,
        tempfile.TemporaryDirectory() as tmp,
    ):
        s = Sweep(
            f"{HERE / 'jobs.py'}:noop",
            {"zip": {"i": list(range(points))}},
            child=child,
            output=f"{tmp}/o.zarr",
        )
        ds = s.run(client=client, progress=False)
        done = int((ds["status"] == "done").sum())
        children = len(set(ds["pid"].values.tolist()))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    wall, store = s.stats["wall_s"], s.stats["store_s"]
    return {
        "points": points,
        "done": done,
        "wall_s": wall,
        "client_peak_rss_mb": rss / 2**20,
        "store_s": store,
        "store_share": store / wall,
        "children": children,
    }


def in_fresh_process(points: int, max_jobs: int | None = None) -> dict[str, Any]:
    """:func:`sweep_noop` in a fresh interpreter running this file."""
    args = [sys.executable, str(Path(__file__)), str(points)]
    if max_jobs is not None:
        args += ["--max-jobs", str(max_jobs)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("points", type=int)
    p.add_argument("--max-jobs", type=int)
    args = p.parse_args()
    print(json.dumps(sweep_noop(args.points, args.max_jobs)))
