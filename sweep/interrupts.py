"""A Ctrl-C is never lost, never leaves the import lock held, and never cuts an import in half.

Python raises ``KeyboardInterrupt`` in whatever bytecode runs when SIGINT's handler does. Three
places make that go wrong while a sweep starts (imports of dask, distributed, zarr, xarray, some
in the store's and the cluster's threads):

* importlib's own code. Raised between ``_imp.acquire_lock()`` and the ``try`` that releases
  it (in ``_get_module_lock`` and its weakref callback), the exception leaves the global import
  lock held for ever: every other thread that imports then waits on it, and the command hangs,
  even at its exit.
* A module's body, in a notebook: ``from sweep import Sweep`` interrupted while it imports
  distributed left a package without its submodules, and the next cell raised
  ``AttributeError: module 'distributed' has no attribute 'utils'`` or ``RecursionError``
  until the kernel was restarted.
* A callback whose exceptions Python ignores (a weakref callback, ``__del__``): the exception
  is printed as "Exception ignored in ..." and dropped, and the sweep ran on to its end and
  exited 0 as if no key had been pressed.

:func:`deferred` holds a Ctrl-C back while a block runs (the package's lazy imports,
:mod:`sweep._lazy`) and raises it, through the handler that was there, as the block ends: the
import is done whole. :func:`install`, for the ``sweep`` command, handles the other two. Its
SIGINT handler raises ``KeyboardInterrupt`` as Python's does, except in a frame of importlib's
frozen code, where it sends SIGINT to the main thread again a moment later
(:data:`REDELIVER_S`) instead. A :data:`sys.unraisablehook` does the same with a
``KeyboardInterrupt`` Python would drop, without printing it; other unraisable exceptions go to
the hook that was there before. A Ctrl-C so deferred surfaces where the command catches it.
:func:`guarded` puts the importlib rule in front of whatever handler is there while
``Sweep.run`` runs from Python (a notebook's kernel, a script).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

REDELIVER_S = 0.01
"""Delay before a deferred Ctrl-C is sent again: long enough for the frame to move on."""

IMPORTLIB_CODE = "<frozen importlib"
"""How the file names of importlib's frozen bootstrap modules begin."""


def install() -> None:
    """From the main thread: handle SIGINT with :func:`on_sigint` and deliver again each
    ``KeyboardInterrupt`` that Python would drop (the hook is installed once per process).
    A SIGINT this process was started ignoring (a shell's ``command &``) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, on_sigint)
    previous = sys.unraisablehook
    if getattr(previous, "_redelivers_interrupts", False):
        return

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            redeliver()
            return
        previous(unraisable)

    hook._redelivers_interrupts = True  # type: ignore[attr-defined]
    _REDELIVERY_CODE.add(hook.__code__)
    sys.unraisablehook = hook


def _replaceable(mark: str) -> Any:
    """The SIGINT handler a block may stand in for: None outside the main thread (the one
    Python runs signal handlers in), for SIG_IGN or SIG_DFL, or when a block of the same kind
    (``mark``) already stands in for it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or getattr(previous, mark, False):
        return None
    return previous


@contextmanager
def _standing_in(mark: str, stand_in: Callable[[Any], Any]) -> Iterator[Any]:
    """While the block runs, SIGINT is handled by ``stand_in(previous)`` (marked ``mark``),
    then by the handler ``previous`` that was there again; yields ``previous``, or None where
    none may be stood in for (:func:`_replaceable`): then nothing changes."""
    previous = _replaceable(mark)
    if previous is None:
        yield None
        return
    handler = stand_in(previous)
    setattr(handler, mark, True)
    signal.signal(signal.SIGINT, handler)
    try:
        yield previous
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold back a SIGINT that arrives while the block runs, then hand it to the handler that
    was there as the block ends (Python's raises ``KeyboardInterrupt`` there). Only in the main
    thread, only where that handler is Python's or another function (not SIG_IGN or SIG_DFL);
    nested, the outermost one holds."""
    held: list[FrameType | None] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(frame)

    previous = None
    try:
        with _standing_in("_holds", lambda _: hold) as previous:
            yield
    finally:
        if held and previous is not None:
            previous(signal.SIGINT, held[0])


@contextmanager
def guarded() -> Iterator[None]:
    """While the block runs, a SIGINT landing in importlib's code is sent again a moment later
    (:func:`redeliver`) instead of reaching the handler that was there, which gets every other
    one at once: :func:`install`'s rule, for a sweep run from Python (a notebook's kernel
    interrupts a cell with SIGINT). Only in the main thread, only over a handler that is a
    function; under :func:`install`'s handler it changes nothing."""
    with _standing_in("_defers", out_of_importlib):
        yield


def out_of_importlib(handler: Any) -> Any:
    """A SIGINT handler that calls ``handler``, unless the signal lands in a frame of
    importlib's code: then :func:`redeliver`."""

    def defer(signum: int, frame: FrameType | None) -> None:
        if frame is not None and (
            frame.f_code.co_filename.startswith(IMPORTLIB_CODE) or _redelivering(frame)
        ):
            redeliver()
            return
        handler(signum, frame)

    defer._defers = True  # type: ignore[attr-defined]  # install's handler: guarded() keeps it
    return defer


on_sigint = out_of_importlib(signal.default_int_handler)
"""Python's SIGINT handler (``KeyboardInterrupt``), except in importlib's code: :func:`redeliver`."""


def _redelivering(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside :func:`redeliver` or the unraisable hook: a SIGINT that
    lands there (a loaded machine can run the timer before ``timer.start()`` returns) would be
    raised inside the hook, where Python drops it; it is sent again instead."""
    while frame is not None:
        if frame.f_code in _REDELIVERY_CODE:
            return True
        frame = frame.f_back
    return False


def redeliver() -> None:
    """Send SIGINT to the main thread after :data:`REDELIVER_S`, from a daemon timer thread."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(REDELIVER_S, signal.pthread_kill, (main, signal.SIGINT))
    timer.daemon = True
    timer.start()


_REDELIVERY_CODE = {redeliver.__code__}  # and the unraisable hook's, once installed
