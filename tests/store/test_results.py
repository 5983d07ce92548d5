"""Reading a store back (sweep/store/results.py)."""

import numpy as np
import pytest

from sweep import open_results
from sweep.model.recipe import Recipe
from sweep.store import RECORD_VARS, Store
from sweep.store.results import export
from sweep.wire.protocol import Output, PointRecord
from tests.helpers import job

OUTPUTS = ["b_loss", "a_field", "c"]  # as a job returns them: not in name order


def test_variables_come_in_one_order_status_outputs_by_name_then_the_record(out, tmp_path):
    """Found: `sweep results --export x.csv` wrote its columns in a different order at every
    call, as `xarray.open_zarr` gives a store's variables in another order at each open."""
    params = {"grid": {"x": [1.0, 2.0]}}
    recipe = Recipe.from_dict({"job": job("square"), "params": params, "output": str(out)})
    outputs = {
        "b_loss": Output(np.float64(1.0), ()),
        "a_field": Output(np.zeros(3), ("k",)),
        "c": Output(2, ()),
    }
    with Store.open(out, recipe) as store:
        store.write([PointRecord((0,), status="done", outputs=outputs)])
    record = [n for n in RECORD_VARS if n != "status"]
    assert list(open_results(out).data_vars) == ["status", *sorted(OUTPUTS), *record]
    line = export(open_results(out), tmp_path / "x.csv")
    header = (tmp_path / "x.csv").read_text().splitlines()[0].split(",")
    assert header == ["x", "point_id", "status", "b_loss", "c", *(n for n in record if n != "reports")], line


def test_a_non_grid_spaces_parameters_follow_point_id_by_name(out, tmp_path):
    params = {"list": [{"x": 1.0, "seconds": 0.0, "offset": 2.0}, {"x": 2.0, "seconds": 0.0, "offset": 1.0}]}
    recipe = Recipe.from_dict({"job": job("square"), "params": params, "output": str(out)})
    with Store.open(out, recipe) as store:
        store.write([PointRecord((1,), status="done", outputs={"y": Output(np.float64(1.0), ())})])
    ds = open_results(out)
    assert [str(c) for c in ds.coords] == ["point_id", "offset", "seconds", "x"]
    export(ds, tmp_path / "x.csv")
    header = (tmp_path / "x.csv").read_text().splitlines()[0].split(",")
    assert header[:6] == ["point", "point_id", "offset", "seconds", "x", "status"]
    assert header[6] == "y"


def test_an_export_into_a_missing_folder_is_one_line(tmp_path):
    import xarray as xr

    from sweep.errors import UsageError

    with pytest.raises(UsageError, match=r"the folder .*nodir does not exist"):
        export(xr.Dataset(), tmp_path / "nodir" / "x.csv")
