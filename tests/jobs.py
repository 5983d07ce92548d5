"""Job functions the tests run in real capped children (referenced as tests/jobs.py:NAME)."""

import os
import socket
import sys
import time
from pathlib import Path


def jax_grad(n: int = 64, seed: int = 0) -> dict:
    """A jitted gradient through a linear solve; reports whether jax was already imported."""
    warm = "jax" in sys.modules
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(seed), (n, n)) + n * jnp.eye(n)
    g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.linalg.solve(a, x) ** 2)))(jnp.ones(n))
    return {"norm": float(jnp.linalg.norm(g)), "jax_was_loaded": float(warm)}


def affinity(seconds: float = 0.0, x: int = 0) -> dict:
    """Sleeps, then reports the CPUs this process may run on and the capping variables."""
    time.sleep(seconds)
    cpus = sorted(os.sched_getaffinity(0))
    return {
        "ncpus": len(cpus),
        "cpu_sum": sum(cpus),
        "nproc_env": float(os.environ.get("NPROC", "nan")),
        "blas_env": float(os.environ.get("OPENBLAS_NUM_THREADS", "nan")),
    }


def noop(x: int = 0) -> dict:
    return {"x": float(x)}


def square(x: float, offset: float = 0.0, seconds: float = 0.0) -> dict:
    """Deterministic output with a vector and a named-dim output, optionally slow."""
    import numpy as np
    import xarray as xr

    time.sleep(seconds)
    return {
        "y": x * x + offset,
        "vec": np.arange(3) * x,
        "curve": xr.DataArray(np.linspace(0, 1, 4) * x, dims=["t"], coords={"t": [0, 1, 2, 3]}),
    }


def fail_if(x: int, bad: int = 1) -> dict:
    if x == bad:
        raise ValueError(f"x={x} is bad")
    return {"value": float(x)}


def crash(x: int, how: str = "ok") -> dict:
    """Dies the way it is told to when x == 1: abort, segv (a real NULL read) or exit."""
    import ctypes
    import sys

    if x == 1:
        print(f"crashing by {how}", file=sys.stderr, flush=True)
        if how == "abort":
            os.abort()
        if how == "segv":
            ctypes.string_at(0)
        if how == "exit":
            os._exit(3)
        if how == "raise":
            raise RuntimeError("crashed by raising")
    return {"value": float(x)}


def hog(x: int, limit_mb: int = 0) -> dict:
    """When x == 1, allocates 50 MiB at a time until killed; otherwise returns at once."""
    blocks = []
    while x == 1:
        blocks.append(bytearray(50 * 2**20))
        time.sleep(0.02)
    return {"value": float(x)}


def sleepy(x: int, seconds: float = 60.0) -> dict:
    if x == 1:
        time.sleep(seconds)
    return {"value": float(x)}


