"""A point's task asks its resources through one function (sweep/capacity/resources.py)."""

from sweep.capacity.resources import CORES, MEMORY, ask, cores


def test_a_task_asks_its_cores_and_only_the_memory_and_accelerator_given():
    assert ask(2) == {CORES: 2}
    assert ask(1, 2**30, ("gpu", 0.5)) == {CORES: 1, MEMORY: 2**30, "gpu": 0.5}


def test_a_worker_that_offers_no_cores_offers_zero():
    assert cores({MEMORY: 5}) == 0 and cores({CORES: 4.0}) == 4
