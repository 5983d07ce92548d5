"""Batch jobs whose worker never reaches the scheduler: one clear error instead of a hang.

A batch job's worker connects to the scheduler at the address of ``cluster.interface``. When
the compute nodes can't reach that address (``interface: lo`` on a cluster of several nodes, a
firewall, an interface of the login node only), the worker gives up after distributed's connect
timeout (``distributed.comm.timeouts.connect``, 30 s), its nanny fails to start and the batch
job ends. dask-jobqueue does not watch the queue, so the job stays among the cluster's workers,
is never counted as lost, and nothing is resubmitted: the sweep waited forever, silently.

:class:`Arrivals` looks at the jobs whose worker has not registered with the scheduler and reads
the tail of their logs (``log_directory``, where the batch system writes each job's stderr) for
distributed's connect failure. While no worker of the cluster has ever arrived, the first such
job ends the sweep with the worker's own line and what to change (``cluster.interface``); once
workers have arrived (the address is reachable), a job that could not connect is forgotten so
that the next ``scale`` submits it again, like a lost one.

    keeper thread ── look(cluster) ──> jobs not arrived ──> their logs ──> fatal | forget
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# what distributed logs when a worker or nanny gives up connecting (distributed.comm.core.connect)
UNREACHED = re.compile(r"Timed out trying to connect to (\S+) after [\d.]+ s")
TAIL_BYTES = 64 * 1024  # how much of the end of a job's log is read


@dataclass(frozen=True)
class Unreached:
    """A batch job whose worker logged that it could not connect to the scheduler."""

    job_id: str
    address: str  # the address the worker tried
    line: str  # the worker's own line, as logged
    log_file: Path


def job_logs(log_directory: Path, job_id: str) -> list[Path]:
    """The log files of batch job ``job_id`` in ``log_directory``: names holding its number
    (SLURM ``NAME-ID.err``, PBS ``NAME.eID``), a longer number never matched."""
    number = re.match(r"\d+", job_id)
    if number is None or not log_directory.is_dir():
        return []
    own = re.compile(rf"(?<!\d){number.group()}(?!\d)")
    return sorted(p for p in log_directory.iterdir() if own.search(p.name) and p.is_file())


def unreached(log_directory: Path, job_id: str) -> Unreached | None:
    """Whether batch job ``job_id``'s logs say its worker could not connect, the last time it
    ran: a connect failure after the last "Registered to" line (a requeued job appends)."""
    for path in job_logs(log_directory, job_id):
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - TAIL_BYTES))
            text = f.read().decode(errors="replace")
        failed = list(UNREACHED.finditer(text))
        if failed and failed[-1].start() > text.rfind("Registered to"):
            start = text.rfind("\n", 0, failed[-1].start()) + 1
            end = text.find("\n", failed[-1].end())
            line = text[start : end if end >= 0 else len(text)].strip()
            return Unreached(job_id, failed[-1].group(1), line, path)
    return None


class Arrivals:
    """Which of a dask-jobqueue cluster's batch jobs ever had their worker arrive; see the
    module docstring. ``look`` runs in the thread that resubmits lost jobs."""

    def __init__(self, interface: str | None) -> None:
        self.interface = interface
        self.arrived = False  # whether any worker of this cluster has reached the scheduler
        self.reported: set[str] = set()

    def look(self, cluster: Any) -> tuple[str | None, list[Any]]:
        """(a message that ends the sweep or None, the names of jobs to forget and resubmit)."""
        here = {w.get("name") for w in cluster.scheduler_info.get("workers", {}).values()}
        self.arrived = self.arrived or bool(here)
        forget = []
        for name, job in list(cluster.workers.items()):
            job_id, folder = getattr(job, "job_id", None), getattr(job, "log_directory", None)
            if name in here or not job_id or not folder:
                continue
            found = unreached(Path(folder), str(job_id))
            if found is None:
                continue
            if not self.arrived:
                return self.message(found, cluster.scheduler_address), []
            if job_id not in self.reported:
                log.warning("batch job %s could not reach the scheduler: %s", job_id, found.line)
                self.reported.add(job_id)
            forget.append(name)
        return None, forget

    def message(self, found: Unreached, scheduler: str) -> str:
        """What the user reads: the worker's line, where it is, and what to change."""
        given = "is not set" if self.interface is None else f"is {self.interface!r}"
        return (
            f"the batch jobs' workers could not reach the scheduler at {scheduler}: job "
            f"{found.job_id} logged\n  {found.line}\n  ({found.log_file})\n"
            f"cluster.interface {given}; set it to a network interface the compute nodes share "
            "with this host (`ip -brief address` lists them; `lo` is reachable from this host "
            "only); the store is kept and `sweep submit` again resumes"
        )