def many_threads(x: int, n: int = 40) -> dict:
    """Holds n extra Python threads for a second."""
    import threading

    threads = [threading.Thread(target=time.sleep, args=(1.0,)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"value": float(x)}


def bad_output(x: int) -> dict:
    return {"value": float(x)} if x != 1 else {"value": {"nested": "dict"}}


def marked(x: int, folder: str, seconds: float = 2.0) -> dict:
    """Leaves a marker file per start (name: x and child pid), then sleeps."""
    with open(os.path.join(folder, f"start-{x}-{os.getpid()}"), "w"):
        pass
    time.sleep(seconds)
    return {"value": float(x)}


def modules_loaded(names: str = "numpy,jax") -> dict:
    """Which of the named modules this process has imported (1.0 = yes), as plain floats."""
    return {n: float(n in sys.modules) for n in names.split(",")}


def jax_or_light(x: int, kind: str) -> dict:
    """A JAX gradient for kind == "jax"; pure Python (no numpy, no threads) otherwise."""
    if kind == "jax":
        return {"value": jax_grad(16, seed=x)["norm"]}
    return {"value": float(x)}


def reporting(x: float, steps: int = 5, seconds: float = 0.3, hang: bool = False, y: int = 0) -> dict:
    """Reports an objective every step; with hang=True never returns after its reports."""
    import sweep

    value = 0.0
    for i in range(steps):
        value = x * (i + 1)
        sweep.report(step=i, objective=value, other=-value)
        time.sleep(seconds)
    while hang:
        time.sleep(1)
    return {"objective": value}


def rendezvous(x: int, folder: str, n: int = 2, seconds: float = 1.0, wait: float = 120.0) -> dict:
    """Leaves a marker ``start-<x>-<child pid>-<worker pid>``, waits until ``n`` markers exist
    (so ``n`` points run at once, on different workers when each has one core), then sleeps."""
    with open(os.path.join(folder, f"start-{x}-{os.getpid()}-{os.getppid()}"), "w"):
        pass
    deadline = time.monotonic() + wait
    while len(os.listdir(folder)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(seconds)
    return {"value": float(x)}


def drift(x: int, how: str) -> dict:
    """x == 1 returns one schema; other points drift from it the way ``how`` says."""
    import numpy as np
    import xarray as xr

    if how == "complex":
        return {"v": np.ones(2) if x == 1 else np.ones(2) * (1 + 2j)}
    if how == "overflow":
        return {"v": np.ones(2, dtype=np.float32) if x == 1 else np.full(2, 1e300)}
    if how == "coords":
        t = [0.0, 1.0, 2.0] if x == 1 else [0.0, 10.0, 20.0]
        return {"v": xr.DataArray(np.ones(3) * x, dims=["t"], coords={"t": t})}
    return {"v": np.ones(2) * x}


def typed(x, **fixed) -> dict:
    """Returns 1.0 per parameter that arrived as a float (int for ints), else fails."""
    bad = {k: type(v).__name__ for k, v in {"x": x, **fixed}.items() if not isinstance(v, int | float)}
    if bad:
        raise TypeError(f"parameters arrived as {bad}")
    return {"value": float(x)}


def jax_devices(x: int = 0) -> dict:
    """How many JAX devices this process has, after one jitted op."""
    import jax
    import jax.numpy as jnp

    jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()
    return {"devices": float(jax.device_count())}


_KEPT: list = []


def leave_threads(n: int = 20) -> dict:
    """Starts ``n`` threads that outlive the job (as a library's pool would) and returns at once."""
    import threading

    event = threading.Event()
    for _ in range(n):
        t = threading.Thread(target=event.wait, daemon=True)
        t.start()
        _KEPT.append(t)
    return {"value": 1.0}


def incompressible(x: int, size: int = 50_000) -> dict:
    """``size`` random float64s (they don't compress), seeded by x."""
    import numpy as np

    return {"noise": np.random.default_rng(x).random(size)}


def slow_incompressible(x: int, size: int = 10) -> dict:
    time.sleep(0.5)
    return incompressible(x, size)


def busy(x: int, seconds: float = 2.0) -> dict:
    """Spins the CPU for ``seconds`` of wall time."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return {"spins": float(n)}


def scaled(x: float, scale: float = 1.0) -> dict:
    return {"value": float(x * scale)}


def x64_dtype(enable: bool = False) -> dict:
    """With ``enable``, turns on JAX's 64-bit mode; returns 1.0 when jnp.ones is 64-bit."""
    import jax
    import jax.numpy as jnp

    if enable:
        jax.config.update("jax_enable_x64", True)
    return {"x64": float(jnp.ones(1).dtype.itemsize == 8), "pid": float(os.getpid())}


def meddle(x: int = 0) -> dict:
    """Changes what a job may change and its child restores; reports what it found first."""
    import signal

    found = {
        "cwd_is_tmp": float(os.getcwd() == "/tmp"),
        "env_set": float("SWEEP_MEDDLED" in os.environ),
        "handler_set": float(signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL),
        "pid": float(os.getpid()),
    }
    print("printing works", flush=True)
    os.chdir("/tmp")
    os.environ["SWEEP_MEDDLED"] = "1"
    signal.signal(signal.SIGUSR1, lambda *a: None)
    sys.stdout.close()
    return found


def callback_update(steps: int = 80, n: int = 512) -> dict:
    """An optimisation loop whose update is a host callback reading JAX arrays (as
    invrs-opt's L-BFGS-B does): it deadlocks when XLA's client has one thread."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import flatten_util

    big = jnp.ones((n, n)) / n

    def heavy(p):
        y = p
        for _ in range(8):
            y = jnp.tanh(big @ y)
        return jnp.sum(y**2)

    value_and_grad = jax.jit(jax.value_and_grad(heavy))

    def update(g, v, s):
        return np.asarray(g) * 0.01 + np.asarray(s), np.asarray(s) + np.asarray(v)

    p, s = jnp.ones((n, n)) * 0.1, jnp.zeros((n * n,))
    for _ in range(steps):
        v, g = value_and_grad(p)
        c, cg = jax.value_and_grad(lambda q: jnp.sum(q**2))(p)
        flat, unflatten = flatten_util.ravel_pytree(g + cg)
        shapes = (jax.ShapeDtypeStruct(flat.shape, flat.dtype), jax.ShapeDtypeStruct(s.shape, s.dtype))
        u, s = jax.pure_callback(update, shapes, flat, v + c, s, vmap_method="sequential")
        p = p - unflatten(u)
    return {"loss": float(heavy(p))}


def leave_daemon(pidfile: str) -> dict:
    """Starts a process in its own session that outlives the job unless it is ended."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pidfile, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(pid, 0)
    for _ in range(100):
        if os.path.exists(pidfile) and os.path.getsize(pidfile):
            break
        time.sleep(0.05)
    return {"value": 1.0}


def failing_import(folder: str) -> dict:
    """Imports a package (made in ``folder``) that fails after loading one of its submodules;
    a second call in the same process reuses that submodule and fails differently."""
    sys.path.insert(0, folder)
    try:
        import halfpkg  # noqa: F401
    finally:
        sys.path.remove(folder)
    return {"value": 1.0}


def unflushed(x: int) -> dict:
    """Prints as a plain script does: no flush, to stdout and stderr."""
    print(f"plain print from {x}")
    print(f"plain warning from {x}", file=sys.stderr)
    return {"value": float(x)}


def chatty(x: int, fail: int = -1, y: str = "", die: int = -1) -> dict:
    """Prints to stdout and stderr, then fails when x == fail, or ends its process when x == die."""
    print(f"hello from {x}", flush=True)
    print(f"warning from {x}", file=sys.stderr, flush=True)
    if x == fail:
        raise ValueError(f"x={x} fails")
    if x == die:
        os._exit(3)
    return {"value": float(x)}


def ticker(x: int, n: int = 10, every: float = 0.3, folder: str = "", gate: str = "") -> dict:
    """Prints ``tick i`` n times, ``every`` seconds apart; with ``folder``, its first attempt
    fails after the ticks (a marker file there says it ran once); with ``gate``, only once the
    file ``gate`` exists (waiting for it up to 120 s)."""
    for i in range(n):
        print(f"x={x} tick {i} {time.time():.3f}", flush=True)
        time.sleep(every)
    if folder:
        mark = Path(folder) / f"ticker-{x}"
        if not mark.exists():
            mark.touch()
            deadline = time.monotonic() + 120
            while gate and not Path(gate).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if gate:
                print(f"x={x} gate {'open' if Path(gate).exists() else 'shut after 120 s'}", flush=True)
            raise RuntimeError("the first attempt fails")
    return {"value": float(x)}


def descend(
    lr: float, steps: int = 30, every: float = 0.05, catch: bool = False, nan_above: float = 99.0
) -> dict:
    """A toy optimisation: loss = (1 - lr)^2 + 1/(step + 1), reported every step; with ``catch``
    it catches sweep.Pruned, prints that it cleans up, and returns. It returns a NaN loss for
    ``lr`` above ``nan_above`` (it diverged)."""
    import sweep

    loss = float("inf")
    try:
        for step in range(steps):
            loss = (1.0 - lr) ** 2 + 1.0 / (step + 1)
            sweep.report(step=step, loss=loss)
            time.sleep(every)
    except sweep.Pruned:
        if not catch:
            raise
        print("pruned: cleaning up", flush=True)
    return {"loss": float("nan") if lr > nan_above else loss}


def nan_out(x: int, size: int = 0, skip: int = -1) -> dict:
    """``loss`` is NaN (a diverged optimisation); with ``size``, a ``curve`` of ``size`` NaNs that
    point ``skip`` doesn't return at all."""
    import numpy as np

    out = {"loss": float("nan")}
    if size and x != skip:
        out["curve"] = np.full(size, np.nan)
    return out


def schema_race(x: int) -> dict:
    """x=0 returns ``b`` only; x=1 (after 1 s) a new ``a`` of 3 and a complex ``b`` that can't be
    stored (so the point fails); x=2 (after 2 s) ``a`` of 5 and a real ``b``."""
    import numpy as np

    if x == 0:
        return {"b": 1.0}
    time.sleep(x)
    if x == 1:
        return {"a": np.arange(3), "b": 1j}
    return {"a": np.arange(5), "b": 2.0}


def design_of_size(n: int) -> dict:
    """A square design whose size is the swept parameter (as a design-region sweep makes)."""
    import numpy as np

    return {"design": np.full((n, n), float(n)), "loss": float(n)}


def stepper(
    x: int = 0, steps: int = 8, seconds: float = 0.2, folder: str = "", die_at: int = -1, gate: str = ""
) -> dict:
    """A deterministic optimisation of ``steps`` steps that checkpoints after each one and
    restores at its start. The first attempt to reach step ``die_at`` SIGKILLs its own
    process there (a marker in ``folder`` tells later attempts); ``start`` is the step it
    went on from. With ``gate`` (a folder), it returns only once ``gate/open`` or
    ``gate/<its pid>`` exists; the steps it runs are marked in ``folder`` as ``step-<x>`` (the
    last step) and ``ran-<x>-<host>-<pid>``, its return as ``ended-<x>-<pid>``."""
    import signal

    import sweep

    state = sweep.restore() or {"step": 0, "value": float(x)}
    start = state["step"]
    value = state["value"]
    for i in range(start, steps):
        if i == die_at and folder and not os.path.exists(f"{folder}/died-{x}"):
            Path(folder, f"died-{x}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        value = value * 0.5 + i
        sweep.report(step=i, value=value)
        sweep.checkpoint({"step": i + 1, "value": value})
        if folder:
            Path(folder, f"step-{x}").write_text(str(i + 1))
            Path(folder, f"ran-{x}-{socket.gethostname()}-{os.getpid()}").write_text(str(i + 1))
        time.sleep(seconds)
    while gate and not (os.path.exists(f"{gate}/open") or os.path.exists(f"{gate}/{os.getpid()}")):
        time.sleep(0.1)
    if folder:
        Path(folder, f"ended-{x}-{os.getpid()}").touch()
    return {"value": value, "start": float(start)}


def allocate(x: int = 0, mb: int = 400, hold: float = 1.0, folder: str = "") -> dict:
    """Holds ``mb`` MiB (touched) for ``hold`` seconds; leaves a marker per attempt in ``folder``."""
    if folder:
        Path(folder, f"attempt-{x}-{os.getpid()}").touch()
    block = bytearray(mb << 20)
    block[::4096] = b"x" * len(block[::4096])
    time.sleep(hold)
    return {"mb": float(len(block) >> 20)}


def mpi_ranks(
    x: int = 1, seconds: float = 0.0, die_rank: int = -1, fail_rank: int = -1, hang_rank: int = -1
) -> dict:
    """An mpi4py job: every rank adds x * (rank + 1) (rank 0's allreduce is stored), gathers
    each rank's affinity and thread count; ``die_rank`` SIGKILLs itself mid-job,
    ``fail_rank`` raises and ``hang_rank`` sleeps for ever (the others wait in the allreduce),
    after ``seconds``."""
    import signal

    from mpi4py import MPI

    import sweep

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    assert rank == sweep.rank() and comm.Get_size() == sweep.ranks()
    sweep.report(step=0, rank_seen=float(rank))
    time.sleep(seconds)
    if rank == die_rank:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == fail_rank:
        raise RuntimeError(f"rank {rank} gives up")
    while rank == hang_rank:
        time.sleep(1)
    total = comm.allreduce(x * (rank + 1))
    cores = comm.gather(sorted(os.sched_getaffinity(0)), root=0)
    threads = comm.gather(len(os.listdir("/proc/self/task")), root=0)
    print(f"rank {rank} of {comm.Get_size()} on cores {sorted(os.sched_getaffinity(0))}", flush=True)
    for part in ("in ", "parts ", "from ", f"rank {rank}\n"):  # one line, four flushed writes
        print(part, end="", flush=True)
        time.sleep(0.05)  # each write reaches the launcher on its own
    if rank:
        return {"total": -1.0}
    most = max(threads)
    return {"total": float(total), "rank_cores": cores, "rank_max_threads": most, "rank0_pid": os.getpid()}


def gpu_env(x: int = 0, seconds: float = 0.0) -> dict:
    """What a GPU point's child was told of its devices, read from inside the job."""
    time.sleep(seconds)
    return {
        "device": float(os.environ.get("CUDA_VISIBLE_DEVICES", "nan") or "nan"),
        "hip_device": float(os.environ.get("HIP_VISIBLE_DEVICES", "nan") or "nan"),
        "fraction": float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "nan")),
        "on_cpu": float(os.environ.get("JAX_PLATFORMS") == "cpu"),
    }


def jax_on_device(x: int = 0, n: int = 4096, seconds: float = 3.0) -> dict:
    """Matrix products on JAX's default device for ``seconds``; whether it was a GPU."""
    import jax

    a = jax.random.normal(jax.random.PRNGKey(x), (n, n))
    end = time.monotonic() + seconds
    total = 0.0
    while time.monotonic() < end:
        total += float((a @ a).sum().block_until_ready())
    return {"total": total, "platform": float(jax.devices()[0].platform == "gpu")}


def core_scaled(x: int = 0, seconds: float = 0.4, power: float = 0.0) -> dict:
    """Sleeps ``seconds / k**power`` on its k cores: power 0 gains nothing from more cores,
    power 2 more than pays for them (a ``threads: auto`` calibration's two clear cases)."""
    k = len(os.sched_getaffinity(0))
    time.sleep(seconds / k**power)
    return {"k": float(k)}


def nonfinite_reports(x: int, steps: int = 40, seconds: float = 0.25) -> dict:
    """Reports a finite objective, then NaN (x == 0) or +inf (x == 1) every other step."""
    import sweep

    for i in range(steps):
        bad = float("nan") if x == 0 else float("inf")
        sweep.report(step=i, objective=bad if i % 2 else float(i), other=bad)
        time.sleep(seconds)
    return {"objective": float(steps)}


def many_outputs(x: int, n: int = 100) -> dict:
    """``n`` scalar outputs (one per frequency or mode, say)."""
    return {f"out_{i:04d}": float(x * i) for i in range(n)}


def allocate_logged(x: int = 0, mb: int = 400, hold: float = 1.0, folder: str = "") -> dict:
    """As :func:`allocate`, writing ``<x>-<pid>.start`` as it starts and ``.end`` once it held
    the memory (the time in each), so a test can tell which attempts ran at once."""
    name = Path(folder, f"{x}-{os.getpid()}")
    name.with_suffix(".start").write_text(repr(time.time()))
    block = bytearray(mb << 20)
    block[::4096] = b"x" * len(block[::4096])
    time.sleep(hold)
    name.with_suffix(".end").write_text(repr(time.time()))
    return {"mb": float(len(block) >> 20)}


def tpu_env(x: int = 0, seconds: float = 0.0) -> dict:
    """What a TPU point's child was told of its chips, read from inside the job; its pid."""
    time.sleep(seconds)
    return {
        "chip": float(os.environ.get("TPU_VISIBLE_CHIPS", "nan") or "nan"),
        "port": float(os.environ.get("TPU_PROCESS_PORT", "nan") or "nan"),
        "on_tpu": float(os.environ.get("JAX_PLATFORMS") == "tpu"),
        "child_pid": float(os.getpid()),
    }


def process_state(change: bool = True, leave_thread: bool = False, leave_file: str = "") -> dict:
    """Reports every piece of process state a warm child restores, then (with ``change``)
    changes each of them; ``leave_thread`` and ``leave_file`` leave what can't be undone."""
    import gc
    import resource
    import signal
    import threading
    import warnings

    cpus = sorted(os.sched_getaffinity(0))
    umask = os.umask(0o022)
    os.umask(umask)
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += [fd] if os.readlink(f"/proc/self/fd/{fd}").startswith("/tmp") else []
        except OSError:  # the listing's own
            continue
    found = {
        "umask": float(umask),
        "nofile": float(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
        "ncpus": float(len(cpus)),
        "nice": float(os.getpriority(os.PRIO_PROCESS, 0)),
        "cwd_is_root": float(os.getcwd() == "/"),
        "env_set": float("SWEEP_MEDDLED" in os.environ),
        "sigterm_handled": float(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL),
        "sigpipe": float(signal.getsignal(signal.SIGPIPE) == signal.SIG_DFL),
        "blocked": float(len(signal.pthread_sigmask(signal.SIG_BLOCK, []))),
        "path_meddled": float("/meddled" in sys.path),
        "module_replaced": float(getattr(sys.modules.get("signal"), "MEDDLED", False)),
        "argv_meddled": float("meddled" in sys.argv),
        "recursion": float(sys.getrecursionlimit()),
        "warnings_first": float(hash(warnings.filters[0][0]) if warnings.filters else 0) % 1000,
        "gc": float(gc.isenabled()),
        "py_threads": float(threading.active_count()),
        "tmp_files_open": float(len(fds)),
        "timer": float(signal.getitimer(signal.ITIMER_REAL)[0] > 0),
        "pid": float(os.getpid()),
    }
    if change:
        os.umask(0o777)
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
        if os.geteuid() == 0:
            os.nice(3)
        os.chdir("/")
        os.environ["SWEEP_MEDDLED"] = "1"
        signal.signal(signal.SIGTERM, lambda *a: None)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        signal.setitimer(signal.ITIMER_REAL, 3600)
        sys.path.insert(0, "/meddled")
        fake = type(sys)("signal")
        fake.MEDDLED = True
        sys.modules["signal"] = fake  # a module the child had imported before the job
        sys.argv.append("meddled")
        sys.setrecursionlimit(123)
        warnings.simplefilter("error")
        gc.disable()
    if leave_thread:
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    if leave_file:
        _KEPT.append(open(leave_file, "w"))  # noqa: SIM115
    return found


def numpy_metadata(no_files_left: bool = False) -> dict:
    """Finds numpy's installed version through importlib.metadata (as unyt does on import);
    with ``no_files_left``, while no file descriptor can be opened (found = 0: the lookup
    failed, as a job at its open-files limit sees it)."""
    import resource
    from importlib.metadata import PackageNotFoundError, version

    from sweep._compat import forget_package_listings

    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    if no_files_left:  # the child's first lookup since its folders changed, at the limit
        forget_package_listings()
        lowest_free = os.dup(0)
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, limits[1]))  # no new descriptor
    try:
        found = float(version("numpy").split(".")[0] != "")
    except PackageNotFoundError:
        found = 0.0
    return {"found": found, "pid": float(os.getpid())}


