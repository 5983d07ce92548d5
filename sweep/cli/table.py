"""The table of ``sweep`` subcommands (:data:`COMMANDS`), filled by :func:`command` where each
is defined (:mod:`sweep.cli.app`, :mod:`sweep.cli.reading`), and the arguments they share."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import UsageError

EXIT_OK, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 130, 143


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


def _json_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (docs/cli.md, Output for scripts)",
    )


def _no_progress_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument("--no-progress", action="store_true", help="no progress display or summary")


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """``rows`` as lines of left-aligned columns two spaces apart (the last one unpadded)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _open(path: str):
    from sweep.store.results import open_results

    try:
        return open_results(Path(path))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None


def _finished(counts: Counter[str]) -> int:
    """Points ended for good: done, or pruned by a search."""
    from sweep.wire.protocol import FINISHED

    return sum(counts[s] for s in FINISHED)


def _load(args: argparse.Namespace):
    from sweep.client.runner import Sweep

    return Sweep.from_yaml(args.recipe, args.overrides, args.output)
