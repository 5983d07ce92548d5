"""`sweep init` (sweep/cli/starter.py) from a checkout; tests/test_install.py tries a wheel."""

from pathlib import Path

import yaml

from sweep.cli.app import main

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_init_writes_the_repositorys_own_quickstart_and_job(tmp_path, capsys):
    assert main(["init", str(tmp_path / "proj")]) == 0
    job = "jobs/fdfd.py"
    assert (tmp_path / "proj" / job).read_text() == (RECIPES / job).read_text()
    mine = (tmp_path / "proj" / "quickstart.yaml").read_text()
    theirs = (RECIPES / "quickstart.yaml").read_text()
    assert yaml.safe_load(mine) == yaml.safe_load(theirs)  # the same recipe, its comments the user's


def test_the_written_recipe_says_how_to_run_it_and_where_its_output_goes(tmp_path, capsys):
    """Found: it said "Run it with `make run`", which a user of the wheel has not, and not that
    its output is relative to the folder `sweep submit` runs in."""
    assert main(["init", str(tmp_path / "proj")]) == 0
    text = (tmp_path / "proj" / "quickstart.yaml").read_text()
    assert f"# Run it with `sweep submit {tmp_path / 'proj' / 'quickstart.yaml'}`." in text
    assert "make run" not in text and "relative to the folder you run `sweep submit` in" in text


def test_init_overwrites_nothing(tmp_path, capsys):
    (tmp_path / "quickstart.yaml").write_text("mine")
    assert main(["init", str(tmp_path)]) == 2
    assert "quickstart.yaml already exists;" in capsys.readouterr().err
    assert (tmp_path / "quickstart.yaml").read_text() == "mine"
    assert not (tmp_path / "jobs").exists()
