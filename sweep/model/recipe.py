"""Recipes: the YAML (or dict) that says what to sweep, validated with precise messages.

Every field has a default except ``job`` and ``params``. Validation happens in full before
anything starts: structure and types (pydantic), the space, clashes between axes and fixed
parameters, the job's module/file/function and whether its signature accepts the
parameters. Every problem is a :class:`RecipeError` whose message names the key and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from sweep.errors import RecipeError
from sweep.model import amounts, checks
from sweep.model.job import callable_ref, check_signature, job_parameters, parse_job
from sweep.model.searchspec import SearchSpec
from sweep.model.settings import (  # noqa: F401  (named here too: the recipe's parts)
    MAX_CORES,
    MAX_DEVICES,
    MAX_RETRIES,
    MAX_THREADS,
    PLATFORMS,
    Adapt,
    ChildSettings,
    ClusterSettings,
    _Model,
)
from sweep.model.space import SPACES, Space, SpaceError, build_space
from sweep.model.values import _duration, _factor, _size, load_yaml
from sweep.wire.jobref import JobError, JobRef

STALL_S = 300.0  # resources.stall: a job whose processes use no CPU this long is stalled
AUTO_CANDIDATES = (1, 2, 4)  # the k that `threads: auto` measures unless `threads_auto` names others


class Resources(_Model):
    """Per-point resources; ``threads`` is k, the cores leased to each job (to each rank of an
    MPI point of ``ranks`` ranks: :mod:`sweep.worker.mpi`). ``threads: auto`` lets the sweep's first
    points measure k among ``threads_auto`` (default 1, 2, 4: :mod:`sweep.client.autothreads`);
    ``threads`` is then the smallest candidate, what a plan counts with."""

    threads: int = Field(1, ge=1, le=MAX_CORES)
    threads_auto: tuple[int, ...] | None = None
    ranks: int = Field(1, ge=1, le=MAX_CORES)
    gpus: float = Field(0.0, ge=0, le=MAX_DEVICES, allow_inf_nan=False)
    gpu_memory: int | None = Field(None, gt=0)
    tpus: Literal[0, 1, 2, 4, 8] = 0
    memory: int | None = Field(None, gt=0)
    timeout: float | None = Field(None, gt=0)
    stall: float | None = Field(STALL_S, gt=0)
    retries: int = Field(0, ge=0, le=MAX_RETRIES)
    on_thread_overflow: Literal["warn", "fail"] = "warn"
    thread_budget: int | None = Field(None, ge=1, le=MAX_THREADS)
    extra_threads: int = Field(0, ge=0, le=MAX_THREADS)
    checkpoint_bytes: int = Field(64 << 20, gt=0)
    retry_memory: float | None = None
    expected: float | None = Field(None, gt=0)
    amounts: dict[str, float] = {}  # resources.<name> of each amount asked (sweep.model.amounts)

    @model_validator(mode="before")
    @classmethod
    def _amounts(cls, data: Any) -> Any:
        return amounts.gather(data)

    @model_validator(mode="before")
    @classmethod
    def _auto_threads(cls, data: Any) -> Any:
        """``threads: auto`` means the default candidates; ``threads_auto`` alone means auto."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("threads", "ranks", "retries", "extra_threads"):
            if isinstance(data.get(key), bool):  # YAML's true/false would pass as 1/0
                raise ValueError(f"{key}: {data[key]!r} is not a whole number; write e.g. {key}: 2")
        threads = data.get("threads")
        if isinstance(threads, str) and threads != "auto" and not threads.strip().isdigit():
            raise ValueError(
                f"threads: {threads!r} is neither a number of cores nor 'auto'; write e.g. threads: 2"
            )
        if data.get("threads") == "auto":
            data.pop("threads")
            data.setdefault("threads_auto", list(AUTO_CANDIDATES))
        cands = data.get("threads_auto")
        if cands is not None:
            if (
                not isinstance(cands, list | tuple)
                or not cands
                or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in cands)
            ):
                raise ValueError(f"threads_auto: {cands!r} is not a list of core counts >= 1, e.g. [1, 2, 4]")
            if len(set(cands)) < 2:
                raise ValueError(
                    f"threads_auto: {cands!r} gives nothing to choose from; list two or more different "
                    "core counts, e.g. [1, 2, 4], or give threads: N"
                )
            if "threads" in data and data["threads"] != "auto":
                raise ValueError("give either threads: N or threads: auto (with threads_auto), not both")
            data["threads"] = min(cands)
        return data

    @model_validator(mode="after")
    def _auto_alone(self) -> Resources:
        if self.threads_auto is not None and self.ranks > 1:
            raise ValueError(
                "threads: auto does not apply to MPI points (resources.ranks > 1); give threads: N"
            )
        if self.threads_auto is not None and (self.gpus or self.tpus):
            raise ValueError(
                "threads: auto does not apply to GPU or TPU points (resources.gpus, tpus); give threads: N"
            )
        if self.gpus and self.tpus:
            raise ValueError("a point asks for GPUs or TPUs, not both: drop resources.gpus or resources.tpus")
        if self.tpus and self.ranks > 1:
            raise ValueError("TPU points are one process: resources.tpus does not go with ranks > 1")
        return self

    @property
    def cores(self) -> int:
        """Cores each point leases: ``threads`` per rank times ``ranks`` (with ``threads: auto``
        the smallest candidate's)."""
        return self.threads * self.ranks

    _memory = field_validator("memory", "checkpoint_bytes", "gpu_memory", mode="before")(_size)

    @field_validator("gpus", mode="before")
    @classmethod
    def _fraction(cls, value: Any) -> Any:
        """A share written as a fraction, ``"1/3"``, is that number."""
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*/\s*\d+\s*", value):
            top, bottom = (int(part) for part in value.split("/"))
            if bottom == 0:
                raise ValueError(f"{value!r} divides by zero; write a share as e.g. 1/3")
            return top / bottom
        return value

    @field_validator("gpus")
    @classmethod
    def _whole_slots(cls, value: float) -> float:
        if value:
            from sweep.wire.placement import gpu_slots as slots

            slots(value)  # a share that is no whole number of slots: its ValueError says which
        return value

    _retry_memory = field_validator("retry_memory", mode="before")(_factor)
    _timeout = field_validator("timeout", "stall", "expected", mode="before")(_duration)


