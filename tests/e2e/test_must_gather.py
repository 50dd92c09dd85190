"""We test these aspects of `ocp-gpu must-gather` on the local control plane:

- through the kubernetes client, on an (emulated) OpenShift cluster with the operator at work:
  the ClusterPolicy and its status, each GPU node's labels and annotations (and no CPU node),
  ClusterVersion, Proxy and the driver-toolkit ImageStream, every operand DaemonSet and pod
  (yaml, describe, logs or the reason there are none), the namespace's Events and those
  about GPU nodes, the operator Deployment's pod log (or why not) and the operator's /metrics,
  a README listing what could not be read, and a tarball with the same files;
- through `oc` driven by openshift-client: no `oc` is installed here, so the test puts a
  two-line `oc` on the PATH that runs kubectl with the same arguments (the verbs we use,
  get/describe/logs/get --raw, are kubectl's too); on vanilla Kubernetes the OpenShift
  objects are reported as not served and the gather goes on;
- a Secret planted in the operand namespace appears nowhere, in the directory or the tarball.

kwok pods run no containers and kwok's nodes have no addresses: the API server answers a
log request for their pods with HTTP 500 "no preferred addresses found; known addresses: []"
(measured here), at once; must-gather records each such container in README.txt and goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import READY_S, STEP_S, wait_for

pytestmark = pytest.mark.e2e

RHCOS = "416.94.202407030122-0"
DTK_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "a" * 64
SECRET_NAME = "planted-pull-secret"
SECRET_VALUE = "must-gather-never-shows-this-0451"


@pytest.fixture
def nodes(kube: client.ApiClient) -> Iterator[tuple[list[str], str]]:
    gpu = [unique_name("gpu") for _ in range(2)]
    cpu = unique_name("cpu")
    fake_nodes.create_nodes(
        kube, [*(fake_nodes.gpu_node(n, rhcos=RHCOS) for n in gpu), fake_nodes.cpu_node(cpu)]
    )
    yield gpu, cpu
    fake_nodes.delete_nodes(kube, [*gpu, cpu])


@pytest.fixture
def vanilla_nodes(kube: client.ApiClient) -> Iterator[list[str]]:
    gpu = [unique_name("gpu")]
    fake_nodes.create_nodes(kube, [fake_nodes.vanilla_gpu_node(n) for n in gpu])
    yield gpu
    fake_nodes.delete_nodes(kube, gpu)


def plant_secret(kube: client.ApiClient, namespace: str) -> None:
    client.CoreV1Api(kube).create_namespaced_secret(
        namespace,
        {"metadata": {"name": SECRET_NAME}, "stringData": {".dockerconfigjson": SECRET_VALUE}},
    )


def operator_deployment(kube: client.ApiClient, namespace: str) -> None:
    """A `gpu-operator` Deployment whose pod kwok runs: its log is asked for like a real one's."""
    client.AppsV1Api(kube).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": labels.OPERATOR_DEPLOYMENT},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "gpu-operator"}},
                "template": {
                    "metadata": {"labels": {"app": "gpu-operator"}},
                    "spec": {
                        "containers": [{"name": "gpu-operator", "image": "quay.io/example/ocp-gpu:test"}],
                        # kwok's fake nodes carry a kwok taint on some setups; tolerate everything.
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            },
        },
    )


