"""``sweep doctor``: what this node allows, what JAX children really hold, the safe packing.

Measures, on this node: the CPUs and this process's affinity, the cgroup's cpuset, CPU quota
and pids limit when there is one, ``ulimit -u`` and the threads the user holds now, and the
peak threads of an uncapped JAX child and of capped children with k = 1 and 2 cores (real
children running :func:`sweep.cli.probe.jax_grad`), and how long the capped one-core child's
``import jax`` took. From these: the threads an uncapped child
would hold on a node of this size (docs/threads.md), and how many concurrent k-core jobs fit
under ``ulimit -u`` capped and uncapped.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

import psutil

from sweep.capacity.memory import shown
from sweep.model import limits
from sweep.wire.childconfig import ChildConfig
from sweep.wire.jobref import JobRef
from sweep.wire.placement import thread_budget
from sweep.wire.protocol import PointRecord
from sweep.wire.task import Limits
from sweep.worker import leases, memory, pinning
from sweep.worker.child import Child

CGROUP = Path("/sys/fs/cgroup")
# ml_dtypes 0.6.0 loads in about 0.01 s and 0.7.0 in 0.5 s (docs/threads.md, "A child's start")
SLOW_ML_DTYPES_S = 0.25


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_limits() -> dict[str, str | None]:
    """cpuset, CPU quota and pids limit of this process's cgroup (v2, else v1), if visible."""
    v2 = (CGROUP / "cgroup.controllers").exists()
    if v2:
        rel = (_read(Path("/proc/self/cgroup")) or "0::/").split("::", 1)[-1]
        base = CGROUP / rel.lstrip("/")
        return {
            "version": "2",
            "cpuset": _read(base / "cpuset.cpus.effective") or _read(CGROUP / "cpuset.cpus.effective"),
            "cpu_max": _read(base / "cpu.max"),
            "pids_max": _read(base / "pids.max"),
        }
    return {
        "version": "1",
        "cpuset": _read(CGROUP / "cpuset" / "cpuset.cpus"),
        "cpu_max": _read(CGROUP / "cpu" / "cpu.cfs_quota_us"),
        "pids_max": _read(CGROUP / "pids" / "pids.max"),
    }


def _probe(cores: tuple[int, ...], cap: bool) -> PointRecord:
    """What a fresh child on ``cores`` returns running the JAX probe."""
    child = Child(cores, ChildConfig(cap=cap, compile_cache=None))
    try:
        outcome = child.run(JobRef("module", "sweep.cli.probe", "jax_grad"), {}, limits=Limits(timeout=300))
    finally:
        child.kill()
    if outcome.status != "done":
        raise RuntimeError(f"the JAX probe failed in a child: {outcome.error}")
    return outcome


def child_imports(probe: PointRecord) -> dict[str, Any]:
    """A fresh capped one-core child's ``import jax``, from its probe: seconds in all and
    loading ml_dtypes, and ml_dtypes' version (the child runs this interpreter's packages).
    Every child pays it once, before its first job."""
    seconds = {name: float(probe.outputs[name].values) for name in ("import_jax_s", "ml_dtypes_s")}
    return {**seconds, "ml_dtypes": importlib.metadata.version("ml_dtypes")}


