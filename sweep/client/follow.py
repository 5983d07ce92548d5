"""``sweep logs --follow``: stream what a running point prints, from the worker running it.

A running job's output is in its child's log file on the worker, with no shared file system
assumed, so the follower connects a Dask client to the running sweep's scheduler (its
address and the run's token are in the driver's state file, :mod:`sweep.client.driver`) and asks
every worker, twice a second, for the bytes past what it has shown
(:meth:`sweep.worker.pool.CorePool.log_chunk`: a :class:`~sweep.wire.protocol.LogChunk`). An attempt's end is
seen through the output the worker keeps of its last attempts, so nothing printed between
two polls is lost; retries follow one another under a header each. It ends when the point
has ended in the store (its record written) or the sweep has stopped.
"""

from __future__ import annotations

import codecs
import logging
import time
from collections.abc import Callable
from pathlib import Path

from sweep.client import driver
from sweep.store.lock import locked
from sweep.wire.protocol import LogChunk

log = logging.getLogger(__name__)
POLL_S = 0.5
BIG_CHUNK = 1 << 20  # after a chunk this big, ask again at once
TAIL_BYTES = 4096


def _started(output: Path, poll: float) -> driver.DriverState:
    """The running driver's state once it has published its run's token (its cluster is up);
    NotRunning when none runs ``output`` (or it ends first)."""
    deadline = time.monotonic() + driver.START_TIMEOUT_S
    while True:
        try:
            state = driver.running(output)
            if state.run:
                return state
        except driver.Starting:
            if time.monotonic() > deadline:
                raise
        time.sleep(poll)


def follow(
    output: Path,
    point_id: str,
    index: tuple[int, ...],
    write: Callable[[str], None],
    say: Callable[[str], None],
    poll: float = POLL_S,
) -> None:
    """Write what point ``index`` (``point_id``) of the sweep running ``output`` prints, as it
    prints it, every attempt under a header, until the point has ended; ``say`` gets the
    follower's own remarks. :class:`~sweep.client.driver.NotRunning` when no sweep runs ``output``.
    """
    from sweep.worker.commands import ReadLog, on_pool

    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)  # a scheduler gone is said here
    state = _started(output, poll)
    attempt, offset, headed, waited = 1, 0, 0, False
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a chunk may end mid-character
    tail = b""  # the last bytes shown of the current attempt, to find the rest in the store

    def show(attempt: int, data: bytes, final: bool) -> None:
        nonlocal headed, tail
        if headed != attempt:
            write(f"==> point {point_id} attempt {attempt} <==\n")
            headed, tail = attempt, b""
        write(text.decode(data, final=final))
        tail = (tail + data)[-TAIL_BYTES:]

    ended = False  # the store has the point's record: one more poll gets the rest, then stop
    with driver.connect(state) as client:
        while True:
            try:
                replies = client.run(on_pool, ReadLog(state.run, index, attempt, offset))
            except OSError as exc:  # the sweep ended meanwhile
                log.info("asking the workers: %s", exc)
                if not _ended(output, index):
                    say(f"the sweep stopped; `sweep logs {output} --point {point_id}` shows what was kept")
                break
            chunk: LogChunk | None = next((c for c in replies.values() if c is not None), None)
            if chunk is None:
                if ended or not locked(output):
                    break
                ended = _ended(output, index)  # the store is read only while nothing comes
                if ended:
                    continue
                if not waited and not headed:
                    say(f"point {point_id} is not running yet; waiting for it")
                    waited = True
                time.sleep(poll)
                continue
            if chunk.attempt != attempt:  # that attempt's end is no longer kept: the next one runs
                attempt, offset = chunk.attempt, 0
            if chunk.start > offset:
                show(attempt, b"", False)
                write(f"[... {chunk.start - offset} bytes not kept ...]\n")
            show(attempt, chunk.data, chunk.ended)
            offset = chunk.start + len(chunk.data)
            if chunk.ended:
                attempt, offset = attempt + 1, 0
            elif len(chunk.data) < BIG_CHUNK:
                time.sleep(poll)
    # what the workers could no longer say (the sweep ended between two polls) is in the store
    for kept in _kept(output, point_id, attempt):
        number = int(kept.stem)
        data = kept.read_bytes()
        if number == attempt and offset:
            data = _after(data, tail, offset)
        show(number, data, True)


def _kept(output: Path, point_id: str, since: int) -> list[Path]:
    """The point's stored attempt logs from attempt ``since`` on."""
    from sweep.store import LOGS

    folder = output / LOGS / point_id
    found = folder.glob("*.txt") if folder.is_dir() else []
    return sorted((f for f in found if int(f.stem) >= since), key=lambda f: int(f.stem))


def _after(kept: bytes, tail: bytes, offset: int) -> bytes:
    """What of an attempt's stored output (its last ``child.log_bytes``) comes after the
    ``offset`` bytes shown, the last of which were ``tail``."""
    if kept[offset - len(tail) : offset] == tail:  # kept whole
        return kept[offset:]
    at = kept.rfind(tail)
    return kept[at + len(tail) :] if tail and at >= 0 else kept


def _ended(output: Path, index: tuple[int, ...]) -> bool:
    """Whether the store has the point's record (it is no longer pending)."""
    from sweep.store.results import open_results

    return str(open_results(output, load=False)["status"].values[index]) != "pending"
