"""A sweep deletes or writes only what it made: a folder of a user's files is refused, with or
without --force, and --force deletes only a store's own entries."""

import pytest

from sweep.model.recipe import Recipe
from sweep.store import Store, ownership
from sweep.store.layout import LOCK_NAME, MARK
from tests.helpers import job, submit, write_recipe


def loaded(output):
    return Recipe.from_dict(
        {"job": job("square"), "params": {"grid": {"x": [1.0, 2.0]}}, "output": str(output)}
    )


def users_folder(path):
    path.mkdir()
    (path / "thesis.tex").write_text("\\chapter{one}")
    other = path / "other.zarr"
    other.mkdir()
    (other / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    return {p.relative_to(path): p.read_bytes() if p.is_file() else None for p in path.rglob("*")}


def contents(path):
    return {p.relative_to(path): p.read_bytes() if p.is_file() else None for p in path.rglob("*")}


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_of_a_users_files_is_refused_and_left_as_it_was(tmp_path, force):
    before = users_folder(tmp_path / "mine")
    with pytest.raises(ownership.NotAStore, match=r"not a sweep store .*other\.zarr/, thesis\.tex") as err:
        Store.open(tmp_path / "mine", loaded(tmp_path / "mine"), force=force)
    assert "parts of a store" not in str(err.value) and "--force deletes only" in str(err.value)
    assert contents(tmp_path / "mine") == before  # nothing made, no lock left


def test_a_new_store_is_marked_and_force_keeps_what_the_user_put_beside_it(tmp_path):
    out = tmp_path / "s.zarr"
    Store.open(out, loaded(out)).close()
    assert (out / MARK).exists() and ownership.marked(out)
    (out / "notes.txt").write_text("mine")
    Store.open(out, loaded(out), force=True).close()
    assert (out / "notes.txt").read_text() == "mine" and (out / "zarr.json").exists()


def test_a_store_without_its_metadata_is_still_the_sweeps_and_force_starts_it_over(tmp_path):
    out = tmp_path / "s.zarr"
    Store.open(out, loaded(out)).close()
    (out / "zarr.json").unlink()
    with pytest.raises(Exception, match="store without its"):
        Store.open(out, loaded(out))
    Store.open(out, loaded(out), force=True).close()
    assert (out / "zarr.json").exists()


def test_a_folder_with_only_a_sweeps_lock_is_new(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / LOCK_NAME).write_text("")
    Store.open(tmp_path / "o", loaded(tmp_path / "o")).close()


@pytest.mark.parametrize("where", ["project", "stores"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_submit_into_the_project_or_a_folder_of_stores_is_one_line_and_deletes_nothing(
    tmp_path, capsys, monkeypatch, where, force
):
    project = tmp_path / "project"
    project.mkdir()
    recipe = write_recipe(project / "r.yaml", job="square", params={"grid": {"x": [1.0]}})
    if where == "stores":
        users_folder(project / "results")
        output = project / "results"
    else:
        output = project
    before = contents(project)
    monkeypatch.chdir(project)
    rc, err = submit(recipe, capsys, "--output", str(output), *force)
    assert rc == 2 and "is not a sweep store" in err and len(err.strip().splitlines()) == 1, err
    assert contents(project) == before
