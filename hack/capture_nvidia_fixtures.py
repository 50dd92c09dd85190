#!/usr/bin/env python3
"""Capture what NVIDIA's GPU Operator leaves on a cluster, as fixtures for tests/e2e/test_takeover_nvidia.py.

Runs NVIDIA's real operator (Go, built from its source OUTSIDE this repository) on the local control
plane (ocp_gpu_harness), until every driver pod is Ready and the operator has written nothing for a
while; stops it (as an OLM uninstall would) and writes every object it created, as the API serves
them (managedFields, labels, ownerReferences), with the running pods and the DaemonSets'
ControllerRevisions, to one YAML file naming the NVIDIA commit.  Nothing of NVIDIA's source or
binary is written into the repository.  Three platforms (--platform):
- `openshift` (tests/e2e/data/nvidia-takeover.yaml): OpenShift mode, NVIDIA's OperatorHub example
  ClusterPolicy (the `alm-examples` of its bundle's CSV), GPU nodes of two RHCOS versions: one
  Driver Toolkit driver DaemonSet per version, in namespace nvidia-gpu-operator;
- `vanilla` (tests/e2e/data/nvidia-takeover-vanilla.yaml): no OpenShift API, the ClusterPolicy
  NVIDIA's Helm chart renders from its default values (tests/unit/data/nvidia-helm/expected/
  nvidia-values.yaml, hack/nvidia_chart_fixtures.py), Ubuntu 22.04 GPU nodes: NVIDIA's single
  `nvidia-driver-daemonset`, in the chart's namespace gpu-operator;
- `vanilla-mixed` (tests/e2e/data/nvidia-takeover-vanilla-mixed.yaml): the same on GPU nodes of two
  OS versions, RHEL 9.4 and Ubuntu 22.04 (NFD's os_release ID and VERSION_ID): NVIDIA's one
  `nvidia-driver-daemonset` runs on both, with the driver image of the first GPU node's OS
  (its controllers/state_manager.go, getGPUNodeOSInfo: a LIST with limit 1) on every node.

Set-up (once), outside the repository:
  git clone https://github.com/NVIDIA/gpu-operator ~/nvidia-gpu-operator
  git -C ~/nvidia-gpu-operator checkout v26.7.0
  cd ~/nvidia-gpu-operator && go build -mod=vendor -o bin/gpu-operator ./cmd/gpu-operator
  and an optroot/ laid out like the image's /opt (its docker/Dockerfile: assets -> gpu-operator/,
  manifests -> gpu-operator/manifests, validator/manifests -> validator/manifests).
Then, from the root of an ocp-gpu checkout:
  .venv/bin/python hack/capture_nvidia_fixtures.py --nvidia-src ~/nvidia-gpu-operator \\
      --out tests/e2e/data/nvidia-takeover.yaml
  .venv/bin/python hack/capture_nvidia_fixtures.py --nvidia-src ~/nvidia-gpu-operator \\
      --platform vanilla --out tests/e2e/data/nvidia-takeover-vanilla.yaml
  .venv/bin/python hack/capture_nvidia_fixtures.py --nvidia-src ~/nvidia-gpu-operator \\
      --platform vanilla-mixed --out tests/e2e/data/nvidia-takeover-vanilla-mixed.yaml
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

from ocp_gpu.kube import clients, requesting
from ocp_gpu_harness import cluster, nodes, nvidia_operator, openshift

ROOT = Path(__file__).resolve().parent.parent
# The operator's namespace per platform: OLM's (NVIDIA's OpenShift docs) or the Helm chart's.
NAMESPACES = {"openshift": "nvidia-gpu-operator", "vanilla": "gpu-operator", "vanilla-mixed": "gpu-operator"}
# The test that restores each platform's capture.
RESTORED_BY = {
    "openshift": "test_takeover_nvidia.py",
    "vanilla": "test_takeover_nvidia.py",
    "vanilla-mixed": "test_takeover_nvidia_mixed.py",
}
# vanilla-mixed: (name, NFD os_release ID, VERSION_ID, kernel) of each GPU node; by name, a RHEL node first.
MIXED_NODES = (
    *((f"gpu-rhel94-{i}", "rhel", "9.4", nodes.DEFAULT_RHCOS_KERNEL) for i in range(2)),
    *((f"gpu-ubuntu2204-{i}", "ubuntu", "22.04", nodes.DEFAULT_UBUNTU_KERNEL) for i in range(2)),
)
# NVIDIA's chart's ClusterPolicy from its default values, as hack/nvidia_chart_fixtures.py rendered it.
CHART_POLICY = ROOT / "tests" / "unit" / "data" / "nvidia-helm" / "expected" / "nvidia-values.yaml"
VANILLA_NODES = 3
NS = NAMESPACES["openshift"]
NV_USER = "nvidia-gpu-operator"
V1 = nodes.DEFAULT_RHCOS  # 416.94.202407030122-0
V2 = "416.94.202407240000-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
NODES_PER_VERSION = 2
# Namespaced kinds captured from the operator's namespace: (api path prefix, plural).
NAMESPACED = (
    ("/apis/apps/v1", "daemonsets"),
    ("/apis/apps/v1", "controllerrevisions"),
    ("/api/v1", "pods"),
    ("/api/v1", "serviceaccounts"),
    ("/api/v1", "configmaps"),
    ("/api/v1", "services"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    ("/apis/monitoring.coreos.com/v1", "servicemonitors"),
    ("/apis/monitoring.coreos.com/v1", "prometheusrules"),
)
# Cluster-scoped kinds: only objects the ClusterPolicy owns (NVIDIA sets an ownerReference on each).
CLUSTER = (
    ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("/apis/node.k8s.io/v1", "runtimeclasses"),
    ("/apis/security.openshift.io/v1", "securitycontextconstraints"),
)
# Left out of the namespace's objects: what Kubernetes itself puts in every namespace.
NOT_NVIDIAS = {
    ("configmaps", "kube-root-ca.crt"),
    ("configmaps", "openshift-service-ca.crt"),
    ("serviceaccounts", "default"),
}


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def wait_established(api: kubernetes.client.ApiClient, names: list[str]) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + 60
    for name in names:
        while not any(
            c.type == "Established" and c.status == "True"
            for c in ext.read_custom_resource_definition(name).status.conditions or []
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established")
            time.sleep(0.2)
    time.sleep(2)  # discovery


def get_json(api: clients.ApiClient, path: str) -> dict[str, Any]:
    data: dict[str, Any] = requesting.request(api, "GET", path)
    return data


def items(api: clients.ApiClient, path: str) -> list[dict[str, Any]]:
    try:
        return requesting.list_items(api, path)
    except requesting.ApiException as error:
        if error.status == 404:
            return []
        raise


def chart_policy() -> dict[str, Any]:
    """The ClusterPolicy of NVIDIA's chart with its default values (no status, no helm labels' meaning)."""
    policy: dict[str, Any] = next(
        doc for doc in yaml.safe_load_all(CHART_POLICY.read_text()) if doc and doc["kind"] == "ClusterPolicy"
    )
    return policy


def driver_pods_ready(api: clients.ApiClient, expected: int) -> bool:
    pods = requesting.list_items(
        api, f"/api/v1/namespaces/{NS}/pods", [("labelSelector", "app.kubernetes.io/component=nvidia-driver")]
    )
    ready = [
        p
        for p in pods
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    ]
    return len(ready) == expected


def newest_resource_version(api: clients.ApiClient) -> str:
    """Every object's resourceVersion in the namespace's operand kinds: unchanged while none changes.

    NB: not a LIST's own resourceVersion, which moves with every write anywhere (node Leases).
    """
    found = []
    for prefix, plural in NAMESPACED:
        if plural in ("daemonsets", "configmaps", "serviceaccounts", "services", "roles", "rolebindings"):
            found += [
                f"{plural}/{i['metadata']['name']}@{i['metadata']['resourceVersion']}"
                for i in items(api, f"{prefix}/namespaces/{NS}/{plural}")
            ]
    return ",".join(sorted(found))


# A LIST's items carry no kind: by plural.
KINDS = {
    "daemonsets": "DaemonSet",
    "controllerrevisions": "ControllerRevision",
    "pods": "Pod",
    "serviceaccounts": "ServiceAccount",
    "configmaps": "ConfigMap",
    "services": "Service",
    "roles": "Role",
    "rolebindings": "RoleBinding",
    "servicemonitors": "ServiceMonitor",
    "prometheusrules": "PrometheusRule",
    "clusterroles": "ClusterRole",
    "clusterrolebindings": "ClusterRoleBinding",
    "runtimeclasses": "RuntimeClass",
    "securitycontextconstraints": "SecurityContextConstraints",
}


def api_version(prefix: str) -> str:
    """/api/v1 -> v1, /apis/apps/v1 -> apps/v1."""
    return prefix.removeprefix("/apis/").removeprefix("/api/")


def capture(api: clients.ApiClient, policy_uid: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for prefix, plural in NAMESPACED:
        kind_items = items(api, f"{prefix}/namespaces/{NS}/{plural}")
        for item in kind_items:
            if (plural, item["metadata"]["name"]) in NOT_NVIDIAS:
                continue
            found.append({"apiVersion": api_version(prefix), "kind": KINDS[plural], **item})
    for prefix, plural in CLUSTER:
        for item in items(api, f"{prefix}/{plural}"):
            owners = item["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == policy_uid for ref in owners):
                found.append({"apiVersion": api_version(prefix), "kind": KINDS[plural], **item})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nvidia-src", type=Path, required=True, help="a source tree of NVIDIA/gpu-operator")
    parser.add_argument("--nvidia-bin", type=Path, help="its manager binary [<src>/bin/gpu-operator]")
    parser.add_argument("--optroot", type=Path, help="the image's /opt layout [<src>/optroot]")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--platform", choices=sorted(NAMESPACES), default="openshift")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for NVIDIA's operator to settle")
    parser.add_argument(
        "--quiet", type=float, default=20, help="seconds without a change that count as settled"
    )
    args = parser.parse_args()
    src = args.nvidia_src.resolve()
    binary = (args.nvidia_bin or src / "bin" / "gpu-operator").resolve()
    optroot = (args.optroot or src / "optroot").resolve()
    commit = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    described = subprocess.run(
        ["git", "-C", str(src), "describe", "--tags"], capture_output=True, text=True
    ).stdout.strip()
    global NS
    NS = NAMESPACES[args.platform]
    vanilla = args.platform != "openshift"
    with cluster.LocalControlPlane(start_timeout=240) as plane:
        api = plane.api_client()
        raw = clients.load_api_client(plane.kubeconfig)
        if not vanilla:
            openshift.install_openshift_apis(api)
            openshift.set_driver_toolkit_tags(api, {V1: DTK + "1" * 64, V2: DTK + "2" * 64})
        ext = kubernetes.client.ApiextensionsV1Api(api)
        crds = nvidia_operator.crds(src) + ([] if vanilla else nvidia_operator.openshift_crds())
        for crd in crds:
            ext.create_custom_resource_definition(crd)
        wait_established(api, [crd["metadata"]["name"] for crd in crds])
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        names = []
        if args.platform == "vanilla-mixed":
            for name, os_id, os_version, kernel in MIXED_NODES:
                core.create_node(
                    nodes.vanilla_gpu_node(name, os_id=os_id, os_version=os_version, kernel=kernel)
                )
                names.append(name)
        elif vanilla:
            for i in range(VANILLA_NODES):
                names.append(f"gpu-ubuntu2204-{i}")
                core.create_node(nodes.vanilla_gpu_node(names[-1]))
        else:
            for version in (V1, V2):
                for i in range(NODES_PER_VERSION):
                    name = f"gpu-{version.split('.')[2][:12]}-{i}"
                    core.create_node(nodes.gpu_node(name, rhcos=version))
                    names.append(name)
        kubeconfig = plane.make_kubeconfig(NV_USER, ["system:masters"])
        log_path = args.out.with_suffix(".operator.log")
        log_path.unlink(missing_ok=True)
        operator = nvidia_operator.NvidiaOperator(
            src, kubeconfig, NS, log_path, binary=binary, optroot=optroot
        ).start()
        try:
            policy = chart_policy() if vanilla else nvidia_operator.example_policy(src)
            created = kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies", policy
            )
            log(
                f"NVIDIA's operator started, "
                f"{'its chart' if vanilla else 'OperatorHub example'}'s policy {policy['metadata']['name']}"
            )
            deadline = time.monotonic() + args.timeout
            while not driver_pods_ready(raw, len(names)):
                if not operator.running():
                    raise RuntimeError(f"NVIDIA's operator exited; see {log_path}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"driver pods not Ready in {args.timeout}s; see {log_path}")
                time.sleep(2)
            log("every driver pod Ready; waiting for the namespace to be quiet")
            last, since = newest_resource_version(raw), time.monotonic()
            while time.monotonic() - since < args.quiet and time.monotonic() < deadline:
                time.sleep(2)
                now = newest_resource_version(raw)
                if now != last:
                    last, since = now, time.monotonic()
        finally:
            operator.stop()
        log("NVIDIA's operator stopped (as an OLM uninstall leaves things); capturing")
        policy_now = kubernetes.client.CustomObjectsApi(api).get_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", policy["metadata"]["name"]
        )
        objects = capture(raw, created["metadata"]["uid"])
        gpu_nodes = [get_json(raw, f"/api/v1/nodes/{name}") for name in names]
    header = {
        "nvidia": {"repository": "NVIDIA/gpu-operator", "commit": commit, "describe": described},
        "captured": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "hack/capture_nvidia_fixtures.py",
        "namespace": NS,
        "platform": args.platform,
        "rhcos": [] if vanilla else [V1, V2],
        "clusterPolicy": policy_now,
        "nodes": [
            {
                "name": n["metadata"]["name"],
                "labels": n["metadata"].get("labels") or {},
                "annotations": n["metadata"].get("annotations") or {},
            }
            for n in gpu_nodes
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        out.write(
            f"# What NVIDIA's GPU Operator ({described}, NVIDIA/gpu-operator commit {commit})\n"
            + (
                "# leaves on a vanilla Kubernetes cluster: its Helm chart's default ClusterPolicy on\n"
                "# GPU nodes of two OS versions (RHEL 9.4, Ubuntu 22.04), every object it created as the\n"
                "# API served them, the operator stopped.\n"
                if args.platform == "vanilla-mixed"
                else "# leaves on a vanilla Kubernetes cluster: its Helm chart's default ClusterPolicy on\n"
                "# Ubuntu 22.04 GPU nodes, every object it created as the API served them, the\n"
                "# operator stopped.\n"
                if vanilla
                else "# leaves on a cluster: its OperatorHub example ClusterPolicy on GPU nodes of two\n"
                "# RHCOS versions, every object it created as the API served them, the operator stopped.\n"
            )
            + "# Captured by hack/capture_nvidia_fixtures.py on the local control plane;\n"
            f"# restored by tests/e2e/{RESTORED_BY[args.platform]}.\n"
        )
        yaml.safe_dump_all([header, *objects], out, sort_keys=True)
    counts: dict[str, int] = {}
    for item in objects:
        counts[item.get("kind", "?")] = counts.get(item.get("kind", "?"), 0) + 1
    log(f"wrote {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
