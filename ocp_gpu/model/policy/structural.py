"""What the API server's structural schema would reject in a ClusterPolicy spec, without a server.

`ocp-gpu render` reviews a policy file before anyone applies it; a misspelt field
(`driver.verison`) that the API server refuses (kubectl's strict field validation)
must fail the review too, naming the path and the field that was probably meant.
Checks unknown fields (outside `x-kubernetes-preserve-unknown-fields`), types,
enums, string lengths and minimums; CEL rules are left to the API server.

Pure: the CRD's schema comes in as a mapping (commands/render.py reads the packaged CRD).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]

# How many problems a review lists before "+N more" (one typo can cascade).
REPORTED = 20


@dataclasses.dataclass(frozen=True)
class SchemaProblem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def spec_schema(crd: Mapping[str, Any], version: str = "v1") -> Schema:
    """The `spec` schema of the CRD's `version`."""
    for served in (crd.get("spec") or {}).get("versions") or ():
        if served.get("name") == version:
            root: Schema = served["schema"]["openAPIV3Schema"]
            return dict(root.get("properties", {}).get("spec") or {})
    raise ValueError(f"the CRD has no version {version}")


def schema_problems(schema: Schema, value: Any, path: str = "spec") -> list[SchemaProblem]:
    """Every structural problem in `value` under `schema`, paths as the API server names them."""
    problems: list[SchemaProblem] = []
    _check(schema, value, path, problems)
    return problems


def _type_name(schema: Schema) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind = schema.get("type")
    return str(kind) if kind else None


def _type_ok(schema: Schema, value: Any) -> bool:
    if value is None and schema.get("nullable"):
        return True
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return {
        "integer or string": isinstance(value, str) or is_int,
        "object": isinstance(value, Mapping),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": is_int,
        "number": is_int or isinstance(value, float),
        "boolean": isinstance(value, bool),
        None: True,
    }.get(_type_name(schema), True)


def _check(schema: Schema, value: Any, path: str, problems: list[SchemaProblem]) -> None:
    if not _type_ok(schema, value):
        # wrong type: nothing below it can be checked
        problems.append(SchemaProblem(path, f"must be {_type_name(schema)}, not {type(value).__name__}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(item) for item in schema["enum"])
        problems.append(SchemaProblem(path, f"{_quoted(value)} is not one of {allowed}"))
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        problems.append(
            SchemaProblem(path, f"{len(value)} characters, at most {schema['maxLength']} allowed")
        )
    if isinstance(value, int) and not isinstance(value, bool) and value < schema.get("minimum", value):
        problems.append(SchemaProblem(path, f"{value} is below the minimum {schema['minimum']}"))
    if isinstance(value, Mapping):
        _check_object(schema, value, path, problems)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{index}]", problems)


def _check_object(schema: Schema, value: Mapping[str, Any], path: str, problems: list[SchemaProblem]) -> None:
    properties: Mapping[str, Schema] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        where = f"{path}.{key}"
        if key in properties:
            _check(properties[key], item, where, problems)
        elif isinstance(extra, Mapping):
            # a map (e.g. labels): every value follows additionalProperties
            _check(extra, item, where, problems)
        elif not schema.get("x-kubernetes-preserve-unknown-fields") and extra is not True:
            # a field the API server does not know: kubectl's strict validation refuses it
            close = difflib.get_close_matches(str(key), list(properties), n=1, cutoff=0.6)
            hint = f"; did you mean {path}.{close[0]}?" if close else ""
            problems.append(SchemaProblem(where, f"unknown field{hint}"))


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…"
