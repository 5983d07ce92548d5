"""A run ends with what to change when its cluster's workers can't run its points.

Before a run starts, :func:`sweep.cluster.clusters.check_fits` refuses workers that are up and
too small. Workers that join later (a batch cluster whose jobs were queued, a scheduler with no
worker yet) were never checked: a worker started without ``--resources threads=N`` left the
sweep waiting for ever, silently. :class:`FitListener` looks at the workers each time the
window recounts them (every :func:`sweep.cadence.refresh_s`, no extra call to the scheduler)
and, when there are workers and none offers what a point asks, stops the run with a
ClusterError naming the resource and the fix; the points already finished are kept.
"""

from __future__ import annotations

from sweep.client.listeners.base import Listener, Run
from sweep.cluster.clusters import ClusterError
from sweep.cluster.fits import unfit


class FitListener(Listener):
    def __init__(self) -> None:
        self._seen: object = None  # the window's last count of the workers that was looked at

    def on_tick(self, run: Run) -> None:
        offers = run.window.offers
        if offers is self._seen:
            return
        self._seen = offers
        address = str(getattr(run.client.scheduler, "address", "the cluster"))
        why = unfit(address, offers, run.window.asked())
        if why is not None:
            run.stop(ClusterError(f"the cluster's workers can't run this sweep's points: {why}"))
