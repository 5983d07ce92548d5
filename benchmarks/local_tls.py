"""What mutual TLS costs the local default: TLS on (the default) against off, side by side.

    .venv/bin/python benchmarks/local_tls.py [--repeat 3] [--points 2000] [--big 100000]

Each measurement is a fresh interpreter (this file with ``--child``) running what ``sweep
submit`` runs on the local default, through the Python API, with ``cluster.security`` true or
false; the two settings alternate within each repeat, so drift of the machine falls on both.
Reported per setting, medians of the repeats:

* ``first_result_s``: from the call to ``Sweep.run`` to the first point's result (one no-op
  point per core; the cluster's start, with the certificates made, and the first round trip);
* ``per_point_ms``: wall of ``--points`` no-op points divided by their number;
* ``big_s``: wall of ``--big`` no-op points (one run each, 0 to skip).

The ratios TLS / plain are what the README quotes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(security: bool, points: int) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from sweep.client.runner import Sweep
    from sweep.cluster.clusters import local_cores

    with tempfile.TemporaryDirectory() as tmp:
        n = points or local_cores()
        s = Sweep(
            f"{HERE / 'jobs.py'}:noop",
            {"zip": {"i": list(range(n))}},
            cluster={"security": security, "dashboard": "127.0.0.1:0"},
            output=f"{tmp}/o.zarr",
        )
        t0 = time.perf_counter()
        s.run(progress=False)
        wall = time.perf_counter() - t0
    return {"first_result_s": s.timeline["first_result"], "wall_s": wall, "points": n}


def measure(security: bool, points: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(int(security)), str(points)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--points", type=int, default=2000)
    p.add_argument("--big", type=int, default=100_000)
    p.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(bool(args.child[0]), args.child[1])))
        return 0
    runs: dict[str, dict[str, list[float]]] = {"tls": {}, "plain": {}}
    for _ in range(args.repeat):
        for name, security in (("tls", True), ("plain", False)):
            first = measure(security, 0)
            many = measure(security, args.points)
            r = runs[name]
            r.setdefault("first_result_s", []).append(first["first_result_s"])
            r.setdefault("per_point_ms", []).append(1e3 * many["wall_s"] / many["points"])
    if args.big:
        for name, security in (("tls", True), ("plain", False)):
            runs[name]["big_s"] = [measure(security, args.big)["wall_s"]]
    medians = {name: {k: statistics.median(v) for k, v in r.items()} for name, r in runs.items()}
    result = {
        "runs": runs,
        "median": medians,
        "ratio": {k: medians["tls"][k] / medians["plain"][k] for k in medians["tls"]},
        "points": args.points,
        "big": args.big,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
