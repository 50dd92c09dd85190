"""The API groups, versions and resources the operator reads and writes, each named once.

Plain strings for the kube/ adapters, the kopf registrations, the CLI's REST paths and
the harness.  Pure data: no I/O.
"""

from __future__ import annotations

from typing import Final

# The ClusterPolicy CRD (ocp_gpu/crds/clusterpolicies.nvidia.com.yaml), NVIDIA's names.
POLICY_GROUP: Final = "nvidia.com"
POLICY_VERSION: Final = "v1"
POLICY_PLURAL: Final = "clusterpolicies"
POLICY_KIND: Final = "ClusterPolicy"
POLICY_API_VERSION: Final = f"{POLICY_GROUP}/{POLICY_VERSION}"
# The collection's REST path, for raw GETs (`ocp-gpu render --live`, `ocp-gpu status`).
POLICY_PATH: Final = f"/apis/{POLICY_API_VERSION}/{POLICY_PLURAL}"
# The NVIDIADriver CRD (ocp_gpu/crds/nvidiadrivers.nvidia.com.yaml), NVIDIA's names.
NVIDIA_DRIVER_GROUP: Final = POLICY_GROUP
NVIDIA_DRIVER_VERSION: Final = "v1alpha1"
NVIDIA_DRIVER_PLURAL: Final = "nvidiadrivers"
NVIDIA_DRIVER_KIND: Final = "NVIDIADriver"
NVIDIA_DRIVER_API_VERSION: Final = f"{NVIDIA_DRIVER_GROUP}/{NVIDIA_DRIVER_VERSION}"
NVIDIA_DRIVER_PATH: Final = f"/apis/{NVIDIA_DRIVER_API_VERSION}/{NVIDIA_DRIVER_PLURAL}"
# NVIDIA's GPUCluster CRD (ocp_gpu/crds/gpuclusters.nvidia.com.yaml, as NVIDIA ships it): a singleton
# named `gpu-cluster` (its schema refuses any other name).
GPU_CLUSTER_GROUP: Final = POLICY_GROUP
GPU_CLUSTER_VERSION: Final = "v1alpha1"
GPU_CLUSTER_PLURAL: Final = "gpuclusters"
GPU_CLUSTER_KIND: Final = "GPUCluster"
GPU_CLUSTER_API_VERSION: Final = f"{GPU_CLUSTER_GROUP}/{GPU_CLUSTER_VERSION}"
# OpenShift's ClusterVersion and Proxy live here.
CONFIG_GROUP: Final = "config.openshift.io"
# The driver-toolkit ImageStream lives here.
IMAGE_GROUP: Final = "image.openshift.io"
