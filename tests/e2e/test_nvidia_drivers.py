"""We test these aspects of `driver.useNvidiaDriverCRD` and NVIDIADrivers on the local control
plane (OpenShift emulation, the real DaemonSet controller, scheduler, garbage collector and
kwok's fake kubelets):

(a) two NVIDIADrivers for two node pools with different driver versions, each pool on two RHCOS
    versions -> four DaemonSets `nvidia-gpu-driver-<pool>-<rhcos>`, owned by their NVIDIADriver,
    each with its pool's image and the version's Driver Toolkit image; every node runs exactly
    one driver pod (sampled all along), and `-lapp=nvidia-driver-daemonset` lists them all;
    each NVIDIADriver's status is `ready` and names its nodes; `ocp-gpu render --live` prints
    the four as applied (the operator's applied hash matches: `[unchanged]`), owned by their
    NVIDIADriver, nothing to delete;
(b) the seed's upgrade flow per NVIDIADriver: a version change on one NVIDIADriver rolls its
    nodes through the upgrade states to `upgrade-done` on the new image, while the other pool's
    driver pods are never restarted; the mode's upgrade selector (app.kubernetes.io/component)
    finds one driver pod on every node;
(c) a third NVIDIADriver whose nodeSelector overlaps the first -> `ConflictingNodeSelector` on
    both (naming both and the nodes) and an Event; no DaemonSet for it, nothing running deleted;
(d) bad input (an invalid version) -> `InvalidSpec` naming `spec.version` and an Event; its
    DaemonSets and pods untouched;
(e) hostile strings in every string field of an NVIDIADriver -> the API server or the operator
    refuses them by field, the operator stays up, the other pools are untouched;
(f) deleting an NVIDIADriver garbage-collects its DaemonSets;
(g) each NVIDIADriver's upgradePolicy over the ClusterPolicy's: a pool with autoUpgrade false keeps
    its outdated driver pods and its labels, hands eviction back to k8s-driver-manager and
    `ocp-gpu status` names it; a pool with maxParallelUpgrades 1 never has two nodes upgrading
    under a ClusterPolicy that allows any number; a bad value is InvalidSpec naming
    spec.upgradePolicy.<field> and the fix, plus an Event, and changes nothing that runs; the
    paused pool resumes under the rules it inherits while the other is held.
"""

from __future__ import annotations

import collections
import copy
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.planning.upgrades import pod_selection
from ocp_gpu_harness import crds, fuzzing, polling
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    UPGRADE_S,
    BackgroundSampler,
    UpgradeStateWatch,
    condition,
    kubectl,
    status_json,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e

CRD = Path(__file__).resolve().parents[2] / "ocp_gpu" / "crds" / "nvidiadrivers.nvidia.com.yaml"
GROUP, VERSION, PLURAL = "nvidia.com", "v1alpha1", "nvidiadrivers"
V1 = "416.94.202407030122-0"
V2 = "417.94.202410090854-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
TAGS = {V1: DTK + "1" * 64, V2: DTK + "2" * 64}
POOL_LABEL = "example.com/gpu-pool"
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
# NB: --tags: the operator under test runs with the release's images by tag (harness/operating.py
# passes releases.RELEASE_IMAGES), and render must use the same env to find its DaemonSets unchanged.
RENDER = (sys.executable, "-m", "ocp_gpu.cli", "render", "--live", "--tags")
SEED_STATES = {"cordon-required", "pod-restart-required", "upgrade-done"}


@pytest.fixture(scope="session")
def nvidiadriver_crd(control_plane: LocalControlPlane) -> None:
    kubectl(control_plane, "apply", "--server-side", "-f", str(CRD))
    with control_plane.api_client() as api:
        crds.wait_until_served(api, [f"{PLURAL}.{GROUP}"])


