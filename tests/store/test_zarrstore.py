"""The result store on real zarr: layout as docs/results.md documents it, locking, resume, mismatch."""

import json
import re
import threading

import numpy as np
import pytest

from sweep import Sweep, open_results
from sweep.model.recipe import Recipe
from sweep.store import RECORD_VARS, Store, StoreMismatch
from sweep.store.lock import StoreLocked
from sweep.wire.protocol import PointRecord
from tests.helpers import ROOT, job

RESULTS_DOC = ROOT / "docs" / "results.md"


def documented_per_point() -> dict[str, str]:
    """`name` -> dtype from the result-dataset table of docs/results.md (rows whose dims are 'sweep')."""
    section = RESULTS_DOC.read_text().split("<!-- dataset-table -->")[1]
    rows = re.findall(r"^\| `(\w+)` \| sweep \| ([\w\[\]]+) \|", section, flags=re.M)
    return dict(rows)


def loaded(output, params=None):
    data = {"job": job("square"), "params": params or {"grid": {"x": [1.0, 2.0, 3.0], "offset": [0, 10]}}}
    return Recipe.from_dict({**data, "output": str(output)})


def test_readme_documents_every_per_point_variable():
    doc = documented_per_point()
    assert set(RECORD_VARS) | {"point_id"} == set(doc)


def test_grid_dataset_has_the_documented_layout(client, out):
    ds = Sweep(job("square"), {"grid": {"x": [1.0, 2.0, 3.0], "offset": [0, 10]}}, output=out).run(
        client=client, progress=False
    )
    doc = documented_per_point()
    for name, dtype in doc.items():
        assert ds[name].dims == ("x", "offset"), name
        kind = "str" if ds[name].dtype == object else str(ds[name].dtype)
        assert kind == dtype, (name, kind, dtype)
    assert "point_id" in ds.coords and list(ds.coords["x"].values) == [1.0, 2.0, 3.0]
    assert ds["y"].dims == ("x", "offset") and ds["y"].dtype == np.float64
    assert ds["vec"].dims == ("x", "offset", "vec_dim_0")
    assert ds["curve"].dims == ("x", "offset", "t") and list(ds["t"].values) == [0, 1, 2, 3]
    assert float(ds["y"].sel(x=3.0, offset=10)) == 19.0
    assert np.allclose(ds["curve"].sel(x=2.0, offset=0), np.linspace(0, 2, 4))
    assert (
        ds.attrs["sweep_name"] == "square"
        and ds.attrs["sweep_name_from"] == "job"
        and "jax" in ds.attrs["sweep_versions"]
    )
    assert "square" in ds.attrs["sweep_recipe"]
    assert (ds["status"] == "done").all() and (ds["attempts"] == 1).all()
    assert (ds["peak_threads"] > 0).all() and (ds["peak_rss"] > 0).all()


def test_non_grid_spaces_use_a_point_dim_with_parameter_coords(client, out):
    params = {"zip": {"x": [1.0, 2.0], "offset": [5, 6]}}
    ds = Sweep(job("square"), params, output=out).run(client=client, progress=False)
    assert ds["y"].dims == ("point",)
    assert list(ds.coords["offset"].values) == [5, 6]
    assert list(ds["y"].values) == [6.0, 10.0]


def test_a_second_writer_is_refused_naming_the_holder(out):
    with Store.open(out, loaded(out)), pytest.raises(StoreLocked, match=r"pid \d+ on"):
        Store.open(out, loaded(out))


def test_a_different_space_is_refused_unless_forced(out):
    Store.open(out, loaded(out)).close()
    other = loaded(out, {"grid": {"x": [1.0, 2.0]}})  # other dims: another sweep, not a grown one
    with pytest.raises(StoreMismatch, match="holds a different sweep .* --force"):
        Store.open(out, other)
    Store.open(out, other, force=True).close()
    assert open_results(out)["status"].shape == (2,)


def test_a_space_that_drops_only_points_never_run_is_taken_as_is(out):
    Store.open(out, loaded(out)).close()
    with Store.open(out, loaded(out, {"grid": {"x": [1.0, 2.0], "offset": [0]}})) as store:
        assert store.growth is not None and store.growth.summary() == "2 kept, 0 new"
    assert open_results(out)["status"].shape == (2, 1)


