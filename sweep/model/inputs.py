"""Every input a point's result depends on besides its parameters, fingerprinted.

The inputs are: the fixed parameters; the job's identity (the SHA-256 of its source file
for ``file.py:function`` and for a function of an importable module, of the function's
source for a callable defined in a notebook or script, or of its cloudpickle bytes when
there is no source); the user's source files the job imported (:mod:`sweep.child.sources`, each
with its SHA-256); the child settings that change numerics (``child.platforms``,
``child.env``); and the variables of the submitting environment that the children inherit
and that change what JAX, XLA or the BLAS libraries do (``JAX_*``, ``XLA_*``,
``*_NUM_THREADS``, ``PYTHONPATH``; those the sweep sets itself are not inherited).

Each point records the inputs it ran with (the store's ``inputs`` variable, an id into
``sweep_inputs_seen``): the job's hash and imported files are those its child reported,
so a job edited while the sweep runs shows as points with different inputs. A rerun whose
inputs differ from those of any done point is refused with each difference as
``old → new`` and how many done points it concerns, unless told what to do (see
:meth:`sweep.store.Store.open`). The space is checked separately (``sweep_fingerprint``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sweep.wire.jobref import JobRef

INHERITED_PREFIXES = ("JAX_", "XLA_")
INHERITED_SUFFIXES = ("_NUM_THREADS",)
INHERITED_NAMES = ("PYTHONPATH",)


@dataclass(frozen=True)
class Inputs:
    fixed: dict[str, Any]
    job: str  # the job's label, e.g. /abs/jobs/fdfd.py:optimize
    job_hash: str  # sha256 of what defines it (see the module docstring)
    platforms: str
    env: dict[str, str]
    environ: dict[str, str] = field(default_factory=dict)  # inherited from the submitting shell
    sources: dict[str, str] = field(default_factory=dict)  # imported user files: path -> sha256

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> Inputs:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in json.loads(text).items() if k in known})

    def ident(self) -> str:
        """A short id of these inputs (the store's per-point ``inputs`` variable)."""
        return _sha(self.to_json().encode())[:16]

    def ran(self, sources: Mapping[str, str], job_file: str | None) -> Inputs:
        """These inputs as a point that ran the user files ``sources`` saw them: the job's own
        file's hash is the one its child read."""
        files = dict(sources)
        job_hash = files.pop(job_file, self.job_hash) if job_file else self.job_hash
        return dataclasses.replace(self, job_hash=job_hash, sources=files)


def of(loaded: Any, known_files: Iterable[str] = ()) -> Inputs:
    """The inputs of a LoadedRecipe now; ``known_files`` (user files earlier points imported)
    are hashed as they are on disk."""
    r = loaded.recipe
    fixed = json.loads(json.dumps(r.params.fixed, sort_keys=True, default=str))
    return Inputs(
        fixed,
        loaded.job.label,
        job_hash(loaded.job, loaded.job_fn),
        r.child.platforms,
        dict(r.child.env),
        inherited(r.child),
        {path: file_hash(path) for path in sorted(set(known_files))},
    )


def inherited(child: Any, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (this process's) that children started with the recipe's
    ``child`` settings inherit and that change what JAX, XLA or BLAS do."""
    from sweep.wire.childconfig import ChildConfig

    environ = os.environ if environ is None else environ
    shell = {
        k: v
        for k, v in environ.items()
        if k.startswith(INHERITED_PREFIXES) or k.endswith(INHERITED_SUFFIXES) or k in INHERITED_NAMES
    }
    config = ChildConfig(
        cap=child.cap,
        compile_cache="set" if child.compile_cache else None,
        platforms=child.platforms,
        env=tuple(sorted(child.env.items())),
    )
    own = config.environ([0], base={})  # what the sweep sets itself
    return {k: v for k, v in sorted(config.environ([0], base=shell).items()) if k not in own}


def file_hash(path: str) -> str:
    """SHA-256 of a file's content now ("" when it is gone or unreadable)."""
    try:
        return _sha(Path(path).read_bytes())
    except OSError:
        return ""


def job_file(ref: JobRef) -> str | None:
    """The file that defines the job, as a child reports it (None for a pickled callable)."""
    if ref.kind == "file":
        return os.path.realpath(ref.target)
    if ref.kind == "module":
        spec = importlib.util.find_spec(ref.target)
        if spec and spec.origin and spec.origin.endswith(".py"):
            return os.path.realpath(spec.origin)
    return None


def job_hash(ref: JobRef, fn: Any = None) -> str:
    """SHA-256 (hex) of what defines the job: its file, its module's file, its source, its bytes."""
    if ref.kind == "file":
        return _sha(Path(ref.target).read_bytes())
    if ref.kind == "module":
        spec = importlib.util.find_spec(ref.target)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and Path(origin).is_file():
            return _sha(Path(origin).read_bytes())
        return _sha(f"{ref.target}:{ref.function}".encode())
    try:
        return _sha(inspect.getsource(fn).encode()) if fn is not None else _sha(ref.payload)
    except (OSError, TypeError):
        return _sha(ref.payload)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def differences(old: Inputs, new: Inputs) -> list[str]:
    """Each input that changed, as ``where: old → new``. Of the imported files, only those
    ``old`` lists are compared (``new`` lists their hashes now)."""
    out = _mapping_diff("params.fixed", old.fixed, new.fixed)
    if old.job != new.job:
        out.append(f"job: {old.job} → {new.job}")
    elif old.job_hash != new.job_hash:
        out.append(f"job {new.job}: source changed (sha256 {old.job_hash[:8]}… → {new.job_hash[:8]}…)")
    for path, sha in sorted(old.sources.items()):
        now = new.sources.get(path, sha)
        if now != sha:
            change = f"changed (sha256 {sha[:8]}… → {now[:8]}…)" if now else "gone or unreadable"
            out.append(f"imported file {path}: {change}")
    if old.platforms != new.platforms:
        out.append(f"child.platforms: {old.platforms} → {new.platforms}")
    out += _mapping_diff("child.env", old.env, new.env)
    return out + _mapping_diff("environment", old.environ, new.environ)


def _mapping_diff(where: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    absent = "(absent)"
    return [
        f"{where}.{key}: {old.get(key, absent)!r} → {new.get(key, absent)!r}".replace("'(absent)'", absent)
        for key in sorted(set(old) | set(new))
        if not same(old.get(key, absent), new.get(key, absent))
    ]


def same(a: Any, b: Any) -> bool:
    """Whether two recorded values are the same input: as ``==``, but NaN is the same as NaN
    (a recipe's ``.nan`` is one value, written the same way each time), in lists and mappings
    too, and ``1`` is not ``1.0`` nor ``True``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def mixed(ran: list[tuple[int, Inputs]]) -> str:
    """What differs between the inputs the done points ran with (the job or a file it imports
    edited while the sweep ran, or --keep-done over changed inputs)."""
    ran = sorted(ran, key=lambda r: -r[0])
    most, base = ran[0]
    lines = [
        f"  done points ran with {len(ran)} different inputs ({most} with the most common; see --provenance):"
    ]
    for n, other in ran[1:]:
        lines.append(f"    {n} point(s): " + "; ".join(differences(base, other)))
    return "\n".join(lines)