def must_gather(
    control_plane: LocalControlPlane, dest: Path, *args: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env.pop("KUBECONFIG", None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ocp_gpu.cli",
            "must-gather",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--dest",
            str(dest),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def all_text(dest: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(dest.rglob("*")) if p.is_file())


def assert_no_secret(dest: Path) -> None:
    """Neither the Secret's name nor its value, anywhere in the directory or the tarball."""
    text = all_text(dest)
    assert SECRET_VALUE not in text
    assert SECRET_NAME not in text
    assert not any("secret" in p.name.lower() for p in dest.rglob("*"))
    with tarfile.open(dest.with_name(dest.name + ".tar.gz")) as tar:
        for member in tar.getmembers():
            assert "secret" not in member.name.lower()
            extracted = tar.extractfile(member)
            if extracted is not None:
                data = extracted.read().decode(errors="replace")
                assert SECRET_VALUE not in data and SECRET_NAME not in data


def load(dest: Path, relative: str) -> Any:
    path = dest / relative
    assert path.is_file(), f"{relative} not gathered; README:\n{(dest / 'README.txt').read_text()}"
    return yaml.safe_load(path.read_text())


def wait_for_policy_status(kube: client.ApiClient, namespace: str) -> None:
    """must-gather finds the operand namespace in the policy's status: wait until a pass wrote it."""
    api = client.CustomObjectsApi(kube)
    wait_for(
        lambda: (
            api.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
            .get("status", {})
            .get("namespace")
            == namespace
        ),
        READY_S,
        what="the ClusterPolicy status naming the operand namespace",
    )


def test_must_gather_with_the_kubernetes_client_on_openshift(
    control_plane: LocalControlPlane,
    openshift: client.ApiClient,
    namespace: str,
    nodes: tuple[list[str], str],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    kube = openshift
    gpu, cpu = nodes
    openshift_emulation.set_driver_toolkit_tags(kube, {RHCOS: DTK_IMAGE})
    plant_secret(kube, namespace)
    operator_deployment(kube, namespace)
    apply_policy()
    operator = start_operator()
    driver_ds = f"{labels.DRIVER_DAEMONSET_PREFIX}{RHCOS}"
    core = client.CoreV1Api(kube)

    def driver_pods() -> list[Any]:
        return [
            p
            for p in core.list_namespaced_pod(
                namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
            ).items
            if p.spec.node_name
        ]

    wait_for(lambda: len(driver_pods()) == len(gpu), READY_S, what="a driver pod per GPU node")
    wait_for(
        lambda: core.list_namespaced_pod(namespace, label_selector="app=gpu-operator").items,
        STEP_S,
        what="the operator Deployment's pod",
    )
    wait_for_policy_status(kube, namespace)

    dest = tmp_path / "mg"
    result = must_gather(
        control_plane,
        dest,
        "--client",
        "kubernetes",
        "--metrics-url",
        f"http://127.0.0.1:{operator.port}/metrics",
    )
    assert result.returncode == 0, result.stderr
    assert "with kubernetes-client" in result.stdout

    policy = load(dest, "cluster/clusterpolicies/cluster-policy.yaml")
    assert policy["kind"] == "ClusterPolicy" and "managedFields" not in policy["metadata"]
    status = load(dest, "cluster/clusterpolicies/cluster-policy.status.yaml")
    assert status["namespace"] == namespace

    for name in gpu:
        record = load(dest, f"cluster/nodes/{name}.yaml")
        assert record["labels"][labels.GPU_PRESENT] == "true"
        assert record["labels"][labels.OSTREE_VERSION] == RHCOS
        assert record["annotations"].get(labels.UPGRADE_ENABLED_ANNOTATION) == "true"
    assert not (dest / f"cluster/nodes/{cpu}.yaml").exists(), "a CPU node was gathered"

    assert load(dest, "cluster/clusterversions/version.yaml")["kind"] == "ClusterVersion"
    assert load(dest, "cluster/proxies/cluster.yaml")["kind"] == "Proxy"
    imagestream = load(dest, "namespaces/openshift/imagestreams/driver-toolkit.yaml")
    assert RHCOS in {t["name"] for t in imagestream["spec"]["tags"]}

    ds = load(dest, f"namespaces/{namespace}/daemonsets/{driver_ds}.yaml")
    assert ds["kind"] == "DaemonSet"
    describe = (dest / f"namespaces/{namespace}/daemonsets/{driver_ds}.describe.txt").read_text()
    assert f"Name:         {driver_ds}" in describe and "Desired:" in describe

    readme = (dest / "README.txt").read_text()
    for pod in driver_pods():
        name = pod.metadata.name
        assert load(dest, f"namespaces/{namespace}/pods/{name}.yaml")["spec"]["nodeName"] in gpu
        assert (
            f"Node:         {pod.spec.node_name}"
            in (dest / f"namespaces/{namespace}/pods/{name}.describe.txt").read_text()
        )
        for container in [c.name for c in pod.spec.init_containers or ()] + [
            c.name for c in pod.spec.containers
        ]:
            # Either a log file or a line saying why there is none (kwok serves no logs).
            log = dest / f"namespaces/{namespace}/pods/{name}/{container}.log"
            assert log.is_file() or f"log {namespace}/{name}/{container}:" in readme, container

    events = load(dest, f"namespaces/{namespace}/events.yaml")
    assert isinstance(events, list) and events, "no Events in the operand namespace"
    assert all(e["involvedObject"].get("namespace") == namespace for e in events)
    default_events = load(dest, "namespaces/default/events.yaml")
    assert all(e["involvedObject"]["name"] in {*gpu, "cluster-policy"} for e in default_events)

    operator_pod = (
        core.list_namespaced_pod(namespace, label_selector="app=gpu-operator").items[0].metadata.name
    )
    assert (dest / f"operator/{operator_pod}.gpu-operator.log").is_file() or (
        f"operator log {namespace}/{operator_pod}" in readme
    )
    metrics = (dest / "operator/metrics.txt").read_text()
    assert "gpu_operator_gpu_nodes_total" in metrics

    assert "Secrets are never collected." in readme
    with tarfile.open(tmp_path / "mg.tar.gz") as tar:
        names = set(tar.getnames())
    assert "mg/cluster/clusterpolicies/cluster-policy.yaml" in names
    assert f"mg/namespaces/{namespace}/daemonsets/{driver_ds}.yaml" in names
    assert_no_secret(dest)


def test_must_gather_through_oc_on_vanilla_kubernetes(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    namespace: str,
    vanilla_nodes: list[str],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    plant_secret(kube, namespace)
    apply_policy()
    start_operator()
    wait_for(
        lambda: client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items,
        STEP_S,
        what="the operand DaemonSets",
    )
    wait_for_policy_status(kube, namespace)
    # The shim: `oc` is kubectl for every verb must-gather uses.
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "oc"
    calls = tmp_path / "oc-calls.txt"
    shim.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec kubectl "$@"\n')
    shim.chmod(0o755)

    dest = tmp_path / "mg"
    result = must_gather(control_plane, dest, path=f"{shim_dir}{os.pathsep}{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    assert "with openshift-client" in result.stdout
    # Every read went through `oc`: the shim saw the list of ClusterPolicies and a describe.
    invoked = calls.read_text().splitlines()
    assert any(c.startswith("get ") and "clusterpolicies.nvidia.com" in c for c in invoked), invoked
    assert any(c.startswith("describe ") and "daemonsets.apps/" in c for c in invoked), invoked
    assert any(c.startswith("logs ") for c in invoked), invoked

    assert load(dest, "cluster/clusterpolicies/cluster-policy.yaml")["metadata"]["name"] == "cluster-policy"
    record = load(dest, f"cluster/nodes/{vanilla_nodes[0]}.yaml")
    assert record["labels"][labels.GPU_PRESENT] == "true"
    daemonsets = sorted((dest / f"namespaces/{namespace}/daemonsets").glob("*.describe.txt"))
    assert daemonsets, "no operand DaemonSet described"
    # `oc describe` (here kubectl's) output, not our own.
    assert "Pods Status:" in daemonsets[0].read_text()
    readme = (dest / "README.txt").read_text()
    assert "ClusterVersion version: not served or absent" in readme
    assert "ImageStream driver-toolkit: not served or absent" in readme
    assert_no_secret(dest)
