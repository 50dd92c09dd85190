"""We test these aspects of the Helm chart on the local control plane, with real helm, running the
"Install with Helm" commands of docs/helm.md in order:

- `helm install` creates the CRD (from crds/), the operator's ServiceAccount, RBAC and
  Deployment (whose pod kwok runs), and the ClusterPolicy `cluster-policy` from the values;
- `ocp-gpu run`, authenticated as the chart's ServiceAccount with a TokenRequest token (the
  identity the Deployment's pod would have), deploys the driver on every GPU node under the
  chart's RBAC alone: no request of it is refused;
- `helm upgrade` with a values change reaches the ClusterPolicy, and the running operator
  rolls the driver DaemonSet to it; the CRD is the same object (uid) as before;
- `helm uninstall` removes the ClusterPolicy and the chart's objects, and the garbage collector
  the operands through their ownerReferences; the document's kubectl lines then clear the nodes'
  labels and the namespace: nothing of ours is left but the CRD, which helm keeps by design.

- with nfd.enabled (the default), NFD's chart comes along and our NodeFeatureRule is created
  (NFD's CRDs are installed before our templates render); uninstall removes it.

Simulated: `helm dependency update` (see ocp_gpu_harness/helm.py). The document's commands run with
nfd.enabled=false added to the install.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import helm as helm_harness
from ocp_gpu_harness import tokens
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import FORBIDDEN, REACT_S, READY_S, STEP_S, UPGRADE_S, gpu_nodes_fixture, wait_for

pytestmark = pytest.mark.e2e

HELM_DOC = Path(__file__).resolve().parents[2] / "docs" / "helm.md"
NAMESPACE = labels.HELM_NAMESPACE
CRD_NAME = "clusterpolicies.nvidia.com"
RELEASE = "ocp-gpu"
NEW_DRIVER_VERSION = "570.86.15"


def readme_commands() -> list[list[str]]:
    """The helm and kubectl lines of the "Install with Helm" block of docs/helm.md, split as a shell would."""
    text = HELM_DOC.read_text()
    marker = text.index("<!-- tests/e2e/test_helm.py runs")
    block = re.search(r"```bash\n(.*?)```", text[marker:], re.S)
    assert block, "the Install with Helm block of docs/helm.md is gone"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in ("helm", "kubectl"):
            commands.append(words)
    return commands


gpu_nodes = gpu_nodes_fixture(2)


def delete_crd_if_unused(kube: client.ApiClient) -> None:
    """helm installs crds/ only when the CRD is absent: start without it (no ClusterPolicy may exist)."""
    ext = client.ApiextensionsV1Api(kube)
    try:
        client.CustomObjectsApi(kube).list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return
        raise
    assert not client.CustomObjectsApi(kube).list_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies"
    )["items"], "a ClusterPolicy from another test is still there"
    ext.delete_custom_resource_definition(CRD_NAME)

    def gone() -> bool:
        try:
            ext.read_custom_resource_definition(CRD_NAME)
        except client.exceptions.ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, STEP_S, what="the ClusterPolicy CRD deleted")


def run_command(
    words: list[str], helm: helm_harness.Helm, chart: Path, control_plane: LocalControlPlane
) -> subprocess.CompletedProcess[str]:
    if words[0] == "helm":
        args = [str(chart) if w == "charts/ocp-gpu" else w for w in words[1:]]
        if args[0] == "install":
            args += ["--set", "nfd.enabled=false"]
        return helm.run(*args, timeout=240)
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(control_plane.kubeconfig), *words[1:]],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def driver_images(kube: client.ApiClient) -> dict[str, str]:
    """Node -> the driver container's image of the driver pod running there."""
    pods = (
        client.CoreV1Api(kube)
        .list_namespaced_pod(NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}")
        .items
    )
    return {
        p.spec.node_name: next(c.image for c in p.spec.containers if c.name == "nvidia-driver-ctr")
        for p in pods
        if p.spec.node_name and not p.metadata.deletion_timestamp and p.status.phase == "Running"
    }


def policy(kube: client.ApiClient) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(kube).get_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
    )
    return obj


def leftovers(kube: client.ApiClient) -> list[str]:
    """Everything of ours still in the cluster, the CRD apart."""
    found: list[str] = []
    rbac = client.RbacAuthorizationV1Api(kube)
    for kind, items in (
        ("ClusterRole", rbac.list_cluster_role().items),
        ("ClusterRoleBinding", rbac.list_cluster_role_binding().items),
    ):
        for item in items:
            item_labels = item.metadata.labels or {}
            if (
                item.metadata.name.startswith(("gpu-operator", "ocp-gpu"))
                or item_labels.get(labels.MANAGED_BY) == labels.MANAGED_BY_VALUE
            ):
                found.append(f"{kind} {item.metadata.name}")
    found += [
        f"ClusterPolicy {p['metadata']['name']}"
        for p in client.CustomObjectsApi(kube).list_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies"
        )["items"]
    ]
    found += [
        f"DaemonSet {d.metadata.namespace}/{d.metadata.name}"
        for d in client.AppsV1Api(kube)
        .list_daemon_set_for_all_namespaces(label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}")
        .items
    ]
    for node in client.CoreV1Api(kube).list_node().items:
        ours = [
            k
            for k in {**(node.metadata.labels or {}), **(node.metadata.annotations or {})}
            if k.startswith("nvidia.com/")
        ]
        if ours:
            found.append(f"Node {node.metadata.name}: {sorted(ours)}")
    if any(n.metadata.name == NAMESPACE for n in client.CoreV1Api(kube).list_namespace().items):
        found.append(f"Namespace {NAMESPACE}")
    return found


