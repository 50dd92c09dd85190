"""What makes a driver pod outdated: the driver it installs, not the pod template it came from.

A DaemonSet's pods carry the hash of the template they were made from; any change to the template
(a label, a probe, a mount or an env of the sidecar, a new operator rendering the same driver
differently) makes every pod "outdated" by that hash, and an upgrade would cordon, drain and
restart every GPU node for it.  A driver restart is only worth it when what the pod installs on
the node differs.  `outdated_reasons` is THE rule; a pod on a previous template whose install is
the desired one is current: its node is labelled upgrade-done without cordon, drain or restart,
and the new template lands at its next natural driver restart (DESIGN §5; the generated
docs/upgrade-state-machine.md states it).

What a driver pod installs (`DriverInstall`, read from a pod spec or a DaemonSet's template):
- the driver container's image (`nvidia-driver-ctr`: repository, image and version); NB: the same
  driver built for another OS (tags `<version>-<os>` differing in `<os>` alone, `other_os_build`)
  is the same driver: NVIDIA's one vanilla DaemonSet runs the first GPU node's OS's image on every
  node (its getGPUNodeOSInfo), and such a pod that works (planning/driver_check: a failing one is
  outdated all the same) keeps its driver until its next restart, which brings its own OS's;
- the driver-toolkit sidecar's image (DTK builds against it);
- the kernel module type (`KERNEL_MODULE_TYPE`, default auto) and the driver's module switches
  (`GPU_DIRECT_RDMA_ENABLED`, `USE_HOST_MOFED`, `GDS_ENABLED`, `GDRCOPY_ENABLED`);
- the extra module containers (nvidia-peermem, nvidia-fs, nvidia-gdrcopy) and their images;
- the driver's configuration: every ConfigMap or Secret mounted into the driver container where
  the driver reads configuration (package repositories, CA certificates, `/drivers`: kernel module
  parameters and licensing), by name and path.

Not compared: labels, annotations, probes, resources, tolerations, the init container, other env
and mounts (the operator's own plumbing).  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu.model.driver_install import DriverInstall

DRIVER_CONTAINER: Final = "nvidia-driver-ctr"
DTK_CONTAINER: Final = "openshift-driver-toolkit-ctr"
# The containers that build or load a kernel module beside the driver (rdma, gds, gdrcopy).
MODULE_CONTAINERS: Final = ("nvidia-peermem-ctr", "nvidia-fs-ctr", "nvidia-gdrcopy-ctr")
# The driver container's env that changes what it installs, with the value its absence means.
INSTALL_ENV: Final[Mapping[str, str]] = {
    "KERNEL_MODULE_TYPE": "auto",
    "GPU_DIRECT_RDMA_ENABLED": "false",
    "USE_HOST_MOFED": "false",
    "GDS_ENABLED": "false",
    "GDRCOPY_ENABLED": "false",
}
# Where the driver container reads its configuration (NVIDIA's driver images, every OS): package
# repositories, CA certificates, and /drivers (kernel module parameters, gridd.conf, the NLS token).
CONFIG_DIRS: Final = (
    "/etc/yum.repos.d",
    "/etc/apt/sources.list.d",
    "/etc/zypp/repos.d",
    "/etc/pki/ca-trust/extracted/pem",
    "/usr/local/share/ca-certificates",
    "/etc/pki/trust/anchors",
    "/drivers",
)


def _in_config_dir(path: str) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in CONFIG_DIRS)


def driver_install(pod_spec: Mapping[str, Any]) -> DriverInstall | None:
    """What a pod spec (a pod's, or a DaemonSet template's) installs; None without a driver container."""
    containers = {str(c.get("name", "")): c for c in pod_spec.get("containers") or ()}
    driver = containers.get(DRIVER_CONTAINER)
    if driver is None:
        return None
    env = {str(e.get("name", "")): str(e.get("value", "")) for e in driver.get("env") or () if "value" in e}
    volumes = {str(v.get("name", "")): v for v in pod_spec.get("volumes") or ()}
    config: set[str] = set()
    for mount in driver.get("volumeMounts") or ():
        path = str(mount.get("mountPath", ""))
        volume = volumes.get(str(mount.get("name", ""))) or {}
        if not _in_config_dir(path):
            continue
        if "configMap" in volume:
            config.add(f"configMap/{volume['configMap'].get('name', '')} at {path}")
        elif "secret" in volume:
            config.add(f"secret/{volume['secret'].get('secretName', '')} at {path}")
    return DriverInstall(
        driver_image=str(driver.get("image", "")),
        dtk_image=str((containers.get(DTK_CONTAINER) or {}).get("image", "")),
        env=tuple(sorted((name, env.get(name) or default) for name, default in INSTALL_ENV.items())),
        modules=tuple(
            sorted(
                (name, str(containers[name].get("image", "")))
                for name in MODULE_CONTAINERS
                if name in containers
            )
        ),
        config=tuple(sorted(config)),
    )


# A driver image tag of one driver version for one OS (NVIDIA's vanilla images, 595.91.07-ubuntu22.04;
# not a precompiled one's, <version>-<kernel>-<os>, whose kernel module is built for one kernel).
_VERSION_OS_TAG: Final = re.compile(r"(?P<version>[0-9]+(?:\.[0-9]+)*)-(?P<os>[a-z]+[0-9]+(?:\.[0-9]+)*)")


def _version_os(image: str) -> tuple[str, str, str] | None:
    """(repository/name, driver version, OS) of a `<version>-<os>` tagged image; None for any other."""
    name, _, tag = image.rpartition(":")
    found = _VERSION_OS_TAG.fullmatch(tag) if name and "/" not in tag and "@" not in image else None
    return (name, found["version"], found["os"]) if found else None


def other_os_build(running: str, desired: str) -> bool:
    """`running` is the driver of `desired` (repository, image and version) built for another OS."""
    have, want = _version_os(running), _version_os(desired)
    return have is not None and want is not None and have[:2] == want[:2] and have[2] != want[2]


def outdated_reasons(running: DriverInstall, desired: DriverInstall) -> tuple[str, ...]:
    """THE rule: why a driver pod installing `running` is outdated against `desired`; () = current."""
    reasons: list[str] = []
    if running.driver_image != desired.driver_image and not other_os_build(
        running.driver_image, desired.driver_image
    ):
        reasons.append(f"driver image {running.driver_image} -> {desired.driver_image}")
    if running.dtk_image != desired.dtk_image:
        reasons.append(f"driver-toolkit image {running.dtk_image or 'none'} -> {desired.dtk_image or 'none'}")
    for (name, have), (_, want) in zip(running.env, desired.env, strict=True):
        if have != want:
            reasons.append(f"{name} {have} -> {want}")
    if running.modules != desired.modules:
        reasons.append(f"module containers {_pairs(running.modules)} -> {_pairs(desired.modules)}")
    if running.config != desired.config:
        reasons.append(f"driver configuration {_list(running.config)} -> {_list(desired.config)}")
    return tuple(reasons)


def _pairs(pairs: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name}={image}" for name, image in pairs) or "none"


def _list(items: tuple[str, ...]) -> str:
    return ", ".join(items) or "none"
