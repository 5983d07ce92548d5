"""Recycling of warm children on points of milliseconds: the default against ``max_jobs: 500``.

    .venv/bin/python benchmarks/run.py --only recycling [--repeat 3]

The same sweep of 100,000 no-op points (``benchmarks/jobs.py:noop``, each sweep in a fresh
process of its own, on a local cluster of every core, as ``scale`` runs them) with the
default recycling (500 jobs, once a child has lived a minute: ``sweep/wire/recycling.py``)
and with ``child.max_jobs: 500`` set, which replaces a child after exactly 500 jobs (what the
default did before). Alternated ``repeat`` times; medians of the walls, the ratio, and how
many children ran the points.
"""

from __future__ import annotations

import statistics

from scale import in_fresh_process  # benchmarks/scale.py

SET = 500  # the child.max_jobs of the baseline: the default's count, kept exactly


def bench_recycling(points: int, repeat: int) -> dict:
    """Walls (medians of ``repeat``, alternated) of ``points`` no-op points, default against
    ``max_jobs: 500``, their ratio and the children each used."""
    runs: dict[str, list[dict]] = {"default": [], "max_jobs_500": []}
    for _ in range(repeat):
        runs["default"].append(in_fresh_process(points))
        runs["max_jobs_500"].append(in_fresh_process(points, SET))
    walls = {k: [r["wall_s"] for r in v] for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {
        "points": points,
        "walls_s": walls,
        "median_wall_s": med,
        "children": {k: statistics.median(r["children"] for r in v) for k, v in runs.items()},
        "default_over_max_jobs_500": med["default"] / med["max_jobs_500"],
    }


def row(r: dict) -> str:
    """The results table's row."""
    m, c = r["median_wall_s"], r["children"]
    return (
        f"| recycling, {r['points']:,} no-op points | default {m['default']:.1f} s ({c['default']:.0f} "
        f"children), `max_jobs: 500` {m['max_jobs_500']:.1f} s ({c['max_jobs_500']:.0f} children): "
        f"**{r['default_over_max_jobs_500']:.2f}x** | by measurement |"
    )
