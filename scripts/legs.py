#!/usr/bin/env python3
"""Run every leg of `make test`, even after one fails, and end with one table.

Usage: scripts/legs.py [LEG ...]   (default: every leg, in the order below)

Each leg is a make target; a leg whose check command fails (no Meep on this system, say) is
shown as not run, with the reason, and does not fail the whole. What each leg prints streams
through as it runs; its pytest summaries are added up for the table: leg, passed, failed,
skipped, minutes, and how it ended. The exit status is 1 when any leg that ran failed.
Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

# name, make target, the command that says whether the leg can run here (None: always)
LEGS = [
    ("lint", "lint", None),
    ("main", "test-main", None),
    ("lowest", "test-lowest", None),
    ("meep", "test-meep", ["scripts/meep-env.sh", "--check"]),
    ("meep-mpi", "test-meep-mpi", ["scripts/meep-mpi-env.sh", "--check"]),
]
SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s")  # "3 passed, 1 warning in 2.1s"
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)")


def counts(lines: list[str]) -> dict[str, int]:
    """passed / failed / skipped added up over every pytest summary line in ``lines``."""
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for line in lines:
        found = SUMMARY.match(line.strip())
        if found is None:
            continue
        for n, kind in COUNT.findall(found.group(1)):
            total["failed" if kind.startswith("error") else kind] += int(n)
    return total


def run_leg(target: str) -> tuple[int, list[str], float]:
    """Run ``make target``, streaming its output; its exit code, its lines and its seconds."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["make", "--no-print-directory", target], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), lines, time.monotonic() - t0


def main(names: list[str]) -> int:
    chosen = [leg for leg in LEGS if not names or leg[0] in names]
    rows = []
    for name, target, check in chosen:
        if check is not None and subprocess.run(check, capture_output=True).returncode != 0:
            rows.append((name, None, 0.0, f"not run: `{' '.join(check)}` says it can't run here"))
            continue
        print(f"\n=== leg {name}: make {target}", flush=True)
        rc, lines, seconds = run_leg(target)
        rows.append((name, counts(lines), seconds, "ok" if rc == 0 else f"FAILED (exit {rc})"))
    print("\n| leg | passed | failed | skipped | minutes | result |")
    print("|---|---|---|---|---|---|")
    for name, c, seconds, result in rows:
        cells = [str(c[k]) for k in ("passed", "failed", "skipped")] if c else ["-", "-", "-"]
        print(f"| {name} | {' | '.join(cells)} | {seconds / 60:.1f} | {result} |")
    ran = [c for _, c, _, _ in rows if c]
    print(
        f"total: {sum(c['passed'] for c in ran)} passed, {sum(c['failed'] for c in ran)} failed, "
        f"{sum(c['skipped'] for c in ran)} skipped"
    )
    return 1 if any(r[3].startswith("FAILED") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
