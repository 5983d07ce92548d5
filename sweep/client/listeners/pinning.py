"""A run says once per host when that host does not enforce CPU affinity (the points' records
carry what its worker measured: :mod:`sweep.worker.pinning`): the thread caps hold there,
isolation between co-located points doesn't."""

from __future__ import annotations

import warnings

from sweep.client.listeners.base import Listener, Run
from sweep.errors import SweepWarning
from sweep.wire.protocol import PointRecord
from sweep.worker.pinning import NOT_ENFORCED


class PinningListener(Listener):
    def __init__(self) -> None:
        self.said: set[str] = set()

    def on_records(self, run: Run, records: list[PointRecord]) -> list[PointRecord]:
        for r in records:
            if r.affinity_enforced == NOT_ENFORCED and r.host not in self.said:
                self.said.add(r.host)
                warnings.warn(
                    f"{r.host} does not enforce CPU affinity (a sandbox or VM): each point's thread caps "
                    "hold, but points pinned to different cores may share them (docs/threads.md)",
                    SweepWarning,
                    stacklevel=2,
                )
        return records
