"""`sweep init` (sweep/cli/starter.py) from a checkout; tests/test_install.py tries a wheel."""

from pathlib import Path

from sweep.cli.app import main
from sweep.cli.starter import FILES

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_init_writes_the_repositorys_own_quickstart_and_job(tmp_path, capsys):
    assert main(["init", str(tmp_path / "proj")]) == 0
    for name in FILES:
        assert (tmp_path / "proj" / name).read_text() == (RECIPES / name).read_text(), name


def test_init_overwrites_nothing(tmp_path, capsys):
    (tmp_path / "quickstart.yaml").write_text("mine")
    assert main(["init", str(tmp_path)]) == 2
    assert "quickstart.yaml already exist" in capsys.readouterr().err
    assert (tmp_path / "quickstart.yaml").read_text() == "mine"
    assert not (tmp_path / "jobs").exists()
