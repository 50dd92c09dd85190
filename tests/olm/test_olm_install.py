"""We test these aspects of installing the operator with a real OLM on the local control plane:

- OLM's own `olm` and `catalog` controllers (built from a checkout of
  operator-framework/operator-lifecycle-manager by hack/build-olm.sh) install the bundle:
  the CatalogSource of docs/install-openshift.md (pointed at `opm serve` of our catalog with `spec.address`),
  OperatorGroup and Subscription in `nvidia-gpu-operator` lead to an InstallPlan that
  completes and CSVs in phase `Succeeded` (ours, and the NFD package it depends on);
- what the CSV declares exists as declared: the CRD (Established), the ServiceAccount
  `gpu-operator`, ClusterRole and Role rules equal to ocp_gpu/install's, bound to that
  ServiceAccount, and the Deployment `gpu-operator` with our pod spec (kwok runs its pod);
- the operator, run as a local process **authenticated as that ServiceAccount** (a token
  from the TokenRequest API), runs the driver scenario: the ClusterPolicy from the CSV's
  alm-examples, GPU nodes labelled, the driver and toolkit DaemonSets ready, the policy
  `ready`, the seed's driver upgrade on every node (a GPU pod in another namespace
  deleted, driver pods restarted, nodes uncordoned); then, on OpenShift (emulated APIs),
  one driver DaemonSet per RHCOS version with the Driver Toolkit image and the SCC
  RoleBinding; the API server's audit log holds no 403 for that ServiceAccount (any
  missing RBAC rule fails the test).

What is simulated: kwok runs the pods (nothing executes); the bundle's manifests travel in
the catalog (no bundle image to pull); NFD is a stand-in package (a CSV with one Deployment)
so OLM can resolve the bundle's dependency.  Skipped, saying why and how to get it, where
OLM's source is absent (harness/olm.SOURCE_HELP).  Timings of each phase are printed (pytest -s).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu_harness import crds, olm
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess
from tests import hack_scripts
from tests.e2e.conftest import REACT_S, READY_S, START_S, STEP_S, kubectl, wait_for
from tests.unit.test_readme_install import readme_block

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = install_manifests.OLM_NAMESPACE
OPS = ("operators.coreos.com", "v1alpha1")
SA_USER = f"system:serviceaccount:{NAMESPACE}:{install_manifests.NAME}"
RHCOS = "416.94.202407030122-0"
DTK_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "3" * 64
# OLM's steps: the catalog operator resolves the Subscription and writes an InstallPlan, runs it,
# the OLM operator installs the CSV and waits for its Deployments (NFD's and ours); each tens of
# seconds on a quiet machine (each controller resyncs, the catalog is served by `opm serve`).
# An upgrade with OLM's operator on every node is as long.
OLM_S = 240


def _load_olm_generator() -> Any:
    return hack_scripts.load("olm", "olm_generator", on_path=True)


def _object(document: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64encode(json.dumps(document).encode()).decode()
    return {"type": "olm.bundle.object", "value": {"data": data}}


def simulated_nfd_catalog() -> list[dict[str, Any]]:
    """A stand-in for the `nfd` package (SIMULATION: one Deployment that kwok 'runs')."""
    csv = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "nfd.v4.16.0", "annotations": {"description": "simulated NFD for tests"}},
        "spec": {
            "displayName": "Node Feature Discovery (simulated)",
            "version": "4.16.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": True},
                {"type": "SingleNamespace", "supported": True},
                {"type": "MultiNamespace", "supported": False},
                {"type": "AllNamespaces", "supported": True},
            ],
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [
                        {
                            "name": "nfd-controller-manager",
                            "spec": {
                                "replicas": 1,
                                "selector": {"matchLabels": {"app": "nfd-simulated"}},
                                "template": {
                                    "metadata": {"labels": {"app": "nfd-simulated"}},
                                    "spec": {
                                        "containers": [
                                            {
                                                "name": "manager",
                                                "image": "registry.example/nfd-simulated:4.16.0",
                                            }
                                        ]
                                    },
                                },
                            },
                        }
                    ]
                },
            },
        },
    }
    return [
        {"schema": "olm.package", "name": "nfd", "defaultChannel": "stable"},
        {"schema": "olm.channel", "package": "nfd", "name": "stable", "entries": [{"name": "nfd.v4.16.0"}]},
        {
            "schema": "olm.bundle",
            "name": "nfd.v4.16.0",
            "package": "nfd",
            "properties": [
                {"type": "olm.package", "value": {"packageName": "nfd", "version": "4.16.0"}},
                _object(csv),
            ],
        },
    ]


class Timings:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.marks: list[tuple[str, float]] = []

    def mark(self, what: str) -> None:
        self.marks.append((what, round(time.monotonic() - self.start, 1)))
        print(f"[olm e2e] {self.marks[-1][1]:7.1f}s {what}", flush=True)


def custom(kube: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube)


def csv_phase(kube: client.ApiClient, name: str) -> str:
    try:
        obj = custom(kube).get_namespaced_custom_object(*OPS, NAMESPACE, "clusterserviceversions", name)
    except ApiException as error:
        if error.status == 404:
            return ""
        raise
    return str((obj.get("status") or {}).get("phase", ""))


def _rules(role: Any) -> list[dict[str, Any]]:
    return [
        {
            key: value
            for key, value in {
                "apiGroups": rule.api_groups,
                "resources": rule.resources,
                "verbs": rule.verbs,
                "resourceNames": rule.resource_names,
            }.items()
            if value
        }
        for rule in role.rules or ()
    ]


def _bound_roles(kube: client.ApiClient) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """Rules of every ClusterRole and Role bound to the operator's ServiceAccount."""
    rbac = client.RbacAuthorizationV1Api(kube)

    def bound(subjects: Any) -> bool:
        return any(
            s.kind == "ServiceAccount" and s.name == install_manifests.NAME and s.namespace == NAMESPACE
            for s in subjects or ()
        )

    cluster = [
        _rules(rbac.read_cluster_role(b.role_ref.name))
        for b in rbac.list_cluster_role_binding().items
        if bound(b.subjects) and b.role_ref.kind == "ClusterRole"
    ]
    namespaced = [
        _rules(rbac.read_namespaced_role(b.role_ref.name, NAMESPACE))
        for b in rbac.list_namespaced_role_binding(NAMESPACE).items
        if bound(b.subjects) and b.role_ref.kind == "Role"
    ]
    return cluster, namespaced


