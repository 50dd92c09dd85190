"""We test these aspects of the Helm chart with NVIDIA's own inputs on the local control plane,
with real helm:

- `helm install` with NVIDIA's values.yaml (v26.7.0, unchanged) and NVIDIA's time-slicing values
  (tests/unit/data/nvidia-helm): the operator Deployment runs ocp-gpu's image (NVIDIA's operator
  image in those values stands for ours), scheduled as NVIDIA's `operator` values say; the chart
  creates the device plugin's ConfigMap, the ClusterPolicy names it; with the operator running
  as the chart's ServiceAccount, a simulated GPU node then advertises 4x its GPUs;
- the CRD hooks (operator.upgradeCRD, operator.cleanupCRD): kwok runs no container, so their
  command, `ocp-gpu crds apply|delete`, runs here as a local process authenticated as the hook's
  own ServiceAccount, with the hook's RBAC as the chart renders it: apply brings an outdated
  ClusterPolicy CRD and a missing NVIDIADriver CRD to the release's, Established; delete removes
  both, and every ClusterPolicy with them.

Simulated: `helm dependency update` (ocp_gpu_harness/helm.py); the kubelet's and the device
plugin's part (ocp_gpu_harness/node_agent.py advertises what the plugin's config says).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels, releases
from ocp_gpu_harness import crds, tokens
from ocp_gpu_harness import helm as helm_harness
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.binaries import HelmTools
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import CRD_PATH, FORBIDDEN, REACT_S, READY_S, kubectl, wait_for
from .test_helm import CRD_NAME, delete_crd_if_unused, delete_nfd_crds, install_and_wait

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "nvidia-helm"
RELEASE = "gpu-operator"
DRIVER_CRD_NAME = "nvidiadrivers.nvidia.com"
DRIVER_CRD_PATH = CRD_PATH.with_name("nvidiadrivers.nvidia.com.yaml")
PHYSICAL_GPUS = 2


@pytest.fixture
def namespace(kube: client.ApiClient) -> Iterator[str]:
    name = unique_name("helm-nv")
    yield name
    try:
        client.CoreV1Api(kube).delete_namespace(name)
    except client.exceptions.ApiException as error:
        if error.status != 404:
            raise


def restore_crds(control_plane: LocalControlPlane) -> None:
    """The session's CRDs as the other tests expect them."""
    for path in (CRD_PATH, DRIVER_CRD_PATH):
        kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    crds.wait_until_served(control_plane.api_client(), [CRD_NAME, DRIVER_CRD_NAME])