def test_outputs_whose_shape_follows_a_parameter_are_kept_padded(out):
    """Found (issue 27): sweeping a design's size failed every point after the first shape with
    "outputs must keep their shape across points"."""
    from sweep import unpadded
    from sweep.wire.protocol import Output

    with Store.open(out, loaded(out)) as store:
        first = PointRecord((0, 0), status="done", outputs={"v": Output(np.arange(3.0), ("k",))})
        bigger = PointRecord((0, 1), status="done", outputs={"v": Output(np.arange(5.0), ("k",))})
        other_dims = PointRecord((1, 0), status="done", outputs={"v": Output(np.zeros((2, 2)), ("k", "j"))})
        with_coords = Output(np.zeros(2), ("t",), {"t": np.array([0, 1])})
        coords = PointRecord((1, 1), status="done", outputs={"w": with_coords})
        pair = {"a": Output(np.zeros(2), ("m",)), "b": Output(np.zeros(2), ("m",))}
        shared = PointRecord((2, 0), status="done", outputs=pair)
        written = store.write([first, bigger, other_dims, coords, shared])
        longer = {"a": Output(np.zeros(3), ("m",)), "b": Output(np.zeros(2), ("m",))}
        (refused,) = store.write([PointRecord((2, 1), status="done", outputs=longer)])
    assert [r.status for r in written] == ["done", "done", "failed", "done", "done"]
    assert "must keep their dims" in written[2].error
    assert refused.status == "failed" and "dim 'm' has 3 values here but 2" in refused.error
    assert "used by another output" in refused.error
    ds = open_results(out)
    assert ds["v"].shape == (3, 2, 5)
    assert np.isnan(ds["v"].values[0, 0, 3:]).all() and ds["v"].values[0, 1].tolist() == [0, 1, 2, 3, 4]
    assert unpadded(ds, "v", x=1.0, offset=0).values.tolist() == [0.0, 1.0, 2.0]
    assert unpadded(ds, "v", x=1.0, offset=10).shape == (5,)


def test_a_one_point_batch_of_text_is_written(client, out):
    """Found on a Meep user's stack (numpy 1.26, zarr 3.1.5): a batch of one point failed in
    the text variables (`TypeError: Expected str, got numpy.ndarray`), at random, since whether
    a batch holds one point depends on timing."""
    loaded = Recipe.from_dict(
        {"job": job("square"), "params": {"grid": {"x": [1.0, 2.0]}}, "output": str(out)}
    )
    with Store.open(out, loaded) as store:
        store.write([PointRecord((1,), status="failed", error="boom", host="h", cores=(0,))])
    ds = open_results(out)
    assert list(ds["status"].values) == ["pending", "failed"] and ds["error"].values[1] == "boom"
    assert ds["cores"].values[1] == "0" and ds["host"].values[1] == "h"


def test_a_store_made_before_points_recorded_their_inputs_opens_and_resumes(client, out):
    """A store of the previous layout (no `returned`, `shapes`, `inputs`) gets them at open;
    its done points are compared with the inputs it recorded then (`sweep_inputs`)."""
    import shutil

    s = Sweep(job("square"), {"grid": {"x": [1.0, 2.0]}}, output=out)
    s.run(client=client, progress=False)
    for name in ("returned", "shapes", "inputs"):
        shutil.rmtree(out / name)
    again = Sweep(job("square"), {"grid": {"x": [1.0, 2.0]}, "fixed": {"offset": 5.0}}, output=out)
    with pytest.raises(StoreMismatch, match=r"params.fixed.offset: \(absent\) → 5.0"):
        again.run(client=client, progress=False)
    shutil.rmtree(out / "y" / "c")  # and point outputs lost: still found lost after the upgrade
    with Store.open(out, s.loaded) as store:
        assert store.todo() == {(0,), (1,)}
    ds = open_results(out)
    assert {"returned", "shapes", "inputs"} <= set(ds.variables)
    assert set(ds["returned"].values) == {",".join(json.loads(ds.attrs["sweep_outputs"]))}


@pytest.mark.slow
def test_a_finished_store_opens_in_plain_xarray_without_a_warning_and_stays_true_on_growth(client, out):
    """Plain ``xarray.open_zarr`` (consolidated metadata first) reads every variable and point,
    with no warning about unconsolidated metadata or the driver's side files."""
    import warnings

    import xarray as xr

    def plain():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return xr.open_zarr(out)

    Sweep(job("square"), {"grid": {"x": [1.0, 2.0]}}, output=out).run(client=client, progress=False)
    assert (out / ".sweep.lock").exists()  # side files are there, and zarr does not list them
    ds = plain()
    assert ds.sizes["x"] == 2 and ds["y"].values.tolist() == [1.0, 4.0]
    # grown to a new value: the copy is made again from the grown store
    grown = Sweep(job("square"), {"grid": {"x": [1.0, 2.0, 3.0]}}, output=out)
    grown.run(client=client, progress=False)
    ds = plain()
    assert ds.sizes["x"] == 3 and ds["y"].values.tolist() == [1.0, 4.0, 9.0]
    assert (ds["status"] == "done").all()
    assert set(ds.variables) == set(open_results(out).variables)


