"""How a child finds the job function: :class:`JobRef`, loaded inside the child.

Standard library only: a capped child unpickles one right after pinning.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.machinery import SourceFileLoader
from pathlib import Path

from sweep.errors import SweepError

_LOADED: dict[tuple, Callable] = {}
_ADDED_PATHS: list[str] = []  # job folders put on sys.path by _import, in order
MODULE_PREFIX = "sweep_job_"  # a job file's module name: this and the file's stem


def forget_loaded() -> None:
    """Forget the job functions loaded so far: the next :meth:`JobRef.load` imports afresh."""
    _LOADED.clear()


def added_paths() -> list[str]:
    """The job folders this process put on ``sys.path`` to import job files, the folder of
    the job loaded last, last (it is first on ``sys.path``: its own modules are found first)."""
    return list(_ADDED_PATHS)


class JobError(SweepError, ValueError):
    """A job reference or signature that can't work; the message says what and how to fix."""


@dataclass(frozen=True)
class JobRef:
    """How a child finds the job function.

    ``kind`` is ``"module"`` (``target`` is an importable module name), ``"file"``
    (``target`` is an absolute path to a ``.py`` file, whose folder is put first on
    ``sys.path`` so its sibling modules import) or ``"pickle"`` (``payload`` is a
    cloudpickled callable, for functions defined in a notebook or ``__main__``).
    """

    kind: str
    target: str
    function: str
    payload: bytes = field(default=b"", repr=False)

    @property
    def label(self) -> str:
        return f"{self.target}:{self.function}" if self.kind != "pickle" else self.function

    def load(self, loader: type[SourceFileLoader] = SourceFileLoader) -> Callable:
        """Import (once per process) and return the job function; a job file is loaded by
        ``loader`` (a child's hashes what it compiles: :mod:`sweep.child.sources`)."""
        key = (self.kind, self.target, self.function, hash(self.payload))
        fn = _LOADED.get(key)
        if fn is None:
            fn = _LOADED[key] = self._import(loader)
        return fn

    def _import(self, loader: type[SourceFileLoader]) -> Callable:
        if self.kind == "pickle":
            import pickle

            return pickle.loads(self.payload)
        if self.kind == "file":
            folder = str(Path(self.target).parent)
            if folder in _ADDED_PATHS or folder not in sys.path:  # the latest job's folder comes first
                _ADDED_PATHS[:] = [p for p in _ADDED_PATHS if p != folder] + [folder]
                sys.path[:] = [folder, *(p for p in sys.path if p != folder)]
            name = MODULE_PREFIX + Path(self.target).stem
            spec = importlib.util.spec_from_file_location(name, self.target, loader=loader(name, self.target))
            if spec is None or spec.loader is None:
                raise JobError(f"{self.target}: not a Python file that can be imported")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(self.target)
        fn = getattr(module, self.function, None)
        if not callable(fn):
            raise JobError(f"{self.label}: {self.function!r} is not a function of that module")
        return fn