@pytest.mark.timeout(900)
def test_helm_install_with_nvidias_values_and_time_slicing(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    helm: helm_harness.Helm,
    chart: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    nvidia_operator = yaml.safe_load((DATA / "nvidia-values.yaml").read_text())["operator"]
    time_slicing = yaml.safe_load((DATA / "time-slicing-values.yaml").read_text())["devicePlugin"]["config"]
    delete_crd_if_unused(kube)
    node = unique_name("gpu")
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    operator: OperatorProcess | None = None
    # The GPU node first: it is also where the operator and NFD pods are scheduled (kwok runs them).
    fake_nodes.create_nodes(kube, [fake_nodes.vanilla_gpu_node(node, simulated=True, gpus=PHYSICAL_GPUS)])
    try:
        values = (
            "--values",
            str(DATA / "nvidia-values.yaml"),
            "--values",
            str(DATA / "time-slicing-values.yaml"),
        )
        result = install_and_wait(helm, RELEASE, chart, namespace, *values, timeout=300)
        assert result.returncode == 0, result.stderr
        # The operator: ocp-gpu's image, scheduled as NVIDIA's operator values say.
        deployment = apps.read_namespaced_deployment(labels.OPERATOR_DEPLOYMENT, namespace)
        assert deployment.status.ready_replicas == 1
        pod_spec = deployment.spec.template.spec
        assert pod_spec.containers[0].image == releases.OPERATOR_IMAGE
        assert pod_spec.node_selector == nvidia_operator["nodeSelector"]
        assert pod_spec.priority_class_name == nvidia_operator["priorityClassName"]
        assert [t.key for t in pod_spec.tolerations] == [t["key"] for t in nvidia_operator["tolerations"]]
        # The device plugin's ConfigMap, made by the chart; the ClusterPolicy names it.
        config_map = core.read_namespaced_config_map(time_slicing["name"], namespace)
        assert config_map.data == time_slicing["data"]
        policy = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        assert policy["spec"]["devicePlugin"]["config"] == {"name": time_slicing["name"], "default": "any"}

        # The operator as the chart's ServiceAccount; a GPU node whose plugin shares each GPU 4 ways.
        kubeconfig = tokens.service_account_kubeconfig(control_plane, namespace, "gpu-operator")
        operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
        operator.wait_http("/healthz")

        def advertised() -> str | None:
            allocatable = core.read_node(node).status.allocatable or {}
            return allocatable.get("nvidia.com/gpu")

        # the whole stack comes up first (driver -> toolkit -> plugin), then the agent advertises
        wait_for(lambda: advertised() == str(4 * PHYSICAL_GPUS), READY_S, what="4x the GPUs advertised")
        refused = [line for line in operator.log().splitlines() if FORBIDDEN.search(line)]
        assert not refused, f"requests refused under the chart's RBAC: {refused[:10]}"
        result = helm.run("uninstall", RELEASE, "--namespace", namespace, "--wait", timeout=180)
        assert result.returncode == 0, result.stderr
    finally:
        if operator is not None:
            operator.stop()
            print(f"--- operator.log (tail) ---\n{operator.log()[-6000:]}")
        helm.run("uninstall", RELEASE, "--namespace", namespace, "--wait", timeout=180)
        fake_nodes.delete_nodes(kube, [node])
        delete_nfd_crds(kube)
        wait_for(
            lambda: not custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")["items"],
            2 * REACT_S,
            what="ClusterPolicy deleted",
        )
        restore_crds(control_plane)


def hook_objects(helm: helm_harness.Helm, chart: Path, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The hooks' objects as the chart renders them (both hooks on), by hook name."""
    rendered = helm.template(
        chart,
        "--set",
        "nfd.enabled=false",
        "--set",
        "operator.cleanupCRD=true",
        "--show-only",
        "templates/crd-hooks.yaml",
        namespace=namespace,
    )
    found: dict[str, list[dict[str, Any]]] = {}
    for document in (d for d in yaml.safe_load_all(rendered) if d):
        found.setdefault(document["metadata"]["name"], []).append(document)
    return found


def run_crds(kubeconfig: Path, action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ocp_gpu.cli",
            "crds",
            action,
            "--kubeconfig",
            str(kubeconfig),
            "--timeout",
            "90",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )


def test_crd_hooks_manifests_and_their_command_under_their_own_rbac(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    helm_tools: HelmTools,
    chart: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    # helm without a cluster: `helm template` renders the hooks as an install would
    helm = helm_harness.Helm(helm_tools, None, tmp_path / "helm-home")
    hooks = hook_objects(helm, chart, namespace)
    assert set(hooks) == {"gpu-operator-upgrade-crd", "gpu-operator-cleanup-crd"}
    events = {
        "gpu-operator-upgrade-crd": ("pre-upgrade", "apply"),
        "gpu-operator-cleanup-crd": ("post-delete", "delete"),
    }
    for name, objects in hooks.items():
        event, action = events[name]
        assert {o["kind"] for o in objects} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"}
        assert all(o["metadata"]["annotations"]["helm.sh/hook"] == event for o in objects)
        (job,) = [o for o in objects if o["kind"] == "Job"]
        assert job["metadata"]["annotations"]["helm.sh/hook-weight"] == "1"  # after its RBAC (0)
        pod = job["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == name
        assert pod["containers"][0]["image"] == releases.OPERATOR_IMAGE
        assert pod["containers"][0]["command"] == ["ocp-gpu", "crds", action]
    # Default values: the upgrade hook only (NVIDIA's defaults: upgradeCRD true, cleanupCRD false).
    defaults = helm.template(chart, "--set", "nfd.enabled=false", "--show-only", "templates/crd-hooks.yaml")
    assert "gpu-operator-cleanup-crd" not in defaults and "gpu-operator-upgrade-crd" in defaults

    ext = client.ApiextensionsV1Api(kube)
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": namespace}})
    # The hooks' RBAC as rendered (without the hook annotations: nothing runs helm's hooks here).
    for objects in hooks.values():
        for document in objects:
            if document["kind"] != "Job":
                document["metadata"].pop("annotations", None)
                kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(document))
    assert not client.CustomObjectsApi(kube).list_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies"
    )["items"], "a ClusterPolicy from another test is still there"
    try:
        # An outdated release's CRDs: the ClusterPolicy CRD without its printer columns, no NVIDIADriver CRD.
        kubectl(control_plane, "delete", "crd", DRIVER_CRD_NAME, "--ignore-not-found", "--wait")
        kubectl(
            control_plane,
            "patch",
            "crd",
            CRD_NAME,
            "--type=json",
            "-p",
            '[{"op": "remove", "path": "/spec/versions/0/additionalPrinterColumns"}]',
        )
        assert not ext.read_custom_resource_definition(CRD_NAME).spec.versions[0].additional_printer_columns
        upgrade = tokens.service_account_kubeconfig(control_plane, namespace, "gpu-operator-upgrade-crd")
        # The hook's RBAC holds nothing else.
        refused = subprocess.run(
            ["kubectl", "--kubeconfig", str(upgrade), "get", "pods", "-A"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()
        result = run_crds(upgrade, "apply")
        assert result.returncode == 0, result.stderr
        assert "clusterpolicies.nvidia.com" in result.stdout and DRIVER_CRD_NAME in result.stdout
        source = yaml.safe_load(CRD_PATH.read_text())
        columns = ext.read_custom_resource_definition(CRD_NAME).spec.versions[0].additional_printer_columns
        assert [c.name for c in columns] == [
            c["name"] for c in source["spec"]["versions"][0]["additionalPrinterColumns"]
        ]
        for name in (CRD_NAME, DRIVER_CRD_NAME):
            conditions = ext.read_custom_resource_definition(name).status.conditions or []
            assert any(c.type == "Established" and c.status == "True" for c in conditions), name

        # The cleanup hook: the CRDs go, and every ClusterPolicy with them.
        client.CustomObjectsApi(kube).create_cluster_custom_object(
            "nvidia.com",
            "v1",
            "clusterpolicies",
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": unique_name("doomed")},
                "spec": {},
            },
        )
        cleanup = tokens.service_account_kubeconfig(control_plane, namespace, "gpu-operator-cleanup-crd")
        result = run_crds(cleanup, "delete")
        assert result.returncode == 0, result.stderr
        names = {crd.metadata.name for crd in ext.list_custom_resource_definition().items}
        assert CRD_NAME not in names and DRIVER_CRD_NAME not in names
        # Once gone, delete is a no-op that still succeeds (a retried Job).
        result = run_crds(cleanup, "delete")
        assert result.returncode == 0 and "already gone" in result.stdout, result.stdout + result.stderr
    finally:
        restore_crds(control_plane)
        for objects in hooks.values():
            for document in objects:
                if document["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                    kubectl(
                        control_plane,
                        "delete",
                        document["kind"].lower(),
                        document["metadata"]["name"],
                        "--ignore-not-found",
                    )
