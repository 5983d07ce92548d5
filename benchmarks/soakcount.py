"""The soak's count check: what the store says of each point's starts (``attempts`` and
``requeued``) against the starts its job marked (benchmarks/soakjob.py leaves one file per
start in ``marks/<x>/``, before anything else it does).

The store counts the run whose record it keeps; the job marks every run's starts. So a point's
difference ``marks - attempts - requeued`` is:

- 0 for a point whose starts all fell in one run of the driver, none near a driver's end
  (a driver killed or cancelled, a new one submitted): the store counted exactly what ran;
- more than 0 only for a point a run lost with its driver: its marks lie on both sides of a
  driver's end, or within ``NEAR_S`` of one (a worker of a killed driver may start one more
  attempt before it notices);
- less than 0 only for a point a lethal fault hit within ``NEAR_S`` of its marks (a child or
  worker killed after the point was announced and before its job began counts an attempt
  that left no mark).

Anything else is a miscount: a requeue counted twice or not at all, a retry spent on a lost
worker, a record from another run kept.
"""

from __future__ import annotations

import bisect
from collections import Counter
from pathlib import Path
from typing import Any

LETHAL = ("kill_child", "kill_worker", "term_job", "kill_node", "cut_node", "requeue")
NEAR_S = 60.0  # longer than a point's attempt (9 s; 30 s for the oom one) and a worker's loss


def marked(folder: Path, points: int) -> list[list[float]]:
    """For each point, the wall times (file mtimes) of the starts its job marked."""
    out = []
    for x in range(points):
        here = folder / str(x)
        out.append(sorted(f.stat().st_mtime for f in here.iterdir()) if here.is_dir() else [])
    return out


def _near(times: list[float], events: list[float]) -> bool:
    return any(abs(t - e) <= NEAR_S for t in times for e in events)


def count_check(
    attempts: list[int], requeued: list[int], marks: list[list[float]], ends: list[float],
    lethal: list[float],
) -> tuple[dict[str, int], list[str]]:  # fmt: skip
    """The counts by class (``exact``, ``fewer_run_lost``, ``more_fault_hit``) and a problem
    for each point whose difference nothing explains. ``ends``: wall times of drivers' ends
    and submits; ``lethal``: wall times of lethal faults."""
    ends = sorted(ends)
    tally: Counter[str] = Counter()
    wrong: list[str] = []
    for x, (a, r, times) in enumerate(zip(attempts, requeued, marks)):
        diff = len(times) - a - r
        if diff == 0:
            tally["exact"] += 1
            continue
        runs = {bisect.bisect(ends, t) for t in times}
        if diff > 0 and (len(runs) > 1 or _near(times, ends)):
            tally["fewer_run_lost"] += 1
        elif diff < 0 and _near(times, lethal):
            tally["more_fault_hit"] += 1
        else:
            wrong.append(
                f"point {x}: {len(times)} starts marked, the store counts {a} attempts + {r} requeued"
            )
    problems = (
        [f"{len(wrong)} points' attempts/requeued miscount their starts: " + "; ".join(wrong[:5])]
        if wrong
        else []
    )
    return dict(tally), problems


def counted(ds: Any, marks_dir: Path, log: list[dict[str, Any]]) -> tuple[dict[str, int], list[str]]:
    """:func:`count_check` of a soak's store ``ds``, its marks folder and its fault log (each
    entry with ``wall``, its wall time, and ``kind``; ``submit`` entries for every submit)."""
    ends = [f["wall"] for f in log if f["kind"] in ("kill_driver", "cancel", "submit")]
    lethal = [f["wall"] for f in log if f["kind"] in LETHAL]
    attempts = [int(v) for v in ds["attempts"].values]
    requeued = [int(v) for v in ds["requeued"].values] if "requeued" in ds else [0] * len(attempts)
    return count_check(attempts, requeued, marked(marks_dir, len(attempts)), ends, lethal)
