"""The simulated node agent's pacing (ocp_gpu_harness/node_agent.py).

We test these aspects: the wait between passes follows the CPU a pass used, not its wall
time, and is bounded, so a pass that spent minutes waiting on a busy apiserver is followed
at once by the next one (at 1,000 nodes the wait was twice the wall time: ten silent
minutes while 239 validators stayed Pending); every request has a bounded timeout; the
validator waits for the operands its own init containers validate; a pod the apiserver left half
deleted (killed mid-deletion), still stored past its deletionTimestamp, is deleted again, by its
UID, as a kubelet would; with MPS sharing a plugin run (its pod and config) serves once it saw
the MPS daemon Ready, and keeps serving without it, as k8s-device-plugin v0.20.0 checks only at start.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu.rendering.operands import operand_catalog, validator
from ocp_gpu_harness import mirror, node_agent, real_node


@pytest.mark.parametrize(
    ("interval", "cpu_s", "expected"),
    [
        # A cheap pass: the configured interval.
        (0.5, 0.01, 0.5),
        # A pass that used 1.5 s of CPU: twice that, the agent's share of the cores kept to a third.
        (0.5, 1.5, 3.0),
        # A pass that used a minute of CPU (thousands of pods parsed): never more than the cap.
        (0.5, 60.0, node_agent.MAX_PASS_WAIT),
        # Even a long configured interval is capped: the cap is what keeps Pending pods from
        # waiting minutes.
        (30.0, 0.0, node_agent.MAX_PASS_WAIT),
    ],
)
def test_pass_wait(interval: float, cpu_s: float, expected: float) -> None:
    assert node_agent.pass_wait(interval, cpu_s) == pytest.approx(expected)


def test_a_long_pass_of_waiting_on_the_apiserver_is_followed_at_once() -> None:
    # The 1,000-node set-up's pass: ~6 minutes of wall time, a few seconds of CPU. The next
    # pass must come within the cap, not after twice the wall time.
    assert node_agent.pass_wait(0.5, 3.0) <= node_agent.MAX_PASS_WAIT
    assert node_agent.MAX_PASS_WAIT <= 10.0


def test_every_request_has_a_timeout() -> None:
    connect, read = node_agent.REQUEST_TIMEOUT
    assert 0 < connect <= 30
    assert 0 < read <= 300


def _validator_pod(*containers: str) -> dict[str, object]:
    return {"spec": {"initContainers": [{"name": name} for name in containers]}}


def test_the_validator_waits_for_what_its_init_containers_validate() -> None:
    every = _validator_pod("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
    assert node_agent.validated_operands(every) == (
        operand_catalog.CONTAINER_TOOLKIT,
        operand_catalog.DEVICE_PLUGIN,
    )
    no_plugin = _validator_pod("driver-validation", "toolkit-validation", "cuda-validation")
    assert node_agent.validated_operands(no_plugin) == (operand_catalog.CONTAINER_TOOLKIT,)
    assert node_agent.validated_operands(_validator_pod("driver-validation", "cuda-validation")) == ()
    assert node_agent.validated_operands({"spec": {}}) == ()


def test_validated_containers_are_the_ones_the_operator_renders() -> None:
    """The agent's container names must match rendering/operands/validator.py, or it would wait for
    nothing."""
    rendered = {f"{name}-validation" for name in validator.VALIDATIONS}
    assert set(node_agent.VALIDATED_CONTAINERS) <= rendered


def _full_pod() -> dict[str, object]:
    """A validator-like pod as the apiserver returns it (the parts a pass reads, and some it does not)."""
    return {
        "metadata": {
            "name": "nvidia-operator-validator-x",
            "namespace": "gpu-operator",
            "uid": "u-1",
            "resourceVersion": "42",
            "labels": {"app": "nvidia-operator-validator"},
            "annotations": {"ocp-gpu.harness/pod-fate": "ready"},
            "managedFields": [{"manager": "kube-controller-manager"}],
            "ownerReferences": [{"kind": "DaemonSet"}],
        },
        "spec": {
            "nodeName": "gpu-1",
            "initContainers": [{"name": "toolkit-validation", "image": "x", "command": ["sh"]}],
            "volumes": [
                {"name": "available-configs", "configMap": {"name": "plugin-config"}},
                {"name": "host", "hostPath": {"path": "/run"}},
            ],
            "containers": [
                {"name": "main", "image": "y", "env": [{"name": "MIG_STRATEGY", "value": "single"}]},
                {"name": "config-manager", "env": [{"name": "DEFAULT_CONFIG", "value": "any"}]},
            ],
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "ready": True}],
        },
    }


def test_a_trimmed_pod_reads_as_the_whole_pod() -> None:
    """The mirror keeps pods trimmed: every reader of a pass must see what it saw in the whole pod."""
    full = _full_pod()
    trimmed = node_agent._trim_pod(full)
    for reader in (
        node_agent._ready,
        node_agent._app,
        node_agent.validated_operands,
        node_agent._version,
        lambda p: node_agent._env_of(p, "MIG_STRATEGY"),
        lambda p: node_agent._volume_config_map(p, "available-configs"),
        lambda p: node_agent._volume_config_map(p, "host"),
    ):
        assert reader(trimmed) == reader(full)
    assert trimmed["spec"]["containers"][1]["env"] == [{"name": "DEFAULT_CONFIG", "value": "any"}]
    # What no pass reads is dropped (the bulk of a pod's JSON at 15,000 pods).
    assert "managedFields" not in trimmed["metadata"]
    assert "tolerations" not in trimmed["spec"]
    assert "containerStatuses" not in trimmed["status"]
    # Not Ready, and being deleted: both still read so.
    full["status"]["conditions"][1]["status"] = "False"  # type: ignore[index]
    assert node_agent._ready(node_agent._trim_pod(full)) is False
    full["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"  # type: ignore[index]
    assert node_agent._trim_pod(full)["metadata"]["deletionTimestamp"]
    # Overdue (kwok missed it), or waiting for a finalizer: read so from the trimmed pod too.
    later = 1_800_000_000.0
    assert node_agent.deletion_overdue(node_agent._trim_pod(full), later) is True
    full["metadata"]["finalizers"] = ["example.com/keep"]  # type: ignore[index]
    assert node_agent.deletion_overdue(node_agent._trim_pod(full), later) is False


def test_a_trimmed_node_and_daemonset_keep_what_a_pass_reads() -> None:
    node = {
        "metadata": {
            "name": "gpu-1",
            "resourceVersion": "7",
            "labels": {"a": "b"},
            "annotations": {"c": "d"},
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "images": [{"names": ["x"]}]},
    }
    assert node_agent._trim_node(node) == {
        "metadata": {
            "name": "gpu-1",
            "resourceVersion": "7",
            "labels": {"a": "b"},
            "annotations": {"c": "d"},
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    daemonset = {
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": {"metadata": {"labels": {"app": "nvidia-dcgm"}}, "spec": {"containers": []}}},
    }
    assert node_agent._daemonset_app(node_agent._trim_daemonset(daemonset)) == "nvidia-dcgm"


def test_an_object_written_is_left_alone_until_the_watch_brings_the_write_back() -> None:
    """Acting again on the copy from before our own write would write twice (a second validator
    deletion after a MIG change): until its resourceVersion moves, or WRITE_SEEN_TIMEOUT passes."""
    agent = node_agent.NodeAgent(ApiClient())
    agent._written[("node", "gpu-1")] = ("5", time.monotonic())
    assert agent._unseen("node", "gpu-1", "5")
    assert agent._unseen("node", "gpu-1", "5")  # still the old copy
    assert not agent._unseen("node", "gpu-1", "6")  # our write came back
    assert not agent._unseen("node", "gpu-1", "5")  # and it is forgotten
    agent._written[("pod", "u-1")] = ("5", time.monotonic() - node_agent.WRITE_SEEN_TIMEOUT - 1)
    assert not agent._unseen("pod", "u-1", "5")  # never seen back: acted on again after the timeout
    assert not agent._unseen("pod", "u-2", "1")  # never written


def test_a_change_outside_what_the_mirror_keeps_is_no_change() -> None:
    """kwok's node heartbeats change only what a trimmed node drops: no pass for them."""
    node = {
        "metadata": {"name": "gpu-1", "resourceVersion": "7", "labels": {"a": "b"}},
        "status": {"allocatable": {}, "conditions": [{"type": "Ready", "lastHeartbeatTime": "t1"}]},
    }
    beat = {**node, "metadata": {**node["metadata"], "resourceVersion": "8"}, "status": {"allocatable": {}}}
    assert mirror._same_but_version(node_agent._trim_node(node), node_agent._trim_node(beat))
    labelled = {**beat, "metadata": {**beat["metadata"], "labels": {"a": "c"}}}
    assert not mirror._same_but_version(node_agent._trim_node(node), node_agent._trim_node(labelled))
    assert not mirror._same_but_version(None, node_agent._trim_node(node))


