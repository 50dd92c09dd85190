"""Server-side apply and deletion of the objects the operator owns.

Every object gets the field manager `ocp-gpu`, `app.kubernetes.io/managed-by=ocp-gpu`,
an ownerReference to the ClusterPolicy (so deleting the policy cascades through
the garbage collector) and an annotation with the hash of what we applied, so an
unchanged object is never re-applied: zero writes in steady state.

`apply_if_changed` is how every rendered manifest reaches the cluster: server-side
apply, skipped when the watched object (kube/owning: every owned kind is watched)
carries the same applied hash and belongs to the active policy.  So a quiet cluster
sees no writes, a restarted operator re-applies only what changed, and an owned
object deleted by hand (or garbage-collected with an old policy) comes back.  What it
decides from and writes through is the caller's `Ledger` (the reconcilers' view and cache).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ocp_gpu.kube import adopting, clients, owning, requesting
from ocp_gpu.model import labels
from ocp_gpu.planning.operands import takeover

# NB: the operand mechanism's logger, as before these moved here (`applied DaemonSet ...` lines).
logger = logging.getLogger("ocp_gpu.operands")


@dataclasses.dataclass(frozen=True)
class Ledger:
    """What apply_if_changed and delete_if_present decide from, and write through: the caller's
    records (reconcilers/runtime.Runtime.ledger), shared, never copied."""

    # Every owned object the watches see (reconcilers/cluster_view.ClusterView.owned).  NB: written
    # through on apply and delete, so that the next pass does not write again before the watch shows it.
    owned: dict[owning.ObjectIdent, owning.ObservedObject]
    # Objects of kinds no watch covers that this process applied (reconcilers/applied_cache.py).
    applied: dict[owning.ObjectIdent, str]
    # Objects of disabled operands this process deleted: not deleted again.
    removed: set[owning.ObjectIdent]
    # Objects another operator made that this process adopted ("Kind ns/name").
    adopted: set[str]
    # How many applies of `apply_all` run at once in the whole process (APPLY_CONCURRENCY), shared by
    # the pass's operands and monitoring; None: one gate per call (tests).
    gate: asyncio.Semaphore | None = None
    # The drivers' lane (DRIVER_LANE_CONCURRENCY): `apply_all(..., driver_lane=True)` goes through it.
    driver_gate: asyncio.Semaphore | None = None


def applied_hash(manifest: Mapping[str, Any]) -> str:
    """A stable digest of a manifest as rendered (before ownership metadata is added)."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def owned(manifest: Mapping[str, Any], owner: Mapping[str, str]) -> dict[str, Any]:
    """The manifest with our label, owner reference and applied-hash annotation."""
    result = copy.deepcopy(dict(manifest))
    metadata = result.setdefault("metadata", {})
    metadata.setdefault("labels", {})[labels.MANAGED_BY] = labels.MANAGED_BY_VALUE
    metadata.setdefault("annotations", {})[labels.APPLIED_HASH] = applied_hash(manifest)
    metadata["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["name"],
            "uid": owner["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return result


def apply(api_client: clients.ApiClient, manifest: Mapping[str, Any]) -> Any:
    """Server-side apply, forcing ownership of the fields we set (we are their one owner)."""
    metadata = manifest["metadata"]
    path = requesting.object_path(
        manifest["apiVersion"], manifest["kind"], metadata["name"], metadata.get("namespace")
    )
    return requesting.request(
        api_client,
        "PATCH",
        path,
        query=[("fieldManager", labels.FIELD_MANAGER), ("force", "true")],
        body=dict(manifest),
        content_type="application/apply-patch+yaml",
        resource=manifest["kind"].lower() + "s",
    )


def delete(
    api_client: clients.ApiClient, api_version: str, kind: str, name: str, namespace: str | None = None
) -> bool:
    """Delete with foreground-independent (background) propagation; False if it was already gone."""
    try:
        requesting.request(
            api_client,
            "DELETE",
            requesting.object_path(api_version, kind, name, namespace),
            body={"propagationPolicy": "Background"},
            resource=kind.lower() + "s",
        )
    except requesting.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def delete_foreign(api: clients.ApiClient, item: takeover.Foreign, kinds: Iterable[owning.OwnedKind]) -> None:
    """Delete one leftover another operator made (background propagation, as `delete`)."""
    kind = next(k for k in kinds if k.kind == item.kind)
    delete(api, kind.api_version, item.kind, item.name, item.namespace or None)


# How many applies `apply_all` keeps in flight in the whole process (Ledger.gate): a takeover adopts
# tens of objects at three round trips each, and one after another they were most of its time
# (below).  NB: few: at load 35 on 2 cores a burst of a fresh install's applies, 8 at a time per
# operand, delayed the tests' 4 s Lease's renewal past its 3 s deadline.
APPLY_CONCURRENCY: Final = 4
# The drivers' own lane beside it: a fresh install's driver DaemonSet (its pods take longest to
# be ready, and every other operand's pods wait for them) queued behind every other operand's
# RBAC in the shared gate, first come first served: 1.1 s after the ClusterPolicy at 1,000
# nodes with the whole stack on, where the driver alone takes 0.14 s.  Its few objects (RBAC, a
# ConfigMap, a DaemonSet per RHCOS build) go through a gate of their own instead.
DRIVER_LANE_CONCURRENCY: Final = 2
# The kinds that bind a role: the API server checks, as it creates one, that the role it names
# exists and grants nothing the operator lacks (404 before the role is there).
BINDING_KINDS: Final = frozenset({"RoleBinding", "ClusterRoleBinding"})
# The kinds that run pods: their ServiceAccount, RBAC and ConfigMaps go first, or the DaemonSet
# controller's first pods are refused (no ServiceAccount yet) and it backs off.
WORKLOAD_KINDS: Final = frozenset({"DaemonSet", "Deployment"})


def apply_stage(kind: str) -> int:
    """When a manifest of `kind` goes in `apply_all`: what others name (0), bindings (1), workloads (2)."""
    if kind in WORKLOAD_KINDS:
        return 2
    return 1 if kind in BINDING_KINDS else 0


def needs_write(
    ledger: Ledger, owner: Mapping[str, str], manifest: Mapping[str, Any], wanted: str | None = None
) -> bool:
    """False when the watch shows `manifest` applied as rendered, owned by this policy: no write."""
    return not owning.is_current(
        ledger.owned.get(owning.manifest_ident(manifest)),
        applied_hash(manifest) if wanted is None else wanted,
        owner.get("uid", ""),
    )


async def apply_all(
    api_client: clients.ApiClient,
    ledger: Ledger,
    owner: Mapping[str, str],
    manifests: Iterable[tuple[Mapping[str, Any], str | None]],
    errors: dict[str, str],
    driver_lane: bool = False,
) -> None:
    """`apply_if_changed` for every (manifest, applied hash or None), APPLY_CONCURRENCY at a time in
    the whole process (`Ledger.gate`; `driver_lane`: `Ledger.driver_gate`, never behind
    the others), in the stages of `apply_stage`: each stage's applies run together, a stage starts
    when the one before has ended.

    NB: concurrent because a takeover adopts every object NVIDIA's operator made (a GET, a PATCH of
    its managedFields and the apply): one after another, 39 objects were ~10 s of a 13.5 s takeover
    on an idle machine, and several times that loaded.  In steady state every manifest is current:
    no task is made.  Two driver DaemonSets handed over at once (kube/adopting) stay safe: each
    relabels its own nodes' pods before the other operator's DaemonSet goes, and is created only
    once it is gone.
    """
    stages: dict[int, list[tuple[Mapping[str, Any], str | None]]] = {}
    for manifest, wanted in manifests:
        wanted = applied_hash(manifest) if wanted is None else wanted
        if needs_write(ledger, owner, manifest, wanted):
            stages.setdefault(apply_stage(str(manifest["kind"])), []).append((manifest, wanted))
    shared = ledger.driver_gate if driver_lane else ledger.gate
    gate = shared or asyncio.Semaphore(DRIVER_LANE_CONCURRENCY if driver_lane else APPLY_CONCURRENCY)

    async def one(manifest: Mapping[str, Any], wanted: str | None) -> None:
        async with gate:
            await apply_if_changed(api_client, ledger, owner, manifest, errors, wanted)

    for stage in sorted(stages):
        await asyncio.gather(*(one(manifest, wanted) for manifest, wanted in stages[stage]))


async def apply_if_changed(
    api_client: clients.ApiClient,
    ledger: Ledger,
    owner: Mapping[str, str],
    manifest: Mapping[str, Any],
    errors: dict[str, str],
    wanted: str | None = None,
) -> None:
    """Server-side apply `manifest` unless the watched object is already as rendered; errors to `errors`.

    `wanted`: the manifest's applied hash when the caller kept it (desired/operand_render_cache).
    """
    ident = owning.manifest_ident(manifest)
    if not needs_write(ledger, owner, manifest, wanted):
        # The watch shows it applied as rendered, owned by this policy: no write.
        return
    try:
        if ledger.owned.get(ident) is None:
            # Not known as ours: NVIDIA's operator (or someone) may have made it; one GET says
            # (kube/adopting: its other field managers' fields become ours, a foreign selector
            # means replacing the DaemonSet without touching its pods).
            adopted = await asyncio.to_thread(adopting.adopt, api_client, manifest)
            if adopted:
                logger.info("adopting %s %s/%s: %s", *ident, adopted)
                ledger.adopted.add(f"{ident[0]} {ident[1] + '/' if ident[1] else ''}{ident[2]}")
        try:
            applied = await asyncio.to_thread(apply, api_client, owned(manifest, owner))
        except requesting.ApiException as error:
            if not adopting.is_immutable_selector(error):
                raise
            # Ours from before a selector change (or made between the GET and the apply): replace it.
            live = await asyncio.to_thread(adopting.get_object, api_client, manifest)
            if live is None:
                raise
            replaced = await asyncio.to_thread(adopting.replace_daemonset, api_client, live, manifest)
            logger.info("adopting %s %s/%s: %s", *ident, replaced)
            applied = await asyncio.to_thread(apply, api_client, owned(manifest, owner))
        # The response is the object as stored: the watch will confirm the same record.
        ledger.owned[ident] = owning.observed_object(applied or {})
        ledger.removed.discard(ident)
        logger.info("applied %s %s/%s", *ident)
    except Exception as error:  # per object: one failure never blocks the others
        errors[f"{ident[0]} {ident[2]}"] = requesting.describe_error(error)
        logger.warning("could not apply %s %s: %s", ident[0], ident[2], requesting.describe_error(error))


async def delete_if_present(
    api_client: clients.ApiClient, ledger: Ledger, manifest: Mapping[str, Any], errors: dict[str, str]
) -> None:
    """Delete one of our objects unless this process knows it is gone; errors go to `errors`."""
    metadata = manifest["metadata"]
    ident = (manifest["kind"], str(metadata.get("namespace", "")), str(metadata["name"]))
    kind, namespace, name = ident
    if owning.is_owned_kind(kind):
        # Watched (kube/owning): present exactly when the watch shows it.
        present = ident in ledger.owned
    else:
        present = ident in ledger.applied or ident not in ledger.removed
    if not present:
        # Gone (watched), or deleted by this process already: no write.
        return
    try:
        await asyncio.to_thread(delete, api_client, manifest["apiVersion"], kind, name, namespace or None)
        ledger.applied.pop(ident, None)
        ledger.removed.add(ident)
        # Until the watch reports it gone: no second DELETE from the next pass (or this one).
        ledger.owned.pop(ident, None)
        logger.info("deleted %s %s", kind, name)
    except Exception as error:
        errors[f"{kind} {name}"] = requesting.describe_error(error)
