"""The batch system's warning that a job nears its end: the worker retires on it.

A SLURM job of a sweep with a walltime asks for ``--signal=B:USR1@SIGNAL_S``: SLURM sends
SIGUSR1 to the job's batch shell about ``SIGNAL_S`` seconds before the limit (up to a minute
early: SLURM looks every 30-60 s). bash runs a trap only once its foreground command (the
worker) exits, so the job script ignores the signal first (``trap '' USR1``: the nanny does not
die of a warning that comes before its plugin is set up) and ``exec``s the Dask nanny in place
of the shell. The nanny gets the signal: :class:`EndSignal`, a nanny plugin, passes it on to its
worker process once the worker handles it (a process the nanny starts has the default action,
death, until then), and there :func:`retire_on_signal` has the worker retire
(:class:`sweep.worker.retirement.Retirement`): no point starts there any more, the running ones
end and their records are fetched, the worker closes, its job ends, and the cluster submits a
replacement that picks up the rest.

    slurmctld ──USR1──> nanny (the job's shell, exec'd) ──USR1──> worker ──> Retirement.retire

This catches what the job's own clock (``SWEEP_JOB_END``) can't: a time limit changed while
the job runs, or a batch system ending jobs early for maintenance.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import NannyPlugin

from sweep import _compat
from sweep.capacity.backends import BACKENDS

log = logging.getLogger(__name__)
SIGNAL = signal.SIGUSR1
SIGNAL_S = 120  # how long before its walltime a SLURM job is warned
# the shortest walltime warned: SLURM may warn a minute early, and a worker warned at its
# start would retire before its first point
MIN_WALLTIME_S = 600
# per batch system: the job script directive that asks for the warning
DELIVER_POLL_S = 0.5  # how often a warned nanny looks whether its worker handles the signal
IGNORE_LINE = f"trap '' {SIGNAL.name.removeprefix('SIG')}"  # the first line of the job script


def directive(template: str) -> str:
    """A batch system's end-signal directive (:class:`Backend`'s ``end_signal``) for SIGNAL at
    SIGNAL_S before the end."""
    return template.format(signal=SIGNAL.name.removeprefix("SIG"), seconds=SIGNAL_S)


def warns(kind: str) -> bool:
    """Whether the batch system ``kind`` is asked to warn its jobs of their end."""
    return kind in BACKENDS and BACKENDS[kind].end_signal is not None


def job_script_options(kind: str, opts: dict[str, Any], python: str, walltime_s: float) -> None:
    """Ask, in the dask-jobqueue options ``opts`` of a ``kind`` cluster whose jobs last
    ``walltime_s``, for the warning signal: the directive (when the walltime is at least
    :data:`MIN_WALLTIME_S`, unless the recipe gives a ``--signal`` of its own), the line that
    ignores it until the nanny handles it, and the worker command ``exec``'d."""
    template = BACKENDS[kind].end_signal if kind in BACKENDS else None
    if template is None:
        return
    directives = list(opts.get("job_extra_directives") or [])
    own = any(d.strip().startswith("--signal") for d in directives)
    if not own and walltime_s >= MIN_WALLTIME_S:
        opts["job_extra_directives"] = [*directives, directive(template)]
    opts["job_script_prologue"] = [IGNORE_LINE, *(opts.get("job_script_prologue") or [])]
    command = opts.get("python") or python
    opts["python"] = command if command.startswith("exec ") else f"exec {command}"


def handles(pid: int, signum: int) -> bool:
    """Whether process ``pid`` catches or ignores ``signum`` (Linux: ``/proc/PID/status``), so
    that sending it can't kill the process; False when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = dict(
        line.split(":\t", 1) for line in status.splitlines() if line.startswith(("SigCgt", "SigIgn"))
    )
    bit = 1 << (signum - 1)
    return any(int(masks.get(name, "0"), 16) & bit for name in ("SigCgt", "SigIgn"))


class EndSignal(NannyPlugin):
    """Passes the batch system's warning from the nanny (the job's exec'd shell) to its worker,
    once the worker handles it: a worker process starts with the signal's default action (it
    would die of it) until :func:`retire_on_signal` runs there, and SLURM may warn at once."""

    name = "sweep-end-signal"

    def setup(self, nanny: Any) -> None:
        async def deliver() -> None:
            while nanny.status.name not in ("closing", "closed", "failed"):
                pid = _compat.nanny_worker_pid(nanny)
                if pid is not None and handles(pid, SIGNAL):
                    os.kill(pid, SIGNAL)
                    return
                await asyncio.sleep(DELIVER_POLL_S)

        def on_signal(signum: int, frame: Any) -> None:
            nanny.loop.add_callback(deliver)

        try:
            signal.signal(SIGNAL, on_signal)
        except ValueError:  # not the main thread: not a nanny of a job script
            log.debug("nanny %s: no %s handler outside the main thread", nanny, SIGNAL.name)


def retire_on_signal(retirement: Any) -> None:
    """Have ``retirement`` (a worker's) begin when this process gets :data:`SIGNAL`; the
    handler only schedules it on the worker's loop."""
    worker = retirement.worker
    if worker is None:
        return

    def on_signal(signum: int, frame: Any) -> None:
        worker.loop.add_callback(retirement.retire, "its batch job's end was signalled (SIGUSR1)")

    try:
        signal.signal(SIGNAL, on_signal)
    except ValueError:  # a worker in a thread (a local cluster's): no batch job to warn it
        log.debug("worker %s: no %s handler outside the main thread", retirement.address, SIGNAL.name)
