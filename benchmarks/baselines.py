"""The baselines a sweep is run beside: a job array, Dask called directly, joblib/loky and
Parsl HTEX. Each returns its wall in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jobs  # benchmarks/jobs.py
import parsl_htex  # benchmarks/parsl_htex.py
from distributed import Client, LocalCluster

from sweep.cluster.clusters import local_cluster, local_cores

HERE = Path(__file__).resolve().parent
JOBS = HERE / "jobs.py"
CORES = local_cores()


def cluster() -> LocalCluster:
    """A fresh local cluster as a sweep starts it (every contender that needs Dask)."""
    return local_cluster(dashboard="127.0.0.1:0")


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_job_array(job: str, n: int, fixed: dict) -> float:
    """A job array: a fresh, uncapped `python` per job, `cores` at a time."""
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import jobs; "
        f"jobs.{job}(seed=int(sys.argv[1]), **{fixed!r})"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    pending, running = list(range(n)), []
    t0 = time.perf_counter()
    while pending or running:
        while pending and len(running) < CORES:
            running.append(subprocess.Popen([sys.executable, "-c", code, str(pending.pop(0))], env=env))
        time.sleep(0.02)
        for p in [p for p in running if p.poll() is not None]:
            assert p.returncode == 0
            running.remove(p)
    return time.perf_counter() - t0


def run_naive_dask(job: str, n: int, fixed: dict) -> float:
    """JAX called directly in LocalCluster worker threads (a fresh cluster; clock: the map only)."""
    with cluster() as c, Client(c) as client:
        fn = getattr(jobs, job)
        t0 = time.perf_counter()
        futures = client.map(lambda s: fn(seed=s, **fixed), range(n), pure=False)
        client.gather(futures)
        return time.perf_counter() - t0


def run_loky(job: str, n: int, fixed: dict, job_file: Path = JOBS, env: dict | None = None) -> float:
    """joblib/loky with n_jobs=cores: reused worker processes (a fresh executor per run),
    started with ``env`` added to this process's environment."""
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)
    saved = dict(os.environ)
    os.environ.update({**(env or {}), "PYTHONPATH": str(HERE)})  # the new workers inherit it
    try:
        return timed(
            lambda: Parallel(n_jobs=CORES)(
                delayed(jobs.call_file)(str(job_file), job, seed=s, **fixed) for s in range(n)
            )
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_parsl(job: str, n: int, fixed: dict, job_file: Path = JOBS, env: dict | None = None) -> float:
    """Parsl HTEX with ``cpu_affinity="block"``, one worker per core (benchmarks/parsl_htex.py);
    NaN when it can't run here."""
    wall = parsl_htex.run_parsl(job_file, job, [{"seed": s, **fixed} for s in range(n)], env)
    return float("nan") if wall is None else wall
