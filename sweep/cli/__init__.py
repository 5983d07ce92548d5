"""The ``sweep`` command (:mod:`sweep.cli.app`) and ``sweep doctor``. Imports nothing: a capped
child imports :mod:`sweep.cli.probe` as a job."""