# 2026-11-28T08:01:18Z, the stuck driver pod's deletionTimestamp (issue 30), in epoch seconds.
DELETED_AT = 1795852878.0


def _terminating(
    grace: int, node: str = "gpu-1", finalizers: tuple[str, ...] = (), stamp: str = "2026-11-28T08:01:18Z"
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "n",
            "uid": "u-1",
            "resourceVersion": "9",
            "deletionTimestamp": stamp,
            "deletionGracePeriodSeconds": grace,
            "finalizers": list(finalizers),
        },
        "spec": {"nodeName": node},
    }


def test_a_deletion_is_overdue_past_its_deletion_timestamp_on_a_kwok_node() -> None:
    """kwok confirms a deletion at once and never again: a pod still stored past the end of its grace
    period is one it missed (an apiserver killed mid-deletion); a kubelet would delete it."""
    assert node_agent.deletion_overdue(_terminating(0), DELETED_AT)
    assert node_agent.deletion_overdue(_terminating(0), DELETED_AT + 60)
    assert not node_agent.deletion_overdue(_terminating(0), DELETED_AT - 1)
    # A graceful deletion is kwok's until its grace period ends (the deletionTimestamp).
    assert not node_agent.deletion_overdue(_terminating(30, stamp="2026-11-28T08:01:48Z"), DELETED_AT)
    assert node_agent.deletion_overdue(_terminating(30, stamp="2026-11-28T08:01:48Z"), DELETED_AT + 30)
    # Waiting for its finalizers: the apiserver removes it once they are gone.
    assert not node_agent.deletion_overdue(_terminating(0, finalizers=("example.com/keep",)), DELETED_AT)
    # Not bound (kube-controller-manager's pod GC removes it) or on the real node (its kubelet does).
    assert not node_agent.deletion_overdue(_terminating(0, node=""), DELETED_AT)
    assert not node_agent.deletion_overdue(_terminating(0, node=real_node.NODE_NAME), DELETED_AT)
    # Not being deleted at all.
    running = _terminating(0)
    del running["metadata"]["deletionTimestamp"]
    assert not node_agent.deletion_overdue(running, DELETED_AT)


