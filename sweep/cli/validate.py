"""``sweep validate``: check a recipe whole (with the plan's checks) before saying OK, and list
the points it would run."""

from __future__ import annotations

import argparse
import itertools

from sweep.cli.table import EXIT_OK, _json_arg, _load, _recipe_args, command


def _validate_args(q: argparse.ArgumentParser) -> None:
    _recipe_args(q)
    q.add_argument("--all", action="store_true", help="list every point, not the first 20")
    _json_arg(q)


@command("validate", "check a recipe and list the points it would run", _validate_args, prints=True)
def _validate(args: argparse.Namespace) -> int:
    from sweep.capacity.resources import shown
    from sweep.client import plan
    from sweep.cluster import plantext
    from sweep.store import ownership

    s = _load(args)
    r = s.recipe
    space = s.loaded.space
    where = plan.placement(r)  # made once for this command, handed whole
    plan.preflight(s.loaded, where=where)  # every check before "OK": an error after it would contradict it
    plan_line = plantext.plan_text(r.cluster, where, len(space))
    ownership.check(s.output)
    if args.json:
        from sweep.cli import jsonout

        listed = (
            []
            if s.loaded.search is not None
            else list(itertools.islice(s.points(), None if args.all else 20))
        )
        jsonout.emit(jsonout.validated(s, plan_line, listed))
        return EXIT_OK
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
        + (f" tpus={r.resources.tpus}" if r.resources.tpus else "")
        + (f" memory={r.resources.memory / 2**20:.0f}MiB" if r.resources.memory else "")
        + "".join(f" {name}={shown(name, value)}" for name, value in r.resources.amounts.items())
        + "".join(
            f" {key}={value:g}" for key in ("timeout", "stall") if (value := getattr(r.resources, key))
        )  # unset ones are not shown
        + f" retries={r.resources.retries}"
    )
    print(f"  cluster   {r.cluster.kind}")
    print(f"  output    {s.output}")
    print(f"  plan      {plan_line}")
    if s.loaded.search is not None:
        from sweep.model.searchspec import describe

        for line in describe(s.loaded.search, space):
            print(f"  {line}")
        return EXIT_OK
    for i, p in enumerate(s.points()):
        if i == 20 and not args.all:
            print(f"  ... {len(space) - 20} more (--all lists them)")
            break
        print(f"  {p.id}  {p.params}")
    return EXIT_OK
