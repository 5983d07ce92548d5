"""Adaptive search side by side: TPE + ASHA against random search, and against Ray Tune.

    .venv/bin/python benchmarks/run.py --only search search_invrs [--repeat 3] [--quick]

Two workloads (:data:`WORKLOADS`), each a real adjoint optimisation with settings searched as
continuous axes and its objective reported at every step it may be pruned at:

* ``cavity``: the quickstart cavity (``recipes/jobs/fdfd.py:optimize``), ``beta``, ``lr`` and
  ``eps_max`` searched, the objective reported every ``report_every`` steps;
* ``invrs``: invrs-gym's lightweight waveguide bend with Adam (``recipes/jobs/invrs.py:optimize``,
  ``optimizer: adam``), ``learning_rate`` and ``beta`` searched, the loss reported every step;
* ``invrs_best``: the same, each trial keeping its best design (``keep_best: true``): pruned on
  the best loss so far (``best_loss``), judged by the best design's loss;
* ``cavity_best``: the cavity with Adam's settings fixed and the device's own searched
  (``eps_max``, the material's contrast, and ``wavelength``), each trial keeping its best
  design: pruned on the highest objective so far (``best_objective``), judged by the best
  design's objective. Which material and wavelength make the strongest cavity shows early.

Each repeat uses its own seed, the same for every contender.

* ``sweep`` TPE + ASHA and ``sweep`` random search (no pruning), same ``n_trials``: the
  CPU-seconds each spends until it first reaches the random search's best objective (trials
  in the order they ended; a trial's CPU time is its child's, pruned trials included).
* Where the workload says ``pruner_alone``, random search with ASHA too: the same draws as
  the random search, so what it saves is the pruner's alone, the sampler's part left out.
* How well the workload's early objective ranks its final one, from the random search's trials
  (all run to the end): the Spearman rank correlation between the objective after 10%, 20% and
  50% of the steps and the final objective, per seed. Pruning can only pay where it is high.
* Ray Tune (``OptunaSearch`` + ``ASHAScheduler``, the same budget and ``CORES`` concurrent
  one-CPU trials), cavity only: wall time, best final objective, and the most OS threads a
  trial's process held (read from /proc at each report), against sweep's TPE + ASHA run's wall,
  best and ``peak_threads``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from distributed import Client
from ranking import early_ranks  # benchmarks/ranking.py (run.py puts this folder on the path)

from sweep import Sweep
from sweep.cluster.clusters import local_cluster, local_cores

CORES = local_cores()
JOBS = Path(__file__).resolve().parent.parent / "recipes" / "jobs"
FDFD = JOBS / "fdfd.py"
STEPS = 120
REPORT_EVERY = 10
CAVITY = {"seed": 0, "steps": STEPS, "n": 480, "n_design": 160}  # both cavity workloads' size
FIXED = {**CAVITY, "wavelength": 1.0, "report_every": REPORT_EVERY}
AXES = {"beta": [1.0, 16.0], "lr": {"low": 0.01, "high": 0.5, "log": True}, "eps_max": [2.0, 12.0]}
ASHA = {"min_resource": 60, "reduction_factor": 2}  # see benchmarks/README.md: early values mislead


@dataclass(frozen=True)
class Workload:
    """A searched optimisation: its job, fixed and searched parameters, the scalar result it is
    judged by, the per-step result ranked against it (dim ``step_dim``), and ASHA's settings."""

    job: str
    fixed: dict[str, Any]
    axes: dict[str, Any]
    objective: str
    direction: str
    history: str
    step_dim: str
    metric: str
    asha: dict[str, int]
    pruner_alone: bool = False  # also run random search with ASHA: what pruning alone saves

    @property
    def sign(self) -> float:
        """+1 where larger is better."""
        return 1.0 if self.direction == "maximize" else -1.0


