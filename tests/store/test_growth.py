"""Growing a sweep keeps every point already run, value for value, and runs only the new ones."""

import json

import numpy as np
import pytest

from sweep import Sweep, open_results
from sweep.cli.app import main
from sweep.model.recipe import Recipe
from sweep.store import Store
from tests.helpers import JOBS, write_recipe

PER_POINT = ["y", "vec", "curve", "status", "started", "wall_s", "peak_rss", "point_id"]


def recipe(tmp_path, params):
    return write_recipe(
        tmp_path / "grow.yaml", name="grow", job="square", params=params, output=tmp_path / "out.zarr"
    )


def submit(path, capsys, *extra):
    """In-process submit with the progress display (its growth line is on stderr)."""
    rc = main(["submit", str(path), *extra])
    return rc, capsys.readouterr().err


def by_id(ds):
    """Each point's per-point values keyed by point_id (trailing dims kept)."""
    ids = ds["point_id"].values.ravel()
    flat = {n: ds[n].values.reshape(len(ids), *ds[n].shape[len(ds["status"].dims) :]) for n in PER_POINT}
    return {pid: {n: flat[n][i] for n in PER_POINT} for i, pid in enumerate(ids)}


def assert_kept(before, after):
    old, new = by_id(before), by_id(after)
    assert set(old) <= set(new)
    for pid, values in old.items():
        for name, v in values.items():
            assert np.array_equal(np.asarray(v), np.asarray(new[pid][name])), (pid, name)


@pytest.mark.slow
def test_a_grown_grid_keeps_the_done_points_and_runs_the_new_ones(client, tmp_path, capsys):
    path = recipe(tmp_path, {"grid": {"x": [1.0, 2.0, 3.0], "offset": [0.0, 10.0]}})
    out = tmp_path / "out.zarr"
    assert submit(path, capsys)[0] == 0
    before = open_results(out).load()
    grown = ["--set", "params.grid.x=[0.5, 1.0, 2.0, 3.0, 4.0, 5.0]"]
    rc, err = submit(path, capsys, *grown)
    assert rc == 0, err
    assert "the space changed: 6 kept, 6 new" in err
    after = open_results(out)
    assert after["status"].shape == (6, 2) and (after["status"] == "done").all()
    assert_kept(before, after)
    assert float(after["y"].sel(x=5.0, offset=10.0)) == 35.0
    entry = json.loads(after.attrs["sweep_history"])[-1]
    assert entry["grew"] == "6 kept, 6 new" and entry["points"] == [6, 12]
    assert after.attrs["sweep_created"] == before.attrs["sweep_created"]
    # only the new points ran: their start times are later than every kept one's
    kept = after["started"].sel(x=[1.0, 2.0, 3.0]).values
    new = after["started"].sel(x=[0.5, 4.0, 5.0]).values
    assert np.array_equal(kept, before["started"].values) and new.min() >= kept.max()


@pytest.mark.slow
def test_a_grown_random_space_keeps_its_first_points(client, tmp_path, capsys):
    space = {"random": {"n": 4, "seed": 3, "axes": {"x": [0.0, 2.0], "offset": [0, 5]}}}
    path = recipe(tmp_path, space)
    assert submit(path, capsys, "--no-progress")[0] == 0
    before = open_results(tmp_path / "out.zarr").load()
    rc, err = submit(path, capsys, "--set", "params.random.n=8")
    assert rc == 0 and "4 kept, 4 new" in err, err
    after = open_results(tmp_path / "out.zarr")
    assert (after["status"] == "done").all() and after["status"].shape == (8,)
    assert_kept(before, after)
    assert np.array_equal(after["x"].values[:4], before["x"].values)


