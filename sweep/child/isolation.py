"""What a job may change in its warm child, restored before the next job runs.

A warm child runs many jobs, so a point's result must not depend on which jobs ran there
before. Around each job :func:`snapshot` records, and :func:`restore` puts back, what can be
restored in place: the working directory, the environment, the handler of every signal,
``sys.path``, ``sys.meta_path`` (less the finders the job's new imports installed: they stay
with their modules), ``sys.argv``, modules the job replaced or removed in
``sys.modules`` (those it imported stay: that is the warm child's worth), the recursion limit,
the switch interval, the warnings filters, whether the garbage collector runs, the standard
streams (``sys.stdout`` / ``sys.stderr`` and file descriptors 1 and 2, e.g. after a job closed
them), and the process state of :mod:`sweep.child.processstate` (umask, resource limits, CPU
affinity, priority, signal mask, timers). What can't be restored in place is reported instead,
and the parent replaces the child after that job: a thread or a file the job left open, a
thread off the lease's cores, a limit that can't be raised again, and JAX's global
configuration (``jax.config.update("jax_enable_x64", True)``, a default device, ...),
compared with what it was before the job, or right after ``import jax`` for the job that
imported it. Right after ``import jax`` the child also applies the JAX settings its parent
asked for (:mod:`sweep.child.jaxsettings`). Standard library only, like the rest of the child.
"""

from __future__ import annotations

import gc
import importlib
import io
import os
import signal
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from sweep._compat import environ_snapshot, forget_package_listings, set_warnings_filters
from sweep.child import jaxsettings, processstate
from sweep.wire import jobref

SIGNALS = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}))
_STREAM_FDS: dict[int, int] = {}  # the child's own stdout and stderr fds, kept aside by start()
_STREAMS: list[Any] = []  # the streams jobs start with: the child's own, or made after a job closed them
_jax_at_import: dict[str, Any] | None = None


@dataclass
class State:
    cwd: str
    environ: dict[bytes, bytes]
    handlers: dict[int, Any]
    jax_config: dict[str, Any] | None
    interpreter: dict[str, Any]
    modules: dict[str, Any]
    process: processstate.ProcessState


def _jax_config() -> dict[str, Any] | None:
    jax = sys.modules.get("jax")
    config = getattr(jax, "config", None)
    values = getattr(config, "values", None)
    return dict(values) if isinstance(values, dict) else None


def _interpreter() -> dict[str, Any]:
    """The interpreter's settings a job may change, each a copy."""
    return {
        "path": list(sys.path),
        "meta_path": list(sys.meta_path),
        "argv": list(sys.argv),
        "recursion": sys.getrecursionlimit(),
        "switch": sys.getswitchinterval(),
        "warnings": list(warnings.filters),
        "gc": gc.isenabled(),
    }


def _set_interpreter(before: dict[str, Any], modules: dict[str, Any]) -> None:
    # the job folders put on sys.path by their loader stay there, the latest job's first: later
    # imports need it, and a `helper` beside that job is found before another job's
    added = list(reversed(jobref.added_paths()))  # the latest job's folder first
    sys.path[:] = [*added, *(p for p in before["path"] if p not in added)]
    sys.meta_path[:] = _meta_path(before["meta_path"], modules)
    sys.argv[:] = before["argv"]
    sys.setrecursionlimit(before["recursion"])
    sys.setswitchinterval(before["switch"])
    set_warnings_filters(before["warnings"])
    gc.enable() if before["gc"] else gc.disable()


def _meta_path(before: list[Any], modules: dict[str, Any]) -> list[Any]:
    """``before``, plus each finder the job's imports put on ``sys.meta_path`` at the place it
    holds now: a finder whose module was first imported during the job (not the job's own)
    stays with that module, which stays imported (the ``importlib_metadata`` backport, which
    dask imports, takes over distribution lookups from the standard library's finder)."""

    def installed_by_import(finder: Any) -> bool:
        name = (finder if isinstance(finder, type) else type(finder)).__module__
        return name not in modules and name in sys.modules and not name.startswith(jobref.MODULE_PREFIX)

    restored = list(before)
    for at, finder in enumerate(list(sys.meta_path)):
        if not any(finder is b for b in before) and installed_by_import(finder):
            restored.insert(min(at, len(restored)), finder)
    return restored


def snapshot() -> State:
    return State(
        os.getcwd(),
        environ_snapshot(),
        {s: signal.getsignal(s) for s in SIGNALS},
        _jax_config(),
        _interpreter(),
        dict(sys.modules),
        processstate.snapshot(),
    )