INVRS_STEPS = 50
WORKLOADS = {
    "cavity": Workload(
        job=f"{FDFD}:optimize",
        fixed=FIXED,
        axes=AXES,
        objective="objective",
        direction="maximize",
        history="history",
        step_dim="iteration",
        metric="objective",
        asha=ASHA,
    ),
    "invrs": Workload(
        job=f"{JOBS / 'invrs.py'}:optimize",
        fixed={"optimizer": "adam", "seed": 0, "steps": INVRS_STEPS},
        axes={"learning_rate": {"low": 0.003, "high": 0.3, "log": True}, "beta": [1.0, 16.0]},
        objective="final_loss",
        direction="minimize",
        history="loss",
        step_dim="step",
        metric="loss",
        asha={"min_resource": INVRS_STEPS // 5, "reduction_factor": 3},
    ),
}
WORKLOADS["invrs_best"] = replace(
    WORKLOADS["invrs"],
    fixed={**WORKLOADS["invrs"].fixed, "keep_best": True},
    history="best_loss",
    metric="best_loss",
)
WORKLOADS["cavity_best"] = replace(
    WORKLOADS["cavity"],
    fixed={**CAVITY, "lr": 0.1, "beta": 4.0, "report_every": 1, "keep_best": True},
    axes={"eps_max": [2.0, 12.0], "wavelength": [0.8, 1.2]},
    history="best_objective",
    metric="best_objective",
    asha={"min_resource": STEPS // 5, "reduction_factor": 3},
    pruner_alone=True,
)


def run_sweep_search(w: Workload, sampler: str, prune: bool, n_trials: int, seed: int) -> dict[str, Any]:
    """One search on a fresh local cluster: its trials (end time, CPU s, objective, status),
    wall time (run only), the most threads a trial's child held, and each done trial's
    objective per step (``histories``)."""
    params: dict[str, Any] = {
        "search": {
            "sampler": sampler,
            "n_trials": n_trials,
            "seed": seed,
            "axes": w.axes,
            "objective": w.objective,
            "direction": w.direction,
        },
        "fixed": w.fixed,
    }
    if prune:
        params["prune"] = {"kind": "asha", "metric": w.metric, **w.asha}
    with (
        local_cluster(dashboard="127.0.0.1:0") as c,
        Client(c) as client,
        tempfile.TemporaryDirectory() as tmp,
    ):
        s = Sweep(w.job, params, name=f"bench-{sampler}", output=f"{tmp}/s.zarr")
        t0 = time.perf_counter()
        ds = s.run(client=client, progress=False)
        wall = time.perf_counter() - t0
    status = ds["status"].values.astype(str)
    assert set(status) <= {"done", "pruned"}, ds["error"].values
    trials = sorted(
        (
            float(ds["finished"].values[i].astype("float64")),
            float(ds["cpu_s"][i]),
            w.sign * float(ds[w.objective][i]),  # larger is better from here on
            st,
        )
        for i, st in enumerate(status)
    )
    done = [t[2] for t in trials if t[3] == "done"]
    histories = ds[w.history].transpose(..., w.step_dim).values[status == "done"]
    return {
        "wall_s": wall,
        "trials": trials,
        "best": w.sign * max(done),
        "peak_threads": int(ds["peak_threads"].max()),
        "pruned": int((status == "pruned").sum()),
        "cpu_s": sum(t[1] for t in trials),
        "histories": histories,
        "finals": ds[w.objective].values[status == "done"],
    }


def cpu_until(trials: list[tuple[float, float, float, str]], target: float) -> float:
    """CPU-seconds spent, trials in the order they ended, until a done trial reached ``target``
    (inf when none did)."""
    spent = 0.0
    for _, cpu, objective, status in trials:
        spent += cpu
        if status == "done" and objective >= target:
            return spent
    return math.inf


def _trainable(config: dict[str, Any]) -> None:
    """A Ray Tune trial: the same job, its reports going to ``tune.report``."""
    import sys

    from ray import tune

    import sweep

    sys.path.insert(0, str(FDFD.parent))
    import fdfd  # type: ignore[import-not-found]

    def threads() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))

    def report(step: int | None = None, **values: float) -> None:
        tune.report({**values, "step": step or 0, "threads": threads()})

    sweep.report = report  # type: ignore[assignment]  # the job reports through sweep.report
    fdfd.optimize(**FIXED, **config)  # its report at the last step is the final objective


