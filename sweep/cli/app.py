"""The ``sweep`` command: a table of subcommands (:data:`COMMANDS`), each a function
registered with :func:`command` beside the function that declares its arguments. What they
compute lives in the modules they call; this module parses, prints and picks exit codes.

Exit codes: 0 every point done; 1 the sweep ran but some points are not done; 2 bad input
(recipe, output in use or made by another recipe, cluster that can't fit the jobs):
nothing was started and the output was not touched; 3 the store could not be written (file
system full): the points written are kept; 130 interrupted (Ctrl-C): the points written are
kept. Every error is one line; a rerun resumes. A Ctrl-C that lands where Python would drop
it, or inside importlib's own code, is delivered again a moment later
(:mod:`sweep.interrupts`).

SIGPIPE: commands that print and exit (``Command.prints``) die quietly when their reader goes
away (``sweep status out.zarr | head``). ``submit`` hosts the Dask scheduler and client, whose
sockets see EPIPE whenever a worker disconnects, so it keeps Python's default (SIGPIPE
ignored, EPIPE an exception the networking code handles), and a closed stdout or stderr only
silences its output: the sweep goes on.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sweep import interrupts
from sweep.child.wholelines import StreamOver
from sweep.cli import reading, validate  # noqa: F401  (their commands register themselves)
from sweep.cli.table import (
    COMMANDS,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    _finished,
    _json_arg,
    _load,
    _no_progress_arg,
    _recipe_args,
    _set_arg,
    _store_arg,
    command,
)
from sweep.errors import SweepError
from sweep.logs import log_to_stderr
from sweep.wire.protocol import NOT_DONE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sweep", description="Thread-capped JAX parameter sweeps on Dask.")
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log children spawned, recycled and killed, retries and resubmitted jobs; -vv: debug",
    )
    p.add_argument("--version", action="version", version=f"sweep (capped-sweep) {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for c in COMMANDS.values():
        q = sub.add_parser(c.name, help=c.help)
        c.arguments(q)
        q.set_defaults(handler=c.run)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capped-sweep")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _PipeSafe(StreamOver):
    """A text stream that goes quiet, instead of raising, once its reader has gone.

    On the first ``BrokenPipeError`` the file descriptor is pointed at ``/dev/null``, so
    what is still buffered (and the interpreter's flush at exit) goes nowhere quietly.
    """

    def _closed_pipe(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())
        finally:
            os.close(null)

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._closed_pipe()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._closed_pipe()


def _guard_streams(command: str) -> None:
    """SIGPIPE for the printing commands; pipe-safe stdout and stderr for the others."""
    if COMMANDS[command].prints:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        return
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    sys.stdout = _PipeSafe(sys.stdout)
    sys.stderr = _PipeSafe(sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # as a command, not called from Python
        _guard_streams(args.command)
        interrupts.install()
        signal.signal(signal.SIGTERM, _terminate)  # a submit takes it as a cancel once it runs
    _setup_logging(args.verbose)
    try:
        return int(args.handler(args))
    except SweepError as exc:
        print(f"sweep {args.command}: error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):
            from sweep.cli import jsonout

            jsonout.emit(jsonout.error(args.command, str(exc), exc.exit_code))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if argv is None:  # a second Ctrl-C while the interpreter exits would print a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        said = _interrupted(args)
        if isinstance(exc, Terminated):
            print(f"sweep {args.command}: terminated (SIGTERM); {said}", file=sys.stderr)
            return EXIT_TERMINATED
        print(f"sweep {args.command}: {said}", file=sys.stderr)
        return EXIT_INTERRUPTED


class Terminated(KeyboardInterrupt):
    """SIGTERM before the command took it otherwise (a submit takes it as a cancel once its
    run has started): ended as a Ctrl-C is, with its own line and exit code."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def _interrupted(args: argparse.Namespace) -> str:
    """What an interrupted command tells: for submit, how many points its store holds."""
    if args.command not in ("submit", "retry"):
        return "interrupted"
    try:  # the interrupt may have come in the middle of an import: anything can fail here
        from sweep.store.results import open_results

        output = _load(args).output if args.command == "submit" else args.output
        done = int((open_results(output)["status"] == "done").sum())
    except Exception:
        return "interrupted"
    return f"interrupted; {done} points saved in {output}; submit again to resume"


VLEN_NOTE = "The codec `vlen-utf8` is currently not part"


def _setup_logging(verbose: int) -> None:
    """Warnings as ``sweep: warning: ...`` lines, one per warning; ``-v`` shows sweep's log on stderr.

    Two kinds are not shown, as no user of the command can act on them: deprecation notices
    between libraries (numcodecs installs its own filter for one, so they are dropped when
    shown, not filtered), and zarr's note (on every open, in zarr 3.0) that the text codec this
    store uses on purpose, vlen-utf8, is not yet part of the zarr v3 specification."""
    warnings.showwarning = _show_warning
    if verbose:
        log_to_stderr(logging.DEBUG if verbose > 1 else logging.INFO)


def _show_warning(message: Warning | str, category: type[Warning], *_args: Any, **_kwargs: Any) -> None:
    if issubclass(category, DeprecationWarning) or str(message).startswith(VLEN_NOTE):
        return
    one_line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"sweep: warning: {one_line}", file=sys.stderr)