@pytest.mark.slow
def test_a_list_grown_in_the_middle_keeps_points_by_their_values(client, tmp_path, capsys):
    rows = [{"x": 1.0, "offset": 0.0}, {"x": 2.0, "offset": 0.0}, {"x": 3.0, "offset": 0.0}]
    path = recipe(tmp_path, {"list": rows})
    assert submit(path, capsys, "--no-progress")[0] == 0
    before = open_results(tmp_path / "out.zarr").load()
    grown = [{"x": 9.0, "offset": 1.0}, *rows[:2], {"x": 7.0, "offset": 0.0}, rows[2]]
    path = recipe(tmp_path, {"list": grown})
    rc, err = submit(path, capsys)
    assert rc == 0 and "3 kept, 2 new" in err, err
    after = open_results(tmp_path / "out.zarr")
    assert list(after["y"].values) == [82.0, 1.0, 4.0, 49.0, 9.0]
    # the points that ran keep their records, wherever the new ones came in
    assert list(after["started"].values[[1, 2, 4]]) == list(before["started"].values)


@pytest.mark.slow
def test_a_shrunk_grid_is_refused_with_the_points_it_would_drop(client, tmp_path, capsys):
    path = recipe(tmp_path, {"grid": {"x": [1.0, 2.0, 3.0], "offset": [0.0]}})
    out = tmp_path / "out.zarr"
    assert submit(path, capsys, "--no-progress")[0] == 0
    before = open_results(out).load()
    shrunk = ["--no-progress", "--set", "params.grid.x=[1.0, 2.0]"]
    rc, err = submit(path, capsys, *shrunk)
    assert rc == 2, err
    assert "leaves out 1 point(s) that already ran" in err and "{'x': 3.0, 'offset': 0.0}" in err
    assert "--keep-done" in err and "--force" in err
    assert by_id(open_results(out)).keys() == by_id(before).keys()  # untouched
    rc, err = submit(path, capsys, *shrunk, "--keep-done")
    assert rc == 0, err
    after = open_results(out)
    assert list(after["x"].values) == [1.0, 2.0]
    assert_kept(before.sel(x=[1.0, 2.0]), after)
    assert json.loads(after.attrs["sweep_history"])[-1]["dropped"] == [{"x": 3.0, "offset": 0.0}]
    rc, err = submit(path, capsys, "--no-progress", "--set", "params.grid.x=[1.0]", "--force")
    assert rc == 0, err
    assert "sweep_history" not in open_results(out).attrs  # started over


@pytest.mark.slow
def test_a_rebuild_cut_short_puts_the_old_store_back(client, tmp_path, capsys, monkeypatch):
    path = recipe(tmp_path, {"grid": {"x": [1.0, 2.0], "offset": [0.0]}})
    out = tmp_path / "out.zarr"
    assert submit(path, capsys, "--no-progress")[0] == 0
    before = open_results(out).load()
    import sweep.store.creation

    real, moved_in = sweep.store.creation.os.replace, []

    def dies_midway(src, dst):  # the third entry of the new store moved into place fails
        if ".creating-" in str(src) and str(dst).startswith(f"{out}/"):
            moved_in.append(src)
            if len(moved_in) == 3:
                raise OSError("killed")
        real(src, dst)

    monkeypatch.setattr(sweep.store.creation.os, "replace", dies_midway)
    grown = Recipe.load(path, ["params.grid.x=[1.0, 2.0, 3.0]"])
    with pytest.raises(OSError, match="killed"):
        Store.open(out, grown)
    monkeypatch.setattr(sweep.store.creation.os, "replace", real)
    assert not (out / "zarr.json").exists()  # cut between moving the old one out and the new one in
    with Store.open(out, Recipe.load(path)) as store:
        assert store.growth is None and not store.todo()
    assert_kept(before, open_results(out))


def test_a_rebuild_killed_midway_leaves_nothing_after_the_next_open(client, tmp_path):
    """Found: a kill during a growth rebuild left `.NAME.zarr.creating-PID` beside the store."""
    out = tmp_path / "out.zarr"
    s = Sweep(f"{JOBS}:square", {"grid": {"x": [1.0]}}, output=out)
    s.run(client=client, progress=False)
    left = tmp_path / ".out.zarr.creating-99999"
    (left / "y").mkdir(parents=True)
    Store.open(out, s.loaded).close()
    assert not left.exists()
