"""``sweep.report``: progress sent from inside a running job.

Call it from a job as often as you like (``sweep.report(step=i, loss=value)``): in a sweep's
child each call goes straight to the worker, which forwards it to the client (progress
display, the ``/sweep`` dashboard page, ``SweepRun.progress()``, a search's pruner), and the
point keeps the whole history, also when it is later killed or times out. Outside a sweep it
does nothing, so a job still runs as a plain function. Module level is standard library only.

In a search with pruning (``params.prune``), once the pruner's word to stop has reached the
child, the job's ``report`` raises :class:`Pruned` (the call that sent the report the
pruner judged, when the word is there by the time it has sent it, else the next one; every
one after it too); the point ends as ``pruned`` whether the job lets it through or catches it to clean up
and returns.
"""

from __future__ import annotations

import time
from typing import Any

from sweep.wire.protocol import Pruned

__all__ = ["Pruned", "report"]


def report(step: int | None = None, **values: Any) -> None:
    """Report named scalar values (floats, or anything ``float()`` takes) at ``step``;
    raises :class:`Pruned` when the search has pruned this trial."""
    from sweep.child import serving
    from sweep.wire.protocol import Report

    clean: dict[str, float] = {}
    for name, value in values.items():
        try:
            clean[name] = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"sweep.report({name}=...) takes numbers, got {type(value).__name__}") from None
    serving.report(Report(clean, None if step is None else int(step), time.time()))
