"""``sweep.checkpoint`` and ``sweep.restore``: a long job that goes on from where it was.

A job saves its state as often as it likes (``sweep.checkpoint({"step": i, "design": x,
"opt": opt_state})``) and, at its start, asks for the last one (``state = sweep.restore()``):
None on a point's first attempt, else the state it last saved, whichever attempt or run saved
it. The state is pickled in the child at the call (so later changes to it are not saved) and
may be at most ``resources.checkpoint_bytes`` (64 MiB by default) pickled; past that the call
raises ``ValueError`` and nothing is saved. JAX and numpy arrays pickle as their values.

The pickled state goes to the worker through the child's pipe, not through a file: no shared
file system is assumed. Where it is kept and when an attempt gets it back is
:mod:`sweep.worker.checkpoints`. Outside a sweep ``checkpoint`` does nothing and ``restore``
returns None, so the job still runs as a plain function. Standard library only.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

__all__ = ["checkpoint", "restore"]


def checkpoint(state: Any) -> None:
    """Save ``state`` (anything picklable) as this point's last checkpoint."""
    from sweep.child import serving
    from sweep.wire.protocol import Checkpoint

    try:
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(f"sweep.checkpoint takes a picklable state: {exc}") from exc
    serving.checkpoint(Checkpoint(data, time.time()))


def restore() -> Any | None:
    """The state of this point's last checkpoint, or None when it has none (a first attempt,
    or outside a sweep)."""
    from sweep.child import serving

    _, saved = serving.ask_restore()
    return None if saved is None else pickle.loads(saved.data)