@pytest.mark.slow
def test_a_points_many_new_outputs_are_created_in_one_xarray_write(client, out, monkeypatch):
    """Found: each new output was its own to_zarr, which lists every member of the group: 3000
    scalar outputs took ~36 minutes for 2 points. One xarray write per dtype now, the rest copies."""
    import xarray as xr

    calls = []
    original = xr.Dataset.to_zarr

    def counted(self, *args, **kwargs):
        calls.append(sorted(self.data_vars))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_zarr", counted)
    s = Sweep(job("many_outputs"), {"grid": {"x": [1, 2]}, "fixed": {"n": 200}}, output=out)
    ds = s.run(client=client, progress=False)
    adding = [c for c in calls if any(name.startswith("out_") for name in c)]
    assert len(adding) == 1, [len(c) for c in adding]
    assert (ds["status"] == "done").all() and ds["out_0199"].values.tolist() == [199.0, 398.0]
    monkeypatch.undo()
    plain = xr.open_zarr(out)  # consolidated: the copied variables read as xarray's own
    assert plain["out_0007"].dims == ("x",) and plain["out_0007"].values.tolist() == [7.0, 14.0]


def test_a_new_store_writes_no_chunk_of_its_unset_variables_text_included(out):
    """A million points' text variables, built as NumPy object arrays to be written, held
    ~0.5 GB while the store was made: the skeleton now leaves every per-point variable's chunks
    unwritten (a reader gets its fill value) and writes the points' ids alone."""
    with Store.open(out, loaded(out)):
        pass
    for name in RECORD_VARS:
        assert [p.name for p in (out / name).iterdir()] == ["zarr.json"], name
    ds = open_results(out)
    assert (ds["status"].values == "pending").all() and (ds["host"].values == "").all()
    space = loaded(out).space
    assert [ds["point_id"].values[p.index] for p in space.points()] == [p.id for p in space.points()]


@pytest.fixture
def reader_at_every_move(out, monkeypatch):
    """``watch()`` from then on opens the store ``out`` as a reader at every metadata file or
    folder moved into place (zarr writes each file aside and moves it in; the store moves in
    new variables) and returns the list of what it saw: a reader that meets a half-made
    variable raises StoreDamaged."""
    import os
    from pathlib import Path

    real, seen = os.replace, []

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == "zarr.json" or Path(src).is_dir():
            seen.append(sorted(open_results(out, load=False).data_vars))
        return real(src, dst, *args, **kwargs)

    def watch():
        monkeypatch.setattr(os, "replace", replace)
        return seen

    return watch


@pytest.mark.slow  # about 3 s: a reader at every move of the store
def test_a_reader_never_sees_an_output_half_added(out, reader_at_every_move):
    """Found under load: a test polling `open_results` while the first point's outputs were
    added got StoreDamaged ("y/zarr.json: damaged store metadata (the file is missing)"): zarr
    makes a variable's folder before it writes its metadata there."""
    from sweep.wire.protocol import Output

    with Store.open(out, loaded(out)) as store:
        seen = reader_at_every_move()
        with_coords = Output(np.zeros(2), ("t",), {"t": np.array([0, 1])})
        outputs = {"y": Output(np.float64(1.0), ()), "z": Output(np.float64(2.0), ()), "w": with_coords}
        (written,) = store.write([PointRecord((0, 0), status="done", outputs=outputs)])
    assert written.status == "done" and seen
    assert {"w", "y", "z"} <= set(open_results(out).data_vars)


@pytest.mark.slow  # about 3 s: a reader at every move of the store
def test_a_reader_never_sees_a_per_point_variable_half_added_to_an_older_store(out, reader_at_every_move):
    """A store made by an earlier version gets the per-point variables it lacks as it is
    opened, while a reader (`sweep status`) may look, the same way as new outputs."""
    import shutil

    with Store.open(out, loaded(out)):
        pass
    shutil.rmtree(out / "peak_gpu_memory")  # as a store made before it was recorded
    seen = reader_at_every_move()
    with Store.open(out, loaded(out)):
        pass
    assert any("peak_gpu_memory" not in names for names in seen)
    assert "peak_gpu_memory" in open_results(out).data_vars


def test_a_new_store_computes_nothing_on_a_default_client_with_no_worker(out):
    """Made while a distributed client is the default (the run's own cluster starting beside
    the store, or a batch cluster whose jobs are still queued), the skeleton sent its text
    variables to that cluster to be computed, and waited for a worker to run them."""
    from distributed import Client, LocalCluster

    made = threading.Event()

    def make():
        with Store.open(out, loaded(out)):
            made.set()

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, Client(cluster):
        maker = threading.Thread(target=make, daemon=True)
        maker.start()
        maker.join(60)  # a store of 6 points is made in well under a second
        tasks = cluster.scheduler.transition_counter
    maker.join(30)  # with the defect, closing the client ends the wait
    assert made.is_set() and tasks == 0


def test_an_attribute_written_after_the_store_moved_is_refused_and_makes_nothing(out, tmp_path):
    """Found: a listener's last attribute write made a phantom store at the old path of a store
    moved under its sweep (zarr creates what is missing)."""
    import shutil

    from sweep.store import StoreGone

    store = Store.open(out, loaded(out))
    try:
        shutil.move(str(out), str(tmp_path / "elsewhere.zarr"))
        with pytest.raises(StoreGone, match="was moved or deleted"):
            store.set_attrs(sweep_note="x")
        assert not out.exists()
    finally:
        store.close()
