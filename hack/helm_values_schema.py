"""The Helm chart's values.schema.json, built from the ClusterPolicy CRD (used by hack/generate.py).

Each ClusterPolicy spec section is a top-level value (charts/ocp-gpu/templates/clusterpolicy.yaml
copies it into the ClusterPolicy), so its schema is the CRD's schema for that section, turned
from OpenAPI v3 (what the API server checks) into JSON Schema (what Helm checks): `nullable`
becomes a "null" type, `x-kubernetes-int-or-string` becomes integer-or-string, and the other
`x-kubernetes-*` markers are dropped, and an object with named properties takes no others.
The chart's own values (NVIDIA's chart's: clusterPolicy, platform, nfd, gpuCluster, draDriver,
extraObjects, the operator Deployment's keys under `operator`, driver.nvidiaDriverCRD, the
config sections' create/data) are added by hand below.  So `helm install --set driver.version=5`
fails before anything reaches the cluster, naming `driver.version`, and so does a key neither
chart knows (`--set driver.verison=...`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

TARGET = "charts/ocp-gpu/values.schema.json"
CRD = "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml"

_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_ANY_OBJECT: dict[str, Any] = {"type": "object"}
_ANY_LIST: dict[str, Any] = {"type": "array"}


def _closed(description: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "additionalProperties": False,
    }


# The chart's own values beside the ClusterPolicy sections: NVIDIA's chart's (its values.yaml at
# the release we track) and ours.
CHART_VALUES: dict[str, Any] = {
    "clusterPolicy": _closed(
        "The ClusterPolicy cluster-policy made from these values.",
        deployCR={"type": "boolean", "description": "false: bring your own ClusterPolicy"},
        create={"type": "boolean", "description": "this chart's older name for deployCR"},
    ),
    "nfd": _closed(
        "Node Feature Discovery (a chart dependency) and our NodeFeatureRule.",
        enabled={"type": "boolean", "description": "install the NFD chart (helm dependency update)"},
        nodefeaturerules={
            "type": "boolean",
            "description": "a NodeFeatureRule labelling NVIDIA PCI devices, when NFD's API exists",
        },
    ),
    "node-feature-discovery": {
        "type": "object",
        "description": "Values of the Node Feature Discovery chart (see its own documentation).",
    },
    "platform": _closed("The platform (NVIDIA's chart).", openshift={"type": "boolean"}),
    "gpuCluster": _closed(
        "NVIDIA's GPUCluster (DRA) CR gpu-cluster, made from draDriver (deployCR: true).",
        deployCR={"type": "boolean"},
    ),
    "draDriver": {
        "type": "object",
        "description": "NVIDIA's DRA driver: the ClusterPolicy's draDriver, and its GPUCluster CR's.",
    },
    "extraObjects": {
        "type": "array",
        "description": "More manifests to install (maps or strings; each goes through tpl).",
        "items": {"type": ["object", "string"]},
    },
    "nameOverride": {"type": "string", "description": "accepted for NVIDIA's chart (unused)"},
    "fullnameOverride": {"type": "string", "description": "accepted for NVIDIA's chart (unused)"},
    # NB: helm hands every chart its `global` values (subcharts share them).
    "global": {"type": "object"},
}

# Chart-only keys inside ClusterPolicy sections (templates/_helpers.tpl ocp-gpu.valueRules: "chart").
_IMAGE_PULL_SECRETS: dict[str, Any] = {
    "type": "array",
    "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"name": {"type": "string"}}}]},
}
_CONFIG_CREATE: dict[str, Any] = {
    "create": {"type": "boolean", "description": "create the ConfigMap `name` from `data` (chart only)"},
}
SECTION_EXTRAS: dict[str, dict[str, Any]] = {
    "operator": {
        "repository": {
            "type": "string",
            "description": "the operator image's registry and path (chart only)",
        },
        "image": {
            "type": "string",
            "description": "the operator image's name, or a full reference (chart only)",
        },
        "version": {"type": ["string", "number"], "description": "the operator image's tag or digest"},
        "imagePullPolicy": {"type": "string"},
        "imagePullSecrets": _IMAGE_PULL_SECRETS,
        "env": _ANY_LIST,
        "resources": _ANY_OBJECT,
        "tolerations": _ANY_LIST,
        "affinity": _ANY_OBJECT,
        "nodeSelector": _STRING_MAP,
        "priorityClassName": {"type": "string"},
        "annotations": {**_STRING_MAP, "description": "the operator pod's annotations (chart only)"},
        "podAnnotations": _STRING_MAP,
        "labels": {**_STRING_MAP, "description": "labels of the chart's objects (chart only)"},
        "logging": _closed(
            "the operator's log (debug or develMode: --verbose)",
            timeEncoding={"type": "string"},
            level={"type": ["string", "integer"]},
            develMode={"type": "boolean"},
        ),
        "upgradeCRD": {"type": "boolean", "description": "pre-upgrade hook applying the chart's CRDs"},
        "cleanupCRD": {"type": "boolean", "description": "post-delete hook deleting the chart's CRDs"},
    },
    "driver": {
        "nvidiaDriverCRD": _closed(
            "an NVIDIADriver `default` from the driver values (chart only)",
            enabled={"type": "boolean"},
            deployDefaultCR={"type": "boolean"},
            driverType={"type": "string", "enum": ["gpu", "vgpu", "vgpu-host-manager"]},
            nodeSelector=_STRING_MAP,
        ),
    },
}
# Chart-only keys one level further down: section -> key -> extra properties.
NESTED_EXTRAS: dict[str, dict[str, dict[str, Any]]] = {
    "devicePlugin": {"config": {**_CONFIG_CREATE, "data": _STRING_MAP}},
    "migManager": {"config": {**_CONFIG_CREATE, "data": _STRING_MAP}},
    "dcgmExporter": {
        "config": {**_CONFIG_CREATE, "data": {"type": "string", "description": "dcgm-metrics.csv"}}
    },
}


def json_schema(openapi: Any) -> Any:
    """An OpenAPI v3 (structural CRD) schema as JSON Schema."""
    if isinstance(openapi, list):
        return [json_schema(item) for item in openapi]
    if not isinstance(openapi, dict):
        return openapi
    out: dict[str, Any] = {}
    for key, value in openapi.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        else:
            out[key] = json_schema(value)
    if openapi.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if openapi.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in openapi
        and "additionalProperties" not in openapi
        and not openapi.get("x-kubernetes-preserve-unknown-fields")
    ):
        # A key neither the CRD nor the chart knows is refused, naming its path (the API server
        # would drop it silently).
        out["additionalProperties"] = False
    return out


def spec_schema(root: Path) -> dict[str, Any]:
    """The CRD's openAPIV3Schema for spec (of its storage version)."""
    crd = yaml.safe_load((root / CRD).read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage", True))
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def schema(root: Path) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for section, sub in spec_schema(root)["properties"].items():
        converted = json_schema(sub)
        extras = SECTION_EXTRAS.get(section)
        if extras:
            converted = {**converted, "properties": {**converted.get("properties", {}), **extras}}
        for key, more in NESTED_EXTRAS.get(section, {}).items():
            inner = converted["properties"][key]
            converted["properties"][key] = {**inner, "properties": {**inner.get("properties", {}), **more}}
        properties[section] = converted
    properties.update(CHART_VALUES)
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "$comment": f"generated from {CRD} (hack/helm_values_schema.py); edit that and run hack/generate.py",
        "title": "ocp-gpu chart values",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }


def render(root: Path | None = None) -> str:
    """The expected content of charts/ocp-gpu/values.schema.json."""
    base = root or Path(__file__).resolve().parent.parent
    return json.dumps(schema(base), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
