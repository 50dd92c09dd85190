"""We test these aspects of `planning.status.status_writes` (which ClusterPolicy status changes may wait):

- rollout progress (the OperandNotReady message, the driver DaemonSets' counts) waits for the
  interval since the last write, and no longer;
- everything else is written at once: the state, a condition appearing, going, flipping, or
  changing its reason or message, a driver DaemonSet appearing or changing image, other fields;
- nothing written yet by this process: at once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from ocp_gpu.planning.status import status_writes


def status(message: str = "driver not ready on n1, n2, n3 (+97 more)", ready: int = 3) -> dict[str, Any]:
    return {
        "state": "notReady",
        "namespace": "nvidia-gpu-operator",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": message},
            {"type": "Error", "status": "False", "reason": "Reconciled", "message": ""},
        ],
        "driverDaemonSets": [
            {
                "name": "nvidia-driver-daemonset-416",
                "key": "416",
                "image": "d:1",
                "nodes": 100,
                "ready": ready,
            }
        ],
    }


def test_progress_waits_for_the_interval() -> None:
    stored, fresh = status(), status("driver not ready on n4, n5, n6 (+94 more)", ready=6)
    assert status_writes.is_progress_only(stored, fresh)
    assert status_writes.write_delay(stored, fresh, last_write=100.0, now=101.0) == pytest.approx(
        status_writes.PROGRESS_INTERVAL_S - 1.0
    )
    assert status_writes.write_delay(stored, fresh, last_write=100.0, now=100.0 + 60) == 0.0


def test_nothing_written_yet_goes_at_once() -> None:
    assert status_writes.write_delay(status(), status(ready=9), last_write=None, now=5.0) == 0.0


def _ready_flips(s: dict[str, Any]) -> None:
    s["state"] = "ready"
    s["conditions"][0].update(status="True", reason="Reconciled", message="100 GPU node(s)")


def _error_appears(s: dict[str, Any]) -> None:
    s["conditions"].append(
        {"type": "DriverToolkitImageMissing", "status": "True", "reason": "x", "message": "y"}
    )


def _error_message_changes(s: dict[str, Any]) -> None:
    s["conditions"][1]["message"] = "something else"


def _reason_changes(s: dict[str, Any]) -> None:
    s["conditions"][0]["reason"] = "ApplyFailed"


def _daemonset_appears(s: dict[str, Any]) -> None:
    s["driverDaemonSets"].append({"name": "nvidia-driver-daemonset-417", "key": "417", "image": "d:1"})


def _image_changes(s: dict[str, Any]) -> None:
    s["driverDaemonSets"][0]["image"] = "d:2"


def _namespace_changes(s: dict[str, Any]) -> None:
    s["namespace"] = "gpu-operator"


@pytest.mark.parametrize(
    "change",
    [
        _ready_flips,
        _error_appears,
        _error_message_changes,
        _reason_changes,
        _daemonset_appears,
        _image_changes,
        _namespace_changes,
    ],
)
def test_anything_but_progress_is_written_at_once(change: Callable[[dict[str, Any]], None]) -> None:
    stored = status()
    fresh = copy.deepcopy(stored)
    change(fresh)
    assert not status_writes.is_progress_only(stored, fresh)
    assert status_writes.write_delay(stored, fresh, last_write=100.0, now=100.1) == 0.0
