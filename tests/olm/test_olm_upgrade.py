"""We test these aspects of upgrading ocp-gpu itself with a real OLM on the local control plane:

- OLM installs the release's bundle (`ocp-gpu.v<VERSION>`) from a catalog served by `opm serve`,
  through the README's Subscription with manual approval (the admin approves the InstallPlan);
  the operator (a local process as the CSV's Deployment's pod, authenticated as its
  ServiceAccount) makes the GPU stack ready on OpenShift (emulated APIs): four kwok GPU nodes
  on two RHCOS versions, one driver DaemonSet per version, the policy from the CSV's
  alm-examples (upgradePolicy: maxParallelUpgrades 1, maxUnavailable 25%);
- the catalog then serves a second bundle (hack/olm_upgrade.py: a TEST bundle whose only
  change is the release table, `replaces` the first CSV, `olm.skipRange` over it): OLM offers
  an InstallPlan for it, the admin approves it, the new CSV `Succeeded` and the old one is
  gone, and the Deployment's new pod (new env, new image) runs;
- the new operator (the old process stopped, a new one started with the new pod's env and
  name) rolls what the new release table changed: each driver DaemonSet's image changes and
  the drivers roll node by node (a watch of the nodes' upgrade-state labels: never more than
  one node in flight, never more than one node cordoned at once, every node through
  cordon-required, pod-restart-required and upgrade-done); each node gets exactly one new
  driver pod and no pod of the new image is ever deleted; every other DaemonSet whose images
  changed (device plugin, GFD, DCGM exporter, the validator and node status exporter: the
  operator's own image) rolls to its new images, and the DaemonSets whose images did not
  change keep their pods (none here: every operand runs the validator's init containers, on
  the operator's image, so a new operator image rolls them all; the check stays for a table
  change that leaves the operator's image); the policy is `ready` again and the ServiceAccount
  was never refused.

What is simulated: kwok runs the pods (nothing executes, so the operator runs as a local
process standing in for the Deployment's pod, started with that pod's env and name; it runs
this checkout's code, whose built-in release table is the first bundle's: every image it
uses comes from the Deployment's env, as in a pod); the catalog's change is a new `opm serve`
and the CatalogSource's `spec.address` pointed at it (a new catalog image's pod on a
cluster); NFD is a stand-in package.  The second bundle's changed images do not exist.
Skipped, saying why and how to get it, where OLM's source is absent (harness/olm.SOURCE_HELP).
Timings of each phase are printed (pytest -s).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from ocp_gpu.install import install_manifests
from ocp_gpu.model import labels, releases
from ocp_gpu_harness import crds, olm
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.chaos import IN_FLIGHT
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess
from tests import hack_scripts
from tests.e2e.conftest import READY_S, START_S, UPGRADE_S, kubectl, wait_for
from tests.olm.test_olm_install import (
    NAMESPACE,
    OPS,
    SA_USER,
    Timings,
    csv_phase,
    custom,
    delete_namespace_if_present,
    forbidden_for,
    service_account_kubeconfig,
    simulated_nfd_catalog,
)
from tests.unit.test_readme_install import readme_block

# NB: its waits' budgets add up past pytest-timeout's default 300 s (a loaded machine)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
# Two RHCOS versions (OpenShift 4.16 and 4.17), two GPU nodes each: one driver DaemonSet each.
RHCOS = ("416.94.202407030122-0", "417.94.202410090854-0")
DTK_TAGS = {
    RHCOS[0]: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "3" * 64,
    RHCOS[1]: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "4" * 64,
}
NODES_PER_RHCOS = 2
# The alm-examples policy's upgradePolicy over four GPU nodes: maxParallelUpgrades 1 and
# maxUnavailable 25% (of 4: one node) both allow one node at a time.
ALLOWED_AT_ONCE = 1
DRIVER_SELECTOR = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
# One step of OLM: a catalog resolved into an InstallPlan, an approved plan installed, a CSV
# Succeeded once its Deployment is available, a replaced CSV deleted.  Measured 8 to 30 s per
# step at load averages 5 to 15; the rest is room for a loaded machine.
OLM_S = 240


class Rollout:
    """Watches the GPU nodes and the operator namespace's pods while the `with` block runs.

    Nodes: each node's upgrade-state labels in order, the most nodes in flight and the most
    nodes cordoned at once.  Pods: every pod listed at the start, created or deleted since,
    with its node, owning DaemonSet and images.
    NB: watches, not polling: a pass chains a node through several states within milliseconds.
    """

    def __init__(self, kube: client.ApiClient, nodes: list[str]) -> None:
        self.kube, self.nodes = kube, set(nodes)
        self.states: dict[str, list[str]] = {name: [] for name in nodes}
        self.cordoned: dict[str, bool] = {}
        self.current: dict[str, str] = {}
        self.max_in_flight = 0
        self.max_cordoned = 0
        self.pods: dict[str, dict[str, Any]] = {}
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        core = client.CoreV1Api(kube)
        # NB: the client's own list methods: the watch reads their docstring to build typed objects
        self._threads = [
            threading.Thread(target=self._follow, args=(core.list_node, {}, self._see_node), daemon=True),
            threading.Thread(
                target=self._follow,
                args=(core.list_namespaced_pod, {"namespace": NAMESPACE}, self._see_pod),
                daemon=True,
            ),
        ]

    def _see_node(self, kind: str, node: Any) -> None:
        name = node.metadata.name
        if name not in self.nodes or kind == "DELETED":
            return
        state = (node.metadata.labels or {}).get(labels.UPGRADE_STATE, "")
        with self._lock:
            if not self.states[name] or self.states[name][-1] != state:
                self.states[name].append(state)
            self.current[name] = state
            self.cordoned[name] = bool(node.spec.unschedulable)
            self.max_in_flight = max(self.max_in_flight, sum(s in IN_FLIGHT for s in self.current.values()))
            self.max_cordoned = max(self.max_cordoned, sum(self.cordoned.values()))

    def _see_pod(self, kind: str, pod: Any) -> None:
        owners = pod.metadata.owner_references or ()
        with self._lock:
            record = self.pods.setdefault(
                pod.metadata.uid,
                {
                    "uid": pod.metadata.uid,
                    "name": pod.metadata.name,
                    "node": None,
                    "listed": kind == "LISTED",
                    "deleted": False,
                    "owner": next((o.name for o in owners if o.kind == "DaemonSet"), None),
                    "driver": (pod.metadata.labels or {}).get(labels.COMPONENT) == labels.DRIVER_COMPONENT,
                    "images": sorted(
                        {c.image for c in pod.spec.containers}
                        | {c.image for c in pod.spec.init_containers or ()}
                    ),
                },
            )
            # NB: a DaemonSet's pod is created unbound; the scheduler names its node later
            record["node"] = pod.spec.node_name or record["node"]
            record["deleted"] = record["deleted"] or kind == "DELETED"

    def added(self) -> list[dict[str, Any]]:
        """The pods created while the watch ran."""
        with self._lock:
            return [dict(record) for record in self.pods.values() if not record["listed"]]

    def deleted(self) -> list[dict[str, Any]]:
        """The pods deleted while the watch ran."""
        with self._lock:
            return [dict(record) for record in self.pods.values() if record["deleted"]]

    def _follow(
        self, lister: Callable[..., Any], args: dict[str, Any], see: Callable[[str, Any], None]
    ) -> None:
        listed = lister(**args)
        version = listed.metadata.resource_version
        for item in listed.items:
            see("LISTED", item)
        self._started.release()
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(
                    lister, **args, resource_version=version, timeout_seconds=2, allow_watch_bookmarks=True
                )
                for event in stream:
                    if event["type"] == "ERROR":
                        self.failures.append(f"watch failed: {event['raw_object']}")
                        return
                    version = event["object"].metadata.resource_version
                    if event["type"] != "BOOKMARK":
                        see(event["type"], event["object"])
            except ApiException as error:
                if error.status == 410:  # the version is gone: events in between are lost
                    self.failures.append(f"watch expired (410 Gone) at {version}")
                    return
                self._stop.wait(0.2)  # refused under load: resume from the last version
            except (urllib3.exceptions.HTTPError, OSError):  # a cut connection: resume, nothing missed
                self._stop.wait(0.2)
            except Exception as error:  # a bug here: fail loudly rather than record nothing
                self.failures.append(f"watch stopped: {error!r}")
                return

    def __enter__(self) -> Rollout:
        self._started = threading.Semaphore(0)
        for thread in self._threads:
            thread.start()
        for _ in self._threads:
            assert self._started.acquire(timeout=30), "the watches did not start"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        if exc_type is None:
            assert not self.failures, self.failures


def _deployment_pod(kube: client.ApiClient, image: str) -> Any:
    """The operator Deployment's Ready pod running `image`, once there is exactly one such."""
    pods = [
        pod
        for pod in client.CoreV1Api(kube)
        .list_namespaced_pod(NAMESPACE, label_selector=f"app={install_manifests.NAME}")
        .items
        if pod.metadata.deletion_timestamp is None
        and pod.spec.containers[0].image == image
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
    ]
    return pods[0] if len(pods) == 1 else None