@pytest.fixture
def nvidia_drivers(kube: client.ApiClient, nvidiadriver_crd: None) -> Iterator[Callable[..., dict[str, Any]]]:
    api = client.CustomObjectsApi(kube)
    made: list[str] = []

    def create(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NVIDIADriver",
            "metadata": {"name": name},
            "spec": spec,
        }
        made.append(name)
        obj: dict[str, Any] = api.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
        return obj

    yield create
    for name in made:
        try:
            api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.exceptions.ApiException as error:
            if error.status != 404:
                raise


def read_driver(kube: client.ApiClient, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(kube).get_cluster_custom_object(
        GROUP, VERSION, PLURAL, name
    )
    return obj


def patch_driver(kube: client.ApiClient, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube).patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": spec})


def driver_daemonsets(kube: client.ApiClient, namespace: str) -> dict[str, Any]:
    found = client.AppsV1Api(kube).list_namespaced_daemon_set(
        namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    )
    return {ds.metadata.name: ds for ds in found.items}


def driver_pods(kube: client.ApiClient, namespace: str) -> list[Any]:
    return list(client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items)


def pods_per_node(kube: client.ApiClient, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = collections.Counter()
    for pod in driver_pods(kube, namespace):
        if pod.spec.node_name and not pod.metadata.deletion_timestamp:
            counts[pod.spec.node_name] += 1
    return dict(counts)


def ready_on(kube: client.ApiClient, namespace: str, nodes: list[str], image_tag: str) -> bool:
    ready = {
        pod.spec.node_name
        for pod in driver_pods(kube, namespace)
        if pod.spec.containers[0].image.endswith(f":{image_tag}")
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
        and not pod.metadata.deletion_timestamp
    }
    return set(nodes) <= ready


def upgrade_states(kube: client.ApiClient, nodes: list[str]) -> dict[str, str]:
    return {
        node.metadata.name: (node.metadata.labels or {}).get(labels.UPGRADE_STATE, "")
        for node in client.CoreV1Api(kube).list_node().items
        if node.metadata.name in nodes
    }


class Sampler(BackgroundSampler):
    """The most driver pods on one node at any moment."""

    def __init__(self, kube: client.ApiClient, namespace: str) -> None:
        super().__init__()
        self.kube, self.namespace = kube, namespace
        self.most_pods = 0

    def sample(self) -> None:
        self.most_pods = max(self.most_pods, *pods_per_node(self.kube, self.namespace).values(), 0)


def hostile_spec(schema: dict[str, Any], text: str, key: str) -> Any:
    """A value for `schema` with `text` in every free string (cut to maxLength), `key` in every map."""
    if "enum" in schema or "pattern" in schema or schema.get("x-kubernetes-int-or-string"):
        # a closed set or a format the API server checks itself: not a free string
        return None
    if schema.get("type") == "integer":
        # a plain number where one is required (a preference's weight)
        return max(1, int(schema.get("minimum", 1)))
    if schema.get("type") == "string":
        return text[: int(schema.get("maxLength", len(text)))]
    if schema.get("type") == "array":
        item = hostile_spec(schema["items"], text, key)
        return None if item is None else [item]
    if isinstance(schema.get("additionalProperties"), dict):
        value = hostile_spec(schema["additionalProperties"], text, key)
        return None if value is None else {key: value}
    if schema.get("type") == "object":
        found = {name: hostile_spec(sub, text, key) for name, sub in (schema.get("properties") or {}).items()}
        return {name: value for name, value in found.items() if value is not None} or None
    return None


@pytest.mark.timeout(600)
def test_per_pool_drivers_conflicts_bad_input_upgrades_and_gc(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    apply_policy: Callable[..., dict[str, Any]],
    nvidia_drivers: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    pools: dict[str, list[str]] = {}
    made = []
    for pool in ("a", "b"):
        pools[pool] = [unique_name(f"pool-{pool}") for _ in range(2)]
        made += [
            fake_nodes.gpu_node(name, rhcos=rhcos, extra_labels={POOL_LABEL: pool})
            for name, rhcos in zip(pools[pool], (V1, V2), strict=True)
        ]
    # (e)'s pool: one node of its own
    hostile_node = unique_name("pool-h")
    made.append(fake_nodes.gpu_node(hostile_node, rhcos=V1, extra_labels={POOL_LABEL: "h"}))
    fake_nodes.create_nodes(kube, made)
    every = [*pools["a"], *pools["b"]]
    try:
        apply_policy(
            spec={
                "driver": {
                    "useNvidiaDriverCRD": True,
                    "upgradePolicy": {"maxParallelUpgrades": 1, "maxUnavailable": "100%"},
                }
            }
        )
        nvidia_drivers("pool-a", {"version": "550.90.07", "nodeSelector": {POOL_LABEL: "a"}})
        nvidia_drivers("pool-b", {"version": "570.124.06", "nodeSelector": {POOL_LABEL: "b"}})
        start_operator()
        _per_pool_daemonsets(kube, namespace, control_plane, pools, every)
    finally:
        fake_nodes.delete_nodes(kube, [node["metadata"]["name"] for node in made])


def _per_pool_daemonsets(
    kube: client.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    pools: dict[str, list[str]],
    every: list[str],
) -> None:
    names = {f"nvidia-gpu-driver-pool-{pool}-{rhcos}": (pool, rhcos) for pool in "ab" for rhcos in (V1, V2)}
    with Sampler(kube, namespace) as sampler, UpgradeStateWatch(kube, every) as states_seen:
        # (a) four DaemonSets, one driver pod per node
        wait_for(
            lambda: ready_on(kube, namespace, pools["a"], "550.90.07-rhcos4.16"), READY_S, what="pool a ready"
        )
        wait_for(
            lambda: ready_on(kube, namespace, pools["b"], "570.124.06-rhcos4.16"), STEP_S, what="pool b ready"
        )
        daemonsets = driver_daemonsets(kube, namespace)
        assert set(daemonsets) == set(names)
        for name, (pool, rhcos) in names.items():
            ds = daemonsets[name]
            (owner,) = ds.metadata.owner_references
            assert (owner.kind, owner.name) == ("NVIDIADriver", f"pool-{pool}")
            assert ds.metadata.labels[labels.COMPONENT] == labels.DRIVER_COMPONENT
            assert ds.spec.template.spec.node_selector[labels.NVIDIA_DRIVER_OWNER] == f"pool-{pool}"
            containers = {c.name: c.image for c in ds.spec.template.spec.containers}
            assert containers["openshift-driver-toolkit-ctr"] == TAGS[rhcos]
            version = "550.90.07" if pool == "a" else "570.124.06"
            assert containers["nvidia-driver-ctr"].endswith(f":{version}-rhcos4.16")
        assert pods_per_node(kube, namespace) == dict.fromkeys(every, 1)
        listed = kubectl(
            control_plane, "get", "pods", "-n", namespace, f"-l{DRIVER_PODS}", "-o", "name"
        ).stdout
        assert len(listed.split()) == 4
        for pool in "ab":
            wait_for(
                lambda pool=pool: read_driver(kube, f"pool-{pool}").get("status", {}).get("state") == "ready",
                REACT_S,
                what=f"pool-{pool} ready",
            )
            assert sorted(read_driver(kube, f"pool-{pool}")["status"]["nodes"]) == sorted(pools[pool])
        # `ocp-gpu render --live` prints the pools' DaemonSets exactly as the operator applied them:
        # each one's applied hash (the operator's own change test) matches, nothing to delete.
        rendered = _render_live(control_plane, namespace)
        assert rendered.returncode == 0, rendered.stderr
        for name in names:
            (line,) = [row for row in rendered.stderr.splitlines() if row.strip().startswith(f"{name}:")]
            assert line.endswith("[unchanged]"), line
        assert "would delete: nothing" in rendered.stderr
        printed = {
            m["metadata"]["name"]: m
            for m in yaml.safe_load_all(rendered.stdout)
            if m and m["kind"] == "DaemonSet" and m["metadata"]["name"] in names
        }
        assert set(printed) == set(names)
        for name, (pool, _) in names.items():
            (owner,) = printed[name]["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"]) == ("NVIDIADriver", f"pool-{pool}")
            assert owner["uid"] == daemonsets[name].metadata.owner_references[0].uid

        # (b) the seed's upgrade flow on pool a only
        wait_for(
            lambda: set(upgrade_states(kube, every).values()) == {"upgrade-done"}, STEP_S, what="upgrade-done"
        )
        untouched = {p.metadata.uid for p in driver_pods(kube, namespace) if p.spec.node_name in pools["b"]}
        states_seen.forget()
        patch_driver(kube, "pool-a", {"version": "510.85.02"})
        wait_for(
            lambda: (
                ready_on(kube, namespace, pools["a"], "510.85.02-rhcos4.16")
                and set(upgrade_states(kube, pools["a"]).values()) == {"upgrade-done"}
            ),
            UPGRADE_S,
            what="pool a upgraded",
        )
        # the seed's states, as its `kubectl get events ... | grep GPUDriverUpgrade` shows them
        events = [
            (e.involved_object.name, e.message)
            for e in client.CoreV1Api(kube).list_namespaced_event("default").items
            if e.reason == "GPUDriverUpgrade"
        ]
        for node in pools["a"]:
            assert states_seen.seen_by_node[node] - {"upgrade-done"}, f"{node} never left upgrade-done"
            for state in SEED_STATES:
                assert (node, f"Successfully updated node state label to [{state}]") in events, (node, state)
        for node in pools["b"]:
            assert states_seen.seen_by_node[node] <= {"upgrade-done"}, states_seen.seen_by_node[node]
            assert (node, "Successfully updated node state label to [cordon-required]") not in events, node
        assert {
            p.metadata.uid for p in driver_pods(kube, namespace) if p.spec.node_name in pools["b"]
        } == untouched
        # the upgrade's selector in this mode (the component, as NVIDIA's) finds every node's driver pod
        selector = pod_selection.driver_pod_selector(True)
        by_component = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=selector).items
        live = [p.spec.node_name or "<unbound>" for p in by_component if not p.metadata.deletion_timestamp]
        assert sorted(live) == sorted(every)

        # (c) an overlapping, newer NVIDIADriver: reported on both, nothing moves
        running = {p.metadata.uid for p in driver_pods(kube, namespace)}
        client.CustomObjectsApi(kube).create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "NVIDIADriver",
                "metadata": {"name": "pool-c"},
                "spec": {"version": "535.183.01", "nodeSelector": {POOL_LABEL: "a"}},
            },
        )
        try:
            conflict = wait_for(
                lambda: condition(read_driver(kube, "pool-c"), "ConflictingNodeSelector"),
                REACT_S,
                what="conflict",
            )
            for needle in ("pool-a", "pool-c", *pools["a"]):
                assert needle in conflict["message"]
            assert condition(read_driver(kube, "pool-a"), "ConflictingNodeSelector")["status"] == "True"
            wait_for_event(kube, "ConflictingNodeSelector", "pool-c")
            assert not any("pool-c" in name for name in driver_daemonsets(kube, namespace))
            assert {p.metadata.uid for p in driver_pods(kube, namespace)} == running
        finally:
            client.CustomObjectsApi(kube).delete_cluster_custom_object(GROUP, VERSION, PLURAL, "pool-c")

        # (d) bad input: reported by field, nothing rewritten or deleted
        before = {name: ds.metadata.generation for name, ds in driver_daemonsets(kube, namespace).items()}
        patch_driver(kube, "pool-b", {"version": "not a version!"})
        error = wait_for(
            lambda: (c := condition(read_driver(kube, "pool-b"), "Error")).get("status") == "True" and c,
            REACT_S,
            what="InvalidSpec on pool-b",
        )
        assert error["reason"] == "InvalidSpec" and "spec.version" in error["message"]
        wait_for_event(kube, "InvalidNVIDIADriver", "spec.version")
        assert {
            name: ds.metadata.generation for name, ds in driver_daemonsets(kube, namespace).items()
        } == before
        assert {p.metadata.uid for p in driver_pods(kube, namespace)} == running
        patch_driver(kube, "pool-b", {"version": "570.124.06"})

        # (e) hostile strings in every string field: refused by field, nothing else moves
        _hostile_strings(kube, namespace, running)
    assert sampler.most_pods == 1, "a node ran two driver pods"

    # (f) deleting an NVIDIADriver collects its DaemonSets
    client.CustomObjectsApi(kube).delete_cluster_custom_object(GROUP, VERSION, PLURAL, "pool-b")
    # NB: the end state, not the first moment without pool-b: a pass that ran before the
    # operator's NVIDIADriver watch delivered the deletion may apply a pool-b DaemonSet once more,
    # owned by the deleted NVIDIADriver, and the garbage collector removes it again (seen under load).
    pool_a = {name for name, (pool, _) in names.items() if pool == "a"}
    wait_for(
        lambda: set(driver_daemonsets(kube, namespace)) == pool_a,
        STEP_S,
        what="pool-b's DaemonSets garbage-collected, pool-a's kept",
    )


