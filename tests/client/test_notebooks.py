"""The notebooks run top to bottom in a real kernel (small sizes through their parameters)."""

import importlib.util
import os
from pathlib import Path

import pytest

from tests.helpers import ROOT

NOTEBOOKS = ROOT / "notebooks"
SMALL = {
    "SWEEP_NOTEBOOK_STEPS": "3",
    "SWEEP_NOTEBOOK_SEEDS": "0",
    "SWEEP_NOTEBOOK_CHALLENGES": "ceviche_lightweight_waveguide_bend",
}

pytestmark = pytest.mark.slow


def execute(name: str, tmp_path: Path, monkeypatch, backend: str = "Agg") -> None:
    """Run the notebook ``name``; ``backend`` "inline" plots as a user's kernel does (inline
    figures in the cell), "Agg" draws them off-screen."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in SMALL.items():
        monkeypatch.setenv(key, value)
    if backend == "inline":
        monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's own default: inline
    else:
        monkeypatch.setenv("MPLBACKEND", backend)
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
    """In the inline backend a Meep user's kernel plots with (Debian's matplotlib there)."""
    execute("meep.ipynb", tmp_path, monkeypatch, backend="inline")


LIVE_RUN_CELLS = [
    "import sys, time\n"
    "if {block_widgets}:\n"
    "    sys.modules['ipywidgets'] = None  # as where ipywidgets is not installed\n"
    "import numpy as np\n"
    "import pandas as pd\n"
    "import sweep\n"
    "s = sweep.Sweep(job={job!r}, params={{'grid': {{'x': list(range(6))}}, 'fixed': {{'seconds': 1.5}}}},\n"
    "                resources={{'threads': 1}}, output={output!r})",
    "run = s.start()",
    "while run.progress()['running'] == 0:\n    time.sleep(0.05)",
    "print(np.arange(12).reshape(3, 4))\nprint('two\\nlines')",
    "pd.DataFrame({'a': [1, 2]})",
    "raise ValueError('my own error')",
    "ds = run.wait()\nprint(int((ds['status'] == 'done').sum()))",
]


@pytest.mark.parametrize("widgets", [True, False], ids=["ipywidgets", "html"])
def test_a_background_run_leaves_the_notebooks_other_cells_alone(tmp_path, widgets):
    """While a run started with ``s.start()`` is live, other cells print, show a DataFrame and
    raise exactly as they would without it; the progress lives in the starting cell only."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if widgets:
        pytest.importorskip("ipywidgets")
    values = {
        "block_widgets": not widgets,
        "job": f"{NOTEBOOKS.parent / 'tests' / 'jobs.py'}:square",
        "output": str(tmp_path / "live.zarr"),
    }
    nb = nbformat.v4.new_notebook()
    sources = [LIVE_RUN_CELLS[0].format(**values), *LIVE_RUN_CELLS[1:]]
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.cells[5].metadata["tags"] = ["raises-exception"]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    outputs = [cell.outputs for cell in nb.cells]
    everything = str(outputs)
    assert "RecursionError" not in everything and "ipywidgets" not in everything.replace("widget-view", "")
    printed, frame, raised, waited = outputs[3:]
    assert [(o.output_type, o.get("name"), o.get("text")) for o in printed] == [
        ("stream", "stdout", "[[ 0  1  2  3]\n [ 4  5  6  7]\n [ 8  9 10 11]]\ntwo\nlines\n")
    ]
    assert [o.output_type for o in frame] == ["execute_result"] and "a" in frame[0].data["text/plain"]
    assert [(o.output_type, o.ename) for o in raised] == [("error", "ValueError")]
    assert any(o.output_type == "stream" and o.text.strip().endswith("6") for o in waited), waited
    shown = outputs[1]
    if widgets:
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in shown), shown
    else:  # the block was updated in place to the final counts and the closing table
        html = [o.data["text/html"] for o in shown if "text/html" in o.get("data", {})]
        assert len(html) == 1 and "6/6" in html[0] and "points done" in html[0], shown
