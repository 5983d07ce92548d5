"""A store's side files, beside its zarr data: each point's last checkpoint
(:mod:`sweep.store.checkpoints`) and each attempt's output (``logs/<point_id>/<n>.txt``).

:class:`Sidecar` is reached as ``store.sidecar``; points are named by their id (their
parameters' hash), so side files follow their points when the store grows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sweep.store import checkpoints
from sweep.store.layout import LOGS
from sweep.wire.protocol import PointRecord, Saved, StoppedAttempt


class Sidecar:
    """The side files of the store at ``path``; ``point_id(index)`` names a point,
    ``check_intact()`` refuses to write into a store moved away, ``intact()`` says whether
    it is still there."""

    def __init__(
        self,
        path: Path,
        point_id: Callable[[tuple[int, ...]], str],
        check_intact: Callable[[], None],
        intact: Callable[[], bool],
    ) -> None:
        self.path, self.point_id = path, point_id
        self.check_intact, self.intact = check_intact, intact
        self._checkpointed = checkpoints.kept(path)  # point ids with a checkpoint kept

    def keep_checkpoint(self, index: tuple[int, ...], saved: Saved) -> None:
        """Keep ``saved`` as the last checkpoint of the point at ``index``
        (:mod:`sweep.store.checkpoints`)."""
        self.check_intact()
        ident = self.point_id(index)
        checkpoints.write(self.path, ident, saved)
        self._checkpointed.add(ident)

    def checkpoint(self, index: tuple[int, ...]) -> Saved | None:
        """The last checkpoint kept of the point at ``index``, or None."""
        ident = self.point_id(index)
        return checkpoints.read(self.path, ident) if ident in self._checkpointed else None

    def drop_checkpoint(self, index: tuple[int, ...]) -> None:
        """Delete the checkpoint of the point at ``index`` (it is done)."""
        ident = self.point_id(index)
        if ident in self._checkpointed:
            checkpoints.remove(self.path, ident)
            self._checkpointed.discard(ident)

    def write_logs(self, records: list[PointRecord]) -> None:
        """Each attempt's output of the points that printed anything, numbered on from the
        point's attempts of earlier runs (``sweep retry`` keeps the failing attempt's log)."""
        for r in records:
            if any(r.logs):
                self._append_logs(r.index, list(r.logs))

    def keep_logs(self, stopped: list[StoppedAttempt]) -> None:
        """Keep what attempts killed by a cancel printed (``logs/<point_id>/<n>.txt``, numbered
        on from the point's earlier attempts); their points stay ``pending``."""
        if not stopped or not self.intact():
            return
        for a in stopped:
            self._append_logs(a.index, [a.text])

    def _append_logs(self, index: tuple[int, ...], texts: list[str]) -> None:
        """Write ``texts`` as the next attempts' logs of the point at ``index``."""
        folder = self.path / LOGS / self.point_id(index)
        folder.mkdir(parents=True, exist_ok=True)
        before = max((int(p.stem) for p in folder.glob("*.txt") if p.stem.isdigit()), default=0)
        for attempt, text in enumerate(texts, start=before + 1):
            (folder / f"{attempt}.txt").write_text(text)