def _render_live(control_plane: LocalControlPlane, namespace: str) -> subprocess.CompletedProcess[str]:
    """`ocp-gpu render --live` as an admin runs it, in its own process."""
    kubeconfig = control_plane.make_kubeconfig("render-user", ["system:masters"])
    return subprocess.run(
        [*RENDER, "--kubeconfig", str(kubeconfig), "--namespace", namespace],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _hostile_strings(kube: client.ApiClient, namespace: str, running: set[str]) -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]["spec"]
    api = client.CustomObjectsApi(kube)
    cases = [s for s in fuzzing.HOSTILE_STRINGS if len(s) < 200][::5]
    keys = fuzzing.HOSTILE_KEYS
    refused_by_api = 0
    # per case the Ready reason the operator gave: which hostile input reached the renderer
    outcomes: dict[str, str] = {}
    for index, text in enumerate(cases):
        spec = hostile_spec(copy.deepcopy(schema), text, keys[index % len(keys)])
        # its own pool, so the hostile strings reach the renderer where the model lets them
        spec["nodeSelector"] = {POOL_LABEL: "h"}
        spec.pop("upgradePolicy", None)
        if index % 2:
            # every other case: images and named objects valid, so the rest reaches the renderer
            spec |= {"repository": "nvcr.io/nvidia", "image": "driver", "version": "550.90.07"}
            spec["manager"] = {}
            for key in (
                "gds",
                "gdrcopy",
                "repoConfig",
                "certConfig",
                "kernelModuleConfig",
                "licensingConfig",
            ):
                spec.pop(key, None)
            spec.pop("secretEnv", None)
        name = f"hostile-{index}"
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NVIDIADriver",
            "metadata": {"name": name},
            "spec": spec,
        }
        try:
            api.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
        except client.exceptions.ApiException as error:
            # the schema refuses it (a pattern, a list-map key, a quantity), naming the field
            assert error.status == 422 and "spec." in (error.body or ""), error.body
            refused_by_api += 1
            continue
        try:
            status = wait_for(
                lambda name=name: (
                    (s := read_driver(kube, name).get("status") or {}).get("observedGeneration") and s
                ),
                REACT_S,
                what=f"a status on {name} ({text!r})",
            )
            ready = condition({"status": status}, "Ready")
            outcomes[text] = f"{status['state']}/{ready['reason']}"
            if status["state"] != "ready":
                # refused by the operator: it names the field at fault (or waits for its pods)
                assert ready["reason"] in ("InvalidSpec", "DriverNotReady", "ApplyFailed"), ready
                if ready["reason"] == "InvalidSpec":
                    assert "spec." in ready["message"] and "fix:" in ready["message"]
        finally:
            api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            wait_for(
                lambda name=name: not any(name in ds for ds in driver_daemonsets(kube, namespace)),
                REACT_S,
                what=f"{name}'s DaemonSets gone",
            )
        # the other pools' driver pods never moved
        assert running <= {p.metadata.uid for p in driver_pods(kube, namespace)}
    assert refused_by_api < len(cases), "every hostile case was refused by the API: the operator saw none"
    print("hostile NVIDIADriver outcomes:", outcomes)
    # free-text fields take any string: rendered verbatim (no template or YAML injection), applied
    text = "{{ namespace }}\n---\nkind: Pod ${HOME} !!python/object {a: 1}"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NVIDIADriver",
        "metadata": {"name": "free-text"},
        "spec": {
            "nodeSelector": {POOL_LABEL: "h"},
            "version": "550.90.07",
            "env": [{"name": "HOSTILE", "value": text}],
            "args": [text],
            "annotations": {"example.com/note": text},
        },
    }
    api.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    try:
        daemonset = wait_for(
            lambda: next(
                (ds for name, ds in driver_daemonsets(kube, namespace).items() if "free-text" in name), None
            ),
            REACT_S,
            what="the free-text pool's DaemonSet",
        )
        driver = next(c for c in daemonset.spec.template.spec.containers if c.name == "nvidia-driver-ctr")
        assert {e.name: e.value for e in driver.env}["HOSTILE"] == text
        assert text in (driver.args or [])
        assert daemonset.spec.template.metadata.annotations["example.com/note"] == text
    finally:
        api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "free-text")
        wait_for(
            lambda: not any("free-text" in ds for ds in driver_daemonsets(kube, namespace)),
            REACT_S,
            what="the free-text pool's DaemonSet gone",
        )