def run_ray(n_trials: int, seed: int) -> dict[str, Any] | None:
    """One Ray Tune search in a process of its own, in a network namespace with only a loopback
    interface (Ray refuses 127.0.0.1 as a node address and its servers would listen on every
    interface otherwise); None when that can't be made (needs root and ``unshare``, ``ip``)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return None
    script = f"ip link set lo up && exec {sys.executable} {Path(__file__).resolve()} --ray {n_trials} {seed}"
    proc = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the Ray Tune run failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def ray_search(n_trials: int, seed: int) -> dict[str, Any]:
    """One Ray Tune search (OptunaSearch + ASHAScheduler) with the same budget on this machine's
    cores, without Ray's dashboard; wall of ``Tuner.fit`` only."""
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    with tempfile.TemporaryDirectory() as tmp:
        ray.init(
            num_cpus=CORES,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=f"{tmp}/ray",
            runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent)}},
        )
        try:
            tuner = tune.Tuner(
                tune.with_resources(_trainable, {"cpu": 1}),
                param_space={
                    "beta": tune.uniform(1.0, 16.0),
                    "lr": tune.loguniform(0.01, 0.5),
                    "eps_max": tune.uniform(2.0, 12.0),
                },
                tune_config=tune.TuneConfig(
                    metric="objective",
                    mode="max",
                    num_samples=n_trials,
                    max_concurrent_trials=CORES,
                    search_alg=OptunaSearch(seed=seed),
                    scheduler=ASHAScheduler(
                        time_attr="step",
                        max_t=STEPS,
                        grace_period=ASHA["min_resource"],
                        reduction_factor=ASHA["reduction_factor"],
                    ),  # fmt: skip
                ),
                run_config=tune.RunConfig(storage_path=f"{tmp}/results", verbose=0),
            )
            t0 = time.perf_counter()
            grid = tuner.fit()
            wall = time.perf_counter() - t0
            finals, threads, pruned = [], 0, 0
            for result in grid:
                if result.error is not None:
                    raise RuntimeError(f"a Ray Tune trial failed: {result.error}")
                frame = result.metrics_dataframe
                if frame is None or frame.empty:
                    continue
                threads = max(threads, int(frame["threads"].max()))
                ended = frame[frame["step"] >= STEPS]  # ASHA stops a trial at max_t: its last report
                if len(ended):
                    finals.append(float(ended["objective"].iloc[0]))
                else:
                    pruned += 1
        finally:
            ray.shutdown()
    return {"wall_s": wall, "best": max(finals), "peak_threads": threads, "pruned": pruned}


def bench_search(repeat: int, n_trials: int, workload: str = "cavity", ray_too: bool = True) -> dict:
    """Medians over ``repeat`` seeds of one of :data:`WORKLOADS`; see the module docstring.
    ``cpu_to_random_best_ratio``: TPE + ASHA's CPU-seconds until it reached random search's best
    over random's until it found it; ``cpu_over_random_total``: the same over all of random's;
    ``random_asha_*``: the same of random search + ASHA, where the workload asks for it."""
    w = WORKLOADS[workload]
    runs: dict[str, list[dict[str, Any]]] = {"tpe_asha": [], "random": [], "ray": [], "random_asha": []}
    ratios: dict[str, list[float]] = {"tpe_asha": [], "random_asha": []}
    of_total: dict[str, list[float]] = {"tpe_asha": [], "random_asha": []}
    ranks = []
    for seed in range(repeat):
        pruned = {"tpe_asha": run_sweep_search(w, "tpe", True, n_trials, seed)}
        if w.pruner_alone:
            pruned["random_asha"] = run_sweep_search(w, "random", True, n_trials, seed)
        rnd = run_sweep_search(w, "random", False, n_trials, seed)
        target = w.sign * rnd["best"]
        for name, run in pruned.items():
            spent = cpu_until(run["trials"], target)
            ratios[name].append(spent / cpu_until(rnd["trials"], target))
            of_total[name].append(spent / rnd["cpu_s"])
        ranks.append(early_ranks(rnd["histories"], rnd["finals"]))
        for name, run in (*pruned.items(), ("random", rnd)):
            runs[name].append({k: v for k, v in run.items() if k not in ("trials", "histories", "finals")})
        ray_run = run_ray(n_trials, seed) if ray_too and workload == "cavity" else None
        if ray_run is not None:
            runs["ray"].append(ray_run)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name]) if runs[name] else math.nan

    out: dict[str, Any] = {
        "workload": workload,
        "n_trials": n_trials,
        "asha": w.asha,
        "cpu_to_random_best_ratio": statistics.median(ratios["tpe_asha"]),
        "ratios": ratios["tpe_asha"],
        "cpu_over_random_total": statistics.median(of_total["tpe_asha"]),
        "over_random_total": of_total["tpe_asha"],
        "spearman": {f: statistics.median(r[f] for r in ranks) for f in ranks[0]},
        "spearman_runs": ranks,
        "runs": runs,
    }
    if w.pruner_alone:
        out["random_asha_cpu_to_random_best_ratio"] = statistics.median(ratios["random_asha"])
        out["random_asha_ratios"] = ratios["random_asha"]
        out["random_asha_over_random_total"] = statistics.median(of_total["random_asha"])
    for name in runs:
        for key in ("wall_s", "best", "peak_threads", "pruned"):
            out[f"{name}_{key}"] = med(name, key)
    for name in ("tpe_asha", "random"):
        out[f"{name}_cpu_s"] = med(name, "cpu_s")
    return out


if __name__ == "__main__":  # the Ray Tune contender, in its own process (see run_ray)
    if len(sys.argv) == 4 and sys.argv[1] == "--ray":
        print(json.dumps(ray_search(int(sys.argv[2]), int(sys.argv[3]))))
