"""The worker of ``kind: local``: a Dask Worker in its own ``python -m sweep.cluster.localworker``.

A ``distributed.LocalCluster`` starts its workers with multiprocessing's spawn method, which
imports the user's ``__main__`` again in each new process: a plain script that calls
``Sweep(...).run()`` at top level without ``if __name__ == "__main__":`` (or code piped to
``python -``) would start a sweep inside its own worker, and the worker failed to start. Here
the worker process is a fresh interpreter whose main module is this one, so the user's main
module is never imported again (what a job needs is sent to it: import paths or
cloudpickle). :class:`LocalWorker` is the ``SpecCluster`` handle that starts and stops it.

The process runs the Worker itself (``nthreads = N``, ``resources={"threads": N, "memory": M}``,
``gpus`` or ``tpus`` when the node has them and the amounts it offers, on
127.0.0.1), not a Nanny that would spawn it: one interpreter start instead of two before the
cluster is up (the jobs run in the pool's children anyway, never in the worker). What the
Nanny gave, :class:`LocalWorker` does: a worker process killed or crashed (any exit but 0,
which is a worker the scheduler closed) while the cluster runs is started again; the
scheduler reschedules its running points and its children die with it. The process runs in
its own session, so a terminal's Ctrl-C reaches the client only (which closes the cluster),
dies with the thread that started it (``PR_SET_PDEATHSIG``), and ends when the scheduler
goes away or on SIGTERM.

Worker plugins handed to :class:`LocalWorker` (a run's core pool) go down the same pipe as
the TLS credentials and are set up as the worker starts, before it joins the scheduler: the
pool's children start and import jax while the worker joins and the client opens the store,
not after (``benchmarks/first_result.py``). A worker started again gets them again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from distributed.deploy.spec import ProcessInterface

from sweep.capacity.resources import CORES

log = logging.getLogger(__name__)
START_TIMEOUT_S = 120.0
# Dask keeps each connection's last messages and each event topic's last events for debugging
# (``distributed.admin.low-level-log-length``, 1000 by default). A sweep's messages are whole
# chunks of points (a task of up to 256 PointTasks, an event with their ends), so in the process
# that runs the scheduler (the client's, for ``local`` and batch clusters) 1000 of them held
# most of a 1,000,000-point sweep's memory (benchmarks/README.md): see short_logs.
LOG_LENGTH = 50
# Dask's periodic work in the local scheduler and worker, slowed down: these processes share the
# node's cores with the jobs (idle, 6-11% of one core; benchmarks/README.md says how much of
# that this saves: not clearly measurable here). The system monitor feeds the dashboard's system plots; the
# memory monitor watches the worker's own memory (the jobs' is the pool's limit); the tick
# detects a blocked event loop. Dask's profiler samples the task threads 100 times a second,
# which here only wait on the jobs' children: it is off.
QUIET = {
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.profile.enabled": False,
}


def short_logs() -> None:
    """Make ``LOG_LENGTH`` the default of ``distributed.admin.low-level-log-length`` in this
    process (done when :mod:`sweep.cluster.clusters` is imported, and in the local worker): the queues
    Dask makes from then on keep that many messages or events. A value the user set (a Dask
    config file, ``DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH``) wins, unless it is Dask's
    own default, 1000, which reads as not set (``dask.config.update_defaults``)."""
    import dask.config

    dask.config.update_defaults({"distributed": {"admin": {"low-level-log-length": LOG_LENGTH}}})


class LocalWorker(ProcessInterface):
    """A ``SpecCluster`` worker: ``python -m sweep.cluster.localworker SCHEDULER OPTIONS`` on this host."""

    def __init__(
        self,
        scheduler: str,
        name: Any = None,
        nthreads: int = 1,
        silence_logs: int = logging.ERROR,
        security: Any = None,
        memory: int | None = None,
        offers: dict[str, float] | None = None,
        plugins: Sequence[Any] = (),
    ):
        self.scheduler = scheduler
        self.options = {
            "nthreads": nthreads, "name": name, "silence_logs": silence_logs, "memory": memory,
            "offers": dict(offers or {}),
        }  # fmt: skip
        self.security = security  # a temporary Security: its worker credentials go down a pipe
        self.plugins = tuple(plugins)  # pickled down the same pipe
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._closing = False
        self._watch: asyncio.Task[None] | None = None
        super().__init__(scheduler, name)

    async def start(self) -> None:
        """Start the process, wait until its worker has joined the scheduler, and keep it
        running: a process that ends before :meth:`close` is started again."""
        await self._start_process()
        self._watch = asyncio.ensure_future(self._restart_when_dead())
        await super().start()

    async def _restart_when_dead(self) -> None:
        while not self._closing:
            assert self.process is not None
            code = await self.process.wait()
            if self._closing or code == 0:  # closed by the scheduler (retired, or it went away)
                return
            self.restarts += 1
            log.warning("local worker pid %d ended (exit code %s); starting it again", self.process.pid, code)
            try:
                await self._start_process()
            except RuntimeError as exc:
                log.error("%s; the cluster has no worker now", exc)
                return

    async def _start_process(self) -> None:
        ready_r, ready_w = os.pipe()
        tls_r, tls_w = os.pipe()
        os.set_blocking(ready_r, False)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sweep.cluster.localworker",
                self.scheduler,
                json.dumps(self.options),
                str(ready_w),
                str(tls_r),
                pass_fds=(ready_w, tls_r),
                start_new_session=True,
            )
            os.close(ready_w)
            os.close(tls_r)
            with os.fdopen(tls_w, "w") as pipe:  # a few kB: the pipe holds them all
                tls_w = -1
                json.dump(_handover(self.security, self.plugins), pipe)
            await self._wait_ready(ready_r)
        finally:
            os.close(ready_r)
            if tls_w >= 0:
                os.close(tls_w)
        log.info("local worker pid %d joined %s", self.process.pid, self.scheduler)

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
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await super().close()


def _handover(security: Any, plugins: Sequence[Any]) -> dict[str, Any]:
    """What the worker process reads from its pipe: TLS credentials and pickled plugins."""
    return {"tls": _worker_tls(security), "plugins": base64.b64encode(pickle.dumps(tuple(plugins))).decode()}


def _worker_tls(security: Any) -> dict[str, str]:
    """The worker's TLS credentials (PEM text) of a temporary Security; {} without one."""
    if security is None:
        return {}
    config = security.get_tls_config_for_role("worker")
    return {k: config[k] for k in ("ca_file", "cert", "key")}


