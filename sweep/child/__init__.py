"""What runs inside a capped child process (``python -m sweep.child.bootstrap``).

Everything here is standard library only at import: the child pins itself to its cores
before numpy, BLAS or JAX load, and a third-party import above the pinning would size their
thread pools to the whole machine (``tests/worker/test_child.py`` imports every module of this
package with numpy, jax and pydantic blocked). numpy is imported per job, lazily
(:mod:`sweep.child.outputs`).

- :mod:`~sweep.child.bootstrap`: the entry point: pin, tie to the parent, serve.
- :mod:`~sweep.child.serving`: the request loop: run a job, measure it, answer.
- :mod:`~sweep.child.isolation`: what a job changes in its warm child, restored or not.
- :mod:`~sweep.child.sources`: the user's source files a job imported, hashed.
- :mod:`~sweep.child.outputs`: a job's return value as named numpy outputs with dims.
- :mod:`~sweep.child.reporting`: :func:`sweep.report`, called from inside jobs.
- :mod:`~sweep.child.checkpoints`: :func:`sweep.checkpoint` and :func:`sweep.restore`.
- :mod:`~sweep.child.ranks`: :func:`sweep.rank` and :func:`sweep.ranks`; a rank's cores.
- :mod:`~sweep.child.launch`: the MPI launcher of an MPI point, tied to the worker.
- :mod:`~sweep.child.wholelines`: an MPI rank's output, a whole line per write.

The parent's handle on such a process is :mod:`sweep.worker.child`; what crosses between them is
:mod:`sweep.wire.protocol`.
"""
