"""The client side of a run: the public API (:mod:`sweep.client.runner`), the run loop and its
listeners, the window of tasks in flight, planning, the search, progress and the driver."""
