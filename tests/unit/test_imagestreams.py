"""We test these aspects: how the driver-toolkit ImageStream becomes RHCOS version -> DTK image.

- spec `from.name` wins; a tag with no spec image falls back to the newest status item;
- `latest` and every `latest-*` tag (OCP's `latest-rhel-10`) never count as versions;
- an empty tag name (spec or status) marks the stream broken, named tags still resolve;
- an absent stream, a null/garbled body and a named tag with no image at all;
- a non-DockerImage `from` is not a pull spec;
- the result never depends on anything but the input (hypothesis).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.kube import reading
from ocp_gpu.model.driver_snapshot import DriverToolkitStream, RhcosVersion, StreamState
from ocp_gpu.planning.drivers import dtk_images

V416 = "416.94.202407030122-0"
V417 = "417.94.202410090854-0"
DTK_A = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "a" * 64
DTK_B = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "b" * 64
DTK_OLD = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "0" * 64


def resolve(body: dict[str, Any] | None) -> DriverToolkitStream:
    """The planner's answer for this ImageStream JSON, read through kube/reading's converter."""
    return dtk_images.resolve_driver_toolkit_stream(reading.image_stream_singleton(body))


def spec_tag(name: str, image: str | None, kind: str = "DockerImage") -> dict[str, Any]:
    tag: dict[str, Any] = {"name": name}
    if image is not None:
        tag["from"] = {"kind": kind, "name": image}
    return tag


def status_tag(name: str, *images: str) -> dict[str, Any]:
    return {"tag": name, "items": [{"dockerImageReference": image} for image in images]}


def stream(
    spec: list[dict[str, Any]] | None = None, status: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
        "spec": {"tags": spec or []},
        "status": {"tags": status or []},
    }


def test_spec_from_name_is_the_image() -> None:
    result = resolve(stream([spec_tag(V416, DTK_A)]))
    assert result.state is StreamState.PRESENT
    assert result.image_for(RhcosVersion(V416)) == DTK_A
    assert result.reason == ""


def test_spec_wins_over_status() -> None:
    result = resolve(stream([spec_tag(V416, DTK_A)], [status_tag(V416, DTK_B)]))
    assert result.image_for(RhcosVersion(V416)) == DTK_A


def test_falls_back_to_newest_status_item() -> None:
    # OpenShift keeps status items newest first.
    result = resolve(stream([spec_tag(V416, None)], [status_tag(V416, DTK_B, DTK_OLD)]))
    assert result.image_for(RhcosVersion(V416)) == DTK_B


def test_status_only_tag_counts() -> None:
    result = resolve(stream([], [status_tag(V417, DTK_B)]))
    assert result.image_for(RhcosVersion(V417)) == DTK_B


def test_status_item_without_reference_is_skipped() -> None:
    tag = {"tag": V416, "items": [{"dockerImageReference": ""}, {"dockerImageReference": DTK_OLD}]}
    result = resolve(stream([], [tag]))
    assert result.image_for(RhcosVersion(V416)) == DTK_OLD


@pytest.mark.parametrize("kind", ["ImageStreamTag", "ImageStreamImage"])
def test_non_docker_image_from_is_not_a_pull_spec(kind: str) -> None:
    result = resolve(stream([spec_tag(V416, "driver-toolkit:latest", kind=kind)], [status_tag(V416, DTK_B)]))
    assert result.image_for(RhcosVersion(V416)) == DTK_B


def test_from_without_kind_is_a_docker_image() -> None:
    result = resolve(stream([{"name": V416, "from": {"name": DTK_A}}]))
    assert result.image_for(RhcosVersion(V416)) == DTK_A


floating_tags = pytest.mark.parametrize("floating", ["latest", "latest-rhel-10", "latest-rhel-9", "latest-"])


@floating_tags
def test_floating_tags_are_never_versions(floating: str) -> None:
    result = resolve(
        stream([spec_tag(floating, DTK_A), spec_tag(V416, DTK_B)], [status_tag(floating, DTK_A)])
    )
    assert [tag.name for tag in result.tags] == [V416]
    assert result.image_for(RhcosVersion(floating)) is None
    assert result.state is StreamState.PRESENT


@floating_tags
def test_only_floating_tags_resolve_nothing(floating: str) -> None:
    result = resolve(stream([spec_tag(floating, DTK_A)]))
    assert result.tags == ()
    assert result.state is StreamState.PRESENT


def test_versions_looking_like_latest_are_versions() -> None:
    # Only the exact `latest` and the `latest-` prefix float; `latestish` is a name like any other.
    assert dtk_images.is_version_tag("latestish")
    assert dtk_images.is_version_tag(V416)
    assert not dtk_images.is_version_tag("latest")
    assert not dtk_images.is_version_tag("latest-rhel-10")


@pytest.mark.parametrize("where", ["spec", "status"])
def test_empty_tag_name_marks_the_stream_broken(where: str) -> None:
    if where == "spec":
        body = stream([spec_tag("", DTK_OLD), spec_tag(V416, DTK_A)])
    else:
        body = stream([spec_tag(V416, DTK_A)], [status_tag("", DTK_OLD)])
    result = resolve(body)
    assert result.state is StreamState.BROKEN
    assert "empty name" in result.reason and where in result.reason
    # named tags still serve
    assert result.image_for(RhcosVersion(V416)) == DTK_A


def test_absent_stream() -> None:
    result = resolve(None)
    assert result.state is StreamState.ABSENT
    assert result.tags == ()
    assert "openshift/driver-toolkit" in result.reason
    assert result.known


def test_named_tag_without_any_image_is_unresolved() -> None:
    result = resolve(stream([spec_tag(V416, None)], [status_tag(V416)]))
    assert result.image_for(RhcosVersion(V416)) is None
    assert result.unresolved == (V416,)
    assert result.state is StreamState.PRESENT


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"spec": None, "status": None},
        {"spec": {"tags": None}},
        {"spec": {"tags": [None, 3, "x"]}},
        {"status": {"tags": [{"tag": V416, "items": None}]}},
        {"spec": {"tags": [{"name": V416, "from": None}]}},
    ],
    ids=["empty", "null-spec-status", "null-tags", "garbage-entries", "null-items", "null-from"],
)
def test_garbled_bodies_never_raise(body: dict[str, Any]) -> None:
    result = resolve(body)
    assert result.tags == ()


def test_tag_order_follows_spec_then_status() -> None:
    result = resolve(stream([spec_tag(V417, DTK_B), spec_tag(V416, DTK_A)], [status_tag("999.0", DTK_OLD)]))
    assert [tag.name for tag in result.tags] == [V417, V416, "999.0"]


def test_unreadable_stream_is_not_known() -> None:
    from ocp_gpu.model.driver_snapshot import DriverToolkitStream

    assert not DriverToolkitStream(StreamState.UNREADABLE, reason="403").known


tag_names = st.one_of(
    st.sampled_from(["", "latest", "latest-rhel-10", V416, V417]),
    st.from_regex(r"4[0-9]{2}\.9[0-9]\.20[0-9]{10}-0", fullmatch=True),
)
images = st.sampled_from([DTK_A, DTK_B, DTK_OLD])


@given(
    spec=st.lists(st.tuples(tag_names, st.one_of(st.none(), images)), max_size=6),
    status=st.lists(st.tuples(tag_names, st.lists(images, max_size=3)), max_size=6),
)
def test_invariants(spec: list[tuple[str, str | None]], status: list[tuple[str, list[str]]]) -> None:
    body = stream([spec_tag(n, i) for n, i in spec], [status_tag(n, *i) for n, i in status])
    result = resolve(body)
    names = [tag.name for tag in result.tags]
    # never a floating tag, never an empty name, never twice
    assert all(dtk_images.is_version_tag(name) and name for name in names)
    assert len(names) == len(set(names))
    # broken exactly when some tag has an empty name
    empty_name = any(n == "" for n, _ in spec) or any(n == "" for n, _ in status)
    assert (result.state is StreamState.BROKEN) == empty_name
    # every resolved image comes from the input
    assert all(tag.image in (DTK_A, DTK_B, DTK_OLD) for tag in result.tags)
    # deterministic
    assert resolve(body) == result
