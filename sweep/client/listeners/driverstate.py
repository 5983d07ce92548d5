"""The state a CLI driver publishes for other terminals (``sweep status``, ``attach``,
``cancel``: :mod:`sweep.client.driver`): the run's token at its start, then every
``$SWEEP_REFRESH_S`` (:mod:`sweep.cadence`) the points running and the batch jobs."""

from __future__ import annotations

import time
from pathlib import Path

from sweep import cadence
from sweep.client import driver
from sweep.client.listeners.base import Listener, Run
from sweep.client.progress import SweepProgress


class DriverStateListener(Listener):
    def __init__(self, output: Path, bar: SweepProgress) -> None:
        self.output, self.bar = output, bar
        self.every = cadence.refresh_s()
        self.published = time.monotonic()

    def on_start(self, run: Run) -> None:
        driver.publish(self.output, run=run.token)

    def on_tick(self, run: Run) -> None:
        if time.monotonic() - self.published < self.every:
            return
        driver.publish(
            self.output, running=self.bar.running_points(), batch_jobs=driver.batch_jobs(run.client)
        )
        self.published = time.monotonic()
