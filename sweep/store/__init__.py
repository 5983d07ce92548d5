"""The single-writer result store: one zarr group per sweep, written point by point.

- :mod:`~sweep.store.layout`: every file a store folder holds, named once.
- :mod:`~sweep.store.zarrstore`: :class:`Store`: the one writer: open, point-wise writes with
  ``status`` last, the points left to do.
- :mod:`~sweep.store.opening`: what an existing folder may become (mismatch, growth, force,
  staging and swap-in).
- :mod:`~sweep.store.creation`: the skeleton of variables and outputs, their chunks.
- :mod:`~sweep.store.sidecar`: checkpoints and logs beside the data.
- :mod:`~sweep.store.runs`: how the last run ended, the inputs each point ran with, lost data.
- :mod:`~sweep.store.errors`: the store's errors.
- :mod:`~sweep.store.consolidated`: consolidated metadata once a run closes the store.
- :mod:`~sweep.store.lock`: the store's one writer (``flock``, or a held file).
- :mod:`~sweep.store.writer`: finished points batched into the store.
- :mod:`~sweep.store.growth`: a store grown to a changed space.
- :mod:`~sweep.store.integrity`: outputs that fit, points whose data is lost, damaged metadata.
- :mod:`~sweep.store.results`: reading a store (:func:`sweep.open_results`).
- :mod:`~sweep.store.pointmask`: the points left to do, one byte a point.

The names below load on first use, so ``import sweep.store`` (and its layout) costs no numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweep._lazy import lazy_attributes

if TYPE_CHECKING:
    from sweep.store.creation import RECORD_VARS, TIME_FORMAT
    from sweep.store.errors import StoreFull, StoreGone, StoreMismatch
    from sweep.store.layout import LOGS
    from sweep.store.runs import inputs_ran, last_run, lost_points
    from sweep.store.zarrstore import Store

__getattr__ = lazy_attributes(
    __name__,
    {
    "LOGS": "sweep.store.layout",
    "RECORD_VARS": "sweep.store.creation",
    "TIME_FORMAT": "sweep.store.creation",
    **dict.fromkeys(["StoreFull", "StoreGone", "StoreMismatch"], "sweep.store.errors"),
    **dict.fromkeys(["inputs_ran", "last_run", "lost_points"], "sweep.store.runs"),
    "Store": "sweep.store.zarrstore",
    },
)  # fmt: skip

__all__ = [
    "LOGS",
    "RECORD_VARS",
    "TIME_FORMAT",
    "Store",
    "StoreFull",
    "StoreGone",
    "StoreMismatch",
    "inputs_ran",
    "last_run",
    "lost_points",
]
