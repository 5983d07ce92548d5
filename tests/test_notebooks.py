"""The notebooks run top to bottom in a real kernel (small sizes through their parameters)."""

import importlib.util
import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SMALL = {
    "SWEEP_NOTEBOOK_STEPS": "3",
    "SWEEP_NOTEBOOK_SEEDS": "0",
    "SWEEP_NOTEBOOK_CHALLENGES": "ceviche_lightweight_waveguide_bend",
}

pytestmark = pytest.mark.slow


def execute(name: str, tmp_path: Path, monkeypatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in SMALL.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # run in a scratch copy of the notebooks folder so results/ lands there
    work = tmp_path / "notebooks"
    work.mkdir()
    os.symlink(NOTEBOOKS.parent / "recipes", tmp_path / "recipes")
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    ).execute()
    assert (work / "results").exists()


def test_quickstart_notebook_runs(tmp_path, monkeypatch):
    execute("quickstart.ipynb", tmp_path, monkeypatch)


@pytest.mark.skipif(importlib.util.find_spec("invrs_gym") is None, reason="needs the photonics extra")
def test_photonics_notebook_runs(tmp_path, monkeypatch):
    execute("photonics.ipynb", tmp_path, monkeypatch)


def test_search_notebook_runs(tmp_path, monkeypatch):
    execute("search.ipynb", tmp_path, monkeypatch)


@pytest.mark.skipif(importlib.util.find_spec("meep") is None, reason="needs Meep (make meep-env)")
def test_meep_notebook_runs(tmp_path, monkeypatch):
    execute("meep.ipynb", tmp_path, monkeypatch)
