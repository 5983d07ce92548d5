"""Job references in a recipe: parsing ``module:function`` and ``file.py:function``, the
signature check against the space's names, and whether a job may use JAX. The reference
itself, which a child loads, is :class:`~sweep.wire.jobref.JobRef`."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path

from sweep.wire.jobref import JobError, JobRef


def parse_job(spec: str, base: Path | None = None) -> JobRef:
    """Turn ``"pkg.mod:fn"`` or ``"path/to/file.py:fn"`` (relative to ``base``) into a JobRef.

    Checks that the module or file exists and defines the function without importing it
    (the client must not pay for, or be thread-polluted by, a job's ``import jax``).
    """
    target, sep, function = spec.rpartition(":")
    if not sep or not target or not function.isidentifier():
        raise JobError(
            f"job {spec!r} is not 'module:function' or 'path/to/file.py:function'; "
            "write e.g. 'jobs/bend.py:optimize'"
        )
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target) if base is None else (base / target)
        path = path.resolve()
        if not path.is_file():
            raise JobError(f"job file {str(path)!r} not found (paths are relative to the recipe)")
        ref = JobRef("file", str(path), function)
        source: Path | None = path
    else:
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise JobError(f"job module {target!r} not found; is it installed or on PYTHONPATH?")
        ref = JobRef("module", target, function)
        source = Path(found.origin) if found.origin and found.origin.endswith(".py") else None
    if source is not None:
        _find_def(source, function, spec)
    return ref


def _parse(source: Path) -> ast.Module:
    text = source.read_text()
    try:
        return ast.parse(text, filename=str(source))
    except SystemError:
        # CPython 3.11 can raise a spurious "AST constructor recursion depth mismatch" in a
        # busy multi-threaded process (python/cpython#106905, seen in this test suite once);
        # the same parse again succeeds.
        return ast.parse(text, filename=str(source))


def _find_def(source: Path, function: str, spec: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = _parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return node
        if isinstance(node, ast.Assign | ast.ImportFrom) and function in _bound_names(node):
            return None  # defined some other way: trust it, the child will say if not
    defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    raise JobError(f"job {spec!r}: no function {function!r} in {source} (it defines {defined})")


def _bound_names(node: ast.Assign | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name for a in node.names}
    return {t.id for t in node.targets if isinstance(t, ast.Name)}


def job_parameters(ref: JobRef, fn: Callable | None = None) -> inspect.Signature | None:
    """The job's signature, from the callable or the source's AST (None if unknowable)."""
    if fn is not None:
        return inspect.signature(fn)
    path = ref.target if ref.kind == "file" else None
    if ref.kind == "module":
        found = importlib.util.find_spec(ref.target)
        path = found.origin if found and found.origin and found.origin.endswith(".py") else None
    if path is None:
        return None
    node = _find_def(Path(path), ref.function, ref.label)
    if node is None:
        return None
    a = node.args
    params = [inspect.Parameter(x.arg, inspect.Parameter.POSITIONAL_ONLY) for x in a.posonlyargs]
    n_plain = len(a.args)
    for i, x in enumerate(a.args):
        has_default = i >= n_plain - len(a.defaults)
        params.append(
            inspect.Parameter(
                x.arg,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=0 if has_default else inspect.Parameter.empty,
            )
        )
    if a.vararg:
        params.append(inspect.Parameter(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for x, d in zip(a.kwonlyargs, a.kw_defaults):
        default = inspect.Parameter.empty if d is None else 0
        params.append(inspect.Parameter(x.arg, inspect.Parameter.KEYWORD_ONLY, default=default))
    if a.kwarg:
        params.append(inspect.Parameter(a.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def check_signature(label: str, signature: inspect.Signature | None, names: Iterable[str]) -> None:
    """Raise JobError unless the job accepts every name and needs no other argument."""
    if signature is None:
        return
    names = set(names)
    kinds = {p.name: p.kind for p in signature.parameters.values()}
    takes_any = inspect.Parameter.VAR_KEYWORD in kinds.values()
    keywordable = {
        n
        for n, k in kinds.items()
        if k in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    unknown = sorted(names - keywordable) if not takes_any else []
    if unknown:
        raise JobError(
            f"job {label} does not accept parameter(s) {unknown}; it takes {sorted(keywordable)}. "
            "Rename the sweep axis / fixed parameter or add it to the function"
        )
    missing = sorted(
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name not in names
    )
    if missing:
        raise JobError(
            f"job {label} requires {missing} but the recipe gives no such sweep axis or fixed "
            "parameter; add them under params.fixed"
        )


def callable_ref(fn: Callable) -> JobRef:
    """Reference a callable by import path when a child can import it, else by value."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if module and module != "__main__" and "<" not in qualname and "." not in qualname:
        try:
            if getattr(importlib.import_module(module), qualname, None) is fn:
                return JobRef("module", module, qualname)
        except ImportError:
            pass
    import cloudpickle

    return JobRef("pickle", "<callable>", qualname or repr(fn), cloudpickle.dumps(fn))


def may_use_jax(ref: JobRef) -> bool:
    """Whether the job may import JAX, from its source file's imports (any line of it): True
    when one names ``jax`` or a package whose installed distribution requires jax, or can't
    be told (a job sent by value, a module with no source, a local module it imports); False
    only when every import is of the standard library or of packages that don't need jax.
    Decides whether its children are prewarmed with JAX (``child.prewarm``)."""
    path = ref.target if ref.kind == "file" else None
    if ref.kind == "module":
        found = importlib.util.find_spec(ref.target.partition(".")[0])
        path = found.origin if found and found.origin and found.origin.endswith(".py") else None
    if path is None:
        return True
    try:
        tree = _parse(Path(path))
    except (JobError, OSError, SyntaxError):
        return True
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
        elif isinstance(node, ast.ImportFrom):
            return True  # a relative import: a module of the user's own, unread
    if names & JAX_NAMES:  # the common case: no scan of the installed distributions
        return True
    return any(_needs_jax(name) for name in names - set(sys.stdlib_module_names))


JAX_NAMES = {"jax", "jaxlib"}


def _needs_jax(top: str) -> bool:
    """Whether importing the top-level package ``top`` may import jax (True when unknown)."""
    import importlib.metadata as metadata

    dists = _distributions().get(top)
    if not dists:
        return True  # not an installed distribution: a module of the user's own
    for dist in dists:
        requires = metadata.requires(dist) or []
        if any(re.match(r"jax\b", r) and "extra ==" not in r for r in requires):
            return True
    return False


@cache
def _distributions() -> Mapping[str, list[str]]:
    """Import names to the installed distributions that provide them (read once: a scan)."""
    import importlib.metadata as metadata

    return metadata.packages_distributions()
