"""Image references: from a component's repository/image/version and the operator's defaults.

Every operand image has a default in the operator's environment (the CSV and the
Helm chart set them; the names are NVIDIA's, see `DEFAULT_IMAGE_ENV`), and a
ClusterPolicy may override any part of it.  The rules, in order:

1. `image` alone holding a full reference (`nvcr.io/nvidia/driver:570.124.06`,
   `…/driver@sha256:…`) is used as is (digest-pinning tools write this).
2. Every part left unset is taken from the default: `repository`, `image` (the
   last path component) and `version` (its tag, or its digest).  So patching only
   `/spec/driver/version` (the seed's upgrade command) keeps the default's
   registry and name and replaces its tag *or digest* with the new version.
   NB: NVIDIA's operator builds `"/" + image + ":" + version` here and, under
   OLM where the default is a digest, ends with `/:570.x-rhel9.6` (DESIGN §6).
3. A `version` starting with `sha256:` is a digest: `<repository>/<image>@sha256:…`.
4. Anything that would not be a valid reference is a `PolicyProblem` naming the
   field (or the environment variable) to set, never a broken DaemonSet.

Driver images then get an OS suffix per node group (`driver_image_for`).

Pure: the environment comes in as a mapping; this module never reads os.environ.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Final, NewType, Protocol

from ocp_gpu.model.policy import policy_problems

# A full, valid image reference, e.g. nvcr.io/nvidia/driver:570.124.06-rhel9.
ImageRef = NewType("ImageRef", str)

# The operator's environment variable holding each component's default image,
# keyed by the component's field under `spec`.  The names are NVIDIA's (its CSV
# and Helm chart), so an existing Deployment's env works unchanged.
# NB: NVIDIA runs the node status exporter from the validator image.
DEFAULT_IMAGE_ENV: Final[Mapping[str, str]] = {
    "driver": "DRIVER_IMAGE",
    "driver.manager": "DRIVER_MANAGER_IMAGE",
    "toolkit": "CONTAINER_TOOLKIT_IMAGE",
    "devicePlugin": "DEVICE_PLUGIN_IMAGE",
    "dcgm": "DCGM_IMAGE",
    "dcgmExporter": "DCGM_EXPORTER_IMAGE",
    "gfd": "GFD_IMAGE",
    "validator": "VALIDATOR_IMAGE",
    "migManager": "MIG_MANAGER_IMAGE",
    "draDriver": "DRA_DRIVER_IMAGE",
    "vfioManager": "VFIO_MANAGER_IMAGE",
    "vfioManager.driverManager": "DRIVER_MANAGER_IMAGE",
    "sandboxDevicePlugin": "SANDBOX_DEVICE_PLUGIN_IMAGE",
    # NB: ours, never set by the CSV or chart: NVIDIA publishes no vGPU manager image (the vGPU host
    # driver is licensed; the admin builds the image), so its CSV has no variable for it.
    "vgpuManager": "VGPU_MANAGER_IMAGE",
    "vgpuManager.driverManager": "DRIVER_MANAGER_IMAGE",
    "vgpuDeviceManager": "VGPU_DEVICE_MANAGER_IMAGE",
    "nodeStatusExporter": "VALIDATOR_IMAGE",
    # NB: no release default yet: spec.gds / spec.gdrcopy name the image, or these variables do.
    "gds": "GDS_IMAGE",
    "gdrcopy": "GDRCOPY_IMAGE",
}

# The reference grammar of distribution/reference (what container runtimes accept).
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE_RE: Final = re.compile(rf"^(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")
_REPOSITORY_RE: Final = re.compile(rf"^{_NAME}$")
_IMAGE_NAME_RE: Final = re.compile(rf"^{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
_TAG_RE: Final = re.compile(rf"^{_TAG}$")
_SHA256_RE: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
# Docker's limit on the name part of a reference.
_MAX_NAME_LENGTH: Final = 255


class ImageSource(Protocol):
    """The image fields of a component spec (`policy.ImageSpec` is one)."""

    @property
    def repository(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class Reference:
    """A parsed image reference: `<repository>/<name>[:<tag>][@<digest>]`."""

    # Everything before the last "/", e.g. "nvcr.io/nvidia"; "" for a bare name.
    repository: str
    # The last path component, e.g. "driver".
    name: str
    tag: str | None
    digest: str | None

    @property
    def version(self) -> str | None:
        """What a ClusterPolicy's `version` field would hold: the digest if pinned, else the tag."""
        return self.digest or self.tag