def _annotated(kube: client.ApiClient, nodes: list[str]) -> set[str]:
    """The nodes that carry the upgrade controller's eviction annotation."""
    return {
        node.metadata.name
        for node in client.CoreV1Api(kube).list_node().items
        if node.metadata.name in nodes
        and (node.metadata.annotations or {}).get(labels.UPGRADE_ENABLED_ANNOTATION) == "true"
    }


def _outdated(kube: client.ApiClient, namespace: str, pool: str) -> bool:
    """The pool's driver DaemonSets have pods that do not run their current template."""
    return any(
        (ds.status.updated_number_scheduled or 0) < (ds.status.desired_number_scheduled or 0)
        for name, ds in driver_daemonsets(kube, namespace).items()
        if name.startswith(f"nvidia-gpu-driver-{pool}-")
    )


def _runs(kube: client.ApiClient, namespace: str, nodes: list[str], version: str) -> bool:
    """Every one of `nodes` has a Ready driver pod of `version` (whatever the OS suffix of its tag)."""
    ready = {
        pod.spec.node_name
        for pod in driver_pods(kube, namespace)
        if f":{version}-" in pod.spec.containers[0].image
        and any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())
        and not pod.metadata.deletion_timestamp
    }
    return set(nodes) <= ready


def _wait_ready(
    kube: client.ApiClient, namespace: str, nodes: list[str], version: str, timeout: float, what: str
) -> None:
    """`_runs`, waited for; a timeout says what each node's driver pods are."""
    try:
        wait_for(lambda: _runs(kube, namespace, nodes, version), timeout, what=what)
    except polling.WaitTimeout as error:
        seen = [
            (
                pod.spec.node_name,
                pod.spec.containers[0].image,
                [f"{c.type}={c.status}" for c in pod.status.conditions or ()],
            )
            for pod in driver_pods(kube, namespace)
            if pod.spec.node_name in nodes
        ]
        raise AssertionError(f"{error}; the driver pods: {seen}") from None


