"""We test these aspects of `ocp-gpu render --live` on the local control plane (OpenShift emulated):

- it discovers OpenShift, reads the ClusterPolicy, nodes, the driver-toolkit ImageStream,
  ClusterVersion and the driver DaemonSets, and prints one DaemonSet per RHCOS version
  with its DTK image, owned by the live ClusterPolicy (its uid);
- a stale driver DaemonSet (no node on its version, no pods) is listed as "would delete"
  and left in place;
- it makes zero writes: run as its own user (`render-user`), whose writes the audit log
  attributes; a deliberate write by the same user afterwards shows the count is live;
- its output is accepted by a real API server as is (server-side apply), and a second
  live render then calls every DaemonSet unchanged; a proposed policy file (`--policy`)
  over the live cluster marks them changed;
- a ConfigMap the policy names (`migManager.config.name`) is read as the operator reads it:
  missing, an error naming the field and exit 2; present with its key, rendered as mounted.
"""

from __future__ import annotations

import subprocess
import sys
import time
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

from .conftest import REACT_S, assert_no_writes_by, kubectl, wait_for

pytestmark = pytest.mark.e2e

RENDER_USER = "render-user"
# RHCOS builds no other test uses, so leftovers of another test cannot blur the picture.
V1 = "415.92.202402201450-0"
V2 = "418.94.202502041200-0"
STALE = "414.92.202312132152-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
TAGS = {V1: DTK + "a" * 64, V2: DTK + "b" * 64}


def daemonset_name(version: str) -> str:
    return f"{labels.DRIVER_DAEMONSET_PREFIX}{version}"


@pytest.fixture(scope="module")
def render_kubeconfig(control_plane: LocalControlPlane) -> Path:
    return control_plane.make_kubeconfig(RENDER_USER, ["system:masters"])


@pytest.fixture
def gpu_nodes(kube: client.ApiClient) -> Iterator[dict[str, list[str]]]:
    """Two GPU nodes on V1, one on V2 (and a CPU node on V1, which gets no driver)."""
    made = {V1: [unique_name("gpu") for _ in range(2)], V2: [unique_name("gpu")]}
    cpu = unique_name("cpu")
    fake_nodes.create_nodes(
        kube,
        [fake_nodes.gpu_node(name, rhcos=version) for version, names in made.items() for name in names]
        + [fake_nodes.cpu_node(cpu, rhcos=V1)],
    )
    yield made
    fake_nodes.delete_nodes(kube, [cpu, *(name for names in made.values() for name in names)])


@pytest.fixture
def dtk_cluster(
    openshift: client.ApiClient,
    clusterpolicy_crd: None,
    apply_policy: Callable[..., dict[str, Any]],
    gpu_nodes: dict[str, list[str]],
) -> dict[str, Any]:
    """OpenShift with driver-toolkit tags for V1 and V2, `cluster-policy`, and GPU nodes; no operator."""
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    return apply_policy()


def create_stale_daemonset(kube: client.ApiClient, namespace: str) -> None:
    """A driver DaemonSet of ours for an RHCOS build no node runs any more, its pods gone."""
    identity = {
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.COMPONENT: labels.DRIVER_COMPONENT,
        labels.DRIVER_STRATEGY: "dtk",
        labels.DRIVER_KEY: STALE,
        labels.DTK_DAEMONSET: "true",
        labels.DTK_RHCOS: STALE,
    }
    pods = {labels.APP: "stale-driver"}
    apps = client.AppsV1Api(kube)
    apps.create_namespaced_daemon_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": daemonset_name(STALE), "labels": identity},
            "spec": {
                "selector": {"matchLabels": pods},
                "template": {
                    "metadata": {"labels": pods},
                    "spec": {
                        "nodeSelector": {labels.OSTREE_VERSION: STALE},
                        "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:x"}],
                    },
                },
            },
        },
    )
    # the DaemonSet controller has counted it: desiredNumberScheduled 0 is a fact, not a default
    wait_for(
        lambda: (
            (
                apps.read_namespaced_daemon_set(daemonset_name(STALE), namespace).status.observed_generation
                or 0
            )
            >= 1
        ),
        REACT_S,
        what="the stale DaemonSet's status",
    )


