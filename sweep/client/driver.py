"""The process that runs a sweep (the driver), seen from other terminals.

The driver is the ``sweep submit`` process: it hosts the Dask client (and, for local and
batch clusters, the scheduler) and is the store's only writer. While it runs it keeps a small
state file in the store, ``.sweep-driver.json`` (:class:`DriverState`: pid, host, start,
command line, log, dashboard link, scheduler address, batch job ids), so that:

* ``sweep submit --detach`` can start it in the background (its own session, so a closed
  terminal's SIGHUP never reaches it; output to ``.sweep-driver.log`` in the store) and
  return once it is up (:func:`detach`);
* ``sweep attach OUTPUT`` can follow it from any terminal (:func:`attach`);
* ``sweep cancel OUTPUT`` can stop it (:func:`cancel`): SIGTERM, which the driver takes as
  a cancel (queued points cancelled, running children killed, finished results written,
  batch jobs released, cluster closed);
* ``sweep ls`` can list stores and which of them run now (:func:`stores`).

Whether a driver runs is the store's lock (:mod:`sweep.store.lock`), never the state file,
which a killed driver leaves behind.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sweep.client import startmark
from sweep.errors import SweepError, UsageError
from sweep.store import ownership
from sweep.store.layout import LOG_NAME, STATE_NAME, holds_data, is_store
from sweep.store.lock import holder, locked

CREDENTIALS_PREFIX = "sweep-driver-"  # then host, pid: a driver's TLS client credentials
START_TIMEOUT_S = 300.0  # a batch cluster's scheduler can take a while


@dataclass
class DriverState:
    """What other terminals know of a running driver (``.sweep-driver.json`` in the store)."""

    pid: int
    host: str
    started: float
    command: list[str]
    log: str = ""
    dashboard: str = ""
    scheduler: str = ""
    batch_jobs: list[str] = field(default_factory=list)
    running: list[dict[str, Any]] = field(default_factory=list)  # index, host, cores, since
    run: str = ""  # the token of the run going on: whose children `cancel` and `logs --follow` find
    credentials: str = ""  # a private file with TLS client credentials for the scheduler, if it wants them
    exit_code: int | None = None  # the driver's exit code, written as it exits (for `sweep attach`)

    def save(self, output: Path) -> None:
        """Replace the state file (atomically; on a full disk, in place when the new state is no
        longer than the old: the exit code must reach `sweep attach` even then)."""
        text = json.dumps(asdict(self))
        tmp = output / f"{STATE_NAME}.{os.getpid()}"
        try:
            _write_private(tmp, text)  # it names the scheduler and where the credentials are
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._overwrite(output / STATE_NAME, text)
            return
        os.replace(tmp, output / STATE_NAME)

    @staticmethod
    def _overwrite(path: Path, text: str) -> None:
        """Write ``text`` over ``path``'s bytes in place, padded with spaces to its old size (a
        file that does not grow needs no new blocks)."""
        size = path.stat().st_size
        data = text.encode()
        if len(data) > size:
            raise OSError(errno.ENOSPC, f"no room to update {path}")
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data.ljust(size))
        finally:
            os.close(fd)

    @classmethod
    def load(cls, output: Path) -> DriverState | None:
        try:
            return cls(**json.loads((output / STATE_NAME).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def starting(output: Path) -> None:
    """Called by the driver as soon as it holds the store's lock: its state file, without a
    cluster yet, replaces the one a previous run left (which names another pid)."""
    _own_state(output).save(output)


def _own_state(output: Path) -> DriverState:
    return DriverState(
        pid=os.getpid(),
        host=socket.gethostname(),
        started=time.time(),
        command=list(sys.argv),
        log=str(output / LOG_NAME) if (output / LOG_NAME).exists() else "",
    )


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by this user only (0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as f:
        f.write(text)


def record(output: Path, client: Any, dashboard: str) -> None:
    """Called by the driver once its cluster is up: write its state file."""
    cluster = getattr(client, "cluster", None)
    tls_dir = getattr(cluster, "shared_temp_directory", None) or Path.home() / ".cache" / "sweep" / "tls"
    replace(
        _own_state(output),
        dashboard=dashboard,
        scheduler=str(client.scheduler.address),
        batch_jobs=batch_jobs(client),
        credentials=_save_credentials(client.security, Path(tls_dir)),
    ).save(output)


def batch_jobs(client: Any) -> list[str]:
    """The ids of the batch jobs the client's cluster has submitted (none for other clusters)."""
    workers = getattr(getattr(client, "cluster", None), "workers", {})
    jobs = [str(getattr(j, "job_id", "")) for j in workers.values()]
    return [j for j in jobs if j and j != "None"]


