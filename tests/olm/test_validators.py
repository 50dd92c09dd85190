"""We test these aspects of the OLM bundle and catalog with the operator framework's own tools:

- `bundle/` passes the validators `operator-sdk bundle validate --select-optional
  suite=operatorframework` runs (hack/validate-bundle, on operator-framework/api) with no
  error; the one warning allowed is good-practices' about the `v0.x` channel name (the
  issue asks for that name);
- those validators do fail on a broken bundle (an unknown capability level, an owned
  CRD the bundle does not ship), naming the problem;
- `opm validate olm/` accepts the file-based catalog, and rejects a channel entry that
  names a bundle the catalog does not have;
- `opm validate` accepts the two-bundle catalog of the OLM upgrade test (hack/olm_upgrade.py:
  the release's bundle, then a test bundle that replaces it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CSV = "manifests/ocp-gpu.clusterserviceversion.yaml"
CHANNEL_WARNING = 'channel(s) ["v0.x"] are not following the recommended naming convention'


def validate_bundle(tools: Path, bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools / "validate-bundle"), "-k8s-version", "1.36", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bundle_passes_the_operatorframework_suite(olm_tools: Path) -> None:
    result = validate_bundle(olm_tools, ROOT / "bundle")
    assert result.returncode == 0, result.stdout + result.stderr
    findings = [line for line in result.stdout.splitlines() if line.startswith(("ERROR", "WARN"))]
    assert len(findings) == 1 and CHANNEL_WARNING in findings[0], result.stdout
    assert "operatorhub" in result.stdout and "good-practices" in result.stdout


def _broken_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(ROOT / "bundle", copy)
    return copy


def test_validators_fail_on_an_unknown_capability(olm_tools: Path, tmp_path: Path) -> None:
    bundle = _broken_copy(tmp_path)
    csv = yaml.safe_load((bundle / CSV).read_text())
    csv["metadata"]["annotations"]["capabilities"] = "Fully Magic"
    (bundle / CSV).write_text(yaml.safe_dump(csv))
    result = validate_bundle(olm_tools, bundle)
    assert result.returncode == 1
    assert "Fully Magic" in result.stdout


def test_validators_fail_on_an_owned_crd_missing_from_the_bundle(olm_tools: Path, tmp_path: Path) -> None:
    bundle = _broken_copy(tmp_path)
    (bundle / "manifests" / "nvidia.com_clusterpolicies.yaml").unlink()
    result = validate_bundle(olm_tools, bundle)
    assert result.returncode == 1
    assert 'owned CRD "nvidia.com/v1, Kind=ClusterPolicy"' in result.stdout


def opm_validate(tools: Path, catalog: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools / "opm"), "validate", str(catalog)], capture_output=True, text=True, timeout=120
    )


def test_opm_accepts_the_catalog(olm_tools: Path) -> None:
    result = opm_validate(olm_tools, ROOT / "olm")
    assert result.returncode == 0, result.stderr


def test_opm_rejects_a_channel_naming_a_missing_bundle(olm_tools: Path, tmp_path: Path) -> None:
    catalog = tmp_path / "olm"
    shutil.copytree(ROOT / "olm", catalog)
    path = catalog / "ocp-gpu" / "catalog.yaml"
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    for document in documents:
        if document["schema"] == "olm.channel" and document["name"] == "stable":
            document["entries"].append({"name": "ocp-gpu.v9.9.9", "replaces": "ocp-gpu.v0.1.0"})
    path.write_text(yaml.safe_dump_all(documents))
    result = opm_validate(olm_tools, catalog)
    assert result.returncode != 0
    assert "ocp-gpu.v9.9.9" in result.stderr


def test_opm_accepts_the_upgrade_test_catalog(olm_tools: Path, tmp_path: Path) -> None:
    """The catalog the OLM upgrade test serves: the release's bundle, then hack/olm_upgrade.py's."""
    subprocess.run(
        [sys.executable, str(ROOT / "hack" / "olm_upgrade.py"), "--out", str(tmp_path / "olm")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    result = opm_validate(olm_tools, tmp_path / "olm")
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all((tmp_path / "olm" / "ocp-gpu" / "catalog.yaml").read_text()))
    bundles = [doc["name"] for doc in documents if doc and doc["schema"] == "olm.bundle"]
    assert len(bundles) == 2
