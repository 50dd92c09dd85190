#!/usr/bin/env python3
"""Capture what NVIDIA's GPU Operator renders for each policy of
tests/unit/data/nvidia-conformance/cases.yaml, as fixtures for tests/unit/test_nvidia_conformance.py.

Per case, on a fresh local control plane (ocp_gpu_harness; OpenShift mode with Driver Toolkit tags
for every RHCOS build, or vanilla Kubernetes): the case's GPU nodes, its objects (the ConfigMaps
the policy names, NVIDIADrivers) and cluster Proxy, then NVIDIA's real operator (Go, built from
its source OUTSIDE this repository, as hack/capture_nvidia_fixtures.py says) and NVIDIA's
OperatorHub example ClusterPolicy with the case's changes.  Once the operator has rendered its
last operand and written nothing for a while it is stopped, and what it rendered is written to
`<case>.yaml` beside cases.yaml: the DaemonSets, ConfigMaps, RuntimeClasses and RBAC, trimmed to
what the operator wrote (no status, managedFields, uids), headed by the NVIDIA commit and the
inputs (the nodes as created, the policy as created).  Nothing of NVIDIA's source or binary is
written into the repository.

Run from the root of an ocp-gpu checkout (as root: the operator runs in a mount namespace):
  .venv/bin/python hack/capture_nvidia_conformance.py --nvidia-src ~/nvidia-gpu-operator [CASE ...]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import capture_nvidia_fixtures as takeover

from ocp_gpu.kube import clients
from ocp_gpu_harness import cluster, nodes, nvidia_operator, openshift

DATA = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data" / "nvidia-conformance"
CASES = DATA / "cases.yaml"
EXAMPLE = DATA.parent / "nvidia-operatorhub-clusterpolicy.yaml"
NAMESPACE = {"openshift": "nvidia-gpu-operator", "kubernetes": "gpu-operator"}
NV_USER = "nvidia-gpu-operator"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
# Rendered by NVIDIA's last state (state-node-status-exporter): its DaemonSet means every
# state before it has run at least once.
LAST_OPERAND = "nvidia-node-status-exporter"
# What is captured, namespaced then cluster-scoped (only the ClusterPolicy's or an NVIDIADriver's).
NAMESPACED = (
    ("/apis/apps/v1", "daemonsets"),
    ("/api/v1", "configmaps"),
    ("/api/v1", "serviceaccounts"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
)
CLUSTER = (
    ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("/apis/node.k8s.io/v1", "runtimeclasses"),
)
# The operator's metadata the API server adds or that changes with every write.
DROPPED_METADATA = (
    "managedFields",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "ownerReferences",
)
DROPPED_ANNOTATIONS = ("deprecated.daemonset.template.generation",)


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def merged(base: Any, change: Any) -> Any:
    """`change` over `base`: objects key by key, anything else replaced."""
    if isinstance(base, Mapping) and isinstance(change, Mapping):
        out = dict(base)
        for key, value in change.items():
            out[key] = merged(base.get(key), value)
        return out
    return copy.deepcopy(change)


def case_policy(case: Mapping[str, Any]) -> dict[str, Any]:
    """NVIDIA's OperatorHub example with the case's spec merged over it."""
    example = yaml.safe_load(EXAMPLE.read_text())
    policy: dict[str, Any] = merged(example, {"spec": case.get("spec") or {}})
    return policy


def case_nodes(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The case's GPU nodes, named gpu-0, gpu-1, ... as the harness builds them."""
    built = []
    for i, entry in enumerate(case["nodes"]):
        name = f"gpu-{i}"
        extra = entry.get("labels") or {}
        if case["platform"] == "openshift":
            built.append(nodes.gpu_node(name, rhcos=entry["rhcos"], extra_labels=extra))
        else:
            built.append(
                nodes.vanilla_gpu_node(
                    name,
                    os_id=entry["os"],
                    os_version=entry["version"],
                    kernel=entry["kernel"],
                    extra_labels=extra,
                )
            )
    return built


def trimmed(item: Mapping[str, Any]) -> dict[str, Any]:
    """What the operator wrote of an object."""
    out = {k: copy.deepcopy(v) for k, v in item.items() if k != "status"}
    metadata = out["metadata"]
    for key in DROPPED_METADATA:
        metadata.pop(key, None)
    annotations = metadata.get("annotations") or {}
    for key in DROPPED_ANNOTATIONS:
        annotations.pop(key, None)
    if "annotations" in metadata and not annotations:
        del metadata["annotations"]
    return out