def _submit_args(q: argparse.ArgumentParser) -> None:
    _recipe_args(q)
    over = q.add_mutually_exclusive_group()
    over.add_argument(
        "--force",
        action="store_true",
        help="delete the store's own data (never other files in its folder) and start over in place",
    )
    over.add_argument(
        "--keep-done",
        action="store_true",
        help="keep the done points of an output made from other inputs; run the rest with these",
    )
    _no_progress_arg(q)
    q.add_argument(
        "--only",
        choices=["failed"],
        help=f"--only failed: run the points that ended {'/'.join(NOT_DONE)}, not the pending ones",
    )
    q.add_argument(
        "--dry-run", action="store_true", help="print the plan and the batch job script; submit nothing"
    )
    q.add_argument(
        "--detach",
        action="store_true",
        help="run in the background (immune to a closed terminal); follow with `sweep attach OUTPUT`",
    )
    _json_arg(q)


@command("submit", "run a recipe's sweep (resumes an existing output)", _submit_args)
def _submit(args: argparse.Namespace) -> int:
    from sweep.client import plan
    from sweep.cluster import clusters, plantext
    from sweep.model import backends

    s = _load(args)
    settings = backends.run_defaults(s.recipe.cluster, s.loaded.name, s.output)
    if args.dry_run:
        where = plan.placement(s.recipe)  # made once for this command, handed whole
        plan.preflight(s.loaded, where=where)
        print(f"plan: {plantext.plan_text(settings, where, len(s))}")
        print(f"output: {s.output}")
        if settings.cluster_kind.is_batch:
            existed = s.output.exists()
            with clusters.batch_cluster(settings, dry_run=True) as batch:
                print(f"batch job script ({settings.kind}; the scheduler address is the real one's")
                print(f"placeholder: a real run listens on cluster.interface):\n{batch.job_script()}")
            if not existed:  # dask-jobqueue made the jobs' log folder under it: a dry run leaves nothing
                shutil.rmtree(s.output, ignore_errors=True)
        return EXIT_OK
    if args.detach:
        return _detach(args, s)
    code = _drive(
        s,
        args.no_progress or args.json,
        force=args.force,
        keep_done=args.keep_done,
        only_failed=args.only == "failed",
    )
    if args.json:
        from sweep.cli import jsonout
        from sweep.store.results import open_results

        jsonout.emit(jsonout.submitted(s, open_results(s.output), code))
    return code


def _drive(s: Any, quiet: bool, **run: Any) -> int:
    """Run sweep ``s`` as this command's driver: its state file published once it holds the
    store (for `attach`, `cancel`, `logs --follow`), SIGTERM taken as a cancel, its exit code
    recorded as it ends; the exit code."""
    from sweep.client import driver

    with driver.exit_recorded(s.output) as code, _cancel_on_sigterm() as cancel:
        ds = s.run(
            progress=not quiet,
            on_start=_announcer(s, quiet),
            cancel=cancel,
            on_store=lambda: driver.starting(s.output),
            **run,
        )
        code[0] = _exit_code(ds, len(s))
    if quiet and code[0] != EXIT_OK:  # the summary table is not shown: one line says what is left
        left = Counter(str(v) for v in ds["status"].values.ravel() if v not in ("done", "pruned"))
        shown = ", ".join(f"{n} {what}" for what, n in sorted(left.items()))
        print(
            f"sweep {s.loaded.name}: {shown} of {len(s)} points; `sweep status {s.output}` says why",
            file=sys.stderr,
        )
    return code[0]


