"""Adaptive search with pruning (sweep/client/search.py): Optuna asks and tells, real local clusters."""

import inspect
import json
import os
import re
import signal
import time

import pytest
import yaml

from sweep import Pruned, RecipeError, Sweep, open_results
from sweep.client.search import SearchStopped, journal_path
from sweep.model.job import parse_job
from sweep.model.searchspec import PRUNER_OPTIONS, PRUNERS, SAMPLERS
from sweep.store import StoreMismatch
from sweep.worker.child import Child
from tests.helpers import JOBS, ROOT, cli

optuna = pytest.importorskip("optuna", reason="needs the search extra: pip install -e '.[search]'")

from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402
from optuna.trial import TrialState  # noqa: E402


def search(n_trials=10, prune=True, objective="loss", **extra):
    params = {
        "search": {
            "sampler": "tpe",
            "n_trials": n_trials,
            "seed": 3,
            "axes": {"lr": [0.0, 2.0]},
            "objective": objective,
        },
        "fixed": {"steps": 20, "every": 0.03},
    }
    params["search"].update(extra)
    if prune:
        params["prune"] = {"kind": "median", "metric": "loss", "n_startup_trials": 3}
    return params


def study_of(out):
    storage = JournalStorage(JournalFileBackend(str(journal_path(out))))
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


@pytest.mark.slow
def test_a_search_asks_tells_and_prunes_in_warm_children(client, out):
    ds = Sweep(f"{JOBS}:descend", search(12), output=out).run(client=client, progress=False)
    status = ds["status"].values.tolist()
    assert set(status) <= {"done", "pruned"} and "pruned" in status and "done" in status
    assert not ds["lr"].isnull().any()  # every trial's parameter is its coordinate
    study = study_of(out)
    by_slot = {t.user_attrs["sweep_slot"]: t for t in study.trials}
    assert sorted(by_slot) == list(range(12)) and len(study.trials) == 12
    for i, st in enumerate(status):
        t = by_slot[i]
        assert t.params["lr"] == pytest.approx(float(ds["lr"][i]))
        if st == "done":
            assert t.state == TrialState.COMPLETE and t.value == pytest.approx(float(ds["loss"][i]))
        else:  # pruned at one of its reports, its history kept (at the last one too: the
            # median pruner may first find it behind there, or its verdict may come after it)
            reports = json.loads(str(ds["reports"].values[i]))
            assert t.state == TrialState.PRUNED and 0 < len(reports) <= 20
            assert "pruned" in str(ds["error"].values[i])
    # the child of a pruned trial ran later trials: pruning does not cost a new `import jax`
    pruned_pids = {int(ds["pid"][i]) for i, st in enumerate(status) if st == "pruned"}
    first_pruned = min(i for i, st in enumerate(status) if st == "pruned")
    later = {int(ds["pid"][i]) for i in range(first_pruned + 1, 12)}
    assert pruned_pids & later


@pytest.mark.slow
def test_a_job_may_catch_pruned_to_clean_up(client, out):
    params = search(8)
    params["fixed"]["catch"] = True
    ds = Sweep(f"{JOBS}:descend", params, output=out).run(client=client, progress=False)
    pruned = ds["status"] == "pruned"
    assert pruned.any() and not ds["loss"].where(pruned).dropna("trial").isnull().any()  # it returned


def test_the_child_takes_a_prune_only_for_the_job_running():
    child = Child([0])
    try:
        job = parse_job(f"{JOBS}:descend", ROOT)
        heard = []

        def on_report(r):
            heard.append(r)
            if len(heard) == 3:
                child.prune()

        record = child.run(job, {"lr": 0.5, "every": 0.02}, on_report=on_report)
        # the report that carried the word back, or the next one, raised
        assert record.status == "pruned" and len(record.reports) in (3, 4)
        child.prune()  # arrives after its job ended: the next job ignores it
        again = child.run(job, {"lr": 0.5, "steps": 5, "every": 0.0})
        assert again.status == "done" and again.pid == record.pid
    finally:
        child.close()


def test_pruned_is_exported_and_is_an_exception():
    assert issubclass(Pruned, Exception)