def parse_reference(text: str) -> Reference | None:
    """Parse an image reference; None when it is not one a container runtime accepts."""
    match = _REFERENCE_RE.match(text)
    if match is None or len(match["name"]) > _MAX_NAME_LENGTH:
        return None
    repository, _, name = match["name"].rpartition("/")
    return Reference(repository, name, match["tag"], match["digest"])


def _compose(repository: str, name: str, version: str) -> str:
    separator = "@" if version.startswith("sha256:") else ":"
    return f"{repository}/{name}{separator}{version}"


def _bad_version(version: str) -> bool:
    if version.startswith("sha256:"):
        return _SHA256_RE.match(version) is None
    return _TAG_RE.match(version) is None


def resolve_image(
    source: ImageSource, *, component: str, env: Mapping[str, str]
) -> ImageRef | policy_problems.PolicyProblem:
    """The image reference for one component, or the problem that prevents one.

    `component` is the component's field under `spec` (a key of `DEFAULT_IMAGE_ENV`);
    `env` is the operator's environment.
    """
    field = f"spec.{component}"
    env_var = DEFAULT_IMAGE_ENV[component]
    repository, name, version = source.repository.strip(), source.name.strip(), source.version.strip()

    if name and not repository and not version and ("@" in name or ":" in name.rpartition("/")[2]):
        # `image` alone carries a tag or digest: it is meant as a full reference.
        if parse_reference(name) is None or "/" not in name:
            return policy_problems.PolicyProblem(
                field=f"{field}.image",
                message=f"{name!r} is not a full image reference (registry/path/name:tag or @sha256:digest)",
                fix=f"give a full reference such as nvcr.io/nvidia/driver:570.124.06, "
                f"or set {field}.repository, {field}.image and {field}.version separately",
            )
        return ImageRef(name)
    if "@" in name or ":" in name.rpartition("/")[2]:
        # A tag inside `image` next to `repository` or `version` would give name:tag:version.
        return policy_problems.PolicyProblem(
            field=f"{field}.image",
            message=f"{name!r} carries a tag or digest while {field}.repository or {field}.version "
            "is also set",
            fix=f"put only the name in {field}.image and the tag in {field}.version, "
            f"or unset {field}.repository and {field}.version and give a full reference",
        )
    if "/" in name and not repository:
        # `image` with its path (nvcr.io/nvidia/driver): split off the repository.
        repository, _, name = name.rpartition("/")

    from_spec = {"repository": repository, "image": name, "version": version}
    default: Reference | None = None
    default_text = env.get(env_var, "").strip()
    if not all(from_spec.values()) and default_text:
        default = parse_reference(default_text)
        if default is None:
            # The operator's own default is broken: only the Deployment can fix it.
            return policy_problems.PolicyProblem(
                field=field,
                message=f"the operator's default image {env_var}={default_text!r} "
                "is not a valid image reference",
                fix=f"correct {env_var} on the operator Deployment (CSV or Helm values), "
                f"or set {field}.repository, {field}.image and {field}.version",
            )
    if default is not None:
        repository = repository or default.repository
        name = name or default.name
        version = version or default.version or ""

    missing = [
        part
        for part, value in (("repository", repository), ("image", name), ("version", version))
        if not value
    ]
    if missing:
        # Nothing to take the missing parts from (no default, or a default without them).
        fields = ", ".join(f"{field}.{part}" for part in missing)
        unset = [f"{field}.{part}" for part, value in from_spec.items() if not value]
        have_default = (
            f"{env_var}={default_text!r} has no {' or '.join(missing)}"
            if default_text
            else f"the operator has no {env_var}"
        )
        return policy_problems.PolicyProblem(
            field=f"{field}.{missing[0]}",
            message=f"{', '.join(unset)} {'is' if len(unset) == 1 else 'are'} unset and {have_default}",
            fix=f"set {fields} in the ClusterPolicy, or set {env_var} to a full image reference "
            "on the operator Deployment",
        )

    # Each part is valid on its own, or we name the one that is not and where it came from.
    for part, value, valid in (
        ("repository", repository, _REPOSITORY_RE.match(repository) is not None),
        ("image", name, _IMAGE_NAME_RE.match(name) is not None),
        ("version", version, not _bad_version(version)),
    ):
        if not valid:
            origin = f"{field}.{part}" if from_spec[part] else f"{env_var} (its {part})"
            return policy_problems.PolicyProblem(
                field=f"{field}.{part}" if from_spec[part] else field,
                message=f"{origin} {value!r} is not valid in an image reference",
                fix=f"set {field}.{part} to a valid value"
                + (" (a tag such as 570.124.06, or sha256:<64 hex digits>)" if part == "version" else ""),
            )
    reference = _compose(repository, name, version)
    if parse_reference(reference) is None:
        # Valid parts can still make an overlong reference.
        return policy_problems.PolicyProblem(
            field=field,
            message=f"{reference!r} is not a valid image reference",
            fix=f"shorten {field}.repository or {field}.image",
        )
    return ImageRef(reference)


