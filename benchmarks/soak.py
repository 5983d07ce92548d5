"""A chaos soak on the multi-node SLURM: faults at random for many minutes, then a check that
every point ended done exactly once with the value a clean run gives.

    python benchmarks/soak.py --minutes 30 --seed 7          # make soak MINUTES=30 SEED=7

::

    start 3 SLURM nodes (scripts/slurm-nodes.sh, its own bridge and folder)
    submit --detach a sweep of --points points of benchmarks/soakjob.py (checkpointed, seeded)
    until --minutes have passed: a fault at random (seeded), at least --floor s apart:
        kill -9 a capped child | kill -9 a Dask worker | scancel --signal=TERM a batch job
        kill a node (revived later) | cut a node off (healed later) | scontrol requeue a job
        kill -9 the detached driver, then submit again | sweep cancel, then submit again
      (and the job's own: a seeded failure of a point's first attempt, an oom every Nth point)
    heal and revive every node, make sure a driver runs, wait for the sweep's end
    check: every point done, its value the clean value bit for bit (the recurrence computed
      here, and a clean local run of the first points), its attempts and requeues the starts
      its job marked (benchmarks/soakcount.py), the store opens with plain xarray and
      its integrity check is clean, no child, worker or batch job left, no core lease held
    stop the nodes; print the table; with --save, keep it in benchmarks/results.json

The soak exits 1 when any check fails, naming it. Every fault is logged with its time and
target (``faults`` in the report).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.soakcount import counted  # noqa: E402
from benchmarks.soakjob import clean_value  # noqa: E402

NODES = ROOT / "scripts" / "slurm-nodes.sh"
KINDS = ("kill_child", "kill_worker", "term_job", "kill_node", "cut_node", "requeue", "kill_driver", "cancel")
HEAL_AFTER_S = (15.0, 40.0)  # a killed node is revived, a cut one healed, this long after
END_WAIT_S = 900.0  # at least, after the last fault; more when more points are left
SLOTS = 6  # 3 batch jobs of 2 cores
FAULTED_SHARE = 0.5  # the share of the slots' time points get while faults come


def sh(
    *args: str, check: bool = False, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=check, env=env, timeout=timeout)


class Soak:
    """One soak: its folder, nodes, recipe, fault log and report."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.dir = Path(tempfile.mkdtemp(prefix="sweep-soak-"))
        self.env = {**os.environ, "SWEEP_NODES_DIR": str(self.dir / "nodes")}
        self.out = self.dir / "soak.zarr"
        self.faults: list[dict[str, Any]] = []
        self.starts: dict[str, int] = {}  # the count check's tally
        self.pending: list[tuple[float, str, str]] = []  # (when, action, node): heals and revivals
        self.t0 = time.monotonic()

    # -- the cluster ---------------------------------------------------------------------
    def start(self) -> None:
        up = sh(str(NODES), "start", env=self.env, timeout=600)
        if up.returncode != 0:
            raise SystemExit(f"soak: the multi-node SLURM did not start:\n{up.stdout}{up.stderr}")
        self.instance = (self.dir / "nodes" / "instance").read_text().strip()
        self.env["SLURM_CONF"] = str(self.dir / "nodes" / "slurm.conf")
        self.nodes = [f"node{i}" for i in range(1, int((self.dir / "nodes" / "nodes").read_text()) + 1)]
        self.recipe = self._write_recipe()

    def _write_recipe(self) -> Path:
        import yaml

        a = self.args
        fixed = {"steps": a.steps, "seconds": a.step_s, "seed": a.seed, "fail_rate": a.fail_rate,
                 "oom_every": a.oom_every, "marks": str(self.dir / "marks")}  # fmt: skip
        recipe = {
            "name": "soak",
            "job": f"{ROOT / 'benchmarks' / 'soakjob.py'}:optimize",
            "params": {"grid": {"x": list(range(a.points))}, "fixed": fixed},
            "resources": {"threads": 1, "memory": "400MiB", "retries": a.retries, "timeout": "2min"},
            "cluster": {
                "kind": "slurm",
                "cores": 2,
                "memory": "2GiB",
                "jobs": 3,
                "queue": "debug",
                "walltime": "01:00:00",
                "interface": f"sw-br{self.instance}",
                "dashboard": "127.0.0.1:0",
                "shared_temp_directory": str(self.dir / "tls"),
                "local_directory": str(self.dir / "work"),
                "job_script_prologue": [f"export SWEEP_LEASE_DIR={self.dir / 'leases'}/$(hostname)"],
            },  # fmt: skip
            "output": str(self.out),
        }
        path = self.dir / "soak.yaml"
        path.write_text(yaml.safe_dump(recipe, sort_keys=False))
        return path

    def sweep(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return sh(sys.executable, "-m", "sweep.cli", *args, env=self.env, timeout=timeout)

    def submit(self, *extra: str) -> None:
        """Submit the sweep detached; logged (a run's start is a boundary the count check
        needs), with the error when it failed for another reason than a driver running."""
        done = self.sweep("submit", str(self.recipe), "--detach", "--json", *extra)
        failed = done.returncode != 0 and "is being run by" not in done.stderr
        self.note("submit", "driver", f"rc {done.returncode}: {done.stderr.strip()[-200:]}" if failed else "")

    def status(self) -> dict[str, Any]:
        done = self.sweep("status", str(self.out), "--json")
        try:
            return json.loads(done.stdout)
        except ValueError:
            return {}

    # -- what the faults hit -------------------------------------------------------------
    def _ours(self, needle: str) -> list[psutil.Process]:
        """This soak's processes whose command line holds ``needle``: they name its bridge's
        addresses, or lease cores in its folder."""
        found = []
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if needle not in line:
                continue
            try:
                mine = f"10.231.{self.instance}." in line or str(self.dir) in p.environ().get(
                    "SWEEP_LEASE_DIR", ""
                )
            except psutil.Error:
                continue
            if mine:
                found.append(p)
        return found

    def _workers(self) -> list[psutil.Process]:
        return self._ours("dask worker [")

    def _children(self) -> list[psutil.Process]:
        return self._ours("sweep.child.bootstrap")

    def _jobs(self) -> list[str]:
        out = sh("squeue", "-h", "-t", "RUNNING", "-o", "%i", env=self.env).stdout
        return out.split()

    def _driver(self) -> int | None:
        try:
            state = json.loads((self.out / ".sweep-driver.json").read_text())
        except (OSError, ValueError):
            return None
        return (
            int(state["pid"])
            if psutil.pid_exists(int(state["pid"])) and state.get("exit_code") is None
            else None
        )

    # -- the faults ----------------------------------------------------------------------
    def note(self, kind: str, target: str, result: str = "") -> None:
        entry = {
            "t_s": round(time.monotonic() - self.t0, 1),
            "wall": round(time.time(), 2),
            "kind": kind,
            "target": target,
            "result": result,
        }
        self.faults.append(entry)
        print(f"[soak {entry['t_s']:7.1f} s] {kind} {target} {result}".rstrip(), flush=True)

    def inject(self, kind: str) -> bool:
        """Inject one fault of ``kind``; False when there was nothing to hit."""
        if kind in ("kill_child", "kill_worker"):
            victims = self._children() if kind == "kill_child" else self._workers()
            if not victims:
                return False
            victim = self.rng.choice(victims)
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.Error:
                return False
            self.note(kind, f"pid {victim.pid}")
        elif kind in ("term_job", "requeue"):
            jobs = self._jobs()
            if not jobs:
                return False
            job = self.rng.choice(jobs)
            cmd = (
                ["scancel", "--signal=TERM", "--batch", job]
                if kind == "term_job"
                else ["scontrol", "requeue", job]
            )
            self.note(kind, f"job {job}", sh(*cmd, env=self.env).stderr.strip()[-120:])
        elif kind in ("kill_node", "cut_node"):
            hit = {n for _, _, n in self.pending}
            free = [n for n in self.nodes if n not in hit]
            if len(free) <= 1:  # one node stays up
                return False
            node = self.rng.choice(free)
            sh(str(NODES), "kill" if kind == "kill_node" else "cut", node, env=self.env)
            self.pending.append(
                (
                    time.monotonic() + self.rng.uniform(*HEAL_AFTER_S),
                    "revive" if kind == "kill_node" else "heal",
                    node,
                )
            )
            self.note(kind, node)
        elif kind == "kill_driver":
            pid = self._driver()
            if pid is None:
                return False
            os.kill(pid, signal.SIGKILL)
            self.note(kind, f"pid {pid}")
            time.sleep(2)
            self.submit()  # as a user would after a crash
        else:  # cancel, then submit again
            done = self.sweep("cancel", str(self.out))
            self.note(kind, "sweep", f"rc {done.returncode}")
            self.submit()
        return True

    def undo_due(self, every: bool = False) -> None:
        now = time.monotonic()
        for entry in [p for p in self.pending if every or p[0] <= now]:
            sh(str(NODES), entry[1], entry[2], env=self.env)
            self.pending.remove(entry)
            self.note(entry[1], entry[2])

    def chaos(self) -> None:
        end = self.t0 + self.args.minutes * 60
        while time.monotonic() < end:
            self.undo_due()
            if self._driver() is None and not self.status().get("finished"):
                self.submit()
            kind = self.rng.choice(KINDS)
            if not self.inject(kind):
                self.note("skipped", kind, "nothing to hit")
            time.sleep(self.args.floor + self.rng.uniform(0, self.args.floor))
        self.undo_due(every=True)

    # -- the end and the check -----------------------------------------------------------
    def finish(self) -> dict[str, Any]:
        """Wait for the sweep's end, starting a driver again whenever none runs (the last fault
        may have killed it), with ``--only failed`` once nothing is pending."""
        left = self.args.points - self.status().get("counts", {}).get("done", 0)
        per_point = self.args.steps * self.args.step_s
        deadline = time.monotonic() + max(END_WAIT_S, 3 * left * per_point / SLOTS)
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.status()
            if last.get("finished"):
                break
            if self._driver() is None:
                left = last.get("counts", {})
                only = ["--only", "failed"] if not left.get("pending") and not left.get("running") else []
                self.submit(*only)
            time.sleep(5)
        self.wall_s = time.monotonic() - self.t0
        return last

    def check(self) -> list[str]:
        import numpy as np
        import xarray as xr

        from sweep.store import lost_points

        problems = []
        ds = xr.open_zarr(self.out)  # plain xarray
        status = np.array([str(v) for v in ds["status"].values])
        if not (status == "done").all():
            problems.append(f"not every point is done: {dict(Counter(status))}")
        ids = [str(v) for v in ds["point_id"].values]
        if len(set(ids)) != len(ids):
            problems.append("two points share an id")
        values = ds["value"].values if "value" in ds else np.full(len(ids), np.nan)
        clean = np.array([clean_value(x, self.args.steps, self.args.seed) for x in range(self.args.points)])
        differ = np.flatnonzero((values != clean) & (status == "done"))
        if len(differ):
            problems.append(
                f"{len(differ)} done values differ from the clean run's: points {differ[:10].tolist()}"
            )
        if lost_points(self.out).any():
            problems.append("the store's integrity check finds damaged points")
        self.starts, miscounts = counted(ds, self.dir / "marks", self.faults)
        problems += miscounts
        self.stored = ds
        return problems

    def leftovers(self) -> list[str]:
        time.sleep(2)
        left = [f"child {p.pid}" for p in self._children()] + [f"worker {p.pid}" for p in self._workers()]
        jobs = sh("squeue", "-h", "-o", "%i", env=self.env).stdout.split()
        left += [f"batch job {j}" for j in jobs]
        return left + self._held_leases()

    def _held_leases(self) -> list[str]:
        import fcntl

        held = []
        for lock in (self.dir / "leases").rglob("*.lock"):
            with open(lock, "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(f"lease {lock.name} held")
        return held

    def clean_local_run(self, points: int = 4) -> list[str]:
        """The first ``points`` points run by a clean local sweep: their values must be the
        recurrence's (the oracle the soak's check uses)."""
        import yaml

        recipe = yaml.safe_load(self.recipe.read_text())
        recipe["params"]["grid"]["x"] = list(range(points))
        recipe["params"]["fixed"] |= {"fail_rate": 0.0, "oom_every": 0, "marks": ""}
        recipe["cluster"] = {"dashboard": "127.0.0.1:0"}
        recipe["output"] = str(self.dir / "clean.zarr")
        path = self.dir / "clean.yaml"
        path.write_text(yaml.safe_dump(recipe))
        env = {k: v for k, v in self.env.items() if k != "SLURM_CONF"}
        done = sh(
            sys.executable, "-m", "sweep.cli", "submit", str(path), "--no-progress", env=env, timeout=600
        )
        if done.returncode != 0:
            return [f"the clean local run failed: {done.stderr[-300:]}"]
        import xarray as xr

        got = xr.open_zarr(self.dir / "clean.zarr")["value"].values
        want = [clean_value(x, self.args.steps, self.args.seed) for x in range(points)]
        return (
            []
            if list(got) == want
            else [f"the clean local run's values {list(got)} are not the oracle's {want}"]
        )

    def stop(self) -> None:
        sh("scancel", "--partition=debug", env=self.env)
        if self._driver() is not None:
            self.sweep("cancel", str(self.out))
        sh(str(NODES), "stop", env=self.env, timeout=300)

    def report(self, problems: list[str]) -> dict[str, Any]:
        import numpy as np

        ds = self.stored
        attempts = ds["attempts"].values.astype(int)
        requeued = ds["requeued"].values.astype(int) if "requeued" in ds else np.zeros_like(attempts)
        per_point = self.args.steps * self.args.step_s
        ideal = self.args.points * per_point / SLOTS
        injected = Counter(f["kind"] for f in self.faults if f["kind"] in KINDS)
        return {
            "command": " ".join(sys.argv),
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "points": self.args.points,
            "faults": dict(sorted(injected.items())),
            "faults_total": sum(injected.values()),
            "points_done": sum(str(v) == "done" for v in ds["status"].values),
            "points_recovered": int(((attempts > 1) | (requeued > 0)).sum()),
            "attempts_lost": int((attempts - 1).sum() + requeued.sum()),
            "core_s_lost_at_most": round(float((attempts - 1).sum() + requeued.sum()) * per_point, 1),
            "starts_counted": self.starts,
            "wall_s": round(self.wall_s, 1),
            "wall_over_ideal": round(self.wall_s / ideal, 2),
            "problems": problems,
            "log": self.faults,
        }


def main() -> int:
    q = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    q.add_argument("--minutes", type=float, default=3.0)
    q.add_argument("--seed", type=int, default=7)
    q.add_argument("--points", type=int, default=0, help="default: as many as fill --minutes")
    q.add_argument("--steps", type=int, default=6)
    q.add_argument("--step-s", type=float, default=1.5, help="a point takes --steps x this")
    q.add_argument("--floor", type=float, default=8.0, help="least seconds between two faults")
    q.add_argument("--fail-rate", type=float, default=0.1)
    q.add_argument("--oom-every", type=int, default=40)
    q.add_argument("--retries", type=int, default=6)
    q.add_argument("--save", action="store_true", help="keep the report in benchmarks/results.json")
    args = q.parse_args()
    if not args.points:  # the faults take about half the slots' time (measured: 30 min, seed 7)
        args.points = max(24, int(args.minutes * 60 * SLOTS * FAULTED_SHARE / (args.steps * args.step_s)))
    soak = Soak(args)
    problems: list[str] = []
    soak.stored = None
    try:
        soak.start()
        soak.submit()
        soak.chaos()
        last = soak.finish()
        problems = soak.check() + soak.clean_local_run()
        if not last.get("finished"):
            problems.append(
                f"the sweep did not finish in its wait after the last fault: {last.get('counts')}"
            )
    finally:
        soak.stop()
    problems += soak.leftovers()
    result = soak.report(problems)
    print(json.dumps({k: v for k, v in result.items() if k != "log"}, indent=2))
    if args.save:
        path = ROOT / "benchmarks" / "results.json"
        saved = json.loads(path.read_text())
        saved.setdefault("soak", []).append({**result, "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        path.write_text(json.dumps(saved, indent=2))  # as benchmarks/run.py writes it
    if not problems:
        shutil.rmtree(soak.dir, ignore_errors=True)
    else:
        print(f"soak: kept {soak.dir} for a look", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
