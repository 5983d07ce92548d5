"""The ``sweep`` command: a table of subcommands (:data:`COMMANDS`), each a function
registered with :func:`command` beside the function that declares its arguments. What they
compute lives in the modules they call; this module parses, prints and picks exit codes.

Exit codes: 0 every point done; 1 the sweep ran but some points are not done; 2 bad input
(recipe, output in use or made by another recipe, cluster that can't fit the jobs):
nothing was started and the output was not touched; 3 the store could not be written (file
system full): the points written are kept; 130 interrupted (Ctrl-C): the points written are
kept. Every error is one line; a rerun resumes.

SIGPIPE: commands that print and exit (``Command.prints``) die quietly when their reader goes
away (``sweep status out.zarr | head``). ``submit`` hosts the Dask scheduler and client, whose
sockets see EPIPE whenever a worker disconnects, so it keeps Python's default (SIGPIPE
ignored, EPIPE an exception the networking code handles), and a closed stdout or stderr only
silences its output: the sweep goes on.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.child.wholelines import StreamOver
from sweep.errors import SweepError, UsageError
from sweep.logs import log_to_stderr
from sweep.store.layout import read_attrs

EXIT_OK, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 130


@dataclass(frozen=True)
class Command:
    """One ``sweep`` subcommand: its help line, how its arguments are declared, what runs it.
    ``prints``: a command that prints and exits (it may die quietly by SIGPIPE)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    prints: bool = False


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None], prints: bool = False
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register the decorated function as the subcommand ``name``."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = Command(name, help, arguments, run, prints)
        return run

    return register


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


def _set_arg(q: argparse.ArgumentParser, example: str) -> None:
    q.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a recipe key, e.g. --set {example} (repeatable)",
    )


def _recipe_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("recipe", help="recipe YAML file")
    _set_arg(q, "resources.threads=2")
    q.add_argument("--output", help="result store path (overrides the recipe's output)")


def _store_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument("output", help="result store path")


