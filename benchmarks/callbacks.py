"""Whether one-core JAX jobs with host callbacks ever hang, on every core of a node.

Runs ``--runs`` jobs of ``tests/jobs.py:callback_update`` (an optimisation loop whose update
is a ``jax.pure_callback`` reading JAX arrays, the pattern that deadlocked with one XLA thread
and asynchronous dispatch) in fresh capped children pinned to one core each, every core busy,
for each setting of :mod:`benchmarks.client_threads`; a child that uses no CPU time for
``--stall`` seconds is recorded ``stalled`` (the watchdog's verdict) and killed. Prints, per
setting, how many runs ended ``done`` and ``stalled``, and the median wall of a done run.
Needs no socket (runs on the TPU machine).

    .venv/bin/python benchmarks/callbacks.py [--runs 26] [--stall 10]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from statistics import median
from typing import Any

from benchmarks.client_threads import SETTINGS
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.task import Limits
from sweep.worker.child import Child

JOB = JobRef("file", os.path.join(os.path.dirname(__file__), "..", "tests", "jobs.py"), "callback_update")


def on_every_core(config: ChildConfig, runs: int, limits: Limits) -> list[Any]:
    """``runs`` jobs, one fresh child at a time on each core, every core busy."""
    cores = sorted(os.sched_getaffinity(0))
    records: list[Any] = []
    left = iter(range(runs))
    lock = threading.Lock()

    def serve(core: int) -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            child = Child([core], config)
            try:
                records.append(child.run(JOB, {}, limits=limits))
            finally:
                child.kill()

    threads = [threading.Thread(target=serve, args=(c,)) for c in cores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=26)
    p.add_argument("--stall", type=float, default=10.0)
    args = p.parse_args()
    limits = Limits(stall=args.stall, timeout=600.0)
    rows: dict[str, Any] = {}
    for name, config in SETTINGS.items():
        records = on_every_core(config, args.runs, limits)
        statuses = [r.status for r in records]
        walls = [r.wall_s for r in records if r.status == "done"]
        rows[name] = {
            "done": statuses.count("done"),
            "stalled": statuses.count("stalled"),
            "other": len(statuses) - statuses.count("done") - statuses.count("stalled"),
            "median_wall_s": round(median(walls), 2) if walls else None,
            "peak_threads": max((r.peak_threads for r in records), default=0),
        }
        print(name, rows[name], flush=True)
    print(json.dumps({"cores": len(os.sched_getaffinity(0)), "runs": args.runs, "settings": rows}))


if __name__ == "__main__":
    main()
