"""``--json``: what `status`, `ls`, `validate`, `results` and `submit` say, as one JSON document
on stdout for a script (a Snakemake rule, a CI job, a notebook polling a detached run).

Each document names its schema, ``sweep.<command>/<version>`` (:data:`VERSION`), and holds the
same facts as the table a person reads (:mod:`sweep.cli.facts`). :data:`SCHEMAS` has each
one's JSON Schema; docs/cli.md describes their fields. A command that fails prints a
``sweep.error/1`` document (its message and exit code) on stdout, and its one line on stderr
as always. Nothing else goes to stdout: a run's progress is off with ``--json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sweep.store import attributes

VERSION = 1

_COUNTS = {"type": "object", "additionalProperties": {"type": "integer"}}
_TEXT = {"type": ["string", "null"]}
_NUMBER = {"type": ["number", "null"]}


def _schema(name: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"sweep.{name}/{VERSION}",
        "type": "object",
        "required": ["schema", *required],
        "properties": {"schema": {"const": f"sweep.{name}/{VERSION}"}, **required, **(optional or {})},
    }


_RUN = {
    "type": "object",
    "required": ["state", "running_now", "since", "ended", "text"],
    "properties": {"state": _TEXT, "running_now": {"type": "boolean"}, "since": _TEXT, "ended": _TEXT},
}
_ALLOCATION = {  # a run's allocation cost: sweep.client.listeners.allocation
    "type": "object",
    "required": ["run", "held_core_s", "used_core_s", "lost_core_s", "used_share", "workers"],
    "properties": {
        "run": {"type": "string"},
        **{k: {"type": "number"} for k in ("held_core_s", "used_core_s", "lost_core_s", "used_share")},
        "workers": {"type": "integer"},
    },
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "status": _schema(
        "status",
        {
            "output": {"type": "string"},
            "name": _TEXT,
            "points": {"type": "integer"},
            "counts": _COUNTS,
            "finished": {"type": "boolean"},
            "running": {
                "type": "array",
                "items": {"type": "object", "required": ["point_id", "host", "cores"]},
            },
            "last_run": _RUN,
            "exit_code": {"type": ["integer", "null"]},
            "learned_memory": {"type": ["object", "null"]},
            "threads_auto": _TEXT,
            "allocation": {"type": "array", "items": _ALLOCATION},
            "failures": {
                "type": "array",
                "items": {"type": "object", "required": ["point_id", "status", "error"]},
            },
        },
    ),
    "ls": _schema(
        "ls",
        {
            "folder": {"type": "string"},
            "stores": {"type": "array", "items": {"type": "object", "required": ["path", "name", "counts"]}},
        },
    ),
    "validate": _schema(
        "validate",
        {
            "ok": {"const": True},
            "recipe": {"type": "string"},
            "job": {"type": "string"},
            "space": {"type": "object", "required": ["kind", "dims", "points"]},
            "resources": {"type": "object"},
            "cluster": {"type": "string"},
            "output": {"type": "string"},
            "plan": {"type": "string"},
            "points": {"type": "array"},
        },
    ),
    "results": _schema(
        "results",
        {
            "output": {"type": "string"},
            "name": _TEXT,
            "counts": _COUNTS,
            "variables": {"type": "array", "items": {"type": "string"}},
            "dims": {"type": "object"},
            "job_wall_s": {"type": ["object", "null"]},
            "last_run_wall_s": _NUMBER,
        },
    ),
    "submit": _schema(
        "submit",
        {
            "output": {"type": "string"},
            "name": {"type": "string"},
            "detached": {"type": "boolean"},
            "exit_code": {"type": ["integer", "null"]},
        },
        {"allocation": {"anyOf": [_ALLOCATION, {"type": "null"}]}},  # a run's
    ),
    "error": _schema(
        "error",
        {
            "command": {"type": "string"},
            "ok": {"const": False},
            "error": {"type": "string"},
            "problems": {"type": "array", "items": {"type": "string"}},
            "exit_code": {"type": "integer"},
        },
    ),
}


def emit(doc: dict[str, Any]) -> None:
    """Print ``doc`` as the command's one JSON document."""
    print(json.dumps(doc, indent=2, default=str, allow_nan=False))


def doc(kind: str, /, **facts: Any) -> dict[str, Any]:
    return {"schema": f"sweep.{kind}/{VERSION}", **facts}


def _counts(counts: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(counts.items()) if v}


def last_run(output: Path, attrs: dict[str, Any]) -> dict[str, Any]:
    """The store's last run: its state, whether it runs now, when it started and ended."""
    from sweep.store import last_run as sentence
    from sweep.store.lock import locked

    return {
        "state": attrs.get(attributes.RUN_STATE),
        "running_now": attrs.get(attributes.RUN_STATE) == "running" and output.is_dir() and locked(output),
        "since": attrs.get(attributes.LAST_RUN),
        "ended": attrs.get(attributes.LAST_END),
        "by": attrs.get(attributes.RUN_BY),
        "text": sentence(output, attrs),
    }


