"""What a run does besides submitting points and writing their records: each a listener of
the run loop (:mod:`sweep.client.loop`) behind the contract of :mod:`sweep.client.listeners.base`.

A feature of that kind (progress, checkpoints and requeues, the search's study, the driver's
published state, learned settings) is one module here, not an edit of the loop."""