class _Deletes:
    """CoreV1Api.delete_namespaced_pod as the agent calls it: records, answers with `status`."""

    def __init__(self, status: int = 200) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.status = status

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.status != 200:
            raise ApiException(status=self.status)
        return type("Answer", (), {"data": b"{}"})()


def test_an_overdue_deletion_is_finished_once_by_uid_after_a_while() -> None:
    agent = node_agent.NodeAgent(ApiClient())
    deletes = _Deletes()
    agent.core.delete_namespaced_pod = deletes  # type: ignore[method-assign]
    pod = _terminating(0)
    agent._finish_overdue_deletions([pod], now=100.0, wall=DELETED_AT)
    # kwok's confirmation (or the apiserver's own second step) comes within milliseconds: not
    # before OVERDUE_S.
    agent._finish_overdue_deletions([pod], now=100.0 + node_agent.OVERDUE_S - 0.1, wall=DELETED_AT + 4.9)
    assert deletes.calls == []
    agent._finish_overdue_deletions([pod], now=100.0 + node_agent.OVERDUE_S, wall=DELETED_AT + 5)
    ((args, kwargs),) = deletes.calls
    assert args == ("p", "n")
    # By UID: never a newer pod of the same name.
    assert kwargs["body"] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u-1"}}
    # Not again while the watch has not brought the deletion back.
    agent._finish_overdue_deletions([pod], now=102.0 + node_agent.OVERDUE_S, wall=DELETED_AT + 7)
    assert len(deletes.calls) == 1
    # Gone from the mirror: forgotten.
    agent._finish_overdue_deletions([], now=200.0, wall=DELETED_AT + 100)
    assert agent._overdue_since == {}


