#!/usr/bin/env python3
"""Write the list of field paths and types of NVIDIA's ClusterPolicy v1 (or NVIDIADriver v1alpha1) schema.

NVIDIA's CRD (NVIDIA/gpu-operator, deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml)
is not ours to commit; this script reads a local copy of it and writes only its field paths and
their types to tests/unit/data/nvidia-clusterpolicy-paths.txt, which
tests/unit/test_crd_compat.py compares with our CRD (ocp_gpu/crds/), and from which the
"every field" fixture is generated.  Re-run it when NVIDIA's schema moves:

    git clone https://github.com/NVIDIA/gpu-operator && cd gpu-operator
    python <ocp-gpu>/hack/gen_nvidia_paths.py deployments/gpu-operator/crds/nvidia.com_clusterpolicies.yaml \
        --source "NVIDIA/gpu-operator@$(git rev-parse HEAD) ($(git describe --tags))"

NVIDIA's NVIDIADriver CRD (deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml) the same
way, into tests/unit/data/nvidia-nvidiadriver-paths.txt (tests/unit/test_nvidia_driver_crd.py):

    python <ocp-gpu>/hack/gen_nvidia_paths.py deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml \
        --kind nvidiadriver --source "NVIDIA/gpu-operator@$(git rev-parse HEAD) ($(git describe --tags))"

Path notation: `spec.driver.env[].name` (array items), `spec.operator.labels{}` (map values).
Types: object, array, string, integer, boolean, int-or-string.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "tests" / "unit" / "data" / "nvidia-clusterpolicy-paths.txt"
# --kind: (target, served version, NVIDIA's file name, our test) per CRD.
KINDS = {
    "clusterpolicy": (TARGET, "v1", "nvidia.com_clusterpolicies.yaml", "test_crd_compat.py"),
    "nvidiadriver": (
        TARGET.with_name("nvidia-nvidiadriver-paths.txt"),
        "v1alpha1",
        "nvidia.com_nvidiadrivers.yaml",
        "test_nvidia_driver_crd.py",
    ),
}


def field_type(schema: dict[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    return str(schema.get("type", "any"))


def walk(schema: dict[str, Any], path: str) -> list[tuple[str, str]]:
    """(path, type) of `schema` and everything under it, depth first, in schema order."""
    found = [(path, field_type(schema))]
    for key, sub in schema.get("properties", {}).items():
        found.extend(walk(sub, f"{path}.{key}"))
    if isinstance(schema.get("items"), dict):
        found.extend(walk(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        found.extend(walk(schema["additionalProperties"], f"{path}{{}}"))
    return found


def spec_paths(crd: dict[str, Any], version: str = "v1") -> list[tuple[str, str]]:
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            return walk(served["schema"]["openAPIV3Schema"]["properties"]["spec"], "spec")
    raise SystemExit(f"the CRD has no version {version}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("crd", type=Path, help="NVIDIA's nvidia.com_clusterpolicies.yaml")
    parser.add_argument("--source", required=True, help="where the CRD came from: repository@commit (tag)")
    parser.add_argument("--kind", choices=sorted(KINDS), default="clusterpolicy", help="which CRD it is")
    args = parser.parse_args(argv)
    target, version, file_name, test = KINDS[args.kind]
    paths = spec_paths(yaml.safe_load(args.crd.read_text()), version)
    title = "ClusterPolicy v1" if args.kind == "clusterpolicy" else "NVIDIADriver v1alpha1"
    header = [
        f"# Field paths and types of NVIDIA's {title} schema (not the schema itself).",
        f"# Read from {args.source}, deployments/gpu-operator/crds/{file_name},",
        f"# by hack/gen_nvidia_paths.py (see there to refresh it).  tests/unit/{test} fails",
        "# when our CRD lacks one of these paths or gives it a type that rejects NVIDIA's values.",
    ]
    target.write_text("\n".join([*header, *(f"{path}\t{kind}" for path, kind in paths)]) + "\n")
    print(f"wrote {target.relative_to(ROOT)} ({len(paths)} paths)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
