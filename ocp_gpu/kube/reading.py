"""Turning raw API objects (JSON dicts from watches and lists) into model records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import nodes


def node_facts(body: Mapping[str, Any]) -> nodes.NodeFacts:
    """The NodeFacts of a Node object as the API returns it."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    info = status.get("nodeInfo") or {}
    allocatable = status.get("allocatable") or {}
    return nodes.NodeFacts(
        name=nodes.NodeName(str(metadata.get("name", ""))),
        labels=nodes.kept_labels(metadata.get("labels") or {}),
        os_image=str(info.get("osImage", "")),
        kernel_version=str(info.get("kernelVersion", "")),
        unschedulable=bool(spec.get("unschedulable", False)),
        gpus=_quantity_int(allocatable.get("nvidia.com/gpu", "0")),
    )


def _quantity_int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        # Extended resources are integers; anything else counts as none.
        return 0