def restore(before: State) -> list[str]:
    """Put back what the job changed; returns what could not be put back (the child must go).
    The process state comes first: the rest may need what a job took away (file descriptors
    under a lowered open-files limit)."""
    unrestorable = processstate.restore(before.process)
    if os.getcwd() != before.cwd:
        os.chdir(before.cwd)
    if environ_snapshot() != before.environ:
        os.environ.clear()
        os.environ.update({os.fsdecode(k): os.fsdecode(v) for k, v in before.environ.items()})
    for sig, handler in before.handlers.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)
    _set_interpreter(before.interpreter, before.modules)
    for name, module in before.modules.items():  # replaced or removed: put back; new ones stay
        if sys.modules.get(name) is not module and not name.startswith(jobref.MODULE_PREFIX):
            sys.modules[name] = module
    # the finders' directory listings (imports, importlib.metadata) are kept per folder until it
    # changes: one listed during this job, in whatever state the job left, never answers the next
    importlib.invalidate_caches()
    forget_package_listings()
    _restore_streams()
    return unrestorable + _jax_changes(before.jax_config)


def half_imported(before: set[str]) -> list[str]:
    """Packages a failed import left half-imported since ``before`` (the names in
    ``sys.modules`` then): new submodules are loaded but their package is gone from
    ``sys.modules``. Importing it again would reuse those submodules and fail differently
    (``partially initialized module``, found under ``ulimit -u``), so the child is replaced."""
    loaded = set(sys.modules)
    orphans = {n.split(".")[0] for n in loaded - before if "." in n and n.rpartition(".")[0] not in loaded}
    return [f"a failed import left {name} half-imported" for name in sorted(orphans)]


def _restore_streams() -> None:
    if not _STREAMS:  # start() was not called: not in a child
        return
    for fd, saved in _STREAM_FDS.items():
        try:
            same = os.path.sameopenfile(fd, saved)
        except OSError:
            same = False
        if not same:
            os.dup2(saved, fd)
    for at, (name, original) in enumerate(zip(("stdout", "stderr"), _STREAMS)):
        current = getattr(sys, name)
        if current is original and not original.closed:
            continue
        if not original.closed:
            setattr(sys, name, original)
        else:  # made once: the next jobs' streams are compared with it
            fresh = io.TextIOWrapper(
                io.FileIO(os.dup(1 if name == "stdout" else 2), "w"), line_buffering=True
            )
            setattr(sys, name, fresh)
            _STREAMS[at] = fresh


def _jax_changes(before: dict[str, Any] | None) -> list[str]:
    after = _jax_config()
    if after is None:
        return []
    reference = before if before is not None else _jax_at_import
    if reference is None:
        return []
    return [f"{k}: {reference.get(k)!r} → {v!r}" for k, v in sorted(after.items()) if reference.get(k) != v]


class _WatchJaxImport:
    """Records JAX's configuration right after ``import jax``: the reference for the job that
    imports it (its changes can't be compared with a "before"). A finder on ``sys.meta_path``
    by the import system's protocol, like :class:`_Loader`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "jax":
            return None
        for finder in sys.meta_path:
            spec = (
                None
                if finder is self
                else getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            )
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        real = spec.loader

        def exec_module(module: Any) -> None:
            global _jax_at_import
            module.__loader__ = spec.loader = real  # the package sees its own loader from now on
            real.exec_module(module)
            jaxsettings.apply(module)  # before the reference: the child's own settings
            _jax_at_import = _jax_config()

        spec.loader = _Loader(real, exec_module)
        return spec


class _Loader:
    """Loads the module as ``real`` does, through ``exec_module`` (a loader, by the import
    system's protocol; not an ``importlib.abc.Loader``, whose import costs every child ~5 ms)."""

    def __init__(self, real: Any, exec_module: Any) -> None:
        self._real, self._exec = real, exec_module

    def create_module(self, spec: Any) -> Any:
        return self._real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._exec(module)


def start() -> None:
    """Called once by the child before its first job: keep its standard streams aside and
    watch for ``import jax``."""
    _STREAM_FDS.update({1: os.dup(1), 2: os.dup(2)})
    _STREAMS[:] = [sys.stdout, sys.stderr]
    if "jax" in sys.modules:  # imported before the child ran (a .pth file): too late for some
        jaxsettings.apply(sys.modules["jax"])
    else:
        sys.meta_path.insert(0, _WatchJaxImport())