def test_pruner_options_are_optunas():
    for kind, name in PRUNERS.items():
        if name:
            params = inspect.signature(getattr(optuna.pruners, name)).parameters
            assert set(PRUNER_OPTIONS[kind]) == set(params), kind
    for name in SAMPLERS.values():
        assert hasattr(optuna.samplers, name)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"search": {"sampler": "bayes"}},
            "unknown sampler 'bayes'; choose one of tpe, cmaes, gp, qmc, random, nsga2",
        ),
        ({"search": {"direction": "down"}}, "unknown direction 'down'; choose one of minimize, maximize"),
        (
            {"prune": {"kind": "asha2", "metric": "loss"}},
            "unknown pruner 'asha2'; choose one of asha, median, hyperband, none",
        ),
        (
            {"prune": {"kind": "asha", "metric": "loss", "patience": 3}},
            "unknown option(s) ['patience'] for kind asha",
        ),
        ({"prune": {"kind": "median"}}, "params.prune.metric: name the sweep.report key"),
        ({"search": {"objective": ["a", "b"], "sampler": "cmaes"}}, "cmaes optimises one objective"),
        ({"search": {"axes": {"lr": {"low": 1, "hi": 2}}}}, "params.search.axes.lr"),
        ({"search": {"n_trials": 0}}, "params.search.n_trials: give a number of trials from 1 to"),
    ],
)
def test_bad_search_settings_are_named(out, change, message):
    params = search(4)
    for key, value in change.items():
        params[key] = {**params[key], **value} if key == "search" else value
    with pytest.raises(RecipeError, match=re.escape(message)):
        Sweep(f"{JOBS}:descend", params, output=out)


def test_bad_sampler_exits_2_on_the_command_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    params = search(4)
    params["search"]["sampler"] = "bayes"
    recipe.write_text(
        yaml.safe_dump({"job": f"{JOBS}:descend", "params": params, "output": str(tmp_path / "o.zarr")})
    )
    proc = cli("validate", str(recipe))
    assert (
        proc.returncode == 2 and "choose one of tpe, cmaes" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_a_misnamed_objective_fails_the_first_trial_and_stops_the_search(client, out):
    s = Sweep(f"{JOBS}:descend", search(20, prune=False, objective="los"), output=out)
    with pytest.raises(
        SearchStopped, match=r"objective 'los' is neither an output of the job \(it returned \['loss'\]\)"
    ):
        s.run(client=client, progress=False)
    status = open_results(out)["status"].values.tolist()
    assert status.count("failed") >= 1 and status.count("pending") >= 12  # it did not run 20 failing trials


@pytest.mark.slow
def test_a_search_grows_keeping_its_trials(client, out):
    Sweep(f"{JOBS}:descend", search(4, prune=False), output=out).run(client=client, progress=False)
    before = open_results(out)
    s = Sweep(f"{JOBS}:descend", search(7, prune=False), output=out)
    ds = s.run(client=client, progress=False)
    assert s.stats["kept"] == 4 and s.stats["new"] == 3
    assert (ds["status"] == "done").all()
    assert ds["lr"][:4].values.tolist() == before["lr"].values.tolist()
    assert len(study_of(out).trials) == 7


@pytest.mark.slow
def test_another_search_on_the_same_store_is_refused(client, out):
    Sweep(f"{JOBS}:descend", search(3, prune=False), output=out).run(client=client, progress=False)
    with pytest.raises(StoreMismatch, match="holds a different sweep"):
        Sweep(f"{JOBS}:descend", search(3, prune=False, sampler="random"), output=out).run(
            client=client, progress=False
        )


@pytest.mark.slow
def test_a_killed_search_resumes_the_same_study(tmp_path):
    """SIGKILL the driver mid-search; a rerun finishes every slot without duplicating
    trials: those left running are told FAIL and asked again with the same parameters."""
    out = tmp_path / "out.zarr"
    params = search(8, prune=False)
    params["fixed"] = {"steps": 40, "every": 0.05}
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"job": f"{JOBS}:descend", "params": params, "output": str(out)}))
    assert cli("submit", str(recipe), "--no-progress", "--detach").returncode == 0
    pid = json.loads((out / ".sweep-driver.json").read_text())["pid"]
    deadline = time.monotonic() + 120
    while (open_results(out)["status"] == "done").sum() < 3:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    running = {
        t.user_attrs["sweep_slot"]: t.params for t in study_of(out).trials if t.state == TrialState.RUNNING
    }
    os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert running
    rerun = cli("submit", str(recipe), "--no-progress")
    assert rerun.returncode == 0, rerun.stderr
    ds = open_results(out)
    assert (ds["status"] == "done").all()
    trials = study_of(out).trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["sweep_slot"] for t in complete) == list(range(8))  # one per slot
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert sorted(t.user_attrs["sweep_slot"] for t in failed) == sorted(running)
    for slot, p in running.items():  # asked again with the same parameters
        assert float(ds["lr"][slot]) == pytest.approx(p["lr"])


