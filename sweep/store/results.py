"""Reading a sweep's results: the dataset, and the history of its reports.

The store (:mod:`sweep.store`) is plain zarr that ``xarray.open_zarr`` reads as is; these
add what a user wants on top: text variables as plain strings, loaded or lazy, and every
:func:`sweep.report` call as a table.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

import numpy as np

from sweep.errors import UsageError
from sweep.store.integrity import check_metadata, check_store
from sweep.store.layout import is_store


def report_history(ds: xr.Dataset) -> pd.DataFrame:
    """Every ``sweep.report()`` of every point, as a pandas DataFrame.

    One row per report: the point's sweep coordinates, ``point_id``, ``attempt``, ``step``,
    ``time`` (``datetime64``, UTC) and the reported values.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    status = ds["status"]
    # each variable read once: on a lazy dataset (a big sweep's) ``.values`` reads the store
    reports = ds["reports"].values
    axes = [ds[d].values for d in status.dims]  # trial: its number
    per_point = {c: ds[c].values for c in ds.coords if ds[c].dims == status.dims}
    ids = ds["point_id"].values
    for index in np.ndindex(status.shape):
        text = str(reports[index] or "")
        if not text:
            continue
        where: dict[str, Any] = {str(d): axis[i] for d, axis, i in zip(status.dims, axes, index)}
        where.update({str(c): values[index] for c, values in per_point.items()})
        where["point_id"] = ids[index]
        rows.extend({**where, **r} for r in json.loads(text))
    history = pd.DataFrame(rows)
    if "time" in history:
        history["time"] = pd.to_datetime(history["time"], unit="s", utc=True)
    return history


def unpadded(ds: xr.Dataset, name: str, **where: Any) -> xr.DataArray:
    """Output ``name`` of the one point ``where`` selects (by sweep coordinate, e.g.
    ``x=2.0``; a search by ``trial=N``), cut to the shape that point returned: an output whose
    shape changes across points is stored padded with NaN to the largest shape."""
    var = ds[name].sel(**where)
    text = str(ds["shapes"].sel(**where).values.item() or "") if "shapes" in ds else ""
    shape = json.loads(text).get(name) if text else None
    if shape is None:
        return var
    return var.isel({d: slice(0, s) for d, s in zip(var.dims, shape)})


