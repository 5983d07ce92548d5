"""A rerun never returns results computed from other inputs (found by trying, issue: trust)."""

import json
from pathlib import Path

import pytest
import yaml

from sweep import Sweep, open_results
from sweep.cli.app import main
from tests.helpers import JOBS, submit, write_recipe


def recipe(tmp_path, fixed=None, job_file=None, env=None):
    return write_recipe(
        tmp_path / "stale.yaml",
        name="stale",
        job=f"{job_file or JOBS}:scaled",
        params={"grid": {"x": [1, 2, 3]}, "fixed": fixed or {"scale": 1.0}},
        child={"env": env or {}},
        output=tmp_path / "out.zarr",
    )


@pytest.mark.slow
def test_a_changed_fixed_parameter_is_refused_with_the_difference(client, tmp_path, capsys):
    """Found: `--set params.fixed.scale=10.0` onto the same output ran nothing and exited 0."""
    path = recipe(tmp_path)
    assert submit(path, capsys)[0] == 0
    rc, err = submit(path, capsys, "--set", "params.fixed.scale=10.0")
    assert rc == 2, err
    assert "params.fixed.scale: 1.0 → 10.0" in err and "--keep-done" in err and "--force" in err
    assert list(open_results(tmp_path / "out.zarr")["value"].values) == [1.0, 2.0, 3.0]
    assert submit(path, capsys, "--set", "params.fixed.scale=10.0", "--force")[0] == 0
    assert list(open_results(tmp_path / "out.zarr")["value"].values) == [10.0, 20.0, 30.0]


def test_an_edited_job_source_is_refused(client, tmp_path, capsys):
    job = tmp_path / "job.py"
    job.write_text("def scaled(x, scale=1.0):\n    return {'value': float(x * scale)}\n")
    path = recipe(tmp_path, job_file=job)
    assert submit(path, capsys)[0] == 0
    job.write_text("def scaled(x, scale=1.0):\n    return {'value': float(x * scale + 1)}\n")
    rc, err = submit(path, capsys)
    assert rc == 2 and f"job {job}:scaled: source changed (sha256 " in err, err


@pytest.mark.slow
def test_a_changed_child_env_is_refused(client, tmp_path, capsys):
    assert submit(recipe(tmp_path), capsys)[0] == 0
    rc, err = submit(recipe(tmp_path, env={"JAX_ENABLE_X64": "1"}), capsys)
    assert rc == 2 and "child.env.JAX_ENABLE_X64: (absent) → '1'" in err, err


@pytest.mark.slow
def test_keep_done_runs_the_rest_with_new_inputs_and_records_why(client, tmp_path, capsys):
    path = recipe(tmp_path)
    out = tmp_path / "out.zarr"
    assert submit(path, capsys)[0] == 0
    ds = open_results(out)
    # one point failed earlier: it is what --keep-done runs again
    from sweep.model.recipe import Recipe
    from sweep.store import Store

    with Store.open(out, Recipe.load(path)) as store:
        store._put("status", [(2,)], ["failed"])
    assert submit(path, capsys, "--set", "params.fixed.scale=10.0", "--keep-done")[0] == 0
    after = open_results(out)
    assert list(after["value"].values) == [1.0, 2.0, 30.0]
    assert (after["started"].values[:2] == ds["started"].values[:2]).all()
    (entry,) = json.loads(after.attrs["sweep_history"])
    assert entry["kept_done_over"] == ["params.fixed.scale: 1.0 → 10.0"] and entry["time"]
    assert "scale: 10.0" in after.attrs["sweep_recipe"]  # the recipe as run, after --set


def test_a_changed_callable_in_python_is_refused(client, tmp_path):
    from sweep.store import StoreMismatch

    def f(x):
        return {"value": float(x)}

    Sweep(f, {"grid": {"x": [1, 2]}}, output=tmp_path / "o.zarr").run(client=client, progress=False)

    def f(x):  # noqa: F811 - the same name, another body: what a notebook cell rerun does
        return {"value": float(-x)}

    with pytest.raises(StoreMismatch, match="source changed"):
        Sweep(f, {"grid": {"x": [1, 2]}}, output=tmp_path / "o.zarr").run(client=client, progress=False)