def _no_progress_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument("--no-progress", action="store_true", help="no progress display or summary")


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
    _setup_logging(args.verbose)
    try:
        return int(args.handler(args))
    except SweepError as exc:
        print(f"sweep {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if argv is None:  # a second Ctrl-C while the interpreter exits would print a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(f"sweep {args.command}: {_interrupted(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED


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
    """Warnings as ``sweep: warning: ...`` lines; ``-v`` shows sweep's log on stderr.

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
    print(f"sweep: warning: {message}", file=sys.stderr)


def _load(args: argparse.Namespace):
    from sweep.runner import Sweep

    return Sweep.from_yaml(args.recipe, args.overrides, args.output)


def _submit_args(q: argparse.ArgumentParser) -> None:
    _recipe_args(q)
    over = q.add_mutually_exclusive_group()
    over.add_argument(
        "--force", action="store_true", help="delete what the output holds and start over in place"
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
        help="--only failed: run the failed, timed-out, stalled and killed points, not the pending ones",
    )
    q.add_argument(
        "--dry-run", action="store_true", help="print the plan and the batch job script; submit nothing"
    )
    q.add_argument(
        "--detach",
        action="store_true",
        help="run in the background (immune to a closed terminal); follow with `sweep attach OUTPUT`",
    )


@command("submit", "run a recipe's sweep (resumes an existing output)", _submit_args)
def _submit(args: argparse.Namespace) -> int:
    from sweep import cluster, jobqueue, plan

    s = _load(args)
    settings = jobqueue.run_defaults(s.recipe.cluster, s.loaded.name, s.output)
    k, memory = s.recipe.resources.cores, s.recipe.resources.memory
    if args.dry_run:
        plan.preflight(s.loaded)
        print(f"plan: {cluster.plan_text(settings, k, len(s), memory, s.recipe.resources.gpus)}")
        print(f"output: {s.output}")
        if settings.kind in cluster.jobqueue.CLASSES:
            existed = s.output.exists()
            with cluster.batch_cluster(settings, dry_run=True) as batch:
                print(f"batch job script ({settings.kind}; the scheduler address is the real one's")
                print(f"placeholder: a real run listens on cluster.interface):\n{batch.job_script()}")
            if not existed:  # dask-jobqueue made the jobs' log folder under it: a dry run leaves nothing
                shutil.rmtree(s.output, ignore_errors=True)
        return EXIT_OK
    if args.detach:
        return _detach(args, s)
    return _drive(
        s, args.no_progress, force=args.force, keep_done=args.keep_done, only_failed=args.only == "failed"
    )


def _drive(s: Any, quiet: bool, **run: Any) -> int:
    """Run sweep ``s`` as this command's driver: its state file published once it holds the
    store (for `attach`, `cancel`, `logs --follow`), SIGTERM taken as a cancel, its exit code
    recorded as it ends; the exit code."""
    from sweep import driver

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
    from sweep import driver

    # the background driver writes to its log file, not a terminal: progress there is the same
    # rate lines and closing table a foreground run prints to a log (sweep.progress)
    state = driver.detach([a for a in args.argv if a != "--detach"], s.output)
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
    from sweep import driver

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
    from sweep import driver

    output = Path(args.output)
    state = driver.cancel(output)
    done = driver.counts(output)["done"]
    print(f"cancelled the sweep of pid {state.pid}; {done} points done are kept in {output}")
    print("submit again to resume it")
    return EXIT_OK


def _logs_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    q.add_argument(
        "--where", action="append", default=[], metavar="AXIS=VALUE", help="select points (repeatable)"
    )
    q.add_argument("--point", help="one point, by its point_id")
    q.add_argument("--attempt", type=int, help="only this attempt (1 = the first)")
    q.add_argument(
        "--follow", "-f", action="store_true", help="stream one running point's output until it ends"
    )


@command("logs", "what points printed, every attempt, whether they succeeded or not", _logs_args, prints=True)
def _logs(args: argparse.Namespace) -> int:
    import numpy as np

    from sweep.store import LOGS
    from sweep.store.results import select_points

    output = Path(args.output)
    ds = _open(args.output)
    ids = select_points(ds, args.where, args.point)
    if args.follow and _follow(output, ds, ids):
        return EXIT_OK
    shown = 0
    made = int(ds["attempts"].values[np.isin(ds["point_id"].values, ids)].max(initial=0))
    notes = _went_on(ds, ids)
    for pid in ids:
        if pid in notes:
            print(f"==> point {pid}: {notes[pid]} <==")
        folder = output / LOGS / pid
        files = sorted(folder.glob("*.txt"), key=lambda f: int(f.stem)) if folder.is_dir() else []
        for f in files:
            if args.attempt is None or int(f.stem) == args.attempt:
                text = f.read_text(errors="replace")
                print(f"==> point {pid} attempt {f.stem} <==")
                print(text, end="" if text.endswith("\n") else "\n")
                shown += 1
    if not shown and args.attempt is not None and made < args.attempt:
        raise UsageError(f"--attempt {args.attempt}: the point(s) selected made {made} attempt(s) at most")
    if not shown:
        print(f"no output kept for the {len(ids)} point(s) selected (they printed nothing, or have not run)")
    return EXIT_OK


def _went_on(ds: Any, ids: Any) -> dict[str, str]:
    """How the selected points went on after an interruption: the checkpoint their last attempt
    resumed from, and how often they were requeued (stores made before these were kept: none)."""
    if "resumed_from" not in ds or "requeued" not in ds:
        return {}
    wanted = set(ids)
    notes = {}
    for pid, resumed, requeued in zip(
        ds["point_id"].values.ravel(), ds["resumed_from"].values.ravel(), ds["requeued"].values.ravel()
    ):
        said = [f"resumed from checkpoint {int(resumed)}"] if resumed else []
        said += [f"requeued {int(requeued)} time(s), its worker lost"] if requeued else []
        if pid in wanted and said:
            notes[str(pid)] = ", ".join(said)
    return notes


def _follow(output: Path, ds: Any, ids: Any) -> bool:
    """Stream the one selected point if it has not ended and a sweep runs the store; False
    when there is nothing to follow (its kept output is printed instead)."""
    import numpy as np

    from sweep import driver
    from sweep.follow import follow

    if len(ids) != 1:
        raise UsageError(
            f"--follow streams one point and {len(ids)} are selected; pick one with --point ID "
            "or with --where for every axis"
        )
    index = tuple(int(i) for i in np.argwhere(ds["point_id"].values == ids[0])[0])
    if str(ds["status"].values[index]) != "pending":
        return False
    try:
        follow(
            output,
            str(ids[0]),
            index,
            lambda text: print(text, end="", flush=True),
            lambda line: print(f"[sweep] {line}", file=sys.stderr, flush=True),
        )
    except driver.NotRunning:
        return False
    return True


def _ls_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("folder", nargs="?", default="results", help="where to look (default: results)")


@command("ls", "every result store under a folder: counts, running or not, size", _ls_args, prints=True)
def _ls(args: argparse.Namespace) -> int:
    from sweep import driver
    from sweep.protocol import NOT_DONE
    from sweep.store import last_run, lost_points
    from sweep.store.integrity import StoreDamaged

    root = Path(args.folder)
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder; give the folder holding your stores (default: results)")
    rows = []
    for path in driver.stores(root):
        attrs = read_attrs(path)
        try:
            c = driver.counts(path)
            damaged = int(lost_points(path).sum())
        except StoreDamaged as exc:
            rows.append((str(path), attrs.get("sweep_name", "?"), f"damaged: {exc}", "", ""))
            continue
        bad = sum(c[s] for s in NOT_DONE)
        extra = "".join(f" ({n} {what})" for n, what in ((c["pruned"], "pruned"), (damaged, "damaged")) if n)
        rows.append(
            (str(path), attrs.get("sweep_name", "?"), f"{c['done']}/{bad}/{sum(c.values())}{extra}",
             last_run(path, attrs), f"{driver.size(path) / 2**20:.1f} MiB")
        )  # fmt: skip
    if not rows:
        print(f"no sweep stores under {root}")
        return EXIT_OK
    for line in aligned([("store", "name", "done/failed/total", "run", "size"), *rows]):
        print(line)
    return EXIT_OK


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """``rows`` as lines of left-aligned columns two spaces apart (the last one unpadded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _retry_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    _set_arg(q, "resources.timeout=2h")
    _no_progress_arg(q)


@command("retry", "run a store's failed, timed-out, stalled and killed points again", _retry_args)
def _retry(args: argparse.Namespace) -> int:
    from sweep.runner import Sweep
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
    from sweep import cluster

    def announce(client: Any) -> None:
        from sweep import driver

        link = cluster.dashboard_hint(client, s.recipe.cluster)
        driver.record(s.output, client, link)
        if not quiet:
            print(f"sweep {s.loaded.name}: {len(s)} points -> {s.output}", file=sys.stderr)
            print(f"dashboard: {link}", file=sys.stderr)

    return announce


def _exit_code(ds: Any, total: int) -> int:
    status = Counter(ds["status"].values.ravel().astype(str))
    return EXIT_OK if _finished(status) == total else EXIT_INCOMPLETE


def _finished(counts: Counter[str]) -> int:
    """Points ended for good: done, or pruned by a search."""
    from sweep.protocol import FINISHED

    return sum(counts[s] for s in FINISHED)


def _validate_args(q: argparse.ArgumentParser) -> None:
    _recipe_args(q)
    q.add_argument("--all", action="store_true", help="list every point, not the first 20")


@command("validate", "check a recipe and list the points it would run", _validate_args, prints=True)
def _validate(args: argparse.Namespace) -> int:
    s = _load(args)
    r = s.recipe
    space = s.loaded.space
    print(f"recipe {s.loaded.source}: OK")
    print(f"  job       {s.loaded.job.label}")
    print(f"  space     {space.kind} {dict(zip(space.dims, space.shape))} = {len(space)} points")
    print(f"  fixed     {r.params.fixed}")
    print(
        "  resources threads="
        + (
            f"{r.resources.threads}"
            if r.resources.threads_auto is None
            else f"auto (the first points measure k = {', '.join(map(str, r.resources.threads_auto))})"
        )
        + (f" ranks={r.resources.ranks}" if r.resources.ranks > 1 else "")
        + (f" gpus={r.resources.gpus:g}" if r.resources.gpus else "")
        + (f" memory={r.resources.memory / 2**20:.0f}MiB" if r.resources.memory else "")
        + "".join(
            f" {key}={value:g}" for key in ("timeout", "stall") if (value := getattr(r.resources, key))
        )  # unset ones are not shown
        + f" retries={r.resources.retries}"
    )
    print(f"  cluster   {r.cluster.kind}")
    print(f"  output    {s.output}")
    from sweep import cluster, plan

    plan.preflight(s.loaded)
    plan_line = cluster.plan_text(
        r.cluster, r.resources.cores, len(space), r.resources.memory, r.resources.gpus
    )
    print(f"  plan      {plan_line}")
    if s.loaded.search is not None:
        from sweep.searchspec import describe

        for line in describe(s.loaded.search, space):
            print(f"  {line}")
        return EXIT_OK
    for i, p in enumerate(s.points()):
        if i == 20 and not args.all:
            print(f"  ... {len(space) - 20} more (--all lists them)")
            break
        print(f"  {p.id}  {p.params}")
    return EXIT_OK


def _open(path: str):
    from sweep.store.results import open_results

    try:
        return open_results(Path(path))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None


def _status_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    q.add_argument(
        "--provenance", action="store_true", help="also print the inputs, versions, command and git state"
    )


@command("status", "counts by status of a result store, and its failures", _status_args, prints=True)
def _status(args: argparse.Namespace) -> int:
    from sweep.protocol import NOT_DONE
    from sweep.store import inputs_ran, last_run, lost_points

    ds = _open(args.output)
    status = ds["status"].values.ravel().astype(object)  # room for "damaged"
    lost = lost_points(args.output).ravel()
    status[lost] = "damaged"
    counts = Counter(status)
    total = status.size
    print(
        f"{args.output}: sweep {ds.attrs.get('sweep_name')} ({ds.attrs.get('sweep_space')}), {total} points"
    )
    print(f"  {last_run(args.output, ds.attrs)}")
    # the driver publishes its running points every SWEEP_REFRESH_S: those the store already
    # holds as ended are not running any more
    stored = ds["status"].values
    running = [p for p in _running(Path(args.output)) if stored[tuple(p["index"])] == "pending"]
    counts["running"] = len(running)
    counts["pending"] = max(0, counts["pending"] - len(running))  # pending in the store until they end
    for name in ("done", "pruned", *NOT_DONE, "running", "pending"):
        if counts[name]:
            print(f"  {name:8s} {counts[name]}")
    _print_running(ds, running)
    if "sweep_memory_ask" in ds.attrs:
        from sweep import memory

        ask = json.loads(ds.attrs["sweep_memory_ask"])
        print(
            f"  memory   points asked {memory.shown(ask['bytes'])} each ({memory.LEARN_FACTOR:g}x the "
            f"largest peak RSS of the first {ask['learned_from']} points; resources.memory sets it)"
        )
    from sweep import autothreads

    auto = autothreads.describe(ds.attrs.get(autothreads.ATTR))
    if auto is not None:
        print(f"  threads  auto chose {auto}")
    for name, how in (
        ("resumed_from", "resumed from a checkpoint"),
        ("requeued", "requeued, their worker lost"),
    ):
        went_on = int((ds[name] > 0).sum()) if name in ds else 0
        if went_on:
            print(f"  {how}: {went_on} points")
    if counts["damaged"]:
        print(f"  damaged  {counts['damaged']} (done, but their stored outputs are missing or unreadable; "
              "`sweep submit` again recomputes them)")  # fmt: skip
    errors = ds["error"].values.ravel().astype(str)
    ids = ds["point_id"].values.ravel().astype(str)
    shown = 0
    for pid, st, err in zip(ids, status, errors):
        if st in NOT_DONE and shown < 10:
            print(f"  {st} {pid}: {_headline(err)}")
            shown += 1
    over = (ds["peak_threads"] > ds["thread_budget"]) & (ds["thread_budget"] > 0)
    if over.any():
        print(f"  over their thread budget: {int(over.sum())} points (see peak_threads)")
    ran = inputs_ran(args.output)
    if len(ran) > 1:
        from sweep.inputs import mixed

        print(mixed(ran))
    if args.provenance:
        from sweep import provenance

        print(provenance.render(dict(ds.attrs), ran))
    return EXIT_OK if _finished(counts) == total else EXIT_INCOMPLETE


def _running(output: Path) -> list[dict[str, Any]]:
    """The points a sweep running ``output`` runs now (none when no sweep runs it)."""
    from sweep import driver

    try:
        return driver.running(output).running
    except UsageError:
        return []


def _print_running(ds: Any, running: list[dict[str, Any]]) -> None:
    """Where the running points run, on which cores, for how long (the first 10)."""
    import time

    ids = ds["point_id"].values
    for point in running[:10]:
        since = f"for {time.time() - point['since']:.0f} s" if point.get("since") else ""
        cores = ",".join(map(str, point.get("cores", [])))
        print(f"  running {ids[tuple(point['index'])]}: on {point['host']} cores {cores} {since}")


def _doctor_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--json", action="store_true", help="print JSON")


@command("doctor", "this node's CPUs, limits, measured JAX threads, safe packing", _doctor_args, prints=True)
def _doctor(args: argparse.Namespace) -> int:
    from sweep import doctor

    return doctor.main(as_json=args.json)


def _init_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("folder", nargs="?", default=".", help="where to write them (default: here)")


@command("init", "write the quickstart recipe and its job into a folder, to start from", _init_args)
def _init(args: argparse.Namespace) -> int:
    from sweep.starter import write_starter

    folder = Path(args.folder)
    for path in write_starter(folder):
        print(f"wrote {path}")
    print(f"run it: sweep submit {folder / 'quickstart.yaml'}")
    return EXIT_OK


def _headline(error: str) -> str:
    """One line of an error: a traceback's exception line, else its first line; a line that only
    introduces what follows (``rank 1 of 2 failed:``) is joined to the headline of the rest."""
    lines = error.strip().splitlines()
    if not lines:
        return ""
    if lines[0].startswith("Traceback"):
        return lines[-1]
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {_headline(chr(10).join(lines[1:]))}"
    return lines[0]


def _results_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    q.add_argument("--export", metavar="FILE", help="write FILE.nc (netCDF) or FILE.csv (per-point table)")


@command("results", "summarise a result store; export it", _results_args, prints=True)
def _results(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sweep.progress import summary_table

    ds = _open(args.output)
    if args.export:  # quiet: the one line of what was written
        from sweep.store.results import export

        print(export(ds, Path(args.export)))
        return EXIT_OK
    Console().print(summary_table(ds, None, args.output))
    print(ds)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
