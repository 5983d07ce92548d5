"""A recipe fuzzer: valid recipes mutated (types, ranges, names, unicode, YAML oddities, --set
overrides) never give a traceback. ``sweep validate`` ends 0 or 2 with one line per problem;
a recipe it accepts dry-runs cleanly; nothing is written for a refused one.

Seeds are pinned (``derandomize``): CI runs the same examples every time. Recipes a run found
to fail are kept in ``fuzz_regressions.yaml`` beside this file and run first, every time.
"""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sweep.capacity.resources import AMOUNTS  # noqa: E402
from sweep.cli.app import main  # noqa: E402

HERE = Path(__file__).parent
JOB = str(HERE.parent / "bad_recipes" / "jobs.py") + ":good"
REGRESSIONS = HERE / "fuzz_regressions.yaml"

BASES: list[dict[str, Any]] = [
    {"job": JOB, "params": {"grid": {"a": [1, 2, 3], "b": [0.5, 1.5]}, "fixed": {"steps": 2}}},
    {"job": JOB, "params": {"zip": {"a": [1, 2], "b": [3, 4]}}, "resources": {"timeout": "5min"}},
    {"job": JOB, "params": {"list": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]}, "resources": {"memory": "1GiB"}},
    {
        "job": JOB,
        "params": {"random": {"n": 4, "seed": 0, "axes": {"a": [0.0, 1.0], "b": {"low": 1, "high": 9}}}},
    },
    {
        "job": JOB,
        "params": {"lhs": {"n": 3, "seed": 1, "axes": {"a": [1.0, 2.0]}}},
        "resources": {"retries": 1},
    },
    {
        "job": JOB,
        "params": {"grid": {"a": [1, 2]}},
        "resources": {"threads": 2, "memory": "1GiB", "timeout": "10min"},
        "cluster": {"kind": "slurm", "cores": 4, "memory": "8GiB", "walltime": "01:00:00", "jobs": 2},
    },
    {
        "job": JOB,
        "params": {
            "search": {
                "sampler": "tpe",
                "n_trials": 4,
                "seed": 0,
                "objective": "y",
                "axes": {"a": {"low": 0.1, "high": 1.0, "log": True}, "b": ["p", "q"]},
            }
        },
    },
]
# keys a valid recipe may hold beyond the bases', each tried with odd values
OPTIONAL = [
    ("name",),
    ("resources", "timeout"),
    ("resources", "stall"),
    ("resources", "expected"),
    ("resources", "gpus"),
    ("resources", "tpus"),
    ("resources", "memory"),
    ("resources", "retries"),
    ("resources", "ranks"),
    ("resources", "threads"),
    ("resources", "thread_budget"),
    ("resources", "retry_memory"),
    ("resources", "on_thread_overflow"),
    ("child", "env"),
    ("child", "platforms"),
    ("child", "max_jobs"),
    ("cluster", "kind"),
    ("cluster", "jobs"),
    ("cluster", "walltime"),
    ("cluster", "adapt"),
    ("cluster", "memory"),
    ("output",),
    ("objective",),
    *((section, name) for name in AMOUNTS for section in ("resources", "cluster")),
]
BIG = "BIG-INTEGER"  # written as 5000 digits, past Python's default int() limit of 4300
WORDS = [
    "",
    "no",
    "yes",
    "abc",
    "auto",
    "1e12",
    "2GiB",
    "-1",
    "5min",
    ".inf",
    "nan",
    "/",
    "..",
    "a/b",
    "status",
    "attempts",
    "point_id",
    "é",
    "\u202e",
    "x" * 300,
    "0x10",
    "1_000",
    "\x00",
    "a=b",
    "~",
]
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**63, 2**53 + 1, 10**300, BIG, 9007199254740993]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=6),
    st.lists(st.one_of(st.integers(-3, 3), st.floats(allow_nan=True), st.sampled_from(WORDS)), max_size=3),
    st.dictionaries(
        st.sampled_from(["low", "high", "log", "a", "values", ""]), st.integers(-2, 2), max_size=2
    ),
)
NAMES = st.one_of(st.sampled_from(WORDS), st.text(min_size=0, max_size=4))


