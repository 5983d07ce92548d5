"""The ``sweep`` subcommands that read a store or the node and print: ``logs``, ``ls``,
``status``, ``results``, ``doctor`` and ``init``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sweep.cli.facts import headline
from sweep.cli.table import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    _finished,
    _json_arg,
    _open,
    _store_arg,
    aligned,
    command,
)
from sweep.errors import UsageError
from sweep.store import attributes, found
from sweep.store.layout import read_attrs


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
    ended = _ended_with_error(ds, ids)
    for pid in ids:
        if pid in notes:
            print(f"==> point {pid}: {notes[pid]} <==")
        folder = output / LOGS / pid
        files = sorted(folder.glob("*.txt"), key=lambda f: int(f.stem)) if folder.is_dir() else []
        chosen = [f for f in files if args.attempt in (None, int(f.stem))]
        texts = [(f"attempt {f.stem}", f.read_text(errors="replace")) for f in chosen]
        if pid in ended and args.attempt is None:
            texts.append(ended[pid])
        for label, text in texts:
            if not text:  # an attempt cut short (a cancel) before it printed: nothing to show
                continue
            print(f"==> point {pid} {label} <==")
            print(text, end="" if text.endswith("\n") else "\n")
            shown += 1
    if not shown and args.attempt is not None and made < args.attempt:
        raise UsageError(f"--attempt {args.attempt}: the point(s) selected made {made} attempt(s) at most")
    if not shown:
        print(f"no output kept for the {len(ids)} point(s) selected (they printed nothing, or have not run)")
    return EXIT_OK


def _ended_with_error(ds: Any, ids: Any) -> dict[str, tuple[str, str]]:
    """(a heading, the error that ended it) of each selected point that ended not done with an
    error: the traceback a job raised is kept in the store, not in what an attempt printed."""
    from sweep.wire.protocol import NOT_DONE

    wanted = set(ids)
    return {
        str(pid): (f"ended {status}", str(error))
        for pid, status, error in zip(
            ds["point_id"].values.ravel(), ds["status"].values.ravel(), ds["error"].values.ravel()
        )
        if pid in wanted and status in NOT_DONE and str(error or "").strip()
    }


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

    from sweep.client import driver
    from sweep.client.follow import follow

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
    _json_arg(q)


@command("ls", "every result store under a folder: counts, running or not, size", _ls_args, prints=True)
def _ls(args: argparse.Namespace) -> int:
    from sweep.cli import jsonout
    from sweep.client import driver
    from sweep.store import lost_points
    from sweep.store.integrity import StoreDamaged
    from sweep.store.runs import last_run_short
    from sweep.wire.protocol import NOT_DONE

    root = Path(args.folder)
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder; give the folder holding your stores (default: results)")
    rows, stores = [], []
    for path in found.stores(root):
        attrs = read_attrs(path)
        name = attrs.get(attributes.NAME, "?")
        try:
            c = driver.counts(path)
            damaged = int(lost_points(path).sum())
        except StoreDamaged as exc:
            rows.append((str(path), name, f"damaged: {exc}", "", ""))
            stores.append(jsonout.store_line(path, name, {}, f"damaged: {exc}", 0))
            continue
        bad = sum(c[s] for s in NOT_DONE)
        extra = "".join(f" ({n} {what})" for n, what in ((c["pruned"], "pruned"), (damaged, "damaged")) if n)
        run, size = last_run_short(path, attrs), found.size(path)
        rows.append(
            (str(path), name, f"{c['done']}/{bad}/{sum(c.values())}{extra}", run, f"{size / 2**20:.1f} MiB")
        )
        counts = {
            "done": c["done"],
            "failed": bad,
            "pruned": c["pruned"],
            "damaged": damaged,
            "total": sum(c.values()),
        }
        stores.append(jsonout.store_line(path, name, counts, run, size))
    if args.json:
        jsonout.emit(jsonout.doc("ls", folder=str(root), stores=stores))
        return EXIT_OK
    if not rows:
        print(f"no sweep stores under {root}")
        return EXIT_OK
    for line in aligned([("store", "name", "done/failed/total", "last run", "size"), *rows]):
        print(line)
    return EXIT_OK


def _status_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    q.add_argument(
        "--provenance", action="store_true", help="also print the inputs, versions, command and git state"
    )
    _json_arg(q)


@command("status", "counts by status of a result store, and its failures", _status_args, prints=True)
def _status(args: argparse.Namespace) -> int:
    from sweep.cli import facts
    from sweep.store import inputs_ran, last_run
    from sweep.wire.protocol import NOT_DONE

    ds = _open(args.output)
    known = facts.of_store(Path(args.output), ds)
    if args.json:
        from sweep.cli import jsonout

        jsonout.emit(jsonout.status(Path(args.output), known))
        return EXIT_OK if _finished(known.counts) == known.status.size else EXIT_INCOMPLETE
    status, counts, running = known.status, known.counts, known.running
    total = status.size
    name, kind = ds.attrs.get(attributes.NAME), ds.attrs.get(attributes.SPACE)
    print(f"{args.output}: sweep {name} ({kind}), {total} points")
    print(f"  {last_run(args.output, ds.attrs)}")
    for name in ("done", "pruned", *NOT_DONE, "running", "pending"):
        if counts[name]:
            print(f"  {name:8s} {counts[name]}")
    _print_running(ds, running)
    ask = facts.learned_memory(ds.attrs)
    if ask is not None:
        from sweep.capacity import memory

        n = ask["learned_from"]
        seen = "peak RSS of the first point" if n == 1 else f"largest peak RSS of the first {n} points"
        print(
            f"  memory   points asked {memory.shown(ask['bytes'])} each ({memory.LEARN_FACTOR:g}x the "
            f"{seen}; resources.memory sets it)"
        )
    from sweep.client import autothreads

    auto = autothreads.describe(ds.attrs.get(autothreads.ATTR))
    if auto is not None:
        print(f"  threads  auto chose {auto}")
    _print_allocation(ds.attrs)
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
            print(f"  {st} {pid}: {headline(err)}")
            shown += 1
    over = (ds["peak_threads"] > ds["thread_budget"]) & (ds["thread_budget"] > 0)
    if over.any():
        print(f"  over their thread budget: {int(over.sum())} points (see peak_threads)")
    ran = inputs_ran(args.output)
    if len(ran) > 1:
        from sweep.model.inputs import mixed

        print(mixed(ran))
    if args.provenance:
        from sweep.store.runs import provenance_text

        print(provenance_text(dict(ds.attrs), ran))
    return EXIT_OK if _finished(counts) == total else EXIT_INCOMPLETE


def _print_allocation(attrs: Any) -> None:
    """What the last run's allocation cost, and all runs' where there were several."""
    from sweep.client.listeners import allocation

    runs = allocation.runs_of(attrs)
    if runs:
        print(f"  cost     last run: {allocation.shown(runs[-1])}")
    if len(runs) > 1:
        print(f"           {len(runs)} runs: {allocation.shown(allocation.total(runs))}")


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
    from sweep.cli import doctor

    return doctor.main(as_json=args.json)


def _init_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("folder", nargs="?", default=".", help="where to write them (default: here)")


@command("init", "write the quickstart recipe and its job into a folder, to start from", _init_args)
def _init(args: argparse.Namespace) -> int:
    from sweep.cli.starter import write_starter

    folder = Path(args.folder)
    for path in write_starter(folder):
        print(f"wrote {path}")
    print(f"run it: sweep submit {folder / 'quickstart.yaml'}")
    return EXIT_OK


def _results_args(q: argparse.ArgumentParser) -> None:
    _store_arg(q)
    q.add_argument("--export", metavar="FILE", help="write FILE.nc (netCDF) or FILE.csv (per-point table)")
    _json_arg(q)


@command("results", "summarise a result store; export it", _results_args, prints=True)
def _results(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sweep.client.progress import summary_table

    ds = _open(args.output)
    if args.export:  # quiet: the one line of what was written
        from sweep.store.results import export

        print(export(ds, Path(args.export)))
        return EXIT_OK
    if args.json:
        from sweep.cli import jsonout

        jsonout.emit(jsonout.results(Path(args.output), ds))
        return EXIT_OK
    Console().print(summary_table(ds, None, args.output))
    print(ds)
    return EXIT_OK
