"""How often a running sweep looks around, besides when points finish.

One setting, ``$SWEEP_REFRESH_S`` (seconds, default 2): a running driver publishes its running
points for ``sweep status`` and the progress line, tops up its window of queued points
(workers may have joined) and recounts the cluster's job slots at most this often, and looks
for lost batch jobs to replace every 2.5 times this. Smaller values make a sweep notice
changes sooner for a little more scheduler traffic; the tests set 0.5.
"""

from __future__ import annotations

import os

from sweep.errors import SweepError

DEFAULT_S = 2.0
RESUBMIT_FACTOR = 2.5


def refresh_s() -> float:
    """``$SWEEP_REFRESH_S`` as seconds, or 2.0 when unset; a value that isn't a positive number
    raises a :class:`SweepError` naming the variable."""
    raw = os.environ.get("SWEEP_REFRESH_S", "").strip()
    if not raw:
        return DEFAULT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SweepError(
            f"SWEEP_REFRESH_S={raw!r} is not a positive number of seconds; unset it or give one, e.g. 2"
        )
    return value


def resubmit_s() -> float:
    """How often lost batch jobs are looked for: :func:`refresh_s` times 2.5 (5 s by default)."""
    return refresh_s() * RESUBMIT_FACTOR
