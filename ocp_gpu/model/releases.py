"""The operand images this operator release ships with, by the operator env var that carries each.

The one source for the CSV's and the Helm chart's Deployment env (hack/generate.py),
for the demo and tests, and the built-in defaults of both `ocp-gpu run` and
`ocp-gpu render` (`with_release_defaults`): the environment overrides them.  The
defaults are the images the install runs, by digest where one is pinned; `render --tags`
asks for the tags instead, and `release_tags` names the tag behind each digest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

RELEASE_IMAGES: Final = {
    "DRIVER_IMAGE": "nvcr.io/nvidia/driver:550.90.07",
    "DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.10",
    "CONTAINER_TOOLKIT_IMAGE": "nvcr.io/nvidia/k8s/container-toolkit:v1.16.2-ubuntu20.04",
    "DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2",
    "DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04",
    "DCGM_EXPORTER_IMAGE": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.7-3.5.0-ubuntu22.04",
    "GFD_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.16.2",
    "VALIDATOR_IMAGE": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.6.2",
    "MIG_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.8.0-ubuntu20.04",
}

# The same components pinned by digest, as NVIDIA's certified OpenShift bundle for GPU
# Operator v24.6.2 (the release the tags above name) publishes them in its CSV's env and
# relatedImages.  The OLM bundle and the Helm chart install these (disconnected mirroring
# with oc-mirror copies exactly what relatedImages lists, and a digest never moves).
# NB: NVIDIA's OpenShift variants (ubi/rhel based) can differ from the tags above; the
# driver digest pins one image for every OS (images.driver_image_for keeps a digest as
# is) until an admin sets `driver.version`, which replaces it with a tag.
RELEASE_DIGESTS: Final = {
    "DRIVER_IMAGE": (
        "nvcr.io/nvidia/driver@sha256:858de27c152669f5a3cf4287406405b16dd5bb70c0373324eb735511997bb415"
    ),
    "DRIVER_MANAGER_IMAGE": (
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager"
        "@sha256:740abc3ff657545c10effd5354f09af525200ed9a1b7623f0c2e8c7bd9e4a4e2"
    ),
    "CONTAINER_TOOLKIT_IMAGE": (
        "nvcr.io/nvidia/k8s/container-toolkit@sha256:7bcc188703f2fac630f7a4ff8960e6733ac3a29adf6a946533b796d9a27b8acf"
    ),
    "DEVICE_PLUGIN_IMAGE": (
        "nvcr.io/nvidia/k8s-device-plugin@sha256:7ad2c9f71fe06f9f7745ac8635f46740fbdff4f11edd468addfab81afcdfa534"
    ),
    "DCGM_IMAGE": (
        "nvcr.io/nvidia/cloud-native/dcgm@sha256:15dab1273345df4a5844c4c761d064dbc4b592101251dc39174e597137123027"
    ),
    "DCGM_EXPORTER_IMAGE": (
        "nvcr.io/nvidia/k8s/dcgm-exporter@sha256:21f4c8b88716e8e6f732f9fb4c2efaef937c227491a8631c5e55036f80f39a4d"
    ),
    "GFD_IMAGE": (
        "nvcr.io/nvidia/k8s-device-plugin@sha256:7ad2c9f71fe06f9f7745ac8635f46740fbdff4f11edd468addfab81afcdfa534"
    ),
    "VALIDATOR_IMAGE": (
        "nvcr.io/nvidia/cloud-native/gpu-operator-validator"
        "@sha256:96380b95396b7f29d2ed2ec8ef1ad5a8bcf9f55051db723295dc0a20db845331"
    ),
    "MIG_MANAGER_IMAGE": (
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager"
        "@sha256:781fb47e264d9e0fbc8da5bd046e5e678316c866bc36ddd4b56d4eb0de682d5b"
    ),
}

# The operator's own image.  NB: it is not built or published from here (no container
# engine, no registry), so there is no digest to pin yet: the tag names the release.
OPERATOR_IMAGE: Final = "quay.io/ocp-gpu/ocp-gpu:v0.1.0"


def installed_images() -> dict[str, str]:
    """The operand image env the OLM bundle and the Helm chart set: by digest where known."""
    return {env: RELEASE_DIGESTS.get(env, image) for env, image in RELEASE_IMAGES.items()}


def release_images(*, by_tag: bool = False) -> dict[str, str]:
    """This release's operand images by env var: as the install sets them, or by tag."""
    return dict(RELEASE_IMAGES) if by_tag else installed_images()


def release_tags() -> dict[str, str]:
    """Each pinned digest reference -> the release's tag reference for the same component."""
    return {digest: RELEASE_IMAGES[env] for env, digest in RELEASE_DIGESTS.items()}


def with_release_defaults(env: Mapping[str, str], *, by_tag: bool = False) -> dict[str, str]:
    """`env` with this release's image under every `*_IMAGE` variable it leaves unset.

    One rule for `ocp-gpu run` (its process environment) and `ocp-gpu render` (the
    Deployment's env and `--env`): a variable that is set wins, a missing one is the
    release's, by digest as the OLM bundle and the Helm chart set it (or by tag: `by_tag`),
    so that both run and show what an install runs.
    NB: set but empty is kept: model/images reports it by name rather than guessing.
    """
    return {**release_images(by_tag=by_tag), **env}
