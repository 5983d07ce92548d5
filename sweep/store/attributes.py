"""The attributes of a store's zarr group, each named once (what each holds, for users:
docs/results.md). Standard library only: every reader of a store imports it.

Written when the store is made (:mod:`sweep.store.creation`): ``NAME``, ``RECIPE``, ``JOB``,
``SPACE``, ``SPACE_SETTINGS``, ``DIMS``, ``POINTS``, ``FINGERPRINT``, ``CREATED``,
``VERSIONS``, ``OUTPUTS``; by each run (:mod:`sweep.store.inputsrecord`,
:class:`sweep.store.Store`): the inputs, the recipe as run, the run's state and the learned
asks; by the run's listeners: its provenance and allocation cost.
"""

from __future__ import annotations

NAME = "sweep_name"  # the sweep's name
NAME_FROM = "sweep_name_from"  # where the name came from: given, recipe file or job
RECIPE = "sweep_recipe"  # the recipe as run, after --set
RECIPE_SOURCE = "sweep_recipe_source"  # the recipe file's text
RECIPE_DIR = "sweep_recipe_dir"  # the folder a recipe's relative paths are read from
JOB = "sweep_job"  # the job's label
SPACE = "sweep_space"  # the space's kind (grid, random, sobol, search, ...)
SPACE_SETTINGS = "sweep_space_settings"  # JSON: the space's settings (seed, points, ...)
DIMS = "sweep_dims"  # JSON: the sweep's dims, in order
POINTS = "sweep_points"  # how many points the space has
FINGERPRINT = "sweep_fingerprint"  # the space's hash: a store of another sweep is refused
CREATED = "sweep_created"  # when the store was made
VERSIONS = "sweep_versions"  # JSON: versions of the libraries that made it
OUTPUTS = "sweep_outputs"  # JSON: each output's name and shape, as stored
INPUTS = "sweep_inputs"  # JSON: the last run's inputs (job hash, files, environment)
INPUTS_SEEN = "sweep_inputs_seen"  # JSON: every inputs a point ran with, by id
HISTORY = "sweep_history"  # JSON list: changes kept over (--keep-done, a grown space)
PROVENANCE = "sweep_provenance"  # JSON: the last run's command, versions per host, git state
LAST_RUN = "sweep_last_run"  # when the last run opened the store
LAST_END = "sweep_last_end"  # when it ended
RUN_STATE = "sweep_run_state"  # running, finished, cancelled, interrupted or failed
RUN_BY = "sweep_run_by"  # pid and host of the last run
RUN_PATH = "sweep_run_path"  # where the store was when that run started
MEMORY_ASK = "sweep_memory_ask"  # JSON: the memory each point asks, learned from peaks
THREADS_AUTO = "sweep_threads_auto"  # JSON: the k that `threads: auto` chose, and why
ALLOCATION = "sweep_allocation"  # JSON list: each run's allocation cost
