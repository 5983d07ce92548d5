"""Recipes: loading, overrides, and a corpus of malformed recipes that must exit 2."""

import os
from pathlib import Path

import pytest

from sweep.cli.app import main
from sweep.model.recipe import Recipe, RecipeError
from tests.helpers import ROOT

BAD = sorted((ROOT / "tests" / "bad_recipes").glob("*.yaml"))
QUICKSTART = ROOT / "recipes" / "quickstart.yaml"


def expected(path: Path) -> str:
    first = path.read_bytes().decode(errors="replace").splitlines()[0]  # not_utf8.yaml is not
    assert first.startswith("# expect: "), path
    return first.removeprefix("# expect: ")


def test_corpus_is_large_enough():
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_recipe_exits_2_with_a_precise_message_and_touches_nothing(path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = main(["submit", str(path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert expected(path) in err, err
    assert err.startswith("sweep submit: error: ")
    assert os.listdir(tmp_path) == []  # no output, no cluster files


def test_quickstart_validates_and_lists_points(capsys):
    assert main(["validate", str(QUICKSTART)]) == 0
    out = capsys.readouterr().out
    assert "grid" in out and "12 points" in out and "wavelength" in out


def test_overrides_apply_before_validation(tmp_path):
    loaded = Recipe.load(QUICKSTART, ["resources.threads=2", "params.fixed.steps=3", f"output={tmp_path}/x"])
    assert loaded.recipe.resources.threads == 2
    assert loaded.recipe.params.fixed["steps"] == 3
    assert loaded.output == tmp_path / "x"
    with pytest.raises(RecipeError, match="resources.threads"):
        Recipe.load(QUICKSTART, ["resources.threads=0"])


def test_sizes_and_durations_use_the_strings_cluster_users_write():
    data = {"job": "tests/jobs.py:noop", "params": {"grid": {"x": [1]}}}
    for timeout, seconds in (("20min", 1200), ("90s", 90), ("01:30:00", 5400), (45, 45)):
        r = Recipe.from_dict({**data, "resources": {"timeout": timeout, "memory": "2GiB"}}).recipe
        assert r.resources.timeout == seconds and r.resources.memory == 2 * 2**30
    assert Recipe.from_dict(data).recipe.resources.stall == 300  # the stall watchdog is on by default
    assert Recipe.from_dict({**data, "resources": {"stall": "none"}}).recipe.resources.stall is None
    assert Recipe.from_dict({**data, "resources": {"stall": "2min"}}).recipe.resources.stall == 120


def test_job_signature_is_read_without_importing_the_job(tmp_path):
    (tmp_path / "heavy.py").write_text("raise SystemExit('imported!')\ndef f(a, b=1):\n    return {}\n")
    loaded = Recipe.from_dict({"job": "heavy.py:f", "params": {"grid": {"a": [1]}}}, base=tmp_path)
    assert loaded.job.kind == "file" and loaded.job.function == "f"


def test_attempts_longer_than_the_batch_walltime_warn(tmp_path, capsys):
    import warnings

    from sweep.errors import SweepWarning

    cluster = ROOT / "recipes" / "ceviche_cluster.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SweepWarning)
        Recipe.load(cluster)  # the shipped recipe fits its walltime
    with pytest.warns(
        SweepWarning, match=r"7200 s x \(retries 2 \+ 1\) = 21600 s is longer than cluster.walltime"
    ):
        Recipe.load(cluster, ["resources.timeout=2h"])


def test_a_local_cluster_memory_above_the_machines_is_warned_about(tmp_path):
    import warnings

    import psutil

    from sweep.errors import SweepWarning

    recipe = tmp_path / "r.yaml"
    too_much = f"{psutil.virtual_memory().total // 2**30 + 64}GiB"
    job = QUICKSTART.parent / "jobs" / "fdfd.py"
    recipe.write_text(f"job: {job}:optimize\nparams: {{grid: {{seed: [0]}}}}\n")
    for memory, warned in ((too_much, True), ("1GiB", False)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            Recipe.load(recipe, [f"cluster.memory={memory}"])
        said = [str(w.message) for w in seen if issubclass(w.category, SweepWarning)]
        assert any("more than this machine's" in s for s in said) == warned, said
