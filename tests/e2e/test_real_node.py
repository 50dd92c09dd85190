"""We test these aspects of ocp-gpu's image on a real node of the local control plane (containerd,
runc and a kubelet: ocp_gpu_harness/real_node.py), where its pods run for real, not under kwok:

- the node registers under its own identity, Ready and tainted, and kwok leaves it alone;
- the operator Deployment as the Helm chart renders it (image: ours, imported into containerd)
  runs: Running and Ready (its liveness and readiness probes answer), as its non-root user with a
  read-only root filesystem, under the chart's ServiceAccount token; it leads and reconciles the
  kwok GPU nodes (the driver DaemonSet); `kubectl logs deploy/gpu-operator` shows its log;
- its container killed (SIGKILL from the host): the kubelet restarts it in the same pod, which
  leads again and, after its first pass, has written nothing (the audit log, its ServiceAccount's
  writes but its Lease's);
- a validator pod (our image, `ocp-gpu validate driver`) against a fake driver root on the node's
  host path passes with a stand-in nvidia-smi and fails, with the message docs/commands.md
  describes in its termination message, without;
- `ocp-gpu validate toolkit` (our image) passes with that nvidia-smi bind-mounted where NVIDIA's
  runtime injects it (the driver root's /usr/bin/nvidia-smi) and leaves `toolkit-ready`, and
  without it fails saying the runtime injected nothing, its marker removed (`driver-ready` kept);
- `ocp-gpu must-gather` collects the operator pod's real log;
- the operator Deployment as the bundle's ClusterServiceVersion declares it (its spec, env,
  ServiceAccount and RBAC, with what OLM injects: ocp_gpu_harness/olm_install_strategy.py, OLM
  itself does not run here), the chart's scaled to zero first: from our image under the CSV's
  image name, Running and Ready, uid 1001 with a read-only root, under the CSV's ServiceAccount,
  leading and reconciling, writing `Upgradeable` to the OperatorCondition OLM would create, and
  refused nothing (no 403 in the audit log).

Skipped, with the reason, where the machine cannot run the node (`real_node.unavailable_reason`:
not root, no cgroups, containerd/runc/the kubelet/the image missing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels
from ocp_gpu_harness import binaries, olm_install_strategy, real_node
from ocp_gpu_harness import crds as crd_harness
from ocp_gpu_harness import helm as helm_harness
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.binaries import HelmTools
from ocp_gpu_harness.cluster import LocalControlPlane

from .conftest import READY_S, START_S, operator_writes, settle_writes, wait_for

pytestmark = pytest.mark.e2e

NAMESPACE = labels.HELM_NAMESPACE
# A pod on the real node from its creation (or its container's kill) to Ready or finished: a
# sandbox and a container from our image (about 2 s quiet), the interpreter and imports (a few CPU
# seconds), then the readiness probe (5 s initial delay, every 10 s): about 20 s quiet; ten times
# that and more under load, as the budgets of tests/e2e/conftest.py.
POD_S = 300
# The chart's operator runs as its ServiceAccount: the audit log's user for its writes.
OPERATOR_SA_USER = f"system:serviceaccount:{NAMESPACE}:gpu-operator"
# The operator's metrics port (the chart's `--metrics-bind 0.0.0.0:8080`).
METRICS_PORT = 8080
SKIP_E2E = os.environ.get("OCP_GPU_SKIP_E2E") == "1"


@pytest.fixture(scope="module")
def plane() -> Iterator[LocalControlPlane]:
    if SKIP_E2E:
        pytest.skip("OCP_GPU_SKIP_E2E=1: end-to-end tests skipped")
    if reason := real_node.unavailable_reason():
        pytest.skip(f"no real node on this machine: {reason}")
    keep = os.environ.get("OCP_GPU_KEEP_STATE") == "1"
    with LocalControlPlane(binaries=binaries.ensure_binaries(), real_node=True, keep_state=keep) as cp:
        assert cp.real_node is not None
        print(f"real node Ready {cp.real_node.startup_seconds:.1f} s after the control plane")
        yield cp
        cp.check_processes()


@pytest.fixture(scope="module")
def core(plane: LocalControlPlane) -> Iterator[client.CoreV1Api]:
    with plane.api_client() as api:
        yield client.CoreV1Api(api)


def kubectl(plane: LocalControlPlane, *args: str, stdin: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        ["kubectl", f"--kubeconfig={plane.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
    return result.stdout + result.stderr


def test_the_node_registers_ready_tainted_and_kwok_leaves_it_alone(
    plane: LocalControlPlane, core: client.CoreV1Api
) -> None:
    node = core.read_node(real_node.NODE_NAME)
    assert node.status.node_info.kubelet_version == binaries.versions()[0]
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    assert any(t.key == real_node.TAINT["key"] and t.effect == "NoSchedule" for t in node.spec.taints or [])
    # kwok annotates the nodes it manages; the kubelet posts its own status.
    assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
    assert node.status.daemon_endpoints.kubelet_endpoint.port > 0


# --- the operator Deployment from the chart ---------------------------------------------------


def _render_chart(helm_tools: HelmTools, plane: LocalControlPlane, tmp: Path) -> list[dict[str, Any]]:
    assert plane.real_node is not None
    chart = helm_harness.prepare_chart(helm_tools, tmp)
    helm = helm_harness.Helm(helm_tools, None, tmp / "helm-home")
    repository, tag = real_node.image_reference().rsplit(":", 1)
    port = plane.server.rsplit(":", 1)[1]
    values = {
        "operator": {
            "repository": repository.rsplit("/", 1)[0],
            "image": repository.rsplit("/", 1)[1],
            "version": tag,
            # On the real node, not a kwok one (the chart's nodeSelector and tolerations values).
            "nodeSelector": {real_node.LABEL: "true"},
            "tolerations": [real_node.TOLERATION],
            # No kube-proxy here: the kubernetes Service's ClusterIP leads nowhere, so the in-cluster
            # client is pointed at the apiserver's address on the node's pod network (operator.env).
            "env": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": plane.real_node.apiserver_host},
                {"name": "KUBERNETES_SERVICE_PORT", "value": port},
            ],
        },
        "nfd": {"enabled": False},
    }
    values_file = tmp / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    rendered = helm.template(
        chart, "--include-crds", "--no-hooks", "-f", str(values_file), namespace=NAMESPACE
    )
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def ready_operator_pod(
    plane: LocalControlPlane, core: client.CoreV1Api, namespace: str, what: str
) -> client.V1Pod:
    """The operator's pod in `namespace` once every container is Ready; on a timeout, what
    `kubectl describe` and the pod's log say (the real node's reasons are there)."""

    def ready_pod() -> client.V1Pod | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=gpu-operator").items
        for pod in pods:
            statuses = pod.status.container_statuses or []
            if statuses and all(s.ready for s in statuses):
                return pod
        return None

    try:
        found: client.V1Pod = wait_for(ready_pod, timeout=POD_S, what=what)
    except BaseException:
        print(kubectl(plane, "-n", namespace, "describe", "pods", check=False))
        print(kubectl(plane, "-n", namespace, "logs", "deploy/gpu-operator", "--tail=50", check=False))
        raise
    return found


@pytest.fixture(scope="module")
def operator_pod(
    plane: LocalControlPlane,
    core: client.CoreV1Api,
    helm_tools: HelmTools,
    tmp_path_factory: pytest.TempPathFactory,
) -> client.V1Pod:
    docs = _render_chart(helm_tools, plane, tmp_path_factory.mktemp("chart"))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == real_node.image_reference()
    kubectl(plane, "create", "namespace", NAMESPACE, check=False)
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(crds))
    with plane.api_client() as api:
        crd_harness.wait_until_served(api, [d["metadata"]["name"] for d in crds], timeout=120)
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rest))
    for i in range(2):
        core.create_node(fake_nodes.gpu_node(f"real-node-gpu-{i}"))

    return ready_operator_pod(plane, core, NAMESPACE, "the operator pod Running and Ready on the real node")


def _container_pid(plane: LocalControlPlane, pod: client.V1Pod) -> int:
    """The host pid of the pod's (only) container's process, through containerd."""
    assert plane.real_node is not None
    container_id = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    for line in plane.real_node.ctr("tasks", "ls").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == container_id:
            return int(fields[1])
    raise AssertionError(f"no task for container {container_id}")


def test_the_operator_runs_from_our_image_non_root_read_only(
    plane: LocalControlPlane, core: client.CoreV1Api, operator_pod: client.V1Pod
) -> None:
    assert operator_pod.spec.node_name == real_node.NODE_NAME
    assert operator_pod.status.phase == "Running"
    _assert_non_root_read_only(plane, operator_pod)
    # The projected ServiceAccount token is the chart's ServiceAccount's.
    assert operator_pod.spec.service_account_name == "gpu-operator"


def test_the_operator_leads_and_reconciles_the_kwok_gpu_nodes(
    plane: LocalControlPlane, operator_pod: client.V1Pod
) -> None:
    with plane.api_client() as api:
        coordination = client.CoordinationV1Api(api)
        apps = client.AppsV1Api(api)
        lease = wait_for(
            lambda: _lease_holder(coordination), timeout=READY_S, what="the operator's leader Lease"
        )
        assert lease == operator_pod.metadata.name
        wait_for(
            lambda: _driver_daemonsets(apps, NAMESPACE),
            timeout=READY_S,
            what="the operator's driver DaemonSet",
        )
    logs = kubectl(plane, "-n", NAMESPACE, "logs", "deploy/gpu-operator")
    assert logs.strip(), "kubectl logs deploy/gpu-operator printed nothing"


def _driver_daemonsets(apps: client.AppsV1Api, namespace: str) -> list[client.V1DaemonSet] | None:
    return [
        d for d in apps.list_namespaced_daemon_set(namespace).items if "driver" in d.metadata.name
    ] or None


def _lease_holder(coordination: client.CoordinationV1Api, namespace: str = NAMESPACE) -> str | None:
    from ocp_gpu.kube import electing

    try:
        lease = coordination.read_namespaced_lease(electing.LEASE_NAME, namespace)
    except client.ApiException:
        return None
    holder = lease.spec.holder_identity
    return str(holder) if holder else None


def _metric(pod: client.V1Pod, name: str) -> float | None:
    """One un-labelled sample of the pod's /metrics (its port on the node's pod network, which the
    host is on), or None while it does not answer."""
    url = f"http://{pod.status.pod_ip}:{METRICS_PORT}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_killed_operator_container_restarts_in_the_same_pod_leads_again_and_rewrites_nothing(
    plane: LocalControlPlane, core: client.CoreV1Api, operator_pod: client.V1Pod
) -> None:
    # What the operator wrote before the kill: settled (its last write's consequences written),
    # and not nothing, or "nothing rewritten" below would hold of a filter that matches no one.
    # Its writes are its ServiceAccount's, to its namespace or cluster-scoped objects ("").
    settle_writes(plane, user=OPERATOR_SA_USER, namespaces=(NAMESPACE, ""))
    assert operator_writes(plane, 0, OPERATOR_SA_USER, (NAMESPACE, "")), "no write of the operator's before"
    pod = core.read_namespaced_pod(operator_pod.metadata.name, NAMESPACE)
    restarts = pod.status.container_statuses[0].restart_count
    mark = plane.audit_line_count()
    os.kill(_container_pid(plane, pod), signal.SIGKILL)
    began = time.monotonic()

    def restarted_and_ready() -> client.V1Pod | None:
        now = core.read_namespaced_pod(pod.metadata.name, NAMESPACE)
        status = now.status.container_statuses[0]
        return now if status.restart_count == restarts + 1 and status.ready else None

    again = wait_for(restarted_and_ready, timeout=POD_S, what="the container restarted and Ready")
    assert again.metadata.uid == pod.metadata.uid
    with plane.api_client() as api:
        holder = wait_for(
            lambda: _lease_holder(client.CoordinationV1Api(api)), timeout=START_S, what="a leader"
        )
    assert holder == pod.metadata.name
    print(f"restarted and Ready {time.monotonic() - began:.1f} s after SIGKILL")
    # The restarted process's first pass has run (its counter starts again at 0)...
    wait_for(
        lambda: (_metric(again, "gpu_operator_reconciliation_total") or 0) >= 1,
        timeout=START_S,
        what="a first pass of the restarted operator",
    )
    # ...and the window: 2 s after it, in which what it wrote reaches the audit log (logged after
    # the response) and whatever it set off would be written; none of it may be there.
    time.sleep(2)
    assert operator_writes(plane, mark, OPERATOR_SA_USER, (NAMESPACE, "")) == []


def test_must_gather_collects_the_operator_pods_real_log(
    plane: LocalControlPlane, operator_pod: client.V1Pod, tmp_path: Path
) -> None:
    dest = tmp_path / "gather"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ocp_gpu.cli",
            "must-gather",
            "--dest",
            str(dest),
            "--kubeconfig",
            str(plane.kubeconfig),
            "--namespace",
            NAMESPACE,
            "--client",
            "kubernetes",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    logs = list(dest.rglob(f"operator/{operator_pod.metadata.name}*.log"))
    assert logs, sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    gathered = "".join(p.read_text() for p in logs)
    # What the kubelet serves of the running container (the same log `kubectl logs` shows).
    served = kubectl(plane, "-n", NAMESPACE, "logs", operator_pod.metadata.name, "--tail=200").splitlines()
    assert served and any(line in gathered for line in served if line.strip()), gathered[-2000:]


# --- the operator Deployment as the bundle's ClusterServiceVersion declares it ----------------

CSV_PATH = Path(__file__).resolve().parents[2] / "bundle" / "manifests" / "ocp-gpu.clusterserviceversion.yaml"
OPERATOR_CONDITION_CRD = (
    Path(__file__).resolve().parent / "data" / "operators.coreos.com_operatorconditions.yaml"
)
# Where docs/install-openshift.md installs the bundle, and the identity its pod runs as there.
CSV_NAMESPACE = install_manifests.OLM_NAMESPACE
CSV_SA_USER = f"system:serviceaccount:{CSV_NAMESPACE}:{install_manifests.NAME}"


def _assert_non_root_read_only(plane: LocalControlPlane, pod: client.V1Pod) -> None:
    """The pod's container runs as the image's user 1001 with a read-only root filesystem."""
    pid = _container_pid(plane, pod)
    status = Path(f"/proc/{pid}/status").read_text()
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    assert uid_line.split()[1:] == ["1001"] * 4, uid_line
    root_mount = next(
        line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if line.split()[4] == "/"
    )
    assert "ro" in root_mount.split()[5].split(","), root_mount


def test_the_csvs_install_strategy_runs_from_our_image_ready_and_leading(
    plane: LocalControlPlane, core: client.CoreV1Api, operator_pod: client.V1Pod
) -> None:
    assert plane.real_node is not None
    csv = yaml.safe_load(CSV_PATH.read_text())
    port = plane.server.rsplit(":", 1)[1]
    # What an admin's Subscription would say (spec.config): the real node's toleration and label,
    # and the apiserver's address (no kube-proxy here: see _render_chart).
    config = olm_install_strategy.SubscriptionConfig(
        env=[
            {"name": "KUBERNETES_SERVICE_HOST", "value": plane.real_node.apiserver_host},
            {"name": "KUBERNETES_SERVICE_PORT", "value": port},
        ],
        tolerations=[real_node.TOLERATION],
        node_selector={real_node.LABEL: "true"},
    )
    objects = olm_install_strategy.install_objects(csv, CSV_NAMESPACE, config)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    declared = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
    # Our image under the release name the CSV gives it: the Deployment's image stays as declared.
    plane.real_node.tag_image(declared["image"])
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == declared["image"]

    # One operator per cluster: the chart's (the tests above) steps down first, or two would
    # reconcile the one ClusterPolicy from two namespaces.
    with plane.api_client() as api:
        apps = client.AppsV1Api(api)
        apps.patch_namespaced_deployment_scale("gpu-operator", NAMESPACE, {"spec": {"replicas": 0}})
        wait_for(
            lambda: not core.list_namespaced_pod(NAMESPACE, label_selector="app=gpu-operator").items,
            timeout=POD_S,
            what="the chart's operator pod gone",
        )
        mark = plane.audit_line_count()
        core.create_namespace({"metadata": {"name": CSV_NAMESPACE}})
        crd = yaml.safe_load(OPERATOR_CONDITION_CRD.read_text())
        kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(crd))
        crd_harness.wait_until_served(api, [crd["metadata"]["name"]], timeout=120)
        condition = olm_install_strategy.operator_condition(csv, CSV_NAMESPACE)
        kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(condition))
        kubectl(plane, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))

        pod = ready_operator_pod(plane, core, CSV_NAMESPACE, "the CSV's operator pod Running and Ready")
        assert pod.spec.node_name == real_node.NODE_NAME
        assert pod.spec.service_account_name == install_manifests.NAME
        # The very image the chart's pod ran (ours, imported), under the CSV's name.
        assert pod.status.container_statuses[0].image_id == operator_pod.status.container_statuses[0].image_id
        # No runAsUser in the CSV: the image's own user, and its root filesystem read-only.
        _assert_non_root_read_only(plane, pod)

        coordination = client.CoordinationV1Api(api)
        leader = wait_for(
            lambda: _lease_holder(coordination, CSV_NAMESPACE),
            timeout=READY_S,
            what="the CSV operator's Lease",
        )
        assert leader == pod.metadata.name
        wait_for(
            lambda: _driver_daemonsets(apps, CSV_NAMESPACE),
            timeout=READY_S,
            what="the CSV operator's driver DaemonSet",
        )
        # OLM's OperatorCondition, named by the injected OPERATOR_CONDITION_NAME, written under
        # the CSV's permissions (operatorconditions get/patch in its namespace).
        custom = client.CustomObjectsApi(api)

        def upgradeable() -> dict[str, Any] | None:
            found = custom.get_namespaced_custom_object(
                "operators.coreos.com", "v2", CSV_NAMESPACE, "operatorconditions", csv["metadata"]["name"]
            )
            conditions = (found.get("spec") or {}).get("conditions") or []
            return next((c for c in conditions if c.get("type") == "Upgradeable"), None)

        wait_for(upgradeable, timeout=READY_S, what="the operator's Upgradeable in its OperatorCondition")
    refused = [
        f"{e['verb']} {e.get('objectRef')}"
        for e in plane.read_audit_events(since_line=mark)
        if e.get("user", {}).get("username") == CSV_SA_USER and e.get("responseStatus", {}).get("code") == 403
    ]
    assert refused == [], "the CSV's RBAC refused the operator"
    assert operator_writes(plane, mark, CSV_SA_USER, (CSV_NAMESPACE, "")), "no write of the CSV's operator"


# --- the validator against a fake driver root -------------------------------------------------

VALIDATIONS_DIR = "/run/nvidia/validations"
# Where NVIDIA's runtime puts the driver's nvidia-smi in a container it runs: the binary's path
# under the driver root, bind-mounted on its own (NVIDIA/nvidia-container-toolkit,
# pkg/nvcdi/driver-nvml.go NewDriverBinariesDiscoverer: discover.NewMounts with the driver root as
# the root to strip; libnvidia-container's legacy hook mounts utilities into /usr/bin too).
INJECTED_NVIDIA_SMI = "/usr/bin/nvidia-smi"


def _validator_pod(
    name: str, component: str, args: list[str], mounts: list[tuple[str, dict[str, str], str]]
) -> dict[str, Any]:
    """A pod of our image running `ocp-gpu validate <component>` as the validator's init
    containers do (root, privileged there), with `mounts`: (volume, hostPath, mount path)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": real_node.NODE_NAME,
            "tolerations": [real_node.TOLERATION],
            "securityContext": {"runAsUser": 0},
            "containers": [
                {
                    "name": f"{component}-validation",
                    "image": real_node.image_reference(),
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["ocp-gpu", "validate", component],
                    "args": args,
                    "volumeMounts": [
                        {"name": volume, "mountPath": path, "readOnly": path != VALIDATIONS_DIR}
                        for volume, _, path in mounts
                    ],
                }
            ],
            "volumes": [{"name": volume, "hostPath": host} for volume, host, _ in mounts],
        },
    }


