"""A Ctrl-C that lands where Python drops exceptions, or inside importlib, is delivered again."""

import signal
import subprocess
import sys

import pytest

# A weakref callback that takes SIGINT: Python's own handler raises KeyboardInterrupt inside
# it, which Python prints as "Exception ignored" and drops, as during an import's module lock.
SWALLOWED = """
import os, signal, sys, time, weakref
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal, not a shell's `&`
if sys.argv[1] == "guarded":
    from sweep.cli.interrupts import install
    install()

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


# A SIGINT handled in a frame of importlib's code (here the one that runs a module's body).
IN_IMPORTLIB = """
import os, signal, sys, tempfile, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
from sweep.cli import interrupts
interrupts.install()
folder = tempfile.mkdtemp()
Path(folder, "grab.py").write_text("import sys\\nFRAME = sys._getframe(1)\\n")
sys.path.insert(0, folder)
from grab import FRAME
print(FRAME.f_code.co_filename)
try:
    interrupts.on_sigint(signal.SIGINT, FRAME)
    print("deferred")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("lost")
except KeyboardInterrupt:
    print("delivered")
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


def test_a_ctrl_c_in_importlibs_code_is_deferred_out_of_it_then_delivered():
    done = _run("-", IN_IMPORTLIB)
    assert done.stdout.split() == ["<frozen", "importlib._bootstrap>", "deferred", "delivered"], done.stderr


def test_a_ctrl_c_anywhere_else_raises_at_once():
    from sweep.cli.interrupts import on_sigint

    with pytest.raises(KeyboardInterrupt):
        on_sigint(signal.SIGINT, sys._getframe())


def test_other_unraisable_exceptions_still_reach_the_previous_hook(monkeypatch: pytest.MonkeyPatch):
    from sweep.cli.interrupts import install

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    install()
    install()  # once per process: a second install keeps one hook

    class Broken:
        def __del__(self):
            raise ValueError("in __del__")

    Broken()
    assert [u.exc_type for u in seen] == [ValueError]


def test_a_process_started_ignoring_sigint_keeps_ignoring_it():
    code = (
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from sweep.cli.interrupts import install; install()\n"
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr
