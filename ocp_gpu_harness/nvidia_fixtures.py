"""Restore what NVIDIA's GPU Operator left on a cluster (hack/capture_nvidia_fixtures.py's YAML: on
OpenShift or on vanilla Kubernetes) on the local control plane, without NVIDIA's binary: the CI's
stand-in for "NVIDIA's operator ran, then was stopped".

The objects go back as captured (labels, annotations, managedFields, specs), into a test's
namespace and onto fresh nodes with the captured nodes' labels; owner references point at the new
ClusterPolicy.  NB: the pods are created first, without owners, and the DaemonSets after them:
the DaemonSet controller adopts the orphans its selector matches, as it would NVIDIA's, and
creates no second pod on a node (creating a DaemonSet first would race its controller, which
starts pods at once).  The pod templates are not changed, so the DaemonSet
controller computes the captured revision hashes and the pods are current to it.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

from ocp_gpu.kube import clients, requesting
from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import nvidia_operator
from ocp_gpu_harness.cluster import unique_name

# The order objects are created in (kinds not listed go last, pods and DaemonSets are separate).
ORDER = (
    "ServiceAccount",
    "ConfigMap",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "RuntimeClass",
    "SecurityContextConstraints",
    "Service",
    "ServiceMonitor",
    "PrometheusRule",
)
# OpenShift serves SecurityContextConstraints, the harness's emulation does not: a schemaless
# stand-in for restoring NVIDIA's (the real one's schema is not needed to hold them).
SCC_CRD: dict[str, Any] = nvidia_operator.minimal_crd(
    "security.openshift.io", "SecurityContextConstraints", "securitycontextconstraints", "Cluster"
)
# NVIDIA's operator's field manager (controller-runtime names it after the binary).
NVIDIA_MANAGER = "gpu-operator"
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "selfLink", "deletionTimestamp")


@dataclasses.dataclass
class Restored:
    """What `restore` made: the names a test asserts on."""

    policy_name: str
    policy_uid: str
    # captured node name -> the node made for it
    nodes: dict[str, str]
    # (kind, name) of every object restored, and the kinds skipped because the API does not serve them
    objects: list[tuple[str, str]]
    skipped: list[tuple[str, str]]
    nvidia_commit: str


def driver_image(path: Path) -> str:
    """The driver image NVIDIA's driver DaemonSets ran (its CSV's DRIVER_IMAGE at the captured release)."""
    _, objects = load(path)
    return next(
        str(container["image"])
        for obj in objects
        if obj["kind"] == "DaemonSet" and obj["metadata"]["name"].startswith(labels.DRIVER_DAEMONSET_PREFIX)
        for container in obj["spec"]["template"]["spec"]["containers"]
        if container["name"] == "nvidia-driver-ctr"
    )


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The capture's header and its objects."""
    header, *objects = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return header, objects


def _clean(obj: Mapping[str, Any], namespace: str, owners: Mapping[str, str]) -> dict[str, Any]:
    """The object as a create body: server-set fields dropped, namespace and owner uids mapped."""
    body = copy.deepcopy(dict(obj))
    body.pop("status", None)
    metadata = body["metadata"]
    for key in _SERVER_SET:
        metadata.pop(key, None)
    if "namespace" in metadata:
        metadata["namespace"] = namespace
    refs = [
        dict(ref, uid=owners[ref["uid"]])
        for ref in metadata.get("ownerReferences") or ()
        if ref.get("uid") in owners
    ]
    if refs:
        metadata["ownerReferences"] = refs
    else:
        metadata.pop("ownerReferences", None)
    for subject in body.get("subjects") or ():
        if subject.get("kind") == "ServiceAccount":
            subject["namespace"] = namespace
    return body


def _path(obj: Mapping[str, Any], namespace: str) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {
        "ServiceAccount": "serviceaccounts",
        "ConfigMap": "configmaps",
        "Service": "services",
        "Pod": "pods",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "RuntimeClass": "runtimeclasses",
        "SecurityContextConstraints": "securitycontextconstraints",
        "ServiceMonitor": "servicemonitors",
        "PrometheusRule": "prometheusrules",
        "DaemonSet": "daemonsets",
        "ControllerRevision": "controllerrevisions",
    }[kind]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if "namespace" in obj["metadata"]:
        return f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{prefix}/{plural}"


def _create(raw: clients.ApiClient, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    # NB: as NVIDIA's manager: the create's own fields join its entry, not one of ours
    created: dict[str, Any] = requesting.request(
        raw, "POST", path, body=body, query=[("fieldManager", NVIDIA_MANAGER)]
    )
    return created


def restore(api: kubernetes.client.ApiClient, raw: clients.ApiClient, path: Path, namespace: str) -> Restored:
    """Everything of the capture at `path` into `namespace`, on new nodes; what was made.

    `raw`: the same cluster through ocp-gpu's own client (objects go back as plain JSON)."""
    header, objects = load(path)
    core = kubernetes.client.CoreV1Api(api)
    node_names = {entry["name"]: unique_name("nv-gpu") for entry in header["nodes"]}
    deploy_labels: dict[str, dict[str, str]] = {}
    for entry in header["nodes"]:
        captured = dict(entry["labels"])
        rhcos = captured.get(labels.OSTREE_VERSION)
        extra = {
            key: value
            for key, value in captured.items()
            if not key.startswith("kubernetes.io/")
            and not key.startswith("node-role")
            and not key.startswith("nvidia.com/gpu.deploy.")
        }
        deploy_labels[node_names[entry["name"]]] = {
            key: value for key, value in captured.items() if key.startswith("nvidia.com/gpu.deploy.")
        }
        made_node = (
            fake_nodes.gpu_node(node_names[entry["name"]], rhcos=rhcos, extra_labels=extra)
            if rhcos
            # a vanilla capture: the captured OS (NFD's labels), so osImage says the same
            else fake_nodes.vanilla_gpu_node(
                node_names[entry["name"]],
                os_id=captured[labels.OS_ID],
                os_version=captured[labels.OS_VERSION_ID],
                kernel=captured[labels.KERNEL_VERSION_FULL],
                extra_labels=extra,
            )
        )
        fake_nodes.create_nodes(api, [made_node])
    fake_nodes.wait_nodes_ready(api, node_names.values())

    captured_policy = header["clusterPolicy"]
    policy = kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": captured_policy["metadata"]["name"]},
            "spec": captured_policy["spec"],
        },
    )
    owners = {captured_policy["metadata"]["uid"]: policy["metadata"]["uid"]}
    made: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []

    def create(obj: Mapping[str, Any], owner_map: Mapping[str, str]) -> dict[str, Any] | None:
        body = _clean(obj, namespace, owner_map)
        try:
            created = _create(raw, _path(obj, namespace), body)
        except requesting.ApiException as error:
            if error.status == 404:
                skipped.append((obj["kind"], obj["metadata"]["name"]))
                return None
            raise
        made.append((obj["kind"], obj["metadata"]["name"]))
        return created

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind in (*ORDER, *sorted(set(by_kind) - set(ORDER) - {"Pod", "DaemonSet", "ControllerRevision"})):
        for obj in by_kind.get(kind, ()):
            create(obj, owners)
    # The nodes as NVIDIA's operator labelled them (its DaemonSets select on the deploy labels).
    for name, wanted in deploy_labels.items():
        core.patch_node(name, {"metadata": {"labels": wanted}})
    # Orphans first (no owners): the DaemonSets adopt them.  NB: not the ControllerRevisions: the
    # DaemonSet controller refuses to build its history over restored ones ("data: Invalid value"),
    # and makes the same ones itself (the same template hashes to the same name the pods carry).
    for obj in by_kind.get("Pod", ()):
        pod = copy.deepcopy(obj)
        pod["spec"]["nodeName"] = node_names.get(
            pod["spec"].get("nodeName", ""), pod["spec"].get("nodeName", "")
        )
        create(pod, {})
    # NB: the DaemonSet controller must see the pods before their DaemonSet, or it starts new ones.
    time.sleep(2)
    for obj in by_kind.get("DaemonSet", ()):
        create(obj, owners)
    return Restored(
        policy_name=policy["metadata"]["name"],
        policy_uid=policy["metadata"]["uid"],
        nodes=node_names,
        objects=made,
        skipped=skipped,
        nvidia_commit=str(header["nvidia"]["commit"]),
    )


def recreate(
    raw: clients.ApiClient, path: Path, namespace: str, restored: Restored, kind: str, name: str
) -> None:
    """One captured object made again as NVIDIA's operator made it (its field manager, owned by
    the restored ClusterPolicy): what NVIDIA's operator renders again for the same policy when it
    takes back."""
    header, objects = load(path)
    captured = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    owners = {header["clusterPolicy"]["metadata"]["uid"]: restored.policy_uid}
    _create(raw, _path(captured, namespace), _clean(captured, namespace, owners))
