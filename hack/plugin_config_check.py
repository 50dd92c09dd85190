#!/usr/bin/env python3
"""Check device plugin config files with NVIDIA's own parser (k8s-device-plugin's api/config/v1).

Builds hack/plugin-config-check/main.go against the `api/config/v1` package of the
k8s-device-plugin release the image contract pins (ocp_gpu/model/image_contracts.py:
NVIDIA/k8s-device-plugin@<tag>), taken from a bare clone of that repository, since the Go
module proxy does not serve k8s-device-plugin (403 for v0.20.0, checked 2026-11-28).  The
clone is looked for as in hack/gen_image_contracts.py: `<mirrors>/NVIDIA+k8s-device-plugin`
(or `.../repo`), mirrors = $OCP_GPU_UPSTREAM or the repository's git-ignored .cache/upstream:

    git clone --bare https://github.com/NVIDIA/k8s-device-plugin .cache/upstream/NVIDIA+k8s-device-plugin
    .venv/bin/python hack/plugin_config_check.py config.yaml ...

The package and its go.mod are extracted (`git archive`) into the cache beside the binary,
built once per tag (`~/.cache/ocp-gpu/bin/plugin-config-check_<tag>/`; ~4 minutes cold on 2
loaded cores: go mod tidy downloads the release's dependency graph), then each file gets
one JSON line: {"file", "accepted", "error", "sharing", "replicas"}; MPS_ROOT is set as the
operator sets it on the plugin.  Nothing upstream is copied into the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "hack" / "plugin-config-check" / "main.go"
MODULE = "github.com/NVIDIA/k8s-device-plugin"


def pinned_tag() -> str:
    """The k8s-device-plugin tag of the image contract (the release we ship)."""
    sys.path.insert(0, str(ROOT))
    from ocp_gpu.model import image_contracts

    for contract in image_contracts.CONTRACTS.values():
        repo, _, tag = contract.source.partition("@")
        if repo == "NVIDIA/k8s-device-plugin":
            return tag
    raise SystemExit("no NVIDIA/k8s-device-plugin row in ocp_gpu/model/image_contracts.py")


def mirror() -> Path | None:
    """The bare clone of k8s-device-plugin, or None."""
    mirrors = Path(os.environ.get("OCP_GPU_UPSTREAM", ROOT / ".cache" / "upstream"))
    for candidate in (mirrors / "NVIDIA+k8s-device-plugin" / "repo", mirrors / "NVIDIA+k8s-device-plugin"):
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    return None


def binary_path(tag: str) -> Path:
    cache = Path(
        os.environ.get(
            "OCP_GPU_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ocp-gpu"
        )
    )
    return cache / "bin" / f"plugin-config-check_{tag}" / "plugin-config-check"


def build(tag: str, clone: Path) -> Path:
    """The checker built against `tag`'s api/config/v1 (cached while main.go is unchanged)."""
    binary = binary_path(tag)
    stamp = binary.parent / "main.go"
    if binary.exists() and stamp.exists() and stamp.read_bytes() == SOURCE.read_bytes():
        return binary
    work = binary.parent / "src"
    shutil.rmtree(work, ignore_errors=True)
    upstream, checker = work / "upstream", work / "checker"
    upstream.mkdir(parents=True)
    checker.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(clone), "archive", tag, "go.mod", "api/config/v1"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(upstream)], input=archive, check=True)
    shutil.copy(SOURCE, checker / "main.go")
    (checker / "go.mod").write_text(
        f"module ocpgpu.local/plugin-config-check\n\ngo 1.25\n\nrequire {MODULE} {tag}\n\n"
        f"replace {MODULE} => {upstream}\n"
    )
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false -mod=mod"}
    subprocess.run(["go", "mod", "tidy"], cwd=checker, env=env, check=True, capture_output=True)
    subprocess.run(
        ["go", "build", "-trimpath", "-o", str(binary) + ".tmp", "."], cwd=checker, env=env, check=True
    )
    os.replace(str(binary) + ".tmp", binary)
    shutil.copy(SOURCE, stamp)
    return binary


def check(files: list[Path], mps_root: str = "/run/nvidia/mps") -> list[dict[str, object]]:
    """NVIDIA's parser's verdict on each file (building the checker first if need be)."""
    clone = mirror()
    if clone is None:
        raise FileNotFoundError("no bare clone of NVIDIA/k8s-device-plugin (see hack/plugin_config_check.py)")
    binary = build(pinned_tag(), clone)
    done = subprocess.run(
        [str(binary), *map(str, files)],
        env={**os.environ, "MPS_ROOT": mps_root},
        capture_output=True,
        text=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def main() -> int:
    verdicts = check([Path(arg) for arg in sys.argv[1:]])
    for verdict in verdicts:
        print(json.dumps(verdict))
    return 0 if all(v["accepted"] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
