"""A cluster kind is a type (sweep/capacity/clusterkind.py)."""

import pytest

from sweep.capacity.clusterkind import KINDS, ClusterKind


def test_the_questions_asked_of_a_kind():
    assert ClusterKind("local").is_local and ClusterKind("local").owns_cluster
    assert ClusterKind("address").is_address and not ClusterKind("address").owns_cluster
    assert all(ClusterKind(k).is_batch for k in KINDS[2:]) and not ClusterKind("local").is_batch


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown cluster kind 'kubernetes'"):
        ClusterKind("kubernetes")