def render_live(kubeconfig: Path, namespace: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """`ocp-gpu render --live` as a separate process, the way an admin runs it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ocp_gpu.cli",
            "render",
            "--live",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def manifests_of(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return [m for m in yaml.safe_load_all(result.stdout) if m is not None]


def daemonsets_of(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == "DaemonSet"}


def test_live_render_one_daemonset_per_rhcos_version_without_writing(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    namespace: str,
    dtk_cluster: dict[str, Any],
    gpu_nodes: dict[str, list[str]],
    render_kubeconfig: Path,
) -> None:
    create_stale_daemonset(kube, namespace)
    mark = control_plane.audit_line_count()
    started = time.monotonic()
    result = render_live(render_kubeconfig, namespace)
    elapsed = time.monotonic() - started
    manifests = manifests_of(result)

    daemonsets = daemonsets_of(manifests)
    assert {daemonset_name(V1), daemonset_name(V2)} <= set(daemonsets)
    for version in (V1, V2):
        daemonset = daemonsets[daemonset_name(version)]
        assert daemonset["metadata"]["namespace"] == namespace
        pod = daemonset["spec"]["template"]["spec"]
        assert pod["nodeSelector"][labels.OSTREE_VERSION] == version
        sidecar = next(c for c in pod["containers"] if c["name"] == "openshift-driver-toolkit-ctr")
        assert sidecar["image"] == TAGS[version]
        nodes = sorted(gpu_nodes[version])
        count = f"{len(nodes)} node{'s' if len(nodes) > 1 else ''}"
        assert f"{daemonset_name(version)}: key {version}, {count} ({', '.join(nodes)})" in result.stderr
        assert f"DTK {TAGS[version]} [new]" in result.stderr
    # owned by the live ClusterPolicy, as the operator would apply them
    for manifest in manifests:
        (owner,) = manifest["metadata"]["ownerReferences"]
        assert owner["uid"] == dtk_cluster["metadata"]["uid"] and owner["name"] == "cluster-policy"
    assert "platform: openshift (config.openshift.io and image.openshift.io are served)" in result.stderr
    assert f"would delete: {daemonset_name(STALE)} (no GPU node has this key)" in result.stderr
    print(f"live render took {elapsed:.2f}s\n{result.stderr}")

    assert_no_writes_by(control_plane, render_kubeconfig, namespace, RENDER_USER, mark)
    # and the cluster is as it was: nothing created, the stale DaemonSet still there
    present = {ds.metadata.name for ds in client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items}
    assert present == {daemonset_name(STALE)}


def test_live_output_applies_and_reads_back_unchanged(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    namespace: str,
    dtk_cluster: dict[str, Any],
    render_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    first = render_live(render_kubeconfig, namespace)
    manifests_of(first)
    # the API server takes the output as is (as a GitOps tool would apply it)
    kubectl(
        control_plane, "apply", "--server-side", "--field-manager", "gitops", "-f", "-", stdin=first.stdout
    )

    mark = control_plane.audit_line_count()
    again = render_live(render_kubeconfig, namespace)
    assert manifests_of(again) == manifests_of(first)
    for version in (V1, V2):
        assert f"DTK {TAGS[version]} [unchanged]" in again.stderr
    assert "would delete: nothing" in again.stderr

    # a proposed policy over the live cluster: the same DaemonSets, new images, marked changed
    proposed = tmp_path / "proposed.yaml"
    proposed.write_text(yaml.safe_dump({"driver": {"version": "570.124.06"}}))
    change = render_live(render_kubeconfig, namespace, "--policy", str(proposed))
    daemonsets = daemonsets_of(manifests_of(change))
    for version in (V1, V2):
        assert "driver nvcr.io/nvidia/driver:570.124.06-rhcos4.1" in change.stderr
        assert f"{daemonset_name(version)}: key {version}" in change.stderr
        owner = daemonsets[daemonset_name(version)]["metadata"]["ownerReferences"][0]
        assert owner["uid"] == dtk_cluster["metadata"]["uid"]
    assert change.stderr.count("[changed]") == 2

    # A ConfigMap the policy names, read live as the operator reads it: missing is an error
    # naming the field (exit 2, nothing printed); once it exists with its key, rendered and mounted.
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"migManager": {"config": {"name": "admin-mig"}}}))
    missing = render_live(render_kubeconfig, namespace, "--policy", str(named))
    assert missing.returncode == 2 and missing.stdout == ""
    assert "error spec.migManager.config.name: ConfigMap 'admin-mig' does not exist" in missing.stderr
    client.CoreV1Api(kube).create_namespaced_config_map(
        namespace, {"metadata": {"name": "admin-mig"}, "data": {"config.yaml": "version: v1\n"}}
    )
    fits = daemonsets_of(manifests_of(render_live(render_kubeconfig, namespace, "--policy", str(named))))
    volumes = fits["nvidia-mig-manager"]["spec"]["template"]["spec"]["volumes"]
    assert "admin-mig" in {v["configMap"]["name"] for v in volumes if "configMap" in v}
    assert_no_writes_by(control_plane, render_kubeconfig, namespace, RENDER_USER, mark)
