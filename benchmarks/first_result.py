"""Time to first result: from a fresh ``python`` to the first point done, split into parts.

    .venv/bin/python benchmarks/run.py --only first_result [--repeat 3]

Each repeat is a fresh interpreter (this file with ``--child``) that runs what ``sweep
submit`` runs, through the Python API, on the local default: a sweep of one point per core
of ``benchmarks/jobs.py:first_result``, a small JAX job that times its own ``import jax``,
compile and run. The parts, in order, from the interpreter's start:

* ``interpreter``: Python starting up to this file's first line;
* ``import``: ``from sweep.client.runner import Sweep`` (dask, distributed, xarray, zarr...);
* ``plan``: the Sweep built and validated (recipe, job signature);
* ``store_and_cluster``: until both the store is ready and the local cluster is up (a new
  store is created while the cluster starts); ``store`` and ``cluster`` say when each was
  ready, from the same start (they overlap, so they are not in the sum);
* ``setup``: core pool and page registered, provenance, the sweep announced (to the first submit);
* ``to_job``: from the first submit to the first job's start in its child (scheduling, the
  core lease, spawning the child);
* ``import_jax``, ``compile``, ``run``: the first job's own parts (``import_jax`` is 0 when
  its child had imported jax before the job: ``child.prewarm``);
* ``back``: from the first job's end to its result in the client.

Beside the parts: ``cpu_s``, the CPU seconds (user and system) this interpreter and every
process it started (the local worker, the jobs' children) used from the interpreter's start
to the run's end, and ``ended``, when that was: on a machine of few cores, ``cpu_s`` over the
cores says how much of the time to the first result the machine's cores were full.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PARTS = (
    "interpreter",
    "import",
    "plan",
    "store_and_cluster",
    "setup",
    "to_job",
    "import_jax",
    "compile",
    "run",
    "back",
)


def child(start: float) -> dict[str, float]:
    """One run in this fresh interpreter, started by its parent at ``start`` (time.time())."""
    t_file = time.time()
    from sweep.client.runner import Sweep
    from sweep.cluster.clusters import local_cores

    t_import = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        s = Sweep(
            f"{HERE / 'jobs.py'}:first_result",
            {"zip": {"seed": list(range(local_cores()))}},
            child={"compile_cache": False},
            cluster={"dashboard": "127.0.0.1:0"},
            output=f"{tmp}/o.zarr",
        )
        t_plan = time.time()
        ds = s.run(progress=False)
        ended = time.time()
        used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        t_run = t_plan  # timeline moments are relative to run()'s start, just after t_plan
        first = int(ds["finished"].argmin())
        started = float(ds["started"].values[first].astype("datetime64[ns]").astype("int64")) / 1e9
        finished = float(ds["finished"].values[first].astype("datetime64[ns]").astype("int64")) / 1e9
        out = {k: float(ds[k].values[first]) for k in ("import_s", "compile_s", "run_s")}
    tl = s.timeline
    first_submit = t_run + tl["first_submit"]
    first_result = t_run + tl["first_result"]
    return {
        "interpreter": t_file - start,
        "import": t_import - t_file,
        "plan": t_plan - t_import,
        "store_and_cluster": max(tl["store"], tl["cluster"]),
        "store": tl["store"],
        "cluster": tl["cluster"],
        "setup": tl["first_submit"] - max(tl["store"], tl["cluster"]),
        "to_job": started - first_submit,
        "import_jax": out["import_s"],
        "compile": out["compile_s"],
        "run": out["run_s"],
        "back": first_result - finished,
        "total": first_result - start,
        "cpu_s": sum(u.ru_utime + u.ru_stime for u in used),
        "ended": ended - start,
    }


def bench_first_result(repeat: int) -> dict[str, Any]:
    """Medians over ``repeat`` fresh interpreters of each part (see the module docstring)."""
    runs = []
    for _ in range(repeat):
        proc = subprocess.run(
            [sys.executable, __file__, "--child", repr(time.time())],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the first-result run failed:\n{proc.stderr[-3000:]}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    out: dict[str, Any] = {
        k: statistics.median(r[k] for r in runs)
        for k in (*PARTS, "store", "cluster", "total", "cpu_s", "ended")
    }
    out["runs"] = runs
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(float(sys.argv[2]))))
    else:
        print(json.dumps(bench_first_result(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
