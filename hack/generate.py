#!/usr/bin/env python3
"""Generate the copies of files that have one source in the repository.

The ClusterPolicy CRD's source is ocp_gpu/crds/clusterpolicies.nvidia.com.yaml;
the OLM bundle and the Helm chart each need a copy.  This script writes them
with a header saying where they come from.  `--check` writes nothing and exits
1 naming every stale or missing copy (CI and tests/unit/test_generated.py run it).

Usage: hack/generate.py [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Copy:
    source: str  # relative to the repository root
    target: str


COPIES = (
    Copy("ocp_gpu/crds/clusterpolicies.nvidia.com.yaml", "bundle/manifests/nvidia.com_clusterpolicies.yaml"),
    Copy(
        "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml", "charts/ocp-gpu/crds/nvidia.com_clusterpolicies.yaml"
    ),
)


def _strip_source_comments(text: str) -> str:
    """The source without its leading comment block (it speaks to editors of the source)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
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
    return [
        copy.target
        for copy in COPIES
        if not (root / copy.target).is_file() or (root / copy.target).read_text() != render(copy, root)
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
    for copy in COPIES:
        target = ROOT / copy.target
        content = render(copy)
        if target.is_file() and target.read_text() == content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        print(f"wrote {copy.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