def open_results(path: str | os.PathLike, *, load: bool = True) -> xr.Dataset:
    """Open a sweep's results as an ``xarray.Dataset`` (readable while a sweep writes it).

    ``started``/``finished`` decode to datetimes; ``status`` and the other text variables
    are strings. ``load=False`` keeps the variables lazy (dask), for large sweeps.
    """
    import xarray as xr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a sweep's output folder (its recipe's output)")
    if not is_store(path):
        raise FileNotFoundError(f"{path} is not a sweep result store (no zarr.json)")
    check_store(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = xr.open_zarr(str(path), consolidated=False, chunks=None if load else {})
    except Exception:
        check_metadata(path)  # names a damaged metadata file, if that is the cause
        raise
    for name, var in ds.variables.items():
        if var.dtype.kind == "T":  # numpy StringDType from zarr v3: plain objects are friendlier
            ds[name] = var.astype(object)
    ds = _in_order(ds)
    return ds.load() if load else ds


def _in_order(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its variables in the order a reader sees them. Coordinates: each dim's
    own (in dim order), ``point_id``, then the parameters of non-grid spaces by name. Data:
    ``status``, the job's outputs by name, then the rest of the per-point record in its
    table's order (docs/results.md). ``xarray.open_zarr`` gives a store's variables in another
    order at each open (zarr 3.1 lists them sorted; xarray's reading does not keep it): without
    this a CSV's columns moved at every export."""
    import xarray as xr

    from sweep.store import RECORD_VARS

    dims = [str(d) for d in ds["status"].dims] if "status" in ds else []
    first = [*dims, "point_id"]
    coords = [n for n in first if n in ds.coords] + sorted(str(n) for n in ds.coords if n not in first)
    outputs = sorted(str(n) for n in ds.data_vars if n not in RECORD_VARS)
    rest = [n for n in RECORD_VARS if n != "status" and n in ds]
    data = (["status"] if "status" in ds else []) + outputs + rest
    return xr.Dataset(
        {n: ds[n].variable for n in data}, coords={n: ds.coords[n].variable for n in coords}, attrs=ds.attrs
    )


def select_points(ds: Any, where: list[str], point: str | None = None) -> np.ndarray:
    """The ``point_id`` of every point of ``ds`` that matches each ``AXIS=VALUE`` of ``where``
    (a sweep dim, or a coordinate along the sweep dims; numbers compared as numbers) and, if
    given, is ``point``; UsageError naming the axes or the values when nothing can match."""
    chosen = np.ones(ds["status"].shape, dtype=bool)
    dims = set(ds["status"].dims)  # a search's trial dim has no coordinate: its number selects
    names = dims | {n for n in ds.coords if n != "point_id" and set(ds[n].dims) <= dims}
    for condition in where:
        axis, _, text = condition.partition("=")
        if axis not in names or not text:
            raise UsageError(f"--where {condition}: give AXIS=VALUE with AXIS one of {sorted(names)}")
        coord = ds[axis]
        try:
            value: Any = float(text) if coord.dtype.kind in "fiu" else text
        except ValueError:
            raise UsageError(
                f"--where {condition}: {axis} takes numbers, e.g. {axis}={coord.values.flat[0]}"
            ) from None
        matches = (coord == value).broadcast_like(ds["status"]).transpose(*ds["status"].dims).values
        if not matches.any():
            values = ", ".join(map(str, np.unique(coord.values)[:10]))
            raise UsageError(f"--where {condition}: no point has {axis} = {text} (it takes {values})")
        chosen &= matches
    ids = ds["point_id"].values[chosen].astype(str)
    if point:
        if point not in ds["point_id"].values:
            raise UsageError(f"--point {point}: no such point in this store (`sweep status` lists ids)")
        ids = ids[ids == point]
    return ids


TIME_VARS = ("started", "finished")  # per-point epoch seconds, exported as ISO-8601 UTC


def export(ds: Any, target: Path) -> str:
    """Write ``ds`` to ``target`` and say what was written (one line).

    ``.csv``: one row per point: its axes, ``point_id`` and a non-grid space's parameters,
    then every per-point variable, in :func:`open_results`' order; ``started``/``finished`` as
    ISO-8601 UTC times; each reported value's last report as a ``last_<name>`` column in place
    of the raw ``reports`` JSON (:func:`report_history` has every report); outputs with dims
    of their own (arrays) are left out, and the line names them. ``.nc``/``.nc4``: the whole
    dataset as netCDF (text variables as fixed strings)."""
    from sweep.store import RECORD_VARS

    if target.suffix not in (".csv", ".nc", ".nc4"):
        raise UsageError(f"--export {target}: use a .nc or .csv file name")
    if not target.parent.is_dir():
        raise UsageError(
            f"--export {target}: the folder {target.parent} does not exist; make it first or name another"
        )
    try:
        return _write(ds, target, RECORD_VARS)
    except OSError as exc:
        raise UsageError(f"--export {target}: cannot write it: {exc.strerror or exc}") from None


def _write(ds: Any, target: Path, record_vars: Any) -> str:
    if target.suffix == ".csv":
        table, left_out = _point_table(ds)
        table.to_csv(target)
        line = f"wrote {target}: {len(table)} points, {len(table.columns)} columns"
        if left_out:
            line += f"; left out {', '.join(left_out)} (outputs with dims of their own: export .nc for them)"
        return line
    if target.suffix in (".nc", ".nc4"):
        out = ds.copy()
        for name in record_vars:
            if out[name].dtype.kind in "OTU":
                out[name] = out[name].astype(str)
        out.to_netcdf(target)
    return f"wrote {target}: the whole dataset ({len(ds.data_vars)} variables)"


def _point_table(ds: Any) -> tuple[Any, list[str]]:
    """The per-point variables of ``ds`` as a DataFrame (times as ISO-8601, reports as their
    last values) and the names of the outputs left out for having dims of their own."""
    import pandas as pd

    sweep_dims = set(ds["status"].dims)
    per_point = [v for v in ds.data_vars if set(ds[v].dims) == sweep_dims and v != "reports"]
    left_out = sorted(str(v) for v in ds.data_vars if not set(ds[v].dims) <= sweep_dims)
    table = ds[per_point].to_dataframe()
    coords = [str(c) for c in ds.coords if c in table.columns]  # point_id, a non-grid space's parameters
    table = table[[*coords, *(c for c in table.columns if c not in coords)]]
    for name in TIME_VARS:
        if name in table:
            table[name] = pd.to_datetime(table[name], unit="s", utc=True).map(
                lambda t: "" if pd.isna(t) else t.isoformat()
            )
    if "reports" in ds:
        last = [json.loads(str(text))[-1] if str(text or "") else {} for text in ds["reports"].values.ravel()]
        values = pd.DataFrame(last, index=table.index).drop(columns=["time", "attempt"], errors="ignore")
        table = table.join(values.add_prefix("last_"))
    return table, left_out
