"""Run every benchmark side by side with its baselines; print a table, write JSON.

    .venv/bin/python benchmarks/run.py [--repeat 3] [--quick] [--only NAME ...] [--json FILE]

Each comparison runs the contenders one after the other in the same process, ``--repeat``
times, and reports medians and ratios (see benchmarks/README.md for what each one does).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# sweep writes a new store's skeleton with dask.array and xarray: imported once here, not in the
# first contender's clock (as joblib is)
import dask.array  # noqa: E402, F401
import xarray  # noqa: E402, F401
from adaptive import bench_search  # noqa: E402  (benchmarks/adaptive.py)
from affinity import bench_affinity  # noqa: E402  (benchmarks/affinity.py)
from baselines import CORES, JOBS, cluster, run_job_array, run_loky, run_naive_dask, run_parsl  # noqa: E402
from distributed import Client  # noqa: E402
from first_result import bench_first_result  # noqa: E402  (benchmarks/first_result.py)
from outputs import bench_outputs  # noqa: E402  (benchmarks/outputs.py)
from ramp import bench_ramp  # noqa: E402  (benchmarks/ramp.py)
from recycling import bench_recycling  # noqa: E402  (benchmarks/recycling.py)
from scale import in_fresh_process  # noqa: E402  (benchmarks/scale.py)
from table import table  # noqa: E402  (benchmarks/table.py)
from wallsplit import epochs, split_wall  # noqa: E402  (benchmarks/wallsplit.py)

from sweep import Sweep  # noqa: E402
from sweep.wire.childconfig import ChildConfig  # noqa: E402
from sweep.wire.jobref import JobRef  # noqa: E402
from sweep.worker.child import Child  # noqa: E402

# the local worker is a fresh interpreter: this folder on its path, for jobs.py (naive_dask)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# -- contenders ------------------------------------------------------------------------------
# where a sweep's wall went, given one job's time alone (split_wall, bound to a run)
Splitter = Callable[[float], dict[str, float]]


def run_sweep(
    job: str,
    n: int,
    fixed: dict,
    cache: str | None = None,
    job_file: Path = JOBS,
    splits: list[Splitter] | None = None,
    resources: dict | None = None,
    seen: list[Any] | None = None,
) -> float:
    """Wall of a sweep of n points on a fresh cluster (clock: run only), with a fresh compile
    cache or the given one. With ``splits``, where the wall went is appended to it, as a
    function of the time of one job alone on a warm core (:func:`split_wall`). ``resources``: the
    recipe's (default one core a point); ``seen``: the dataset's attributes, and each point's k (its cores),
    start and end are appended to it."""
    with cluster() as c, Client(c) as client, tempfile.TemporaryDirectory() as tmp:
        child = {"compile_cache": cache or f"{tmp}/cache"}
        s = Sweep(
            f"{job_file}:{job}",
            {"zip": {"seed": list(range(n))}, "fixed": fixed},
            child=child,
            resources=resources or {"threads": 1},
            output=f"{tmp}/o.zarr",
        )
        t0, epoch0 = time.perf_counter(), time.time()
        ds = s.run(client=client, progress=False)
        wall = time.perf_counter() - t0
        assert int((ds["status"] == "done").sum()) == n, ds["error"].values
        if splits is not None:
            splits.append(partial(split_wall, ds, epoch0, epoch0 + wall))
        if seen is not None:
            ks = [len(str(c).split(",")) for c in ds["cores"].values.ravel()]
            seen.append({
                "attrs": dict(ds.attrs),
                "k": ks,
                "started": epochs(ds["started"].values.ravel()),
                "finished": epochs(ds["finished"].values.ravel()),
            })  # fmt: skip
    return wall


# -- benchmarks ------------------------------------------------------------------------------
def bench_threads(repeat: int) -> dict:
    out = {}
    for k in (1, 2):
        if k > CORES:
            continue
        for cap in (True, False):
            peaks = []
            for _ in range(repeat):
                child = Child(tuple(range(k)), ChildConfig(cap=cap))
                try:
                    peaks.append(child.run(JobRef("module", "sweep.cli.probe", "jax_grad"), {}).peak_threads)
                finally:
                    child.kill()
            out[f"k{k}_{'capped' if cap else 'uncapped'}"] = median(peaks)
        out[f"k{k}_ratio"] = out[f"k{k}_uncapped"] / out[f"k{k}_capped"]
    return out


def compare(contenders: dict[str, Callable[[], float]], repeat: int) -> dict:
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            times[name].append(fn())
    out = {f"{name}_s": median(ts) for name, ts in times.items()}
    out["runs"] = {name: ts for name, ts in times.items()}
    base = out["sweep_s"]
    for name in contenders:
        if name != "sweep":
            out[f"{name}_over_sweep"] = out[f"{name}_s"] / base
    return out


def bench_compile_heavy(repeat: int, n: int) -> dict:
    """Cold: every contender starts from nothing. ``sweep_warm_cache``: a new sweep (new
    cluster, new children) whose compile cache a previous sweep filled, as a follow-up sweep
    or a rerun has."""
    cache = tempfile.mkdtemp(prefix="sweep-bench-cache-")
    run_sweep("compile_heavy", CORES, {}, cache=cache)  # fills the cache, not timed
    return compare(
        {
            "sweep": lambda: run_sweep("compile_heavy", n, {}),
            "sweep_warm_cache": lambda: run_sweep("compile_heavy", n, {}, cache=cache),
            "job_array": lambda: run_job_array("compile_heavy", n, {}),
            "naive_dask": lambda: run_naive_dask("compile_heavy", n, {}),
            "loky": lambda: run_loky("compile_heavy", n, {}),
            "parsl": lambda: run_parsl("compile_heavy", n, {}),
        },
        repeat,
    )


def _alone_and_side_by_side(
    ref: JobRef, fixed: dict, warm_up: dict, repeat: int
) -> tuple[list[float], list[float]]:
    """Wall of the job ``ref(seed=i, **fixed)`` in a warm sweep child alone on core 0, and of
    each of CORES such children running it at once, one per core (no Dask, no client: the
    machine's own cost of running jobs side by side, which no orchestrator can take away).
    Each child first runs ``ref(**warm_up)``, outside the timing (imports, compiles), with a
    compile cache of their own, as a sweep's children have."""
    from concurrent.futures import ThreadPoolExecutor

    cache = tempfile.mkdtemp(prefix="sweep-bench-alone-")
    children = [Child((c,), ChildConfig(compile_cache=cache)) for c in range(CORES)]
    alone: list[float] = []
    paired: list[float] = []
    try:
        for child in children:
            child.run(ref, warm_up)
        for i in range(repeat):
            alone.append(children[0].run(ref, {**fixed, "seed": i}).wall_s)
            with ThreadPoolExecutor(CORES) as pool:
                paired.extend(
                    pool.map(
                        lambda c, seed: c.run(ref, {**fixed, "seed": seed}).wall_s, children, [i] * CORES
                    )
                )
    finally:
        for child in children:
            child.kill()
    return alone, paired


def _against_time_alone(
    ref: JobRef, fixed: dict, warm_up: dict, runs: int, contenders: Callable[[list[Splitter]], dict]
) -> dict:
    """``contenders(splitters)`` run between two measurements of the job alone and side by
    side (:func:`_alone_and_side_by_side`, ``runs`` each: the machine drifts during a
    benchmark), and sweep's walls split against the median time alone (:func:`split_wall`)."""
    alone, paired = _alone_and_side_by_side(ref, fixed, warm_up, runs)
    splitters: list[Splitter] = []
    out = contenders(splitters)
    after, paired_after = _alone_and_side_by_side(ref, fixed, warm_up, runs)
    alone, paired = alone + after, paired + paired_after
    single = median(alone)
    splits = [split(single) for split in splitters]
    return {
        **out,
        "single_core_job_s": single,
        "single_core_job_runs": alone,
        "side_by_side_job_s": median(paired),
        "side_by_side_job_runs": paired,
        "sweep_split": {k: median([sp[k] for sp in splits]) for k in splits[0]},
        "sweep_splits": splits,
    }


def bench_efficiency(repeat: int, n: int, steps: int) -> dict:
    """(n jobs' time alone on one warm core / cores) / wall; the time alone and the machine's
    side-by-side cost as :func:`_against_time_alone` measures them."""
    fixed = {"steps": steps}

    def contenders(splitters: list[Splitter]) -> dict:
        walls, loky, parsl = [], [], []
        for _ in range(repeat):
            walls.append(run_sweep("fixed_work", n, fixed, splits=splitters))
            loky.append(run_loky("fixed_work", n, fixed))
            parsl.append(run_parsl("fixed_work", n, fixed))
        return {"walls": walls, "loky_walls": loky, "parsl_walls": parsl}

    out = _against_time_alone(JobRef("file", str(JOBS), "fixed_work"), fixed, {"steps": 1}, 3, contenders)
    ideal = n * out["single_core_job_s"] / CORES
    for name, walls in (("sweep", out["walls"]), ("loky", out["loky_walls"]), ("parsl", out["parsl_walls"])):
        out[f"{name}_wall_s"] = median(walls)
        out[f"{name}_efficiency" if name != "sweep" else "efficiency"] = ideal / median(walls)
    return {"jobs": n, **out}


INVRS = HERE.parent / "recipes" / "jobs" / "invrs.py"
# loky and Parsl get what sweep's children get for BLAS; Parsl also two XLA client threads: its
# workers are pinned to one core, where invrs-opt's host callback hangs with one (docs/threads.md)
CAPPED_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def bench_invrs(repeat: int, n: int, steps: int) -> dict:
    """invrs-gym optimisations (``recipes/jobs/invrs.py``, the lightweight waveguide bend, L-BFGS-B)."""
    fixed = {"steps": steps}
    parsl_env = {**CAPPED_BLAS, "NPROC": "2", "PJRT_NPROC": "2"}

    def contenders(splitters: list[Splitter]) -> dict:
        return compare(
            {
                "sweep": lambda: run_sweep("optimize", n, fixed, job_file=INVRS, splits=splitters),
                "loky": lambda: run_loky("optimize", n, fixed, job_file=INVRS, env=CAPPED_BLAS),
                "parsl": lambda: run_parsl("optimize", n, fixed, job_file=INVRS, env=parsl_env),
            },
            repeat,
        )

    return _against_time_alone(JobRef("file", str(INVRS), "optimize"), fixed, {"steps": 2}, 2, contenders)


def bench_auto_threads(repeat: int, quick: bool = False, long: bool = False) -> dict:
    """``threads: auto`` against every fixed k it may choose, on the invrs-gym bend and the
    matmul-bound efficiency job: sweeps of the same points, interleaved, medians; and what the
    calibration cost: the wall of its rounds at the ks that lost (first start to last end).
    ``long``: the matmul job alone, 150 points per core of a fifth of the steps, a sweep long
    enough that the larger ks are measured (autothreads.REPAY)."""
    from sweep.client import autothreads
    from sweep.model.recipe import AUTO_CANDIDATES

    n = (150 if long else 8) * CORES
    ks = [k for k in AUTO_CANDIDATES if k <= CORES]
    workloads = {
        "matmul": ("fixed_work", JOBS, {"steps": (60 if quick else 180) if long else (300 if quick else 900)})
    }
    if importlib.util.find_spec("invrs_gym") is not None and not long:
        workloads["invrs"] = ("optimize", INVRS, {"steps": 3 if quick else 5})
    out: dict[str, Any] = {"jobs": n, "candidates": ks}
    for name, (job, file, fixed) in workloads.items():
        chosen: list[Any] = []
        contenders = {
            f"k{k}": partial(run_sweep, job, n, fixed, job_file=file, resources={"threads": k}) for k in ks
        }
        contenders["sweep"] = partial(  # compare() divides by "sweep": here the auto run
            run_sweep, job, n, fixed, job_file=file, resources={"threads": "auto"}, seen=chosen
        )
        r = compare(contenders, repeat)
        r["chosen"] = [json.loads(run["attrs"][autothreads.ATTR]) for run in chosen]
        r["losers_s"] = [_losers_span(run, c["chosen"]) for run, c in zip(chosen, r["chosen"], strict=True)]
        r["losers_median_s"] = statistics.median(r["losers_s"])
        best = min(ks, key=lambda k: r[f"k{k}_s"])
        r["best_fixed"] = best
        r["auto_over_best"] = r["sweep_s"] / r[f"k{best}_s"]
        r["auto_over_k1"] = r["sweep_s"] / r["k1_s"]
        r["auto_minus_best_s"] = r["sweep_s"] - r[f"k{best}_s"]
        out[name] = r
        print(f"auto threads {name}: {r}", flush=True)
    return out


def _losers_span(run: dict[str, Any], chosen: int) -> float:
    """Seconds from the first start to the last end of a ``threads: auto`` run's points at a k
    other than the one it chose (its calibration rounds that lost)."""
    spans = [(b, e) for k, b, e in zip(run["k"], run["started"], run["finished"], strict=True) if k != chosen]
    return max(e for _, e in spans) - min(b for b, _ in spans) if spans else 0.0


def bench_overhead(repeat: int, points: int) -> dict:
    from overhead import end_to_end, pool_overhead

    warm = [median(pool_overhead(100, warm=True)) for _ in range(repeat)]
    cold = [median(pool_overhead(10, warm=False)) for _ in range(repeat)]
    e2e = [end_to_end(points)["wall_s"] for _ in range(repeat)]
    return {
        "warm_ms": 1e3 * median(warm),
        "cold_ms": 1e3 * median(cold),
        "cold_over_warm": median(cold) / median(warm),
        "points": points,
        "end_to_end_s": median(e2e),
        "end_to_end_runs": e2e,
    }


def bench_scale(points: int, repeat: int) -> dict:
    """``points`` and a tenth of them, no-op, each in a separate process (so its peak RSS is
    the client's alone), alternated ``repeat`` times; medians and how the cost grows."""
    runs: dict[int, list[dict]] = {points // 10: [], points: []}
    for _ in range(repeat):
        for n in runs:
            runs[n].append(in_fresh_process(n))
    small, big = ({k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]} for n in runs)
    return {
        **big,
        "small_points": small["points"],
        "small_wall_s": small["wall_s"],
        "growth": big["wall_s"] / small["wall_s"],
        "per_point_ms": 1e3 * big["wall_s"] / big["points"],
    }


def bench_million(points: int) -> dict:
    """One sweep of ``points`` no-op points (1,000,000; ~10 minutes here, so run once) in a
    process of its own: its wall and the client's peak RSS."""
    r = in_fresh_process(points)
    return {**r, "per_point_ms": 1e3 * r["wall_s"] / r["points"]}


ALL = [
    "threads", "first_result", "compile_heavy", "efficiency", "invrs", "affinity", "auto_threads",
    "auto_threads_long", "overhead",
    "scale", "million", "recycling", "ramp", "search", "search_cavity_best", "search_invrs", "outputs",
]  # fmt: skip
# run only when named (--only): a variant of search_invrs, 36 minutes of this machine
OPTIONAL = ["search_invrs_best"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="fewer jobs and points (a smoke run)")
    p.add_argument("--only", nargs="*", default=None, help=" ".join(ALL + OPTIONAL))
    p.add_argument("--json", type=Path, default=HERE / "results.json")
    args = p.parse_args()
    # children start from the package's bytecode, as from any installed copy; where
    # PYTHONDONTWRITEBYTECODE is set (this machine), the caches of a changed checkout stay stale
    # and every child start would compile those modules again
    compileall.compile_dir(str(HERE.parent / "sweep"), quiet=1)
    quick = args.quick
    wanted = set(args.only or ALL)
    if wanted - set(ALL + OPTIONAL):
        p.error(f"unknown benchmark(s) {sorted(wanted - set(ALL + OPTIONAL))}; one of {ALL + OPTIONAL}")
    order = [n for n in ALL + OPTIONAL if n in wanted]
    results: dict = {
        "machine": {"cpus": CORES, "platform": platform.platform(), "python": platform.python_version()},
        "repeat": args.repeat,
        "run": {"started": time.strftime("%Y-%m-%d %H:%M %Z"), "benchmarks": order},
    }
    n_heavy = 4 * CORES if quick else 8 * CORES
    n_invrs, invrs_steps = (2 * CORES, 10) if quick else (3 * CORES, 15)
    photonics = importlib.util.find_spec("invrs_gym") is not None

    def outputs() -> dict:
        with cluster() as c, Client(c) as client:
            return bench_outputs(1 if quick else args.repeat, client)

    benchmarks: dict[str, Callable[[], Any]] = {
        "threads": lambda: bench_threads(args.repeat),
        "first_result": lambda: bench_first_result(args.repeat),
        "compile_heavy": lambda: {"jobs": n_heavy, **bench_compile_heavy(args.repeat, n_heavy)},
        "efficiency": lambda: bench_efficiency(args.repeat, n_heavy, steps=300 if quick else 900),
        "invrs": lambda: {
            "jobs": n_invrs,
            "steps": invrs_steps,
            **bench_invrs(args.repeat, n_invrs, invrs_steps),
        },
        "affinity": lambda: bench_affinity(args.repeat, quick),
        "auto_threads": lambda: bench_auto_threads(args.repeat, quick),
        "auto_threads_long": lambda: bench_auto_threads(args.repeat, quick, long=True),
        "overhead": lambda: bench_overhead(args.repeat, 200 if quick else 1000),
        "scale": lambda: bench_scale(10_000 if quick else 100_000, 1 if quick else args.repeat),
        "million": lambda: bench_million(100_000 if quick else 1_000_000),
        "recycling": lambda: bench_recycling(10_000 if quick else 100_000, 1 if quick else args.repeat),
        "ramp": lambda: bench_ramp(1 if quick else args.repeat),
        "search": lambda: bench_search(args.repeat, 12 if quick else 40),
        "search_cavity_best": lambda: bench_search(args.repeat, 12 if quick else 40, "cavity_best"),
        "search_invrs": lambda: bench_search(args.repeat, 8 if quick else 30, "invrs"),
        "search_invrs_best": lambda: bench_search(args.repeat, 8 if quick else 30, "invrs_best"),
        "outputs": outputs,
    }
    # the figures of benchmarks not run stay on record, also those only another machine gives
    # (the TPU machine's node, tpu_points, early_ranks); `measured` says which run each is from
    earlier = json.loads(args.json.read_text()) if args.json.exists() else {}
    # each benchmark's run's start: figures from one run can be told from earlier ones
    results["measured"] = dict(earlier.get("measured", {}))
    t0 = time.perf_counter()
    for name in order:
        if name.startswith(("invrs", "search_invrs")) and not photonics:
            continue
        results[name] = benchmarks[name]()
        results["measured"][name] = results["run"]["started"]
        results["run"]["wall_s"] = time.perf_counter() - t0
        # written after each benchmark: one that fails hours into a run loses nothing measured
        args.json.write_text(json.dumps({**earlier, **results}, indent=2))
        print(f"{name} done after {results['run']['wall_s']:.0f} s", flush=True)
    results = {**earlier, **results}
    print(table(results))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
