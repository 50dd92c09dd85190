"""We test these aspects of the owned-kinds table (kube/owning.py), without a server:

- every kind a template renders is watched (a new template kind without a row fails here);
- each row agrees with the REST paths the operator writes through (kube/requesting.RESOURCES);
- "already applied" needs the object observed, with the same hash, owned by the active policy.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ocp_gpu.kube import owning, requesting
from ocp_gpu.model import labels

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# A top-level `kind:` (not a roleRef's or subject's, which are indented).
TOP_LEVEL_KIND = re.compile(r"^kind:\s*(\S+)", re.MULTILINE)


def rendered_kinds() -> set[str]:
    return {
        kind
        for template in TEMPLATES.glob("state-*/*.yaml.j2")
        for kind in TOP_LEVEL_KIND.findall(template.read_text())
    }


def test_every_template_kind_is_watched() -> None:
    kinds = rendered_kinds()
    assert kinds, "no template found"
    missing = kinds - {row.kind for row in owning.OWNED_KINDS}
    assert not missing, f"add a row to kube/owning.OWNED_KINDS for {sorted(missing)}"


@pytest.mark.parametrize("row", owning.OWNED_KINDS, ids=lambda row: row.kind)
def test_row_agrees_with_rest_paths(row: owning.OwnedKind) -> None:
    prefix, plural, namespaced = requesting.RESOURCES[(row.api_version, row.kind)]
    assert (plural, namespaced) == (row.plural, row.namespaced)
    assert prefix.endswith(row.api_version)


def test_rows_of_unserved_groups_are_not_watched() -> None:
    monitoring = {row for row in owning.OWNED_KINDS if row.group == "monitoring.coreos.com"}
    assert monitoring, "the ServiceMonitor and PrometheusRule rows"
    assert not monitoring & set(owning.watched_kinds(frozenset({"apps"})))
    assert monitoring <= set(owning.watched_kinds(frozenset({"monitoring.coreos.com"})))
    # The core, apps and RBAC groups are always watched (discovery does not list the core group);
    # the DRA driver's kinds (resource.k8s.io, admissionregistration.k8s.io) where served.
    dra = {
        row for row in owning.OWNED_KINDS if row.group in ("resource.k8s.io", "admissionregistration.k8s.io")
    }
    assert len(dra) == 3
    assert len(owning.watched_kinds(frozenset())) == len(owning.OWNED_KINDS) - len(monitoring) - len(dra)


def body(hash_: str | None, uid: str | None) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "x"}
    if hash_ is not None:
        metadata["annotations"] = {labels.APPLIED_HASH: hash_}
    if uid is not None:
        metadata["ownerReferences"] = [
            {"uid": "other", "controller": False},
            {"uid": uid, "controller": True},
        ]
    return {"metadata": metadata}


@pytest.mark.parametrize(
    ("observed", "current"),
    [
        (None, False),  # never seen, or deleted: apply
        (body("h1", "u1"), True),  # as rendered, ours: no write
        (body("h0", "u1"), False),  # rendered differently: apply
        (body("h1", "u0"), False),  # owned by a deleted policy: adopt before the GC removes it
        (body(None, "u1"), False),  # our annotation removed by someone: apply
        (body("h1", None), False),  # no owner: apply (ownerReference restored)
    ],
)
def test_is_current(observed: dict[str, object] | None, current: bool) -> None:
    record = owning.observed_object(observed) if observed is not None else None
    assert owning.is_current(record, "h1", "u1") is current
