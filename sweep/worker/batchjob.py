"""When a worker's batch job ends, and whether a point still fits before then.

A batch cluster's job script exports ``SWEEP_JOB_START`` (seconds since the epoch, from
:func:`start_line`: what the run's allocation cost counts from) and ``SWEEP_JOB_END`` (the
job's start plus ``cluster.walltime``, from a line :func:`prologue_line` adds to the script's
prologue). Before a worker starts a point it asks :func:`fits`: a point fits when its
expected wall time plus ``MARGIN_S`` ends before the job does. The expected time is the
recipe's ``resources.expected`` when given, else :func:`estimate` over the wall times of the
points done so far (none before the first ends: the first points always start). A point that
doesn't fit is handed back to the scheduler and its worker retires gracefully
(:meth:`sweep.worker.retirement.Retirement.retire`); ``cluster.jobs`` or ``cluster.adapt`` replace the batch
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
from pathlib import Path

from sweep.capacity.backends import BACKENDS

log = logging.getLogger(__name__)
# Environment variable holding the batch job id on a worker, per scheduler. HTCondor sets
# none: its job ad (the file named by _CONDOR_JOB_AD) has the JobId dask-jobqueue gives it.
JOB_ID_VARS = tuple(b.job_id_var for b in BACKENDS.values() if b.job_id_var)
# The variable counting how often the batch system restarted the job, where it has one: SLURM
# requeues a job whose node fails or that is preempted, and runs it again under the same id.
RESTART_VARS = {b.job_id_var: b.restart_var for b in BACKENDS.values() if b.job_id_var and b.restart_var}
END_VAR = "SWEEP_JOB_END"
START_VAR = "SWEEP_JOB_START"  # when the job started: what its allocation is charged from
MARGIN_S = 10.0  # a point must end this long before its batch job does


def prologue_line(seconds: float) -> str:
    """The job script line that exports when the job ends (its start plus ``seconds``)."""
    return f"export {END_VAR}=$(( $(date +%s) + {int(seconds)} ))"


def start_line() -> str:
    """The job script line that exports when the job started (every batch job's script)."""
    return f"export {START_VAR}=$(date +%s)"


def job_start(environ: Mapping[str, str] = os.environ) -> float | None:
    """When this process's batch job started (seconds since the epoch), or None when unknown."""
    try:
        return float(environ[START_VAR])
    except (KeyError, ValueError):
        return None


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


def batch_job_id(environ: Mapping[str, str]) -> str:
    """The batch job id of the process with environment ``environ``, or "" outside one.

    SLURM, PBS, LSF, OAR and SGE put it in a variable (their ``Backend`` records' ``job_id_var``);
    under HTCondor it is the job ad's ``JobId``
    (``MY.JobId = "$(ClusterId).$(ProcId)"`` in dask-jobqueue's submit description), read
    from the file ``$_CONDOR_JOB_AD``, else its ``ClusterId`` and ``ProcId``. A job the batch
    system requeued and ran again is a new run of the same id: ``"15 (restart 1)"`` is SLURM
    job 15's second run (``$SLURM_RESTART_COUNT``), so results tell its two runs apart.
    """
    for name in JOB_ID_VARS:
        if environ.get(name):
            restarts = environ.get(RESTART_VARS.get(name, ""), "0")
            if restarts.isdigit() and int(restarts) > 0:
                return f"{environ[name]} (restart {int(restarts)})"
            return environ[name]
    ad = environ.get("_CONDOR_JOB_AD")
    if not ad:
        return ""
    try:
        text = Path(ad).read_text()
    except OSError:
        return ""
    attrs = dict(re.findall(r'^\s*(\w+)\s*=\s*"?([^"\n]*)"?\s*$', text, flags=re.M))
    if attrs.get("JobId"):
        return attrs["JobId"]
    if attrs.get("ClusterId"):
        return f"{attrs['ClusterId']}.{attrs.get('ProcId', '0')}"
    return ""
