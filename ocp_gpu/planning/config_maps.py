"""Whether the ConfigMaps a ClusterPolicy names can be mounted: one rule for every field.

A field such as `driver.certConfig.name` or `migManager.config.name` names a ConfigMap
in the operand namespace that a pod mounts.  On a real cluster a missing one leaves the
pod in ContainerCreating (`configmap ... not found`) and a ConfigMap without the file the
container reads fails inside it; both say nothing in the ClusterPolicy.  So before
anything is applied the named ConfigMaps' keys are read (kube/fetching.config_map_keys)
and judged here; a problem names the field and the fix, and the caller changes nothing.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

import yaml

from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity

# Fields whose ConfigMap's key another field names: ConfigMap field -> key field.  NB: the
# device plugin's config-manager reads the key `devicePlugin.config.default` names on every
# node without a nvidia.com/device-plugin.config label; a missing key is either field's fault.
KEY_FIELDS: Final = {"spec.devicePlugin.config.name": "spec.devicePlugin.config.default"}


def missing_config_map_problem(
    named: Mapping[str, str],
    keys: Mapping[str, tuple[str, ...] | None] | None,
    namespace: str,
    required_keys: Mapping[str, str] | None = None,
) -> PolicyProblem | None:
    """The first named ConfigMap (field -> name) that is absent or lacks its key; None when all fit.

    `keys`: each ConfigMap's data keys as read (None for one that does not exist); None
    altogether when nothing could be read (offline render).  `required_keys`: field -> the
    data key the pod reads from that ConfigMap (fields left out need no particular key).
    A key that another field names (KEY_FIELDS) is reported under that field.
    """
    for field, name in named.items():
        if keys is None:
            # Offline: the ConfigMap's keys decide the mounts, and there is no cluster to ask.
            return PolicyProblem(
                field=field,
                message=f"the keys of ConfigMap {name!r} decide what is mounted; they cannot be read offline",
                fix="render with --live, or leave the field out of the file",
            )
        found = keys.get(name)
        if found is None:
            return PolicyProblem(
                field=field,
                message=f"ConfigMap {name!r} does not exist in namespace {namespace!r}",
                fix=f"create it in {namespace!r}, or unset {field}",
            )
        key = (required_keys or {}).get(field)
        if key and key not in found:
            have = ", ".join(found) or "none"
            key_field = KEY_FIELDS.get(field)
            if key_field:
                # the key is the admin's choice too: either the ConfigMap or the choice is wrong
                return PolicyProblem(
                    field=key_field,
                    message=f"ConfigMap {name!r} ({field}) has no key {key!r} (it has: {have})",
                    fix=f"add the key {key!r} to ConfigMap {name!r} in {namespace!r}, "
                    f"or set {key_field} to one of its keys",
                )
            return PolicyProblem(
                field=field,
                message=f"ConfigMap {name!r} has no key {key!r}, the file the pod reads (it has: {have})",
                fix=f"add the key {key!r} to ConfigMap {name!r} in {namespace!r}, or unset {field}",
            )
    return None


def unchecked_config_map_notes(
    named: Mapping[str, str], namespace: str, required_keys: Mapping[str, str] | None = None
) -> list[PolicyProblem]:
    """Offline (no cluster to ask): one warning per named ConfigMap, saying what must exist.

    The operator would check these before applying (`missing_config_map_problem`); a file
    review cannot, so it says which ConfigMap, with which key, the operator will look for.
    """
    notes: list[PolicyProblem] = []
    for field, name in named.items():
        key = (required_keys or {}).get(field)
        holding = f" with the key {key!r}" if key else ""
        notes.append(
            PolicyProblem(
                field=field,
                message=f"not checked offline: ConfigMap {name!r} must exist in namespace {namespace!r}"
                f"{holding}, or the operator applies nothing of this operand",
                fix="create it before applying, or render with --live to check; the operator reports "
                "it missing in the ClusterPolicy's status",
                severity=Severity.WARNING,
            )
        )
    return notes


# The field naming the admin's device plugin configs (NVIDIA's devicePlugin.config.name).
PLUGIN_CONFIG_FIELD: Final = "spec.devicePlugin.config.name"
_SHARING_FIX: Final = (
    "write sharing.timeSlicing or sharing.mps as resources of {name, replicas >= 2}, e.g. "
    "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}"
)


def plugin_config_problem(
    name: str, data: Mapping[str, str], mig_strategy: str, keys: Collection[str] | None = None
) -> PolicyProblem | None:
    """The first config in the admin's device plugin ConfigMap (key -> YAML) that NVIDIA's plugin,
    its MPS control daemon or GFD would refuse at start (k8s-device-plugin v0.20.0 api/config/v1
    and cmd/nvidia-device-plugin/main.go), or None.

    `keys`: the keys a config-manager picks (the default, and those nodes' labels name; None: every
    key).  NB: only those: the config-manager copies one key, and the plugin reads that one only,
    so the ConfigMap may hold anything else (e.g. the DCGM exporter's metrics, one ConfigMap for all).

    Refused as they are: a file that is not a v1 config; a shared resource without a name or
    with replicas < 2; MPS sharing under the mixed MIG strategy (the config's, else the policy's
    `mig_strategy`, which the operator passes as MIG_STRATEGY).  tests/unit/
    test_plugin_config_upstream.py checks these verdicts against NVIDIA's own parser.
    """
    for key, text in sorted(data.items()):
        if keys is not None and key not in keys:
            continue
        where = f"ConfigMap {name!r} key {key!r}"
        try:
            config: Any = yaml.safe_load(text)
        except yaml.YAMLError as error:
            return PolicyProblem(
                field=PLUGIN_CONFIG_FIELD,
                message=f"{where} is not YAML: {str(error).splitlines()[0]}",
                fix="write a device plugin config (version: v1) under each key",
            )
        if not isinstance(config, Mapping) or str(config.get("version", "v1")) != "v1":
            return PolicyProblem(
                field=PLUGIN_CONFIG_FIELD,
                message=f"{where} is not a device plugin config of version v1",
                fix="write a device plugin config (version: v1) under each key",
            )
        sharing = config.get("sharing") or {}
        for strategy in ("timeSlicing", "mps"):
            replicated = sharing.get(strategy) if isinstance(sharing, Mapping) else None
            if replicated is None:
                continue
            resources = replicated.get("resources") if isinstance(replicated, Mapping) else None
            if not isinstance(resources, list) or not resources:
                return PolicyProblem(
                    field=PLUGIN_CONFIG_FIELD,
                    message=f"{where}: sharing.{strategy} names no resources",
                    fix=_SHARING_FIX,
                )
            for entry in resources:
                replicas = entry.get("replicas") if isinstance(entry, Mapping) else None
                if not isinstance(entry, Mapping) or not entry.get("name"):
                    return PolicyProblem(
                        field=PLUGIN_CONFIG_FIELD,
                        message=f"{where}: a sharing.{strategy} resource has no name",
                        fix=_SHARING_FIX,
                    )
                if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
                    return PolicyProblem(
                        field=PLUGIN_CONFIG_FIELD,
                        message=f"{where}: sharing.{strategy} shares {entry.get('name')} {replicas!r} ways; "
                        "the device plugin needs replicas >= 2",
                        fix=_SHARING_FIX,
                    )
        flags = config.get("flags") or {}
        strategy = str((flags.get("migStrategy") if isinstance(flags, Mapping) else None) or mig_strategy)
        if isinstance(sharing, Mapping) and sharing.get("mps") and strategy == "mixed":
            return PolicyProblem(
                field=PLUGIN_CONFIG_FIELD,
                message=f"{where}: MPS sharing with the mixed MIG strategy, which the device plugin refuses "
                "(MPS does not share MIG devices)",
                fix="share with sharing.timeSlicing on this config, or use migStrategy none or single",
            )
    return None
