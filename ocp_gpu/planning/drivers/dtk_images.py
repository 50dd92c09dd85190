"""Which Driver Toolkit image each RHCOS version gets, from the `openshift/driver-toolkit` ImageStream.

Decides: tag name -> image (`spec.tags[].from.name`, else the newest
`status.tags[].items[].dockerImageReference`), which tags are not RHCOS versions
(`latest`, `latest-rhel-10`, …), and whether the stream is broken.
Never does: read the cluster or parse its JSON (kube/reading.image_stream does),
decide what to do about a missing tag (planning/drivers does).
"""

from __future__ import annotations

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverToolkitStream, ImageStreamTag, RhcosVersion, StreamState
from ocp_gpu.model.imagestream_tags import ImageStream, SpecTag, StatusTag
from ocp_gpu.planning import delivery

# The floating tag; never an RHCOS version.
LATEST = "latest"
_STREAM = f"{labels.DTK_IMAGESTREAM_NAMESPACE}/{labels.DTK_IMAGESTREAM_NAME}"
# Per-stream floating tags such as `latest-rhel-10` (OCP ships it next to `latest`).
LATEST_PREFIX = "latest-"


def is_version_tag(name: str) -> bool:
    """A tag named after an RHCOS build, not one of the floating `latest*` tags."""
    return name != LATEST and not name.startswith(LATEST_PREFIX)


def resolve_driver_toolkit_stream(
    imagestream: ImageStream | delivery.Pending | None,
) -> DriverToolkitStream:
    """Reduce the ImageStream (kube/reading.image_stream's record) to RHCOS version -> DTK image.

    `None` means the ImageStream does not exist; `delivery.NOT_DELIVERED` that its watch has
    not listed it yet (UNREADABLE: nothing is known, so the planner keeps what runs).
    """
    # the watch has not listed it yet: unknown, never "absent"
    if imagestream is delivery.NOT_DELIVERED:
        return DriverToolkitStream(StreamState.UNREADABLE, reason=f"ImageStream {_STREAM} not listed yet")
    # no ImageStream: no version has a DTK image
    if imagestream is None:
        return DriverToolkitStream(StreamState.ABSENT, reason=f"ImageStream {_STREAM} does not exist")

    spec_tags = imagestream.spec_tags
    status_tags = imagestream.status_tags

    # Tag order: spec order first, then names that exist only in status.
    names: list[str] = []
    empty_name_places: list[str] = []
    tag_names = (("spec", tag.name) for tag in spec_tags)
    for where, name in (*tag_names, *(("status", tag.tag) for tag in status_tags)):
        if not name:
            empty_name_places.append(where)
        elif name not in names:
            names.append(name)

    tags: list[ImageStreamTag] = []
    unresolved: list[str] = []
    for name in names:
        # `latest` and `latest-*` float between versions: never an RHCOS version's image
        if not is_version_tag(name):
            continue
        image = _spec_image(spec_tags, name) or _newest_status_image(status_tags, name)
        if image:
            tags.append(ImageStreamTag(RhcosVersion(name), image))
        else:
            # a named tag with nothing behind it yet (import pending or failed): counts as missing
            unresolved.append(name)

    # a tag without a name: the stream is broken (RHBZ#2015024); named tags still serve
    if empty_name_places:
        where = " and ".join(sorted(set(empty_name_places)))
        reason = f"ImageStream {_STREAM} has a tag with an empty name in {where}"
        return DriverToolkitStream(StreamState.BROKEN, tuple(tags), reason, tuple(unresolved))
    return DriverToolkitStream(StreamState.PRESENT, tuple(tags), "", tuple(unresolved))


def _spec_image(spec_tags: tuple[SpecTag, ...], name: str) -> str | None:
    for entry in spec_tags:
        # NB: only a DockerImage `from` is a pull spec; an ImageStreamTag `from` names
        # another tag (`other:tag`), which only the status resolves.
        if entry.name == name and entry.from_kind == "DockerImage" and entry.from_name:
            return entry.from_name
    return None


def _newest_status_image(status_tags: tuple[StatusTag, ...], name: str) -> str | None:
    for entry in status_tags:
        # OpenShift keeps the history newest first.
        if entry.tag == name and entry.references:
            return entry.references[0]
    return None