def test_unnamed_python_sweeps_of_different_jobs_do_not_share_an_output(client, tmp_path, monkeypatch):
    """Found: both defaulted to name 'sweep' and results/sweep.zarr; the second got f's values."""
    monkeypatch.chdir(tmp_path)

    def first(x):
        return {"value": float(x)}

    def second(x):
        return {"value": float(-x)}

    a = Sweep(first, {"grid": {"x": [1, 2]}}).run(client=client, progress=False)
    b = Sweep(second, {"grid": {"x": [1, 2]}}).run(client=client, progress=False)
    assert a.attrs["sweep_name"] == "first" and b.attrs["sweep_name"] == "second"
    assert list(b["value"].values) == [-1.0, -2.0]
    assert (tmp_path / "results" / "first.zarr").exists() and (tmp_path / "results" / "second.zarr").exists()


@pytest.mark.slow
def test_retry_and_only_failed_run_the_failed_points_and_nothing_else(client, tmp_path, capsys):
    from sweep.model.recipe import Recipe
    from sweep.store import Store

    path = tmp_path / "r.yaml"
    out = tmp_path / "out.zarr"
    path.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:fail_if",
                "params": {"grid": {"x": [0, 1, 2, 3]}, "fixed": {"bad": 1}},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(out),
            }
        )
    )
    assert submit(path, capsys)[0] == 1
    first = open_results(out)
    assert list(first["status"].values) == ["done", "failed", "done", "done"]
    with Store.open(out, Recipe.load(path)) as store:  # point 3 as if never run
        store._put("status", [(3,)], ["pending"])
    assert submit(path, capsys, "--only", "failed")[0] == 1
    second = open_results(out)
    assert second["started"].values[1] > first["started"].values[1]  # the failed one ran again
    assert (second["started"].values[[0, 2]] == first["started"].values[[0, 2]]).all()
    assert second["status"].values[3] == "pending"  # --only failed leaves pending points alone
    # `sweep retry OUTPUT` rebuilds the sweep from the store, here with a fix given by --set
    assert main(["retry", str(out), "--no-progress", "--set", "params.fixed.bad=9"]) == 2  # other inputs
    refused = capsys.readouterr().err
    assert "params.fixed.bad: 1 → 9" in refused
    # its ways out are the ones retry has (found: it suggested --force and --keep-done)
    assert "retry reruns failed points" in refused and "Use --force" not in refused, refused
    assert main(["retry", str(out), "--no-progress"]) == 1
    third = open_results(out)
    assert third["started"].values[1] > second["started"].values[1]
    assert third["status"].values[3] == "pending"


def test_retry_of_a_python_callable_store_says_to_use_python(client, tmp_path, capsys):
    def f(x):
        return {"value": float(x)}

    Sweep(f, {"grid": {"x": [1]}}, output=tmp_path / "o.zarr").run(client=client, progress=False)
    assert main(["retry", str(tmp_path / "o.zarr"), "--no-progress"]) == 2
    assert "rerun it from Python" in capsys.readouterr().err


@pytest.mark.slow
def test_provenance_names_the_command_versions_and_git_commit(client, tmp_path, capsys):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "job.py").write_text("def scaled(x, scale=1.0):\n    return {'value': float(x * scale)}\n")
    path = recipe(repo, job_file=repo / "job.py")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "recipe and job"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert submit(path, capsys)[0] == 0
    assert main(["status", str(repo / "out.zarr"), "--provenance"]) == 0
    said = capsys.readouterr().out
    assert f"git (recipe): {repo} at {commit}, with uncommitted changes" in said  # out.zarr is untracked
    assert f"git (job): {repo} at {commit}" in said
    assert "job_hash:" in said and "params.fixed" not in said and "'scale': 1.0" in said
    assert "workers on " in said and "'jax': " in said and "command: " in said


def helped_job(tmp_path, scale: int) -> Path:
    """A job file importing its sibling helper.py, whose SCALE is ``scale``."""
    (tmp_path / "helper.py").write_text(f"SCALE = {scale}\n")
    job = tmp_path / "helped.py"
    job.write_text(
        "import helper\n\n\ndef scaled(x, scale=1.0):\n    return {'value': float(x * helper.SCALE)}\n"
    )
    return job


@pytest.mark.slow
def test_a_changed_file_the_job_imports_is_refused_and_force_starts_over(client, tmp_path, capsys):
    """Found: changing SCALE in the helper.py a job imports reran nothing (old values, rc 0), and
    --force ran nothing either when the recorded inputs were unchanged."""
    path = recipe(tmp_path, job_file=helped_job(tmp_path, 1))
    out = tmp_path / "out.zarr"
    assert submit(path, capsys)[0] == 0
    first = open_results(out)
    assert submit(path, capsys, "--force")[0] == 0  # the same inputs: --force still starts over
    again = open_results(out)
    assert (again["started"].values > first["started"].values).all()
    helped_job(tmp_path, 10)
    rc, err = submit(path, capsys)
    assert rc == 2, err
    assert f"imported file {tmp_path / 'helper.py'}: changed (sha256 " in err, err
    assert list(open_results(out)["value"].values) == [1.0, 2.0, 3.0]
    assert submit(path, capsys, "--force")[0] == 0
    assert list(open_results(out)["value"].values) == [10.0, 20.0, 30.0]