def _finished(core: client.CoreV1Api, name: str, namespace: str) -> client.V1Pod:
    def finished() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in ("Succeeded", "Failed") else None

    return wait_for(finished, timeout=POD_S, what=f"pod {name} to finish")


@pytest.fixture(scope="module")
def validator_namespace(core: client.CoreV1Api) -> str:
    namespace = "real-node-validator"
    core.create_namespace({"metadata": {"name": namespace}})
    return namespace


def _fake_driver_root(root: Path) -> Path:
    """A driver root on the node's host path with a stand-in nvidia-smi (no GPU here); its path."""
    (root / "driver" / "usr" / "bin").mkdir(parents=True)
    (root / "validations").mkdir()
    smi = root / "driver" / "usr" / "bin" / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "NVIDIA-SMI 595.91.07  Driver Version: 595.91.07"\n')
    smi.chmod(0o755)
    return smi


def _driver_validator(name: str, root: Path) -> dict[str, Any]:
    return _validator_pod(
        name,
        "driver",
        ["--host-root=/host", "--driver-root=/run/nvidia/driver", f"--validations-dir={VALIDATIONS_DIR}"],
        [
            ("driver", {"path": str(root / "driver")}, "/run/nvidia/driver"),
            ("validations", {"path": str(root / "validations")}, VALIDATIONS_DIR),
        ],
    )


