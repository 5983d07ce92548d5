"""Where sweep's log goes: nowhere by default; stderr with ``sweep -v`` (and on the workers).

Every module logs to ``logging.getLogger(__name__)`` under the ``sweep`` logger. The CLI's
``-v`` calls :func:`log_to_stderr` in the client, and the core pool plugin calls it in each
worker with the client's level, so worker-side events (children spawned, recycled, killed,
retries) reach the worker's stderr: the terminal for a local cluster, a batch job's log file
on a cluster. Standard library only.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(name)s %(levelname)s [%(process)d]: %(message)s"


def log_to_stderr(level: int) -> None:
    """Send the ``sweep`` loggers' records at ``level`` and above to stderr, once per process;
    a level of WARNING or above leaves logging as it is."""
    root = logging.getLogger("sweep")
    if level >= logging.WARNING or root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
