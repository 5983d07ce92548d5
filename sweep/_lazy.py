"""Module attributes that import their module on first use (standard library only).

``__getattr__ = lazy_attributes(__name__, {"Store": "sweep.store.zarrstore", ...})`` in a
package's ``__init__`` makes ``package.Store`` import ``sweep.store.zarrstore`` the first time
it is used, and keeps it in the package from then on: importing the package costs nothing
(the capped child imports ``sweep`` before it pins itself, so nothing there may load numpy).
A Ctrl-C during that first import is taken as it ends (:func:`sweep.interrupts.deferred`): an
interrupted ``from sweep import Sweep`` leaves no half-imported library behind.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from sweep.interrupts import deferred


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` is taken from the module
    ``homes[name]`` (same name there) when first asked for."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with deferred():
            value = getattr(importlib.import_module(homes[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
