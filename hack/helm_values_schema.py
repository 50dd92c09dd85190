"""The Helm chart's values.schema.json, built from the ClusterPolicy CRD (used by hack/generate.py).

Each ClusterPolicy spec section is a top-level value (charts/ocp-gpu/templates/clusterpolicy.yaml
copies it into the ClusterPolicy), so its schema is the CRD's schema for that section, turned
from OpenAPI v3 (what the API server checks) into JSON Schema (what Helm checks): `nullable`
becomes a "null" type, `x-kubernetes-int-or-string` becomes integer-or-string, and the other
`x-kubernetes-*` markers are dropped.  The chart's own values (clusterPolicy, nfd,
operator.image) are added by hand below.  So `helm install --set driver.version=5` fails
before anything reaches the cluster, naming `driver.version`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

TARGET = "charts/ocp-gpu/values.schema.json"
CRD = "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml"

# The chart's own values, beside the ClusterPolicy sections.
CHART_VALUES: dict[str, Any] = {
    "clusterPolicy": {
        "type": "object",
        "description": "The ClusterPolicy cluster-policy made from these values.",
        "properties": {"create": {"type": "boolean", "description": "false: bring your own ClusterPolicy"}},
        "additionalProperties": False,
    },
    "nfd": {
        "type": "object",
        "description": "Node Feature Discovery (a chart dependency) and our NodeFeatureRule.",
        "properties": {
            "enabled": {"type": "boolean", "description": "install the NFD chart (helm dependency update)"},
            "nodefeaturerules": {
                "type": "boolean",
                "description": "a NodeFeatureRule labelling NVIDIA PCI devices, when NFD's API exists",
            },
        },
        "additionalProperties": False,
    },
    "node-feature-discovery": {
        "type": "object",
        "description": "Values of the Node Feature Discovery chart (see its own documentation).",
    },
}

# Chart-only keys inside a ClusterPolicy section (templates/_helpers.tpl ocp-gpu.chartOnlyKeys).
SECTION_EXTRAS: dict[str, dict[str, Any]] = {
    "operator": {
        "image": {
            "type": "string",
            "description": "The operator Deployment's image (chart only); empty: the release's image.",
        }
    }
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
        properties[section] = converted
    properties.update(CHART_VALUES)
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "$comment": f"generated from {CRD} (hack/helm_values_schema.py); edit that and run hack/generate.py",
        "title": "ocp-gpu chart values",
        "type": "object",
        "properties": properties,
    }


def render(root: Path | None = None) -> str:
    """The expected content of charts/ocp-gpu/values.schema.json."""
    base = root or Path(__file__).resolve().parent.parent
    return json.dumps(schema(base), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
