"""When a worker's batch job ends, and whether a point still fits before then.

A batch cluster's job script exports ``SWEEP_JOB_END`` (seconds since the epoch: the job's
start plus ``cluster.walltime``, from a line :func:`prologue_line` adds to the script's
prologue). Before a worker starts a point it asks :func:`fits`: a point fits when its
expected wall time plus ``MARGIN_S`` ends before the job does. The expected time is the
recipe's ``resources.expected`` when given, else :func:`estimate` over the wall times of the
points done so far (none before the first ends: the first points always start). A point that
doesn't fit is handed back to the scheduler and its worker retires gracefully
(:meth:`sweep.pool.CorePool.retire`); ``cluster.jobs`` or ``cluster.adapt`` replace the batch
job. When the estimate is wrong and the batch system ends the job mid-point, the point is
requeued as for any lost worker: from its last checkpoint, without spending a retry.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)
END_VAR = "SWEEP_JOB_END"
MARGIN_S = 10.0  # a point must end this long before its batch job does
# what a bare number of a walltime counts, per batch system
NUMBER_UNIT_S = {"slurm": 60.0, "lsf": 60.0, "pbs": 1.0, "sge": 1.0}


def walltime_seconds(kind: str, walltime: str | int | float | None) -> float | None:
    """``cluster.walltime`` in seconds, as the batch system ``kind`` reads it (SLURM
    ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS`` or minutes; PBS and SGE ``HH:MM:SS`` or seconds;
    LSF ``HH:MM`` or minutes); None when not given or not understood."""
    if walltime is None or kind not in NUMBER_UNIT_S:
        return None
    text = str(walltime).strip()
    days = 0.0
    match = re.fullmatch(r"(\d+)-(.*)", text)
    if match:
        days, text = float(match.group(1)), match.group(2)
    try:
        parts = [float(p) for p in text.split(":")]
    except ValueError:
        return None
    if len(parts) == 1:
        seconds = parts[0] * (3600 if match else NUMBER_UNIT_S[kind])
    elif len(parts) == 2:
        first, second = parts
        seconds = first * 3600 + second * 60 if kind == "lsf" or match else first * 60 + second
    elif len(parts) == 3:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    else:
        return None
    return days * 86400 + seconds


def prologue_line(seconds: float) -> str:
    """The job script line that exports when the job ends (its start plus ``seconds``)."""
    return f"export {END_VAR}=$(( $(date +%s) + {int(seconds)} ))"


def job_end(environ: Mapping[str, str] = os.environ) -> float | None:
    """When this process's batch job ends (seconds since the epoch), or None when unknown."""
    try:
        return float(environ[END_VAR])
    except (KeyError, ValueError):
        return None


def estimate(walls: Sequence[float]) -> float | None:
    """A point's expected wall time from the wall times of points done so far: the longest of
    fewer than 10, else the 90th percentile; None before any."""
    known = sorted(w for w in walls if not math.isnan(w))
    if not known:
        return None
    if len(known) < 10:
        return known[-1]
    return known[math.ceil(0.9 * len(known)) - 1]


def fits(expected_s: float | None, end: float | None, now: float | None = None) -> bool:
    """Whether a point expected to take ``expected_s`` seconds ends ``MARGIN_S`` before
    ``end``; True when either is unknown."""
    if expected_s is None or end is None:
        return True
    return (time.time() if now is None else now) + expected_s + MARGIN_S <= end
