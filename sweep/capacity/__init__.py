"""What a point asks and what a node offers, and the batch systems that offer nodes.

Standard library only (and ``dask.utils``), below the worker, cluster and client folders and
above ``wire/``, so that each of them reads one home:

- :mod:`sweep.capacity.resources`: the names of the Dask resources a worker offers and a task
  asks (the cores one included), and the one function that makes a task's ask;
- :mod:`sweep.capacity.backends`: each batch system as one :class:`Backend` record;
- :mod:`sweep.capacity.clusterkind`: a recipe's ``cluster.kind`` as a type with the questions
  asked of it (does the run own its cluster? is it local? a batch system?).
"""
