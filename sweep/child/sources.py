"""The user's source files a job ran: its own file and the modules it imported from outside
the Python installation, each with the SHA-256 of its content.

A child reports them with every job (:class:`~sweep.wire.protocol.JobDone`), and the store keeps
them with the point's inputs (:mod:`sweep.model.inputs`), so each point says which version of the
code computed it, and a rerun after any of those files changed is refused.

What counts: every module whose file is a ``.py`` outside the standard library, outside any
``site-packages`` / ``dist-packages`` folder and outside this package, that the child first
imported while running that job (the job's file included). A package installed in editable
mode (``pip install -e``) lives outside ``site-packages`` and is tracked; an ordinary install
is not (its version is in the store's provenance). A file is hashed the first time a child
sees it, right after the job that imported it, and keeps that hash for the child's life: the
code in the child's memory does not change when the file does. Data files a job reads are
not tracked. Standard library only: the child imports this before any job runs.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from collections.abc import Iterable

_HASHES: dict[str, str] = {}  # path -> sha256, as first seen by this process
_BY_JOB: dict[object, set[str]] = {}  # a job's key -> the user files it brought in


PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")  # sweep itself


def _excluded_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib") if k in paths}
    roots.add(PACKAGE)
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


_EXCLUDED = _excluded_roots()


def is_user_file(path: str) -> bool:
    """Whether ``path`` is a ``.py`` file of the user's own code (see the module docstring)."""
    if not path.endswith(".py"):
        return False
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not real.startswith(_EXCLUDED)


def sha256(path: str) -> str:
    """The file's SHA-256 as this process first saw it ("" when it can't be read)."""
    digest = _HASHES.get(path)
    if digest is None:
        try:
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            digest = ""
        _HASHES[path] = digest
    return digest


def files_of(modules: Iterable[object]) -> set[str]:
    """The user files among ``modules``' files."""
    out = set()
    for module in modules:
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and is_user_file(path):
            out.add(os.path.realpath(path))
    return out


def note(job: object, before: set[str]) -> dict[str, str]:
    """Attribute to ``job`` (any hashable key) the user files imported since ``before`` (the
    names in ``sys.modules`` when it started); its files so far, path -> SHA-256."""
    new = files_of(sys.modules[name] for name in set(sys.modules) - before if name in sys.modules)
    mine = _BY_JOB.setdefault(job, set())
    mine |= new
    return {path: sha256(path) for path in sorted(mine)}