def test_a_graceful_deletion_in_its_grace_period_is_left_to_kwok() -> None:
    agent = node_agent.NodeAgent(ApiClient())
    deletes = _Deletes()
    agent.core.delete_namespaced_pod = deletes  # type: ignore[method-assign]
    pod = _terminating(30, stamp="2026-11-28T08:01:48Z")
    for second in range(0, 30, 5):
        agent._finish_overdue_deletions([pod], now=float(second), wall=DELETED_AT + second)
    assert deletes.calls == []


@pytest.mark.parametrize("status", [404, 409])
def test_an_overdue_pod_already_gone_or_replaced_is_no_error(status: int) -> None:
    agent = node_agent.NodeAgent(ApiClient())
    agent.core.delete_namespaced_pod = _Deletes(status)  # type: ignore[method-assign]
    agent._finish_overdue_deletions([_terminating(0)], now=0.0, wall=DELETED_AT)
    agent._finish_overdue_deletions([_terminating(0)], now=node_agent.OVERDUE_S, wall=DELETED_AT + 5)


# --- SIMULATION of the device plugin's start with MPS sharing ---------------------------------


def test_the_plugin_serves_with_mps_once_the_daemon_was_healthy_at_its_start() -> None:
    # Not yet started, daemon not Ready: nothing served (the real plugin retries every 30 s).
    assert node_agent.mps_started(None, "uid-1/abc", daemon_ready=False) is None
    # The daemon is Ready: this plugin run starts serving.
    assert node_agent.mps_started(None, "uid-1/abc", daemon_ready=True) == "uid-1/abc"
    # Started: the plugin never re-checks the daemon (k8s-device-plugin v0.20.0 server.go Start).
    assert node_agent.mps_started("uid-1/abc", "uid-1/abc", daemon_ready=False) == "uid-1/abc"
    # A new plugin pod, or the same pod restarted by a new config, checks again.
    assert node_agent.mps_started("uid-1/abc", "uid-2/abc", daemon_ready=False) is None
    assert node_agent.mps_started("uid-1/abc", "uid-1/def", daemon_ready=False) is None
    # No plugin with an MPS config on the node: no record.
    assert node_agent.mps_started("uid-1/abc", None, daemon_ready=True) is None


def test_a_plugin_instance_is_its_pod_and_its_config() -> None:
    pod = {"metadata": {"uid": "u"}}
    config = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    same = node_agent.plugin_instance(pod, dict(reversed(list(config.items()))))
    assert node_agent.plugin_instance(pod, config) == same
    assert same.startswith("u/")
    other = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    assert node_agent.plugin_instance(pod, other) != same
    assert node_agent.plugin_instance({"metadata": {"uid": "v"}}, config) != same


