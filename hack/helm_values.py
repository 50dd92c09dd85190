"""The Helm chart's values.yaml (used by hack/generate.py).

The chart takes NVIDIA's gpu-operator chart values as they are (the same keys, the same
meaning; see charts/ocp-gpu/templates/_helpers.tpl), so its defaults are laid out as NVIDIA's
values.yaml at the release we track, with our own comments.  Every operand image default
(`repository`, `image`, `version`) comes from the release table (ocp_gpu/model/releases.py,
split with model/images.parse_reference), and the operator's own image from
releases.OPERATOR_IMAGE.  An operand the table does not carry yet keeps NVIDIA's default for it
(NVIDIA_ONLY below), so the chart's ClusterPolicy still names the image NVIDIA's chart would.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ocp_gpu.install import install_manifests
from ocp_gpu.model import images, releases

TARGET = "charts/ocp-gpu/values.yaml"

# Operand images the release table does not carry (yet), by the env var NVIDIA's CSV names them
# with: NVIDIA's chart defaults at v26.7.0 (deployments/gpu-operator/values.yaml).
NVIDIA_ONLY = {
    "GDS_IMAGE": "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4",
    "GDRCOPY_IMAGE": "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6",
    "VFIO_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
    "SANDBOX_DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0",
    "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.5",
    "CC_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3",
    "DRA_DRIVER_IMAGE": "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0",
}

# What each <<VAR>> of TEMPLATE is written from (an image env var of the table, or the operator).
OPERATOR = "OPERATOR"


def image_parts(variable: str) -> tuple[str, str, str]:
    """(repository, image, version) of the default image behind `variable`."""
    if variable == OPERATOR:
        reference = releases.OPERATOR_IMAGE
    else:
        reference = releases.RELEASE_IMAGES.get(variable) or NVIDIA_ONLY[variable]
    parsed = images.parse_reference(reference)
    if parsed is None or not parsed.version:
        raise ValueError(f"{variable}={reference!r} is not a full image reference")
    return parsed.repository, parsed.name, parsed.version


def _image_lines(match: re.Match[str]) -> str:
    indent, variable = match["indent"], match["variable"]
    if variable == "RESOURCES":
        text = yaml.safe_dump(dict(install_manifests.RESOURCES), sort_keys=False).rstrip("\n")
        return "\n".join(indent + line for line in text.splitlines())
    repository, name, version = image_parts(variable)
    return f'{indent}repository: "{repository}"\n{indent}image: "{name}"\n{indent}version: "{version}"'


def render(root: Path | None = None) -> str:
    """The expected content of charts/ocp-gpu/values.yaml."""
    del root  # built from the imported package
    text = re.sub(r"(?m)^(?P<indent> *)<<(?P<variable>[A-Z_]+)>>$", _image_lines, TEMPLATE)
    return HEADER + text


HEADER = (
    "# generated from hack/helm_values.py (image defaults: ocp_gpu/model/releases.py);\n"
    "# edit that and run hack/generate.py\n"
)

# The values, in NVIDIA's layout.  A line `<<VAR>>` becomes repository/image/version.
TEMPLATE = """\
# Values of the ocp-gpu chart.  They are NVIDIA's gpu-operator chart values: the same keys with
# the same meaning, so NVIDIA's values.yaml and the --set lines of NVIDIA's documentation work
# unchanged (docs/helm.md).  values.schema.json checks them.
#
# Two kinds of keys:
# - the chart's own (clusterPolicy, platform, nfd, node-feature-discovery, gpuCluster,
#   extraObjects, most of `operator`, driver.nvidiaDriverCRD, the create/data of the config
#   sections): they shape the chart's objects (the operator Deployment, ConfigMaps, hooks) and
#   never reach the ClusterPolicy;
# - ClusterPolicy sections (daemonsets, driver, toolkit, devicePlugin, ...): they become the
#   ClusterPolicy `cluster-policy` as NVIDIA's chart writes it (an empty string, list or map is
#   left out; driver.upgradePolicy.gpuPodDeletion is written as podDeletion).  A ClusterPolicy
#   field NVIDIA's chart does not know (e.g. operator.defaultRuntime,
#   devicePlugin.resourceConfig) is copied as given.  Field names and defaults:
#   crds/nvidia.com_clusterpolicies.yaml, or `kubectl explain clusterpolicy.spec.driver`.

