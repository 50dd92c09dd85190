"""We test `kube.pod_following.apply_event` (a node's pods kept up to date from watch events):

- ADDED and MODIFIED put the pod as it is now, DELETED takes it out, a BOOKMARK changes nothing
  but the version;
- an ERROR event (410 Gone) fails the follow, so the caller reads the pods instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.kube import pod_following, upgrading
from ocp_gpu.model.upgrade_observations import WorkloadPod


def body(name: str, uid: str, version: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "apps", "uid": uid, "resourceVersion": version},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def test_events_keep_the_nodes_pods_as_they_are() -> None:
    pods: dict[str, WorkloadPod] = {}
    assert pod_following.apply_event(pods, {"type": "ADDED", "object": body("a", "u1", "10")}) == "10"
    assert pod_following.apply_event(pods, {"type": "ADDED", "object": body("b", "u2", "11")}) == "11"
    done = body("a", "u1", "12", phase="Succeeded")
    assert pod_following.apply_event(pods, {"type": "MODIFIED", "object": done}) == "12"
    assert pods["u1"] == upgrading.workload_pod(done) and not pods["u1"].active
    assert pod_following.apply_event(pods, {"type": "DELETED", "object": body("b", "u2", "13")}) == "13"
    assert set(pods) == {"u1"}
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "14"}}}
    assert pod_following.apply_event(pods, bookmark) == "14"
    assert set(pods) == {"u1"}


def test_an_error_event_fails_the_follow() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    with pytest.raises(pod_following.FollowFailed, match="too old"):
        pod_following.apply_event({}, gone)
