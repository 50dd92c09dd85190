"""We test these aspects of the release table (ocp_gpu/model/releases.py) and its refresh path:

- the table is what hack/refresh_release.py reads from NVIDIA's certified bundle at the
  pinned version (where NVIDIA's repository is mirrored on this machine): every operand image
  by tag and by digest, the driver branches, the OpenShift range, the source's commit;
- the refresh script's reading of a CSV: a digest-less image, a missing operand, the default
  driver's version from the chart, the per-branch driver images;
- the CSV's env and relatedImages, the chart's Deployment and `ocp-gpu render`'s defaults all
  come from the table; the validator and node status exporter use the operator's own image.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu.install import install_manifests
from ocp_gpu.model import releases
from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]
# A bare clone of NVIDIA/gpu-operator: $OCP_GPU_UPSTREAM/NVIDIA+gpu-operator (or .../repo), by default
# under the repository's git-ignored .cache/upstream (hack/refresh_release.py's docstring says how).
UPSTREAM = Path(os.environ.get("OCP_GPU_UPSTREAM", ROOT / ".cache" / "upstream"))
NVIDIA_MIRROR = next(
    (
        path
        for path in (UPSTREAM / "NVIDIA+gpu-operator" / "repo", UPSTREAM / "NVIDIA+gpu-operator")
        if path.exists()
    ),
    UPSTREAM / "NVIDIA+gpu-operator",
)
refresh = hack_scripts.load("refresh_release")

DIGEST = "sha256:" + "1" * 64


def _csv(env: dict[str, str]) -> str:
    container = {"name": "gpu-operator", "env": [{"name": k, "value": v} for k, v in env.items()]}
    deployment = {"name": "gpu-operator", "spec": {"template": {"spec": {"containers": [container]}}}}
    document = {
        "metadata": {"name": "gpu-operator-certified.v9.9.9"},
        "spec": {"install": {"spec": {"deployments": [deployment]}}},
    }
    return yaml.safe_dump(document)


def _source(env: dict[str, str], driver_version: str = "595.91.07") -> Any:
    values = {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": driver_version}}
    annotations = {"annotations": {"com.redhat.openshift.versions": "v4.18-v4.22"}}
    return refresh.Source(
        csv=_csv(env),
        annotations=yaml.safe_dump(annotations),
        values=yaml.safe_dump(values),
        version="v9.9.9",
        commit="c" * 40,
    )


def _full_env() -> dict[str, str]:
    env = {name: f"nvcr.io/nvidia/x-{name.lower()}:v1@{DIGEST}" for name in refresh.SHIPPED}
    env["DRIVER_IMAGE"] = f"nvcr.io/nvidia/driver@{DIGEST}"
    env["DRIVER_IMAGE-580"] = "nvcr.io/nvidia/driver@sha256:" + "5" * 64
    env["VALIDATOR_IMAGE"] = "ghcr.io/nvidia/gpu-operator:main-latest"  # NVIDIA's own: not ours
    return env


@pytest.mark.skipif(
    not NVIDIA_MIRROR.exists(),
    reason=f"no clone of NVIDIA/gpu-operator at {NVIDIA_MIRROR} (set OCP_GPU_UPSTREAM)",
)
def test_the_table_is_nvidia_v26_7_0_certified_bundle() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "hack" / "refresh_release.py"),
            *("--git-dir", str(NVIDIA_MIRROR), "--ref", releases.SOURCE.version, "--check"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert releases.SOURCE.version == "v26.7.0"


def test_the_table_holds_what_the_issue_names() -> None:
    # NVIDIA's v26.7.0 set (issue #20): toolkit v1.20.0, plugin/GFD v0.20.0, DCGM 4.6.0,
    # exporter 4.6.0-4.8.3, MIG manager v0.15.0, driver manager v0.12.0, branches 580/595/610.
    tags = releases.RELEASE_IMAGES
    assert tags["CONTAINER_TOOLKIT_IMAGE"].endswith(":v1.20.0")
    assert tags["DEVICE_PLUGIN_IMAGE"].endswith(":v0.20.0") and tags["GFD_IMAGE"].endswith(":v0.20.0")
    assert ":4.6.0-" in tags["DCGM_IMAGE"] and ":4.6.0-4.8.3-" in tags["DCGM_EXPORTER_IMAGE"]
    assert tags["MIG_MANAGER_IMAGE"].endswith(":v0.15.0")
    assert tags["DRIVER_MANAGER_IMAGE"].endswith(":v0.12.0")
    assert [branch.branch for branch in releases.DRIVER_BRANCHES] == ["580", "595", "610"]
    assert releases.DEFAULT_DRIVER.version == "595.91.07"
    assert tags["DRIVER_IMAGE"] == "nvcr.io/nvidia/driver:595.91.07"
    assert releases.OPENSHIFT_VERSIONS == "v4.18-v4.22"
    assert len(releases.SOURCE.commit) == 40
    for image in releases.OPERAND_IMAGES:
        # the same repository by tag and by digest
        assert image.tag.rpartition(":")[0] == image.digest.partition("@")[0], image
        assert image.digest.partition("@")[2].startswith("sha256:")
    assert "VALIDATOR_IMAGE" not in releases.RELEASE_IMAGES  # ours, never NVIDIA's


def test_refresh_reads_tags_digests_and_branches() -> None:
    data = refresh.table(_source(_full_env()))
    by_env = {image["env"]: image for image in data["images"]}
    assert [image["env"] for image in data["images"]] == list(refresh.SHIPPED)
    assert by_env["DRIVER_IMAGE"] == {
        "env": "DRIVER_IMAGE",
        "tag": "nvcr.io/nvidia/driver:595.91.07",  # the chart's version: the CSV has a digest only
        "digest": f"nvcr.io/nvidia/driver@{DIGEST}",
    }
    assert by_env["DCGM_IMAGE"]["tag"] == "nvcr.io/nvidia/x-dcgm_image:v1"
    assert [(b["branch"], b["version"], b["default"]) for b in data["branches"]] == [
        ("580", None, False),
        ("595", "595.91.07", True),
    ]
    assert data["source"]["commit"] == "c" * 40 and data["openshift_versions"] == "v4.18-v4.22"
    block = refresh.render_block(data)
    assert block.startswith(refresh.BEGIN) and block.endswith(refresh.END)
    assert "ghcr.io/nvidia/gpu-operator" not in block  # NVIDIA's validator is not ours


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubi10"}, "DCGM_IMAGE=.* is not pinned"),
        ({"MIG_MANAGER_IMAGE": None}, "has no MIG_MANAGER_IMAGE"),
        ({"DRIVER_IMAGE": f"mirror.example/driver@{DIGEST}"}, "is not the chart's nvcr.io/nvidia/driver"),
        ({"GFD_IMAGE": f"nvcr.io/nvidia/gfd@{DIGEST}"}, "GFD_IMAGE=.* has no tag"),
    ],
)
def test_refresh_refuses_what_it_cannot_record(change: dict[str, str | None], message: str) -> None:
    env = _full_env()
    for name, value in change.items():
        if value is None:
            del env[name]
        else:
            env[name] = value
    with pytest.raises(refresh.SourceError, match=message):
        refresh.table(_source(env))


def test_the_block_is_replaced_and_nothing_else() -> None:
    text = Path(releases.__file__).read_text()
    block = refresh.render_block(refresh.table(_source(_full_env())))
    rewritten = refresh.rewrite(text, block)
    head, _, rest = text.partition(refresh.BEGIN)
    assert rewritten.startswith(head) and rewritten.endswith(rest.partition(refresh.END)[2])
    assert block in rewritten
    with pytest.raises(refresh.SourceError, match="no generated block"):
        refresh.rewrite("nothing here", block)


def test_the_bundle_chart_and_render_take_their_images_from_the_table() -> None:
    csv = yaml.safe_load((ROOT / "bundle/manifests/ocp-gpu.clusterserviceversion.yaml").read_text())
    related = {item["image"] for item in csv["spec"]["relatedImages"]}
    assert related == set(releases.RELEASE_DIGESTS.values()) | {releases.OPERATOR_IMAGE}
    (container,) = install_manifests.deployment_spec()["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["OPERATOR_IMAGE"] == container["image"]
    for name, digest in releases.RELEASE_DIGESTS.items():
        assert env[name] == digest
    annotations = yaml.safe_load((ROOT / "bundle/metadata/annotations.yaml").read_text())["annotations"]
    assert annotations["com.redhat.openshift.versions"] == releases.OPENSHIFT_VERSIONS
    chart = (ROOT / "charts/ocp-gpu/templates/operator.yaml").read_text()
    assert all(digest in chart for digest in releases.RELEASE_DIGESTS.values())
    # `ocp-gpu render` and `ocp-gpu run` without any env: the table's digests (tags on request),
    # ours for the validator and the node status exporter.
    defaults = releases.with_release_defaults({})
    assert {name: defaults[name] for name in releases.RELEASE_DIGESTS} == releases.RELEASE_DIGESTS
    tagged = releases.with_release_defaults({}, by_tag=True)
    assert {name: tagged[name] for name in releases.RELEASE_IMAGES} == releases.RELEASE_IMAGES
    assert defaults["VALIDATOR_IMAGE"] == tagged["VALIDATOR_IMAGE"] == releases.OPERATOR_IMAGE


def test_driver_versions_of_release_digests() -> None:
    assert releases.driver_version_of(releases.RELEASE_DIGESTS["DRIVER_IMAGE"]) == "595.91.07"
    branch_610 = next(b for b in releases.DRIVER_BRANCHES if b.branch == "610")
    assert releases.driver_version_of(branch_610.digest) is None  # NVIDIA names no version for it
    assert releases.driver_version_of("nvcr.io/nvidia/driver@sha256:" + "0" * 64) is None
