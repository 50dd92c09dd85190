"""What platform the operator runs on (whether drivers are built with the Driver Toolkit: driver_strategy.py).

Decides from the API groups the server serves (discovery), never from a flag or
an environment variable, so the same image works on OpenShift and on vanilla
Kubernetes.  OpenShift means both `config.openshift.io` (ClusterVersion, Proxy)
and `image.openshift.io` (the driver-toolkit ImageStream) are served: the
Driver Toolkit mode needs both.  It never calls discovery itself.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection

from ocp_gpu.model import apis


class PlatformKind(enum.StrEnum):
    OPENSHIFT = "openshift"
    KUBERNETES = "kubernetes"


@dataclasses.dataclass(frozen=True)
class Platform:
    kind: PlatformKind
    # Why: for the operator's log and the ClusterPolicy's status.
    reason: str

    @property
    def is_openshift(self) -> bool:
        return self.kind is PlatformKind.OPENSHIFT

    @property
    def value(self) -> str:
        """The kind's wire value, as written to the ClusterPolicy's status.platform."""
        return self.kind.value


def detect_platform(api_groups: Collection[str]) -> Platform:
    """The platform, from the names of the API groups the server serves."""
    has_config = apis.CONFIG_GROUP in api_groups
    has_image = apis.IMAGE_GROUP in api_groups
    if has_config and has_image:
        # Both OpenShift groups: OpenShift.
        return Platform(PlatformKind.OPENSHIFT, f"{apis.CONFIG_GROUP} and {apis.IMAGE_GROUP} are served")
    if has_config:
        # OpenShift's config API without its image API (e.g. MicroShift, or the image
        # registry capability disabled): no ImageStreams, so no Driver Toolkit mode.
        return Platform(
            PlatformKind.KUBERNETES,
            f"{apis.CONFIG_GROUP} is served but {apis.IMAGE_GROUP} is not: no driver-toolkit ImageStream, "
            "so drivers are keyed by OS as on vanilla Kubernetes",
        )
    if has_image:
        # An image API without OpenShift's config API: not an OpenShift we can manage.
        return Platform(
            PlatformKind.KUBERNETES, f"{apis.IMAGE_GROUP} is served but {apis.CONFIG_GROUP} is not"
        )
    # Neither: vanilla Kubernetes.
    return Platform(PlatformKind.KUBERNETES, "no OpenShift API groups are served")
