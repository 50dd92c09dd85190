"""An ImageStream as the planner reads it: its spec and status tags, already type-checked.

kube/reading.image_stream builds it from the API's JSON; planning/imagestreams decides
what each tag means (which are RHCOS versions, which image serves one, whether the stream
is broken), so a name here may be empty: that is a planning fact, not a parse error.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class SpecTag:
    """`spec.tags[]`: `from.kind` is "DockerImage" when the API omits it."""

    name: str
    from_kind: str
    from_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class StatusTag:
    """`status.tags[]`: its non-empty `items[].dockerImageReference`s, newest first
    (as OpenShift keeps them)."""

    tag: str
    references: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ImageStream:
    spec_tags: tuple[SpecTag, ...] = ()
    status_tags: tuple[StatusTag, ...] = ()
