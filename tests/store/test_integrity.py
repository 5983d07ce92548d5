"""A point is `done` only if what is stored is what its job returned (found by trying).

Each scenario runs real jobs on the session's LocalCluster into a real zarr store.
"""

import shutil

import numpy as np
import pytest
import yaml

from sweep import Sweep
from sweep.cli.app import main
from sweep.model.recipe import Recipe
from tests.helpers import JOBS, job


def drift(client, out, how):
    """x == 1 runs first, alone, and fixes the store's schema; the grid then grows to x = 2, 3
    (which of two concurrent points is stored first is not for a test to assume)."""
    Sweep(job("drift"), {"grid": {"x": [1]}, "fixed": {"how": how}}, output=out).run(
        client=client, progress=False
    )
    s = Sweep(job("drift"), {"grid": {"x": [1, 2, 3]}, "fixed": {"how": how}}, output=out)
    return s.run(client=client, progress=False)


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("complex", "complex128 here but float64 in the store"),
        ("overflow", "float64 here but float32 in the store"),
        ("coords", "coordinate 't' is [0.0, 10.0, 20.0] here but [0.0, 1.0, 2.0] in the store"),
    ],
)
@pytest.mark.slow
def test_an_output_that_drifts_from_the_stores_schema_fails_its_point(client, out, how, reason):
    ds = drift(client, out, how)
    assert ds["status"].sel(x=1).item() == "done"
    assert (ds["status"].sel(x=[2, 3]) == "failed").all(), ds["status"].values
    assert reason in ds["error"].sel(x=2).item(), ds["error"].sel(x=2).item()
    assert np.isnan(ds["v"].sel(x=[2, 3]).values).all()  # nothing half-stored under a failed point


@pytest.mark.slow
def test_outputs_that_fit_the_store_exactly_are_done(client, out):
    ds = drift(client, out, "same")
    assert (ds["status"] == "done").all()
    assert ds["v"].sel(x=3).values.tolist() == [3.0, 3.0]


def test_yaml_numbers_are_numbers_in_recipes_and_overrides(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "job: "
        + f"{JOBS}:typed\n"
        + "params:\n  grid: {x: [1e-3, 1.0e308, 2E+2, .5, -3]}\n  fixed: {lr: 1e-2}\n"
    )
    loaded = Recipe.load(recipe, ["params.fixed.k=1e+3"])
    assert [type(v) for v in loaded.space.coords["x"][1]] == [np.float64] * 5
    assert loaded.recipe.params.fixed == {"lr": 0.01, "k": 1000.0}
    assert Recipe.load(recipe, ["params.fixed.k=3"]).recipe.params.fixed["k"] == 3


def test_a_mixed_axis_names_the_values(tmp_path):
    from sweep.model.recipe import RecipeError

    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"job: {JOBS}:typed\nparams:\n  grid: {{x: [1, 2, abc]}}\n")
    with pytest.raises(RecipeError, match=r"'abc' is a str among numbers"):
        Recipe.load(recipe)


def damaged_rerun(client, out, tmp_path, damage, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {"job": f"{JOBS}:square", "params": {"grid": {"x": [1.0, 2.0, 3.0, 4.0]}}, "output": str(out)}
        )
    )
    first = Sweep.from_yaml(recipe).run(client=client, progress=False)
    assert (first["status"] == "done").all()
    damage(out)
    capsys.readouterr()
    assert main(["status", str(out)]) == 1  # the damage is seen before anything runs
    said = capsys.readouterr().out
    assert "damaged  4 (done, but their stored outputs are missing or unreadable" in said, said
    again = Sweep.from_yaml(recipe).run(client=client, progress=False)
    assert (again["status"] == "done").all()
    np.testing.assert_array_equal(again["curve"].values, first["curve"].values)
    return first, again


@pytest.mark.slow  # about 3 s (5 s on a slow machine): a sweep run twice
def test_a_deleted_output_chunk_is_not_done_and_runs_again(client, out, tmp_path, capsys):
    def damage(path):
        chunks = sorted(p for p in (path / "curve").rglob("*") if p.is_file() and p.name != "zarr.json")
        chunks[0].unlink()

    first, again = damaged_rerun(client, out, tmp_path, damage, capsys)
    assert (again["started"].values > first["started"].values).all()  # one chunk held every point


