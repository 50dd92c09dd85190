"""Which Driver Toolkit image each RHCOS version gets, from the `openshift/driver-toolkit` ImageStream.

Decides: tag name -> image (`spec.tags[].from.name`, else the newest
`status.tags[].items[].dockerImageReference`), which tags are not RHCOS versions
(`latest`, `latest-rhel-10`, …), and whether the stream is broken.
Never does: read the cluster (the caller passes the ImageStream as a plain dict),
decide what to do about a missing tag (planning/drivers does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import labels
from ocp_gpu.model.snapshot import DriverToolkitStream, ImageStreamTag, RhcosVersion, StreamState
from ocp_gpu.planning import delivery

# The floating tag; never an RHCOS version.
LATEST = "latest"
_STREAM = f"{labels.DTK_IMAGESTREAM_NAMESPACE}/{labels.DTK_IMAGESTREAM_NAME}"
# Per-stream floating tags such as `latest-rhel-10` (OCP ships it next to `latest`).
LATEST_PREFIX = "latest-"


def is_version_tag(name: str) -> bool:
    """A tag named after an RHCOS build, not one of the floating `latest*` tags."""
    return name != LATEST and not name.startswith(LATEST_PREFIX)


def resolve_driver_toolkit_stream(imagestream: delivery.Singleton) -> DriverToolkitStream:
    """Reduce the ImageStream (as JSON) to RHCOS version -> DTK image.

    `None` means the ImageStream does not exist; `delivery.NOT_DELIVERED` that its watch has
    not listed it yet (UNREADABLE: nothing is known, so the planner keeps what runs).
    """
    # the watch has not listed it yet: unknown, never "absent"
    if imagestream is delivery.NOT_DELIVERED:
        return DriverToolkitStream(StreamState.UNREADABLE, reason=f"ImageStream {_STREAM} not listed yet")
    # no ImageStream: no version has a DTK image
    if imagestream is None:
        return DriverToolkitStream(StreamState.ABSENT, reason=f"ImageStream {_STREAM} does not exist")

    spec_tags = _list(_dict(imagestream.get("spec")).get("tags"))
    status_tags = _list(_dict(imagestream.get("status")).get("tags"))

    # Tag order: spec order first, then names that exist only in status.
    names: list[str] = []
    empty_name_places: list[str] = []
    for where, entries in (("spec", spec_tags), ("status", status_tags)):
        for entry in entries:
            name = _str(_dict(entry).get("name" if where == "spec" else "tag"))
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


def _spec_image(spec_tags: list[Any], name: str) -> str | None:
    for entry in spec_tags:
        entry = _dict(entry)
        if _str(entry.get("name")) != name:
            continue
        source = _dict(entry.get("from"))
        # NB: only a DockerImage `from` is a pull spec; an ImageStreamTag `from` names
        # another tag (`other:tag`), which only the status resolves.
        if source.get("kind", "DockerImage") == "DockerImage" and _str(source.get("name")):
            return _str(source.get("name"))
    return None


def _newest_status_image(status_tags: list[Any], name: str) -> str | None:
    for entry in status_tags:
        entry = _dict(entry)
        if _str(entry.get("tag")) != name:
            continue
        # OpenShift keeps the history newest first.
        for item in _list(entry.get("items")):
            reference = _str(_dict(item).get("dockerImageReference"))
            if reference:
                return reference
    return None


# NB: the dict comes straight from the API server; a field can be missing or null
# anywhere, so every access goes through these instead of trusting the shape.
def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
