"""What `status` and `ls` say of a store, gathered once for the table a person reads and the
JSON a script reads (:mod:`sweep.cli.jsonout`): the same facts either way."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.errors import UsageError
from sweep.store import attributes


@dataclass
class StoreFacts:
    """A store's points now: ``status`` per point (``damaged`` where a done point's outputs
    are gone), ``counts`` by status with the points running now apart from the pending ones,
    and ``running`` (the driver's: index, host, cores, since)."""

    ds: Any
    status: Any
    counts: Counter[str]
    running: list[dict[str, Any]]


def running_now(output: Path) -> list[dict[str, Any]]:
    """The points a sweep running ``output`` runs now (none when no sweep runs it)."""
    from sweep.client import driver

    try:
        return driver.running(output).running
    except UsageError:
        return []


def of_store(output: Path, ds: Any) -> StoreFacts:
    """The facts of the store at ``output``, opened as ``ds``."""
    from sweep.store import lost_points

    status = ds["status"].values.ravel().astype(object)  # room for "damaged"
    status[lost_points(output).ravel()] = "damaged"
    counts = Counter(status)
    # the driver publishes its running points every SWEEP_REFRESH_S: those the store already
    # holds as ended are not running any more
    stored = ds["status"].values
    running = [p for p in running_now(Path(output)) if stored[tuple(p["index"])] == "pending"]
    counts["running"] = len(running)
    counts["pending"] = max(0, counts["pending"] - len(running))  # pending in the store until they end
    return StoreFacts(ds, status, counts, running)


def learned_memory(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """What the points learned to ask of memory (bytes, from how many points), if they did."""
    import json

    return json.loads(attrs[attributes.MEMORY_ASK]) if attributes.MEMORY_ASK in attrs else None


JAX_NOTE = "-" * 20  # the line before JAX's "For simplicity, JAX has removed its internal frames ..."


def headline(error: str) -> str:
    """One line of an error: a traceback's exception line, else its first line; a line that only
    introduces what follows (``rank 1 of 2 failed:``) is joined to the headline of the rest."""
    lines = error.strip().splitlines()
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        if JAX_NOTE in lines:  # JAX appends a note after the exception's line: not the error
            lines = lines[: len(lines) - lines[::-1].index(JAX_NOTE) - 1]
        return lines[-1]
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {headline(chr(10).join(lines[1:]))}"
    return lines[0]
