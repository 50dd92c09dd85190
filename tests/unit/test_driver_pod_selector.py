"""We test these aspects of which driver pods the driver upgrade manages (planning/upgrades/pod_selection.py):

- the selector is a function of the mode: app.kubernetes.io/component=nvidia-driver (as NVIDIA's
  upgrade controller) with driver.useNvidiaDriverCRD; the same without a pool's label for the
  ClusterPolicy's own driver DaemonSets (a DTK driver pod's app is its DaemonSet's name, NVIDIA's
  selector; a driver pod NVIDIA's operator left has the component and no pool label);
- a pool's pod is a driver pod in that mode alone, and the watch keeps both kinds;
- the DriverPod record keeps exactly the labels the selectors read, so the upgrade pass can choose
  from the watch's cache when the mode changes;
- every pool DaemonSet the NVIDIADriver renderer produces labels its pods with the component.
"""

from __future__ import annotations

import pytest

from ocp_gpu.kube import upgrading
from ocp_gpu.model import labels
from ocp_gpu.planning.upgrades import pod_selection
from tests.unit.test_nvidia_driver_rendering import rendered_pools
from tests.unit.test_upgrade_records import pod_body

APP_ONLY = {labels.APP: labels.DRIVER_APP}
COMPONENT_ONLY = {labels.COMPONENT: labels.DRIVER_COMPONENT}
BOTH = {**APP_ONLY, **COMPONENT_ONLY}
POOL = {**BOTH, labels.NVIDIA_DRIVER: "pool-a"}
# NVIDIA's DTK driver pod (its assets/state-driver at v26.7.0, app set to the DaemonSet's name).
NVIDIA_DTK = {
    labels.APP: "nvidia-driver-daemonset-416.94.202407030122-0",
    labels.COMPONENT: labels.DRIVER_COMPONENT,
    labels.PRECOMPILED: "false",
    labels.DTK_DAEMONSET: "true",
}


def test_the_selector_follows_the_mode() -> None:
    assert pod_selection.driver_pod_selector(False) == (
        "app.kubernetes.io/component=nvidia-driver,!ocp-gpu.io/nvidia-driver"
    )
    assert pod_selection.driver_pod_selector(True) == "app.kubernetes.io/component=nvidia-driver"
    # the kube adapter's default is the ClusterPolicy mode's
    assert pod_selection.driver_pod_selector(False) == upgrading.DRIVER_SELECTOR


@pytest.mark.parametrize(
    ("pod_labels", "policy_mode", "pool_mode"),
    [
        (APP_ONLY, False, False),
        (COMPONENT_ONLY, True, True),
        (BOTH, True, True),
        (NVIDIA_DTK, True, True),
        (POOL, False, True),
        ({labels.APP: "nvidia-dcgm-exporter"}, False, False),
        ({labels.COMPONENT: "nvidia-dcgm-exporter"}, False, False),
        ({}, False, False),
    ],
)
def test_which_pods_each_mode_manages(pod_labels: dict[str, str], policy_mode: bool, pool_mode: bool) -> None:
    assert pod_selection.is_driver_pod(pod_labels, False) is policy_mode
    assert pod_selection.is_driver_pod(pod_labels, True) is pool_mode
    assert pod_selection.is_any_driver_pod(pod_labels) is (policy_mode or pool_mode)


def test_the_driver_pod_record_keeps_the_selector_labels_only() -> None:
    body = pod_body()
    body["metadata"]["labels"] = {**POOL, "controller-revision-hash": "abc", "team": "x"}
    record = upgrading.driver_pod(body)
    assert dict(record.selector_labels) == POOL
    assert pod_selection.is_driver_pod(dict(record.selector_labels), True)
    assert not pod_selection.is_driver_pod(dict(record.selector_labels), False)
    body["metadata"]["labels"] = {**APP_ONLY}
    assert not pod_selection.is_driver_pod(dict(upgrading.driver_pod(body).selector_labels), True)


def test_every_pool_daemonset_labels_its_pods_with_the_component() -> None:
    daemonsets = [m for m in rendered_pools() if m["kind"] == "DaemonSet"]
    assert len(daemonsets) == 4
    for daemonset in daemonsets:
        template_labels = daemonset["spec"]["template"]["metadata"]["labels"]
        assert pod_selection.is_driver_pod(template_labels, True), daemonset["metadata"]["name"]
        assert pod_selection.is_driver_pod(daemonset["metadata"]["labels"], True)
