"""`--json`: one document on stdout, valid against its schema (sweep/cli/jsonout.py)."""

import json
import time

import jsonschema
import pytest

from sweep.cli.jsonout import SCHEMAS
from tests.helpers import cli, write_recipe


def document(proc, kind):
    """The one JSON document ``proc`` printed, checked against the schema of ``kind``."""
    doc = json.loads(proc.stdout)  # nothing else on stdout: it parses whole
    jsonschema.validate(doc, SCHEMAS[kind])
    return doc


def recipe(tmp_path, **extra):
    return write_recipe(
        tmp_path / "r.yaml",
        name="js",
        job="square",
        params={"grid": {"x": [1.0, 2.0, 3.0]}, "fixed": {"seconds": extra.pop("seconds", 0.0)}},
        output=tmp_path / "results" / "js.zarr",
        **extra,
    )


def test_every_schema_is_a_valid_json_schema_naming_its_version():
    for kind, schema in SCHEMAS.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"]["const"] == f"sweep.{kind}/1"


def test_validate_json_for_a_good_recipe_and_an_error_document_for_a_bad_one(tmp_path):
    path = recipe(tmp_path)
    doc = document(cli("validate", str(path), "--json"), "validate")
    assert doc["space"] == {"kind": "grid", "dims": {"x": 3}, "points": 3} and len(doc["points"]) == 3
    bad = cli("validate", str(path), "--json", "--set", "resources.threads=0")
    assert bad.returncode == 2 and "resources.threads" in bad.stderr
    error = document(bad, "error")
    assert (
        error["exit_code"] == 2 and error["command"] == "validate" and "resources.threads" in error["error"]
    )


@pytest.mark.slow
def test_a_script_drives_a_detached_sweep_with_json_alone(tmp_path):
    path = recipe(tmp_path, seconds=1.0)
    started = document(cli("submit", str(path), "--detach", "--json"), "submit")
    assert started["detached"] and started["pid"] > 0
    out = started["output"]
    deadline = time.monotonic() + 240
    while True:  # poll as a script would, until the run has ended
        status = document(cli("status", out, "--json"), "status")
        if not status["last_run"]["running_now"] and status["exit_code"] is not None:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["finished"] and status["counts"] == {"done": 3} and status["exit_code"] == 0
    listed = document(cli("ls", str(tmp_path / "results"), "--json"), "ls")
    assert [s["name"] for s in listed["stores"]] == ["js"] and listed["stores"][0]["counts"]["done"] == 3
    results = document(cli("results", out, "--json"), "results")
    assert "y" in results["variables"] and results["counts"] == {"done": 3}
    again = document(cli("submit", str(path), "--json"), "submit")
    assert again["exit_code"] == 0 and again["points_run"] == 0 and again["counts"] == {"done": 3}
