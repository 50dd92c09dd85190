"""We test these aspects of the UpgradePreflight condition on the local control plane, with the
OpenShift emulation (ClusterVersion, the driver-toolkit ImageStream) and RHCOS 9.6 GPU nodes:

- while ClusterVersion applies an update whose Driver Toolkit image (`latest`) has no tag named
  after its RHCOS build, the ClusterPolicy says `UpgradePreflight=False`
  (DriverToolkitTagMissing) and a Warning Event says so, before any node moves;
- once the build's tag appears it says True, naming the build and its driver image (`-rhel9`)
  and whether the driver branch supports the target (the release's table), and a pre-pull
  DaemonSet pulls the target's DTK and driver images on the GPU nodes still on the old build;
- the target build's driver DaemonSet exists before any node carries the build (no nodes, its DTK
  image), so the first node the simulated Machine Config Operator moves gets its driver pod from
  it, with no change to the DaemonSet (same object, same generation);
- as the simulated Machine Config Operator moves the nodes, the pre-pull DaemonSet follows them and
  is deleted once the last GPU node has moved;
- an upgrade abandoned before any node moved (ClusterVersion back to Completed on the current
  release) takes its driver DaemonSet ahead with it;
- once the update has completed the condition is gone;
- an update to an OpenShift release the driver branch does not support is
  `UpgradePreflight=False` (DriverBranchUnsupported) and a Warning Event, before any node moves;
- with `driver.usePrecompiled`: the condition says the target's precompiled image is not named
  while no node runs the build; once a node of another pool (a CPU worker here) boots it, it
  names NVIDIA's `<branch>-<kernel>-<os>` image for that kernel, the pre-pull pulls it on the GPU
  nodes and its DaemonSet is made ahead selecting that kernel; when the pre-pull's kubelets
  cannot pull it, `UpgradePreflight=False` (TargetImageMissing) and a Warning Event say so,
  before any GPU node moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, READY_S, condition, read_policy, wait_for, wait_for_event

pytestmark = pytest.mark.e2e

OLD, NEW, NEXT = "9.6.20250909-0", "9.6.20251021-0", "9.6.20251111-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
IMAGES = {OLD: DTK + "6" * 64, NEW: DTK + "7" * 64, NEXT: DTK + "8" * 64}
OSTREE = labels.OSTREE_VERSION


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
    assert "-rhel9" in ready["message"]
    assert "driver branch 595 supports OpenShift 4.18-4.22" in ready["message"]

    # The nodes still on the old build pull the target's images before the MCO reaches them.
    pull = wait_for(lambda: prepull(kube, namespace), REACT_S, what="the pre-pull DaemonSet")
    pod = pull.spec.template.spec
    images = [c.image for c in pod.init_containers]
    assert images[0] == IMAGES[NEW] and images[1].endswith("-rhel9"), images
    (term,) = (
        pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    )
    assert [e.values for e in term.match_expressions if e.key.endswith("OSTREE_VERSION")] == [[OLD]]
    wait_for(
        lambda: (found := prepull(kube, namespace)) and found.status.number_ready == len(rhcos9_nodes),
        READY_S,
        what="a Ready pre-pull pod on each GPU node",
    )

    # The target's driver DaemonSet is there before any node carries NEW, with no pod.
    ahead = wait_for(lambda: driver_daemonset(kube, namespace, NEW), REACT_S, what="the DaemonSet ahead")
    assert ahead.spec.template.spec.node_selector[OSTREE] == NEW
    assert any(c.image == IMAGES[NEW] for c in ahead.spec.template.spec.containers)
    assert any(c.image.endswith("-rhel9") for c in ahead.spec.template.spec.containers)
    assert not [n for n in rhcos9_nodes if node_build(kube, n) == NEW]
    wait_for(
        lambda: (
            (found := driver_daemonset(kube, namespace, NEW))
            and found.status.observed_generation == found.metadata.generation
        ),
        REACT_S,
        what="the DaemonSet controller to have seen it",
    )
    assert driver_daemonset(kube, namespace, NEW).status.desired_number_scheduled == 0

    # The MCO (simulated) moves the nodes one by one: the first gets its driver pod from the
    # DaemonSet made ahead, unchanged; the pre-pull is gone once the last has moved.
    fake_nodes.simulate_mco_update(kube, rhcos9_nodes[:1], NEW)
    pod = wait_for(
        lambda: driver_pod_on(kube, namespace, rhcos9_nodes[0], ahead.metadata.uid),
        REACT_S,
        what="the first moved node's driver pod from the DaemonSet ahead",
    )
    assert pod.metadata.owner_references[0].name == ahead.metadata.name
    after = driver_daemonset(kube, namespace, NEW)
    assert after.metadata.uid == ahead.metadata.uid
    assert after.metadata.generation == ahead.metadata.generation, "the DaemonSet ahead was changed"
    assert prepull(kube, namespace) is not None  # one node still to move
    fake_nodes.simulate_mco_update(kube, rhcos9_nodes[1:], NEW)
    wait_for(lambda: prepull(kube, namespace) is None, REACT_S, what="the pre-pull DaemonSet deleted")

    # The update completes: nothing to say any more.
    openshift_emulation.set_cluster_version(openshift, "4.20.3")
    wait_for(lambda: preflight(kube) is None, REACT_S, what="UpgradePreflight gone")

    # An update abandoned before any node moved: its DaemonSet ahead goes with it.
    openshift_emulation.start_cluster_update(openshift, "4.20.3", "4.20.5")
    openshift_emulation.set_driver_toolkit_tags(openshift, {NEW: IMAGES[NEW], NEXT: IMAGES[NEXT]})
    wait_for(lambda: driver_daemonset(kube, namespace, NEXT), REACT_S, what="the DaemonSet ahead of 4.20.5")
    openshift_emulation.set_cluster_version(openshift, "4.20.3")
    wait_for(
        lambda: driver_daemonset(kube, namespace, NEXT) is None, REACT_S, what="the abandoned one collected"
    )
    assert driver_daemonset(kube, namespace, NEW) is not None  # the nodes' own stays

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


KERNEL_NEW = "5.14.0-570.60.1.el9_6.x86_64"


def test_upgrade_preflight_names_pulls_and_checks_the_precompiled_image_of_the_target_kernel(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    rhcos9_nodes: list[str],
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
    namespace: str,
) -> None:
    worker = unique_name("cpu")
    fake_nodes.create_nodes(kube, [fake_nodes.cpu_node(worker, rhcos=OLD)])
    try:
        openshift_emulation.set_driver_toolkit_tags(openshift, {OLD: IMAGES[OLD]})
        apply_policy(spec={"driver": {"usePrecompiled": True, "version": "595"}})
        start_operator()
        wait_for(lambda: condition(read_policy(kube), "Ready"), READY_S, what="the policy's status")

        # Between these two writes the operator may see the update without the new build's tag and
        # say "no new RHCOS build" (True): a real transient state, so wait for the build to be named.
        openshift_emulation.start_cluster_update(openshift, "4.19.9", "4.20.3")
        openshift_emulation.set_driver_toolkit_tags(openshift, {OLD: IMAGES[OLD], NEW: IMAGES[NEW]})
        unnamed = wait_for(
            lambda: (found := preflight(kube)) and f"RHCOS {NEW}" in found["message"] and found,
            REACT_S,
            what=f"UpgradePreflight naming RHCOS {NEW}",
        )
        assert unnamed["status"] == "True"
        assert (
            f"RHCOS {NEW}: Driver Toolkit tag present, precompiled driver image not named yet"
            in (unnamed["message"])
        )
        assert prepull(kube, namespace) is None  # nothing to pull yet

        # A CPU worker's pool moves first: its kernel names the GPU nodes' precompiled image.
        fake_nodes.simulate_mco_update(kube, [worker], NEW, new_kernel=KERNEL_NEW)
        image = f"nvcr.io/nvidia/driver:595-{KERNEL_NEW}-rhel9"
        wait_for(
            lambda: (found := preflight(kube)) and f"precompiled driver image {image}" in found["message"],
            REACT_S,
            what="the precompiled image named",
        )
        pull = wait_for(lambda: prepull(kube, namespace), REACT_S, what="the pre-pull DaemonSet")
        assert [c.image for c in pull.spec.template.spec.init_containers] == [image]
        ahead = wait_for(
            lambda: [
                d
                for d in client.AppsV1Api(kube)
                .list_namespaced_daemon_set(namespace, label_selector=f"{labels.DRIVER_STRATEGY}=precompiled")
                .items
                if d.spec.template.spec.node_selector.get(labels.KERNEL_VERSION_FULL) == KERNEL_NEW
            ],
            REACT_S,
            what="the precompiled DaemonSet ahead of its nodes",
        )
        assert [c.image for c in ahead[0].spec.template.spec.containers if c.image == image] == [image]

        # The registry has no such image: the pre-pull's kubelets say so, and so does the condition.
        pods = wait_for(
            lambda: (
                client.CoreV1Api(kube)
                .list_namespaced_pod(namespace, label_selector=f"app={pull.metadata.name}")
                .items
            ),
            REACT_S,
            what="the pre-pull pods",
        )
        for pod in pods:
            fake_nodes.set_pod_fate(kube, namespace, pod.metadata.name, "image-pull-failing")
        missing = wait_for(
            lambda: (found := preflight(kube)) and found["reason"] == "TargetImageMissing" and found,
            REACT_S,
            what="UpgradePreflight=False (TargetImageMissing)",
        )
        assert (
            missing["status"] == "False"
            and f"GPU nodes cannot pull {image} (RHCOS {NEW})" in missing["message"]
        )
        wait_for_event(kube, "TargetImageMissing", image)
        assert all(node_build(kube, n) == OLD for n in rhcos9_nodes)  # said before any GPU node moved
        openshift_emulation.set_cluster_version(openshift, "4.20.3")
    finally:
        fake_nodes.delete_nodes(kube, [worker])


def prepull(kube: client.ApiClient, namespace: str) -> client.V1DaemonSet | None:
    """The RHCOS 9 pre-pull DaemonSet, None when there is none."""
    found = (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, field_selector="metadata.name=nvidia-driver-prepull-rhel9")
        .items
    )
    live = [d for d in found if d.metadata.deletion_timestamp is None]
    return live[0] if live else None


def driver_daemonset(kube: client.ApiClient, namespace: str, build: str) -> client.V1DaemonSet | None:
    """The driver DaemonSet of an RHCOS build (by its Driver Toolkit label), None when there is none."""
    found = (
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"{labels.DTK_RHCOS}={build}")
        .items
    )
    live = [d for d in found if d.metadata.deletion_timestamp is None]
    return live[0] if live else None


def node_build(kube: client.ApiClient, name: str) -> str | None:
    found: dict[str, str] = client.CoreV1Api(kube).read_node(name).metadata.labels or {}
    return found.get(OSTREE)


def driver_pod_on(kube: client.ApiClient, namespace: str, node: str, owner_uid: str) -> client.V1Pod | None:
    """The pod of the DaemonSet `owner_uid` on `node`, None when there is none."""
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items
    owned = [p for p in pods if any(o.uid == owner_uid for o in p.metadata.owner_references or ())]
    return owned[0] if owned else None
