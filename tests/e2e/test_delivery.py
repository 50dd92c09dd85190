"""We test these aspects of "not delivered yet" versus "absent" on the local control plane
(ocp_gpu/planning/delivery.py, watches.py, reconcilers/cluster_view.py):

- while the operator's watch cannot list the driver-toolkit ImageStream (its identity lacks the
  rule for a few seconds, so the watch retries the LIST), no pass runs on the view: no driver
  DaemonSet is created, the ImageStream is never reported missing, no status is written, although
  nodes, the ClusterPolicy and every other kind are listed;
- once the LIST succeeds, the first pass builds with the stream's tag: no DaemonSet labelled
  `rhcos-image-missing` and no DriverToolkitImage* condition ever existed.

NB: a missing RBAC rule is how the test holds one kind back; the operator runs here under the
shipped rules minus imagestreams (then plus them), not under start_operator's 403 check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import REACT_S, STEP_S, TEST_LEASE_ARGS, holds_for, read_policy, wait_for

pytestmark = pytest.mark.e2e

V1 = "416.94.202407030122-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "1" * 64
USER = "ocp-gpu:e2e-late-imagestream"
WITHOUT = "e2e-shipped-without-imagestreams"
GRANT = "e2e-grant-imagestreams"
SUBJECTS = [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
DTK_CONDITIONS = {"DriverToolkitImageMissing", "DriverToolkitImageStreamProblem"}


def _allowed(kube: client.ApiClient, namespace: str, group: str, resource: str, verb: str) -> bool:
    review = {
        "spec": {
            "user": USER,
            "resourceAttributes": {
                "namespace": namespace,
                "group": group,
                "resource": resource,
                "verb": verb,
            },
        }
    }
    return bool(client.AuthorizationV1Api(kube).create_subject_access_review(review).status.allowed)


@pytest.fixture
def late_imagestream_identity(
    kube: client.ApiClient, namespace: str, control_plane: LocalControlPlane
) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A kubeconfig with the shipped RBAC minus imagestreams, and a function granting them."""
    rbac = client.RbacAuthorizationV1Api(kube)
    role = install_manifests.cluster_role(WITHOUT)
    role["rules"] = [rule for rule in role["rules"] if "imagestreams" not in rule.get("resources", ())]
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding(install_manifests.cluster_role_binding("", WITHOUT, subjects=SUBJECTS))
    rbac.create_namespaced_role(namespace, install_manifests.role(namespace))
    rbac.create_namespaced_role_binding(
        namespace, install_manifests.role_binding(namespace, subjects=SUBJECTS)
    )
    wait_for(
        lambda: (
            _allowed(kube, "", "", "nodes", "list")
            and _allowed(kube, namespace, "coordination.k8s.io", "leases", "get")
        ),
        REACT_S,
        what="the RBAC without imagestreams in effect",
    )
    assert not _allowed(kube, "", "image.openshift.io", "imagestreams", "list")

    def grant() -> None:
        rbac.create_cluster_role(
            {
                "metadata": {"name": GRANT},
                "rules": [
                    {
                        "apiGroups": ["image.openshift.io"],
                        "resources": ["imagestreams"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            }
        )
        rbac.create_cluster_role_binding(install_manifests.cluster_role_binding("", GRANT, subjects=SUBJECTS))

    yield control_plane.make_kubeconfig(USER, name="late-imagestream"), grant
    for name in (WITHOUT, GRANT):
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                delete(name)
            except client.exceptions.ApiException as error:
                if error.status != 404:
                    raise


def _driver_daemonsets(kube: client.ApiClient, namespace: str) -> list[Any]:
    return list(
        client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}")
        .items
    )


def test_no_pass_acts_before_the_imagestream_kind_is_listed(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    clusterpolicy_crd: None,
    apply_policy: Callable[..., dict[str, Any]],
    late_imagestream_identity: tuple[Path, Callable[[], None]],
    tmp_path: Path,
) -> None:
    kubeconfig, grant = late_imagestream_identity
    openshift_emulation.set_driver_toolkit_tags(openshift, {V1: DTK})
    node = unique_name("gpu")
    fake_nodes.create_nodes(kube, [fake_nodes.gpu_node(node, rhcos=V1)])
    apply_policy()
    operator = OperatorProcess(
        kubeconfig,
        namespace,
        tmp_path / "operator.log",
        extra_args=list(TEST_LEASE_ARGS),
    ).start()
    seen_missing: list[str] = []

    def sample() -> list[Any]:
        daemonsets = _driver_daemonsets(kube, namespace)
        seen_missing.extend(
            ds.metadata.name for ds in daemonsets if (ds.metadata.labels or {}).get(labels.DTK_IMAGE_MISSING)
        )
        conditions = {c["type"] for c in (read_policy(kube).get("status") or {}).get("conditions") or ()}
        seen_missing.extend(sorted(conditions & DTK_CONDITIONS))
        return daemonsets

    try:
        operator.wait_http("/healthz")
        wait_for(lambda: operator.role() == "leader", REACT_S, what="operator leader")
        # The watch logs the first refusal of a streak (kube/watching.py), then retries the LIST
        # with backoff (0.2, 0.4, 0.8, 1.6, 3.2 s, ...) as long as the rule is missing.
        wait_for(
            lambda: any(
                "imagestreams" in line and "Forbidden" in line for line in operator.log().splitlines()
            ),
            REACT_S,
            what="the ImageStream LIST refused",
        )
        # Watched for 3 s more, fifteen times the loop's coalescing window (in which the old code
        # ran its first pass): a pass acting on the view would have created the DaemonSet by now.
        holds_for(
            lambda: sample() == [],
            3,
            interval=0.2,
            what="no pass acting before the ImageStream kind is listed",
        )
        # The first pass logs the active ClusterPolicy: none ran.
        assert "active ClusterPolicy" not in operator.log()
        assert not (read_policy(kube).get("status") or {}).get("state"), "a pass wrote the status"
        grant()
        built = wait_for(
            lambda: [ds for ds in sample() if ds.metadata.name == f"nvidia-driver-daemonset-{V1}"],
            STEP_S,
            interval=0.2,
            what="the driver DaemonSet once the ImageStream is listed",
        )
        containers = {c.name: c.image for c in built[0].spec.template.spec.containers}
        assert containers["openshift-driver-toolkit-ctr"] == DTK
        wait_for(lambda: (read_policy(kube).get("status") or {}).get("state"), REACT_S, what="a status")
        sample()
        assert seen_missing == []
    finally:
        operator.stop()
        fake_nodes.delete_nodes(kube, [node])
