"""Index paths no object has are found, with the paths the objects do have that come close."""

from __future__ import annotations

from cacheproxy.daemon.indexcheck import EmptyIndex, empty_indexes, object_paths

POD = {
    "metadata": {"name": "p", "ownerReferences": [{"uid": "u1"}], "labels": {"app": "a"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    "status": {"phase": "Running"},
}


def test_object_paths_use_the_index_syntax() -> None:
    assert set(object_paths(POD)) == {
        "metadata.name",
        "metadata.ownerReferences[*].uid",
        "metadata.labels.app",
        "spec.nodeName",
        "spec.containers[*].name",
        "spec.containers[*].image",
        "status.phase",
    }


def test_a_mistyped_path_is_found_with_the_path_meant() -> None:
    found = empty_indexes(
        [POD, POD], ["spec.nodName", "spec.nodeName", "metadata.ownerReferences[*].uid"]
    )
    assert found == [EmptyIndex("spec.nodName", ("spec.nodeName",))]
    assert found[0].describe("pods") == (
        "pods: no cached object has a value at the index path spec.nodName, so every query on "
        "it answers nothing; did you mean spec.nodeName?"
    )


def test_a_path_far_from_everything_gets_no_suggestion() -> None:
    assert empty_indexes([POD], ["zzz.qqq"]) == [EmptyIndex("zzz.qqq", ())]


def test_no_objects_tell_nothing() -> None:
    assert empty_indexes([], ["spec.nodName"]) == []


def test_a_path_some_objects_have_is_not_empty() -> None:
    unscheduled = {"metadata": {"name": "q"}, "spec": {}}
    assert empty_indexes([unscheduled, POD], ["spec.nodeName"]) == []