def diagnose() -> dict[str, Any]:
    """Everything ``sweep doctor`` reports, as a JSON-able dict."""
    affinity = sorted(os.sched_getaffinity(0))
    a = len(affinity)
    soft, hard = limits.nproc_limit()
    held = limits.user_threads()
    probes = {"uncapped": _probe(tuple(affinity), cap=False)}
    for k in (1, 2):
        if k <= a:
            probes[f"capped_k{k}"] = _probe(tuple(affinity[:k]), cap=True)
    measured = {name: probe.peak_threads for name, probe in probes.items()}
    report: dict[str, Any] = {
        "cpus_online": os.cpu_count(),
        "affinity": affinity,
        "cgroup": cgroup_limits(),
        "ulimit_u": {"soft": soft, "hard": hard},
        "user_threads_now": held,
        "is_root": os.geteuid() == 0,
        "measured_threads": measured,
        "child_imports": child_imports(probes["capped_k1"]),
        "predicted_uncapped_threads": limits.uncapped_threads(a),
        "budget": {f"k{k}": thread_budget(k) for k in (1, 2)},
        "core_leases": {"folder": str(leases.lease_dir()), "held": leases.holders()},
        "memory": _memory(),
        "mpi": _mpi(),
        "affinity_enforced": pinning.enforced(),
        "gpus": _devices("gpus", (1, 0.5)),
        "tpus": _devices("tpus", (1,)),
    }
    room = None if soft is None else soft - held
    dask = limits.DASK_THREADS + a
    fits = {}
    for name, per_job in (
        ("capped_k1", max(measured["capped_k1"], thread_budget(1))),
        ("uncapped_k1", max(measured["uncapped"], limits.uncapped_threads(a))),
    ):
        fits[name] = None if room is None else max(0, (room - dask) // per_job)
    report["jobs_that_fit_under_ulimit"] = fits
    report["verdict"] = _verdict(report, a, room, fits)
    return report


def _devices(name: str, amounts: tuple[float, ...]) -> dict[str, Any]:
    """The devices of kind ``name`` a local worker would offer, and what points asking each of
    ``amounts`` of them pack (:func:`sweep.worker.devices.plan_text`)."""
    from dataclasses import asdict

    from sweep.worker.devices import plan_text
    from sweep.worker.kinds import KINDS

    kind = KINDS[name]
    devices = kind.find()
    return {
        "devices": [asdict(d) for d in devices],
        "plan": {f"{name}={g:g}": plan_text(kind, devices, g) for g in amounts},
    }


WHERE_FOUND = {"gpus": "nvidia-smi lists none", "tpus": "no /dev/accel* or /dev/vfio chips"}


def _devices_text(name: str, found: dict[str, Any]) -> str:
    devices = found["devices"]
    if not devices:
        return f"none ({WHERE_FOUND[name]}; resources.{name} can't be asked here)"
    listed = "; ".join(
        f"{d['index']}: {d['name']}" + (f" {shown(d['memory'])}" if d["memory"] else "") for d in devices
    )
    return f"{listed}; " + ", ".join(found["plan"].values())


def _mpi() -> dict[str, Any]:
    """The MPI launcher ``resources.ranks`` would use (``mpirun`` on PATH), or why none."""
    from sweep.worker import mpi

    try:
        path = mpi.launcher()[0]
    except mpi.MpiMissing as exc:
        return {"launcher": None, "why": str(exc)}
    return {"launcher": path, "version": mpi.version(path)}


def _memory() -> dict[str, Any]:
    """The node's memory, what is available now, and what the local worker would offer."""
    vm = psutil.virtual_memory()
    return {"total": int(vm.total), "available": int(vm.available), "local_offer": memory.local_offer()}


def _verdict(report: dict, a: int, room: int | None, fits: dict) -> str:
    capped = report["measured_threads"]["capped_k1"]
    problems, notes = [], []
    if capped > thread_budget(1):
        problems.append(f"a capped k=1 child held {capped} threads, over the budget of {thread_budget(1)}")
    if report["is_root"]:
        notes.append("running as root: ulimit -u is not enforced for root")
    elif room is None:
        notes.append("ulimit -u is unlimited")
    elif fits["capped_k1"] < a:
        problems.append(
            f"only {fits['capped_k1']} capped one-core jobs fit under ulimit -u ({room} threads left); "
            "raise the limit or pack fewer jobs"
        )
    elif fits["uncapped_k1"] < a:
        notes.append(
            f"capping is required here: {a} uncapped jobs would not fit under ulimit -u "
            f"({fits['uncapped_k1']} would), {fits['capped_k1']} capped ones do"
        )
    imports = report["child_imports"]
    if imports["ml_dtypes_s"] > SLOW_ML_DTYPES_S:
        notes.append(
            f"every child spends {imports['ml_dtypes_s']:.2f} s of its import jax loading ml_dtypes "
            f"{imports['ml_dtypes']}; 0.7.0 is that slow and 0.6.0 is not (docs/threads.md): "
            "pip install 'ml_dtypes<0.7'"
        )
    if problems:
        return "WARNING: " + "; ".join(problems + notes)
    return "OK: " + "; ".join(notes or [f"{a} capped one-core jobs fit"])


def render(report: dict[str, Any]) -> str:
    """The report as aligned text lines."""
    m = report["measured_threads"]
    cg = report["cgroup"]
    u = report["ulimit_u"]
    fits = report["jobs_that_fit_under_ulimit"]
    rows = [
        ("CPUs online", report["cpus_online"]),
        ("this process's affinity", f"{len(report['affinity'])} CPUs {report['affinity']}"),
        (f"cgroup v{cg['version']} cpuset", cg["cpuset"] or "-"),
        ("cgroup CPU quota", cg["cpu_max"] or "-"),
        (
            "memory (total / available / local worker offers)",
            " / ".join(shown(report["memory"][k]) for k in ("total", "available", "local_offer")),
        ),
        ("cgroup pids limit", cg["pids_max"] or "-"),
        ("MPI for resources.ranks", _mpi_text(report["mpi"])),
        ("CPU pinning", pinning.describe(report["affinity_enforced"])),
        ("GPUs for resources.gpus", _devices_text("gpus", report["gpus"])),
        ("TPU chips for resources.tpus", _devices_text("tpus", report["tpus"])),
        ("ulimit -u (soft / hard)", f"{u['soft'] or 'unlimited'} / {u['hard'] or 'unlimited'}"),
        ("threads you hold now", report["user_threads_now"]),
        ("JAX child, uncapped (measured)", m["uncapped"]),
        *((f"JAX child, capped k={k} (measured)", m[f"capped_k{k}"]) for k in (1, 2) if f"capped_k{k}" in m),
        ("import jax in a capped child (measured)", _imports_text(report["child_imports"])),
        ("uncapped child on this node (predicted)", report["predicted_uncapped_threads"]),
        (
            "one-core jobs under ulimit -u, capped",
            "no limit" if fits["capped_k1"] is None else fits["capped_k1"],
        ),
        (
            "one-core jobs under ulimit -u, uncapped",
            "no limit" if fits["uncapped_k1"] is None else fits["uncapped_k1"],
        ),
        (
            f"core leases held ({report['core_leases']['folder']})",
            _leases_text(report["core_leases"]["held"]),
        ),
        ("verdict", report["verdict"]),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _imports_text(imports: dict[str, Any]) -> str:
    loading = f"ml_dtypes {imports['ml_dtypes']} {imports['ml_dtypes_s']:.2f} s"
    return f"{imports['import_jax_s']:.2f} s, of it {loading}"


def _mpi_text(found: dict[str, Any]) -> str:
    if found["launcher"] is None:
        return f"none: {found['why']}"
    return f"{found['launcher']} ({found['version']})"


def _leases_text(held: dict[int, str]) -> str:
    if not held:
        return "none"
    return "; ".join(f"CPU {cpu}: {who}" for cpu, who in sorted(held.items()))


def main(as_json: bool = False) -> int:
    report = diagnose()
    print(json.dumps(report, indent=2) if as_json else render(report))
    return 0
