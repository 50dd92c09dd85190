"""The NVIDIADriver resource (nvidia.com/v1alpha1): one node pool's driver settings.

With `driver.useNvidiaDriverCRD: true` in the ClusterPolicy, each NVIDIADriver selects a pool
of GPU nodes and configures their driver DaemonSets.  Its driver fields are NVIDIA's, and
nearly all of them are the ClusterPolicy's `spec.driver` fields under the same names; so an
NVIDIADriver is read by laying its fields over the ClusterPolicy's spec
(`cluster_policy_spec`), and the one policy model (model/policy/policy_spec.py) parses, defaults and
validates it.  Problems are reported under the NVIDIADriver's own field paths
(`nvidia_driver_field`).

Pure data and pure functions: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ocp_gpu.model import apis, custom_resources, labels
from ocp_gpu.model.policy.policy_problems import PolicyProblem

# The ClusterPolicy field that hands the drivers over to NVIDIADrivers.
MODE_FIELD: Final = "spec.driver.useNvidiaDriverCRD"

# NVIDIADriver driver fields with the same name and shape as the ClusterPolicy's spec.driver.
_SAME_AS_DRIVER: Final = (
    "repository",
    "image",
    "version",
    "imagePullPolicy",
    "imagePullSecrets",
    "env",
    "args",
    "resources",
    "usePrecompiled",
    "kernelModuleType",
    "useOpenKernelModules",
    "kernelModuleConfig",
    "certConfig",
    "manager",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
    "rdma",
    "secretEnv",
    "hostNetwork",
)
# NVIDIADriver pod fields that replace the ClusterPolicy's spec.daemonsets ones when set.
_DAEMONSETS_REPLACED: Final = ("tolerations", "priorityClassName", "podSecurityContext")
# ClusterPolicy path prefix -> NVIDIADriver path prefix, longest first (for problem paths).
_PATHS: Final[tuple[tuple[str, str], ...]] = (
    ("spec.driver.repoConfig.configMapName", "spec.repoConfig.name"),
    ("spec.driver.licensingConfig.configMapName", "spec.licensingConfig.name"),
    ("spec.driver.virtualTopology.config", "spec.virtualTopologyConfig.name"),
    ("spec.driver.upgradePolicy", "spec.upgradePolicy"),
    *((f"spec.daemonsets.{key}", f"spec.{key}") for key in (*_DAEMONSETS_REPLACED, "labels", "annotations")),
    *((f"spec.{key}", f"spec.{key}") for key in ("gds", "gdrcopy")),
    *((f"spec.driver.{key}", f"spec.{key}") for key in (*_SAME_AS_DRIVER, "repoConfig", "licensingConfig")),
)

# Fields accepted for NVIDIA compatibility that ocp-gpu does not act on per NVIDIADriver:
# path -> what ocp-gpu does instead.  A value other than unset / false / "" / [] / {} is reported.
REFUSED: Final[Mapping[str, str]] = {
    "spec.nodeAffinity": "the pool is chosen by spec.nodeSelector only; no node affinity is added",
}
# NVIDIA's driver types; ocp-gpu deploys the data-centre and vGPU guest drivers, never the host manager.
DRIVER_TYPES: Final = ("gpu", "vgpu")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclasses.dataclass(frozen=True)
class NvidiaDriver(custom_resources.CustomResource):
    """An NVIDIADriver as the watch last saw it.  NB: `created` sorts chronologically; the older
    pool keeps a contested node."""

    @property
    def is_default(self) -> bool:
        """`spec.default`: the pool of every GPU node no other NVIDIADriver selects."""
        return self.spec.get("default") is True

    @property
    def node_selector(self) -> dict[str, str]:
        """The labels a GPU node must carry to be in this pool (NVIDIA's default: every GPU node)."""
        given = self.spec.get("nodeSelector") or {}
        if not isinstance(given, Mapping):
            return {labels.GPU_PRESENT: "true"}
        return {str(key): str(value) for key, value in given.items()} or {labels.GPU_PRESENT: "true"}

    def ref(self) -> dict[str, str]:
        """The object reference Events and ownerReferences name."""
        return {
            "apiVersion": apis.NVIDIA_DRIVER_API_VERSION,
            "kind": apis.NVIDIA_DRIVER_KIND,
            "name": self.name,
            "uid": self.uid,
        }


def is_mode_enabled(cluster_policy_spec: Mapping[str, Any]) -> bool:
    """`spec.driver.useNvidiaDriverCRD: true` in the ClusterPolicy: NVIDIADrivers deploy the drivers."""
    driver = cluster_policy_spec.get("driver")
    return isinstance(driver, Mapping) and driver.get("useNvidiaDriverCRD") is True


def cluster_policy_spec(
    cluster_policy: Mapping[str, Any], nvidia_driver: Mapping[str, Any]
) -> dict[str, Any]:
    """The ClusterPolicy spec that deploys this NVIDIADriver's pool: its fields over the policy's.

    The driver section is the NVIDIADriver's alone (NVIDIA's NVIDIADriver inherits no driver
    field), except the precompiled fallback (only the ClusterPolicy has it) and the upgrade
    rules: the pool's `upgradePolicy` laid field by field over the ClusterPolicy's
    (`pool_upgrade_policy`).  Pod-level fields replace the ClusterPolicy's `daemonsets` ones when set;
    labels and annotations are added to them.  Everything else (operator, hostPaths) is the
    ClusterPolicy's.
    """
    base = dict(cluster_policy)
    policy_driver = base.get("driver") if isinstance(base.get("driver"), Mapping) else {}
    assert isinstance(policy_driver, Mapping)
    driver: dict[str, Any] = {key: nvidia_driver[key] for key in _SAME_AS_DRIVER if key in nvidia_driver}
    driver["enabled"] = True
    if "precompiledFallback" in policy_driver:
        driver["precompiledFallback"] = policy_driver["precompiledFallback"]
    upgrade = pool_upgrade_policy(
        _mapping(policy_driver.get("upgradePolicy")), nvidia_driver.get("upgradePolicy")
    )
    if upgrade is not None:
        driver["upgradePolicy"] = upgrade
    repo = _mapping(nvidia_driver.get("repoConfig"))
    if repo.get("name"):
        driver["repoConfig"] = {"configMapName": repo["name"]}
    licensing = _mapping(nvidia_driver.get("licensingConfig"))
    if licensing:
        driver["licensingConfig"] = {
            **({"configMapName": licensing["name"]} if licensing.get("name") else {}),
            **{key: licensing[key] for key in ("secretName", "nlsEnabled") if key in licensing},
        }
    topology = _mapping(nvidia_driver.get("virtualTopologyConfig"))
    if topology.get("name"):
        driver["virtualTopology"] = {"config": topology["name"]}
    base["driver"] = driver
    daemonsets = dict(_mapping(base.get("daemonsets")))
    for key in _DAEMONSETS_REPLACED:
        if nvidia_driver.get(key):
            daemonsets[key] = nvidia_driver[key]
    for key in ("labels", "annotations"):
        if nvidia_driver.get(key):
            daemonsets[key] = {**_mapping(daemonsets.get(key)), **_mapping(nvidia_driver[key])}
    base["daemonsets"] = daemonsets
    # GPUDirect Storage and GDRCopy build with the driver: the pool's own, off unless it asks.
    for key in ("gds", "gdrcopy"):
        base[key] = dict(_mapping(nvidia_driver.get(key)))
    return base


# The two names of the GPU pod deletion settings (NVIDIA's podDeletion, the seed's gpuPodDeletion).
_POD_DELETION_NAMES: Final = ("gpuPodDeletion", "podDeletion")


def pool_upgrade_policy(policy_upgrade: Mapping[str, Any], pool_upgrade: object) -> object:
    """A pool's upgrade rules: its `upgradePolicy` over the ClusterPolicy's, field by field.

    What the NVIDIADriver sets wins; what it leaves unset is the ClusterPolicy's (NVIDIA's
    operator falls back to its own defaults instead: docs/differences-from-nvidia.md).  The
    two names of the pod deletion settings are one object: a field the pool sets under either
    name wins over the ClusterPolicy's under both.  None: neither sets any.  A pool value that
    is not an object is passed on as it is, for the parser to name.
    """
    if pool_upgrade is None:
        return dict(policy_upgrade) if policy_upgrade else None
    if not isinstance(pool_upgrade, Mapping):
        return pool_upgrade
    merged: dict[str, Any] = dict(policy_upgrade)
    for key, value in pool_upgrade.items():
        if key in _POD_DELETION_NAMES:
            continue
        base = merged.get(key)
        if isinstance(value, Mapping) and isinstance(base, Mapping):
            merged[key] = {**base, **value}
        else:
            merged[key] = value
    pool_deletion = {
        field: value
        for name in _POD_DELETION_NAMES
        if isinstance(pool_upgrade.get(name), Mapping)
        for field, value in pool_upgrade[name].items()
    }
    for name in _POD_DELETION_NAMES:
        if name in pool_upgrade and not isinstance(pool_upgrade[name], Mapping):
            merged[name] = pool_upgrade[name]  # the parser names it
        elif isinstance(merged.get(name), Mapping) or name in pool_upgrade:
            inherited = {k: v for k, v in _mapping(merged.get(name)).items() if k not in pool_deletion}
            merged[name] = {**inherited, **_mapping(pool_upgrade.get(name))}
    return merged


def pool_auto_upgrade(cluster_policy: Mapping[str, Any], nvidia_driver: Mapping[str, Any]) -> bool:
    """The pool's autoUpgrade (its own, else the ClusterPolicy's; on unless one says false).

    NB: read from the specs alone, as the node labeller needs it beside the pool's planning; a
    value the parser refuses makes the pool invalid and its upgrades held anyway.
    """
    driver = _mapping(cluster_policy.get("driver"))
    merged = pool_upgrade_policy(_mapping(driver.get("upgradePolicy")), nvidia_driver.get("upgradePolicy"))
    return _mapping(merged).get("autoUpgrade") is not False


def nvidia_driver_field(cluster_policy_field: str) -> str | None:
    """The NVIDIADriver path of a ClusterPolicy path in `cluster_policy_spec`; None: not the pool's."""
    for theirs, ours in _PATHS:
        if cluster_policy_field == theirs or cluster_policy_field.startswith((theirs + ".", theirs + "[")):
            return ours + cluster_policy_field[len(theirs) :]
    return None


def pool_problems(driver: NvidiaDriver) -> list[PolicyProblem]:
    """What is wrong with an NVIDIADriver beyond its driver fields (which the policy model checks)."""
    spec = driver.spec
    found: list[PolicyProblem] = []
    driver_type = spec.get("driverType", "gpu")
    if driver_type not in DRIVER_TYPES:
        # vgpu-host-manager: a different product (the vGPU manager on hypervisor hosts)
        found.append(
            PolicyProblem(
                field="spec.driverType",
                message=f"{driver_type!r} is not deployed by ocp-gpu (it deploys the gpu and vgpu drivers)",
                fix="set driverType: gpu (or vgpu), or delete this NVIDIADriver",
            )
        )
    selector = spec.get("nodeSelector") or {}
    if driver.is_default and selector:
        found.append(
            PolicyProblem(
                field="spec.nodeSelector",
                message="a default NVIDIADriver takes the GPU nodes no other one selects; it has no selector",
                fix="remove spec.nodeSelector, or set spec.default: false",
            )
        )
    if isinstance(selector, Mapping):
        for key, value in sorted(selector.items()):
            found.extend(_selector_problems(str(key), str(value)))
    return found


def _selector_problems(key: str, value: str) -> Iterator[PolicyProblem]:
    field = f"spec.nodeSelector[{key!r}]"
    if key == labels.NVIDIA_DRIVER_OWNER:
        # the operator writes this label from the selectors: selecting on it would be circular
        yield PolicyProblem(
            field=field,
            message=f"{key} is written by the operator to record which NVIDIADriver owns a node",
            fix="select on the labels of your machine pool instead",
        )
        return
    prefix, _, name = key.rpartition("/")
    if not _LABEL_NAME.match(name) or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix))):
        yield PolicyProblem(
            field=field,
            message=f"{key!r} is not a valid label key",
            fix="use [prefix/]name: a DNS subdomain prefix, a name of up to 63 of [A-Za-z0-9_.-]",
        )
    if value and not _LABEL_NAME.match(value):
        yield PolicyProblem(
            field=field,
            message=f"{value!r} is not a valid label value",
            fix="use up to 63 of [A-Za-z0-9_.-], starting and ending alphanumeric",
        )


def refused_settings(spec: Mapping[str, Any]) -> dict[str, str]:
    """The refused fields this spec sets to something that would change something: path -> instead."""
    found: dict[str, str] = {}
    for path, instead in REFUSED.items():
        if not _is_quiet(spec.get(path.removeprefix("spec."))):
            found[path] = instead
    return found


def _is_quiet(value: object, nested: bool = False) -> bool:
    """Unset, false, "", [], {}, or an object whose strings are all empty: changes nothing.

    NB: a boolean inside an object is a setting (`{"enable": false}` says something).
    """
    if isinstance(value, Mapping):
        return all(_is_quiet(item, nested=True) for item in value.values())
    if isinstance(value, bool):
        return not nested and value is False
    return value in (None, "", [])


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