def import_metadata_backport(x: int = 0) -> dict:
    """Imports the ``importlib_metadata`` backport (dask does), which moves path-based
    distribution lookups from the standard library's finder to its own on ``sys.meta_path``."""
    fresh = "importlib_metadata" not in sys.modules
    import importlib_metadata  # noqa: F401

    return {"fresh": float(fresh), "pid": float(os.getpid())}


def interpreter_view(x: int = 0) -> dict:
    """What a job sees of its interpreter and process, as numbers: a job that runs after
    others in the same warm child must see what the first job of that child saw."""
    import resource
    import signal
    import warnings
    import zlib
    from importlib.metadata import PackageNotFoundError, version

    def crc(value: object) -> float:
        return float(zlib.crc32(repr(value).encode()))

    try:
        found = float(bool(version("numpy")))
    except PackageNotFoundError:
        found = 0.0
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "numpy_found": found,
        "path": crc(sys.path),
        "argv": crc(sys.argv),
        "cwd": crc(os.getcwd()),
        "env": crc(sorted(os.environ.items())),
        "umask": float(umask),
        "limits": crc(
            [
                resource.getrlimit(getattr(resource, n))
                for n in sorted(dir(resource))
                if n.startswith("RLIMIT_")
            ]
        ),
        "affinity": crc(sorted(os.sched_getaffinity(0))),
        "handlers": crc(
            [signal.getsignal(s) for s in sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})]
        ),
        "blocked": crc(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))),
        "recursion": float(sys.getrecursionlimit()),
        "switch": float(sys.getswitchinterval()),
        "warnings": crc(warnings.filters),
        "stdout_ok": float(not sys.stdout.closed),
        "pid": float(os.getpid()),
    }


def chatty_hog(x: int = 0, mb: int = 300, seconds: float = 6.0, every: float = 0.01) -> dict:
    """Reports every ``every`` s for ``seconds``, holding ``mb`` MiB from half-way: a job whose
    messages come faster than its watch samples."""
    import sweep

    held = bytearray()
    t0 = time.monotonic()
    step = 0
    while time.monotonic() - t0 < seconds:
        if not held and time.monotonic() - t0 > seconds / 2:
            held = bytearray(b"\1" * (mb << 20))  # written: resident
        sweep.report(step=step, held=len(held))
        step += 1
        time.sleep(every)
    return {"value": float(x)}
