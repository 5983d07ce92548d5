"""The batch schedulers dask-jobqueue drives, and which of its options a recipe may pass.

A recipe's ``cluster:`` mapping for these kinds passes dask-jobqueue's own options through
(``queue``, ``account``, ``walltime``, ``job_extra_directives``, ``job_script_prologue``,
``local_directory``, ``log_directory``, ``interface``, ...). The options this project sets
itself (one worker process per job, its resources, TLS, the dashboard) are not among them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from sweep import _compat

CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "sge": "SGECluster",
    "lsf": "LSFCluster",
    "htcondor": "HTCondorCluster",
}
# Set by sweep (or deprecated in dask-jobqueue), so not accepted from a recipe.
RESERVED = {
    "self", "scheduler", "name", "config_name", "base_class_kwargs", "processes", "nanny",
    "protocol", "security", "extra", "env_extra", "job_extra", "header_skip", "n_workers",
    "job_cls", "loop", "silence_logs", "asynchronous", "dashboard_address", "host",
    "scheduler_cls", "job_kwargs", "args", "kwargs",
}  # fmt: skip


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


# How each batch system is asked for G devices per job (cluster.gpus), in its own syntax.
GPU_DIRECTIVES = {
    "slurm": "--gres=gpu:{n}",
    "pbs": "-l ngpus={n}",
    "sge": "-l gpu={n}",
    "lsf": '-gpu "num={n}"',
}


def gpu_directives(kind: str, n: int, given: Any) -> Any:
    """``given`` job directives (a list; HTCondor's a mapping) plus the request for ``n``
    devices per job in ``kind``'s syntax."""
    if kind == "htcondor":
        return {**dict(given or {}), "request_gpus": str(n)}
    return [*(given or []), GPU_DIRECTIVES[kind].format(n=n)]


# How each batch system is told to append to a job's log files rather than truncate them, so
# that a job the scheduler requeues (node failure, preemption) keeps its first run's log.
APPEND_LOGS = {"slurm": "--open-mode=append"}


def run_defaults(settings: Any, name: str, output: Path) -> Any:
    """``settings`` (ClusterSettings of a batch kind) with what a recipe leaves unset filled in
    for the sweep ``name`` writing ``output``: batch jobs named ``sweep-<name>`` (``job_name``),
    their logs under the store's ``logs/batch/`` (``log_directory``) and, where the batch system
    can, appended to across requeues. Other kinds come back as they are."""
    if settings.kind not in CLASSES:
        return settings
    given = settings.jobqueue_options
    extra: dict[str, Any] = {}
    if "job_name" not in given:
        extra["job_name"] = f"sweep-{name}"
    if "log_directory" not in given:
        extra["log_directory"] = str(Path(output).resolve() / "logs" / "batch")
    if settings.kind in APPEND_LOGS:
        directives = list(given.get("job_extra_directives") or [])
        if APPEND_LOGS[settings.kind] not in directives:
            extra["job_extra_directives"] = [*directives, APPEND_LOGS[settings.kind]]
    return settings.model_validate({**settings.model_dump(exclude_unset=True), **given, **extra})


def cluster_class(kind: str) -> type:
    import dask_jobqueue

    return getattr(dask_jobqueue, CLASSES[kind])


@cache
def options(kind: str) -> frozenset[str]:
    """The dask-jobqueue keyword arguments a recipe may give for ``kind``."""
    return _compat.jobqueue_parameters(cluster_class(kind)) - RESERVED