class _NodeWrites:
    """CoreV1Api.patch_node / patch_node_status as the agent calls them: the bodies, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, _name: str, body: dict[str, Any], **_kwargs: Any) -> Any:
        self.bodies.append(body)
        return type("Answer", (), {"data": b"{}"})()


MPS_CONFIG = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}


def _operand_pod(app: str, uid: str, *, ready: bool = True, mig_strategy: str = "single") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{app}-x", "namespace": "n", "uid": uid, "labels": {"app": app}},
        "spec": {
            "nodeName": "gpu-1",
            "volumes": [{"name": "available-configs", "configMap": {"name": "plugin-configs"}}],
            "containers": [{"name": "c", "env": [{"name": "MIG_STRATEGY", "value": mig_strategy}]}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _gpu_node(annotations: dict[str, str], node_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "gpu-1",
            "labels": node_labels or {},
            "annotations": {node_agent.SIMULATED_GPUS: "8", **annotations},
        },
        "status": {"allocatable": {}},
    }


def _agent_with(config: dict[str, Any]) -> tuple[node_agent.NodeAgent, _NodeWrites]:
    agent = node_agent.NodeAgent(ApiClient())
    writes = _NodeWrites()
    agent.core.patch_node = writes  # type: ignore[method-assign]
    agent.core.patch_node_status = writes  # type: ignore[method-assign]
    agent._plugin_config = lambda _pod, _labels: config  # type: ignore[method-assign]
    return agent, writes


def test_the_node_records_the_plugin_run_that_started_with_mps_and_advertises_for_it() -> None:
    agent, writes = _agent_with(MPS_CONFIG)
    plugin = _operand_pod(operand_catalog.DEVICE_PLUGIN.app, "p-1")
    daemon = _operand_pod(operand_catalog.MPS_CONTROL_DAEMON.app, "d-1")
    # The daemon not Ready yet: nothing advertised, nothing recorded.
    agent._node("gpu-1", _gpu_node({}), [plugin, {**daemon, "status": {"conditions": []}}])
    assert writes.bodies == []
    # Ready: 8 x 4 advertised, the run recorded.
    agent._node("gpu-1", _gpu_node({}), [plugin, daemon])
    started = node_agent.plugin_instance(plugin, MPS_CONFIG)
    assert {"metadata": {"annotations": {node_agent.MPS_STARTED: started}}} in writes.bodies
    assert {"status": {"capacity": {"nvidia.com/gpu": "32"}, "allocatable": {"nvidia.com/gpu": "32"}}} in (
        writes.bodies
    )
    # The daemon gone, the same run: still 32 (the node as the agent wrote it), nothing written.
    writes.bodies.clear()
    node = _gpu_node({node_agent.MPS_STARTED: started})
    node["status"]["allocatable"] = {"nvidia.com/gpu": "32"}
    agent._node("gpu-1", node, [plugin])
    assert writes.bodies == []
    # A new plugin pod without the daemon: the record goes, the GPUs with it.
    agent._node("gpu-1", node, [_operand_pod(operand_catalog.DEVICE_PLUGIN.app, "p-2")])
    assert {"metadata": {"annotations": {node_agent.MPS_STARTED: None}}} in writes.bodies
    assert {"status": {"capacity": {"nvidia.com/gpu": None}, "allocatable": {"nvidia.com/gpu": None}}} in (
        writes.bodies
    )


def test_gfd_with_mps_on_mig_gpus_fails_and_its_labels_go() -> None:
    """k8s-device-plugin v0.20.0 internal/lm/nvml.go isMPSCapable: an error on a MIG-enabled GPU;
    GFD's run loop returns, its deferred cleanup removes the features file, NFD drops the labels."""
    agent, writes = _agent_with(MPS_CONFIG)
    gfd = _operand_pod(operand_catalog.GPU_FEATURE_DISCOVERY.app, "g-1")
    had = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "nvidia.com/mps.capable": "false"}
    node = _gpu_node({node_agent.MIG_DEVICES: '{"1g.10gb": 56}'}, had)
    agent._node("gpu-1", node, [gfd])
    assert {"metadata": {"labels": dict.fromkeys(had)}} in writes.bodies
    # Without MPS sharing, GFD labels the MIG devices (mps.capable=false).
    agent, writes = _agent_with({"version": "v1"})
    agent._node("gpu-1", node, [gfd])
    (labelled,) = [b["metadata"]["labels"] for b in writes.bodies if "labels" in b.get("metadata", {})]
    assert labelled["nvidia.com/mps.capable"] == "false"
    assert labelled["nvidia.com/gpu.count"] == "56"


