"""Reading the ClusterPolicy CRD's OpenAPI schema in tests, without an API server.

- `apply_defaults`: structural defaulting as the API server does it (a missing
  field with a `default:` gets it, then defaults inside it apply too);
- `default_leaves`: every non-object default with its path, to check one by one;
- `schema_errors`: a structural validator (types, enums, patterns, minimums,
  required and unknown fields, list-map keys); CEL rules are left to the e2e tests;
- `values`: a hypothesis strategy for values the schema accepts.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

CRD_PATH = Path(__file__).resolve().parents[2] / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"

Schema = dict[str, Any]


@functools.cache
def _load_crd() -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd: dict[str, Any] = yaml.load(CRD_PATH.read_text(), Loader=loader)
    return crd


def load_crd() -> dict[str, Any]:
    """The CRD as a fresh dict (read once per session)."""
    return copy.deepcopy(_load_crd())


def root_schema() -> Schema:
    """The CRD's schema; shared, do not mutate."""
    schema: Schema = _load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def spec_schema() -> Schema:
    schema: Schema = root_schema()["properties"]["spec"]
    return schema


def sub_schema(schema: Schema, path: tuple[str, ...]) -> Schema:
    for key in path:
        schema = schema["properties"][key]
    return schema


def is_int_or_string(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string"))


def apply_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults filled in, as the API server stores it."""
    value = copy.deepcopy(value)
    if schema.get("type") == "object" and isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if value.get(key) is None and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value and value[key] is not None:
                value[key] = apply_defaults(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in schema.get("properties", {}):
                    value[key] = apply_defaults(extra, value[key])
    elif schema.get("type") == "array" and isinstance(value, list):
        value = [apply_defaults(schema["items"], item) for item in value]
    return value


def default_leaves(schema: Schema, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any, Schema]]:
    """Every default that is not an (empty) object: (path, default, field schema)."""
    found: list[tuple[tuple[str, ...], Any, Schema]] = []
    if "default" in schema and schema.get("type") != "object":
        found.append((path, schema["default"], schema))
    for key, sub in schema.get("properties", {}).items():
        found.extend(default_leaves(sub, (*path, key)))
    return found


def _type_ok(schema: Schema, value: Any) -> bool:
    if is_int_or_string(schema):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    kind = schema.get("type")
    return {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        None: True,
    }[kind]


def schema_errors(schema: Schema, value: Any, path: str = "spec") -> list[str]:
    """What the API server's structural validation would reject (CEL rules aside)."""
    if not _type_ok(schema, value):
        return [f"{path}: wrong type {type(value).__name__}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: length out of range")
    if isinstance(value, int) and not isinstance(value, bool) and value < schema.get("minimum", value):
        errors.append(f"{path}: {value} below minimum {schema['minimum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors.extend(f"{path}.{key}: required" for key in schema.get("required", []) if key not in value)
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                errors.extend(schema_errors(properties[key], item, f"{path}.{key}"))
            elif isinstance(extra, dict):
                errors.extend(schema_errors(extra, item, f"{path}.{key}"))
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field")
    if isinstance(value, list):
        for index, item in enumerate(value):
            errors.extend(schema_errors(schema["items"], item, f"{path}[{index}]"))
        if schema.get("x-kubernetes-list-type") == "map" and all(isinstance(item, dict) for item in value):
            keys = [tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value]
            if len(keys) != len(set(keys)):
                errors.append(f"{path}: duplicate map keys")
    return errors


_SHORT_TEXT = st.text(alphabet=st.characters(codec="ascii", categories=("L", "N", "P", "Zs")), max_size=12)


def values(schema: Schema) -> st.SearchStrategy[Any]:
    """Values the schema accepts (CEL rules aside), small enough to be fast."""
    if is_int_or_string(schema):
        return st.one_of(
            st.integers(min_value=0, max_value=200), st.from_regex(schema["pattern"], fullmatch=True)
        )
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum", -(2**31)), max_value=2**31 - 1)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return _SHORT_TEXT.filter(lambda text: len(text) >= schema.get("minLength", 0))
    if kind == "array":
        items = values(schema["items"])
        if schema.get("x-kubernetes-list-type") == "map":
            keys = schema["x-kubernetes-list-map-keys"]
            return st.lists(items, max_size=3, unique_by=lambda item: tuple(item.get(k) for k in keys))
        return st.lists(items, max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        if not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                return st.dictionaries(
                    st.from_regex(r"[a-z][a-z0-9.-]{0,10}", fullmatch=True), values(extra), max_size=3
                )
            return st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), _SHORT_TEXT, max_size=2)
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {key: values(sub) for key, sub in properties.items() if key in required},
            optional={key: values(sub) for key, sub in properties.items() if key not in required},
        )
    raise AssertionError(f"no strategy for schema {schema}")
