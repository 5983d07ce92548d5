"""The store's own errors, each naming what happened and how to go on."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sweep.errors import SweepError

# what a file system answers when it takes no more: full, over quota, past the file size
# limit (`ulimit -f`), read-only
UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


class StoreFull(SweepError, RuntimeError):
    """The store's file system takes no more (full, over quota, past ``ulimit -f``, read-only:
    :data:`UNWRITABLE`); points already written are kept."""

    exit_code = 3


@contextmanager
def writing(path: Path, what: str = "write") -> Iterator[None]:
    """Turn an :data:`UNWRITABLE` OSError inside into StoreFull: ``cannot WHAT PATH: REASON``."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        raise StoreFull(f"cannot {what} {path}: {exc.strerror}") from None


class StoreGone(SweepError, RuntimeError):
    """The store's folder was moved or deleted while a sweep wrote it: the sweep stopped, and
    nothing was written at the old path."""

    exit_code = 1


class StoreMismatch(SweepError, RuntimeError):
    """The store was made by a different space or from other inputs; the message lists how."""