def test_validate_prints_sampler_axes_and_pruner(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump({"job": f"{JOBS}:descend", "params": search(6), "output": str(tmp_path / "o.zarr")})
    )
    proc = cli("validate", str(recipe))
    assert proc.returncode == 0, proc.stderr
    assert "search    tpe, 6 trials, seed 3: minimize loss" in proc.stdout
    assert "axes      lr in [0, 2]" in proc.stdout and "prune     median on loss" in proc.stdout
    assert "{'trial': 0}" not in proc.stdout


def test_search_axes_categorical_and_integer_reach_the_job(client, out):
    from sweep.model.space import Choices, Trials

    space = Trials(
        {"n_trials": 3, "axes": {"a": ["x", "y"], "b": [1, 2, 4], "c": {"choices": [0.5, 1.5]}, "d": [0, 1]}}
    )
    assert space.axes["a"] == Choices(("x", "y")) and space.axes["b"] == Choices((1, 2, 4))
    assert space.axes["c"] == Choices((0.5, 1.5)) and not isinstance(space.axes["d"], Choices)
    params = {
        "search": {"sampler": "random", "n_trials": 6, "seed": 0, "objective": "value",
                   "axes": {"x": {"low": 1, "high": 5, "integer": True}, "y": {"choices": ["a", "b"]}}},
    }  # fmt: skip
    ds = Sweep(f"{JOBS}:chatty", params, output=out).run(client=client, progress=False)
    assert (ds["status"] == "done").all()
    assert set(ds["x"].values.tolist()) <= {1, 2, 3, 4, 5} and set(ds["y"].values.tolist()) <= {"a", "b"}
    assert (ds["value"] == ds["x"]).all()  # chatty returns x: the integer reached the job


@pytest.mark.slow
def test_a_new_store_never_reuses_a_study_left_next_to_it(client, out):
    """A store made afresh (first run, or cleared by --force) starts a new study even when a
    journal of an earlier store is next to it; a plain rerun resumes the study."""
    Sweep(f"{JOBS}:descend", search(3, prune=False), output=out).run(client=client, progress=False)
    import shutil

    shutil.rmtree(out)  # the store deleted by hand, its journal left behind
    Sweep(f"{JOBS}:descend", search(3, prune=False), output=out).run(client=client, progress=False)
    assert len(study_of(out).trials) == 3
    again = Sweep(f"{JOBS}:descend", search(3, prune=False), output=out)
    again.run(client=client, progress=False, force=True)  # nothing changed: nothing to clear
    assert len(study_of(out).trials) == 3


def test_logs_select_a_trial_by_its_number(client, out, capsys):
    from sweep.cli.app import main

    axes = {"x": {"low": 1, "high": 5, "integer": True}}
    params = {"search": {"sampler": "random", "n_trials": 3, "seed": 0, "objective": "value", "axes": axes}}
    Sweep(f"{JOBS}:chatty", params, output=out).run(client=client, progress=False)
    capsys.readouterr()
    assert main(["logs", str(out), "--where", "trial=2"]) == 0
    x = int(open_results(out)["x"][2])
    text = capsys.readouterr().out
    assert text.count("==> point") == 1 and f"hello from {x}" in text
    assert main(["logs", str(out), "--where", "iteration=1"]) == 2  # an output's dim is not a sweep axis
    assert "one of ['trial', 'x']" in capsys.readouterr().err


