"""When a warm child is replaced: max_jobs, and the default's minimum life."""

from sweep.wire.recycling import DEFAULT, MAX_JOBS, MIN_LIFE_S, Recycling


def test_the_default_replaces_after_max_jobs_only_once_the_child_has_lived_its_minimum():
    assert Recycling.of(None, None) == DEFAULT == Recycling(MAX_JOBS, None, MIN_LIFE_S)
    assert not DEFAULT.due(MAX_JOBS - 1, 10 * MIN_LIFE_S)
    assert not DEFAULT.due(MAX_JOBS, MIN_LIFE_S / 2)  # young: points of milliseconds
    assert DEFAULT.due(MAX_JOBS, MIN_LIFE_S)


def test_a_max_jobs_the_recipe_sets_is_kept_exactly():
    asked = Recycling.of(3, 1 << 30)
    assert (asked.max_jobs, asked.max_rss, asked.min_life_s) == (3, 1 << 30, 0.0)
    assert not asked.due(2, 0.0) and asked.due(3, 0.0)


def test_jobs_left_runs_to_max_jobs_then_another_max_jobs_while_young():
    assert DEFAULT.jobs_left(MAX_JOBS - 10, 0.0) == 10
    assert DEFAULT.jobs_left(MAX_JOBS, 1.0) == MAX_JOBS  # checked again after those
    assert DEFAULT.jobs_left(3 * MAX_JOBS + 7, 1.0) == MAX_JOBS
    assert Recycling.of(4, None).jobs_left(4, 0.0) == 1  # due: one more at most, if kept at all
