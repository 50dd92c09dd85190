"""We test `ocp_gpu.kopf_events`: once installed, kopf's watch streams decode each event line without
`metadata.managedFields` (the rest of the object, its status included, and lines that are not
objects, unchanged)."""

from __future__ import annotations

import json

import pytest
from kopf._cogs.clients import api as kopf_api

from ocp_gpu import kopf_events


def test_watch_events_lose_managed_fields_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf_api, "json", json)
    assert kopf_events.install() is True
    policy = {
        "kind": "ClusterPolicy",
        "metadata": {"name": "p", "labels": {"a": "b"}, "managedFields": [{"manager": "oc"}]},
        "status": {"state": "ready", "images": ["kept"]},
    }
    line = json.dumps({"type": "MODIFIED", "object": policy}).encode()
    event = kopf_api.json.loads(line.decode("utf-8"))
    assert event == {
        "type": "MODIFIED",
        "object": {
            "kind": "ClusterPolicy",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "status": {"state": "ready", "images": ["kept"]},
        },
    }
    # An object without managedFields (a Node too: nodes no longer come through kopf) is unchanged.
    node = {"kind": "Node", "metadata": {"name": "n"}, "status": {"images": [{"names": ["x"]}]}}
    assert kopf_api.json.loads(json.dumps({"type": "ADDED", "object": node}))["object"] == node
    # An ERROR event's Status, a bookmark without metadata: decoded as they are.
    status = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
    assert kopf_api.json.loads(json.dumps(status)) == status
    assert kopf_api.json.loads("[1, 2]") == [1, 2]
    # Installed once: a second call finds kopf's name already ours.
    assert kopf_events.install() is False