def _pod_env(pod: Any) -> dict[str, str]:
    return {item.name: item.value for item in pod.spec.containers[0].env or () if item.value is not None}


def _daemonset_images(kube: client.ApiClient) -> dict[str, set[str]]:
    """Each DaemonSet of the namespace -> every image of its pod template."""
    found = {}
    for ds in client.AppsV1Api(kube).list_namespaced_daemon_set(NAMESPACE).items:
        spec = ds.spec.template.spec
        found[ds.metadata.name] = {c.image for c in spec.containers} | {
            c.image for c in spec.init_containers or ()
        }
    return found


def _scheduled(kube: client.ApiClient, name: str) -> int:
    """How many nodes DaemonSet `name` runs on."""
    return int(
        client.AppsV1Api(kube).read_namespaced_daemon_set(name, NAMESPACE).status.desired_number_scheduled
        or 0
    )


def _rolled_out(kube: client.ApiClient, name: str) -> bool:
    """Every scheduled pod of DaemonSet `name` is of its current template and Ready (none: true)."""
    ds = client.AppsV1Api(kube).read_namespaced_daemon_set(name, NAMESPACE)
    status = ds.status
    # NB: the API leaves out a count of zero: the client reads None
    desired = status.desired_number_scheduled or 0
    return (
        (status.observed_generation or 0) >= ds.metadata.generation
        and (status.updated_number_scheduled or 0) == desired
        and (status.number_ready or 0) == desired
    )