def test_the_validator_passes_with_a_driver_root_and_fails_as_documented_without(
    plane: LocalControlPlane, core: client.CoreV1Api, validator_namespace: str, tmp_path: Path
) -> None:
    root = tmp_path / "node"
    smi = _fake_driver_root(root)
    namespace = validator_namespace
    core.create_namespaced_pod(namespace, _driver_validator("driver-present", root))
    passed = _finished(core, "driver-present", namespace)
    assert passed.status.phase == "Succeeded", kubectl(plane, "-n", namespace, "logs", "driver-present")
    marker = (root / "validations" / "driver-ready").read_text()
    assert "NVIDIA_DRIVER_ROOT=/run/nvidia/driver" in marker

    smi.unlink()
    core.create_namespaced_pod(namespace, _driver_validator("driver-absent", root))
    failed = _finished(core, "driver-absent", namespace)
    assert failed.status.phase == "Failed"
    message = failed.status.container_statuses[0].state.terminated.message or ""
    assert "no nvidia-smi on the host" in message and "no driver is installed yet" in message, message
    assert not (root / "validations" / "driver-ready").exists()


def _toolkit_validator(name: str, root: Path, injected: bool) -> dict[str, Any]:
    """The toolkit validation; `injected`: with the driver root's nvidia-smi where NVIDIA's runtime
    (the toolkit's RuntimeClass) would have bind-mounted it, else as a runtime without it leaves
    the container."""
    mounts = [("validations", {"path": str(root / "validations")}, VALIDATIONS_DIR)]
    if injected:
        smi = root / "driver" / "usr" / "bin" / "nvidia-smi"
        mounts.append(("nvidia-smi", {"path": str(smi), "type": "File"}, INJECTED_NVIDIA_SMI))
    return _validator_pod(name, "toolkit", [f"--validations-dir={VALIDATIONS_DIR}"], mounts)


