"""Spaces: points, ids, dims and coordinates."""

import numpy as np
import pytest

from sweep.model.space import Explicit, Grid, LatinHypercube, Random, SpaceError, Zip, build_space, point_id


def test_grid_is_the_product_in_axis_order():
    g = Grid({"a": [1, 2], "b": ["x", "y", "z"]})
    pts = list(g.points())
    assert g.dims == ("a", "b") and g.shape == (2, 3) and len(g) == 6
    assert pts[0].params == {"a": 1, "b": "x"} and pts[0].index == (0, 0)
    assert pts[-1].params == {"a": 2, "b": "z"} and pts[-1].index == (1, 2)
    assert g.coords["b"][1].dtype == object


def test_point_ids_depend_on_parameters_only():
    assert point_id({"a": 1, "b": 2}) == point_id({"b": 2, "a": 1})
    assert point_id({"a": 1}) != point_id({"a": 2})
    a = {p.id for p in Grid({"a": [1, 2], "b": [3]}).points()}
    b = {p.id for p in Grid({"b": [3], "a": [2, 1]}).points()}
    assert a == b


def test_fingerprint_changes_with_the_space():
    assert Grid({"a": [1, 2]}).fingerprint() == Grid({"a": [1, 2]}).fingerprint()
    assert Grid({"a": [1, 2]}).fingerprint() != Grid({"a": [1, 3]}).fingerprint()
    assert Grid({"a": [1, 2]}).fingerprint() != Zip({"a": [1, 2]}).fingerprint()


def test_zip_and_list_run_along_point():
    z = Zip({"a": [1, 2, 2], "b": [0.5, 0.5, 1.0]})
    assert z.dims == ("point",) and z.shape == (3,)
    assert [p.params for p in z.points()][2] == {"a": 2, "b": 1.0}
    e = Explicit([{"a": 1, "s": "x"}, {"a": 5, "s": "y"}])
    assert [p.params for p in e.points()] == [{"a": 1, "s": "x"}, {"a": 5, "s": "y"}]


def test_random_and_lhs_are_seeded_and_within_bounds():
    axes = {"lr": {"low": 1e-3, "high": 1e-1, "log": True}, "n": {"low": 2, "high": 5, "integer": True}}
    r1, r2 = Random(50, 7, axes), Random(50, 7, axes)
    assert np.array_equal(r1.columns["lr"], r2.columns["lr"])
    assert not np.array_equal(r1.columns["lr"], Random(50, 8, axes).columns["lr"])
    assert r1.columns["lr"].min() >= 1e-3 and r1.columns["lr"].max() <= 1e-1
    assert set(r1.columns["n"]) <= {2, 3, 4, 5}
    lhs = LatinHypercube(10, 0, {"x": [0, 1]})
    # a Latin hypercube has exactly one sample in each of the n strata
    assert sorted(np.floor(lhs.columns["x"] * 10).astype(int)) == list(range(10))


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("grid", {"a": [[1], [2]]}, "is a list"),
        ("grid", {"a": [True, 1]}, "value 1 is a number among bools"),
        ("zip", {}, "at least one axis"),
        ("list", [], "at least one point"),
        ("random", {"n": 3, "axes": {"x": {"low": 0}}}, "give [low, high]"),
        ("random", {"n": 3, "axes": {"x": {"low": -1, "high": 1, "log": True}}}, "log scale needs low > 0"),
        ("sobol", {}, "unknown space"),
    ],
)
def test_bad_spaces_say_where_and_how(kind, spec, message):
    with pytest.raises(SpaceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_space(kind, spec)


def test_a_random_space_is_prefix_stable_and_lhs_is_not():
    """Raising n keeps the first points of a seed (what growing a random sweep relies on)."""
    axes = {
        "x": [0.0, 1.0],
        "k": {"low": 1, "high": 9, "integer": True},
        "lr": {"low": 1e-4, "high": 1, "log": True},
    }
    small, big = Random(5, 7, axes), Random(12, 7, axes)
    assert [p.params for p in big.points()][:5] == [p.params for p in small.points()]
    lhs_small, lhs_big = LatinHypercube(5, 7, axes), LatinHypercube(12, 7, axes)
    assert [p.params for p in lhs_big.points()][:5] != [p.params for p in lhs_small.points()]
