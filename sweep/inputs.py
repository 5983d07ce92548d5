"""Every input a point's result depends on besides its parameters, fingerprinted.

A store records the inputs it was computed from (``sweep_inputs``): the fixed parameters,
the job's identity (the SHA-256 of its source file for ``file.py:function`` and for a
function of an importable module, of the function's source for a callable defined in a
notebook or script, or of its cloudpickle bytes when there is no source) and the child
settings that change numerics (``child.platforms``, ``child.env``). A rerun whose inputs
differ is refused with each difference as ``old → new``, unless told what to do (see
:meth:`sweep.store.Store.open`). The space is checked separately (``sweep_fingerprint``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sweep.job import JobRef


@dataclass(frozen=True)
class Inputs:
    fixed: dict[str, Any]
    job: str  # the job's label, e.g. /abs/jobs/fdfd.py:optimize
    job_hash: str  # sha256 of what defines it (see the module docstring)
    platforms: str
    env: dict[str, str]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> Inputs:
        return cls(**json.loads(text))


def of(loaded: Any) -> Inputs:
    """The inputs of a LoadedRecipe."""
    r = loaded.recipe
    fixed = json.loads(json.dumps(r.params.fixed, sort_keys=True, default=str))
    return Inputs(
        fixed, loaded.job.label, job_hash(loaded.job, loaded.job_fn), r.child.platforms, dict(r.child.env)
    )


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
    """Each input that changed, as ``where: old → new``."""
    out = _mapping_diff("params.fixed", old.fixed, new.fixed)
    if old.job != new.job:
        out.append(f"job: {old.job} → {new.job}")
    elif old.job_hash != new.job_hash:
        out.append(f"job {new.job}: source changed (sha256 {old.job_hash[:8]}… → {new.job_hash[:8]}…)")
    if old.platforms != new.platforms:
        out.append(f"child.platforms: {old.platforms} → {new.platforms}")
    return out + _mapping_diff("child.env", old.env, new.env)


def _mapping_diff(where: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    absent = "(absent)"
    return [
        f"{where}.{key}: {old.get(key, absent)!r} → {new.get(key, absent)!r}".replace("'(absent)'", absent)
        for key in sorted(set(old) | set(new))
        if old.get(key, absent) != new.get(key, absent)
    ]
