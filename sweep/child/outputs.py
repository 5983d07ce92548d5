"""A job's outputs, normalised in the child into plain numpy values with dim names.

Imported by capped children: standard library only at module level; numpy is imported
inside :func:`normalize_outputs` when a job returns arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweep.wire.protocol import Output


def normalize_outputs(raw: Any) -> dict[str, Output]:
    """Turn what a job returned into ``{name: Output}`` (numpy only, picklable).

    Accepts a mapping of name -> scalar / numpy or JAX array / ``xarray.DataArray``, an
    ``xarray.Dataset``, or a single scalar or array (stored as ``result``). Unnamed array
    dims are called ``<name>_dim_<i>``; a DataArray keeps its dims and dim coordinates.
    Plain Python numbers stay Python numbers, so a job that returns only those never makes
    the child import numpy (nor start its BLAS threads).
    """
    if _is_xarray(raw, "Dataset"):
        raw = {name: raw[name] for name in raw.data_vars}
    elif not isinstance(raw, Mapping):
        raw = {"result": raw}
    outputs = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"output name {name!r} must be a string identifier")
        if type(value) in (bool, int, float, complex):
            outputs[name] = Output(value, ())
            continue
        import numpy as np

        if _is_xarray(value, "DataArray"):
            coords = {d: np.asarray(value[d].values) for d in value.dims if d in value.coords}
            outputs[name] = Output(np.asarray(value.values), tuple(map(str, value.dims)), coords)
            continue
        if isinstance(value, str | bytes):
            raise TypeError(f"output {name!r} is a string; return numbers or arrays")
        try:
            array = np.asarray(value)
        except Exception as exc:
            raise TypeError(f"output {name!r} of type {type(value).__name__} is not array-like") from exc
        if array.dtype.kind not in "biufc":
            raise TypeError(
                f"output {name!r} has unsupported type {type(value).__name__} "
                f"(dtype {array.dtype}); return scalars, arrays, xarray.DataArray or Dataset"
            )
        dims = tuple(f"{name}_dim_{i}" for i in range(array.ndim))
        outputs[name] = Output(array, dims)
    return outputs


def _is_xarray(value: Any, cls: str) -> bool:
    return type(value).__module__.startswith("xarray") and type(value).__name__ == cls
