"""Which workers can run a task, and what a run says when none can (sweep/cluster/fits.py)."""

from sweep.cluster.fits import fits, unfit

ADDRESS = "tcp://127.0.0.1:8786"


def test_a_worker_fits_a_task_when_it_offers_at_least_each_resource_asked():
    assert fits({"threads": 4, "memory": 8e9}, {"threads": 4})
    assert fits({"threads": 4, "memory": 8e9}, {"threads": 2, "memory": 8e9})
    assert not fits({"threads": 4}, {"threads": 2, "memory": 1e9})  # offers no memory at all
    assert not fits({}, {"threads": 1})


def test_nothing_is_said_while_no_worker_is_up_or_one_fits():
    assert unfit(ADDRESS, [], {"threads": 64}) is None  # batch jobs may still be queued
    assert unfit(ADDRESS, [{"threads": 1}, {"threads": 8}], {"threads": 8}) is None


def test_each_short_resource_is_named_with_its_fix():
    assert unfit(ADDRESS, [{}], {"threads": 1}) == (
        f"no worker of {ADDRESS} offers threads=1 (largest: 0); lower resources.threads or start "
        "workers with --resources threads=N"
    )
    why = unfit(ADDRESS, [{"threads": 8, "memory": 2**30}], {"threads": 1, "memory": 2 * 2**30})
    assert why is not None and why.startswith("resources.memory=2.00 GiB but the largest worker")
    why = unfit(ADDRESS, [{"threads": 8}], {"threads": 1, "gpus": 1})
    assert why == f"no worker of {ADDRESS} offers gpus=1 (largest: 0); start workers with --resources gpus=N"


def test_workers_each_short_of_a_different_resource_are_said_to_be_so():
    offers = [{"threads": 8, "memory": 1e9}, {"threads": 1, "memory": 8e9}]
    why = unfit(ADDRESS, offers, {"threads": 4, "memory": 4e9})
    assert why is not None and "offers all of threads=4, memory=3.73 GiB at once" in why


def test_every_look_at_the_workers_asks_for_all_of_them():
    """distributed 2025.5 to 2026.6 return the first 5 workers from ``scheduler_info()`` unless
    ``n_workers=-1`` is given: a check of the largest worker would miss the 6th."""
    import ast

    from tests.helpers import ROOT

    calls = [
        (path.relative_to(ROOT), node)
        for path in (ROOT / "sweep").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "scheduler_info"
    ]
    assert calls
    every = [any(k.arg == "n_workers" and ast.unparse(k.value) == "-1" for k in n.keywords) for _, n in calls]
    partial = [f"{p}:{n.lineno}" for (p, n), ok in zip(calls, every, strict=True) if not ok]
    assert not partial, f"scheduler_info() without n_workers=-1 at {partial}"
