"""We test `ocp_gpu.kopf_events`: once installed, kopf's watch streams decode each event line without
`metadata.managedFields` and a Node's `status.images` (the rest of the object, other kinds' status,
and lines that are not objects, unchanged)."""

from __future__ import annotations

import json

import pytest
from kopf._cogs.clients import api as kopf_api

from ocp_gpu import kopf_events


def test_watch_events_lose_managed_fields_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf_api, "json", json)
    assert kopf_events.install() is True
    node = {
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"a": "b"}, "managedFields": [{"manager": "kwok"}]},
        "status": {"nodeInfo": {"osImage": "RHCOS"}, "images": [{"names": ["x"], "sizeBytes": 1}]},
    }
    line = json.dumps({"type": "MODIFIED", "object": node}).encode()
    event = kopf_api.json.loads(line.decode("utf-8"))
    assert event == {
        "type": "MODIFIED",
        "object": {
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "b"}},
            "status": {"nodeInfo": {"osImage": "RHCOS"}},
        },
    }
    # Another kind keeps its status as it is.
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "status": {"images": ["kept"]}}
    assert kopf_api.json.loads(json.dumps({"type": "ADDED", "object": pod}))["object"] == pod
    # An ERROR event's Status, a bookmark without metadata: decoded as they are.
    status = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
    assert kopf_api.json.loads(json.dumps(status)) == status
    assert kopf_api.json.loads("[1, 2]") == [1, 2]
    # Installed once: a second call finds kopf's name already ours.
    assert kopf_events.install() is False
