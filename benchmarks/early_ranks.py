"""Random trials of an optimisation on every core of one node, without Dask: how well its
early loss ranks its final one, which decides whether pruning a search can pay. Runs where no
socket can be opened (the TPU machine).

    python -m benchmarks.early_ranks --trials 30 --seed 0 --out ranks.json [CASE ...]

A case (:data:`CASES`) is a job, its fixed arguments and the ranges its searched arguments are
drawn from: uniformly, or log-uniformly where marked, as ``search_invrs`` in ``adaptive.py``
draws them. Every trial runs to the end on a worker's ``CorePool`` (one core each, warm
children, a shared compile cache, all cores busy). The value a trial reports at every step
(``sweep.report``, the case's ``metric``) is kept; :func:`benchmarks.ranking.early_ranks`
ranks it after 10%, 20% and 50% of the steps against the trial's ``final_loss``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ranking import early_ranks
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import Placement
from sweep.wire.protocol import Report
from sweep.worker.pool import CorePool

JOBS = Path(__file__).resolve().parent.parent / "recipes" / "jobs"
INVRS = JobRef("file", str(JOBS / "invrs.py"), "optimize")


@dataclass(frozen=True)
class Case:
    """Fixed job arguments and searched ones: ``(low, high)`` uniform, ``(low, high, "log")``
    log-uniform, ``(low, high, "int")`` an integer from ``low`` to ``high`` inclusive;
    ``metric`` is the reported value ranked."""

    fixed: dict[str, Any]
    axes: dict[str, tuple[Any, ...]]
    job: JobRef = field(default=INVRS)
    metric: str = "loss"

    def draw(self, rng: np.random.Generator) -> dict[str, Any]:
        """One trial's arguments."""
        drawn = {}
        for name, (low, high, *kind) in self.axes.items():
            if kind == ["int"]:
                drawn[name] = int(rng.integers(low, high, endpoint=True))
            elif kind == ["log"]:
                drawn[name] = float(np.exp(rng.uniform(np.log(low), np.log(high))))
            else:
                drawn[name] = float(rng.uniform(low, high))
        return {**self.fixed, **drawn}


ADAM = {"optimizer": "adam", "seed": 0, "steps": 50}
LBFGSB = {"optimizer": "lbfgsb", "steps": 50}
AXES: dict[str, tuple[Any, ...]] = {"learning_rate": (0.003, 0.3, "log"), "beta": (1.0, 16.0)}
CASES = {
    "bend": Case(ADAM, AXES),  # search_invrs's workload
    "bend_lr_from_0.02": Case(ADAM, {**AXES, "learning_rate": (0.02, 0.3, "log")}),
    "bend_100_steps": Case({**ADAM, "steps": 100}, AXES),
    "bend_best": Case({**ADAM, "keep_best": True}, AXES, metric="best_loss"),  # the best design kept
    # L-BFGS-B (the job's default optimiser) from drawn starts; in 20 steps, also from one start
    "bend_lbfgsb": Case(LBFGSB, {"beta": (1.0, 16.0), "seed": (0, 999, "int")}),
    "bend_lbfgsb_20": Case({**LBFGSB, "steps": 20}, {"beta": (1.0, 16.0), "seed": (0, 999, "int")}),
    "bend_lbfgsb_20_beta": Case({**LBFGSB, "steps": 20, "seed": 0}, {"beta": (1.0, 16.0)}),
    **{
        name: Case({**ADAM, "challenge": f"ceviche_lightweight_{name}"}, AXES)
        for name in ("beam_splitter", "mode_converter", "power_splitter", "wdm")
    },
}


def run_case(pool: CorePool, config: ChildConfig, case: Case, trials: int, seed: int) -> dict[str, Any]:
    """``trials`` random trials of ``case``, all cores at once; each one's arguments, reported
    losses, final loss and CPU seconds, and the early ranks over them."""
    rng = np.random.default_rng(seed)
    drawn = [case.draw(rng) for _ in range(trials)]

    def one(kwargs: dict[str, Any]) -> dict[str, Any]:
        losses: dict[int, float] = {}

        def on_report(report: Report) -> None:  # called in this thread, as the child reports
            losses[int(report.step or 0)] = report.values[case.metric]

        with pool.lease(Placement(1), config) as child:
            record = child.run(case.job, kwargs, on_report=on_report)
        assert record.status == "done", record.error
        return {
            "kwargs": kwargs,
            "losses": [losses[i] for i in sorted(losses)],
            "final_loss": float(record.outputs["final_loss"].values),
            "cpu_s": record.cpu_s,
        }

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(pool.cores)) as run:
        done = list(run.map(one, drawn))
    histories = np.array([d["losses"] for d in done])
    finals = np.array([d["final_loss"] for d in done])
    return {
        "fixed": case.fixed,
        "axes": case.axes,
        "seed": seed,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": sum(d["cpu_s"] for d in done),
        "spearman": early_ranks(histories, finals),
        "trials": done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"default all: {', '.join(CASES)}")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, action="append", help="repeatable; default 0")
    parser.add_argument("--out", default="ranks.json")
    args = parser.parse_args()
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; one of {list(CASES)}")
    config = ChildConfig(platforms="cpu", compile_cache=tempfile.mkdtemp(prefix="sweep-ranks-cache-"))
    pool = CorePool()
    pool.setup()
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        for name in args.cases or CASES:
            for seed in args.seed or [0]:
                got = run_case(pool, config, CASES[name], args.trials, seed)
                results.setdefault(name, []).append(got)
                Path(args.out).write_text(json.dumps(results, indent=1))
                print(name, seed, f"{got['wall_s']:.0f} s", got["spearman"], flush=True)
    finally:
        pool.teardown()
    for name, runs in results.items():
        medians = {f: statistics.median(r["spearman"][f] for r in runs) for f in runs[0]["spearman"]}
        print(name, "median Spearman", medians)


if __name__ == "__main__":
    main()