# --- SIMULATION: an operand with no DaemonSet counts as on the host only once they settle ------


class _Opened(list[str]):
    """NodeAgent._open as a pass calls it: records the pod's name."""

    def __call__(self, pod: dict[str, Any]) -> None:
        self.append(pod["metadata"]["name"])


def _agent_holding(
    daemonsets: list[str], pods: list[tuple[str, str]]
) -> tuple[node_agent.NodeAgent, _Opened]:
    """An agent whose mirrors hold `daemonsets` (operand DaemonSet names, namespace n) and `pods`
    ((name, app) on gpu-1, not Ready), gpu-1 labelled to run every operand; its opened pods recorded."""
    agent = node_agent.NodeAgent(ApiClient())
    agent.daemonsets._items = {
        f"n/{name}": {
            "metadata": {"name": name, "namespace": "n", "resourceVersion": "1"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}}},
        }
        for name in daemonsets
    }
    agent.pods._items = {
        f"n/{name}": {
            "metadata": {
                "name": name,
                "namespace": "n",
                "uid": name,
                "resourceVersion": "1",
                "labels": {"app": app},
            },
            "spec": {"nodeName": "gpu-1"},
        }
        for name, app in pods
    }
    every_operand = {operand.deploy_label: "true" for operand in operand_catalog.OPERANDS}
    agent.nodes._items = {
        "gpu-1": {"metadata": {"name": "gpu-1", "resourceVersion": "1", "labels": every_operand}}
    }
    opened = _Opened()
    agent._open = opened  # type: ignore[method-assign]
    return agent, opened


def test_the_toolkit_waits_while_the_operator_may_still_apply_the_driver_daemonset() -> None:
    """The operator applies a pass's DaemonSets side by side: the toolkit's first, the driver's a
    moment later.  A pass between the two must not take the driver for a preinstalled one (the
    toolkit was Ready before the driver in a stress run of tests/e2e/test_stack.py)."""
    toolkit = operand_catalog.CONTAINER_TOOLKIT.daemonset
    agent, opened = _agent_holding([toolkit], [("toolkit-1", operand_catalog.CONTAINER_TOOLKIT.app)])
    agent.run_once()
    assert opened == []
    # No driver DaemonSet after DAEMONSETS_SETTLE_S: driver.enabled false, the host has one.
    agent._daemonsets_seen = {
        key: seen - node_agent.DAEMONSETS_SETTLE_S for key, seen in agent._daemonsets_seen.items()
    }
    agent.run_once()
    assert opened == ["toolkit-1"]


def test_the_toolkit_waits_for_a_driver_daemonset_that_came_for_a_ready_driver_pod() -> None:
    toolkit, driver = operand_catalog.CONTAINER_TOOLKIT.daemonset, operand_catalog.DRIVER.daemonset
    agent, opened = _agent_holding([toolkit, driver], [("toolkit-1", operand_catalog.CONTAINER_TOOLKIT.app)])
    agent._daemonsets_seen = {
        ("n", app): 0.0 for app in (operand_catalog.CONTAINER_TOOLKIT.app, operand_catalog.DRIVER.app)
    }
    agent.run_once()
    assert opened == []