def _paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in ``tree`` (mapping keys and list positions)."""
    found = [prefix] if prefix else []
    if isinstance(tree, dict):
        for k, v in tree.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            found += _paths(v, (*prefix, i))
    return found


def _set(tree: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {}) if isinstance(tree, dict) else tree[key]
        if not isinstance(tree, dict | list):
            return
    if isinstance(tree, dict) or (isinstance(tree, list) and isinstance(path[-1], int)):
        tree[path[-1]] = value


def _parent(tree: Any, path: tuple) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


@st.composite
def mutated(draw: Any) -> tuple[bytes, list[str]]:
    """A recipe's bytes and ``--set`` overrides: a base with one to three mutations."""
    recipe = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(recipe)
        op = draw(st.sampled_from(["replace", "replace", "add", "delete", "rename"]))
        if op == "add":
            _set(recipe, draw(st.sampled_from(OPTIONAL)), draw(ODD))
        elif op == "replace" and paths:
            _set(recipe, draw(st.sampled_from(paths)), draw(ODD))
        elif paths:
            path = draw(st.sampled_from(paths))
            parent = _parent(recipe, path)
            if isinstance(parent, dict) and path[-1] in parent:
                value = parent.pop(path[-1])
                if op == "rename":
                    parent[draw(NAMES)] = value
    text = yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True).replace(BIG, "7" * 5000)
    odd = draw(st.sampled_from(["none"] * 6 + ["duplicate", "anchor", "bytes", "bom", "tab", "empty"]))
    data = text.encode()
    if odd == "duplicate":
        data += b"resources: {threads: 1}\n"
    elif odd == "anchor":
        data += b"extra: &x [*x]\n"
    elif odd == "bytes":
        data += b"name: \xff\xfe\n"
    elif odd == "bom":
        data = b"\xef\xbb\xbf" + data
    elif odd == "tab":
        data = data.replace(b"  ", b"\t", 1)
    elif odd == "empty":
        data = b""
    overrides = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["resources.threads", "params.fixed.b", "name", "resources.timeout", "x"]),
                st.sampled_from(["1", "2", "abc", "[1, 2]", "{", "nan", "1e400", ""]),
            ),
            max_size=1,
        )
    )
    return data, [f"{k}={v}" for k, v in overrides]


def check_one(tmp_path: Path, capsys: Any, data: bytes, overrides: list[str]) -> str:
    """Validate one recipe as the CLI does; the outcome's name. Fails the test on a traceback,
    an exit code other than 0 or 2, a refusal without a reason, or a file written by a refusal."""
    folder = tmp_path / f"r{abs(hash(data)) % 10**8}"
    folder.mkdir(exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_bytes(data)
    before = sorted(p.name for p in folder.iterdir())
    sets = [a for o in overrides for a in ("--set", o)]
    capsys.readouterr()
    with warnings.catch_warnings():  # printed once per place: the same recipe would read otherwise
        warnings.simplefilter("ignore")
        rc = main(["validate", str(path), "--output", str(folder / "out.zarr"), *sets])
    out, err = capsys.readouterr()
    assert rc in (0, 2), (rc, data, overrides, out, err)
    assert "Traceback" not in out + err, (data, overrides, err)
    if rc == 2:
        lines = err.strip().split("\n")  # not splitlines(): a control character would split a line
        assert "sweep validate: error: " in err and "OK" not in out, (data, err, out)
        # one line per problem: the error's, its other problems' (each naming the recipe), warnings'
        assert all(ln.startswith(("sweep ", str(path), "--set ")) for ln in lines), (data, err)
        assert sorted(p.name for p in folder.iterdir()) == before, (data, "a refusal wrote files")
        return "refused"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["submit", str(path), "--output", str(folder / "out.zarr"), "--dry-run", *sets])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out + err, (rc, data, overrides, out, err)
    assert not (folder / "out.zarr").exists(), (data, "a dry run wrote the store")
    return "accepted"


def regressions() -> list[Any]:
    cases = yaml.safe_load(REGRESSIONS.read_text()) or []
    return [pytest.param(c["text"].replace("JOB", JOB).encode(), c.get("set", []), id=c["id"]) for c in cases]


@pytest.mark.parametrize(("data", "overrides"), regressions())
def test_a_recipe_a_fuzz_run_found_gives_one_line_or_runs(tmp_path, capsys, data, overrides):
    assert check_one(tmp_path, capsys, data, overrides) in ("refused", "accepted")


def _fuzz(tmp_path: Path, capsys: Any, examples: int) -> None:
    tally: dict[str, int] = {}

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(mutated())
    def run(case: tuple[bytes, list[str]]) -> None:
        outcome = check_one(tmp_path, capsys, *case)
        tally[outcome] = tally.get(outcome, 0) + 1

    run()
    with capsys.disabled():
        print(f"\nrecipe fuzzer, {examples} examples: {tally}")
    assert tally.get("refused", 0) > examples // 4 and tally.get("accepted", 0) > 0  # it mutates


def test_a_few_hundred_mutated_recipes_give_one_line_or_a_clean_dry_run(tmp_path, capsys):
    _fuzz(tmp_path, capsys, 300)


@pytest.mark.slow
def test_five_thousand_mutated_recipes_give_one_line_or_a_clean_dry_run(tmp_path, capsys):
    _fuzz(tmp_path, capsys, 5000)


def test_the_fuzzer_makes_recipes_the_tests_can_read():
    assert all(isinstance(yaml.safe_load(yaml.safe_dump(b)), dict) for b in BASES)
    assert math.isnan(float("nan"))  # the odd values include NaN, which YAML writes as .nan
