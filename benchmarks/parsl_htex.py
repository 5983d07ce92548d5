"""Parsl's HighThroughputExecutor as a baseline: workers pinned with ``cpu_affinity="block"``.

``run_parsl(job_file, function, kwargs_list)`` runs ``function(**kwargs)`` from ``job_file``
for each kwargs on one local block of ``CORES`` workers (``max_workers_per_node = cores``,
one core each) and returns the wall time from the first submit to the last result (Parsl's
start-up, ``parsl.load``, is not timed, as no contender's cluster start is). It runs in a
process of its own in a network namespace with only a loopback interface (``unshare -n``):
Parsl's interchange and workers then listen on 127.0.0.1 and nothing else, whatever their
defaults. None when that can't be made (needs root, ``unshare``, ``ip``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sweep.cluster.clusters import local_cores

CORES = local_cores()


def available() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("ip"))


def run_parsl(
    job_file: str | Path, function: str, kwargs_list: list[dict[str, Any]], env: dict[str, str] | None = None
) -> float | None:
    """Wall seconds of the jobs on Parsl HTEX (see the module docstring); None if unavailable."""
    if not available():
        return None
    args = json.dumps({"file": str(job_file), "function": function, "kwargs": kwargs_list, "env": env or {}})
    script = f"ip link set lo up && exec {sys.executable} {Path(__file__).resolve()} --run"
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"  # Parsl's own commands
    proc = subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        input=args,
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PATH": path},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the Parsl run failed:\n{proc.stderr[-3000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["wall_s"])


def _run(spec: dict[str, Any]) -> float:
    import parsl
    from parsl.app.app import python_app
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    # the workers inherit it (the loky baseline caps BLAS the same way), and find benchmarks/jobs.py
    os.environ.update({**spec["env"], "PYTHONPATH": str(Path(__file__).resolve().parent)})
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(
            executors=[
                HighThroughputExecutor(
                    label="htex",
                    address="127.0.0.1",
                    loopback_address="127.0.0.1",
                    cpu_affinity="block",
                    max_workers_per_node=CORES,
                    cores_per_worker=1,
                    provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),
                    worker_logdir_root=tmp,
                )
            ],
            run_dir=f"{tmp}/runinfo",
            usage_tracking=0,
            initialize_logging=False,
        )
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from jobs import call_file  # type: ignore[import-not-found]  (benchmarks/jobs.py)

        with parsl.load(config):
            app = python_app(call_file, executors=["htex"])
            t0 = time.perf_counter()
            futures = [app(spec["file"], spec["function"], **kw) for kw in spec["kwargs"]]
            for f in futures:
                f.result()
            return time.perf_counter() - t0


if __name__ == "__main__" and sys.argv[1:] == ["--run"]:
    print(json.dumps({"wall_s": _run(json.loads(sys.stdin.read()))}))
