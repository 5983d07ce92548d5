"""The soak's count check (benchmarks/soakcount.py): a point's stored attempts and requeues
against the starts its job marked."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.soakcount import NEAR_S, count_check, marked  # noqa: E402

END = 1000.0  # a driver killed here, a new one submitted


def check(attempts: int, requeued: int, marks: list[float], lethal: tuple[float, ...] = ()):
    return count_check([attempts], [requeued], [marks], [END], list(lethal))


def test_starts_all_counted_in_one_run_are_exact():
    assert check(2, 1, [10.0, 20.0, 25.0]) == ({"exact": 1}, [])


def test_a_start_the_store_missed_far_from_any_driver_end_is_a_miscount():
    tally, problems = check(1, 0, [10.0, 20.0])  # a requeue not counted
    assert tally == {} and "point 0: 2 starts marked, the store counts 1 attempts + 0 requeued" in problems[0]


def test_a_requeue_counted_twice_is_a_miscount():
    tally, problems = check(1, 2, [10.0, 20.0])
    assert problems and "1 points" in problems[0]


def test_starts_of_a_run_lost_with_its_driver_explain_fewer_counted():
    assert check(1, 0, [END - 200, END + 200]) == ({"fewer_run_lost": 1}, [])  # two runs
    assert check(1, 0, [END + NEAR_S / 2, END + 200]) == ({"fewer_run_lost": 1}, [])  # near an end


def test_more_counted_than_marked_only_beside_a_lethal_fault():
    assert check(2, 0, [10.0], lethal=(12.0,)) == ({"more_fault_hit": 1}, [])
    assert check(2, 0, [10.0], lethal=(10.0 + 3 * NEAR_S,))[1]


def test_marks_are_read_per_point_from_their_folders(tmp_path):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "1-42").touch()
    assert [len(m) for m in marked(tmp_path, 3)] == [0, 1, 0]
