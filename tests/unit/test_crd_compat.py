"""We test these aspects of our CRD against NVIDIA's ClusterPolicy v1 schema:

- every field path of NVIDIA's schema (tests/unit/data/nvidia-clusterpolicy-paths.txt, generated
  by hack/gen_nvidia_paths.py from NVIDIA's CRD) is in ours, with a type that accepts NVIDIA's
  values; the check names a removed path or a narrowed type (it can fail);
- a spec setting every field of NVIDIA's schema passes our structural validation (the e2e test
  applies it with kubectl), and the fixture really does set every leaf.
"""

from __future__ import annotations

import copy

import pytest

from tests.unit import _nvidia_fields as nv
from tests.unit._crd_schema import schema_errors, spec_schema


def missing_or_narrowed(ours: dict[str, str]) -> list[str]:
    found = []
    for path, theirs in nv.nvidia_paths().items():
        if path not in ours:
            found.append(f"{path}: missing")
        elif not nv.accepts(ours[path], theirs):
            found.append(f"{path}: {ours[path]} does not accept NVIDIA's {theirs}")
    return found


def test_the_list_is_nvidias_whole_schema() -> None:
    listed = nv.nvidia_paths()
    # the 26 top-level sections of NVIDIA's v1 spec, and hundreds of fields under them
    assert len([path for path in listed if path.count(".") == 1]) == 26
    assert len(listed) > 600
    assert listed["spec.driver.upgradePolicy.maxUnavailable"] == "int-or-string"


def test_our_crd_has_every_nvidia_path_with_a_compatible_type() -> None:
    assert missing_or_narrowed(nv.our_paths()) == []


def test_a_missing_section_is_named() -> None:
    schema = copy.deepcopy(spec_schema())
    del schema["properties"]["gdrcopy"]
    del schema["properties"]["driver"]["properties"]["rdma"]["properties"]["useHostMofed"]
    problems = missing_or_narrowed(nv.our_paths(schema))
    assert "spec.gdrcopy: missing" in problems
    assert "spec.gdrcopy.env[].name: missing" in problems
    assert "spec.driver.rdma.useHostMofed: missing" in problems


def test_a_narrowed_type_is_named() -> None:
    schema = copy.deepcopy(spec_schema())
    schema["properties"]["driver"]["properties"]["upgradePolicy"]["properties"]["maxUnavailable"] = {
        "type": "integer"
    }
    assert missing_or_narrowed(nv.our_paths(schema)) == [
        "spec.driver.upgradePolicy.maxUnavailable: integer does not accept NVIDIA's int-or-string"
    ]


@pytest.mark.parametrize(
    ("ours", "theirs", "ok"),
    [
        ("string", "string", True),
        ("int-or-string", "string", True),
        ("int-or-string", "integer", True),
        ("string", "int-or-string", False),
        ("integer", "string", False),
    ],
)
def test_type_compatibility(ours: str, theirs: str, ok: bool) -> None:
    assert nv.accepts(ours, theirs) is ok


def test_the_every_field_spec_passes_our_schema() -> None:
    assert schema_errors(spec_schema(), nv.every_field_spec()) == []


def test_the_every_field_spec_sets_every_leaf() -> None:
    spec = nv.every_field_spec()
    present = set(nv.walk_value(spec))
    assert [path for path in nv.leaves() if path not in present] == []
