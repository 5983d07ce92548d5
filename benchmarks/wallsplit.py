"""Where a sweep's wall went, core by core, from its store's per-point times."""

from __future__ import annotations

from typing import Any


def epochs(values: Any) -> list[float]:
    """Datetimes (a numpy array) as seconds since the epoch."""
    return [float(v) / 1e9 for v in values.astype("datetime64[ns]").astype("int64")]


def split_wall(ds: Any, start: float, end: float, single_s: float) -> dict[str, float]:
    """Where a sweep's wall went, from the store's per-point ``started``, ``finished``,
    ``wall_s`` and ``cores``, against ``single_s`` (one job alone on a warm core).

    Each core's time from ``start`` to ``end`` is: before its first job (store, set-up, the
    child's start), its jobs, the gaps between them (result back, next job in), idle after its
    last job while another core works, and the tail (last result to the dataset returned). The
    jobs' part is split into the ideal (``single_s`` each), the first job of each child over
    ``single_s`` (import, compile) and the other jobs over ``single_s`` (running side by side).
    Each part is the mean over cores, so they add up to the wall."""
    rows = sorted(
        zip(
            (str(c) for c in ds["cores"].values.ravel()),
            epochs(ds["started"].values.ravel()),
            epochs(ds["finished"].values.ravel()),
            (float(w) for w in ds["wall_s"].values.ravel()),
            strict=True,
        )
    )
    by_core: dict[str, list[tuple[float, float, float]]] = {}
    for core, began, ended, wall in rows:
        by_core.setdefault(core, []).append((began, ended, wall))
    last = max(ended for jobs_ in by_core.values() for _, ended, _ in jobs_)
    parts = dict.fromkeys(
        ("before_first_job", "ideal", "first_job_extra", "side_by_side", "gaps", "idle_at_end"), 0.0
    )
    for jobs_ in by_core.values():
        parts["before_first_job"] += jobs_[0][0] - start
        parts["ideal"] += single_s * len(jobs_)
        parts["first_job_extra"] += jobs_[0][2] - single_s
        parts["side_by_side"] += sum(w - single_s for _, _, w in jobs_[1:])
        parts["gaps"] += sum(b - a[1] for a, (b, _, _) in zip(jobs_, jobs_[1:]))
        parts["gaps"] += sum((e - b) - w for b, e, w in jobs_)  # started/finished vs the child's clock
        parts["idle_at_end"] += last - jobs_[-1][1]
    out = {k: v / len(by_core) for k, v in parts.items()}
    out["tail"] = end - last
    out["cores"] = float(len(by_core))
    return out
