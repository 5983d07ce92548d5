"""The worker of ``kind: local``: a Dask Nanny in its own ``python -m sweep.localworker``.

A ``distributed.LocalCluster`` starts its workers with multiprocessing's spawn method, which
imports the user's ``__main__`` again in each new process: a plain script that calls
``Sweep(...).run()`` at top level without ``if __name__ == "__main__":`` (or code piped to
``python -``) would start a sweep inside its own worker, and the worker failed to start. Here
the worker process is a fresh interpreter whose main module is this one, so the user's main
module is never imported again (what a job needs is sent to it: import paths or
cloudpickle). :class:`LocalWorker` is the ``SpecCluster`` handle that starts and stops it.

The process runs in its own session, so a terminal's Ctrl-C reaches the client only (which
closes the cluster), dies with the thread that started it (``PR_SET_PDEATHSIG``), and runs a
Nanny with
``nthreads = N`` and ``resources={"threads": N}`` on 127.0.0.1 until the scheduler goes away.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Any

from distributed.deploy.spec import ProcessInterface

log = logging.getLogger(__name__)
START_TIMEOUT_S = 120.0


class LocalWorker(ProcessInterface):
    """A ``SpecCluster`` worker: ``python -m sweep.localworker SCHEDULER OPTIONS`` on this host."""

    def __init__(
        self, scheduler: str, name: Any = None, nthreads: int = 1, silence_logs: int = logging.ERROR
    ):
        self.scheduler = scheduler
        self.options = {"nthreads": nthreads, "name": name, "silence_logs": silence_logs}
        self.process: asyncio.subprocess.Process | None = None
        super().__init__(scheduler, name)

    async def start(self) -> None:
        """Start the process and wait until its worker has joined the scheduler."""
        ready_r, ready_w = os.pipe()
        os.set_blocking(ready_r, False)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sweep.localworker",
                self.scheduler,
                json.dumps(self.options),
                str(ready_w),
                pass_fds=(ready_w,),
                start_new_session=True,
            )
            os.close(ready_w)
            await self._wait_ready(ready_r)
        finally:
            os.close(ready_r)
        log.info("local worker pid %d joined %s", self.process.pid, self.scheduler)
        await super().start()

    async def _wait_ready(self, fd: int) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if os.read(fd, 16):
                    return
                break  # closed without a word: the process ended
            except BlockingIOError:
                await asyncio.sleep(0.05)
        self.process.kill()
        await self.process.wait()
        raise RuntimeError(f"the local worker did not start (exit code {self.process.returncode})")

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await super().close()


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


async def _serve(scheduler: str, options: dict[str, Any], ready_fd: int) -> None:
    from distributed import Nanny

    n = int(options["nthreads"])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Nanny(
        scheduler,
        nthreads=n,
        resources={"threads": n},
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        name=options.get("name"),
        silence_logs=options.get("silence_logs", logging.ERROR),
    ) as nanny:
        os.write(ready_fd, b"ready")
        os.close(ready_fd)
        finished = asyncio.ensure_future(nanny.finished())
        await asyncio.wait(
            [finished, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED
        )


def main(argv: list[str]) -> int:
    _die_with_parent()
    scheduler, text, ready_fd = argv
    options = json.loads(text)
    logging.getLogger("distributed").setLevel(options.get("silence_logs", logging.ERROR))
    asyncio.run(_serve(scheduler, options, int(ready_fd)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
