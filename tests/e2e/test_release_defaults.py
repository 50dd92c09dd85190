"""We test these aspects of image defaults on the local control plane:

- `ocp-gpu run` without any `*_IMAGE` variable uses the release's images (model/releases.py) as
  the OLM bundle and the Helm chart install them (by digest), so the policy is `ready`, not
  `InvalidSpec`, and the driver DaemonSet runs the release's driver;
- a variable that is set overrides the release's default.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from ocp_gpu.model import labels, releases

from .conftest import READY_S, Operated, read_policy, wait_for

pytestmark = pytest.mark.e2e


def images(kube: client.ApiClient, namespace: str) -> dict[str, str]:
    """DaemonSet name -> its first container's image."""
    return {
        ds.metadata.name: ds.spec.template.spec.containers[0].image
        for ds in client.AppsV1Api(kube).list_namespaced_daemon_set(namespace).items
    }


@pytest.mark.parametrize("toolkit_override", [None, "mirror.example/k8s/container-toolkit:v9"])
def test_run_without_image_env_uses_the_release_defaults(
    kube: client.ApiClient,
    namespace: str,
    gpu_node: str,
    operated: Operated,
    toolkit_override: str | None,
) -> None:
    operated.apply()
    operated.start(image_env={"CONTAINER_TOOLKIT_IMAGE": toolkit_override} if toolkit_override else {})
    wait_for(lambda: (read_policy(kube).get("status") or {}).get("state") == "ready", READY_S, what="ready")
    found = images(kube, namespace)
    driver = [image for name, image in found.items() if name.startswith(labels.DRIVER_DAEMONSET_PREFIX)]
    installed = releases.installed_images()
    # NB: a digest names one image for every OS: it is used as it is (model/images.driver_image_for)
    assert driver and all(image == installed["DRIVER_IMAGE"] for image in driver), driver
    toolkit = found["nvidia-container-toolkit-daemonset"]
    assert toolkit == (toolkit_override or installed["CONTAINER_TOOLKIT_IMAGE"])
