"""What a store says of its runs: how the last one ended, the inputs each point ran with,
the done points whose data is lost, and its provenance as text."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from sweep.model import inputs
from sweep.store import attributes, integrity
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
    seen = json.loads(attrs.get(attributes.INPUTS_SEEN, "{}"))
    ids = np.asarray(group["inputs"][...], dtype=object)[done] if "inputs" in group else np.array([])
    legacy = int(done.sum()) - sum(1 for i in ids if i in seen)  # ran before points recorded theirs
    out = [
        (int(n), inputs.Inputs.from_json(seen[i]))
        for i, n in zip(*np.unique(ids, return_counts=True))
        if i in seen
    ]
    if legacy and attributes.INPUTS in attrs:
        out.append((legacy, inputs.Inputs.from_json(attrs[attributes.INPUTS])))
    return out


def last_run_short(path: str | os.PathLike, attrs: Mapping[str, Any]) -> str:
    """A few words on the store's last run, for a table (``sweep ls``): ``running now``,
    ``finished 2026-12-07 09:56``, ``ended abnormally``, ``moved while running``, ``none``."""
    state = attrs.get(attributes.RUN_STATE)
    if state is None:
        return "none"
    if state == "running" and locked(Path(path)):
        return "running now"
    if state == "running":
        ran_at = attrs.get(attributes.RUN_PATH)
        return "moved while running" if ran_at and ran_at != str(Path(path).resolve()) else "ended abnormally"
    when = str(attrs.get(attributes.LAST_END) or attrs.get(attributes.LAST_RUN) or "")
    return f"{state} {when[:16].replace('T', ' ')}".strip()


def last_run(path: str | os.PathLike, attrs: Mapping[str, Any]) -> str:
    """One line on the store's last run, from its attributes and its lock."""
    state = attrs.get(attributes.RUN_STATE)
    since, by, end = (
        attrs.get(attributes.LAST_RUN, "?"),
        attrs.get(attributes.RUN_BY, "?"),
        attrs.get(attributes.LAST_END),
    )
    if state is None:
        return "no run recorded"
    if state == "running" and locked(Path(path)):
        return f"running now (since {since}, {by})"
    ran_at = attrs.get(attributes.RUN_PATH)
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


def provenance_text(attrs: dict[str, Any], ran: list[tuple[int, Any]]) -> str:
    """The provenance and inputs of a store, as text: the inputs its done points ran with
    (``ran``: each distinct :class:`~sweep.model.inputs.Inputs` with its count of points; the last
    run's inputs when no point is done), its ``sweep_history`` and its last run's provenance."""
    prov = json.loads(attrs.get(attributes.PROVENANCE, "{}"))
    if ran:
        lines = []
        for n, ran_with in ran:
            lines.append(f"inputs ({n} done point(s) ran with these):")
            lines += [f"  {k}: {v}" for k, v in sorted(asdict(ran_with).items())]
    else:
        lines = ["inputs (of the last run; no point is done):"]
        lines += [f"  {k}: {v}" for k, v in json.loads(attrs.get(attributes.INPUTS, "{}")).items()]
    lines.append(f"space fingerprint: {attrs.get(attributes.FINGERPRINT, '?')}")
    history = json.loads(attrs.get(attributes.HISTORY, "[]"))
    if history:
        lines.append("history:")
        lines += [f"  {json.dumps(entry)}" for entry in history]
    if not prov:
        return "\n".join([*lines, "provenance: not recorded (made before it was)"])
    lines += [f"command: {prov['command']}", f"client: {prov['client']}"]
    lines += [f"workers on {host}: {v}" for host, v in prov.get("workers", {}).items()]
    for name, state in prov.get("git", {}).items():
        if state is None:
            lines.append(f"git ({name}): not in a git repository")
        else:
            dirty = "with uncommitted changes" if state["dirty"] else "clean"
            lines.append(f"git ({name}): {state['repository']} at {state['commit']}, {dirty}")
    return "\n".join(lines)