@pytest.mark.slow  # about 3 s (5 s on a slow machine): a sweep run twice
def test_a_deleted_output_variable_is_not_done_and_runs_again(client, out, tmp_path, capsys):
    damaged_rerun(client, out, tmp_path, lambda path: shutil.rmtree(path / "vec"), capsys)


def test_damaged_metadata_is_one_line_naming_the_file(client, out, tmp_path, capsys):
    Sweep(job("square"), {"grid": {"x": [1.0]}}, output=out).run(client=client, progress=False)
    (out / "y" / "zarr.json").write_text("{not json")
    assert main(["status", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out / "y" / "zarr.json") in err, err


@pytest.mark.parametrize(
    "fixed",
    [{}, {"size": 200_000}, {"size": 200_000, "skip": 2}],
    ids=["nan-scalar", "nan-array-chunk-per-point", "output-not-returned"],
)
def test_done_points_whose_outputs_are_nan_or_absent_are_not_damaged(client, out, capsys, fixed):
    """Found: zarr writes no chunk that holds only NaN, and the integrity check read the
    missing chunk as lost data: `status` said damaged and every submit reran the points."""
    s = Sweep(job("nan_out"), {"grid": {"x": [0, 1, 2, 3]}, "fixed": fixed}, output=out)
    ds = s.run(client=client, progress=False)
    assert (ds["status"] == "done").all(), ds["error"].values
    assert np.isnan(ds["loss"].values).all()
    capsys.readouterr()
    assert main(["status", str(out)]) == 0
    assert "damaged" not in capsys.readouterr().out
    again = Sweep(job("nan_out"), {"grid": {"x": [0, 1, 2, 3]}, "fixed": fixed}, output=out)
    again.run(client=client, progress=False)
    assert again.stats["points_run"] == 0


@pytest.mark.slow
def test_a_failed_point_fixes_no_output_schema(client, out):
    """Found: x=1's new output `a` was created before its complex `b` failed the point, so x=2's
    `a` was refused against a shape that no point stored, and x=0 read damaged."""
    from sweep.store import lost_points

    ds = Sweep(job("schema_race"), {"grid": {"x": [0, 1, 2]}}, output=out).run(client=client, progress=False)
    assert list(ds["status"].values) == ["done", "failed", "done"], ds["error"].values
    assert "complex128 here but float64" in ds["error"].values[1]
    assert ds["a"].sel(x=2).values.tolist() == [0, 1, 2, 3, 4]
    assert not lost_points(out).any()


@pytest.mark.parametrize("damage", ["garbled", "removed"])
@pytest.mark.parametrize("variable", ["status", "y"])
def test_damaged_variable_metadata_is_one_line_for_every_command(
    client, out, tmp_path, capsys, variable, damage
):
    """Found: a garbled or missing `status/zarr.json` gave KeyError / JSONDecodeError tracebacks."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump({"job": job("square"), "params": {"grid": {"x": [1.0]}}, "output": str(out)})
    )
    Sweep.from_yaml(recipe).run(client=client, progress=False)
    meta = out / variable / "zarr.json"
    meta.write_text('{"bad') if damage == "garbled" else meta.unlink()
    for argv in (["status", str(out)], ["submit", str(recipe), "--no-progress", "--keep-done"]):
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2, (argv, err)
        assert len(err.splitlines()) == 1 and str(meta) in err and "--force" in err, (argv, err)
    assert main(["ls", str(tmp_path)]) == 0  # the other stores are still listed; this one says why
    assert f"damaged: {meta}" in capsys.readouterr().out


def test_a_sweep_over_the_design_size_keeps_every_design(client, out):
    from sweep import unpadded

    ds = Sweep(job("design_of_size"), {"grid": {"n": [2, 4, 3]}}, output=out).run(
        client=client, progress=False
    )
    assert (ds["status"] == "done").all(), ds["error"].values
    assert ds["design"].shape == (3, 4, 4)
    for n in (2, 3, 4):
        design = unpadded(ds, "design", n=n)
        assert design.shape == (n, n) and (design.values == n).all()
    assert np.isnan(ds["design"].sel(n=2).values[2:, :]).all()