platform:
  # OpenShift (NVIDIA's chart adds its restricted-readonly SCC there).  ocp-gpu installs on
  # OpenShift from OperatorHub; the chart renders nothing extra for it.
  openshift: false

nfd:
  # Install Node Feature Discovery as a dependency (run `helm dependency update` first).
  # false where NFD already runs.
  enabled: true
  # The chart's NodeFeatureRule, rendered when NFD's NodeFeatureRule API exists: NVIDIA PCI
  # devices labelled feature.node.kubernetes.io/pci-10de.present, whatever NFD's own config.
  # NB: NVIDIA's chart defaults to false and its rule labels kernel modules
  # (nvidia.com/gds.capable, ...), which ocp-gpu does not read.
  nodefeaturerules: true

psa:
  # Label the operand namespace for Pod Security Admission (privileged).
  enabled: false

cdi:
  enabled: true
  nriPluginEnabled: false

sandboxWorkloads:
  enabled: false
  # container, vm-passthrough or vm-vgpu: the workload of a node without the
  # nvidia.com/gpu.workload.config label.
  defaultWorkload: "container"
  mode: "kubevirt"

hostPaths:
  # The host's root filesystem, as seen by operands that chroot into it.
  rootFS: "/"
  # Where the driver container installs the driver on the host.
  driverInstallDir: "/run/nvidia/driver"
  # kubeletRootDir: ""   (empty: /var/lib/kubelet)

# For every operand DaemonSet.  The driver DaemonSets always use OnDelete (upgrades decide).
daemonsets:
  labels: {}
  annotations: {}
  priorityClassName: system-node-critical
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
  updateStrategy: "RollingUpdate"
  rollingUpdate:
    maxUnavailable: "1"

# The validator and the node status exporter run ocp-gpu's own commands (`ocp-gpu validate`,
# `ocp-gpu node-status`), so their image is the operator's: leave repository/image/version
# unset.  NVIDIA's validator image (nvcr.io/nvidia + gpu-operator, in NVIDIA's values.yaml)
# stands for it too and is not written into the ClusterPolicy.
validator:
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  args: []
  resources: {}
  hostNetwork: false
  plugin:
    env: []

operator:
  # --- the operator Deployment (chart only) ---
  # Its image is <repository>/<image>:<version>; `image` alone may hold a full reference
  # (registry/name:tag or @sha256:digest).  NVIDIA's own operator image (nvcr.io/nvidia +
  # gpu-operator, the default of NVIDIA's values.yaml) stands for this chart's operator: ocp-gpu
  # cannot run NVIDIA's image, so the release's ocp-gpu image is used instead.
  <<OPERATOR>>
  imagePullPolicy: IfNotPresent
  # Secret names.
  imagePullSecrets: []
  # Added to the operator container's env.
  env: []
  priorityClassName: system-node-critical
  nodeSelector:
    kubernetes.io/os: linux
  tolerations: []
  affinity: {}
  # Pod annotations (NVIDIA's chart); podAnnotations is taken too.
  annotations: {}
  # Labels for the chart's objects and the operator pod.
  labels: {}
  # ocp_gpu/install/install_manifests.py RESOURCES (measured; see there)
  resources:
    <<RESOURCES>>
  logging:
    # debug gives the operator's debug log (`ocp-gpu --verbose`); so does develMode: true.
    # timeEncoding (NVIDIA's zap setting) has no equivalent: ocp-gpu logs ISO 8601 times.
    level: info
    develMode: false
    timeEncoding: epoch
  # Apply the chart's CRDs before `helm upgrade` (a pre-upgrade hook Job running
  # `ocp-gpu crds apply` from the operator image; helm never upgrades crds/ by itself).
  upgradeCRD: true
  # Delete the chart's CRDs after `helm uninstall` (a post-delete hook Job, `ocp-gpu crds
  # delete`), and with them every ClusterPolicy and NVIDIADriver.
  cleanupCRD: false
  # --- ClusterPolicy fields ---
  runtimeClass: nvidia
  use_ocp_driver_toolkit: false
  # defaultRuntime (containerd, crio, docker): the runtime the toolkit configures (ocp-gpu reads
  # it; NVIDIA's chart does not pass it on).  Also initContainer, metrics.serviceMonitor.