def _save_credentials(security: Any, folder: Path) -> str:
    """Write the TLS client credentials of a temporary (in-memory) ``security`` to a file only
    the user can read, removed when this process exits; its path, or "" when there are none."""
    config = security.get_tls_config_for_role("client") if security is not None else {}
    pem = {k: config.get(k) for k in ("ca_file", "cert", "key")}
    if not all(v and "\n" in v for v in pem.values()):
        return ""
    private = _private_folder(folder)
    if private is None:
        print(
            f"sweep: no private folder for the sweep's credentials ({folder} can't be made): "
            "`sweep logs --follow` can't reach this sweep; the sweep itself goes on",
            file=sys.stderr,
        )
        return ""
    _remove_stale_credentials(private)
    path = private / f"{CREDENTIALS_PREFIX}{socket.gethostname()}-{os.getpid()}.json"
    _write_private(path, json.dumps(pem))
    atexit.register(path.unlink, missing_ok=True)
    return str(path)


def _private_folder(preferred: Path) -> Path | None:
    """``preferred``, else ``$TMPDIR/sweep-tls-UID`` (a home that can't be written, as under
    ``runuser``), made 0700; only a folder this user owns is used. None when neither can be."""
    import tempfile

    for folder in (preferred, Path(tempfile.gettempdir()) / f"sweep-tls-{os.geteuid()}"):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if folder.is_symlink() or folder.stat().st_uid != os.geteuid():
                continue  # made by someone else: never put a key there
            folder.chmod(0o700)
            return folder
        except OSError:
            continue
    return None


