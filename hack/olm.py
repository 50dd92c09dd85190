"""The OLM bundle and file-based catalog, built from the one source (used by hack/generate.py).

Inputs: hack/olm-src/csv-base.yaml (what OperatorHub shows, console descriptors),
ocp_gpu/install (Deployment, ServiceAccount, RBAC), ocp_gpu/model/releases.py (images),
the ClusterPolicy CRD, and the release history below (the upgrade graph).  Outputs:

- bundle/manifests/ocp-gpu.clusterserviceversion.yaml (the CRD copy is hack/generate.py's)
- bundle/metadata/annotations.yaml, bundle/metadata/dependencies.yaml, bundle.Dockerfile
- olm/ocp-gpu/catalog.yaml: the file-based catalog (package, channels `stable` and `v0.x`,
  one olm.bundle per release, the CSV and CRD embedded as olm.bundle.object properties)
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.install import install_manifests
from ocp_gpu.model import releases

PACKAGE = "ocp-gpu"
CHANNELS = ("stable", "v0.x")
DEFAULT_CHANNEL = "stable"
# Every release in upgrade order; each replaces the one before it (the upgrade graph).
# NB: add a release by appending its version; older CSVs stay in the catalog unchanged.
RELEASE_HISTORY: tuple[str, ...] = ("0.1.0",)
VERSION = RELEASE_HISTORY[-1]
CSV_NAME = f"{PACKAGE}.v{VERSION}"
BUNDLE_IMAGE = f"quay.io/ocp-gpu/ocp-gpu-bundle:v{VERSION}"
# NFD labels the GPU and RHCOS facts the operator selects on; OLM installs it first.
NFD_DEPENDENCY = {"packageName": "nfd", "version": ">=4.14.0"}
# The OpenShift range: what the release we pin supports (model/releases.py, from its bundle).
OPENSHIFT_VERSIONS = releases.OPENSHIFT_VERSIONS
# OLM's property for the newest OpenShift minor this bundle may run on (the CVO refuses a cluster
# upgrade past it while the bundle is installed); in the CSV's olm.properties annotation.
MAX_OPENSHIFT_PROPERTY = "olm.maxOpenShiftVersion"
CREATED_AT = "2026-11-23T00:00:00Z"  # NB: fixed, so generating twice gives the same bytes

CSV_TARGET = f"bundle/manifests/{PACKAGE}.clusterserviceversion.yaml"
CRD_SOURCE = "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml"
# The other CRDs the bundle owns (the catalog embeds each; hack/generate.py copies each).
MORE_CRD_SOURCES = (
    "ocp_gpu/crds/nvidiadrivers.nvidia.com.yaml",
    "ocp_gpu/crds/gpuclusters.nvidia.com.yaml",
    # NVIDIA's DRA driver reads and writes these (ComputeDomains); NVIDIA's bundle owns them too.
    "ocp_gpu/crds/computedomains.resource.nvidia.com.yaml",
    "ocp_gpu/crds/computedomaincliques.resource.nvidia.com.yaml",
)
CSV_BASE = "hack/olm-src/csv-base.yaml"
HEADER = (
    f"# generated from {CSV_BASE}, ocp_gpu/install/, ocp_gpu/model/releases.py and\n"
    f"# {CRD_SOURCE} by hack/olm.py; edit those and run hack/generate.py\n"
)

# The bundle's metadata (annotations.yaml and bundle.Dockerfile's labels are the same).
BUNDLE_ANNOTATIONS = {
    "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
    "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
    "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
    "operators.operatorframework.io.bundle.package.v1": PACKAGE,
    "operators.operatorframework.io.bundle.channels.v1": ",".join(CHANNELS),
    "operators.operatorframework.io.bundle.channel.default.v1": DEFAULT_CHANNEL,
    "com.redhat.openshift.versions": OPENSHIFT_VERSIONS,
}

# The ClusterPolicy the console pre-fills (alm-examples): the name every doc uses, and the
# defaults an admin is most likely to change, spelled out.
EXAMPLE_POLICY: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy"},
    "spec": {
        "operator": {"defaultRuntime": "crio", "use_ocp_driver_toolkit": True},
        "daemonsets": {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
        "driver": {
            "enabled": True,
            "upgradePolicy": {
                "autoUpgrade": True,
                "maxParallelUpgrades": 1,
                "maxUnavailable": "25%",
                "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
            },
        },
        "toolkit": {"enabled": True},
        # NVIDIA's example spells CDI out too (v26.7.0 CSV): the default, said where admins look.
        "cdi": {"enabled": True, "nriPluginEnabled": False},
        "devicePlugin": {"enabled": True},
        "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}},
    },
}

# The NVIDIADriver the console pre-fills: one pool, as NVIDIA's sample (used with driver.useNvidiaDriverCRD).
EXAMPLE_NVIDIA_DRIVER: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "NVIDIADriver",
    "metadata": {"name": "gpu-driver"},
    "spec": {
        "driverType": "gpu",
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "imagePullPolicy": "IfNotPresent",
        "usePrecompiled": False,
    },
}


# NVIDIA's GPUCluster as NVIDIA's CSV example has it, less the image (the release's by digest) and
# the DCGM sections (the ClusterPolicy's here): it owns the DRA driver beside a ClusterPolicy whose
# draDriver is off (docs/dra.md).
EXAMPLE_GPU_CLUSTER: dict[str, Any] = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "GPUCluster",
    "metadata": {"name": "gpu-cluster"},
    "spec": {"draDriver": {"imagePullPolicy": "IfNotPresent", "computeDomains": {"enabled": True}}},
}

# NVIDIA's DRA driver's ComputeDomain, as its documentation writes one; and a clique, which the
# driver's daemons write themselves (an internal object: the console does not offer to create it).
EXAMPLE_COMPUTE_DOMAIN: dict[str, Any] = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "imex-domain"},
    "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}},
}
EXAMPLE_COMPUTE_DOMAIN_CLIQUE: dict[str, Any] = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomainClique",
    "metadata": {"name": "imex-domain-clique"},
    "daemons": [{"cliqueID": "0", "nodeName": "gpu-node-1", "ipAddress": "10.0.0.1", "index": 0}],
}
INTERNAL_OBJECTS = ("computedomaincliques.resource.nvidia.com",)


def _dump(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=120)


def _crd(root: Path, source: str = CRD_SOURCE) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((root / source).read_text())
    return loaded


def max_openshift_version(versions: str) -> str | None:
    """The newest OpenShift minor of a com.redhat.openshift.versions range: `v4.18-v4.22` -> `4.22`.

    `=v4.18` is that one release (`4.18`); a lone `v4.18` means "4.18 and later": no maximum
    (`releases.openshift_range`, which the driver branches' support table reads too).
    """
    return releases.openshift_range(versions)[1]


def bundle_properties() -> list[dict[str, str]]:
    """The bundle's own properties (metadata/properties.yaml, and the catalog's olm.bundle).

    NB: there and not in the CSV's `olm.properties` annotation, which the operatorframework
    validators warn about; OLM writes that annotation on the installed CSV from these.
    """
    newest = max_openshift_version(OPENSHIFT_VERSIONS)
    # a string: OLM reads the value as a JSON string ("4.22"), and 4.20 as a number would be 4.2
    return [] if newest is None else [{"type": MAX_OPENSHIFT_PROPERTY, "value": newest}]


def related_images() -> list[dict[str, str]]:
    """The operator and every operand image, named for disconnected mirroring (oc-mirror)."""
    images = [{"name": "ocp-gpu-operator", "image": releases.OPERATOR_IMAGE}]
    seen = {releases.OPERATOR_IMAGE}
    for env, image in releases.installed_images().items():
        if image in seen:
            continue  # NB: GFD and the device plugin share one image; a name per image, not per env
        seen.add(image)
        images.append({"name": env.removesuffix("_IMAGE").lower().replace("_", "-"), "image": image})
    return images


def csv(root: Path) -> dict[str, Any]:
    """The ClusterServiceVersion as a dict."""
    base: dict[str, Any] = yaml.safe_load((root / CSV_BASE).read_text())
    rules = install_manifests.rules()
    metadata = copy.deepcopy(base["metadata"])
    metadata["name"] = CSV_NAME
    annotations = metadata["annotations"]
    annotations["alm-examples"] = json.dumps(
        [
            EXAMPLE_POLICY,
            EXAMPLE_NVIDIA_DRIVER,
            EXAMPLE_GPU_CLUSTER,
            EXAMPLE_COMPUTE_DOMAIN,
            EXAMPLE_COMPUTE_DOMAIN_CLIQUE,
        ],
        indent=2,
    )
    annotations["operators.operatorframework.io/internal-objects"] = json.dumps(list(INTERNAL_OBJECTS))
    annotations["containerImage"] = releases.OPERATOR_IMAGE
    annotations["createdAt"] = CREATED_AT
    if len(RELEASE_HISTORY) > 1:
        annotations["olm.skipRange"] = f">=0.0.0 <{VERSION}"
    spec = copy.deepcopy(base["spec"])
    spec["version"] = VERSION
    if len(RELEASE_HISTORY) > 1:
        spec["replaces"] = f"{PACKAGE}.v{RELEASE_HISTORY[-2]}"
    spec["relatedImages"] = related_images()
    spec["install"] = {
        "strategy": "deployment",
        "spec": {
            "clusterPermissions": [
                {
                    "serviceAccountName": install_manifests.NAME,
                    "rules": [rule.as_manifest() for rule in rules.cluster],
                }
            ],
            "permissions": [
                {
                    "serviceAccountName": install_manifests.NAME,
                    "rules": [rule.as_manifest() for rule in rules.namespace],
                }
            ],
            "deployments": [
                {
                    "name": install_manifests.NAME,
                    "label": dict(install_manifests.APP_LABELS),
                    "spec": install_manifests.deployment_spec(),
                }
            ],
        },
    }
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": metadata,
        "spec": spec,
    }


def render_csv(root: Path) -> str:
    return HEADER + _dump(csv(root))


def render_annotations(root: Path) -> str:
    del root
    return HEADER + _dump({"annotations": BUNDLE_ANNOTATIONS})


def render_dependencies(root: Path) -> str:
    del root
    return HEADER + _dump({"dependencies": [{"type": "olm.package", "value": NFD_DEPENDENCY}]})


def render_properties(root: Path) -> str:
    del root
    return HEADER + _dump({"properties": bundle_properties()})


def render_bundle_dockerfile(root: Path) -> str:
    del root
    labels = "".join(f"LABEL {key}={value}\n" for key, value in BUNDLE_ANNOTATIONS.items())
    return (
        HEADER
        + "# The OLM bundle image (registry+v1): build from the repository root with\n"
        + "#   podman build -f bundle.Dockerfile -t quay.io/ocp-gpu/ocp-gpu-bundle:v<version> .\n"
        + "FROM scratch\n"
        + labels
        + "LABEL com.redhat.delivery.operator.bundle=true\n"
        + "COPY bundle/manifests /manifests/\n"
        + "COPY bundle/metadata /metadata/\n"
    )


def _object(document: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64encode(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).decode()
    return {"type": "olm.bundle.object", "value": {"data": data}}


def catalog_documents(root: Path, bundle_image: str | None = BUNDLE_IMAGE) -> list[dict[str, Any]]:
    """The file-based catalog's documents.

    NB: the bundle's manifests travel inside the catalog as olm.bundle.object properties
    (what `opm render` of the bundle image writes), so a catalog server can answer with
    them; `bundle_image=None` leaves the image out, which makes OLM install from those
    objects without pulling a bundle image (the local end-to-end test has no registry).
    """
    crd = _crd(root)
    the_csv = csv(root)
    icon = the_csv["spec"]["icon"][0]
    documents: list[dict[str, Any]] = [
        {
            "schema": "olm.package",
            "name": PACKAGE,
            "defaultChannel": DEFAULT_CHANNEL,
            "description": the_csv["metadata"]["annotations"]["description"],
            "icon": {"base64data": icon["base64data"], "mediatype": icon["mediatype"]},
        }
    ]
    entries: list[dict[str, Any]] = []
    for index, version in enumerate(RELEASE_HISTORY):
        entry: dict[str, Any] = {"name": f"{PACKAGE}.v{version}"}
        if index:
            entry["replaces"] = f"{PACKAGE}.v{RELEASE_HISTORY[index - 1]}"
            entry["skipRange"] = f">=0.0.0 <{version}"
        entries.append(entry)
    documents += [
        {"schema": "olm.channel", "package": PACKAGE, "name": name, "entries": entries} for name in CHANNELS
    ]
    bundle: dict[str, Any] = {"schema": "olm.bundle", "name": CSV_NAME, "package": PACKAGE}
    if bundle_image:
        bundle["image"] = bundle_image
    crds = [crd, *(_crd(root, source) for source in MORE_CRD_SOURCES)]
    bundle["properties"] = [
        {"type": "olm.package", "value": {"packageName": PACKAGE, "version": VERSION}},
        *(
            {
                "type": "olm.gvk",
                "value": {
                    "group": each["spec"]["group"],
                    "kind": each["spec"]["names"]["kind"],
                    "version": served["name"],
                },
            }
            for each in crds
            for served in each["spec"]["versions"]
        ),
        {
            "type": "olm.package.required",
            "value": {
                "packageName": NFD_DEPENDENCY["packageName"],
                "versionRange": NFD_DEPENDENCY["version"],
            },
        },
        *bundle_properties(),
        _object(the_csv),
        *(_object(each) for each in crds),
    ]
    bundle["relatedImages"] = [
        *([{"name": "", "image": bundle_image}] if bundle_image else []),
        *related_images(),
    ]
    documents.append(bundle)
    return documents


def render_catalog(root: Path) -> str:
    return HEADER + "---\n".join(_dump(document) for document in catalog_documents(root))


TARGETS: dict[str, Callable[[Path], str]] = {
    CSV_TARGET: render_csv,
    "bundle/metadata/annotations.yaml": render_annotations,
    "bundle/metadata/dependencies.yaml": render_dependencies,
    "bundle/metadata/properties.yaml": render_properties,
    "bundle.Dockerfile": render_bundle_dockerfile,
    f"olm/{PACKAGE}/catalog.yaml": render_catalog,
}
