"""We test these aspects of ocp-gpu's image, built here without a container engine
(hack/build-image.sh: Debian's packages via mmdebstrap, the wheel, packed by umoci):

- the build produces an OCI image layout tagged with the package's version, whose config runs
  `ocp-gpu run` as the non-root user 1001;
- unpacked, its entrypoints run in a chroot as that user: `ocp-gpu --version`, and
  `ocp-gpu validate driver` against a fake driver root writes the driver-ready marker (the
  script checks both and fails otherwise).

NB: marked e2e (with `image`): it takes minutes and reaches Debian's and PyPI's servers, so the
quick unit gate (-m "not e2e") leaves it to the full run; it needs root.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import ocp_gpu

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.image]


@pytest.mark.skipif(os.geteuid() != 0, reason="hack/build-image.sh needs root (mmdebstrap, chroot)")
@pytest.mark.timeout(1200)
def test_the_image_builds_and_its_entrypoints_run(tmp_path: Path) -> None:
    out = tmp_path / "image"
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-image.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"ocp-gpu {ocp_gpu.__version__}" in result.stdout
    index = json.loads((out / "oci" / "index.json").read_text())
    tags = [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]]
    assert tags == [f"v{ocp_gpu.__version__}"]
