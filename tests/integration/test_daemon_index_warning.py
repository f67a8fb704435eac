"""A mistyped index path is reported once the resource has synced, with the path meant."""

from __future__ import annotations

import logging

import pytest

from cacheproxy.daemon.config import ResourceConfig
from cacheproxy.kube.resources import builtin
from cacheproxy.sim import SimServer
from tests.integration.daemon_support import daemon_for
from tests.support import until


async def test_an_index_path_no_object_has_is_a_warning_with_a_suggestion(
    demo_server: SimServer, caplog: pytest.LogCaptureFixture
) -> None:
    resources = (ResourceConfig(rtype=builtin("pods"), indexes=("spec.nodName", "spec.nodeName")),)
    with caplog.at_level(logging.WARNING, logger="cacheproxy.daemon"):
        async with daemon_for(demo_server.url, resources=resources):
            await until(lambda: any("spec.nodName" in r.message for r in caplog.records))
    warnings = [r.message for r in caplog.records if "index path" in r.message]
    assert warnings == [
        "pods: no cached object has a value at the index path spec.nodName, so every query on "
        "it answers nothing; did you mean spec.nodeName?"
    ]
