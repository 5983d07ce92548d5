"""The listener contract's end step (sweep/client/listeners/base.py)."""

import pytest

from sweep.client.listeners.base import Listener, end_listeners


class Fails(Listener):
    def on_end(self, run):
        raise OSError(28, "No space left on device")


class Notes(Listener):
    def __init__(self):
        self.ended = False

    def on_end(self, run):
        self.ended = True


def test_every_listener_ends_and_an_end_error_does_not_replace_the_runs_own(monkeypatch):
    from sweep.client.listeners import base

    said = []
    monkeypatch.setattr(base.log, "warning", lambda *a: said.append(a[0] % a[1:]))
    notes = Notes()
    end_listeners(None, [Fails(), notes], KeyboardInterrupt())
    assert notes.ended and said == [
        "Fails could not end ([Errno 28] No space left on device) after the run's own end"
    ]


def test_after_a_good_run_the_first_end_error_is_raised_once_all_have_ended():
    notes = Notes()
    with pytest.raises(OSError, match="No space"):
        end_listeners(None, [Fails(), notes], None)
    assert notes.ended
