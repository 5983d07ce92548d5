"""A point's task asks its resources through one function, and a worker runs as many side by
side as each resource it offers holds (sweep/capacity/resources.py)."""

from sweep.capacity.resources import CORES, MEMORY, ask, at_once, cores, limit, shown

GIB = 1 << 30


def test_a_task_asks_its_cores_and_only_the_memory_accelerator_and_amounts_given():
    assert ask(2) == {CORES: 2}
    assert ask(1, GIB, ("gpu", 0.5)) == {CORES: 1, MEMORY: GIB, "gpu": 0.5}
    assert ask(1, amounts=(("licenses", 2.0),)) == {CORES: 1, "licenses": 2.0}


def test_a_worker_that_offers_no_cores_offers_zero():
    assert cores({MEMORY: 5}) == 0 and cores({CORES: 4.0}) == 4


def test_points_at_once_are_limited_by_whichever_resource_runs_out_first():
    offer = {CORES: 32, MEMORY: 120 * GIB, "licenses": 3}
    assert (at_once(offer, ask(1, 8 * GIB)), limit(offer, ask(1, 8 * GIB))) == (15, MEMORY)
    assert (at_once(offer, ask(1, GIB)), limit(offer, ask(1, GIB))) == (32, CORES)
    assert (at_once(offer, ask(4)), limit(offer, ask(4))) == (8, CORES)
    asked = ask(1, GIB, amounts=(("licenses", 1.0),))
    assert (at_once(offer, asked), limit(offer, asked)) == (3, "licenses")


def test_a_worker_that_offers_none_of_an_asked_resource_runs_no_such_point():
    assert at_once({CORES: 8}, ask(1, GIB)) == 0
    assert at_once({CORES: 8}, ask(1, amounts=(("licenses", 1.0),))) == 0


def test_cores_limit_a_tie():
    assert limit({CORES: 4, MEMORY: 4 * GIB}, ask(1, GIB)) == CORES


def test_bytes_read_as_bytes_and_counts_as_numbers():
    assert shown(MEMORY, 2 * GIB) == "2.00 GiB"
    assert shown("licenses", 1.5) == "1.5"


def test_disk_is_bytes_and_the_local_worker_offers_the_free_space_where_jobs_write(tmp_path, monkeypatch):
    import shutil
    from types import SimpleNamespace

    from sweep.capacity.resources import AMOUNTS

    asked: list[str] = []
    usage = SimpleNamespace(total=9, used=4, free=5)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: asked.append(path) or usage)
    monkeypatch.chdir(tmp_path)
    disk = AMOUNTS["disk"]
    assert disk.size and disk.local is not None
    assert disk.local() == 5.0 and asked == [str(tmp_path)]
    assert shown("disk", 20 * GIB) == "20.00 GiB"
