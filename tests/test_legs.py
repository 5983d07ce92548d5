"""scripts/legs.py: every leg of `make test` runs, even after one fails, and one table ends it."""

import subprocess
import sys

from tests.helpers import ROOT

FAKE_MAKEFILE = """\
lint:
\t@echo "1 failed, 2 passed in 0.10s"; exit 1
test-main:
\t@echo "==== 3 passed, 1 skipped in 0.20s ===="; echo "1 passed, 2 warnings in 0.10s"
"""


def test_every_leg_runs_after_one_fails_and_the_table_adds_them_up(tmp_path):
    (tmp_path / "Makefile").write_text(FAKE_MAKEFILE)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "legs.py"), "lint", "main"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    assert "| lint | 2 | 1 | 0 | 0.0 | FAILED (exit 2) |" in lines, proc.stdout
    assert "| main | 4 | 0 | 1 | 0.0 | ok |" in lines, proc.stdout  # ran although lint failed
    assert lines[-1] == "total: 6 passed, 1 failed, 1 skipped"