def _remove_stale_credentials(folder: Path) -> None:
    """Remove the credentials files that drivers of this host killed before their exit left
    (the folder may be shared by hosts through a network home: others' are left alone)."""
    prefix = f"{CREDENTIALS_PREFIX}{socket.gethostname()}-"
    for path in folder.glob(f"{prefix}*.json"):
        try:
            os.kill(int(path.stem.removeprefix(prefix)), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (ValueError, PermissionError):
            continue


def connect(state: DriverState) -> Any:
    """A Dask client of the running driver's scheduler (with its TLS credentials)."""
    from distributed import Client
    from distributed.security import Security

    security = None
    if state.credentials:
        pem = json.loads(Path(state.credentials).read_text())
        security = Security(
            tls_ca_file=pem["ca_file"],
            tls_client_cert=pem["cert"],
            tls_client_key=pem["key"],
            require_encryption=True,
        )
    return Client(state.scheduler, security=security, timeout=10, set_as_default=False)


def publish(output: Path, **changes: Any) -> None:
    """Called by the driver as it goes: the run's token once, the points running now every few
    seconds (for ``sweep status``); only when this process wrote the state file (a CLI driver)."""
    state = DriverState.load(output)
    if (
        state is not None
        and state.pid == os.getpid()
        and any(getattr(state, k) != v for k, v in changes.items())
    ):
        replace(state, **changes).save(output)


@contextmanager
def exit_recorded(output: Path) -> Iterator[list[int]]:
    """Around a driver's run: the exit code the caller puts in the yielded list (1 by default;
    a SweepError's own, 130 on Ctrl-C) is written to the state file as the run ends, when this
    process wrote it, so that `sweep attach` can end with it; its running points are cleared
    in the same write, so the state file is final."""
    code = [1]
    try:
        yield code
    except SweepError as exc:
        code[0] = exc.exit_code
        raise
    except KeyboardInterrupt:
        code[0] = 130
        raise
    finally:
        try:
            publish(output, exit_code=code[0], running=[])  # nothing runs once the driver ends
        except OSError as exc:
            print(f"sweep: could not record the exit code in {output / STATE_NAME}: {exc}", file=sys.stderr)


class NotRunning(UsageError):
    """No driver runs this store now."""


class Starting(NotRunning):
    """A process holds the store but has not published its state: a driver starting up, or a
    sweep run from Python (which publishes none)."""


def running(output: Path) -> DriverState:
    """The state of the driver running ``output`` now: the state file's, only when it names the
    process that holds the store's lock (a finished run leaves its file behind, naming a pid
    that may be gone or reused). NotRunning when none runs it; Starting when the holder has
    not published its state."""
    owner = holder(output) if output.is_dir() else None
    if owner is None and not is_store(output):  # a held one may be being rebuilt
        raise UsageError(f"{output} is not a sweep store (no zarr.json); give a store's path")
    if owner is None:
        raise NotRunning(f"no sweep runs {output} now; `sweep status {output}` says how its last run ended")
    if owner[1] == socket.gethostname() and not os.access(output / STATE_NAME, os.R_OK):
        _refuse_if_someone_elses(output)
    state = DriverState.load(output)
    if state is None or (state.pid, state.host) != owner:
        raise Starting(
            f"{output} is held by pid {owner[0]} on {owner[1]}, which has not published its state yet "
            "(a sweep starting up, or one run from Python: stop that one where it runs); try again soon"
        )
    return state


def _refuse_if_someone_elses(output: Path) -> None:
    """UsageError when the running sweep's state file belongs to another user (it is private:
    only its owner can follow, attach to or cancel the sweep)."""
    import pwd

    try:
        uid = (output / STATE_NAME).stat().st_uid
    except OSError:
        return
    if uid != os.geteuid():
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = f"uid {uid}"
        raise UsageError(
            f"the sweep running {output} belongs to {name}; only they can follow, attach or cancel it"
        )


def detach(argv: list[str], output: Path, wait_s: float = START_TIMEOUT_S) -> DriverState | None:
    """Start ``sweep <argv>`` (a submit without --detach) in the background for ``output``;
    return its state once its cluster is up, or None when it ended at once with exit code 0
    (nothing was left to run). SweepError with the end of its log when it ends first
    otherwise (bad input, no cluster, a full disk: with its exit code, and a store folder this
    call made is removed again when the run left nothing in it but its lock and log), or when it
    does not come up within ``wait_s``. NotAStore, with nothing written, for a folder of other
    files (:func:`~sweep.store.ownership.check`)."""
    ownership.check(output)
    made = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    if locked(output):
        state = DriverState.load(output)
        who = f"pid {state.pid} on {state.host}" if state else "another process"
        raise UsageError(f"{output} is being run by {who}; follow it with `sweep attach {output}`")
    (output / STATE_NAME).unlink(missing_ok=True)
    log = output / LOG_NAME
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    startmark.mark(output, proc.pid)  # a cancel from now on finds it
    try:
        return _await_start(proc, output, log, made, wait_s)
    finally:
        startmark.clear(output)


def _await_start(
    proc: subprocess.Popen, output: Path, log: Path, made: bool, wait_s: float
) -> DriverState | None:
    """:func:`detach`'s wait for its driver to come up."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        state = DriverState.load(output)
        if state is not None and state.pid == proc.pid and state.scheduler:  # its cluster is up
            return state
        if proc.poll() == 0:
            return None
        if proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM):  # killed, or said so
            raise SweepError(f"the sweep was cancelled as it started (pid {proc.pid}); nothing ran")
        if proc.returncode is not None:
            tail, free = _tail(log), _free_bytes(output)
            full = not tail and free is not None and free < 1 << 20
            if not tail:  # the log is empty: a disk too full to write it, or say where to look
                tail = f"the disk of {output} is full ({free} bytes free)" if full else f"(nothing in {log})"
            if made and not holds_data(output):
                shutil.rmtree(output, ignore_errors=True)  # nothing ran: leave nothing behind
            error = SweepError(f"the sweep ended at once (exit code {proc.returncode}):\n{tail}")
            # the foreground's own: 2 bad input, 3 a full disk
            error.exit_code = 3 if full else proc.returncode
            raise error
        time.sleep(0.2)
    raise SweepError(f"the sweep did not start within {wait_s:.0f} s (pid {proc.pid}); see {log}")


def _free_bytes(output: Path) -> int | None:
    try:
        vfs = os.statvfs(output)
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def counts(output: Path) -> Counter[str]:
    """Points of the store by status."""
    from sweep.store.results import open_results

    return Counter(open_results(output, load=False)["status"].values.ravel().astype(str))


def attach(output: Path, say: Callable[[str], None], every: float = 2.0) -> tuple[Counter[str], int | None]:
    """Follow the driver running ``output`` until it ends, calling ``say`` with a progress line
    whenever the counts change; returns the final counts and the driver's exit code (None when
    it died without saying). NotRunning when none runs."""
    state = running(output)
    say(f"attached to pid {state.pid} on {state.host}; dashboard: {state.dashboard or '-'}")
    last, rate = "", Rate(time.monotonic(), counts(output)["done"])
    while locked(output):
        now = DriverState.load(output)
        line = _progress(counts(output), len(now.running) if now is not None else 0, rate)
        if line != last:
            say(line)
            last = line
        time.sleep(every)
    final = counts(output)
    if _progress(final) != last:
        say(_progress(final))
    # the store's lock goes before the driver writes its exit code: wait for it while it lives
    deadline = time.monotonic() + 10
    while True:
        ended = DriverState.load(output)
        code = ended.exit_code if ended is not None and ended.pid == state.pid else None
        if code is not None or not alive(state.pid) or time.monotonic() > deadline:
            return final, code
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Rate:
    """Points done per second since ``attach`` began (from ``done`` then)."""

    since: float
    done: int

    def eta(self, done: int, left: int) -> str:
        elapsed = time.monotonic() - self.since
        per_s = (done - self.done) / elapsed if elapsed > 0 else 0.0
        if per_s <= 0 or not left:
            return ""
        return f"  ({per_s:.2f} points/s, ETA {left / per_s:.0f} s)"


def _progress(c: Counter[str], running_now: int = 0, rate: Rate | None = None) -> str:
    """A progress line: done of total, each status (the points running now apart from the
    pending ones), and, while points end, the rate and what is left's ETA."""
    c = Counter(c)
    total = sum(c.values())
    if running_now:
        c["running"], c["pending"] = running_now, max(0, c["pending"] - running_now)
    shown = "  ".join(f"{s} {n}" for s, n in sorted(c.items()) if n)
    eta = rate.eta(c["done"], c["pending"] + c["running"]) if rate is not None else ""
    return f"[sweep] {c['done']}/{total}  {shown}{eta}"