@contextmanager
def _cancel_on_sigterm() -> Iterator[threading.Event]:
    """An event SIGTERM sets (``sweep cancel``), while in the main thread."""
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    try:
        yield cancel
    finally:
        signal.signal(signal.SIGTERM, previous)


def _detach(args: argparse.Namespace, s: Any) -> int:
    from sweep.client import driver

    # the background driver writes to its log file, not a terminal: progress there is the same
    # rate lines and closing table a foreground run prints to a log (sweep.client.progress)
    state = driver.detach([a for a in args.argv if a not in ("--detach", "--json")], s.output)
    if args.json:
        from sweep.cli import jsonout

        jsonout.emit(jsonout.detached(s, state))
        return EXIT_OK
    if state is None:
        print(f"sweep {s.loaded.name}: nothing left to run in {s.output} (`sweep status {s.output}`)")
        return EXIT_OK
    print(f"sweep {s.loaded.name}: running in the background, pid {state.pid} on {state.host}")
    print(f"  output    {s.output}")
    print(f"  log       {state.log}")
    print(f"  dashboard {state.dashboard}")
    print(f"  follow    sweep attach {s.output}")
    print(f"  stop      sweep cancel {s.output}")
    return EXIT_OK


@command("attach", "follow a sweep running in the background until it ends", _store_arg)
def _attach(args: argparse.Namespace) -> int:
    from sweep.client import driver

    output = Path(args.output)
    try:
        final, code = driver.attach(output, lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print(f"sweep attach: detached; the sweep goes on (`sweep attach {output}` again)", file=sys.stderr)
        return EXIT_INTERRUPTED
    if code is not None:  # the sweep's own exit code, as its terminal would have seen it
        return code
    return EXIT_OK if _finished(final) == sum(final.values()) else EXIT_INCOMPLETE


@command("cancel", "stop a running sweep, keeping what is done", _store_arg)
def _cancel(args: argparse.Namespace) -> int:
    from sweep.client import cancel, driver
    from sweep.store.layout import is_store

    output = Path(args.output)
    state = cancel.cancel(output)
    if not is_store(output):
        print(f"cancelled the sweep of pid {state.pid} as it started; nothing ran in {output}")
        return EXIT_OK
    done = driver.counts(output)["done"]
    print(f"cancelled the sweep of pid {state.pid}; {done} points done are kept in {output}")
    print("submit again to resume it")
    return EXIT_OK


def _retry_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    _set_arg(q, "resources.timeout=2h")
    _no_progress_arg(q)


@command("retry", f"run a store's points that ended {'/'.join(NOT_DONE)} again", _retry_args)
def _retry(args: argparse.Namespace) -> int:
    from sweep.client.runner import Sweep
    from sweep.store import StoreMismatch

    s = Sweep.from_store(args.output, args.overrides)
    try:
        return _drive(s, args.no_progress, only_failed=True)
    except StoreMismatch as exc:  # its ways out are submit's options, which retry has not
        what = str(exc).split("\nUse ")[0]
        raise StoreMismatch(
            f"{what}\nretry reruns failed points with the inputs their store recorded: drop the --set "
            "that changes them, or submit the recipe with --keep-done (or --force)"
        ) from None


def _announcer(s: Any, quiet: bool) -> Any:
    """What submit prints once the cluster is up: the sweep, its output, the dashboard link."""
    from sweep.cluster import clusters

    def announce(client: Any) -> None:
        from sweep.client import driver

        link = clusters.dashboard_hint(client, s.recipe.cluster)
        driver.record(s.output, client, link)
        if not quiet:
            print(f"sweep {s.loaded.name}: {len(s)} points -> {s.output}", file=sys.stderr)
            print(f"dashboard: {link}", file=sys.stderr)

    return announce


def _exit_code(ds: Any, total: int) -> int:
    status = Counter(ds["status"].values.ravel().astype(str))
    return EXIT_OK if _finished(status) == total else EXIT_INCOMPLETE