def test_helm_install_upgrade_uninstall_with_the_operator_under_the_charts_service_account(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    helm: helm_harness.Helm,
    chart: Path,
    gpu_nodes: list[str],
    tmp_path: Path,
) -> None:
    commands = readme_commands()
    assert [c[:2] for c in commands[:3]] == [
        ["helm", "dependency"],
        ["helm", "install"],
        ["helm", "upgrade"],
    ], "the Helm block of docs/helm.md changed shape: update this test"
    # `helm dependency update` (commands[0]) is the simulated step: the chart fixture does its work.
    delete_crd_if_unused(kube)

    # --- helm install ---------------------------------------------------------------------------
    result = run_command(commands[1], helm, chart, control_plane)
    assert result.returncode == 0, result.stderr
    ext = client.ApiextensionsV1Api(kube)
    crd_uid = ext.read_custom_resource_definition(CRD_NAME).metadata.uid
    apps, core = client.AppsV1Api(kube), client.CoreV1Api(kube)
    deployment = apps.read_namespaced_deployment(labels.OPERATOR_DEPLOYMENT, NAMESPACE)
    assert deployment.status.ready_replicas == 1, "helm --wait returned before the operator pod was Ready"
    core.read_namespaced_service_account("gpu-operator", NAMESPACE)
    assert policy(kube)["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE

    # --- the operator, as the chart's ServiceAccount -------------------------------------------
    kubeconfig = tokens.service_account_kubeconfig(control_plane, NAMESPACE, "gpu-operator")
    whoami = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert whoami == f"system:serviceaccount:{NAMESPACE}:gpu-operator"
    operator = OperatorProcess(kubeconfig, NAMESPACE, tmp_path / "operator.log").start()
    try:
        operator.wait_http("/healthz")
        wait_for(lambda: operator.role() == "leader", REACT_S, what="operator leader")
        wait_for(
            lambda: set(driver_images(kube)) == set(gpu_nodes), READY_S, what="a driver pod per GPU node"
        )
        # Budget READY_S: the status is written at the end of the first pass, which applies
        # some forty objects; at load 40 each took 0.5 to 2 s and the pass 45 s (REACT_S timed out).
        wait_for(
            lambda: (policy(kube).get("status") or {}).get("namespace") == NAMESPACE, READY_S, what="status"
        )

        # --- helm upgrade: a values change reaches the ClusterPolicy and the drivers ----------
        result = run_command(commands[2], helm, chart, control_plane)
        assert result.returncode == 0, result.stderr
        assert policy(kube)["spec"]["driver"]["version"] == NEW_DRIVER_VERSION
        assert ext.read_custom_resource_definition(CRD_NAME).metadata.uid == crd_uid, "the CRD was replaced"
        wait_for(
            lambda: all(
                d.spec.template.spec.containers[0].image.endswith(f":{NEW_DRIVER_VERSION}-ubuntu22.04")
                for d in apps.list_namespaced_daemon_set(
                    NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
                ).items
            ),
            STEP_S,
            what=f"driver DaemonSet at {NEW_DRIVER_VERSION}",
        )
        # The driver upgrade runs node by node through the upgrade state machine.
        wait_for(
            lambda: (
                set(driver_images(kube)) == set(gpu_nodes)
                and all(
                    i.endswith(f":{NEW_DRIVER_VERSION}-ubuntu22.04") for i in driver_images(kube).values()
                )
            ),
            UPGRADE_S,
            what="driver pods upgraded",
        )
        # docs/helm.md: uninstall when no upgrade is in flight.
        wait_for(
            lambda: all(
                (n.metadata.labels or {}).get(labels.UPGRADE_STATE) == "upgrade-done"
                and not n.spec.unschedulable
                for n in core.list_node(label_selector=f"{labels.GPU_PRESENT}=true").items
                if n.metadata.name in gpu_nodes
            ),
            READY_S,
            what="every GPU node upgrade-done and schedulable",
        )
        log = operator.log()
        refused = [line for line in log.splitlines() if FORBIDDEN.search(line)]
        assert not refused, f"requests refused under the chart's RBAC: {refused[:10]}"

        # --- helm uninstall and the clean-up of docs/helm.md ---------------------------
        result = run_command(commands[3], helm, chart, control_plane)
        assert result.returncode == 0, result.stderr
    finally:
        operator.stop()
        print(f"--- operator.log (tail) ---\n{operator.log()[-6000:]}")
        if sys.exc_info()[0] is not None:
            # Failed before the uninstall step: leave no release behind, whose cluster-scoped
            # objects (ClusterRole gpu-operator) would make the next install in this control plane fail.
            helm.run(
                "uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", "--wait", timeout=180
            )
    wait_for(
        lambda: (
            not apps.list_daemon_set_for_all_namespaces(
                label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
            ).items
        ),
        STEP_S,
        what="operand DaemonSets garbage-collected",
    )
    for words in commands[4:]:
        result = run_command(words, helm, chart, control_plane)
        assert result.returncode == 0, f"{shlex.join(words)}: {result.stderr}"
    wait_for(
        lambda: leftovers(kube) == [],
        READY_S,
        interval=1,
        what="nothing left behind after uninstall and the clean-up",
    )
    # helm keeps a chart's CRDs (documented in docs/helm.md).
    assert ext.read_custom_resource_definition(CRD_NAME).metadata.uid == crd_uid


NFD_CRDS = (
    "nodefeaturerules.nfd.k8s-sigs.io",
    "nodefeatures.nfd.k8s-sigs.io",
    "nodefeaturegroups.nfd.k8s-sigs.io",
)


@pytest.mark.usefixtures("gpu_nodes")  # nodes to deploy on, never named
def install_and_wait(
    helm: helm_harness.Helm, release: str, chart: Path, namespace: str, *args: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`helm install <release> <chart> --namespace <namespace> --create-namespace --wait <args>`."""
    return helm.run(
        "install",
        release,
        str(chart),
        "--namespace",
        namespace,
        "--create-namespace",
        "--wait",
        *args,
        timeout=timeout,
    )


def delete_nfd_crds(kube: client.ApiClient) -> None:
    """NFD's API would make later charts render our rule: leave the session as it was."""
    ext = client.ApiextensionsV1Api(kube)
    for name in NFD_CRDS:
        try:
            ext.delete_custom_resource_definition(name)
        except client.exceptions.ApiException as error:
            if error.status != 404:
                raise


@pytest.mark.usefixtures("gpu_nodes")  # nodes to deploy on, never named
def test_helm_with_nfd_creates_the_node_feature_rule(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    helm: helm_harness.Helm,
    chart: Path,
) -> None:
    """nfd.enabled (the default): NFD's chart comes along, its CRDs are installed before our
    templates render, so `.Capabilities.APIVersions.Has` sees the NodeFeatureRule API and the
    chart creates our rule; uninstall removes it (NFD's CRDs stay, as helm keeps CRDs)."""
    namespace = unique_name("helm-nfd")
    custom = client.CustomObjectsApi(kube)
    try:
        # Budget 240 s: helm waits for NFD's and our pods (kwok readies them in seconds, quiet).
        result = install_and_wait(helm, RELEASE, chart, namespace, timeout=240)
        assert result.returncode == 0, result.stderr
        rule = custom.get_cluster_custom_object(
            "nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules", "ocp-gpu-nvidia-pci"
        )
        assert rule["spec"]["rules"][0]["labels"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
        workers = client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items
        assert any("node-feature-discovery-worker" in d.metadata.name for d in workers)

        result = helm.run("uninstall", RELEASE, "--namespace", namespace, "--wait", timeout=120)
        assert result.returncode == 0, result.stderr
        rules = custom.list_cluster_custom_object("nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules")["items"]
        assert "ocp-gpu-nvidia-pci" not in {r["metadata"]["name"] for r in rules}
        wait_for(
            lambda: not custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")["items"],
            STEP_S,
            what="ClusterPolicy deleted",
        )
    finally:
        helm.run("uninstall", RELEASE, "--namespace", namespace, timeout=30)
        client.CoreV1Api(kube).delete_namespace(namespace)
        delete_nfd_crds(kube)
