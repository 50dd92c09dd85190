"""We test these aspects of docs/install-openshift.md against the bundle:

- the install objects (CatalogSource, Namespace, OperatorGroup, Subscription) subscribe to
  the catalog's package on its default channel, in the CSV's suggested namespace, with an
  OperatorGroup the CSV's install modes allow (tests/olm/test_olm_install.py applies the same
  objects to a real OLM);
- the oc-mirror ImageSetConfiguration mirrors that package and channel from the catalog
  image the section builds, and NFD, the package the bundle depends on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "install-openshift.md").read_text()
CATALOG = [doc for doc in yaml.safe_load_all((ROOT / "olm/ocp-gpu/catalog.yaml").read_text()) if doc]
CSV: dict[str, Any] = yaml.safe_load(
    (ROOT / "bundle/manifests/ocp-gpu.clusterserviceversion.yaml").read_text()
)


def readme_block(marker: str) -> list[dict[str, Any]]:
    """The YAML documents of the ```yaml block right after `<!-- marker: ... -->`."""
    found = re.search(rf"<!-- {re.escape(marker)}:[^>]*-->\n```yaml\n(.*?)```", README, re.DOTALL)
    assert found, f"docs/install-openshift.md has no block marked {marker}"
    return [doc for doc in yaml.safe_load_all(found.group(1)) if doc]


def test_install_objects_subscribe_to_the_catalog() -> None:
    objects = {doc["kind"]: doc for doc in readme_block("olm-install")}
    assert set(objects) == {"CatalogSource", "Namespace", "OperatorGroup", "Subscription"}
    namespace = CSV["metadata"]["annotations"]["operatorframework.io/suggested-namespace"]
    (package,) = [doc for doc in CATALOG if doc["schema"] == "olm.package"]
    subscription = objects["Subscription"]
    assert subscription["metadata"]["namespace"] == objects["Namespace"]["metadata"]["name"] == namespace
    assert subscription["spec"]["name"] == package["name"]
    assert subscription["spec"]["channel"] == package["defaultChannel"]
    catalog = objects["CatalogSource"]
    assert subscription["spec"]["source"] == catalog["metadata"]["name"]
    assert subscription["spec"]["sourceNamespace"] == catalog["metadata"]["namespace"]
    group = objects["OperatorGroup"]
    assert group["metadata"]["namespace"] == namespace and group["spec"]["targetNamespaces"] == [namespace]
    modes = {mode["type"]: mode["supported"] for mode in CSV["spec"]["installModes"]}
    assert modes["OwnNamespace"]
    assert f"-t {catalog['spec']['image']} ." in README


def test_image_set_configuration_mirrors_the_package_and_nfd() -> None:
    (config,) = readme_block("oc-mirror")
    assert config["kind"] == "ImageSetConfiguration"
    install = {doc["kind"]: doc for doc in readme_block("olm-install")}
    operators = {entry["catalog"]: entry["packages"] for entry in config["mirror"]["operators"]}
    ours = operators[install["CatalogSource"]["spec"]["image"]]
    channels = {doc["name"] for doc in CATALOG if doc["schema"] == "olm.channel"}
    assert [(p["name"], [c["name"] for c in p["channels"]]) for p in ours] == [("ocp-gpu", ["stable"])]
    assert {"stable"} <= channels
    dependency = yaml.safe_load((ROOT / "bundle/metadata/dependencies.yaml").read_text())["dependencies"][0]
    nfd = [
        p
        for packages in operators.values()
        for p in packages
        if p["name"] == dependency["value"]["packageName"]
    ]
    assert nfd, "the ImageSetConfiguration must mirror the NFD package the bundle depends on"
