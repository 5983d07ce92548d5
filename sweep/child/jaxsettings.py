"""JAX settings the parent asks of its child that no environment variable gives.

Some of JAX's settings are absl-style flags: JAX reads no environment variable for them,
only ``jax.config.update``. ``jax_cpu_enable_async_dispatch`` is one
(``JAX_CPU_ENABLE_ASYNC_DISPATCH=false`` is silently ignored). The parent lists such settings
in the child's environment (:data:`sweep.wire.childconfig.JAX_CONFIG_VAR`, ``name=value``
pairs separated by commas); :func:`apply` sets them right after ``import jax``, before the
job's first operation creates XLA's CPU client, which reads them then. A name this JAX does
not know is skipped: a setting the parent asks for is one a newer JAX needs. Standard library
only, like the rest of the child.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from sweep.wire.childconfig import JAX_CONFIG_VAR


def _value(text: str) -> bool | int | str:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    return int(low) if low.lstrip("-").isdigit() else text.strip()


def requested(environ: Mapping[str, str] = os.environ) -> dict[str, bool | int | str]:
    """The settings ``environ`` asks for, by name."""
    pairs = (p.partition("=") for p in environ.get(JAX_CONFIG_VAR, "").split(",") if p.strip())
    return {name.strip(): _value(value) for name, _, value in pairs}


def apply(jax: Any) -> None:
    """Set every requested setting this ``jax`` module knows."""
    known = getattr(getattr(jax, "config", None), "values", {})
    for name, value in requested().items():
        if name in known:
            jax.config.update(name, value)
