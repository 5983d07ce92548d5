"""The user's source files a job ran: its own file and the modules it imported from outside
the Python installation, each with the SHA-256 of its content.

A child reports them with every job (:class:`~sweep.wire.protocol.JobDone`), and the store keeps
them with the point's inputs (:mod:`sweep.model.inputs`), so each point says which version of the
code computed it, and a rerun after any of those files changed is refused.

What counts: every module whose file is a ``.py`` outside the standard library, outside any
``site-packages`` / ``dist-packages`` folder and outside this package, that the child first
imported while running that job (the job's file included). A package installed in editable
mode (``pip install -e``) lives outside ``site-packages`` and is tracked; an ordinary install
is not (its version is in the store's provenance). Data files a job reads are not tracked.

The hash is of the very bytes the child compiled: :class:`ExactLoader` reads a user file
once, hashes that content and compiles it, never a cached ``.pyc`` (whose check is the
file's size and mtime in whole seconds, so an edit of the same size within the second, or a
copy that kept the old mtime, would run the old code). A file read any other way is hashed
the first time a child sees it. Either way it keeps that hash for the child's life: the code
in its memory does not change when the file does. :func:`install` gives every folder of the
user's files a finder with that loader. Standard library only: the child imports this before any job
runs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import sysconfig
from collections.abc import Iterable
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from types import CodeType

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
    return path.endswith(".py") and _is_user_path(os.path.realpath(path))


def _is_user_path(real: str) -> bool:
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not real.startswith(_EXCLUDED)


@functools.lru_cache(maxsize=4096)
def _is_user_folder(folder: str) -> bool:
    """Whether the ``.py`` files of ``folder`` (not links themselves) are the user's."""
    return _is_user_path(os.path.join(os.path.realpath(folder), ""))


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


class ExactLoader(SourceFileLoader):
    """A user file's loader that hashes the content it compiles (see the module docstring)."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        _HASHES[os.path.realpath(path)] = hashlib.sha256(data).hexdigest()
        return self.source_to_code(data, path)


def _finder_of_user_folder(folder: str) -> FileFinder:
    """A ``sys.path_hooks`` entry: the finder of a folder of the user's own files, loading its
    ``.py`` files with :class:`ExactLoader`; ImportError (the next hook's turn) for any other."""
    if not (os.path.isdir(folder or ".") and _is_user_folder(folder)):
        raise ImportError(f"not a folder of the user's files: {folder!r}")
    return FileFinder(
        folder,
        (ExtensionFileLoader, EXTENSION_SUFFIXES),
        (ExactLoader, SOURCE_SUFFIXES),
        (SourcelessFileLoader, BYTECODE_SUFFIXES),
    )


def install() -> None:
    """Have every later import of a user file go through :class:`ExactLoader` (a path hook:
    asked once per folder, never per import)."""
    if _finder_of_user_folder not in sys.path_hooks:
        sys.path_hooks.insert(0, _finder_of_user_folder)
        sys.path_importer_cache.clear()  # the folders' finders are made again, through it


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