mig:
  # single or mixed: how MIG devices are advertised.
  strategy: single

driver:
  enabled: true
  # An NVIDIADriver named default from these values instead of the driver section of the
  # ClusterPolicy (chart only; NVIDIA's templates/nvidiadriver.yaml).
  nvidiaDriverCRD:
    enabled: false
    deployDefaultCR: true
    driverType: gpu
    nodeSelector: {}
  kernelModuleType: "auto"
  usePrecompiled: false
  <<DRIVER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  startupProbe:
    initialDelaySeconds: 60
    periodSeconds: 10
    timeoutSeconds: 60
    failureThreshold: 120
  rdma:
    enabled: false
    useHostMofed: false
  upgradePolicy:
    autoUpgrade: true
    # 0: no limit
    maxParallelUpgrades: 1
    maxUnavailable: 25%
    waitForCompletion:
      timeoutSeconds: 0
      podSelector: ""
    gpuPodDeletion:
      force: false
      timeoutSeconds: 300
      deleteEmptyDir: false
    drain:
      enable: false
      force: false
      podSelector: ""
      timeoutSeconds: 300
      deleteEmptyDir: false
  manager:
    <<DRIVER_MANAGER_IMAGE>>
    imagePullPolicy: IfNotPresent
    env: []
  env: []
  resources: {}
  repoConfig:
    configMapName: ""
  certConfig:
    name: ""
  licensingConfig:
    secretName: ""
    nlsEnabled: true
  virtualTopology:
    config: ""
  kernelModuleConfig:
    name: ""
  secretEnv: ""
  hostNetwork: false

toolkit:
  enabled: true
  <<CONTAINER_TOOLKIT_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  installDir: "/usr/local/nvidia"
  hostNetwork: false

devicePlugin:
  enabled: true
  <<DEVICE_PLUGIN_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  args: []
  env: []
  resources: {}
  # The device plugin's config ConfigMap: `name` of an existing one, or create: true with `data`
  # (one key per config, e.g. `any: |-` with a time-slicing config) to have the chart create
  # it in the release's namespace.  `default` is the key nodes use without the
  # nvidia.com/device-plugin.config label.
  config:
    create: false
    name: ""
    default: ""
    data: {}
  # NB: NVIDIA's chart does not pass mps on to the ClusterPolicy; neither does this one.
  mps:
    root: "/run/nvidia/mps"
  hostNetwork: false

dcgm:
  # the standalone hostengine; dcgm-exporter runs an embedded one without it
  enabled: false
  <<DCGM_IMAGE>>
  imagePullPolicy: IfNotPresent
  args: []
  env: []
  resources: {}
  hostNetwork: false

dcgmExporter:
  enabled: true
  annotations: {}
  <<DCGM_EXPORTER_IMAGE>>
  imagePullPolicy: IfNotPresent
  env: []
  resources: {}
  hostPID: false
  hostNetwork: false
  enablePodLabels: false
  enablePodUID: false
  service:
    internalTrafficPolicy: Cluster
  serviceMonitor:
    enabled: true
    interval: 15s
    scrapeTimeout: 10s
    honorLabels: false
    additionalLabels: {}
    relabelings: []
  # Custom metrics: `name` of an existing ConfigMap (key dcgm-metrics.csv), or create: true
  # with `data` (the CSV text) to have the chart create it.
  # config:
  #   name: custom-dcgm-exporter-metrics
  #   create: true
  #   data: |-
  #     DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).

gfd:
  enabled: true
  <<GFD_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  hostNetwork: false

migManager:
  enabled: true
  <<MIG_MANAGER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  # MIG geometries: `name` of an existing ConfigMap (key config.yaml), or create: true with
  # `data` to have the chart create it; `default` is the geometry of unlabelled nodes.
  config:
    default: "all-disabled"
    create: false
    name: ""
    data: {}
  gpuClientsConfig:
    name: ""
  hostNetwork: false