def _driver_pods_on(kube: client.ApiClient, image: str) -> dict[str, str]:
    """Node -> uid of its Ready driver pod running `image`."""
    return {
        pod.spec.node_name: pod.metadata.uid
        for pod in client.CoreV1Api(kube).list_namespaced_pod(NAMESPACE, label_selector=DRIVER_SELECTOR).items
        if pod.metadata.deletion_timestamp is None
        and any(c.image == image for c in pod.spec.containers)
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
    }


@pytest.fixture
def cleanup(kube: client.ApiClient) -> Iterator[list[str]]:
    nodes: list[str] = []
    yield nodes
    fake_nodes.delete_nodes(kube, nodes)
    try:
        custom(kube).delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    except ApiException as error:
        if error.status != 404:
            raise
    openshift_emulation.uninstall_openshift_apis(kube)
    delete_namespace_if_present(kube, NAMESPACE)


def test_olm_upgrades_ocp_gpu_and_the_drivers_roll_node_by_node(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    olm_tools: Path,
    olm_bins: Path,
    tmp_path: Path,
    cleanup: list[str],
) -> None:
    del olm_bins  # built: OlmProcesses runs them
    timings = Timings()
    release = hack_scripts.load("olm", on_path=True)
    upgrade = hack_scripts.load("olm_upgrade", on_path=True)
    first, second = release.CSV_NAME, upgrade.TEST_CSV_NAME
    changes: dict[str, str] = upgrade.image_changes()

    for path in olm.crd_files():
        kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    crds.wait_until_served(kube, [crd["metadata"]["name"] for crd in olm.load_crds()])
    core, api = client.CoreV1Api(kube), custom(kube)
    try:
        core.create_namespace({"metadata": {"name": olm.OLM_NAMESPACE}})
    except ApiException as error:
        if error.status != 409:
            raise

    # The release's catalog (the committed one's documents) and, for later, the two-bundle one.
    catalogs = {}
    for which, documents in (
        ("first", release.catalog_documents(ROOT, bundle_image=None)),
        ("second", upgrade.catalog_documents(ROOT)),
    ):
        directory = tmp_path / f"catalog-{which}"
        (directory / "ocp-gpu").mkdir(parents=True)
        (directory / "nfd").mkdir()
        (directory / "ocp-gpu" / "catalog.yaml").write_text(yaml.safe_dump_all(documents))
        (directory / "nfd" / "catalog.yaml").write_text(yaml.safe_dump_all(simulated_nfd_catalog()))
        catalogs[which] = directory
    # a node for the operator's and NFD's Deployment pods (kwok runs them)
    cpu = unique_name("cpu")
    fake_nodes.create_nodes(kube, [fake_nodes.cpu_node(cpu)])
    cleanup.append(cpu)
    # OpenShift (emulated APIs) before OLM and the operator start: both learn the platform then.
    openshift_emulation.install_openshift_apis(kube)
    openshift_emulation.set_driver_toolkit_tags(kube, DTK_TAGS)
    timings.mark("OLM CRDs established, OpenShift APIs emulated")

    operator: OperatorProcess | None = None
    with olm.OlmProcesses(
        control_plane.kubeconfig, catalogs["first"], olm_tools / "opm", tmp_path / "olm"
    ) as procs:
        try:
            # NB: an earlier OLM test's namespace may still be terminating (OLM's finalizers, which
            # need OLM running): its CSV would stand for ours, with no InstallPlan to approve
            def namespace_gone() -> bool:
                try:
                    core.read_namespace(NAMESPACE)
                except ApiException as error:
                    return error.status == 404
                return False

            wait_for(namespace_gone, OLM_S, interval=1, what=f"namespace {NAMESPACE} gone")
            objects = readme_block("olm-install")
            for obj in objects:
                if obj["kind"] == "CatalogSource":
                    obj["metadata"]["namespace"] = olm.OLM_NAMESPACE
                    del obj["spec"]["image"]
                    obj["spec"]["address"] = f"127.0.0.1:{procs.catalog_port}"
                if obj["kind"] == "Subscription":
                    obj["spec"]["sourceNamespace"] = olm.OLM_NAMESPACE
                    # the admin approves each InstallPlan: the upgrade starts when the test says
                    obj["spec"]["installPlanApproval"] = "Manual"
            kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects))

            def plan_for(csv_name: str) -> dict[str, Any] | None:
                procs.check()
                for plan in api.list_namespaced_custom_object(*OPS, NAMESPACE, "installplans")["items"]:
                    if csv_name in plan["spec"]["clusterServiceVersionNames"]:
                        return dict(plan)
                return None

            def approve(csv_name: str) -> None:
                """As an admin does: once OLM shows the plan RequiresApproval, approve it."""
                # NB: approving earlier races OLM's own first writes of the new plan
                plan = wait_for(
                    lambda: (
                        (found := plan_for(csv_name))
                        and (found.get("status") or {}).get("phase") == "RequiresApproval"
                        and found
                    ),
                    OLM_S,
                    interval=1,
                    what=f"an InstallPlan for {csv_name} requiring approval",
                )
                assert plan["spec"]["approval"] == "Manual" and plan["spec"]["approved"] is False
                api.patch_namespaced_custom_object(
                    *OPS, NAMESPACE, "installplans", plan["metadata"]["name"], {"spec": {"approved": True}}
                )
                wait_for(
                    lambda: (
                        ((plan_for(csv_name) or {}).get("status") or {}).get("phase")
                        in ("Installing", "Complete")
                    ),
                    OLM_S,
                    interval=1,
                    what=f"the InstallPlan for {csv_name} approved and installing",
                )

            def succeeded(csv_name: str) -> bool:
                procs.check()
                return csv_phase(kube, csv_name) == "Succeeded"

            approve(first)
            wait_for(
                lambda: succeeded(first) and succeeded("nfd.v4.16.0"),
                OLM_S,
                interval=1,
                what=f"{first} Succeeded",
            )
            timings.mark(f"{first} installed (InstallPlan approved, CSV Succeeded)")

            # The operator as the Deployment's pod (kwok runs the pod; the process does the work).
            kubeconfig = service_account_kubeconfig(control_plane, kube, tmp_path / "gpu-operator.kubeconfig")
            audit_mark = control_plane.audit_line_count()
            pod = wait_for(
                lambda: _deployment_pod(kube, releases.OPERATOR_IMAGE), READY_S, what="operator pod"
            )
            operator = OperatorProcess(
                kubeconfig,
                NAMESPACE,
                tmp_path / "operator-first.log",
                env=_pod_env(pod),
                identity=pod.metadata.name,
            ).start()
            operator.wait_http("/healthz")
            wait_for(
                lambda: operator is not None and operator.role() == "leader", START_S, what="operator leading"
            )

            gpu = [unique_name("gpu") for _ in RHCOS for _ in range(NODES_PER_RHCOS)]
            cleanup.extend(gpu)
            by_rhcos = {
                version: gpu[i * NODES_PER_RHCOS : (i + 1) * NODES_PER_RHCOS]
                for i, version in enumerate(RHCOS)
            }
            fake_nodes.create_nodes(
                kube,
                [
                    fake_nodes.gpu_node(name, rhcos=version)
                    for version, names in by_rhcos.items()
                    for name in names
                ],
            )
            the_csv = api.get_namespaced_custom_object(*OPS, NAMESPACE, "clusterserviceversions", first)
            (example,) = [
                item
                for item in json.loads(the_csv["metadata"]["annotations"]["alm-examples"])
                if item["kind"] == "ClusterPolicy"
            ]
            assert example["spec"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] == ALLOWED_AT_ONCE
            api.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", example)
            driver_sets = [f"nvidia-driver-daemonset-{version}" for version in RHCOS]

            def policy_state() -> str:
                policy = api.get_cluster_custom_object(
                    "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
                )
                return str((policy.get("status") or {}).get("state"))

            def stack_ready() -> bool:
                assert operator is not None and operator.running(), "the operator exited"
                states = {core.read_node(name).metadata.labels.get(labels.UPGRADE_STATE) for name in gpu}
                return (
                    all(_scheduled(kube, name) == NODES_PER_RHCOS for name in driver_sets)
                    and all(_rolled_out(kube, name) for name in _daemonset_images(kube))
                    and states == {"upgrade-done"}
                    and policy_state() == "ready"
                )

            wait_for(stack_ready, READY_S + UPGRADE_S, interval=1, what="GPU stack ready on release 1")
            before = _daemonset_images(kube)
            (old_driver,) = before[driver_sets[0]] & set(changes)
            new_driver = changes[old_driver]
            assert all(old_driver in before[name] for name in driver_sets)
            drivers_before = _driver_pods_on(kube, old_driver)
            assert set(drivers_before) == set(gpu)
            operands = sorted(set(before) - set(driver_sets))
            changing = [name for name in operands if before[name] & set(changes)]
            keeping = [name for name in operands if name not in changing]
            # NB: a DaemonSet on no node (MIG manager: no MIG-capable GPU here) has no pod to roll
            running = {name for name in operands if _scheduled(kube, name)}
            assert changing, f"no operand DaemonSet uses a changed image: {before}"
            timings.mark(
                f"release 1 ready: {len(gpu)} GPU nodes on {len(RHCOS)} RHCOS versions, "
                f"{len(before)} DaemonSets ({len(changing)} operands to change, {len(keeping)} to keep)"
            )

            # The catalog serves the second bundle; the admin approves the upgrade.
            with Rollout(kube, gpu) as rollout:
                port = procs.serve_another(catalogs["second"])
                api.patch_namespaced_custom_object(
                    *OPS,
                    olm.OLM_NAMESPACE,
                    "catalogsources",
                    "ocp-gpu-catalog",
                    {"spec": {"address": f"127.0.0.1:{port}"}},
                )
                approve(second)
                wait_for(lambda: succeeded(second), OLM_S, interval=1, what=f"{second} Succeeded")
                wait_for(
                    lambda: csv_phase(kube, first) == "", OLM_S, interval=1, what=f"{first} replaced and gone"
                )
                csv_after = api.get_namespaced_custom_object(
                    *OPS, NAMESPACE, "clusterserviceversions", second
                )
                assert csv_after["spec"]["replaces"] == first
                new_pod = wait_for(
                    lambda: _deployment_pod(kube, upgrade.TEST_OPERATOR_IMAGE),
                    READY_S,
                    what="the new operator pod Ready",
                )
                new_env = _pod_env(new_pod)
                assert new_env["DRIVER_IMAGE"] == new_driver
                timings.mark(f"{second} installed (replaces {first}), its operator pod Ready")

                operator.stop()
                operator = OperatorProcess(
                    kubeconfig,
                    NAMESPACE,
                    tmp_path / "operator-second.log",
                    env=new_env,
                    identity=new_pod.metadata.name,
                ).start()
                operator.wait_http("/healthz")
                wait_for(
                    lambda: operator is not None and operator.role() == "leader",
                    START_S,
                    what="new operator leading",
                )
                timings.mark("the new operator leading")

                # every image the release table changed, and only those, changed in the DaemonSets
                expected = {
                    name: {changes.get(image, image) for image in images} for name, images in before.items()
                }

                def upgraded() -> bool:
                    assert operator is not None and operator.running(), "the operator exited"
                    return (
                        _daemonset_images(kube) == expected
                        and set(_driver_pods_on(kube, new_driver)) == set(gpu)
                        and all(_rolled_out(kube, name) for name in [*driver_sets, *changing])
                        and set(rollout.current.values()) == {"upgrade-done"}
                        and policy_state() == "ready"
                    )

                wait_for(
                    upgraded,
                    OLM_S + UPGRADE_S,
                    interval=1,
                    what="drivers and operands on release 2, every node upgrade-done",
                )
                timings.mark("drivers rolled node by node, operands rolled, policy ready")
        except BaseException:
            for name, tail in procs.logs().items():
                print(f"--- {name} (tail) ---\n{tail}")
            if operator is not None:
                print(f"--- operator log (tail) ---\n{operator.log()[-8000:]}")
            raise
        finally:
            if operator is not None:
                operator.stop()

    assert all(new_driver in expected[name] for name in driver_sets)
    # The drivers rolled under upgradePolicy: one node at a time, each through the states.
    assert rollout.max_in_flight == ALLOWED_AT_ONCE, rollout.states
    assert rollout.max_cordoned <= ALLOWED_AT_ONCE, rollout.states
    for name, seen in rollout.states.items():
        assert {"cordon-required", "pod-restart-required", "upgrade-done"} <= set(seen), (name, seen)
        assert seen[-1] == "upgrade-done", (name, seen)

    # Each node got exactly one new driver pod, and the only driver pods deleted were the old ones.
    new_drivers = [p for p in rollout.added() if p["driver"]]
    assert sorted(p["node"] for p in new_drivers) == sorted(gpu), new_drivers
    assert all(new_driver in p["images"] for p in new_drivers), new_drivers
    deleted_drivers = [p for p in rollout.deleted() if p["driver"]]
    assert {p["uid"] for p in deleted_drivers} == set(drivers_before.values()), deleted_drivers
    assert not [p for p in deleted_drivers if new_driver in p["images"]], deleted_drivers

    # The other operands rolled; those whose images did not change kept their pods.
    rolled = {p["owner"] for p in rollout.added() if p["owner"] in changing}
    assert rolled == set(changing) & running, (rolled, changing)
    untouched = [p for p in rollout.deleted() if p["owner"] in keeping]
    assert not untouched, untouched

    denied = forbidden_for(control_plane, audit_mark, SA_USER)
    assert not denied, f"the ServiceAccount was refused: {denied[:20]}"
    print("[olm upgrade e2e] operand DaemonSets changed:", json.dumps(changing), "kept:", json.dumps(keeping))
    print(f"[olm upgrade e2e] most nodes in flight {rollout.max_in_flight}, cordoned {rollout.max_cordoned}")
    print("[olm upgrade e2e] upgrade states:", json.dumps(rollout.states))
    print("[olm upgrade e2e] phases:", json.dumps(timings.marks))
