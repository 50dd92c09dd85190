"""We test these aspects of the test bundle N+1 the OLM upgrade test serves (hack/olm_upgrade.py):

- its CSV differs from the release's (hack/olm.py) only where an upgrade must: its name,
  version, `replaces` (the release's CSV), `olm.skipRange` (covering the release's version),
  the test-bundle notice, and image references; every changed image is one of the release
  table's (driver, device plugin and GFD, DCGM exporter, the operator's own), each replaced
  in every place it appears, and the replacements are no release's;
- the catalog keeps the release's bundle byte for byte and adds the test bundle after it in
  every channel, with the upgrade edge (`replaces`, `skipRange`) and its own CSV embedded;
- a planted difference outside the release table (a changed RBAC rule) is found by the
  comparison, so it can fail.
(`opm validate` of that catalog: tests/olm/test_validators.py.)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ocp_gpu.model import releases
from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]


olm = hack_scripts.load("olm", on_path=True)
upgrade = hack_scripts.load("olm_upgrade", on_path=True)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}/{index}")
    else:
        yield path, value


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Every leaf path whose value differs (or exists on one side only) -> (before, after)."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    return {
        path: (old.get(path), new.get(path))
        for path in old.keys() | new.keys()
        if old.get(path) != new.get(path)
    }


UPGRADE_EDGE = {
    "/metadata/name",
    "/spec/version",
    "/spec/replaces",
    "/metadata/annotations/olm.skipRange",
    f"/metadata/annotations/{upgrade.TEST_ANNOTATION}",
    "/metadata/annotations/description",
    "/spec/description",
}


def outside_the_release_table(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    changes = upgrade.image_changes()
    return {
        path: pair
        for path, pair in differences(before, after).items()
        if path not in UPGRADE_EDGE and changes.get(pair[0]) != pair[1]
    }


def test_the_test_csv_differs_only_in_the_release_table_and_the_upgrade_edge() -> None:
    release, test = olm.csv(ROOT), upgrade.upgrade_csv(ROOT)
    assert outside_the_release_table(release, test) == {}
    assert test["metadata"]["name"] == upgrade.TEST_CSV_NAME != release["metadata"]["name"]
    assert test["spec"]["replaces"] == olm.CSV_NAME
    assert test["metadata"]["annotations"]["olm.skipRange"] == f">=0.0.0 <{upgrade.TEST_VERSION}"
    assert test["metadata"]["annotations"]["description"].startswith("TEST BUNDLE, NOT A RELEASE")
    # every image the release table changes, changed everywhere it appears (no old copy left)
    changed = {pair[0] for pair in differences(release, test).values()} & set(upgrade.image_changes())
    assert changed == set(upgrade.image_changes())
    assert not {value for _, value in _leaves(test)} & changed
    env = {item["name"]: item["value"] for item in _deployment_env(test)}
    release_env = {item["name"]: item["value"] for item in _deployment_env(release)}
    assert {name for name in env if env[name] != release_env[name]} == {
        *upgrade.CHANGED_ENV,
        releases.OPERATOR_IMAGE_ENV,
    }
    assert env["DEVICE_PLUGIN_IMAGE"] == env["GFD_IMAGE"]
    # the replacements are no image of the release (and name no registry's digest we know)
    assert not set(upgrade.image_changes().values()) & {
        *releases.RELEASE_DIGESTS.values(),
        releases.OPERATOR_IMAGE,
    }


def _deployment_env(csv: dict[str, Any]) -> list[dict[str, Any]]:
    (deployment,) = csv["spec"]["install"]["spec"]["deployments"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [item for item in container["env"] if "value" in item]


def test_the_comparison_finds_a_change_outside_the_release_table() -> None:
    release, test = olm.csv(ROOT), upgrade.upgrade_csv(ROOT)
    test["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"][0]["verbs"].append("deletecollection")
    found = outside_the_release_table(release, test)
    assert len(found) == 1 and next(iter(found)).startswith("/spec/install/spec/clusterPermissions/0/rules/0")


def _bundles(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {doc["name"]: doc for doc in documents if doc["schema"] == "olm.bundle"}


def test_the_catalog_adds_the_test_bundle_after_the_release() -> None:
    release_docs = olm.catalog_documents(ROOT, bundle_image=None)
    documents = upgrade.catalog_documents(ROOT)
    bundles = _bundles(documents)
    assert set(bundles) == {olm.CSV_NAME, upgrade.TEST_CSV_NAME}
    assert bundles[olm.CSV_NAME] == _bundles(release_docs)[olm.CSV_NAME]
    for channel in (doc for doc in documents if doc["schema"] == "olm.channel"):
        assert channel["entries"] == [
            {"name": olm.CSV_NAME},
            {
                "name": upgrade.TEST_CSV_NAME,
                "replaces": olm.CSV_NAME,
                "skipRange": f">=0.0.0 <{upgrade.TEST_VERSION}",
            },
        ]
    test_bundle = bundles[upgrade.TEST_CSV_NAME]
    embedded = [
        json.loads(base64.b64decode(prop["value"]["data"]))
        for prop in test_bundle["properties"]
        if prop["type"] == "olm.bundle.object"
    ]
    assert upgrade.upgrade_csv(ROOT) in embedded
    (package,) = [prop["value"] for prop in test_bundle["properties"] if prop["type"] == "olm.package"]
    assert package == {"packageName": "ocp-gpu", "version": upgrade.TEST_VERSION}
    related = {item["image"] for item in test_bundle["relatedImages"]}
    assert set(upgrade.image_changes().values()) <= related
    assert not related & set(upgrade.image_changes())
