"""We test these aspects of the UpgradePreflight condition on the local control plane, with the
OpenShift emulation (ClusterVersion, the driver-toolkit ImageStream) and RHCOS 9.6 GPU nodes:

- while ClusterVersion applies an update whose Driver Toolkit image (`latest`) has no tag named
  after its RHCOS build, the ClusterPolicy says `UpgradePreflight=False`
  (DriverToolkitTagMissing) and a Warning Event says so, before any node moves;
- once the build's tag appears it says True, naming the build and its driver image (`-rhel9.6`)
  and whether the driver branch supports the target (the release's table), and a pre-pull
  DaemonSet pulls the target's DTK and driver images on the GPU nodes still on the old build;
- as the simulated Machine Config Operator moves the nodes, the pre-pull DaemonSet follows them and
  is deleted once the last GPU node has moved;
- once the update has completed the condition is gone;
- an update to an OpenShift release the driver branch does not support is
  `UpgradePreflight=False` (DriverBranchUnsupported) and a Warning Event, before any node moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, READY_S, condition, read_policy, wait_for, wait_for_event

pytestmark = pytest.mark.e2e

OLD, NEW = "9.6.20250909-0", "9.6.20251021-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
IMAGES = {OLD: DTK + "6" * 64, NEW: DTK + "7" * 64}


@pytest.fixture
def rhcos9_nodes(kube: client.ApiClient) -> Iterator[list[str]]:
    names = [unique_name("gpu") for _ in range(2)]
    fake_nodes.create_nodes(kube, [fake_nodes.gpu_node(n, rhcos=OLD) for n in names])
    yield names
    fake_nodes.delete_nodes(kube, names)


def preflight(kube: client.ApiClient) -> dict[str, Any] | None:
    found = [
        c
        for c in (read_policy(kube).get("status") or {}).get("conditions") or ()
        if c["type"] == "UpgradePreflight"
    ]
    return found[0] if found else None


def test_upgrade_preflight_names_the_target_build_before_any_node_moves(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    rhcos9_nodes: list[str],
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
    namespace: str,
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, {OLD: IMAGES[OLD]})
    apply_policy()
    start_operator()
    wait_for(lambda: condition(read_policy(kube), "Ready"), READY_S, what="the policy's status")
    assert preflight(kube) is None  # no update running

    # The CVO applies 4.20.3: its DTK image is `latest`, but the build's tag is not there (yet).
    openshift_emulation.start_cluster_update(openshift, "4.19.9", "4.20.3")
    openshift_emulation.set_driver_toolkit_tags(openshift, {OLD: IMAGES[OLD]}, latest=IMAGES[NEW])
    missing = wait_for(
        lambda: (found := preflight(kube)) and found["reason"] == "DriverToolkitTagMissing" and found,
        REACT_S,
        what="UpgradePreflight=False",
    )
    assert missing["status"] == "False" and "OpenShift 4.20.3" in missing["message"]
    wait_for_event(kube, "DriverToolkitTagMissing", "OpenShift 4.20.3")

    # The build's tag appears: the target is ready, with the driver image its nodes will run.
    openshift_emulation.set_driver_toolkit_tags(openshift, {OLD: IMAGES[OLD], NEW: IMAGES[NEW]})
    ready = wait_for(
        lambda: (found := preflight(kube)) and found["status"] == "True" and found,
        REACT_S,
        what="UpgradePreflight=True",
    )
    assert f"RHCOS {NEW}: Driver Toolkit tag present" in ready["message"]
    assert "-rhel9.6" in ready["message"]
    assert "driver branch 595 supports OpenShift 4.18-4.22" in ready["message"]

    # The nodes still on the old build pull the target's images before the MCO reaches them.
    pull = wait_for(lambda: prepull(kube, namespace), REACT_S, what="the pre-pull DaemonSet")
    pod = pull.spec.template.spec
    images = [c.image for c in pod.init_containers]
    assert images[0] == IMAGES[NEW] and images[1].endswith("-rhel9.6"), images
    (term,) = (
        pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    )
    assert [e.values for e in term.match_expressions if e.key.endswith("OSTREE_VERSION")] == [[OLD]]
    wait_for(
        lambda: (found := prepull(kube, namespace)) and found.status.number_ready == len(rhcos9_nodes),
        READY_S,
        what="a Ready pre-pull pod on each GPU node",
    )

    # The MCO (simulated) moves the nodes one by one: the pre-pull is gone once the last has moved.
    fake_nodes.simulate_mco_update(kube, rhcos9_nodes[:1], NEW)
    assert prepull(kube, namespace) is not None  # one node still to move
    fake_nodes.simulate_mco_update(kube, rhcos9_nodes[1:], NEW)
    wait_for(lambda: prepull(kube, namespace) is None, REACT_S, what="the pre-pull DaemonSet deleted")

    # The update completes: nothing to say any more.
    openshift_emulation.set_cluster_version(openshift, "4.20.3")
    wait_for(lambda: preflight(kube) is None, REACT_S, what="UpgradePreflight gone")

    # An update to a release the driver branch does not support: said before any node moves.
    openshift_emulation.start_cluster_update(openshift, "4.20.3", "4.23.1")
    unsupported = wait_for(
        lambda: (found := preflight(kube)) and found["reason"] == "DriverBranchUnsupported" and found,
        REACT_S,
        what="UpgradePreflight=False (DriverBranchUnsupported)",
    )
    assert unsupported["status"] == "False" and "not 4.23.1" in unsupported["message"]
    wait_for_event(kube, "DriverBranchUnsupported", "OpenShift 4.23.1")
    openshift_emulation.set_cluster_version(openshift, "4.23.1")


def prepull(kube: client.ApiClient, namespace: str) -> client.V1DaemonSet | None:
    """The RHCOS 9 pre-pull DaemonSet, None when there is none."""
    found = (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, field_selector="metadata.name=nvidia-driver-prepull-rhel9")
        .items
    )
    live = [d for d in found if d.metadata.deletion_timestamp is None]
    return live[0] if live else None
