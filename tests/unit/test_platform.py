"""We test these aspects of platform detection (planning/platforms.py):

- OpenShift only when both config.openshift.io and image.openshift.io are served;
- one OpenShift group without the other is Kubernetes, with a reason naming what is missing;
- the status value ("openshift"/"kubernetes") the cluster reconciler writes;
- whether drivers are built with the Driver Toolkit (planning/drivers/driver_strategy.py): per
  platform, driver switch, usePrecompiled and use_ocp_driver_toolkit (unset, true, false).
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_strategy

CORE = ["", "apps", "apiextensions.k8s.io", "coordination.k8s.io"]
OPENSHIFT = [*CORE, "config.openshift.io", "image.openshift.io", "security.openshift.io"]

DETECTIONS = {
    "vanilla": (CORE, platforms.PlatformKind.KUBERNETES, ["no OpenShift API groups"]),
    "openshift": (OPENSHIFT, platforms.PlatformKind.OPENSHIFT, ["config.openshift.io", "image.openshift.io"]),
    "config without image (e.g. MicroShift)": (
        [*CORE, "config.openshift.io"],
        platforms.PlatformKind.KUBERNETES,
        ["image.openshift.io is not", "driver-toolkit"],
    ),
    "image without config": (
        [*CORE, "image.openshift.io"],
        platforms.PlatformKind.KUBERNETES,
        ["config.openshift.io is not"],
    ),
}


@pytest.mark.parametrize(("groups", "kind", "reason_mentions"), DETECTIONS.values(), ids=DETECTIONS.keys())
def test_detect_platform(groups: list[str], kind: platforms.PlatformKind, reason_mentions: list[str]) -> None:
    detected = platforms.detect_platform(groups)
    assert detected.kind is kind
    assert detected.is_openshift == (kind is platforms.PlatformKind.OPENSHIFT)
    assert detected.value == kind.value
    for mention in reason_mentions:
        assert mention in detected.reason


def test_detection_takes_any_collection() -> None:
    assert platforms.detect_platform(frozenset(OPENSHIFT)).is_openshift
    assert platforms.detect_platform({group: "v1" for group in OPENSHIFT}).is_openshift


ON_OPENSHIFT = platforms.detect_platform(OPENSHIFT)
ON_KUBERNETES = platforms.detect_platform(CORE)

DTK_DECISIONS: dict[str, tuple[platforms.Platform, dict[str, Any], bool]] = {
    "openshift, defaults": (ON_OPENSHIFT, {}, True),
    "openshift, explicitly on": (ON_OPENSHIFT, {"operator": {"use_ocp_driver_toolkit": True}}, True),
    "openshift, explicitly off": (ON_OPENSHIFT, {"operator": {"use_ocp_driver_toolkit": False}}, False),
    "openshift, precompiled": (ON_OPENSHIFT, {"driver": {"usePrecompiled": True}}, False),
    "openshift, driver disabled": (ON_OPENSHIFT, {"driver": {"enabled": False}}, False),
    "kubernetes, defaults": (ON_KUBERNETES, {}, False),
    "kubernetes, explicitly on": (ON_KUBERNETES, {"operator": {"use_ocp_driver_toolkit": True}}, False),
}


@pytest.mark.parametrize(("detected", "spec", "expected"), DTK_DECISIONS.values(), ids=DTK_DECISIONS.keys())
def test_should_use_driver_toolkit(
    detected: platforms.Platform, spec: dict[str, Any], expected: bool
) -> None:
    assert driver_strategy.should_use_driver_toolkit(detected, policy_parser.parse_policy(spec)) is expected
