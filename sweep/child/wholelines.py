"""An MPI rank's stdout and stderr written a whole line at a time.

Open MPI's ``--tag-output`` tags each write of a rank, not each line: a job that prints part
of a line and flushes (``print(".", end="", flush=True)``) made ``[1,0]<stdout>:a[1,0]<stdout>:
b`` in the log, and two ranks' parts interleaved inside one line. A rank's streams are wrapped
in :class:`WholeLines`, which writes complete lines only; what is left of a line when the job
ends is written as a line of its own (:func:`end_lines`). Standard library only.
"""

from __future__ import annotations

import io
import sys
from typing import TextIO


class StreamOver(io.TextIOBase):
    """A text stream written through to ``stream``, whose terminal, descriptor and encoding
    it reports as its own (a subclass changes how writes go through)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding


class WholeLines(StreamOver):
    """A text stream over ``stream`` that passes on complete lines only."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._part = ""

    def write(self, text: str) -> int:
        data = self._part + text
        head, newline, self._part = data.rpartition("\n")
        if newline:
            self.stream.write(head + newline)
            self.stream.flush()
        return len(text)

    def end_line(self) -> None:
        """Write what is left of a line as a line of its own."""
        if self._part:
            part, self._part = self._part, ""
            self.stream.write(part + "\n")
        self.stream.flush()

    def flush(self) -> None:  # a part of a line waits for its end
        self.stream.flush()


def wrap_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (an MPI rank's, before isolation records them)."""
    sys.stdout = WholeLines(sys.stdout)
    sys.stderr = WholeLines(sys.stderr)


def end_lines() -> None:
    """At a job's end: the wrapped streams' parts of lines, each written as a line."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, WholeLines):
            stream.end_line()