nodeStatusExporter:
  enabled: false
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  resources: {}
  hostNetwork: false

gds:
  enabled: false
  <<GDS_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  args: []

gdrcopy:
  enabled: false
  <<GDRCOPY_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  args: []

vgpuManager:
  enabled: false
  # the vGPU host driver image is licensed: the admin builds and names it
  repository: ""
  image: vgpu-manager
  version: ""
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  driverManager:
    <<DRIVER_MANAGER_IMAGE>>
    imagePullPolicy: IfNotPresent
    env: []
  kernelModuleConfig:
    name: ""
  hostNetwork: false

vgpuDeviceManager:
  enabled: true
  <<VGPU_DEVICE_MANAGER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  config:
    name: ""
    default: "default"
  hostNetwork: false

vfioManager:
  enabled: true
  <<VFIO_MANAGER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  driverManager:
    <<DRIVER_MANAGER_IMAGE>>
    imagePullPolicy: IfNotPresent
    env: []
  hostNetwork: false

kataManager:
  enabled: false
  config: {}
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  env: []
  resources: {}
  hostNetwork: false

sandboxDevicePlugin:
  enabled: true
  <<SANDBOX_DEVICE_PLUGIN_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  args: []
  env: []
  resources: {}
  hostNetwork: false

kataSandboxDevicePlugin:
  enabled: true
  <<KATA_SANDBOX_DEVICE_PLUGIN_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  args: []
  env: []
  resources: {}
  hostNetwork: false

ccManager:
  enabled: true
  defaultMode: "on"
  <<CC_MANAGER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  resources: {}
  hostNetwork: false

# PodSecurityPolicies are gone from Kubernetes (1.25); NVIDIA's chart dropped the section.
psp: {}

clusterPolicy:
  # Create the ClusterPolicy `cluster-policy` from these values (false: bring your own).
  # `create` is this chart's older name for the same switch; both must not be false.
  deployCR: true

# NVIDIA's GPUCluster (DRA) CR `gpu-cluster` from the draDriver values (deployCR: true): it owns
# the DRA driver beside the ClusterPolicy, whose draDriver.enabled must then stay false
# (docs/dra.md).
gpuCluster:
  deployCR: false

# NVIDIA's DRA driver (ClusterPolicy draDriver): off unless enabled; its image is the operator's
# DRA_DRIVER_IMAGE (repository, image, version: not written); gpus and computeDomains are
# NVIDIA's GPUCluster's (gpuCluster.deployCR), not written to the ClusterPolicy.
draDriver:
  # enabled: true deploys it
  <<DRA_DRIVER_IMAGE>>
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  featureGates: {}
  gpus:
    kubeletPlugin: {}
  computeDomains:
    enabled: true
    controller: {}
    kubeletPlugin: {}

# More manifests to install with the release: maps, or strings (both go through `tpl`, so
# they may use {{ .Release.Namespace }} and the values).
extraObjects: []

# Values of the Node Feature Discovery chart (used when nfd.enabled): NFD itself labels NVIDIA
# PCI devices by vendor (pci-10de.present) and keeps network devices in view.
node-feature-discovery:
  priorityClassName: system-node-critical
  gc:
    enable: true
    replicaCount: 1
    serviceAccount:
      name: node-feature-discovery
      create: false
  worker:
    serviceAccount:
      name: node-feature-discovery
      # the master's below is the one
      create: false
    tolerations:
    - key: "node-role.kubernetes.io/control-plane"
      operator: "Equal"
      value: ""
      effect: "NoSchedule"
    - key: nvidia.com/gpu
      operator: Exists
      effect: NoSchedule
    config:
      sources:
        pci:
          deviceClassWhitelist: ["02", "0200", "0207", "0300", "0302"]
          deviceLabelFields: [vendor]
  master:
    serviceAccount:
      name: node-feature-discovery
      create: true
    config:
      extraLabelNs: ["nvidia.com"]
"""
