"""MIG decisions: which nodes the MIG manager runs on, which MIG config a node gets, what a config makes.

- `is_mig_capable`: NVIDIA's rule (its state_manager.go): a vGPU host is never; GFD's
  `nvidia.com/mig.capable` decides when present; else a GPU product naming an A100, A30
  or H100 is.  The operator labels such nodes `nvidia.com/gpu.deploy.mig-manager=true`
  (planning/operands/node_labels.py), so the MIG manager DaemonSet runs only there.
- `plan_mig_config_label`: with the MIG manager enabled, a MIG-capable node without
  `nvidia.com/mig.config` gets `migManager.config.default` (`all-disabled`), as NVIDIA's
  node labelling does; a node with one (the admin's choice) is never touched.
- `mig_devices`: what applying a named mig-parted config to a node's GPUs makes (the
  harness's simulation of the MIG manager uses it; so do tests).
- `MigNodeState` / `failed_nodes` / `summarize`: the `nvidia.com/mig.config.state` labels
  read back for `ocp-gpu status` and the ClusterPolicy's `MIGConfigFailed` condition.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ocp_gpu.model import labels, mig_catalog

# GPU products NVIDIA treats as MIG-capable when GFD has not said (lower case, substrings).
_MIG_PRODUCTS: Final = ("h100", "a100", "a30")
TRUE: Final = "true"


class MigConfigState(enum.StrEnum):
    """The values of nvidia.com/mig.config.state (the MIG manager's)."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"
    # NVIDIA's mig-manager sets it before a reboot that a MIG mode change needs.
    REBOOTING = "rebooting"


def is_mig_capable(node_labels: Mapping[str, str]) -> bool:
    """The node has a GPU that MIG can partition (NVIDIA's hasMIGCapableGPU)."""
    if node_labels.get(labels.VGPU_HOST_DRIVER_VERSION):
        # A vGPU host: its GPUs are partitioned by the vGPU manager, not MIG.
        return False
    if labels.MIG_CAPABLE in node_labels:
        # GFD looked at the GPUs: its word is final.
        return node_labels[labels.MIG_CAPABLE] == TRUE
    # No GFD label yet: judge by the product name.
    product = node_labels.get(labels.GPU_PRODUCT, "").lower()
    return any(name in product for name in _MIG_PRODUCTS)


def plan_mig_config_label(node_labels: Mapping[str, str], config_default: str | None) -> dict[str, str]:
    """`nvidia.com/mig.config` for a node that should get the default one; {} otherwise.

    `config_default` None: the MIG manager is disabled or the policy is invalid (no label).
    """
    if not config_default or labels.MIG_CONFIG in node_labels:
        # No default to give (""), or the node has a config (the admin's or ours): keep it.
        return {}
    if not is_mig_capable(node_labels):
        return {}
    return {labels.MIG_CONFIG: config_default}


class MigConfigError(ValueError):
    """A config that cannot be applied; the message says why."""


def mig_devices(document: Any, name: str, device_id: str, gpus: int) -> dict[str, int]:
    """The MIG devices (profile -> count) config `name` makes on `gpus` GPUs of PCI id `device_id`.

    {} when the config turns MIG off.  Raises MigConfigError when the file is not a
    mig-parted v1 file or has no config `name` (the MIG manager's `assert --valid-config`).
    NB: mig-parted applies the entries in order; an entry whose device-filter does not
    name the GPU's id leaves it alone.
    """
    if not isinstance(document, Mapping) or document.get("version") != mig_catalog.FORMAT_VERSION:
        raise MigConfigError(f"not a mig-parted {mig_catalog.FORMAT_VERSION} config file")
    configs = document.get("mig-configs")
    if not isinstance(configs, Mapping) or name not in configs:
        known = ", ".join(sorted(configs)) if isinstance(configs, Mapping) else "none"
        raise MigConfigError(f"no MIG config {name!r} in the config file (it has: {known})")
    per_gpu: dict[str, int] = {}
    for entry in configs[name] or ():
        if not isinstance(entry, Mapping):
            raise MigConfigError(f"MIG config {name!r}: an entry is not a mapping")
        wanted = entry.get("device-filter")
        if wanted is not None:
            ids = [wanted] if isinstance(wanted, str) else list(wanted)
            if device_id.upper() not in (str(i).upper() for i in ids):
                # The entry is for another GPU model.
                continue
        if not entry.get("mig-enabled"):
            # MIG mode off: the GPU is whole again.
            per_gpu = {}
            continue
        per_gpu = {str(profile): int(count) for profile, count in (entry.get("mig-devices") or {}).items()}
    return {profile: count * gpus for profile, count in per_gpu.items() if count * gpus > 0}


@dataclasses.dataclass(frozen=True)
class MigNodeState:
    """One MIG-managed node as the status shows it."""

    node: str
    config: str
    # "" until the MIG manager has worked on the node.
    state: str


def mig_nodes(nodes: Mapping[str, Mapping[str, str]]) -> list[MigNodeState]:
    """Every node with a MIG config or state label, by name."""
    return [
        MigNodeState(
            name, node_labels.get(labels.MIG_CONFIG, ""), node_labels.get(labels.MIG_CONFIG_STATE, "")
        )
        for name, node_labels in sorted(nodes.items())
        if labels.MIG_CONFIG in node_labels or labels.MIG_CONFIG_STATE in node_labels
    ]


def failed_nodes(nodes: Mapping[str, Mapping[str, str]]) -> list[MigNodeState]:
    """The nodes whose last MIG reconfiguration failed."""
    return [node for node in mig_nodes(nodes) if node.state == MigConfigState.FAILED]


def summarize(states: Iterable[MigNodeState]) -> dict[str, int]:
    """Node counts by state ("" counted as "unknown"), in a stable order."""
    counts: dict[str, int] = {}
    for node in states:
        key = node.state or "unknown"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def state_counts(nodes: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """Nodes per nvidia.com/mig.config.state value, every known state present (0 when none).

    For the `ocp_gpu_mig_config_nodes{state}` gauge: a state with no node reads 0, so an
    alert on `state="failed"` resolves when the last failed node recovers.  Nodes without
    a state yet (or an unknown one) are not counted.
    """
    counts = dict.fromkeys((str(state) for state in MigConfigState), 0)
    for node in mig_nodes(nodes):
        if node.state in counts:
            counts[node.state] += 1
    return counts


def describe_failed(failed: list[MigNodeState], named: int = 3) -> str:
    """The MIGConfigFailed condition's message: the nodes, their configs, and what to do."""
    shown = ", ".join(f"{n.node} ({labels.MIG_CONFIG}={n.config})" for n in failed[:named])
    more = f" (+{len(failed) - named} more)" if len(failed) > named else ""
    return (
        f"MIG reconfiguration failed on {len(failed)} node(s): {shown}{more}; the GPU operands there run"
        f" with the previous MIG layout. Fix: check the nvidia-mig-manager pod's log on the node, then"
        f" set {labels.MIG_CONFIG} to a config the MIG config ConfigMap has"
    )