def test_the_toolkit_validation_passes_with_what_the_runtime_injects_and_fails_as_documented_without(
    plane: LocalControlPlane, core: client.CoreV1Api, validator_namespace: str, tmp_path: Path
) -> None:
    root = tmp_path / "node"
    _fake_driver_root(root)
    validations = root / "validations"
    # The driver validation passed before (its marker stays whatever the toolkit's does).
    (validations / "driver-ready").write_text("IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\n")
    namespace = validator_namespace
    core.create_namespaced_pod(namespace, _toolkit_validator("toolkit-injected", root, injected=True))
    passed = _finished(core, "toolkit-injected", namespace)
    assert passed.status.phase == "Succeeded", kubectl(plane, "-n", namespace, "logs", "toolkit-injected")
    assert (validations / "toolkit-ready").is_file()
    assert "NVIDIA-SMI 595.91.07" in kubectl(plane, "-n", namespace, "logs", "toolkit-injected")

    core.create_namespaced_pod(namespace, _toolkit_validator("toolkit-absent", root, injected=False))
    failed = _finished(core, "toolkit-absent", namespace)
    assert failed.status.phase == "Failed"
    message = failed.status.container_statuses[0].state.terminated.message or ""
    assert "nvidia-smi is not in this container" in message, message
    assert "the NVIDIA runtime did not inject the driver's utilities" in message, message
    assert "container-toolkit pod" in message, message
    assert not (validations / "toolkit-ready").exists()
    assert (validations / "driver-ready").is_file()
