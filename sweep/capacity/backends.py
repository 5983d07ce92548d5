"""Each batch system dask-jobqueue drives, as one record.

A :class:`Backend` says everything the package knows of one batch system: dask-jobqueue's
class, how its walltimes read, how it is asked for GPUs (and for cores, where dask-jobqueue
does not ask), whether its logs can be appended to
across requeues, which variables name a job and count its restarts, how it warns a job of its
end, and what to check when a submission fails. Every module that needs one of these reads
:data:`BACKENDS`: a new batch system is a new record (and its golden job script test).
Standard library only: the worker reads it too.

Examples
--------
>>> BACKENDS["slurm"].job_class
'SLURMCluster'
>>> BACKENDS["pbs"].walltime_unit_s
1.0
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    """One batch system (see the module docstring)."""

    kind: str
    job_class: str  # dask-jobqueue's cluster class
    hint: str  # what to check on this host when a submission fails
    walltime_unit_s: float | None = None  # what a bare number of ``walltime`` counts; None: not read
    walltime_hours_minutes: bool = False  # ``A:B`` is hours and minutes (LSF), not minutes and seconds
    gpu_directive: str | None = None  # a job directive asking ``{n}`` GPUs per job
    gpu_submit_key: str | None = None  # or the submit description key (HTCondor)
    append_logs: str | None = None  # the directive that appends to a requeued job's log
    job_id_var: str | None = None  # the variable naming the job inside it
    restart_var: str | None = None  # the variable counting its restarts (requeues)
    end_signal: str | None = None  # the directive asking a signal before the end: {signal}, {seconds}
    # the directive asking ``{n}`` cores on one host where dask-jobqueue asks none (SGE: a parallel
    # environment); ``cores_flag`` is what marks one given in ``job_extra_directives`` already
    cores_directive: str | None = None
    cores_flag: str | None = None
    # whether the job script's prologue runs as shell lines: HTCondor's goes into a submit
    # description, where ``$(...)`` is a macro, so nothing there says when the job started
    shell_prologue: bool = True


# in the order a job's variables are looked for: SGE's generic JOB_ID last
BACKENDS: dict[str, Backend] = {
    b.kind: b
    for b in (
        Backend(
            "slurm",
            "SLURMCluster",
            "check that `sinfo` works on this host (SLURM_CONF), and cluster.queue (the partition) "
            "and cluster.account",
            walltime_unit_s=60.0,
            gpu_directive="--gres=gpu:{n}",
            append_logs="--open-mode=append",
            job_id_var="SLURM_JOB_ID",
            restart_var="SLURM_RESTART_COUNT",
            end_signal="--signal=B:{signal}@{seconds}",
        ),
        Backend(
            "pbs",
            "PBSCluster",
            "check that `qstat` works on this host (PBS_SERVER), and cluster.queue and cluster.account",
            walltime_unit_s=1.0,
            gpu_directive="-l ngpus={n}",
            job_id_var="PBS_JOBID",
        ),
        Backend(
            "lsf",
            "LSFCluster",
            "check that `bqueues` works on this host (LSF_ENVDIR), and cluster.queue",
            walltime_unit_s=60.0,
            walltime_hours_minutes=True,
            gpu_directive='-gpu "num={n}"',
            job_id_var="LSB_JOBID",
        ),
        Backend(
            "htcondor",
            "HTCondorCluster",
            "check that `condor_q` works on this host (the schedd), and the submit options",
            gpu_submit_key="request_gpus",
            shell_prologue=False,
        ),
        Backend(
            "oar",
            "OARCluster",
            "check that `oarstat` works on this host, and cluster.queue and cluster.project",
            walltime_unit_s=3600.0,
            job_id_var="OAR_JOB_ID",
        ),
        Backend(
            "sge",
            "SGECluster",
            "check that `qstat` works on this host (SGE_ROOT, SGE_CELL), and cluster.queue",
            walltime_unit_s=1.0,
            gpu_directive="-l gpu={n}",
            job_id_var="JOB_ID",
            cores_directive="-pe smp {n}",
            cores_flag="-pe",
        ),
    )
}