@pytest.mark.slow
def test_a_job_edited_while_it_runs_records_the_version_each_point_ran(client, tmp_path, capsys):
    """Found: with the job file edited mid-run, points computed by both versions were stored as
    done under one hash, and after reverting the file nothing was ever flagged."""
    job = tmp_path / "edited.py"
    v1 = (
        "import pathlib, time\nVALUE = 1\n\n\ndef scaled(x, scale=1.0):\n"
        "    if x == 0:  # edits its own file: later children import the new version\n"
        "        p = pathlib.Path(__file__)\n"
        "        p.write_text(p.read_text().replace('VALUE = 1', 'VALUE = 2'))\n"
        "    time.sleep(0.3)\n    return {'value': float(VALUE)}\n"
    )
    job.write_text(v1)
    path = tmp_path / "edited.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "job": f"{job}:scaled",
                "params": {"grid": {"x": list(range(6))}},
                "child": {"max_jobs": 1},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    assert submit(path, capsys)[0] == 0
    ds = open_results(tmp_path / "out.zarr")
    values = ds["value"].values
    assert set(values) == {1.0, 2.0}, values
    ids = ds["inputs"].values
    assert len(set(ids[values == 1.0])) == 1 and len(set(ids[values == 2.0])) == 1
    assert set(ids[values == 1.0]) != set(ids[values == 2.0])
    capsys.readouterr()
    main(["status", str(tmp_path / "out.zarr")])
    said = capsys.readouterr().out
    assert "done points ran with 2 different inputs" in said and "source changed" in said, said
    rc, err = submit(path, capsys)  # the file now holds VALUE = 2: the points that ran VALUE = 1 differ
    assert rc == 2 and f"{int((values == 1.0).sum())} done point(s) ran" in err, err
    job.write_text(v1)  # reverted: now the points that ran VALUE = 2 are the ones that differ
    rc, err = submit(path, capsys)
    assert rc == 2 and f"{int((values == 2.0).sum())} done point(s) ran" in err, err


@pytest.mark.slow
def test_keep_done_over_inputs_no_point_used_keeps_the_recorded_ones(client, tmp_path, capsys):
    """Found: with every point done, --keep-done over a changed child.env recorded inputs no
    point used, and resubmitting with the inputs actually used was refused."""
    out = tmp_path / "out.zarr"
    assert submit(recipe(tmp_path), capsys)[0] == 0
    assert submit(recipe(tmp_path, env={"JAX_ENABLE_X64": "1"}), capsys, "--keep-done")[0] == 0
    assert submit(recipe(tmp_path), capsys)[0] == 0  # the inputs every point ran with
    capsys.readouterr()
    assert main(["status", str(out), "--provenance"]) == 0
    said = capsys.readouterr().out
    assert "child.env.JAX_ENABLE_X64" in said and "history:" in said, said  # the kept-over change
    assert "different inputs" not in said


@pytest.mark.slow
def test_the_environment_the_children_inherit_is_an_input(client, tmp_path, capsys, monkeypatch):
    assert submit(recipe(tmp_path), capsys)[0] == 0
    monkeypatch.setenv("JAX_DEFAULT_MATMUL_PRECISION", "float32")
    rc, err = submit(recipe(tmp_path), capsys)
    assert rc == 2 and "environment.JAX_DEFAULT_MATMUL_PRECISION: (absent) → 'float32'" in err, err


def test_a_nan_in_params_fixed_is_the_same_input_on_a_rerun(client, tmp_path, capsys):
    """Found: `fixed: {scale: .nan}` blocked every rerun ("params.fixed.scale: nan → nan", exit 2)."""
    path = recipe(tmp_path, fixed={"scale": float("nan")})
    assert submit(path, capsys)[0] == 0
    rc, err = submit(path, capsys, "--only", "failed")
    assert rc == 0, err
    rc, err = submit(path, capsys, "--set", "params.fixed.scale=1.0")
    assert rc == 2 and "params.fixed.scale: nan → 1.0" in err, err


