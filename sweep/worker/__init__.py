"""What runs inside a Dask worker: the core pool, the handle on each capped child, MPI and GPU
points, node-wide leases, memory, walltime and a point's checkpoints. Imports no pydantic,
recipe model, search, xarray, zarr or optuna: a worker unpickles and runs points without them."""