AxisValues = dict[str, list[Any]]
PointList = list[dict[str, Any]]
Options = dict[str, Any]


class Params(_Model):
    """Exactly one space (grid, zip, list, random, lhs, search) and optional fixed parameters;
    ``prune`` goes with a search only."""

    grid: AxisValues | None = None
    zip: AxisValues | None = None
    list: PointList | None = None
    random: Options | None = None
    lhs: Options | None = None
    search: Options | None = None
    prune: Options | None = None
    fixed: Options = {}

    @model_validator(mode="after")
    def _one_space(self) -> Params:
        given = [k for k in SPACES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {list(SPACES)}, got {given or 'none'}")
        if self.prune is not None and self.search is None:
            raise ValueError("prune stops trials of a search: give params.search too, or drop params.prune")
        return self

    @property
    def space_kind(self) -> str:
        return next(k for k in SPACES if getattr(self, k) is not None)


class Recipe(_Model):
    """A validated recipe. Build with :meth:`load` (YAML file) or :meth:`from_dict`."""

    name: str = Field("sweep", pattern=r"^[A-Za-z0-9_.-]+$")
    job: str
    params: Params
    resources: Resources = Resources()
    child: ChildSettings = ChildSettings()
    cluster: ClusterSettings = ClusterSettings()
    output: str | None = None

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike, overrides: list[str] | None = None) -> LoadedRecipe:
        """Read, override (``key.sub=value``) and fully validate the recipe at ``path``."""
        path = Path(path)
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except OSError as exc:
            raise RecipeError(f"{path}: cannot read the recipe: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            line = path.read_bytes()[: exc.start].count(b"\n") + 1
            raise RecipeError(
                f"{path}: line {line}: not UTF-8 text (byte {exc.object[exc.start]:#x}); save it as UTF-8"
            ) from None
        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise RecipeError(f"{path}:{at}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        if not isinstance(data, dict):
            raise RecipeError(f"{path}: a recipe is a YAML mapping with at least 'job' and 'params'")
        named = "name" in data
        data.setdefault("name", safe_name(path.stem))
        loaded = cls.from_dict(data, overrides, base=path.parent, source=str(path), text=text)
        loaded.name_from = "given" if named else "recipe file"
        return loaded

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        overrides: list[str] | None = None,
        *,
        base: Path | None = None,
        source: str = "recipe",
        text: str | None = None,
        job_fn: Any = None,
    ) -> LoadedRecipe:
        """Validate a recipe given as a mapping (``job_fn``: a callable instead of ``job``)."""
        data = dict(data)
        for item in overrides or []:
            _apply_override(data, item, source)
        if job_fn is not None:
            data.setdefault("job", getattr(job_fn, "__qualname__", "job"))
        try:
            recipe = cls.model_validate(data)
        except ValidationError as exc:
            problems = [_describe(source, e) for e in exc.errors()]
            if (
                isinstance(data.get("job"), str)
                and job_fn is None
                and not any(": job:" in p for p in problems)
            ):
                try:  # the job is checked too: every problem is told at once
                    parse_job(data["job"], base or Path.cwd())
                except JobError as job_exc:
                    problems.append(f"{source}: job: {job_exc}")
            raise RecipeError("\n".join(problems)) from None
        return LoadedRecipe(recipe, base or Path.cwd(), source, text, job_fn)


def safe_name(text: str) -> str:
    """``text`` as a sweep name (``[A-Za-z0-9_.-]+``): other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text) or "sweep"


def _apply_override(data: dict, item: str, source: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise RecipeError(f"--set {item!r}: write key.sub=value, e.g. resources.threads=2")
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise RecipeError(f"--set {item!r}: {part} is not a mapping in {source}")
    try:
        node[parts[-1]] = load_yaml(raw)
    except yaml.YAMLError as exc:
        raise RecipeError(
            f"--set {item!r}: the value is not valid YAML ({getattr(exc, 'problem', None) or exc})"
        ) from None


def _model_at(loc: tuple) -> type[BaseModel] | None:
    model: Any = Recipe
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        model = field.annotation
    return model


def _describe(source: str, err: Any) -> str:
    loc = tuple(p for p in err["loc"] if not isinstance(p, str) or not p.startswith("function-"))
    where = (
        ".".join(p if isinstance(p, str) and p.isprintable() else repr(p) for p in map(str, loc))
        or "(top level)"
    )
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        fields = list(getattr(parent, "model_fields", {})) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(fields)}"
        return f"{source}: {where}: unknown key; {hint}"
    if err["type"] == "missing":
        return f"{source}: {where}: required key missing; add it (see docs/recipe.md)"
    got = err.get("input")
    shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
    return f"{source}: {where}: {msg}{shown}"


# libyaml's safe dumper where PyYAML has it: the same text, 2.6x faster (a list of a million
# points: 4.5 s against 11.9 s)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class LoadedRecipe:
    """A recipe plus where it came from, its space and its job reference (all validated)."""

    def __init__(self, recipe: Recipe, base: Path, source: str, text: str | None, job_fn: Any) -> None:
        self.recipe, self.base, self.source, self.job_fn = recipe, base, source, job_fn
        # the recipe as run, after --set overrides (stored as sweep_recipe), and as written
        self.effective_text = yaml.dump(recipe.model_dump(mode="json"), Dumper=_DUMPER, sort_keys=False)
        self.text = text if text is not None else self.effective_text
        self.name_from = "given"  # or "recipe file" / "job": where the sweep's name came from
        p = recipe.params
        problems: list[str] = []  # every one found, one line each
        space: Space | None = None
        try:
            space = build_space(p.space_kind, getattr(p, p.space_kind))
        except SpaceError as exc:
            problems.append(f"{source}: {exc}")
        self.search: SearchSpec | None = None
        if p.search is not None:
            try:
                self.search = SearchSpec.of(p.search, p.prune)
            except SpaceError as exc:
                problems.append(f"{source}: {exc}")
        names = list(space.names) if space is not None else []
        clash = sorted(set(names) & set(p.fixed))
        if clash:
            problems.append(
                f"{source}: params.fixed: {clash} also swept in params.{p.space_kind}; "
                "remove them from one of the two"
            )
        try:
            if job_fn is not None:
                self.job: JobRef = callable_ref(job_fn)
                signature = job_parameters(self.job, job_fn)
            else:
                self.job = parse_job(recipe.job, base)
                signature = job_parameters(self.job)
            if space is not None:
                check_signature(self.job.label, signature, [*names, *p.fixed])
        except (JobError, SyntaxError) as exc:
            problems.append(f"{source}: job: {exc}")
        if problems or space is None:
            raise RecipeError("\n".join(problems))
        self.space: Space = space
        self.output = Path(recipe.output or f"results/{recipe.name}.zarr")
        checks.check(recipe, self.output, source)

    @property
    def name(self) -> str:
        return self.recipe.name
