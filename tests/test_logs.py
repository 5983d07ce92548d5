"""What every attempt of every point printed is kept with the results (`sweep logs`)."""

import yaml

from sweep import open_results
from sweep.cli import main
from tests.conftest import JOBS


def run_chatty(tmp_path, capsys):
    path = tmp_path / "chatty.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "job": f"{JOBS}:chatty",
                "params": {"grid": {"x": [0, 1, 2], "y": ["a", "b"]}, "fixed": {"fail": 1}},
                "resources": {"retries": 1},
                "cluster": {"dashboard": "127.0.0.1:0"},
                "output": str(tmp_path / "out.zarr"),
            }
        )
    )
    assert main(["submit", str(path), "--no-progress"]) == 1  # x=1 fails twice, for each y
    capsys.readouterr()
    return tmp_path / "out.zarr"


def logs(capsys, *args):
    rc = main(["logs", *args])
    return rc, capsys.readouterr().out


def test_logs_of_a_point_that_succeeded_and_of_every_attempt_of_one_that_failed(client, tmp_path, capsys):
    out = run_chatty(tmp_path, capsys)
    rc, text = logs(capsys, str(out), "--where", "x=0", "--where", "y=a")
    assert rc == 0 and "attempt 1 <==" in text and "hello from 0" in text and "warning from 0" in text
    assert "hello from 1" not in text and text.count("==> point") == 1
    rc, text = logs(capsys, str(out), "--where", "x=1")
    assert text.count("hello from 1") == 4 and "attempt 2 <==" in text  # 2 attempts, 2 values of y
    rc, text = logs(capsys, str(out), "--where", "x=1", "--where", "y=b", "--attempt", "2")
    assert text.count("hello from 1") == 1
    pid = str(open_results(out)["point_id"].sel(x=2, y="a").item())
    rc, text = logs(capsys, str(out), "--point", pid)
    assert f"point {pid} attempt 1" in text and "hello from 2" in text and "hello from 0" not in text
    rc, text = logs(capsys, str(out))
    assert text.count("==> point") == 8  # (1 + 2 + 1 attempts) x 2


def test_logs_where_names_the_axes_on_a_typo(client, tmp_path, capsys):
    out = run_chatty(tmp_path, capsys)
    rc = main(["logs", str(out), "--where", "z=1"])
    assert rc == 2 and "AXIS one of ['x', 'y']" in capsys.readouterr().err
