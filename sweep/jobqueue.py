"""The batch schedulers dask-jobqueue drives, and which of its options a recipe may pass.

A recipe's ``cluster:`` mapping for these kinds passes dask-jobqueue's own options through
(``queue``, ``account``, ``walltime``, ``job_extra_directives``, ``job_script_prologue``,
``local_directory``, ``log_directory``, ``interface``, ...). The options this project sets
itself (one worker process per job, its resources, TLS, the dashboard) are not among them.
"""

from __future__ import annotations

from functools import cache

from sweep import _compat

CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "sge": "SGECluster",
    "lsf": "LSFCluster",
    "htcondor": "HTCondorCluster",
}
# Environment variable holding the batch job id on a worker, per scheduler.
JOB_ID_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID", "CONDOR_JOB_ID")

# Set by sweep (or deprecated in dask-jobqueue), so not accepted from a recipe.
RESERVED = {
    "self", "scheduler", "name", "config_name", "base_class_kwargs", "processes", "nanny",
    "protocol", "security", "extra", "env_extra", "job_extra", "header_skip", "n_workers",
    "job_cls", "loop", "silence_logs", "asynchronous", "dashboard_address", "host",
    "scheduler_cls", "job_kwargs", "args", "kwargs",
}  # fmt: skip


def cluster_class(kind: str) -> type:
    import dask_jobqueue

    return getattr(dask_jobqueue, CLASSES[kind])


@cache
def options(kind: str) -> frozenset[str]:
    """The dask-jobqueue keyword arguments a recipe may give for ``kind``."""
    return _compat.jobqueue_parameters(cluster_class(kind)) - RESERVED