def test_recorded_values_compare_as_inputs():
    from sweep.model.inputs import same

    nan = float("nan")
    assert same(nan, nan) and same([1, {"a": nan}], [1, {"a": nan}])
    assert not same(1, 1.0) and not same(1, True) and not same(nan, 1.0) and not same([nan], [nan, nan])


def _stale_bytecode(path: Path, old: str, new: str) -> str:
    """Compile ``path`` to its cached ``.pyc``, then edit ``old`` to ``new`` (same size) and
    give the file its old mtime back, as an edit within the same second or a copy that kept its
    mtime does: Python's check of the cache (size, mtime in seconds) passes. The new SHA-256."""
    import hashlib
    import os
    import py_compile

    before = path.stat()
    py_compile.compile(str(path), doraise=True)
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_stale_cached_pyc_never_runs_in_place_of_the_source_recorded(client, tmp_path):
    """Found: a job file and a module of the user's, each edited at the same size with its old
    mtime kept, ran the code of their cached .pyc, stored under the new sources' hashes."""
    (tmp_path / "helper.py").write_text("FACTOR = 1\n")
    job = tmp_path / "cached.py"
    job.write_text(
        "import helper\nVALUE = 1\n\n\ndef run(x=0):\n"
        "    return {'value': float(VALUE * 10 + helper.FACTOR)}\n"
    )
    job_sha = _stale_bytecode(job, "VALUE = 1", "VALUE = 2")
    helper_sha = _stale_bytecode(tmp_path / "helper.py", "FACTOR = 1", "FACTOR = 2")
    ds = Sweep(f"{job}:run", {"grid": {"x": [0]}}, output=tmp_path / "out.zarr").run(
        client=client, progress=False
    )
    assert list(ds["value"].values) == [22.0]  # the code the files hold now
    ran = json.loads(json.loads(ds.attrs["sweep_inputs_seen"])[str(ds["inputs"].values[0])])
    assert ran["job_hash"] == job_sha and ran["sources"] == {
        str((tmp_path / "helper.py").resolve()): helper_sha
    }


def test_a_warm_child_runs_the_job_and_modules_as_edited_between_sweeps(client, tmp_path):
    """Found: on one cluster (a notebook's), a sweep after the job file or a module of the
    user's was edited ran the code its warm children had imported before, under the old hash."""
    import hashlib

    helper, job = tmp_path / "helper.py", tmp_path / "warm.py"
    helper.write_text("FACTOR = 1\n")
    job.write_text(
        "import helper\nBASE = 0\n\n\ndef run(x=0):\n    return {'value': float(BASE + x + helper.FACTOR)}\n"
    )

    def run(name):
        ds = Sweep(f"{job}:run", {"grid": {"x": [0, 1]}}, output=tmp_path / name).run(
            client=client, progress=False
        )
        ran = json.loads(json.loads(ds.attrs["sweep_inputs_seen"])[str(ds["inputs"].values[0])])
        return ds["value"].values.tolist(), ran

    assert run("a.zarr")[0] == [1.0, 2.0]
    job.write_text(job.read_text().replace("BASE = 0", "BASE = 100"))
    helper.write_text("FACTOR = 50\n")
    values, ran = run("b.zarr")
    assert values == [150.0, 151.0]
    assert ran["job_hash"] == hashlib.sha256(job.read_bytes()).hexdigest()
    assert ran["sources"] == {str(helper.resolve()): hashlib.sha256(helper.read_bytes()).hexdigest()}


def test_two_jobs_each_with_a_helper_py_of_its_own_run_their_own_on_one_cluster(client, tmp_path):
    """Found: a warm child that ran a job beside one ``helper.py`` ran the next sweep's job,
    from another folder with a ``helper.py`` of its own, with the first one's."""
    values = {}
    for name, factor in (("one", 1), ("two", 2), ("one", 1)):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        (folder / "helper.py").write_text(f"FACTOR = {factor}\n")
        (folder / "job.py").write_text(
            "import helper\n\n\ndef run(x=0):\n    import helper as again  # imported as the job runs\n"
            "    return {'value': float(x + helper.FACTOR * 10 + again.FACTOR)}\n"
        )
        out = tmp_path / f"{name}-{len(values)}.zarr"
        ds = Sweep(f"{folder}/job.py:run", {"grid": {"x": [0, 1]}}, output=out).run(
            client=client, progress=False
        )
        values[out.name] = ds["value"].values.tolist()
    assert values == {"one-0.zarr": [11.0, 12.0], "two-1.zarr": [22.0, 23.0], "one-2.zarr": [11.0, 12.0]}
