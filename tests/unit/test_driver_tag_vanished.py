"""We test these aspects: a driver-toolkit tag (or the whole ImageStream) that vanishes under a
working DaemonSet never rewrites it; a version that never had a tag is still marked missing."""

from __future__ import annotations

import pytest

from ocp_gpu.model.driver_snapshot import DriverToolkitStream, StreamState
from ocp_gpu.planning.drivers.driver_strategy import Strategy

from ._drivers import DTK_416, FULL_STREAM, V416, V417, applied, by_key, plan, rhcos_node, stream_with

VANISHED = {
    "stream-deleted": DriverToolkitStream(StreamState.ABSENT, reason="deleted"),
    "tag-dropped": stream_with(("417.94.1", "x")),
    "stream-broken-tag-gone": stream_with(state=StreamState.BROKEN),
}


@pytest.mark.parametrize("stream", VANISHED.values(), ids=VANISHED.keys())
def test_running_daemonset_keeps_its_dtk_image_when_the_tag_vanishes(stream: DriverToolkitStream) -> None:
    nodes = [rhcos_node("a", V416)]
    running = applied(nodes, Strategy.DTK, FULL_STREAM)
    entry = by_key(plan(nodes, Strategy.DTK, daemonsets=running, stream=stream))[V416]
    assert entry.dtk_image == DTK_416
    assert not entry.image_missing
    assert entry.name == running[0].name


@pytest.mark.parametrize("stream", VANISHED.values(), ids=VANISHED.keys())
def test_new_version_without_a_tag_is_still_marked_missing(stream: DriverToolkitStream) -> None:
    nodes = [rhcos_node("a", V416), rhcos_node("b", V417)]
    running = applied(nodes[:1], Strategy.DTK, FULL_STREAM)
    entry = by_key(plan(nodes, Strategy.DTK, daemonsets=running, stream=stream))[V417]
    assert entry.image_missing
    assert entry.dtk_image is None
