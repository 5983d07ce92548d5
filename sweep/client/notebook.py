"""Progress in a Jupyter notebook: a display of its own that leaves the user's cells alone.

A terminal gets rich's live bar (:mod:`sweep.client.progress`), which redirects ``stdout`` while it
runs; in a kernel that redirect wraps the kernel's own streams, and every cell that prints
while a background run is live fails (``RecursionError`` inside rich). So in a notebook the
progress is a display created once, in the cell that started the run, and updated in place
from any thread: an ipywidgets progress bar and label when ipywidgets is installed, else an
HTML block updated through its display id (``update_display_data``). Neither writes to
``sys.stdout``/``sys.stderr``, and the closing summary replaces the block's text, so a cell
run while the sweep goes on shows only its own output.
"""

from __future__ import annotations

import html
import io
import sys
import threading
import time
from typing import Any

UPDATE_EVERY_S = 0.5  # at most this often a display message, however fast points end


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell is running here)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class NotebookDisplay:
    """One sweep's progress block in a notebook. Create it in the cell that starts the run
    (it is displayed there at once); :meth:`update` and :meth:`finish` may be called from any
    thread afterwards."""

    def __init__(self, title: str, total: int) -> None:
        from IPython.display import display

        self.title = title
        self._lock = threading.Lock()
        self._last = 0.0
        self._widgets: Any = None
        self._handle: Any = None
        try:
            import ipywidgets
        except ImportError:
            self._handle = display(self._html(0, total, "starting"), display_id=True)
        else:
            bar = ipywidgets.IntProgress(value=0, min=0, max=max(1, total), description=title)
            label = ipywidgets.HTML(value=html.escape("starting"))
            self._widgets = (bar, label)
            display(ipywidgets.VBox([bar, label]))

    def _html(self, finished: int, total: int, text: str, table: str = "") -> Any:
        from IPython.display import HTML

        share = 100 * finished / total if total else 100
        body = (
            f"<div><b>{html.escape(self.title)}</b> {finished}/{total} "
            f"<progress value='{finished}' max='{max(total, 1)}' style='width:40%'></progress> "
            f"{share:.0f}%<br><code>{html.escape(text)}</code></div>"
        )
        if table:
            body += f"<pre>{html.escape(table)}</pre>"
        return HTML(body)

    def update(self, finished: int, total: int, text: str, force: bool = False) -> None:
        """Show ``finished`` of ``total`` and ``text`` (throttled to one message every
        ``UPDATE_EVERY_S`` unless ``force``)."""
        with self._lock:
            if not force and time.monotonic() - self._last < UPDATE_EVERY_S:
                return
            self._last = time.monotonic()
            if self._widgets is not None:
                bar, label = self._widgets
                bar.max, bar.value = max(1, total), finished
                label.value = html.escape(text)
            else:
                self._handle.update(self._html(finished, total, text))

    def finish(self, finished: int, total: int, text: str, table: Any) -> None:
        """The final counts and the closing summary (a rich renderable, shown as text)."""
        from rich.console import Console

        buffer = io.StringIO()
        Console(file=buffer, width=100, color_system=None, force_jupyter=False).print(table)
        with self._lock:
            if self._widgets is not None:
                bar, label = self._widgets
                bar.max, bar.value = max(1, total), finished
                label.value = f"{html.escape(text)}<pre>{html.escape(buffer.getvalue())}</pre>"
            else:
                self._handle.update(self._html(finished, total, text, buffer.getvalue()))