def service_account_kubeconfig(control_plane: LocalControlPlane, kube: client.ApiClient, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of the operator's ServiceAccount."""
    request = client.CoreV1Api(kube).create_namespaced_service_account_token(
        install_manifests.NAME, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": control_plane.server,
                    "certificate-authority": str(control_plane.ca_cert),
                },
            }
        ],
        "users": [{"name": SA_USER, "user": {"token": request.status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": SA_USER}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def forbidden_for(control_plane: LocalControlPlane, since: int, user: str) -> list[str]:
    return [
        f"{e.get('verb')} {e.get('requestURI')}"
        for e in control_plane.read_audit_events(since)
        if (e.get("user") or {}).get("username") == user
        and (e.get("responseStatus") or {}).get("code") == 403
    ]


@pytest.fixture
def cleanup_namespaces(kube: client.ApiClient) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        try:
            client.CoreV1Api(kube).delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def cleanup(kube: client.ApiClient) -> Iterator[list[str]]:
    nodes: list[str] = []
    yield nodes
    fake_nodes.delete_nodes(kube, nodes)
    api = custom(kube)
    for name in ("cluster-policy",):
        try:
            api.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", name)
        except ApiException as error:
            if error.status != 404:
                raise
    delete_namespace_if_present(kube, NAMESPACE)


def delete_namespace_if_present(kube: client.ApiClient, name: str) -> None:
    try:
        client.CoreV1Api(kube).delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


def test_olm_installs_the_bundle_and_the_operator_runs_under_its_service_account(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    olm_tools: Path,
    olm_bins: Path,
    tmp_path: Path,
    cleanup: list[str],
    cleanup_namespaces: list[str],
) -> None:
    timings = Timings()
    generator = _load_olm_generator()

    # OLM's CRDs, as the snapshot ships them.
    for path in olm.crd_files():
        kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    extensions = client.ApiextensionsV1Api(kube)
    crds.wait_until_served(kube, [crd["metadata"]["name"] for crd in olm.load_crds()])
    core = client.CoreV1Api(kube)
    for name in (olm.OLM_NAMESPACE,):
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise
    timings.mark("OLM CRDs established")

    # Our catalog (bundle content embedded, no bundle image) beside the simulated NFD package.
    catalog_dir = tmp_path / "catalog"
    (catalog_dir / "ocp-gpu").mkdir(parents=True)
    (catalog_dir / "nfd").mkdir()
    (catalog_dir / "ocp-gpu" / "catalog.yaml").write_text(
        yaml.safe_dump_all(generator.catalog_documents(ROOT, bundle_image=None))
    )
    (catalog_dir / "nfd" / "catalog.yaml").write_text(yaml.safe_dump_all(simulated_nfd_catalog()))
    node = unique_name("cpu")
    fake_nodes.create_nodes(kube, [fake_nodes.cpu_node(node)])
    cleanup.append(node)

    with olm.OlmProcesses(
        control_plane.kubeconfig, catalog_dir, olm_tools / "opm", tmp_path / "olm"
    ) as procs:
        try:
            # The objects of docs/install-openshift.md; the catalog is served on loopback and lives in OLM's
            # global catalog namespace here (openshift-marketplace on OpenShift).
            objects = readme_block("olm-install")
            for obj in objects:
                if obj["kind"] == "CatalogSource":
                    obj["metadata"]["namespace"] = olm.OLM_NAMESPACE
                    del obj["spec"]["image"]
                    obj["spec"]["address"] = f"127.0.0.1:{procs.catalog_port}"
                if obj["kind"] == "Subscription":
                    obj["spec"]["sourceNamespace"] = olm.OLM_NAMESPACE
            kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))

            def catalog_ready() -> bool:
                procs.check()
                source = custom(kube).get_namespaced_custom_object(
                    *OPS, olm.OLM_NAMESPACE, "catalogsources", "ocp-gpu-catalog"
                )
                state = ((source.get("status") or {}).get("connectionState") or {}).get("lastObservedState")
                return state == "READY"

            wait_for(catalog_ready, READY_S, interval=1, what="CatalogSource READY")
            timings.mark("CatalogSource READY (opm serve over gRPC)")

            def install_plan() -> dict[str, Any] | None:
                procs.check()
                plans = custom(kube).list_namespaced_custom_object(*OPS, NAMESPACE, "installplans")["items"]
                complete = [p for p in plans if (p.get("status") or {}).get("phase") == "Complete"]
                return complete[0] if complete else None

            plan = wait_for(install_plan, OLM_S, interval=1, what="an InstallPlan in phase Complete")
            assert "ocp-gpu.v0.1.0" in plan["spec"]["clusterServiceVersionNames"]
            timings.mark("InstallPlan Complete")

            def succeeded() -> bool:
                procs.check()
                return (
                    csv_phase(kube, "ocp-gpu.v0.1.0") == "Succeeded"
                    and csv_phase(kube, "nfd.v4.16.0") == "Succeeded"
                )

            wait_for(succeeded, OLM_S, interval=1, what="CSVs ocp-gpu.v0.1.0 and nfd.v4.16.0 Succeeded")
            timings.mark("CSV Succeeded")
        except BaseException:
            for name, tail in procs.logs().items():
                print(f"--- {name} (tail) ---\n{tail}")
            raise

    # What the CSV declares exists as declared.
    crd = extensions.read_custom_resource_definition("clusterpolicies.nvidia.com")
    assert crds.is_established(crd.status.conditions)
    core.read_namespaced_service_account(install_manifests.NAME, NAMESPACE)
    cluster_rules, namespace_rules = _bound_roles(kube)
    assert install_manifests.cluster_role()["rules"] in cluster_rules
    assert install_manifests.role(NAMESPACE)["rules"] in namespace_rules
    deployment = client.AppsV1Api(kube).read_namespaced_deployment(install_manifests.NAME, NAMESPACE)
    pod_spec = deployment.spec.template.spec
    assert pod_spec.service_account_name == install_manifests.NAME
    assert pod_spec.priority_class_name == "system-node-critical"
    assert deployment.status.available_replicas == 1
    timings.mark("CRD, ServiceAccount, RBAC and Deployment as declared")

    # The operator as that ServiceAccount.
    (container,) = deployment.spec.template.spec.containers
    env = {item.name: item.value for item in container.env if item.value is not None}
    kubeconfig = service_account_kubeconfig(control_plane, kube, tmp_path / "gpu-operator.kubeconfig")
    audit_mark = control_plane.audit_line_count()
    operator = OperatorProcess(kubeconfig, NAMESPACE, tmp_path / "operator.log", env=env).start()
    try:
        operator.wait_http("/healthz")
        wait_for(lambda: operator.role() == "leader", REACT_S, what="operator leading")
        timings.mark("operator (as the ServiceAccount) leading")

        gpu = [unique_name("gpu") for _ in range(2)]
        fake_nodes.create_nodes(kube, [fake_nodes.vanilla_gpu_node(name) for name in gpu])
        cleanup.extend(gpu)
        csv = custom(kube).get_namespaced_custom_object(
            *OPS, NAMESPACE, "clusterserviceversions", "ocp-gpu.v0.1.0"
        )
        (example,) = [
            item
            for item in json.loads(csv["metadata"]["annotations"]["alm-examples"])
            if item["kind"] == "ClusterPolicy"
        ]
        custom(kube).create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", example)

        apps = client.AppsV1Api(kube)

        def ready(name: str) -> bool:
            try:
                ds = apps.read_namespaced_daemon_set(name, NAMESPACE)
            except ApiException:
                return False
            return (
                bool(ds.status.desired_number_scheduled)
                and ds.status.number_ready == ds.status.desired_number_scheduled
            )

        wait_for(lambda: ready("nvidia-driver-daemonset-ubuntu22.04"), READY_S, what="driver DaemonSet ready")
        wait_for(lambda: ready("nvidia-container-toolkit-daemonset"), READY_S, what="toolkit DaemonSet ready")
        for name in gpu:
            node_labels = core.read_node(name).metadata.labels
            assert node_labels[labels.GPU_PRESENT] == "true"

        def policy_state() -> str:
            policy = custom(kube).get_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
            )
            return str((policy.get("status") or {}).get("state"))

        wait_for(lambda: policy_state() == "ready", READY_S, what="ClusterPolicy ready")
        timings.mark("vanilla: driver and toolkit DaemonSets ready, policy ready")

        # The seed's upgrade under the ServiceAccount: cordon, GPU pod deletion in another
        # namespace, driver pod restart, uncordon, on every node.
        workloads = unique_name("workload")
        core.create_namespace({"metadata": {"name": workloads}})
        cleanup_namespaces.append(workloads)
        # NB: a Deployment's pod, as a real GPU job would be (a bare pod needs gpuPodDeletion.force)
        client.AppsV1Api(kube).create_namespaced_deployment(
            workloads,
            {
                "metadata": {"name": "train"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "train"}},
                    "template": {
                        "metadata": {"labels": {"app": "train"}},
                        "spec": {
                            "nodeSelector": {"kubernetes.io/hostname": gpu[0]},
                            "containers": [
                                {
                                    "name": "cuda",
                                    "image": "cuda:12",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ],
                        },
                    },
                },
            },
        )
        gpu_pod = wait_for(
            lambda: next(
                (
                    pod
                    for pod in core.list_namespaced_pod(workloads, label_selector="app=train").items
                    if pod.spec.node_name == gpu[0]
                    and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
                ),
                None,
            ),
            STEP_S,
            what="the GPU workload running",
        )

        def upgrade_states() -> set[str]:
            return {core.read_node(name).metadata.labels.get(labels.UPGRADE_STATE, "") for name in gpu}

        wait_for(lambda: upgrade_states() == {"upgrade-done"}, READY_S, what="initial upgrade-done labels")
        kubectl(
            control_plane,
            "patch",
            "clusterpolicy/cluster-policy",
            "--type=json",
            "-p",
            '[{"op": "replace", "path": "/spec/driver/version", "value":"510.85.02"}]',
        )

        def upgraded() -> bool:
            pods = core.list_namespaced_pod(
                NAMESPACE, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
            ).items
            on_new = {
                pod.spec.node_name
                for pod in pods
                if any("510.85.02" in c.image for c in pod.spec.containers)
                and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
            }
            return on_new >= set(gpu) and upgrade_states() == {"upgrade-done"}

        wait_for(upgraded, OLM_S, interval=1, what="every node upgraded to 510.85.02")
        remaining = {pod.metadata.uid for pod in core.list_namespaced_pod(workloads).items}
        assert gpu_pod.metadata.uid not in remaining, "the GPU pod on the upgraded node was not deleted"
        assert not any(core.read_node(name).spec.unschedulable for name in gpu)
        timings.mark("vanilla: driver upgrade 550 -> 510.85.02 on every node (GPU pod deleted)")

        # OpenShift: one DaemonSet per RHCOS version with the Driver Toolkit, SCC RoleBinding.
        # NB: the operator learns the platform from API discovery when it starts, as it
        # does when its pod starts on a cluster: restart it once the OpenShift APIs exist.
        operator.stop()
        fake_nodes.delete_nodes(kube, gpu)
        openshift_emulation.install_openshift_apis(kube)
        try:
            openshift_emulation.set_driver_toolkit_tags(kube, {RHCOS: DTK_IMAGE})
            operator = OperatorProcess(
                kubeconfig, NAMESPACE, tmp_path / "operator-openshift.log", env=env
            ).start()
            operator.wait_http("/healthz")
            wait_for(lambda: operator.role() == "leader", START_S, what="operator leading (OpenShift)")
            rhcos = unique_name("gpu")
            fake_nodes.create_nodes(kube, [fake_nodes.gpu_node(rhcos, rhcos=RHCOS)])
            cleanup.append(rhcos)
            wait_for(
                lambda: ready(f"nvidia-driver-daemonset-{RHCOS}"),
                READY_S,
                what="RHCOS driver DaemonSet ready",
            )
            ds = apps.read_namespaced_daemon_set(f"nvidia-driver-daemonset-{RHCOS}", NAMESPACE)
            images = {c.name: c.image for c in ds.spec.template.spec.containers}
            assert images["openshift-driver-toolkit-ctr"] == DTK_IMAGE
            rbac = client.RbacAuthorizationV1Api(kube)
            wait_for(
                lambda: any(
                    b.role_ref.name == "system:openshift:scc:privileged"
                    for b in rbac.list_namespaced_role_binding(NAMESPACE).items
                ),
                STEP_S,
                what="SCC RoleBinding",
            )
            wait_for(lambda: policy_state() == "ready", READY_S, what="ClusterPolicy ready (OpenShift)")
            timings.mark(
                "OpenShift: RHCOS driver DaemonSet with the DTK image, SCC RoleBinding, policy ready"
            )
        finally:
            openshift_emulation.uninstall_openshift_apis(kube)

        denied = forbidden_for(control_plane, audit_mark, SA_USER)
        assert not denied, f"the ServiceAccount was refused: {denied[:20]}"
        assert "Forbidden" not in operator.log()
    except BaseException:
        print(f"--- operator log (tail) ---\n{operator.log()[-8000:]}")
        raise
    finally:
        operator.stop()
    print("[olm e2e] phases:", json.dumps(timings.marks))
