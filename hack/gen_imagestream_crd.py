#!/usr/bin/env python3
"""Generate the ImageStream CRD the test harness installs, from openshift/api's OpenAPI.

On OpenShift, image.openshift.io is served by an aggregated API server, not a CRD;
for a client a CRD with the same schema behaves the same. The input is the real
OpenAPI v2 definitions (a subset of openshift/api's openapi/openapi.json); the
output must be a *structural* schema, so this script:

- resolves every ``$ref`` inline (definitions in the file, plus the few
  Kubernetes types they point to, written out below);
- keeps the root ``metadata`` as a bare ``type: object`` (NB: the apiserver rejects a
  CRD that specifies ObjectMeta's fields, and embedded objects must not specify more);
- translates ``x-kubernetes-patch-merge-key`` (strategic merge, which CRDs do not
  support) into ``x-kubernetes-list-type: map`` keyed by the same field, so
  server-side apply merges the tag lists the way ``oc`` merges them on OpenShift;
- drops keys a CRD schema does not accept;
- falls back to ``x-kubernetes-preserve-unknown-fields`` for a reference it cannot
  resolve, rather than guessing a schema.

Usage: hack/gen_imagestream_crd.py [--check]   (--check: exit 1 if the committed file differs)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
API_DIR = REPO / "ocp_gpu_harness" / "openshift_api"
SOURCE = API_DIR / "image.openshift.io-v1-imagestream.openapi.json"
OUTPUT = API_DIR / "image.openshift.io_imagestreams.crd.yaml"

ROOT = "com.github.openshift.api.image.v1.ImageStream"

# Kubernetes types the ImageStream definitions refer to but the file does not carry.
EXTERNAL: dict[str, dict[str, Any]] = {
    # Serialized as an RFC 3339 string.
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    # Only the root may carry metadata, and only as a bare object (see docstring).
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
    # core/v1 ObjectReference, field for field (stable since v1).
    "io.k8s.api.core.v1.ObjectReference": {
        "description": (
            "ObjectReference contains enough information to let you inspect or modify the referred object."
        ),
        "type": "object",
        "properties": {
            name: {"type": "string"}
            for name in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")
        },
        "x-kubernetes-map-type": "atomic",
    },
}

# Keys of OpenAPI v2 schemas that a CRD's structural schema accepts.
ALLOWED = {
    "description",
    "type",
    "format",
    "properties",
    "items",
    "required",
    "additionalProperties",
    "enum",
    "default",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "pattern",
    "nullable",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
}


def resolve(schema: dict[str, Any], definitions: dict[str, Any], path: str) -> dict[str, Any]:
    """A structural copy of ``schema`` with references inlined."""
    schema = copy.deepcopy(schema)
    ref = schema.pop("$ref", None)
    if ref is not None:
        name = ref.removeprefix("#/definitions/")
        if name in definitions:
            target = resolve(definitions[name], definitions, path)
        elif name in EXTERNAL:
            target = copy.deepcopy(EXTERNAL[name])
        else:
            print(f"warning: {path}: unknown {ref}, preserving unknown fields", file=sys.stderr)
            target = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        # The referring property's own description and default win over the target's.
        target.update(schema)
        schema = target
    merge_key = schema.pop("x-kubernetes-patch-merge-key", None)
    schema.pop("x-kubernetes-patch-strategy", None)
    if merge_key is not None and schema.get("type") == "array":
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = [merge_key]
    for key in list(schema):
        if key not in ALLOWED:
            print(f"note: {path}: dropped unsupported key {key!r}", file=sys.stderr)
            del schema[key]
    if "properties" in schema:
        schema["properties"] = {
            k: resolve(v, definitions, f"{path}.{k}") for k, v in sorted(schema["properties"].items())
        }
    if isinstance(schema.get("items"), dict):
        schema["items"] = resolve(schema["items"], definitions, f"{path}[]")
        # A default for a list element is never applied: an element is never absent.
        schema["items"].pop("default", None)
    if isinstance(schema.get("additionalProperties"), dict):
        schema["additionalProperties"] = resolve(schema["additionalProperties"], definitions, f"{path}{{}}")
    if schema.get("default") == {} and "properties" in schema:
        schema["default"] = effective_default(schema)
        if schema["default"] is None:
            del schema["default"]
    return schema


def effective_default(schema: dict[str, Any]) -> dict[str, Any] | None:
    """What ``default: {}`` means for an object once its fields are defaulted.

    openapi-gen writes ``default: {}`` for every non-pointer struct; the apiserver
    validates a CRD's defaults as written, without defaulting inside them, so
    ``{}`` fails where a field is required (e.g. lookupPolicy.local). The Go
    server would serialize the zero value with the fields' own defaults filled in:
    write that, or nothing when a required field has no default.
    """
    # Copies: a shared object would be dumped as a YAML anchor and alias.
    value = {k: copy.deepcopy(v["default"]) for k, v in schema["properties"].items() if "default" in v}
    if any(r not in value for r in schema.get("required", [])):
        return None
    return value


def crd() -> dict[str, Any]:
    definitions = json.loads(SOURCE.read_text())["definitions"]
    schema = resolve(definitions[ROOT], definitions, "ImageStream")
    # NB: a default on the root's metadata is rejected; spec/status defaults are fine.
    schema["properties"]["metadata"] = {"type": "object"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "imagestreams.image.openshift.io",
            "annotations": {
                "ocp-gpu.harness/generated-by": "hack/gen_imagestream_crd.py",
                "ocp-gpu.harness/source": json.loads(SOURCE.read_text())["source"],
            },
        },
        "spec": {
            "group": "image.openshift.io",
            "names": {
                "kind": "ImageStream",
                "listKind": "ImageStreamList",
                "plural": "imagestreams",
                "singular": "imagestream",
                "shortNames": ["is"],
                "categories": ["all"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    # As `oc get is` prints them (minus TAGS, which a CRD cannot join).
                    "additionalPrinterColumns": [
                        {
                            "name": "Image Repository",
                            "type": "string",
                            "jsonPath": ".status.dockerImageRepository",
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


def render() -> str:
    header = f"# Generated by hack/gen_imagestream_crd.py from {SOURCE.name}. DO NOT EDIT.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed CRD is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text() != text:
            rel = OUTPUT.relative_to(REPO)
            print(f"{rel} is out of date: run hack/gen_imagestream_crd.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
