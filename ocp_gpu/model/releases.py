"""The operand images this operator release ships with, by the operator env var that carries each.

The one source for the CSV's and the Helm chart's Deployment env (hack/generate.py)
and for the demo and tests.  The operator itself reads only its environment.
"""

from __future__ import annotations

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
}
