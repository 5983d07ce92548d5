"""N JAX jobs on every core of one node, without Dask: the fraction of the node's limit each
way of running them reaches. Runs where no socket can be opened (the TPU machine).

    python -m benchmarks.node --jobs 26 --repeat 3 --out node.json [--job fdfd] [--skip WAY ...]

The job (:data:`WORKLOADS`): ``matmul``, a jitted gradient of matrix products, or ``fdfd``, the
quickstart's adjoint optimisation (``recipes/jobs/fdfd.py``, 45 Adam steps of a 1,440-cell
solve). The limit is ``jobs x t1 / cores``: ``t1`` is one job's wall alone on one core (a
capped child: one XLA thread); a way's fraction is the limit over its wall. The machine's own
side-by-side limit is ``jobs x tc / cores``, ``tc`` the wall of ``cores`` such jobs at once, one
per warm capped child: what the machine allows when every core is busy, before any
orchestration. The same two walls of a pure-Python loop that touches little memory
(``benchmarks/jobs.py:python_loop``) say whether the cores themselves slow down when all are
busy, or only the job's share of caches and memory does (``loop_at_once_over_alone``).
Ways, each ``--repeat`` times, interleaved:

* ``plain``: the honest limit (:mod:`benchmarks.plain`): ``cores`` plain processes side by
  side, each pinned to one core, capped and warm, running a static share of the jobs with no
  orchestrator; every way's ``fraction_of_plain_limit`` is this wall over its own (medians);
* ``capped``: the project's default: a worker's CorePool (node-wide core leases, warm children
  pinned to k = 1 core, the capped environment: one XLA thread, computations run inline; a
  shared compile cache), ``cores`` at once, after an untimed wave that warms the children;
* ``capped_two_client_threads``: the same with ``NPROC = PJRT_NPROC = 2`` and asynchronous
  dispatch (the default before one-core children ran computations inline: docs/threads.md);
* ``uncapped``: ``python`` processes started as a job array would, ``cores`` at a time;
* ``loky``: joblib's loky executor with ``cores`` workers (where joblib is installed).

Each way's per-job walls (``per_job_s``: median, p90, max; as the child measured them for
the capped ways) and the memory-bandwidth probe (``memory_bandwidth``: 64 MB copies alone and
on every core at once) show the tail: where they slow, the machine's shared memory does.
``--skip`` leaves ways out (``uncapped`` runs the fdfd job 19x longer than ``capped``: 221 s
a repeat on the TPU machine).

Every way runs ``JAX_PLATFORMS=cpu``. Also ``affinity_enforced``: whether the kernel enforces
the children's pins here (:mod:`sweep.worker.pinning`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.client_threads import xla_threads
from benchmarks.plain import bandwidth, plain, spread
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.worker import pinning
from sweep.worker.pool import CorePool

HERE = Path(__file__).resolve().parent
WORKLOADS = {  # each about 4 s on one core of the TPU machine
    "matmul": (JobRef("file", str(HERE / "jobs.py"), "matmul_grad"), {"steps": 1350, "n": 256}),
    "fdfd": (
        JobRef("file", str(HERE.parent / "recipes" / "jobs" / "fdfd.py"), "optimize"),
        {"steps": 45, "n": 1440, "n_design": 480, "checkpoint_every": 0},
    ),
}
Work = tuple[JobRef, dict[str, Any]]
WayResult = tuple[float, list[int], list[float]]  # wall, each job's peak threads, each job's wall
LOOP: Work = (JobRef("file", str(HERE / "jobs.py"), "python_loop"), {})  # see the docstring
UNCAPPED = (
    "import runpy, psutil; runpy.run_path({path!r})[{name!r}](**{kwargs!r}); "
    "print(psutil.Process().num_threads())"
)


def _capped(pool: CorePool, config: ChildConfig, work: Work, jobs: int) -> WayResult:
    """Wall of ``jobs`` points on the pool's cores, each one's peak threads and each one's
    wall as its child measured it."""

    def one(_: int) -> tuple[int, float]:
        with pool.lease(Placement(1), config) as child:
            record = child.run(*work)
            assert record.status == "done", record.error
            return record.peak_threads, record.wall_s

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(pool.cores)) as run:
        got = list(run.map(one, range(jobs)))
    return time.perf_counter() - t0, [p for p, _ in got], [w for _, w in got]


def _warm_then(pool: CorePool, config: ChildConfig, work: Work, jobs: int) -> WayResult:
    """:func:`_capped` once the pool's children of ``config`` are warm (an untimed first wave:
    a sweep's children stay warm from point to point, what is timed is the packing)."""
    _capped(pool, config, work, len(pool.cores))
    return _capped(pool, config, work, jobs)


