"""The recipe's settings beyond a point's resources: how children start (``child:``) and where
workers come from (``cluster:``, adaptive batch jobs), and the ranges every number of a recipe
keeps to. Part of :mod:`sweep.model.recipe`, which validates the whole."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sweep.capacity.clusterkind import KINDS, ClusterKind
from sweep.model import amounts
from sweep.model.values import _size

# every number in a recipe has a range: past these a value is a typo, not a plan
MAX_CORES = 1 << 16  # cores a point or a node may have
MAX_DEVICES = 1024  # GPUs or TPUs a point or a node may have
MAX_RETRIES = 1000
MAX_THREADS = 1 << 20  # OS threads of a point
MAX_JOBS = 100_000  # batch jobs of a cluster


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu", "metal")  # JAX_PLATFORMS' names


class ChildSettings(_Model):
    """How job processes are started: capping, compile cache, recycling."""

    cap: bool = True
    compile_cache: str | bool = True
    platforms: str = "cpu"
    max_jobs: int | None = Field(None, ge=1, le=1 << 40)  # None: sweep.wire.recycling's default
    max_rss: int | None = Field(None, gt=0)
    env: dict[str, str] = {}
    preflight: bool = True
    log_bytes: int = Field(1 << 20, ge=0)
    prewarm: bool = True
    mpirun: str = ""

    _max_rss = field_validator("max_rss", "log_bytes", mode="before")(_size)

    @field_validator("platforms")
    @classmethod
    def _known_platforms(cls, value: str) -> str:
        """A comma-separated list of JAX platforms (``JAX_PLATFORMS``)."""
        names = [p.strip() for p in value.split(",")]
        unknown = [p for p in names if p not in PLATFORMS]
        if unknown or not names:
            raise ValueError(
                f"{value!r} names no JAX platform; give one or more of {', '.join(PLATFORMS)}, e.g. cpu"
            )
        return value

    @field_validator("env")
    @classmethod
    def _variables(cls, env: dict[str, str]) -> dict[str, str]:
        """Names a process environment can hold: not empty, no ``=`` and no NUL; values no NUL."""
        for name, value in env.items():
            if not name or "=" in name or "\x00" in name or "\x00" in value:
                raise ValueError(
                    f"{name!r}: an environment variable's name is a word without '=' (and neither "
                    "holds a NUL); e.g. env: {OMP_PROC_BIND: close}"
                )
        return env


class Adapt(_Model):
    """Let the number of batch jobs follow the work, between these bounds."""

    minimum_jobs: int = Field(0, ge=0, le=MAX_JOBS)
    maximum_jobs: int = Field(..., ge=1, le=MAX_JOBS)

    @model_validator(mode="after")
    def _ordered(self) -> Adapt:
        if self.minimum_jobs > self.maximum_jobs:
            raise ValueError(
                f"minimum_jobs ({self.minimum_jobs}) is above maximum_jobs ({self.maximum_jobs}); "
                "give minimum_jobs <= maximum_jobs"
            )
        return self


class ClusterSettings(_Model):
    """Where workers come from: ``local`` (default), a running scheduler's ``address``, or
    a batch scheduler (slurm, pbs, sge, lsf, htcondor) through dask-jobqueue, whose own
    options (queue, account, walltime, ...) may be given here too."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    kind: str = "local"  # one of sweep.capacity.clusterkind.KINDS
    address: str | None = None
    threads: int | None = Field(None, ge=1, le=MAX_CORES)
    gpus: int | None = Field(None, ge=0, le=MAX_DEVICES)
    tpus: int | None = Field(None, ge=0, le=MAX_DEVICES)
    dashboard: str = "127.0.0.1:8787"
    cores: int | None = Field(None, ge=1, le=MAX_CORES)
    memory: str | None = None
    jobs: int = Field(1, ge=1, le=MAX_JOBS)
    adapt: Adapt | None = None
    security: bool = True
    amounts: dict[str, float] = {}  # cluster.<name>: what a worker offers of each amount

    @model_validator(mode="before")
    @classmethod
    def _amounts(cls, data: Any) -> Any:
        return amounts.gather(data)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"Input should be one of {', '.join(repr(k) for k in KINDS)}")
        return value

    @field_validator("memory")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        """Kept as written (dask-jobqueue reads it), checked to be a size like resources.memory."""
        if value is not None:
            _size(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ClusterSettings:
        from sweep.model import backends

        extra = sorted(self.model_extra or {})
        if self.cluster_kind.is_address and not self.address:
            raise ValueError("kind 'address' needs cluster.address, e.g. tcp://127.0.0.1:8786")
        if self.cluster_kind.is_address and self.amounts:
            name = next(iter(self.amounts))
            raise ValueError(
                f"cluster.{name} does not apply to kind 'address': its workers offer what they are "
                f"started with (dask worker --resources {name}=N); drop cluster.{name}"
            )
        if not self.cluster_kind.is_batch:
            if extra:
                raise ValueError(f"unknown key(s) {extra} for kind {self.kind!r}")
            return self
        allowed = backends.options(self.kind)
        for key in extra:
            if key not in allowed:
                close = difflib.get_close_matches(key, [*allowed, *type(self).model_fields], n=1)
                hint = f"did you mean '{close[0]}'?" if close else "see dask-jobqueue's options"
                raise ValueError(f"unknown key {key!r} for kind {self.kind!r}; {hint}")
        if self.cores is None or self.memory is None:
            raise ValueError(
                f"kind {self.kind!r} needs cluster.cores and cluster.memory per batch job, "
                "e.g. cores: 32, memory: 120GiB"
            )
        return self

    @property
    def cluster_kind(self) -> ClusterKind:
        """``kind`` as a type, with the questions asked of it (:mod:`sweep.capacity.clusterkind`)."""
        return ClusterKind(self.kind)

    @property
    def jobqueue_options(self) -> dict[str, Any]:
        """The dask-jobqueue options given in the recipe, as keyword arguments (an amount
        the batch system's cluster class takes too, such as HTCondor's ``disk``, included)."""
        from sweep.model import backends

        taken = backends.options(self.kind) if self.cluster_kind.is_batch else set()
        return {**{k: v for k, v in self.amounts.items() if k in taken}, **(self.model_extra or {})}
