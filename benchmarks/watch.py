"""What the parent's watch of each running child costs the jobs: plain processes side by side
(the honest limit, :mod:`benchmarks.plain`) against the default's capped children with the
watch as it is and as it was. Runs where no socket can be opened (the TPU machine).

    python -m benchmarks.watch --job fdfd --jobs 26 --repeat 3 --out watch.json

Ways, interleaved, each ``--repeat`` times (:mod:`benchmarks.node`'s ``plain`` and warm
``capped``), with the parent's own CPU seconds over each:

* ``plain``: the limit;
* ``capped``: the watch as it is (:mod:`sweep.worker.watch`: every ``SAMPLE_S`` while a job is
  young or near a limit, else every ``SAMPLE_SETTLED_S``, one ``/proc`` read a process; the
  subprocess scan backing off to ``SCAN_MAX_S``);
* ``capped_watch_before``: every 0.1 s throughout, psutil's three reads a process, the scan
  every 0.5 s (the code before 2026-12-07);
* ``capped_sample_1s``: every 1.0 s throughout.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.node import WORKLOADS, WayResult, _capped, _plain, _warm_then
from benchmarks.plain import spread
from sweep.wire.childconfig import ChildConfig
from sweep.worker import process, watch
from sweep.worker.pool import CorePool

WAYS = ("plain", "capped", "capped_watch_before", "capped_sample_1s")


@contextmanager
def _watch(sample_s: float | None = None, settled_s: float | None = None, scan_max_s: float | None = None,
           psutil_reads: bool = False) -> Iterator[None]:  # fmt: skip
    """The watch's settings changed for a way, put back after it."""
    saved = (watch.SAMPLE_S, watch.SAMPLE_SETTLED_S, process.SCAN_MAX_S, process.stat)
    watch.SAMPLE_S = sample_s or watch.SAMPLE_S
    watch.SAMPLE_SETTLED_S = settled_s or watch.SAMPLE_SETTLED_S
    process.SCAN_MAX_S = scan_max_s or process.SCAN_MAX_S
    if psutil_reads:
        process.stat = lambda pid: None  # type: ignore[assignment]  # psutil's reads instead
    try:
        yield
    finally:
        watch.SAMPLE_S, watch.SAMPLE_SETTLED_S, process.SCAN_MAX_S, process.stat = saved


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def run(job: str = "fdfd", jobs: int = 26, repeat: int = 3) -> dict[str, Any]:
    work = WORKLOADS[job]
    config = ChildConfig(platforms="cpu", compile_cache=tempfile.mkdtemp(prefix="sweep-watch-cache-"))
    pool = CorePool()
    pool.setup()

    def capped(**settings: Any) -> Callable[[], WayResult]:
        def way() -> WayResult:
            with _watch(**settings):
                return _warm_then(pool, config, work, jobs)

        return way

    ways = {
        "plain": lambda: _plain(work, jobs, pool.cores),
        "capped": capped(),
        "capped_watch_before": capped(sample_s=0.1, settled_s=0.1, scan_max_s=0.5, psutil_reads=True),
        "capped_sample_1s": capped(sample_s=1.0, settled_s=1.0),
    }
    got: dict[str, dict[str, list[float]]] = {
        name: {"walls": [], "per_job": [], "parent_cpu_s": []} for name in WAYS
    }
    try:
        _capped(pool, config, work, len(pool.cores))  # warm the children and the compile cache
        for i in range(repeat):
            for name in WAYS[i % len(WAYS) :] + WAYS[: i % len(WAYS)]:  # the order rotates
                before = _cpu_s()
                wall, _, walls = ways[name]()
                got[name]["walls"].append(wall)
                got[name]["per_job"].extend(walls)
                got[name]["parent_cpu_s"].append(round(_cpu_s() - before, 2))
    finally:
        pool.teardown()
    limit = statistics.median(got["plain"]["walls"])
    return {
        "job": job,
        "jobs": jobs,
        "cores": len(pool.cores),
        "ways": {
            name: {
                "median_wall_s": statistics.median(v["walls"]),
                "fraction_of_plain_limit": limit / statistics.median(v["walls"]),
                "walls_s": v["walls"],
                "per_job_s": spread(v["per_job"]),
                "parent_cpu_s": v["parent_cpu_s"],
            }
            for name, v in got.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=list(WORKLOADS), default="fdfd")
    parser.add_argument("--jobs", type=int, default=26)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="watch.json")
    args = parser.parse_args()
    result = run(args.job, args.jobs, args.repeat)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
