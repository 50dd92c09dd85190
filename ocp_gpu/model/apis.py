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
# OpenShift's ClusterVersion and Proxy live here.
CONFIG_GROUP: Final = "config.openshift.io"
# The driver-toolkit ImageStream lives here.
IMAGE_GROUP: Final = "image.openshift.io"
