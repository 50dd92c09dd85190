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

from collections.abc import Mapping
from typing import Final

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