def owned_by(item: Mapping[str, Any], uids: set[str]) -> bool:
    return any(ref.get("uid") in uids for ref in item["metadata"].get("ownerReferences") or [])


def capture(api: clients.ApiClient, namespace: str, owner_uids: set[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for prefix, plural in NAMESPACED:
        for item in takeover.items(api, f"{prefix}/namespaces/{namespace}/{plural}"):
            if (plural, item["metadata"]["name"]) in takeover.NOT_NVIDIAS:
                continue
            kind = {"apiVersion": takeover.api_version(prefix), "kind": takeover.KINDS[plural]}
            found.append({**kind, **trimmed(item)})
    for prefix, plural in CLUSTER:
        for item in takeover.items(api, f"{prefix}/{plural}"):
            if owned_by(item, owner_uids):
                kind = {"apiVersion": takeover.api_version(prefix), "kind": takeover.KINDS[plural]}
                found.append({**kind, **trimmed(item)})
    return sorted(found, key=lambda o: (o["kind"], o["metadata"]["name"]))


def fingerprint(api: clients.ApiClient, namespace: str) -> str:
    """Every captured namespaced object's resourceVersion: unchanged while nothing changes."""
    found = []
    for prefix, plural in NAMESPACED:
        found += [
            f"{plural}/{i['metadata']['name']}@{i['metadata']['resourceVersion']}"
            for i in takeover.items(api, f"{prefix}/namespaces/{namespace}/{plural}")
        ]
    return ",".join(sorted(found))


def has_daemonset(api: clients.ApiClient, namespace: str, name: str) -> bool:
    return any(
        d["metadata"]["name"] == name
        for d in takeover.items(api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
    )


def driver_daemonsets(api: clients.ApiClient, namespace: str) -> int:
    return sum(
        1
        for d in takeover.items(api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
        if d["metadata"]["name"].startswith("nvidia-driver-daemonset")
        or "nvidia-gpu-driver" in d["metadata"]["name"]
    )


def run_case(
    case: Mapping[str, Any], src: Path, binary: Path, optroot: Path, args: argparse.Namespace
) -> Path:
    name, platform = case["name"], case["platform"]
    namespace = NAMESPACE[platform]
    policy = case_policy(case)
    node_objects = case_nodes(case)
    out = DATA / f"{name}.yaml"
    log(f"{name}: {case['about']}")
    with cluster.LocalControlPlane(start_timeout=240) as plane:
        api = plane.api_client()
        raw = clients.load_api_client(plane.kubeconfig)
        ext = kubernetes.client.ApiextensionsV1Api(api)
        if platform == "openshift":
            openshift.install_openshift_apis(api)
            builds = sorted({entry["rhcos"] for entry in case["nodes"]})
            openshift.set_driver_toolkit_tags(api, {b: DTK + f"{i + 1}" * 64 for i, b in enumerate(builds)})
            crds = nvidia_operator.crds(src) + nvidia_operator.openshift_crds()
        else:
            crds = nvidia_operator.crds(src) + nvidia_operator.openshift_crds()[1:]
        for crd in crds:
            ext.create_custom_resource_definition(crd)
        takeover.wait_established(api, [crd["metadata"]["name"] for crd in crds])
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        nodes.create_nodes(api, node_objects)
        proxy = case.get("proxy")
        if proxy:
            core.create_namespace({"metadata": {"name": "openshift-config"}})
            core.create_namespaced_config_map(
                "openshift-config",
                {"metadata": {"name": proxy["trustedCA"]}, "data": {"ca-bundle.crt": "# a CA bundle\n"}},
            )
            openshift.set_cluster_proxy(
                api,
                http=proxy["http"],
                https=proxy["https"],
                no_proxy=proxy["noProxy"],
                trusted_ca_configmap=proxy["trustedCA"],
            )
        custom = kubernetes.client.CustomObjectsApi(api)
        for obj in case.get("objects") or []:
            if obj["kind"] == "ConfigMap":
                core.create_namespaced_config_map(namespace, obj)
        kubeconfig = plane.make_kubeconfig(NV_USER, ["system:masters"])
        log_path = Path(args.logs) / f"{name}.operator.log"
        log_path.unlink(missing_ok=True)
        operator = nvidia_operator.NvidiaOperator(
            src, kubeconfig, namespace, log_path, binary=binary, optroot=optroot
        ).start()
        try:
            created = custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", policy)
            owner_uids = {created["metadata"]["uid"]}
            for obj in case.get("objects") or []:
                if obj["kind"] == "NVIDIADriver":
                    made = custom.create_cluster_custom_object("nvidia.com", "v1alpha1", "nvidiadrivers", obj)
                    owner_uids.add(made["metadata"]["uid"])
            pools = sum(1 for obj in case.get("objects") or [] if obj["kind"] == "NVIDIADriver")
            deadline = time.monotonic() + args.timeout
            while not (
                has_daemonset(raw, namespace, LAST_OPERAND)
                and driver_daemonsets(raw, namespace) >= max(pools, 1)
            ):
                if not operator.running():
                    raise RuntimeError(f"NVIDIA's operator exited; see {log_path}")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{name}: NVIDIA's operands not rendered in {args.timeout}s; see {log_path}"
                    )
                time.sleep(2)
            log(f"{name}: {LAST_OPERAND} rendered; waiting for {args.quiet:.0f}s without a write")
            last, since = fingerprint(raw, namespace), time.monotonic()
            while time.monotonic() - since < args.quiet and time.monotonic() < deadline:
                time.sleep(2)
                now = fingerprint(raw, namespace)
                if now != last:
                    last, since = now, time.monotonic()
        finally:
            operator.stop()
        objects = capture(raw, namespace, owner_uids)
    header = {
        "nvidia": {"repository": "NVIDIA/gpu-operator", "commit": args.commit, "describe": args.describe},
        "captured": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "hack/capture_nvidia_conformance.py",
        "case": name,
        "about": case["about"],
        "platform": platform,
        "namespace": namespace,
        "clusterPolicy": policy,
        "nodes": node_objects,
        "objects": case.get("objects") or [],
        "proxy": case.get("proxy"),
    }
    with out.open("w") as stream:
        stream.write(
            f"# What NVIDIA's GPU Operator ({args.describe}, NVIDIA/gpu-operator commit {args.commit})\n"
            f"# rendered for the case {name!r} of cases.yaml ({case['about']}).\n"
            "# Captured by hack/capture_nvidia_conformance.py on the local control plane;\n"
            "# compared with ocp-gpu's rendering by tests/unit/test_nvidia_conformance.py.\n"
        )
        yaml.safe_dump_all([header, *objects], stream, sort_keys=True, width=2**31 - 1)
    counts: dict[str, int] = {}
    for item in objects:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    log(f"{name}: wrote {out}: {counts}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cases", nargs="*", help="case names [all of cases.yaml]")
    parser.add_argument("--nvidia-src", type=Path, required=True, help="a source tree of NVIDIA/gpu-operator")
    parser.add_argument("--nvidia-bin", type=Path, help="its manager binary [<src>/bin/gpu-operator]")
    parser.add_argument("--optroot", type=Path, help="the image's /opt layout [<src>/optroot]")
    parser.add_argument("--logs", default="/tmp", help="where NVIDIA's operator logs go [/tmp]")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for NVIDIA's operator to render")
    parser.add_argument("--quiet", type=float, default=20, help="seconds without a write that count as done")
    args = parser.parse_args()
    src = args.nvidia_src.resolve()
    binary = (args.nvidia_bin or src / "bin" / "gpu-operator").resolve()
    optroot = (args.optroot or src / "optroot").resolve()
    args.commit = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    args.describe = subprocess.run(
        ["git", "-C", str(src), "describe", "--tags"], capture_output=True, text=True
    ).stdout.strip()
    cases = yaml.safe_load(CASES.read_text())["cases"]
    wanted = set(args.cases) or {c["name"] for c in cases}
    unknown = wanted - {c["name"] for c in cases}
    if unknown:
        parser.error(f"no such case in {CASES}: {', '.join(sorted(unknown))}")
    failed = []
    for case in cases:
        if case["name"] in wanted:
            try:
                run_case(case, src, binary, optroot, args)
            except Exception as error:  # one case's failure must not lose the others
                log(f"{case['name']}: FAILED: {error}")
                failed.append(case["name"])
    if failed:
        log(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