@pytest.mark.slow
def test_a_seeded_search_resumed_three_times_never_repeats_a_trial(client, out):
    """Found: re-creating a seeded sampler replayed its stream, so with seed 0 growing 4 -> 8
    trials made trials 4-7 equal to 0-3, and a retry put copies of done trials in failed slots."""
    from sweep.store import Store

    def run(n, **kw):
        s = Sweep(f"{JOBS}:descend", search(n, prune=False), output=out)
        return s, s.run(client=client, progress=False, **kw)

    run(4)
    s, grown = run(6)  # growth
    failed_lr = float(grown["lr"][2])
    with Store.open(out, s.loaded) as store:  # trial 2 as if it had failed
        store._put("status", [(2,)], ["failed"])
    _, retried = run(6, only_failed=True)  # retry
    assert float(retried["lr"][2]) == failed_lr  # a retried trial runs its own parameters
    _, ds = run(8)  # growth again
    lrs = [round(float(v), 12) for v in ds["lr"].values]
    assert len(set(lrs)) == 8, lrs
    assert (ds["status"] == "done").all()


@pytest.mark.slow
def test_a_nan_objective_is_failed_in_the_study_and_in_the_store(client, out):
    """Found: a NaN objective was `done` in the store but FAIL in the study."""
    params = search(6, prune=False)
    params["fixed"]["nan_above"] = 1.0
    ds = Sweep(f"{JOBS}:descend", params, output=out).run(client=client, progress=False)
    states = {t.user_attrs["sweep_slot"]: t.state for t in study_of(out).trials}
    for i, lr in enumerate(ds["lr"].values):
        assert (ds["status"].values[i] == "failed") == (lr > 1.0)
        assert (states[i] == TrialState.FAIL) == (lr > 1.0)
    assert any(ds["lr"].values > 1.0) and any(ds["lr"].values <= 1.0), ds["lr"].values
    assert "objective loss is nan" in ds["error"].values[ds["lr"].values > 1.0][0]


@pytest.mark.slow
def test_a_corrupt_journal_is_refused_before_anything_changes_and_a_lost_one_is_rebuilt(client, out):
    """Found: a corrupt journal line gave a traceback after the store had grown and a cluster
    started; a deleted journal was recreated silently, forgetting the done trials."""
    from sweep.client.search import JournalDamaged

    first = Sweep(f"{JOBS}:descend", search(4, prune=False), output=out).run(client=client, progress=False)
    journal = journal_path(out)
    good = journal.read_bytes()
    lines = good.splitlines(keepends=True)
    journal.write_bytes(b"".join([lines[0], b'{"op_code": 4, "broken\n', *lines[1:]]))
    with pytest.raises(JournalDamaged, match=r"line 2 is not a journal record"):
        Sweep(f"{JOBS}:descend", search(6, prune=False), output=out).run(client=client, progress=False)
    assert open_results(out).sizes["trial"] == 4  # the store did not grow
    journal.unlink()
    ds = Sweep(f"{JOBS}:descend", search(6, prune=False), output=out).run(client=client, progress=False)
    trials = study_of(out).trials
    assert sorted(t.user_attrs["sweep_slot"] for t in trials) == list(range(6))
    assert ds["lr"][:4].values.tolist() == first["lr"].values.tolist()
    for t in trials[:4]:
        slot = t.user_attrs["sweep_slot"]
        assert t.state == TrialState.COMPLETE and t.values[0] == pytest.approx(float(ds["loss"][slot]))
    assert len({round(float(v), 12) for v in ds["lr"].values}) == 6


def test_a_changed_direction_is_refused_naming_it(client, out):
    Sweep(f"{JOBS}:descend", search(2, prune=False), output=out).run(client=client, progress=False)
    with pytest.raises(StoreMismatch, match=r"direction: \(not set\) → maximize"):
        Sweep(f"{JOBS}:descend", search(2, prune=False, direction="maximize"), output=out).run(
            client=client, progress=False
        )


def test_a_complete_bad_last_journal_line_is_damage_and_only_a_line_without_newline_is_torn(tmp_path):
    """Found: ``echo 'garbage{{{not json' >> s.zarr.optuna.journal`` was skipped as a torn write,
    then Optuna raised JSONDecodeError after the store had grown."""
    from sweep.client.search import JournalDamaged, check_journal

    out = tmp_path / "s.zarr"
    journal = journal_path(out)
    journal.write_bytes(b'{"op_code": 0}\n{"op_code": 1}\n')
    check_journal(out)
    journal.write_bytes(b'{"op_code": 0}\n{"op_code": 1}\ngarbage{{{not json\n')
    with pytest.raises(JournalDamaged, match=rf"{journal}: line 3 is not a journal record"):
        check_journal(out)
    journal.write_bytes(b'{"op_code": 0}\n{"op_code": 1}\n{"op_co')  # a driver killed mid-write
    check_journal(out)
