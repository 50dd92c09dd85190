"""The kwok stages the local control plane runs: kwok's own, plus pod fates.

kwok plays "stages" (status templates selected by jq expressions) on the objects it
manages; since v0.8 it ships none built in, so we pass kwok's own stage files from its
source tree (see `binaries.KWOK_STAGE_FILES`), with two changes and four additions:

- kwok's ``pod-ready`` would make any Pending pod Ready, which would undo an
  image-pull failure (a real one keeps the pod Pending). It is loaded with one extra
  selector: the pod has no `FATE_ANNOTATION`.
- kwok's ``pod-delete`` (the kubelet's confirmation of a graceful deletion) deletes by name,
  without the pod's UID, and also played on pods deleted with a grace period of 0, which the
  API server has already removed: under load its late delete removed a new pod of the same
  name (the validator re-creates its workload pod so). A kubelet confirms with the pod's UID;
  loaded with one extra selector, it leaves grace-0 deletions alone (`patched_pod_delete`; a
  grace-0 pod the API server did not remove, killed mid-deletion, is the node agent's:
  `node_agent.deletion_overdue`).
- ``pod-fate-crash-looping``, ``pod-fate-image-pull-failing`` and ``pod-fate-ready``
  turn a pod's `FATE_ANNOTATION` into the status a kubelet would report.
- ``pod-ready-again`` (`ready_again_stage`): a running pod the node lifecycle controller
  marked not Ready, while its node's Lease was late, is Ready again, as its kubelet would
  report it.
- ``pod-fate-succeeded`` and ``pod-fate-failed`` end a pod's containers (exit 0, or
  exit 1 with a termination message): a simulation of a run-once workload (the
  validator's vectorAdd pod) whose process ends, which kwok cannot know by itself
  (its own pod-complete stage only completes pods owned by a Job).

So a pod's fate is a pod annotation, played by kwok like everything else: it works on
a pod whose template carries it from the start (no window where the pod looks Ready)
and on a running pod (`nodes.set_pod_fate` patches the annotation). NB: a status
patched by hand would race with kwok, which patches status on every pod event; with
stages kwok is the only writer and converges whatever the order of events.

This module only renders YAML text; it does no I/O beyond reading kwok's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

# Pod annotation naming the fate kwok plays for that pod (absent: kwok's normal life).
FATE_ANNOTATION: Final = "ocp-gpu.harness/pod-fate"
# The fates, as annotation values.
FATE_READY: Final = "ready"
FATE_CRASH_LOOPING: Final = "crash-looping"
FATE_IMAGE_PULL_FAILING: Final = "image-pull-failing"
# A run-once pod whose containers exit 0 (phase Succeeded), or exit 1 (phase Failed).
FATE_SUCCEEDED: Final = "succeeded"
FATE_FAILED: Final = "failed"
FATES: Final = (FATE_READY, FATE_CRASH_LOOPING, FATE_IMAGE_PULL_FAILING, FATE_SUCCEEDED, FATE_FAILED)
# The termination message a "failed" pod's containers report.
FAILED_MESSAGE: Final = "simulated failure (ocp-gpu harness pod fate: failed)"

# The pods of NVIDIA's DRA kubelet plugin (manifests/state-dra-driver/0500_daemonset.yaml's app).
DRA_PLUGIN_APP: Final = "nvidia-dra-driver-kubelet-plugin"
# SIMULATION: the operand pods whose readiness waits for validation markers (node_agent.py).
GATED_APPS: Final = (
    "nvidia-container-toolkit-daemonset",
    "nvidia-operator-validator",
    "nvidia-device-plugin-daemonset",
    "nvidia-device-plugin-mps-control-daemon",
    "gpu-feature-discovery",
    "nvidia-dcgm",
    "nvidia-dcgm-exporter",
    "nvidia-mig-manager",
    DRA_PLUGIN_APP,
    # The VM passthrough stack's (vfio_devices.py): the VFIO manager starts at once.
    "nvidia-sandbox-validator",
    "nvidia-sandbox-device-plugin-daemonset",
    # The vGPU stack's (vgpu_devices.py): the vGPU manager starts at once, as the driver.
    "nvidia-vgpu-device-manager",
)

# The restart count a crash-looping container reports (a kubelet would keep counting).
CRASH_LOOP_RESTARTS: Final = 5

_FATE_KEY = f'.metadata.annotations["{FATE_ANNOTATION}"]'
_NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

# Pod IPs and host IPs as kwok's pod-ready computes them, but only when the pod has
# none yet. NB: kwok's PodIPsWith hands out a new IP on every call, and the status
# patch merges podIPs by IP, so a second play would leave two IPs, which the
# apiserver rejects ("may specify no more than one IP for each IP family").
_IPS_TEMPLATE = """
{{ if not .status.hostIP }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ end }}
{{ if not .status.podIP }}
{{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
{{ with $podIPs }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ end }}
{{ if not .status.startTime }}
startTime: {{ Now | Quote }}
{{ end }}
"""

_NOW = "{{ $now | Quote }}"


def _status(ready: bool, containers: str, phase: str, reason: str = "", message: str = "") -> str:
    """A pod status as a kubelet reports it: Initialized, then Ready and ContainersReady (alike,
    with `reason` and `message` when not ready), one status per container (`containers`: its
    lines after restartCount), the phase and the IPs."""
    value = '"True"' if ready else '"False"'
    detail = (f"\n  reason: {reason}" if reason else "") + (f'\n  message: "{message}"' if message else "")
    conditions = "".join(
        f"- lastTransitionTime: {_NOW}\n  status: {value}{detail}\n  type: {kind}\n"
        for kind in ("Ready", "ContainersReady")
    )
    flag = "true" if ready else "false"
    return (
        "\n{{ $now := Now }}\nconditions:\n"
        f'- lastTransitionTime: {_NOW}\n  status: "True"\n  type: Initialized\n'
        + conditions
        + "containerStatuses:\n{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n"
        f"  ready: {flag}\n  started: {flag}\n"
        + containers
        + "{{ end }}\n"
        + f"phase: {phase}\n"
        + _IPS_TEMPLATE
    )


# What a kubelet reports once every container runs and is ready (kwok's pod-ready,
# minus init containers and readiness gates, which a fate does not need).
_READY_TEMPLATE = _status(
    True, f"  restartCount: 0\n  state:\n    running:\n      startedAt: {_NOW}\n", "Running"
)

_NOT_READY = ("ContainersNotReady", "containers with unready status")

# What a kubelet reports for a container that keeps exiting: phase stays Running,
# Ready is False, the container waits in CrashLoopBackOff after a terminated run.
_CRASH_LOOPING_TEMPLATE = _status(
    False,
    f"  restartCount: {CRASH_LOOP_RESTARTS}\n"
    "  lastState:\n    terminated:\n      exitCode: 1\n      reason: Error\n"
    f"      startedAt: {_NOW}\n      finishedAt: {_NOW}\n"
    "  state:\n    waiting:\n      reason: CrashLoopBackOff\n"
    '      message: {{ printf "back-off 5m0s restarting failed container=%s" .name | Quote }}\n',
    "Running",
    *_NOT_READY,
)

# What a kubelet reports when the image cannot be pulled: the pod stays Pending and
# each container waits in ImagePullBackOff (ErrImagePull alternates with it).
_IMAGE_PULL_FAILING_TEMPLATE = _status(
    False,
    "  restartCount: 0\n  state:\n    waiting:\n      reason: ImagePullBackOff\n"
    '      message: {{ printf "Back-off pulling image %q" .image | Quote }}\n',
    "Pending",
    *_NOT_READY,
)


# What a kubelet reports once a run-once pod's containers have exited (EXIT_CODE, REASON, PHASE).
_ENDED_TEMPLATE = _status(
    False,
    "  restartCount: 0\n  state:\n    terminated:\n      exitCode: EXIT_CODE\n      reason: REASON\n"
    f"      message: MESSAGE\n      startedAt: {_NOW}\n      finishedAt: {_NOW}\n",
    "PHASE",
    "PodCompleted",
)


def _ended_template(exit_code: int, reason: str, phase: str, message: str) -> str:
    return (
        _ENDED_TEMPLATE.replace("EXIT_CODE", str(exit_code))
        .replace("REASON", reason)
        .replace("PHASE", phase)
        .replace("MESSAGE", f'"{message}"')
    )


def _stage(
    name: str,
    expressions: list[dict[str, Any]],
    status_template: str,
    event: dict[str, str] | None = None,
) -> dict[str, Any]:
    nxt: dict[str, Any] = {"statusTemplate": status_template}
    if event is not None:
        nxt["event"] = event
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": expressions},
            "next": nxt,
        },
    }


def patched_pod_ready(kwok_pod_ready: dict[str, Any]) -> dict[str, Any]:
    """kwok's pod-ready stage, for pods without a fate (the fate stages own those).

    SIMULATION: nor for operand pods whose init containers wait for validation markers
    (`GATED_APPS`): the node agent (node_agent.py) gives them the fate "ready" once their
    markers would exist on their node.
    """
    stage: dict[str, Any] = yaml.safe_load(yaml.safe_dump(kwok_pod_ready))  # deep copy
    # NB: also not for fate "ready": two matching stages are played at random, and
    # kwok's template assigns a second pod IP to a pod that has one (see _IPS_TEMPLATE).
    stage["spec"]["selector"]["matchExpressions"].append({"key": _FATE_KEY, "operator": "DoesNotExist"})
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": '.metadata.labels["app"]', "operator": "NotIn", "values": list(GATED_APPS)}
    )
    return stage


def patched_pod_delete(kwok_pod_delete: dict[str, Any]) -> dict[str, Any]:
    """kwok's pod-delete stage, but for pods deleted with a grace period of 0.

    NB: those the API server removes at once (no finalizer) or keeps for their finalizers
    alone: nothing is left for a kubelet to confirm, and kwok's delete by name (no UID
    precondition), played late on a loaded machine, hit a new pod of the same name (issue 30:
    tests/e2e/test_validate.py::test_cuda_replaces_a_leftover_pod, audit log: kwok-controller
    deleting the re-created pod milliseconds after the validator deleted the old one).
    """
    stage: dict[str, Any] = yaml.safe_load(yaml.safe_dump(kwok_pod_delete))  # deep copy
    stage["spec"]["selector"]["matchExpressions"].append(
        # a jq boolean (kwok compares strings, bools and ints: a JSON number may be neither)
        {"key": ".metadata.deletionGracePeriodSeconds != 0", "operator": "In", "values": ["true"]}
    )
    return stage


def fate_stages() -> list[dict[str, Any]]:
    """The pod-fate stages, one per fate.

    Each selector excludes the state it produces, so a played stage does not match
    again (kwok would otherwise patch the pod in a loop).
    """
    return [
        _stage(
            "pod-fate-ready",
            _fate_selector(
                FATE_READY,
                {
                    "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                    "operator": "NotIn",
                    "values": ["True"],
                },
            ),
            _READY_TEMPLATE,
        ),
        _stage(
            "pod-fate-crash-looping",
            _fate_selector(FATE_CRASH_LOOPING, _not_waiting("CrashLoopBackOff")),
            _CRASH_LOOPING_TEMPLATE,
            {"type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container"},
        ),
        _stage(
            "pod-fate-image-pull-failing",
            _fate_selector(FATE_IMAGE_PULL_FAILING, _not_waiting("ImagePullBackOff")),
            _IMAGE_PULL_FAILING_TEMPLATE,
            {"type": "Warning", "reason": "Failed", "message": "Error: ImagePullBackOff"},
        ),
        # The end state (Succeeded, Failed) is terminal: the stage plays once.
        _stage(
            f"pod-fate-{FATE_SUCCEEDED}",
            _fate_selector(FATE_SUCCEEDED),
            _ended_template(0, "Completed", "Succeeded", ""),
        ),
        _stage(
            f"pod-fate-{FATE_FAILED}",
            _fate_selector(FATE_FAILED),
            _ended_template(1, "Error", "Failed", FAILED_MESSAGE),
        ),
    ]


def ready_again_stage() -> dict[str, Any]:
    """SIMULATION of a kubelet reporting its running pods' readiness again.

    When a node's Lease is late the node lifecycle controller marks every pod on it not Ready
    (Ready False, ContainersReady left True); a kubelet reports the truth again at its next
    status sync, but kwok's pod-ready plays on Pending pods only, so those pods stayed not Ready
    for good: at 5,000 nodes kwok renewed some Leases late, 136 nodes flapped, and 1,438 of
    5,000 driver pods stayed not Ready (2026-11-24 18:42). Pods with a fate are the fate
    stages' (fate "ready" plays again by itself); a crash-looping pod's containers are not ready.
    """
    return _stage(
        "pod-ready-again",
        [
            _NOT_DELETED,
            {"key": _FATE_KEY, "operator": "DoesNotExist"},
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {
                "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                "operator": "NotIn",
                "values": ["True"],
            },
            {
                "key": '.status.conditions.[] | select( .type == "ContainersReady" ) | .status',
                "operator": "In",
                "values": ["True"],
            },
        ],
        # The status patch merges conditions by type: only Ready changes.
        "\n{{ $now := Now }}\nconditions:\n"
        f'- lastTransitionTime: {_NOW}\n  status: "True"\n  type: Ready\n',
    )


def _fate_selector(fate: str, *unless: dict[str, Any]) -> list[dict[str, Any]]:
    """A live pod with this fate, not ended (Running too: a crash-looping pod recovers), and `unless`."""
    return [
        _NOT_DELETED,
        {"key": _FATE_KEY, "operator": "In", "values": [fate]},
        {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]},
        *unless,
    ]


def _not_waiting(reason: str) -> dict[str, Any]:
    """No container waits for `reason` yet."""
    return {
        "key": ".status.containerStatuses.[].state.waiting.reason",
        "operator": "NotIn",
        "values": [reason],
    }


def write_stage_files(kwok_stage_files: list[Path], out_dir: Path) -> list[Path]:
    """Write the stage files kwok gets with ``--config`` into ``out_dir``.

    kwok's files are copied unchanged except pod-ready and pod-delete (see the module
    docstring); the pod-fate stages go in one extra multi-document file.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    has_pod_ready = False
    for src in kwok_stage_files:
        doc: dict[str, Any] = yaml.safe_load(src.read_text())
        dst = out_dir / src.name
        if doc.get("metadata", {}).get("name") == "pod-ready":
            has_pod_ready = True
            dst.write_text(yaml.safe_dump(patched_pod_ready(doc), sort_keys=False))
        elif doc.get("metadata", {}).get("name") == "pod-delete":
            dst.write_text(yaml.safe_dump(patched_pod_delete(doc), sort_keys=False))
        else:
            dst.write_text(src.read_text())
        written.append(dst)
    if not has_pod_ready:
        raise ValueError(f"no pod-ready stage among {[str(p) for p in kwok_stage_files]}")
    fates = out_dir / "pod-fates.yaml"
    fates.write_text(yaml.safe_dump_all([*fate_stages(), ready_again_stage()], sort_keys=False))
    written.append(fates)
    return written