def _security_from(tls: dict[str, str]) -> Any:
    from distributed.security import Security

    if not tls:
        return None
    return Security(
        tls_ca_file=tls["ca_file"],
        tls_worker_cert=tls["cert"],
        tls_worker_key=tls["key"],
        require_encryption=True,
    )


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


async def _serve(
    scheduler: str, options: dict[str, Any], ready_fd: int, security: Any, plugins: Sequence[Any]
) -> None:
    import dask.config
    from distributed import Worker

    dask.config.set(QUIET)
    short_logs()
    n = int(options["nthreads"])
    resources: dict[str, float] = {CORES: n}
    if options.get("memory") is not None:
        resources["memory"] = float(options["memory"])
    resources.update({name: float(n) for name, n in options.get("offers", {}).items() if n})
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(
        scheduler,
        nthreads=n,
        resources=resources,
        host="127.0.0.1",
        security=security,
        dashboard_address="127.0.0.1:0",
        name=options.get("name"),
        plugins=tuple(plugins),
    ) as worker:
        os.write(ready_fd, b"ready")
        os.close(ready_fd)
        finished = asyncio.ensure_future(worker.finished())
        await asyncio.wait(
            [finished, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED
        )


class HeartbeatRace(logging.Filter):
    """Drops Dask's "Failed to communicate with scheduler during heartbeat" traceback: the
    worker logs it (at ERROR) when a heartbeat meets the scheduler closing at the end of a
    sweep, and otherwise just sends the next heartbeat. This process's stderr is the user's
    terminal, where a traceback after a sweep that went well reads as a failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to communicate with scheduler during heartbeat")


def main(argv: list[str]) -> int:
    _die_with_parent()
    scheduler, text, ready_fd, tls_fd = argv
    options = json.loads(text)
    with os.fdopen(int(tls_fd)) as pipe:
        handed = json.load(pipe)
    security = _security_from(handed["tls"])
    plugins = pickle.loads(base64.b64decode(handed["plugins"]))
    logging.getLogger("distributed").setLevel(options.get("silence_logs", logging.ERROR))
    logging.getLogger("distributed.worker").addFilter(HeartbeatRace())
    asyncio.run(_serve(scheduler, options, int(ready_fd), security, plugins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
