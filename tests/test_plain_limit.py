"""The honest limit's plain processes (benchmarks/plain.py): every job runs once, each
process on the core it was given, with nothing between them."""

import os

from benchmarks.jobs import __file__ as JOBS_FILE
from benchmarks.plain import plain, spread
from sweep.wire.jobref import JobRef


def test_plain_processes_side_by_side_run_each_job_once():
    cores = sorted(os.sched_getaffinity(0))[:2]
    wall, walls = plain((JobRef("file", JOBS_FILE, "python_loop"), {"n": 200_000}), 5, cores)
    assert len(walls) == 5 and all(w > 0 for w in walls)
    assert wall >= max(walls)
    figures = spread(walls)
    assert figures["median_s"] <= figures["p90_s"] <= figures["max_s"] == max(walls)
