"""The job the chaos soak runs (benchmarks/soak.py): deterministic, checkpointed, with faults
of its own seeded by point and attempt.

``optimize(x, steps, seconds, seed, fail_rate, oom_every, marks)`` runs ``steps`` steps of a
fixed recurrence, sleeping ``seconds`` each, checkpointing after each and restoring at its
start, so a point killed mid-way and resumed ends with the value an uninterrupted run gives,
bit for bit. ``marks`` is a folder where each attempt leaves a file, so the job knows its
attempt: attempt 1 of a point fails (raises) when its seeded draw is under ``fail_rate``, and
attempt 1 of every ``oom_every``-th point holds more memory than its limit (``oom``).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path


def _draw(seed: int, x: int) -> float:
    """A number in [0, 1) from the seed and the point alone."""
    digest = hashlib.sha256(f"{seed}:{x}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _attempt(marks: str, x: int) -> int:
    folder = Path(marks) / str(x)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.iterdir())) + 1
    (folder / f"{n}-{os.getpid()}").touch()
    return n


def optimize(
    x: int, steps: int = 6, seconds: float = 0.5, seed: int = 0, fail_rate: float = 0.0,
    oom_every: int = 0, marks: str = "",
) -> dict:  # fmt: skip
    import sweep

    attempt = _attempt(marks, x) if marks else 1
    state = sweep.restore() or {"step": 0, "value": float(x) + _draw(seed, x)}
    if attempt == 1 and oom_every and x % oom_every == oom_every - 1:
        hog = bytearray(700 << 20)  # past the recipe's memory limit: this attempt is oom
        time.sleep(30)
        del hog
    if attempt == 1 and _draw(seed + 1, x) < fail_rate:
        raise RuntimeError(f"point {x}: an injected failure of its first attempt")
    value = state["value"]
    for i in range(state["step"], steps):
        value = value * 0.75 + (i + 1) / (x + 1)
        time.sleep(seconds)
        sweep.checkpoint({"step": i + 1, "value": value})
    return {"value": value}


def clean_value(x: int, steps: int = 6, seed: int = 0) -> float:
    """What ``optimize`` returns for point ``x``, computed here without a sweep."""
    value = float(x) + _draw(seed, x)
    for i in range(steps):
        value = value * 0.75 + (i + 1) / (x + 1)
    return value
