"""We test these aspects of the no-silent-downgrade rule on the local control plane:

- a GPU node whose running driver (GPU feature discovery's `nvidia.com/cuda.driver-version.full`,
  as NVIDIA's GFD labels it after NVIDIA's operator installed 610) is newer than the release's
  default keeps it while `driver.version` is unset: its driver DaemonSet runs that version's
  image, the ClusterPolicy shows `DriverNewerThanDefault` naming the node, both versions and
  the fix, an Event says the same, and `ocp-gpu status` counts the node;
- setting `driver.version` still rolls as asked (here below the running one: the existing
  `DriverDowngrade` warning), and the `DriverNewerThanDefault` condition goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels, releases
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    STEP_S,
    condition,
    patch_policy,
    read_policy,
    status_json,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

RUNNING = "610.40.01"  # newer than the release default (595.91.07)
ASKED = "580.95.05"


@pytest.fixture
def newer_node(kube: client.ApiClient) -> Iterator[str]:
    name = unique_name("gpu")
    node = fake_nodes.vanilla_gpu_node(name, extra_labels={labels.CUDA_DRIVER_VERSION_FULL: RUNNING})
    fake_nodes.create_nodes(kube, [node])
    yield name
    fake_nodes.delete_nodes(kube, [name])


def driver_images(kube: client.ApiClient, namespace: str) -> dict[str, str]:
    return {
        ds.metadata.name: ds.spec.template.spec.containers[0].image
        for ds in client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items
        if ds.metadata.name.startswith(labels.DRIVER_DAEMONSET_PREFIX)
    }


def test_a_newer_running_driver_is_kept_until_driver_version_is_set(
    kube: client.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    newer_node: str,
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    default = releases.DEFAULT_DRIVER.version
    assert default is not None and default < RUNNING
    apply_policy()
    start_operator()  # the release's images, as the bundle installs them (DRIVER_IMAGE by digest)
    kept = f"nvcr.io/nvidia/driver:{RUNNING}-ubuntu22.04"
    wait_for(
        lambda: kept in driver_images(kube, namespace).values(), STEP_S, what=f"driver DaemonSet on {kept}"
    )
    found = wait_for(
        lambda: condition(read_policy(kube), "DriverNewerThanDefault") or None, REACT_S, what="the condition"
    )
    assert found["status"] == "True"
    for text in (newer_node, RUNNING, default, "driver.version"):
        assert text in found["message"], found
    event = wait_for_event(kube, "DriverNewerThanDefault", newer_node)
    assert event.type == "Warning" and RUNNING in event.message and default in event.message
    report = status_json(control_plane.make_kubeconfig("status-reader", ["system:masters"]))
    assert newer_node in report["newer_than_default"]

    # An explicit version rolls as asked, even below what runs (DriverDowngrade warns).
    patch_policy(kube, {"driver": {"version": ASKED}})
    asked = f"nvcr.io/nvidia/driver:{ASKED}-ubuntu22.04"
    wait_for(
        lambda: asked in driver_images(kube, namespace).values(), STEP_S, what=f"driver DaemonSet on {asked}"
    )
    downgrade = wait_for_event(kube, "DriverDowngrade", ASKED)
    assert RUNNING in downgrade.message
    wait_for(
        lambda: condition(read_policy(kube), "DriverNewerThanDefault").get("status") != "True",
        REACT_S,
        what="the DriverNewerThanDefault condition to go",
    )
    assert (
        newer_node
        not in status_json(control_plane.make_kubeconfig("status-reader", ["system:masters"]))[
            "newer_than_default"
        ]
    )