@pytest.mark.timeout(900)
def test_each_pool_upgrades_under_its_own_upgrade_policy(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    control_plane: LocalControlPlane,
    apply_policy: Callable[..., dict[str, Any]],
    nvidia_drivers: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    """(g) each NVIDIADriver's upgradePolicy over the ClusterPolicy's: pool-p pauses itself (its
    outdated driver pods stay, `ocp-gpu status` says why), pool-s upgrades one node at a time while
    the ClusterPolicy allows any number; a bad value is named under spec.upgradePolicy and stops
    nothing that runs; pool-p resumes under the ClusterPolicy's rules it inherits."""
    openshift_emulation.set_driver_toolkit_tags(openshift, TAGS)
    paused = [unique_name("pool-p") for _ in range(2)]
    serial = [unique_name("pool-s") for _ in range(3)]
    made = [fake_nodes.gpu_node(name, rhcos=V1, extra_labels={POOL_LABEL: "p"}) for name in paused]
    made += [fake_nodes.gpu_node(name, rhcos=V1, extra_labels={POOL_LABEL: "s"}) for name in serial]
    fake_nodes.create_nodes(kube, made)
    every = [*paused, *serial]
    kubeconfig = control_plane.make_kubeconfig("status-user", ["system:masters"])
    try:
        # The ClusterPolicy's rules: no parallel limit; pool-s sets 1 for itself, pool-p sets nothing.
        apply_policy(
            spec={
                "driver": {
                    "useNvidiaDriverCRD": True,
                    "upgradePolicy": {"maxParallelUpgrades": 0, "maxUnavailable": "100%"},
                }
            }
        )
        nvidia_drivers("pool-p", {"version": "550.90.07", "nodeSelector": {POOL_LABEL: "p"}})
        nvidia_drivers(
            "pool-s",
            {
                "version": "550.90.07",
                "nodeSelector": {POOL_LABEL: "s"},
                "upgradePolicy": {"maxParallelUpgrades": 1},
            },
        )
        proc = start_operator()
        _wait_ready(kube, namespace, every, "550.90.07", READY_S, "every driver ready")
        wait_for(
            lambda: set(upgrade_states(kube, every).values()) == {"upgrade-done"}, STEP_S, what="upgrade-done"
        )
        assert _annotated(kube, every) == set(every)

        # pool-p pauses itself: eviction goes back to k8s-driver-manager on its nodes only
        patch_driver(kube, "pool-p", {"upgradePolicy": {"autoUpgrade": False}})
        wait_for(
            lambda: _annotated(kube, every) == set(serial), REACT_S, what="pool-p's nodes hand eviction back"
        )
        kept = {p.metadata.uid for p in driver_pods(kube, namespace) if p.spec.node_name in paused}
        with (
            UpgradeStateWatch(kube, serial) as serial_seen,
            UpgradeStateWatch(kube, paused) as paused_seen,
        ):
            patch_driver(kube, "pool-p", {"version": "510.85.02"})
            patch_driver(kube, "pool-s", {"version": "510.85.02"})
            wait_for(
                lambda: (
                    _runs(kube, namespace, serial, "510.85.02")
                    and set(upgrade_states(kube, serial).values()) == {"upgrade-done"}
                ),
                UPGRADE_S,
                what="pool-s upgraded",
            )
        # pool-s: never two of its nodes upgrading at once, though the ClusterPolicy allows any number
        assert serial_seen.max_in_flight == 1, serial_seen.seen_by_node
        for node in serial:
            assert "cordon-required" in serial_seen.seen_by_node[node], serial_seen.seen_by_node[node]
        # pool-p: its outdated driver pods stay, its labels never moved, its DaemonSet says it is behind
        assert paused_seen.seen <= {"upgrade-done"}, paused_seen.seen_by_node
        assert {p.metadata.uid for p in driver_pods(kube, namespace) if p.spec.node_name in paused} == kept
        assert _runs(kube, namespace, paused, "550.90.07")
        wait_for(lambda: _outdated(kube, namespace, "pool-p"), REACT_S, what="pool-p's DaemonSet outdated")
        # and its status says so: the field, and the DaemonSet whose pods stay outdated
        paused_condition = wait_for(
            lambda: (
                "outdated driver pods stay"
                in condition(read_driver(kube, "pool-p"), "UpgradesPaused").get("message", "")
                and condition(read_driver(kube, "pool-p"), "UpgradesPaused")
            ),
            REACT_S,
            what="UpgradesPaused on pool-p",
        )
        assert paused_condition["status"] == "True", paused_condition
        assert paused_condition["message"].startswith("spec.upgradePolicy.autoUpgrade is false"), (
            paused_condition
        )
        assert "nvidia-gpu-driver-pool-p-" in paused_condition["message"], paused_condition
        assert condition(read_driver(kube, "pool-s"), "UpgradesPaused") == {}
        assert proc.metric("gpu_operator_auto_upgrade_enabled") == 1
        report = status_json(kubeconfig)
        rows = {row["node"]: row for row in report["nodes"]}
        for node in paused:
            assert rows[node]["next"] is None, rows[node]
            assert (
                rows[node]["waiting"]
                == "paused: NVIDIADriver pool-p sets spec.upgradePolicy.autoUpgrade false"
            )
        shown = {pool["name"]: pool for pool in report["nvidiaDrivers"]}
        assert shown["pool-p"]["upgradePolicy"]["autoUpgrade"] is False
        assert shown["pool-s"]["upgradePolicy"]["maxParallelUpgrades"] == 1
        # pool-p inherits the ClusterPolicy's maxUnavailable
        assert shown["pool-p"]["upgradePolicy"]["maxUnavailable"] == "100%"

        # bad input: named under the NVIDIADriver's field, with the fix; nothing running is touched
        running = {p.metadata.uid for p in driver_pods(kube, namespace)}
        generations = {
            name: ds.metadata.generation for name, ds in driver_daemonsets(kube, namespace).items()
        }
        patch_driver(kube, "pool-s", {"upgradePolicy": {"maxUnavailable": "0"}})
        error = wait_for(
            lambda: (c := condition(read_driver(kube, "pool-s"), "Error")).get("status") == "True" and c,
            REACT_S,
            what="InvalidSpec on pool-s",
        )
        assert error["reason"] == "InvalidSpec", error
        assert "spec.upgradePolicy.maxUnavailable" in error["message"] and "fix:" in error["message"], error
        wait_for_event(kube, "InvalidNVIDIADriver", "spec.upgradePolicy.maxUnavailable")
        assert {p.metadata.uid for p in driver_pods(kube, namespace)} == running
        assert {
            name: ds.metadata.generation for name, ds in driver_daemonsets(kube, namespace).items()
        } == generations

        # pool-p resumes under the ClusterPolicy's rules (both its nodes may go at once) while
        # pool-s is held: one pool's bad spec holds no other pool
        patch_driver(kube, "pool-p", {"upgradePolicy": {"autoUpgrade": True}})
        wait_for(
            lambda: (
                _runs(kube, namespace, paused, "510.85.02")
                and set(upgrade_states(kube, paused).values()) == {"upgrade-done"}
            ),
            UPGRADE_S,
            what="pool-p upgraded once resumed",
        )
        wait_for(
            lambda: condition(read_driver(kube, "pool-p"), "UpgradesPaused") == {},
            REACT_S,
            what="UpgradesPaused gone from pool-p",
        )
        assert set(upgrade_states(kube, serial).values()) == {"upgrade-done"}
    finally:
        fake_nodes.delete_nodes(kube, [node["metadata"]["name"] for node in made])
