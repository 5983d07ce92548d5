"""A Ctrl-C that lands where Python drops exceptions, or inside importlib, is delivered again."""

import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.helpers import ROOT, job

# A weakref callback that takes SIGINT: Python's own handler raises KeyboardInterrupt inside
# it, which Python prints as "Exception ignored" and drops, as during an import's module lock.
SWALLOWED = """
import os, signal, sys, time, weakref
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal, not a shell's `&`
if sys.argv[1] in ("guarded", "loaded"):
    from sweep.interrupts import install
    install()
if sys.argv[1] == "loaded":  # a loaded machine: the timer fires before timer.start() returns
    import threading
    class Eager(threading.Timer):
        fired = False
        def start(self):
            super().start()
            if not Eager.fired:
                Eager.fired = True
                self.function(*self.args)
                for _ in range(10_000):  # the handler runs here, inside redeliver()
                    pass
    threading.Timer = Eager

class Thing:
    pass

def callback(_):
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100_000):
        pass

thing = Thing()
ref = weakref.ref(thing, callback)
try:
    del thing
    deadline = time.monotonic() + 1.5  # a redelivery takes 0.01 s
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("lost")
except KeyboardInterrupt:
    print("delivered")
"""


# A SIGINT handled in a frame of importlib's code (here the one that runs a module's body), by
# the command's handler (install) or by the one a sweep run from Python puts in (guarded).
IN_IMPORTLIB = """
import contextlib, os, signal, sys, tempfile, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
from sweep import interrupts
if sys.argv[1] == "install":
    interrupts.install()
folder = tempfile.mkdtemp()
Path(folder, "grab.py").write_text("import sys\\nFRAME = sys._getframe(1)\\n")
sys.path.insert(0, folder)
from grab import FRAME
print(FRAME.f_code.co_filename)
block = interrupts.guarded() if sys.argv[1] == "guarded" else contextlib.nullcontext()
try:
    with block:
        signal.getsignal(signal.SIGINT)(signal.SIGINT, FRAME)
        print("deferred")
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            time.sleep(0.01)
        print("lost")
except KeyboardInterrupt:
    print("delivered")
print("restored" if signal.getsignal(signal.SIGINT) is signal.default_int_handler else "kept")
"""


def _run(mode: str, code: str = SWALLOWED) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=60)


def test_python_alone_drops_a_ctrl_c_taken_in_a_weakref_callback():
    done = _run("bare")
    assert done.stdout.strip() == "lost"
    assert "Exception ignored" in done.stderr and "KeyboardInterrupt" in done.stderr


def test_installed_a_dropped_ctrl_c_is_delivered_again_and_not_printed():
    done = _run("guarded")
    assert done.stdout.strip() == "delivered", done.stderr
    assert "Exception ignored" not in done.stderr


def test_a_redelivered_ctrl_c_that_lands_inside_the_redelivery_is_not_lost():
    """Found under load: the timer's SIGINT came before `timer.start()` returned, so
    KeyboardInterrupt was raised inside the unraisable hook ("Exception ignored in
    sys.unraisablehook") and the Ctrl-C was lost."""
    done = _run("loaded")
    assert done.stdout.strip() == "delivered", done.stderr
    assert "Exception ignored" not in done.stderr


@pytest.mark.parametrize(("mode", "after"), [("install", "kept"), ("guarded", "restored")])
def test_a_ctrl_c_in_importlibs_code_is_deferred_out_of_it_then_delivered(mode, after):
    done = _run(mode, IN_IMPORTLIB)
    said = ["<frozen", "importlib._bootstrap>", "deferred", "delivered", after]
    assert done.stdout.split() == said, done.stderr


def test_a_ctrl_c_anywhere_else_raises_at_once():
    from sweep.interrupts import on_sigint

    with pytest.raises(KeyboardInterrupt):
        on_sigint(signal.SIGINT, sys._getframe())


def test_other_unraisable_exceptions_still_reach_the_previous_hook(monkeypatch: pytest.MonkeyPatch):
    from sweep.interrupts import install

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    handler = signal.getsignal(signal.SIGINT)
    try:
        install()
        install()  # once per process: a second install keeps one hook

        class Broken:
            def __del__(self):
                raise ValueError("in __del__")

        Broken()
    finally:
        signal.signal(signal.SIGINT, handler)  # this test process's own, as it was
    assert [u.exc_type for u in seen] == [ValueError]


def test_a_process_started_ignoring_sigint_keeps_ignoring_it():
    code = (
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from sweep.interrupts import install; install()\n"
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


DEFERRED = """
import os, signal, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from sweep.interrupts import deferred
steps = []
try:
    with deferred():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):
            pass
        with deferred():  # nested: the outer one holds it
            time.sleep(0.05)
        steps.append("block ended")
    steps.append("not raised")
except KeyboardInterrupt:
    steps.append("raised")
print(*steps)
"""


def test_a_ctrl_c_in_a_deferred_block_is_raised_as_the_block_ends():
    done = subprocess.run([sys.executable, "-c", DEFERRED], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["block", "ended", "raised"], done.stderr


def _cell(kc: Any, code: str) -> str:
    """What a cell printed, and its error's name, once the kernel is idle again."""
    msg_id = kc.execute(code)
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            out.append(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out).strip()


# In a fresh kernel, a SIGINT sent as ``from sweep import Sweep`` starts importing ``module``:
# Python's handler runs inside the import, whatever the machine's speed.
INTERRUPT_AT = """
import os, signal, sys

class InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

assert {module!r} not in sys.modules
sys.meta_path.insert(0, InterruptAt())
from sweep import Sweep
"""


@pytest.mark.slow
@pytest.mark.parametrize("module", ["numpy", "dask.config", "distributed.utils", "distributed.scheduler"])
def test_a_notebook_interrupted_while_sweep_imports_runs_a_sweep_in_its_next_cell(tmp_path, module):
    # Found: interrupted by a timer 0.05-0.3 s into the import, the next cell raised ImportError
    # (cannot import name 'Sweep'), RecursionError or "module 'numpy' has no attribute
    # 'flexible'" (5 of 6 moments), until the kernel was restarted.
    manager = pytest.importorskip("jupyter_client.manager")
    km, kc = manager.start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        first = _cell(kc, INTERRUPT_AT.format(module=module))
        assert first.splitlines()[-1].startswith("KeyboardInterrupt"), first
        out = str(tmp_path / "o.zarr")
        second = _cell(
            kc,
            "from sweep import Sweep\n"
            f"s = Sweep({job('scaled')!r}, {{'grid': {{'x': [1, 2, 3]}}}}, output={out!r})\n"
            "ds = s.run(progress=False)\n"
            "print(int((ds['status'] == 'done').sum()), 'done')",
        )
        assert second.splitlines()[-1] == "3 done", second
    finally:
        km.shutdown_kernel(now=True)
