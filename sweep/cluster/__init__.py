"""Starting and reaching the Dask cluster a sweep runs on: the local default, a running
scheduler, or batch jobs (dask-jobqueue), and the scheduler's /sweep page."""
