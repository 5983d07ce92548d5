"""A recipe's plain amounts: written as keys of ``resources`` and ``cluster``, read into one
mapping, refused with the key and the fix (sweep/model/amounts.py)."""

import pytest

from sweep.model.recipe import ClusterSettings, Recipe, RecipeError
from tests.helpers import JOBS

GRID = {"grid": {"x": [1]}}


def recipe(**sections):
    return Recipe.from_dict({"job": f"{JOBS}:square", "params": GRID, **sections}).recipe


def test_an_amount_is_read_from_its_key_into_the_sections_amounts(licenses, scratch):
    r = recipe(resources={"licenses": 2, "scratch": "2GB"}, cluster={"licenses": 4, "scratch": "1GiB"})
    assert r.resources.amounts == {"licenses": 2.0, "scratch": 2e9}
    assert r.cluster.amounts == {"licenses": 4.0, "scratch": float(1 << 30)}
    assert recipe().resources.amounts == {} and recipe().cluster.amounts == {}


def test_a_recipe_read_back_from_its_dump_asks_the_same(licenses, scratch):
    r = recipe(resources={"licenses": 1.5, "scratch": "2GB"}, cluster={"scratch": "3GB"})
    again = Recipe.from_dict(r.model_dump()).recipe
    assert again.resources.amounts == r.resources.amounts and again.cluster.amounts == r.cluster.amounts
    r.cluster.jobs = 2  # an assignment validates the section again, amounts as read
    assert r.cluster.amounts == {"scratch": 3e9}


@pytest.mark.parametrize(
    "resources, message",
    [
        ({"licenses": 0}, "licenses: 0 is no amount of solver licenses above zero; write e.g. licenses: 4"),
        ({"licenses": True}, "licenses: True is no amount"),
        ({"licenses": "two"}, "licenses: 'two' is no amount"),
        ({"licenses": float("inf")}, "licenses: inf is no amount"),
        ({"scratch": "lots"}, "scratch: 'lots' is not a size"),
        ({"scratch": 0}, "scratch: 0 is no amount of scratch space above zero; write e.g. scratch: 20GB"),
        ({"amounts": {"disc": 1}}, "amounts: unknown amount(s) ['disc']; the amounts are: disk, licenses"),
    ],
)
def test_what_is_no_amount_is_refused_naming_its_key(licenses, scratch, resources, message):
    with pytest.raises(RecipeError) as err:
        recipe(resources=resources)
    assert message in str(err.value)


def test_without_the_table_entry_the_key_is_unknown():
    with pytest.raises(RecipeError, match="licenses"):
        recipe(resources={"licenses": 1})


def test_the_workers_of_a_running_scheduler_offer_what_they_were_started_with(licenses):
    with pytest.raises(RecipeError, match=r"cluster.licenses does not apply to kind 'address'.*--resources"):
        recipe(cluster={"kind": "address", "address": "tcp://127.0.0.1:8786", "licenses": 2})


def test_an_amount_the_batch_systems_class_takes_is_passed_on_as_well(scratch, monkeypatch):
    from sweep.model import backends

    monkeypatch.setattr(backends, "options", lambda kind: frozenset({"scratch", "queue"}))
    settings = ClusterSettings(kind="slurm", cores=2, memory="2GiB", scratch="5GB", queue="q")
    assert settings.jobqueue_options == {"scratch": 5e9, "queue": "q"}
