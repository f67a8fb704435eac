"""SharedInformerFactory: one informer per collection, started and stopped together."""

from __future__ import annotations

from cacheproxy.informer import Collection, FakeListerWatcher, SharedInformerFactory
from cacheproxy.kube import status
from cacheproxy.kube.resources import builtin


async def test_one_informer_per_collection_shared_by_every_asker() -> None:
    made: list[Collection] = []

    def lw_for(collection: Collection) -> FakeListerWatcher:
        made.append(collection)
        lw = FakeListerWatcher(kind=collection.rtype.kind)
        lw.emit("ADDED", {"metadata": {"name": f"x-{len(made)}", "namespace": "default"}})
        return lw

    factory = SharedInformerFactory(lw_for)
    pods = Collection(builtin("pods"))
    first = factory.informer(pods, field_indexes=["spec.nodeName"])
    assert factory.informer(Collection(builtin("pods"))) is first
    in_ns = factory.informer(Collection(builtin("pods"), namespace="default"))
    labelled = factory.informer(Collection(builtin("pods"), label_selector="app=web"))
    assert len({id(first), id(in_ns), id(labelled)}) == 3
    assert made == [
        pods,
        Collection(builtin("pods"), namespace="default"),
        Collection(builtin("pods"), label_selector="app=web"),
    ]
    assert first.store.has_index("spec.nodeName")
    async with factory:
        assert await factory.wait_for_cache_sync(within=5)
        late = factory.informer(Collection(builtin("configmaps")))
        assert await factory.wait_for_cache_sync(within=5)
        assert late.has_synced and len(late.store) == 1
    assert [i.reflector.phase.value for i in factory] == ["stopped"] * 4


async def test_wait_for_cache_sync_gives_up_after_the_deadline() -> None:
    lw = FakeListerWatcher()
    lw.supports_watch_list = False
    for _ in range(50):
        lw.fail_next_list(status.internal_error("down"))
    factory = SharedInformerFactory(lambda c: lw)
    factory.informer(Collection(builtin("configmaps")))
    async with factory:
        assert not await factory.wait_for_cache_sync(within=0.2)


def test_collection_names_say_what_they_watch() -> None:
    c = Collection(
        builtin("deployments"),
        namespace="prod",
        label_selector="app=web",
        field_selector="metadata.name=x",
    )
    assert c.name == "apps/v1/deployments ns=prod labels=app=web fields=metadata.name=x"
