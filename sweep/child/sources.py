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
once, hashes that content and compiles it. It never trusts a timestamp ``.pyc`` (whose check
is the file's size and mtime in whole seconds, so an edit of the same size within the second,
or a copy that kept the old mtime, would run the old code); it keeps and reuses a
checked-hash one (PEP 552), whose header holds the hash of the very source it was compiled
from, so a child does not compile a large package of the user's again on every start. A
file read any other way is hashed the first time a child sees it. :func:`install` gives
every folder of the user's files a finder with that loader.

A warm child runs many jobs, of this sweep and of later ones on the same cluster. Before each,
:func:`forget_stale` looks whether the job is another than the last, or a user file it
compiled has changed since (one ``stat`` a file; its content hashed again only when the stat
moved): if so, every user module and loaded job is forgotten and the job imports them afresh,
so a point never runs another job's module of the same name, nor code its files no longer
hold, and what it records is what it ran. Standard library only: the child imports this before any job
runs.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import marshal
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

from sweep.wire.jobref import forget_loaded

_HASHES: dict[str, str] = {}  # path -> sha256, as first seen by this process
_STATS: dict[str, tuple[int, ...]] = {}  # path -> its stat (_stat) when ExactLoader compiled it
_LAST_JOB: list[object] = []  # the job this process ran last
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
        real = os.path.realpath(path)
        stat = _stat(real)  # before the read: an edit in between shows as a change later
        data = self.get_data(path)
        _HASHES[real], _STATS[real] = hashlib.sha256(data).hexdigest(), stat
        return _cached_code(data, path) or self._compile_and_cache(data, path)

    def _compile_and_cache(self, data: bytes, path: str) -> CodeType:
        """Compile ``data`` and keep it as a checked-hash ``.pyc`` (PEP 552) for the next child."""
        code = self.source_to_code(data, path)
        if not sys.dont_write_bytecode:
            header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH + importlib.util.source_hash(data)
            cache = importlib.util.cache_from_source(path)
            try:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                temporary = f"{cache}.{os.getpid()}"
                with open(temporary, "wb") as f:
                    f.write(header + marshal.dumps(code))
                os.replace(temporary, cache)
            except OSError:  # a read-only folder: compiled again next time
                pass
        return code


_CHECKED_HASH = (3).to_bytes(4, "little")  # a .pyc's flags: hash-based, checked against the source


def _cached_code(data: bytes, path: str) -> CodeType | None:
    """The code of ``path``'s cached ``.pyc`` when it is a checked-hash one of exactly ``data``
    (a timestamp ``.pyc`` is never trusted: see the module docstring)."""
    try:
        with open(importlib.util.cache_from_source(path), "rb") as f:
            pyc = f.read()
    except OSError:
        return None
    header = importlib.util.MAGIC_NUMBER + _CHECKED_HASH + importlib.util.source_hash(data)
    if pyc[:16] != header:
        return None
    try:
        code = marshal.loads(pyc[16:])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _stat(path: str) -> tuple[int, ...]:
    """What changes with a file's content: any write, or an mtime set back, moves its ctime."""
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def changed() -> list[str]:
    """The user files this process compiled whose content is no longer what it compiled
    (a stat that moved is read and hashed again; a file gone is not counted)."""
    out = []
    for path, stat in list(_STATS.items()):
        try:
            now = _stat(path)
            if now == stat:
                continue
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            continue
        if digest == _HASHES.get(path):
            _STATS[path] = now
        else:
            out.append(path)
    return out


def forget_stale(job: object) -> list[str]:
    """Before running ``job`` (a :class:`~sweep.wire.jobref.JobRef`): when it is not the job
    this process ran last, or a user file it compiled has changed since (:func:`changed`),
    forget every user module and every loaded job, so that ``job`` imports them afresh: a warm
    child never runs another job's modules of the same name (a ``helper.py`` beside each), nor
    code its files no longer hold. The changed files."""
    stale = changed()
    if stale or _LAST_JOB[:1] != [job]:
        _LAST_JOB[:] = [job]
        for name, module in list(sys.modules.items()):
            if isinstance(getattr(module, "__loader__", None), ExactLoader):
                del sys.modules[name]
        _STATS.clear()
        forget_loaded()
    return stale


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
