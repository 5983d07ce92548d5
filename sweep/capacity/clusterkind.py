"""A recipe's ``cluster.kind`` as a type: the questions the client, the cluster folder and the
CLI ask of it, answered in one place.

Examples
--------
>>> ClusterKind("slurm").is_batch, ClusterKind("slurm").backend.job_class
(True, 'SLURMCluster')
>>> ClusterKind("address").owns_cluster
False
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.capacity.backends import BACKENDS, Backend

LOCAL, ADDRESS = "local", "address"
KINDS = (LOCAL, ADDRESS, *BACKENDS)


@dataclass(frozen=True)
class ClusterKind:
    """Where a sweep's workers come from: ``local`` (started on this machine), ``address`` (a
    running scheduler reached by its address) or a batch system of :data:`BACKENDS`."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in KINDS:
            raise ValueError(f"unknown cluster kind {self.name!r}; use one of {', '.join(KINDS)}")

    @property
    def is_local(self) -> bool:
        """A local cluster: a scheduler and one worker on this machine, started by the run."""
        return self.name == LOCAL

    @property
    def is_address(self) -> bool:
        """A running scheduler the run only connects to."""
        return self.name == ADDRESS

    @property
    def is_batch(self) -> bool:
        """Workers in batch jobs the run submits through dask-jobqueue."""
        return self.name in BACKENDS

    @property
    def owns_cluster(self) -> bool:
        """Whether the run starts (and ends) the cluster: all but ``address``."""
        return not self.is_address

    @property
    def backend(self) -> Backend:
        """The batch system's record (KeyError for local and address)."""
        return BACKENDS[self.name]
