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
from sweep.capacity.backends import BACKENDS

CLASSES = {kind: b.job_class for kind, b in BACKENDS.items()}  # the kinds dask-jobqueue drives
# Set by sweep (or deprecated in dask-jobqueue), so not accepted from a recipe.
RESERVED = {
    "self", "scheduler", "name", "config_name", "base_class_kwargs", "processes", "nanny",
    "protocol", "security", "extra", "env_extra", "job_extra", "header_skip", "n_workers",
    "job_cls", "loop", "silence_logs", "asynchronous", "dashboard_address", "host",
    "scheduler_cls", "job_kwargs", "args", "kwargs",
}  # fmt: skip


def walltime_seconds(kind: str, walltime: str | int | float | None) -> float | None:
    """``cluster.walltime`` in seconds, as the batch system ``kind`` reads it (SLURM
    ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS`` or minutes; PBS and SGE ``HH:MM:SS`` or seconds;
    LSF ``HH:MM`` or minutes; OAR ``HH:MM:SS`` or hours: :class:`Backend`'s walltime fields);
    None when not given or not understood."""
    backend = BACKENDS.get(kind)
    if walltime is None or backend is None or backend.walltime_unit_s is None:
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
        seconds = parts[0] * (3600 if match else backend.walltime_unit_s)
    elif len(parts) == 2:
        first, second = parts
        seconds = (
            first * 3600 + second * 60 if backend.walltime_hours_minutes or match else first * 60 + second
        )
    elif len(parts) == 3:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    else:
        return None
    return days * 86400 + seconds


def gpu_directives(kind: str, n: int, given: Any) -> Any:
    """``given`` job directives (a list; HTCondor's a mapping) plus the request for ``n``
    devices per job in ``kind``'s syntax (:class:`Backend`); ValueError for a batch system
    whose request is not known."""
    backend = BACKENDS[kind]
    if backend.gpu_submit_key:
        return {**dict(given or {}), backend.gpu_submit_key: str(n)}
    if backend.gpu_directive is None:
        raise ValueError(
            f"cluster.gpus: how {kind} is asked for GPUs is not known here; ask for them in "
            "cluster.job_extra_directives and give cluster.gpus: 0"
        )
    return [*(given or []), backend.gpu_directive.format(n=n)]


def run_defaults(settings: Any, name: str, output: Path) -> Any:
    """``settings`` (ClusterSettings of a batch kind) with what a recipe leaves unset filled in
    for the sweep ``name`` writing ``output``: batch jobs named ``sweep-<name>`` (``job_name``),
    their logs under the store's ``logs/batch/`` (``log_directory``), where the batch system
    can, appended to across requeues, and its cores asked where dask-jobqueue does not (SGE).
    Other kinds come back as they are."""
    if not settings.cluster_kind.is_batch:
        return settings
    given = settings.jobqueue_options
    extra: dict[str, Any] = {}
    if "job_name" not in given:
        extra["job_name"] = f"sweep-{name}"
    if "log_directory" not in given:
        extra["log_directory"] = str(Path(output).resolve() / "logs" / "batch")
    extra |= _directives(settings, list(given.get("job_extra_directives") or []))
    return settings.model_validate({**settings.model_dump(exclude_unset=True), **given, **extra})


def _directives(settings: Any, given: list[str]) -> dict[str, list[str]]:
    """``job_extra_directives`` with what the batch system needs added (:class:`Backend`):
    append to a requeued job's log; ask for the job's cores where dask-jobqueue does not (SGE's
    ``-pe smp N``, unless a ``-pe`` is given: the parallel environment is the site's). Empty
    when nothing is to be added."""
    backend = BACKENDS[settings.kind]
    added = list(given)
    if backend.append_logs is not None and backend.append_logs not in added:
        added.append(backend.append_logs)
    cores = settings.cores or 1
    if (
        backend.cores_directive
        and cores > 1
        and not any(d.startswith(backend.cores_flag or "") for d in added)
    ):
        added.append(backend.cores_directive.format(n=cores))
    return {"job_extra_directives": added} if added != given else {}


def cluster_class(kind: str) -> type:
    import dask_jobqueue

    return getattr(dask_jobqueue, CLASSES[kind])


@cache
def options(kind: str) -> frozenset[str]:
    """The dask-jobqueue keyword arguments a recipe may give for ``kind``."""
    return _compat.jobqueue_parameters(cluster_class(kind)) - RESERVED