# NFD's os_release.ID values whose driver images NVIDIA tags by major version only (v26.7.0
# internal/state/nodepool.go getOSTag and controllers/state_manager.go getGPUNodeOSInfo; NVIDIA
# moved RHEL's driver images to major-only tags in 892d53bac, "use only major version for
# rhel-specific driver images", 2026-07-01, after RHEL 10 in 859047d39).
MAJOR_ONLY_OS_IDS = frozenset({"rhel", "rocky", "ol"})


def nvidia_os_tag(os_id: str, version_id: str) -> str:
    """The OS suffix NVIDIA's operator (v26.7.0) gives a node's driver image: `<ID><VERSION_ID>`
    from NFD's os_release labels, with only the major version for RHEL, Rocky and Oracle Linux:
    `ubuntu22.04`, `rhcos4.16` (RHCOS before OpenShift 4.19), `rhel9` (RHCOS 9.6 of 4.19 and
    later, or RHEL 9.4), `rhel10`."""
    if os_id in MAJOR_ONLY_OS_IDS:
        version_id = version_id.split(".")[0]
    return f"{os_id}{version_id}"


def driver_image_for(base: ImageRef, os_tag: str) -> ImageRef:
    """The driver image for one node group: `base`'s tag plus `-<os_tag>`.

    NVIDIA publishes one driver image per OS, tagged `<version>-<os>` (`nvidia_os_tag`):
    `nvcr.io/nvidia/driver:570.124.06-ubuntu22.04`, `…:570.124.06-rhcos4.16`, `…:580.95.05-rhel9`.
    Precompiled images are tagged by driver *branch*, kernel and OS:
    `…:570-5.15.0-1043-azure-ubuntu22.04`, so `base` carries version `570` and
    `os_tag` is `precompiled_os_tag(kernel, os)`.  A digest (`@sha256:…`)
    pins one image for every OS and is returned unchanged, as NVIDIA does.
    An empty `os_tag` returns `base`.

    Raises ValueError when `base` is not a tagged reference or the tag would be
    invalid (e.g. a kernel version with characters a tag cannot hold).
    """
    reference = parse_reference(base)
    if reference is None:
        raise ValueError(f"{base!r} is not a valid image reference")
    if reference.digest is not None or not os_tag:
        # Pinned by digest, or no OS to add: the same image everywhere.
        return base
    if reference.tag is None:
        raise ValueError(f"{base!r} has no tag to add the OS suffix {os_tag!r} to")
    tag = f"{reference.tag}-{os_tag}"
    if _TAG_RE.match(tag) is None:
        raise ValueError(f"{tag!r} is not a valid image tag (from {base!r} and OS suffix {os_tag!r})")
    prefix = f"{reference.repository}/" if reference.repository else ""
    return ImageRef(f"{prefix}{reference.name}:{tag}")


def precompiled_os_tag(kernel: str, os_tag: str) -> str:
    """The suffix of a precompiled driver image: `<kernel>-<os>`, e.g. `5.15.0-1043-azure-ubuntu22.04`."""
    return f"{kernel}-{os_tag}"
