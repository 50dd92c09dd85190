#!/usr/bin/env python3
"""Generate the copies of files that have one source in the repository.

Each CRD's source is ocp_gpu/crds/<plural>.<group>.yaml (ClusterPolicy, NVIDIADriver, and
NVIDIA's GPUCluster, ComputeDomain, ComputeDomainClique as NVIDIA ships them); the OLM bundle and
the Helm chart each need a copy.  What installs the operator
(Deployment, ServiceAccount, RBAC, operand image defaults) comes from
ocp_gpu/install/ and ocp_gpu/model/releases.py: this script writes it into the
Helm chart's templates (charts/ocp-gpu/templates/operator.yaml) and the OLM
bundle's ClusterServiceVersion (hack/olm.py builds it).  Every file says where it
comes from.  `--check` writes nothing and exits 1 naming every stale or missing
file (CI and tests/unit/test_generated.py run it).

Usage: .venv/bin/python hack/generate.py [--check]   (imports ocp_gpu: run it with the venv)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "hack"))
sys.path.insert(0, str(ROOT))

import helm_operator  # noqa: E402  (hack/helm_operator.py)
import helm_values  # noqa: E402  (hack/helm_values.py)
import helm_values_schema  # noqa: E402  (hack/helm_values_schema.py)

import olm  # noqa: E402  (hack/olm.py)


@dataclasses.dataclass(frozen=True)
class Copy:
    source: str  # relative to the repository root
    target: str


COPIES = (
    Copy("ocp_gpu/crds/clusterpolicies.nvidia.com.yaml", "bundle/manifests/nvidia.com_clusterpolicies.yaml"),
    Copy(
        "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml", "charts/ocp-gpu/crds/nvidia.com_clusterpolicies.yaml"
    ),
    Copy("ocp_gpu/crds/nvidiadrivers.nvidia.com.yaml", "bundle/manifests/nvidia.com_nvidiadrivers.yaml"),
    Copy("ocp_gpu/crds/nvidiadrivers.nvidia.com.yaml", "charts/ocp-gpu/crds/nvidia.com_nvidiadrivers.yaml"),
    # NVIDIA's own CRDs, shipped unchanged: GPUCluster (gpu-operator v26.7.0) and the DRA driver's
    # ComputeDomain and ComputeDomainClique (each file's opening comment names its upstream commit).
    *(
        Copy(f"ocp_gpu/crds/{plural}.{group}.yaml", f"{folder}/{group}_{plural}.yaml")
        for plural, group in (
            ("gpuclusters", "nvidia.com"),
            ("computedomains", "resource.nvidia.com"),
            ("computedomaincliques", "resource.nvidia.com"),
        )
        for folder in ("bundle/manifests", "charts/ocp-gpu/crds")
    ),
)


# Files read by the builders below (beyond the imported ocp_gpu package).
BUILT_INPUTS = (olm.CSV_BASE, olm.CRD_SOURCE, *olm.MORE_CRD_SOURCES)

# Files built from the install source: target -> a function of the repository root.
BUILT: dict[str, Callable[[Path], str]] = {
    helm_operator.TARGET: helm_operator.render,
    helm_values.TARGET: helm_values.render,
    helm_values_schema.TARGET: helm_values_schema.render,
    **olm.TARGETS,
}


def _strip_source_comments(text: str) -> str:
    """The source without its leading comment block (it speaks to editors of the source)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    if lines and lines[0].strip() == "---":
        # NB: NVIDIA's CRDs open with a document separator; after our header it would make the
        # header a document of its own, and OLM's bundle loader reads only that empty one.
        lines.pop(0)
    return "".join(lines)


def render(copy: Copy, root: Path | None = None) -> str:
    """The expected content of one generated copy."""
    body = _strip_source_comments(((root or ROOT) / copy.source).read_text())
    header = f"# generated from {copy.source}; edit that file and run hack/generate.py\n"
    return header + body


def stale(root: Path | None = None) -> list[str]:
    """The generated copies that are missing or differ from their source."""
    root = root or ROOT
    expected = {copy.target: render(copy, root) for copy in COPIES}
    expected |= {target: build(root) for target, build in BUILT.items()}
    return [
        target
        for target, content in expected.items()
        if not (root / target).is_file() or (root / target).read_text() != content
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a copy is stale")
    args = parser.parse_args(argv)
    if args.check:
        outdated = stale()
        for target in outdated:
            print(f"{target} is out of date: run hack/generate.py", file=sys.stderr)
        return 1 if outdated else 0
    expected = {copy.target: render(copy) for copy in COPIES}
    expected |= {target: build(ROOT) for target, build in BUILT.items()}
    for relative, content in expected.items():
        target = ROOT / relative
        if target.is_file() and target.read_text() == content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        print(f"wrote {relative}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
