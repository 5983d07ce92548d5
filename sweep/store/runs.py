"""What a store says of its runs: how the last one ended, the inputs each point ran with,
and the done points whose data is lost."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sweep.model import inputs
from sweep.store import integrity
from sweep.store.creation import (
    _open_group,
    _outputs,
)
from sweep.store.lock import locked
from sweep.wire.protocol import FINISHED

log = logging.getLogger(__name__)


def _returned(group: Any) -> np.ndarray | None:
    """Per point, the names of the outputs it returned, comma-separated (None in a store made
    before they were recorded)."""
    return np.asarray(group["returned"][...], dtype=object) if "returned" in group else None


def lost_points(path: str | os.PathLike) -> np.ndarray:
    """Mask of the store's done points whose outputs are missing or unreadable (read only)."""
    group = _open_group(Path(path), "r")
    done = np.asarray(group["status"][...], dtype=object) == "done"
    return integrity.lost_points(group, Path(path), _outputs(group), done, _returned(group))


def inputs_ran(path: str | os.PathLike) -> list[tuple[int, inputs.Inputs]]:
    """The distinct inputs the store's done points ran with, each with how many points."""
    group = _open_group(Path(path), "r")
    return _inputs_by_point(group, dict(group.attrs))


def _inputs_by_point(group: Any, attrs: Mapping[str, Any]) -> list[tuple[int, inputs.Inputs]]:
    done = np.isin(np.asarray(group["status"][...], dtype=object), FINISHED)
    if not done.any():
        return []
    seen = json.loads(attrs.get("sweep_inputs_seen", "{}"))
    ids = np.asarray(group["inputs"][...], dtype=object)[done] if "inputs" in group else np.array([])
    legacy = int(done.sum()) - sum(1 for i in ids if i in seen)  # ran before points recorded theirs
    out = [
        (int(n), inputs.Inputs.from_json(seen[i]))
        for i, n in zip(*np.unique(ids, return_counts=True))
        if i in seen
    ]
    if legacy and "sweep_inputs" in attrs:
        out.append((legacy, inputs.Inputs.from_json(attrs["sweep_inputs"])))
    return out


def last_run_short(path: str | os.PathLike, attrs: Mapping[str, Any]) -> str:
    """A few words on the store's last run, for a table (``sweep ls``): ``running now``,
    ``finished 2026-12-07 09:56``, ``ended abnormally``, ``moved while running``, ``none``."""
    state = attrs.get("sweep_run_state")
    if state is None:
        return "none"
    if state == "running" and locked(Path(path)):
        return "running now"
    if state == "running":
        ran_at = attrs.get("sweep_run_path")
        return "moved while running" if ran_at and ran_at != str(Path(path).resolve()) else "ended abnormally"
    when = str(attrs.get("sweep_last_end") or attrs.get("sweep_last_run") or "")
    return f"{state} {when[:16].replace('T', ' ')}".strip()


def last_run(path: str | os.PathLike, attrs: Mapping[str, Any]) -> str:
    """One line on the store's last run, from its attributes and its lock."""
    state = attrs.get("sweep_run_state")
    since, by, end = (
        attrs.get("sweep_last_run", "?"),
        attrs.get("sweep_run_by", "?"),
        attrs.get("sweep_last_end"),
    )
    if state is None:
        return "no run recorded"
    if state == "running" and locked(Path(path)):
        return f"running now (since {since}, {by})"
    ran_at = attrs.get("sweep_run_path")
    if state == "running" and ran_at and ran_at != str(Path(path).resolve()):
        return (
            f"the last run (since {since}, {by}) stopped when the store was moved from {ran_at} while "
            "it ran; what was written is here. `sweep submit` with this --output resumes it"
        )
    if state == "running":
        return (
            f"the last run (since {since}, {by}) ended abnormally: its process died before it "
            "could finish (killed, lost its terminal or its machine); `sweep submit` again resumes"
        )
    return f"the last run (since {since}, {by}) {state} at {end}"
