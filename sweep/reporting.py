"""``sweep.report``: progress sent from inside a running job.

Call it from a job as often as you like (``sweep.report(step=i, loss=value)``): in a sweep's
child each call goes straight to the worker, which forwards it to the client (progress
display, the ``/sweep`` dashboard page, ``SweepRun.progress()``), and the point keeps the
whole history, also when it is later killed or times out. Outside a sweep it does nothing,
so a job still runs as a plain function. Module level is standard library only.
"""

from __future__ import annotations

import time
from typing import Any


def report(step: int | None = None, **values: Any) -> None:
    """Report named scalar values (floats, or anything ``float()`` takes) at ``step``."""
    from sweep import _child_loop
    from sweep.protocol import Report

    clean: dict[str, float] = {}
    for name, value in values.items():
        try:
            clean[name] = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"sweep.report({name}=...) takes numbers, got {type(value).__name__}") from None
    _child_loop.report(Report(clean, None if step is None else int(step), time.time()))
