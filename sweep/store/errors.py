"""The store's own errors, each naming what happened and how to go on."""

from __future__ import annotations

from sweep.errors import SweepError


class StoreFull(SweepError, RuntimeError):
    """The store's file system is full (or over quota); points already written are kept."""

    exit_code = 3


class StoreGone(SweepError, RuntimeError):
    """The store's folder was moved or deleted while a sweep wrote it: the sweep stopped, and
    nothing was written at the old path."""

    exit_code = 1


class StoreMismatch(SweepError, RuntimeError):
    """The store was made by a different space or from other inputs; the message lists how."""