def status(output: Path, known: Any) -> dict[str, Any]:
    """`status --json` of the store at ``output`` (``known``: its :class:`~sweep.cli.facts.StoreFacts`)."""
    from sweep.cli.facts import headline, learned_memory
    from sweep.client import autothreads
    from sweep.client.driver import DriverState
    from sweep.client.listeners import allocation
    from sweep.wire.protocol import FINISHED, NOT_DONE

    ds, attrs = known.ds, dict(known.ds.attrs)
    ids = ds["point_id"].values
    errors = ds["error"].values.ravel().astype(str)
    state = DriverState.load(output)
    return doc(
        "status",
        output=str(output),
        name=attrs.get(attributes.NAME),
        space=attrs.get(attributes.SPACE),
        points=int(known.status.size),
        counts=_counts(known.counts),
        finished=sum(known.counts[s] for s in FINISHED) == known.status.size,
        running=[
            {
                "point_id": str(ids[tuple(p["index"])]),
                "index": list(p["index"]),
                "host": p.get("host"),
                "cores": list(p.get("cores", [])),
                "for_s": round(time.time() - p["since"], 1) if p.get("since") else None,
            }
            for p in known.running
        ],  # fmt: skip
        last_run=last_run(output, attrs),
        exit_code=state.exit_code if state is not None else None,
        learned_memory=learned_memory(attrs),
        threads_auto=autothreads.describe(attrs.get(autothreads.ATTR)),
        allocation=allocation.runs_of(attrs),
        failures=[
            {"point_id": str(pid), "status": str(st), "error": headline(err)}
            for pid, st, err in zip(ids.ravel().astype(str), known.status, errors)
            if st in NOT_DONE
        ],
    )


def store_line(path: Path, name: str, counts: dict[str, int], run: str, size: int) -> dict[str, Any]:
    """One store of `ls --json`."""
    return {"path": str(path), "name": name, "counts": counts, "last_run": run, "size_bytes": size}


def validated(s: Any, plan_line: str, points: list[Any]) -> dict[str, Any]:
    """`validate --json` of the sweep ``s`` that validated."""
    r, space = s.recipe, s.loaded.space
    res = r.resources
    return doc(
        "validate",
        ok=True,
        recipe=str(s.loaded.source),
        job=s.loaded.job.label,
        space={
            "kind": space.kind,
            "dims": dict(zip(space.dims, map(int, space.shape))),
            "points": len(space),
        },
        fixed=r.params.fixed,
        resources={
            "threads": res.threads,
            "threads_auto": list(res.threads_auto) if res.threads_auto else None,
            "ranks": res.ranks,
            "gpus": res.gpus,
            "tpus": res.tpus,
            "memory": res.memory,
            "amounts": res.amounts,
            "timeout": res.timeout,
            "stall": res.stall,
            "retries": res.retries,
        },  # fmt: skip
        cluster=r.cluster.kind,
        output=str(s.output),
        plan=plan_line,
        points=[{"point_id": p.id, "params": p.params} for p in points],
    )


def results(output: Path, ds: Any) -> dict[str, Any]:
    """`results --json` of the store at ``output``."""
    from collections import Counter

    import numpy as np

    from sweep.client.progress import last_run_wall

    status = ds["status"].values.ravel().astype(str)
    done = status == "done"
    wall = ds["wall_s"].values.ravel()[done]
    return doc(
        "results",
        output=str(output),
        name=ds.attrs.get(attributes.NAME),
        counts=_counts(Counter(status)),
        variables=sorted(str(v) for v in ds.data_vars),
        dims={str(d): int(n) for d, n in ds.sizes.items()},
        job_wall_s={"median": float(np.median(wall)), "max": float(wall.max())} if done.any() else None,
        peak_threads_max=int(ds["peak_threads"].values.ravel()[done].max()) if done.any() else None,
        peak_rss_max=int(ds["peak_rss"].values.ravel()[done].max()) if done.any() else None,
        last_run_wall_s=last_run_wall(ds.attrs),
    )


def submitted(s: Any, ds: Any, code: int) -> dict[str, Any]:
    """`submit --json` of a sweep that ran in this process and ended with ``code``."""
    from collections import Counter

    from sweep.client.listeners import allocation

    return doc(
        "submit",
        output=str(s.output),
        name=s.loaded.name,
        detached=False,
        exit_code=code,
        counts=_counts(Counter(ds["status"].values.ravel().astype(str))),
        points_run=int(s.stats.get("todo", 0)),
        wall_s=round(float(s.stats.get("wall_s", 0.0)), 3),
        allocation=next(reversed(allocation.runs_of(ds.attrs)), None),
    )


def detached(s: Any, state: Any) -> dict[str, Any]:
    """`submit --detach --json`: the background driver (None: it found nothing to run)."""
    if state is None:
        return doc(
            "submit", output=str(s.output), name=s.loaded.name, detached=False, exit_code=0, points_run=0
        )
    return doc(
        "submit", output=str(s.output), name=s.loaded.name, detached=True, exit_code=None,
        pid=state.pid, host=state.host, log=state.log, dashboard=state.dashboard,
    )  # fmt: skip


def error(command: str, message: str, code: int) -> dict[str, Any]:
    """The document of a command that failed with ``message`` and exit code ``code``."""
    return doc(
        "error", command=command, ok=False, error=message, problems=message.splitlines(), exit_code=code
    )
