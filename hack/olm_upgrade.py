#!/usr/bin/env python3
"""A TEST bundle N+1 and the two-bundle catalog the OLM upgrade test serves (not a release).

ocp-gpu has one release (hack/olm.py's RELEASE_HISTORY), and NVIDIA has published no operand
set newer than the one the release table pins (NVIDIA/gpu-operator v26.7.0 is its newest tag),
so there is no real "next release" to upgrade to.  This module makes one for the test: bundle
`<VERSION>` exactly as hack/olm.py generates it (what olm/ocp-gpu/catalog.yaml holds), and a
bundle `<next patch>-upgrade-test` whose only change is the release table: the default driver
(same branch), the device plugin and GPU feature discovery (one image), DCGM exporter and the
operator's own image (the validator's and the node status exporter's) are replaced by
references that **do not exist** (digests computed from the words "ocp-gpu upgrade test
bundle"), with `spec.replaces` naming the first CSV and `olm.skipRange` covering it.  The CSV
says so in its description and an annotation.

Why generated at test time and not committed: the test bundle is a function of the committed
bundle (every image string of the release table substituted, nothing else), so it can never
go stale against it, and nothing a user could mistake for a release sits in olm/ or bundle/.
tests/olm/test_validators.py runs `opm validate` over the catalog this writes (CI), and
tests/olm/test_olm_upgrade.py has OLM upgrade from the first bundle to the second.

    .venv/bin/python hack/olm_upgrade.py --out /tmp/upgrade-catalog   # then: opm validate it
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "hack"))
sys.path.insert(0, str(ROOT))

import olm  # noqa: E402  (hack/olm.py)
from ocp_gpu.model import releases  # noqa: E402

# The release table's entries the test bundle changes, by the operator env var carrying each
# (DEVICE_PLUGIN_IMAGE and GFD_IMAGE are one image: both change together).
CHANGED_ENV = ("DRIVER_IMAGE", "DEVICE_PLUGIN_IMAGE", "GFD_IMAGE", "DCGM_EXPORTER_IMAGE")
MAJOR, MINOR, PATCH = (int(part) for part in olm.VERSION.split("."))
TEST_VERSION = f"{MAJOR}.{MINOR}.{PATCH + 1}-upgrade-test"
TEST_CSV_NAME = f"{olm.PACKAGE}.v{TEST_VERSION}"
TEST_OPERATOR_IMAGE = releases.OPERATOR_IMAGE.rsplit(":", 1)[0] + f":v{TEST_VERSION}"
TEST_ANNOTATION = "ocp-gpu.io/test-bundle"
TEST_NOTICE = (
    "TEST BUNDLE, NOT A RELEASE: made by hack/olm_upgrade.py for the OLM upgrade test; its "
    "changed images do not exist. "
)


def _test_digest(reference: str, what: str) -> str:
    """`reference`'s repository with a digest no registry holds (computed from `what`)."""
    name = reference.split("@", 1)[0].rsplit(":", 1)[0] if "@" in reference else reference.rsplit(":", 1)[0]
    digest = hashlib.sha256(f"ocp-gpu upgrade test bundle: {what}".encode()).hexdigest()
    return f"{name}@sha256:{digest}"


def image_changes() -> dict[str, str]:
    """Each image reference of the release the test bundle replaces -> its replacement."""
    installed = releases.installed_images()
    changes = {installed[env]: _test_digest(installed[env], env) for env in CHANGED_ENV}
    # one image behind two env vars maps to one replacement
    changes[installed["GFD_IMAGE"]] = changes[installed["DEVICE_PLUGIN_IMAGE"]]
    changes[releases.OPERATOR_IMAGE] = TEST_OPERATOR_IMAGE
    return changes


def _substituted(value: Any, changes: Mapping[str, str]) -> Any:
    """`value` with every string equal to a key of `changes` replaced (the release table's images)."""
    if isinstance(value, dict):
        return {key: _substituted(item, changes) for key, item in value.items()}
    if isinstance(value, list):
        return [_substituted(item, changes) for item in value]
    if isinstance(value, str):
        return changes.get(value, value)
    return value


def upgrade_csv(root: Path) -> dict[str, Any]:
    """The test bundle's CSV: the release's with the images of `image_changes` and the upgrade edge."""
    changed: dict[str, Any] = _substituted(olm.csv(root), image_changes())
    metadata, spec = changed["metadata"], changed["spec"]
    metadata["name"] = TEST_CSV_NAME
    annotations = metadata["annotations"]
    annotations["olm.skipRange"] = f">=0.0.0 <{TEST_VERSION}"
    annotations[TEST_ANNOTATION] = "true"
    annotations["description"] = TEST_NOTICE + annotations["description"]
    spec["version"] = TEST_VERSION
    spec["replaces"] = olm.CSV_NAME
    spec["description"] = TEST_NOTICE + "\n\n" + spec.get("description", "")
    return changed


def _object(document: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64encode(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).decode()
    return {"type": "olm.bundle.object", "value": {"data": data}}


def catalog_documents(root: Path) -> list[dict[str, Any]]:
    """The file-based catalog with the release's bundle and the test bundle after it in each channel.

    NB: no bundle images (the bundles travel as olm.bundle.object properties), as the
    install test serves its catalog.
    """
    documents = copy.deepcopy(olm.catalog_documents(root, bundle_image=None))
    (release_bundle,) = [doc for doc in documents if doc["schema"] == "olm.bundle"]
    the_csv = upgrade_csv(root)
    bundle = _substituted(copy.deepcopy(release_bundle), image_changes())
    bundle["name"] = TEST_CSV_NAME
    properties = []
    for prop in bundle["properties"]:
        if prop["type"] == "olm.package":
            prop = {"type": "olm.package", "value": {"packageName": olm.PACKAGE, "version": TEST_VERSION}}
        elif prop["type"] == "olm.bundle.object":
            decoded = json.loads(base64.b64decode(prop["value"]["data"]))
            if decoded.get("kind") == "ClusterServiceVersion":
                prop = _object(the_csv)
        properties.append(prop)
    bundle["properties"] = properties
    bundle["relatedImages"] = _substituted(release_bundle["relatedImages"], image_changes())
    for channel in (doc for doc in documents if doc["schema"] == "olm.channel"):
        # NB: a new list: hack/olm.py's channels share one list of entries
        channel["entries"] = [
            *channel["entries"],
            {"name": TEST_CSV_NAME, "replaces": olm.CSV_NAME, "skipRange": f">=0.0.0 <{TEST_VERSION}"},
        ]
    documents.append(bundle)
    return documents


def write_catalog(root: Path, out: Path) -> Path:
    """The test catalog as `<out>/ocp-gpu/catalog.yaml`; returns `out`."""
    (out / olm.PACKAGE).mkdir(parents=True, exist_ok=True)
    (out / olm.PACKAGE / "catalog.yaml").write_text(yaml.safe_dump_all(catalog_documents(root)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the two-bundle catalog")
    args = parser.parse_args()
    print(write_catalog(ROOT, args.out) / olm.PACKAGE / "catalog.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