def _uncapped(work: Work, jobs: int, cores: int) -> tuple[float, list[int]]:
    """Wall of ``jobs`` plain ``python`` processes, ``cores`` at a time, and their threads."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    code = UNCAPPED.format(path=work[0].target, name=work[0].function, kwargs=work[1])

    def one(_: int) -> int:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return int(out.stdout.split()[-1])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(cores) as run:
        threads = list(run.map(one, range(jobs)))
    return time.perf_counter() - t0, threads


def _plain(work: Work, jobs: int, cores: tuple[int, ...]) -> WayResult:
    """:func:`benchmarks.plain.plain`: the honest limit, as a way (its threads not counted)."""
    wall, walls = plain(work, jobs, cores)
    return wall, [0], walls


def _loky_job(job: JobRef, kwargs: dict[str, Any]) -> int:
    import psutil

    _job_function(job)(**kwargs)
    return psutil.Process().num_threads()


@functools.cache
def _job_function(job: JobRef) -> Any:
    """The job's function, its file run once per process: a loky worker keeps what the module
    caches (fdfd.py's compiled step) from job to job, as a sweep's warm child does."""
    return runpy.run_path(job.target)[job.function]


def _loky(work: Work, jobs: int, cores: int) -> tuple[float, list[int]] | None:
    try:
        from joblib import Parallel, delayed
    except ImportError:
        return None
    # by its module's name, not ``__main__``'s (``python -m benchmarks.node``): a loky worker
    # unpickles it by reference, with the job cache it uses
    from benchmarks.node import _loky_job as job

    os.environ["JAX_PLATFORMS"] = "cpu"
    t0 = time.perf_counter()
    threads = Parallel(n_jobs=cores, backend="loky")(delayed(job)(*work) for _ in range(jobs))
    return time.perf_counter() - t0, list(threads)


WAYS = ("plain", "capped", "capped_two_client_threads", "uncapped", "loky")


def run(jobs: int = 26, repeat: int = 3, job: str = "matmul", skip: tuple[str, ...] = ()) -> dict[str, Any]:
    work = WORKLOADS[job]
    cache = tempfile.mkdtemp(prefix="sweep-node-cache-")
    default = ChildConfig(platforms="cpu", compile_cache=cache)
    two_threads = ChildConfig(platforms="cpu", compile_cache=cache, env=xla_threads(2).env)
    pool = CorePool()
    pool.setup()
    cores = len(pool.cores)
    walls: dict[str, list[float]] = {}
    threads: dict[str, int] = {}
    per_job: dict[str, list[float]] = {}
    try:
        _capped(pool, default, work, cores)  # warm the children and the compile cache
        t1 = statistics.median(_capped(pool, default, work, 1)[0] for _ in range(3))
        together = statistics.median(_capped(pool, default, work, cores)[0] for _ in range(3))
        loop_alone = statistics.median(_capped(pool, default, LOOP, 1)[0] for _ in range(3))
        loop_together = statistics.median(_capped(pool, default, LOOP, cores)[0] for _ in range(3))
        for i in range(repeat):
            ways = {
                "plain": lambda: _plain(work, jobs, pool.cores),
                "capped": lambda: _warm_then(pool, default, work, jobs),
                "capped_two_client_threads": lambda: _warm_then(pool, two_threads, work, jobs),
                "uncapped": lambda: _uncapped(work, jobs, cores),
                "loky": lambda: _loky(work, jobs, cores),
            }
            names = [name for name in WAYS if name not in skip]
            for name in names[i % len(names) :] + names[: i % len(names)]:  # the order rotates
                got = ways[name]()
                if got is not None:
                    walls.setdefault(name, []).append(got[0])
                    threads[name] = max(threads.get(name, 0), max(got[1]))
                    per_job.setdefault(name, []).extend(got[2] if len(got) > 2 else [])
        memory = bandwidth(pool.cores)
    finally:
        pool.teardown()
    honest = statistics.median(walls["plain"]) if "plain" in walls else None
    limit = jobs * t1 / cores
    side_by_side = jobs * together / cores
    return {
        "machine": {"cores": cores, "python": platform.python_version(), "platform": platform.platform()},
        "affinity_enforced": pinning.enforced(),
        "jobs": jobs,
        "job": f"{Path(work[0].target).relative_to(HERE.parent)}:{work[0].function} {work[1]}",
        "one_job_one_thread_s": t1,
        "limit_s": limit,
        "one_per_core_at_once_s": together,
        "side_by_side_limit_s": side_by_side,
        "loop_alone_s": loop_alone,
        "loop_at_once_s": loop_together,
        "loop_at_once_over_alone": loop_together / loop_alone,
        "fraction_of_side_by_side_limit": {k: side_by_side / statistics.median(v) for k, v in walls.items()},
        "plain_limit_s": honest,
        "fraction_of_plain_limit": {k: honest / statistics.median(v) for k, v in walls.items() if honest},
        "per_job_s": {k: spread(v) for k, v in per_job.items() if v},
        "memory_bandwidth": memory,
        "walls_s": walls,
        "median_wall_s": {k: statistics.median(v) for k, v in walls.items()},
        "fraction_of_limit": {k: limit / statistics.median(v) for k, v in walls.items()},
        "peak_threads_per_job": threads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=26)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="node.json")
    parser.add_argument("--job", choices=list(WORKLOADS), default="matmul")
    parser.add_argument("--skip", choices=WAYS, action="append", default=[], help="a way to leave out")
    args = parser.parse_args()
    result = run(args.jobs, args.repeat, args.job, tuple(args.skip))
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "walls_s"}, indent=1))


if __name__ == "__main__":
    main()
