"""A worker's graceful end before its batch job's: no point starts once one would not fit
(:mod:`sweep.worker.batchjob`), and the worker closes once the points running there have ended
and the client has fetched their records (a record still in the worker's memory would be lost
with it, and its point run again). Its batch job then ends and the cluster replaces it."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from sweep.worker import batchjob, endsignal

log = logging.getLogger(__name__)
RETIRE_POLL_S = 0.5  # how often a retiring worker looks whether it can close


class Retirement:
    """The retirement of ``worker`` (none outside a Dask worker); ``busy()`` says whether a
    point runs there. ``job_end``: when its batch job ends, if known."""

    def __init__(self, worker: Any, address: str, busy: Callable[[], bool]) -> None:
        self.worker, self.address, self.busy = worker, address, busy
        self.job_end = batchjob.job_end()
        self.retiring = False  # no point starts here any more; closes once none runs
        endsignal.retire_on_signal(self)  # the batch system's warning of the job's end

    def retire(self, why: str) -> None:
        """Start no point here from now on, and close the worker once drained (see the module
        docstring); it closes anyway ``MARGIN_S / 2`` before the job ends."""
        if self.retiring or self.worker is None:
            return
        log.warning("worker %s retires: %s", self.address, why)
        self.retiring = True
        self.worker.loop.add_callback(self._close_when_drained)

    async def _close_when_drained(self) -> None:
        end = (self.job_end or math.inf) - batchjob.MARGIN_S / 2
        while (self.busy() or len(self.worker.data)) and time.time() < end:
            await asyncio.sleep(RETIRE_POLL_S)
        await self.worker.close_gracefully(reason="sweep: batch job walltime")
