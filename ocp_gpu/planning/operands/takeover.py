"""Taking over an object another operator made (NVIDIA's GPU Operator, or ocp-gpu before a selector change).

Decides, from the live object and what ocp-gpu renders under the same name:
- whether another field manager still owns fields of it (`foreign_managers`): server-side
  apply keeps every field another manager owns, so NVIDIA's `allowPrivilegeEscalation: false`
  would stay beside our `privileged: true` (HTTP 422) and the live object would not be what we
  render;
- the managedFields that make ocp-gpu the one owner of every field of the main resource
  (`taken_over_managed_fields`): every entry's field set merged into one Apply entry of ours,
  the status subresource's entries kept (as client-go's csaupgrade does for client-side apply).
  The next apply then removes whatever we own and no longer render, so the live object is
  exactly ours;
- whether a DaemonSet must be replaced because its selector (immutable) is not ours
  (`selector_differs`), and which running pods to relabel so that ours adopts them
  (`pods_to_relabel`): the DaemonSet is deleted with propagationPolicy Orphan (its pods keep
  running), the orphans get the new selector's labels, then ours is created and adopts them, so
  no driver restarts and a node never runs two driver pods;
- which running driver pods of another operator's driver DaemonSet under another name ocp-gpu's
  new driver DaemonSet takes (`plan_driver_handover`): NVIDIA's single vanilla-Kubernetes
  `nvidia-driver-daemonset` (one for every OS) where ocp-gpu runs one per OS key.  Its pods on the
  new DaemonSet's nodes get that DaemonSet's selector labels, then NVIDIA's DaemonSet is deleted
  with propagationPolicy Orphan, then ours is created and adopts them: no driver restarts, and
  since NVIDIA's driver pods and ours repel each other (the same anti-affinity on
  app.kubernetes.io/component=nvidia-driver), a node never runs two.

Pure: no I/O (kube/adopting.py does it).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ocp_gpu.model import labels

# The managedFields operation of server-side apply.
APPLY: Final = "Apply"


def _main_resource(entry: Mapping[str, Any]) -> bool:
    """An entry of the object itself, not of a subresource (status, scale)."""
    return not entry.get("subresource")


def foreign_managers(managed_fields: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The managers other than ocp-gpu's apply that own fields of the main resource, sorted.

    NB: ocp-gpu's own entry with operation Update (a PUT or a plain PATCH) counts as foreign:
    server-side apply treats it as another manager.
    """
    return tuple(
        sorted(
            {
                f"{entry.get('manager', '')} ({entry.get('operation', '')})"
                for entry in managed_fields
                if _main_resource(entry)
                and (entry.get("manager") != labels.FIELD_MANAGER or entry.get("operation") != APPLY)
            }
        )
    )


def _merge_fields(into: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """The union of two FieldsV1 trees (`f:name`, `k:{...}`, `v:...`, `i:...` keys; `.` leaves)."""
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_fields(into[key], value)
        elif isinstance(value, Mapping):
            into[key] = copy.deepcopy(dict(value))
        else:
            into.setdefault(key, copy.deepcopy(value))


def taken_over_managed_fields(
    managed_fields: Iterable[Mapping[str, Any]], api_version: str
) -> list[dict[str, Any]]:
    """The managedFields with every main-resource field owned by ocp-gpu's apply alone.

    Subresource entries (the controllers' status) are kept as they are.
    """
    merged: dict[str, Any] = {}
    kept: list[dict[str, Any]] = []
    for entry in managed_fields:
        if _main_resource(entry):
            _merge_fields(merged, entry.get("fieldsV1") or {})
        else:
            kept.append(copy.deepcopy(dict(entry)))
    ours = {
        "manager": labels.FIELD_MANAGER,
        "operation": APPLY,
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": merged,
    }
    return [ours, *kept]


def selector_of(daemonset: Mapping[str, Any]) -> dict[str, Any]:
    """A DaemonSet's `spec.selector` ({} when unset)."""
    return dict((daemonset.get("spec") or {}).get("selector") or {})


def selector_differs(live: Mapping[str, Any], rendered: Mapping[str, Any]) -> bool:
    """The live DaemonSet's selector is not the rendered one: it cannot be updated, only replaced."""
    return _normal(selector_of(live)) != _normal(selector_of(rendered))


def _normal(selector: Mapping[str, Any]) -> tuple[Any, ...]:
    expressions = tuple(
        sorted(
            (str(e.get("key")), str(e.get("operator")), tuple(sorted(e.get("values") or ())))
            for e in selector.get("matchExpressions") or ()
        )
    )
    return (tuple(sorted((selector.get("matchLabels") or {}).items())), expressions)


@dataclasses.dataclass(frozen=True)
class Relabel:
    """One running pod of a replaced DaemonSet, and the labels it gets so the new one adopts it."""

    name: str
    node: str
    labels: Mapping[str, str]


def pods_to_relabel(
    pods: Iterable[Mapping[str, Any]], old_uid: str, new_selector: Mapping[str, Any]
) -> list[Relabel]:
    """The pods the replaced DaemonSet (uid `old_uid`) left that lack the new selector's labels.

    A pod counts when it has no controller, or the old DaemonSet is still its controller (the
    garbage collector has not orphaned it yet); a pod another controller owns, or one being
    deleted, is left alone.  NB: only matchLabels are set: a selector with expressions is ours
    never (rendered selectors are matchLabels only).
    """
    wanted = {str(k): str(v) for k, v in (new_selector.get("matchLabels") or {}).items()}
    found: list[Relabel] = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            continue
        controllers = [ref for ref in metadata.get("ownerReferences") or () if ref.get("controller")]
        if controllers and controllers[0].get("uid") != old_uid:
            continue
        have = metadata.get("labels") or {}
        missing = {key: value for key, value in wanted.items() if have.get(key) != value}
        if missing:
            found.append(
                Relabel(
                    str(metadata.get("name", "")), str((pod.get("spec") or {}).get("nodeName", "")), missing
                )
            )
    return sorted(found, key=lambda relabel: relabel.name)


def _controller_uid(pod: Mapping[str, Any]) -> str | None:
    """The uid of the pod's controller (its ownerReference with controller: true); None for an orphan."""
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return next((str(ref.get("uid", "")) for ref in refs if ref.get("controller")), None)


@dataclasses.dataclass(frozen=True)
class DriverHandover:
    """Before ocp-gpu's driver DaemonSet is first created: the running driver pods of another
    operator's driver DaemonSets that it takes (relabelled), and those DaemonSets (deleted with
    propagationPolicy Orphan after the relabel, so the pods stay and become orphans)."""

    relabel: tuple[Relabel, ...]
    # (name, uid) of each DaemonSet to delete leaving its pods.
    delete: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        gone = ", ".join(name for name, _ in self.delete)
        return f"took {len(self.relabel)} running driver pod(s)" + (
            f" of DaemonSet {gone} (deleted leaving its pods)" if gone else " left without a DaemonSet"
        )


def plan_driver_handover(
    rendered: Mapping[str, Any],
    foreign_daemonsets: Iterable[Mapping[str, Any]],
    foreign_pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[str],
) -> DriverHandover:
    """What ocp-gpu's driver DaemonSet `rendered` (not created yet) takes over on `nodes` (those
    its nodeSelector selects) from another operator's driver pods (`foreign_pods`) and driver
    DaemonSets under other names (`foreign_daemonsets`).

    A pod is taken when it runs on one of `nodes`, is not being deleted, and is an orphan or
    controlled by one of `foreign_daemonsets`: it gets the labels of `rendered`'s selector it lacks
    (a pod that has them all is already taken).  A DaemonSet is deleted when it controls a pod
    taken.  NB: a pod on a node ours does not select is not taken: the DaemonSet controller would
    delete it as misscheduled; one controlled by anything else (ours, a user's) is left alone.
    """
    wanted = {str(k): str(v) for k, v in (selector_of(rendered).get("matchLabels") or {}).items()}
    name = str((rendered.get("metadata") or {}).get("name", ""))
    by_uid = {
        str(ds["metadata"].get("uid", "")): str(ds["metadata"].get("name", ""))
        for ds in foreign_daemonsets
        if ds["metadata"].get("name") != name
    }
    ours = set(nodes)
    relabel: list[Relabel] = []
    delete: set[tuple[str, str]] = set()
    for pod in foreign_pods:
        metadata = pod.get("metadata") or {}
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if metadata.get("deletionTimestamp") or node not in ours:
            # going, or on a node ours does not run on: not ours to take
            continue
        controller = _controller_uid(pod)
        if controller is not None and controller not in by_uid:
            # another controller's pod (ours already, or a user's): never touched
            continue
        if controller is not None:
            delete.add((by_uid[controller], controller))
        have = metadata.get("labels") or {}
        missing = {key: value for key, value in wanted.items() if have.get(key) != value}
        if missing:
            relabel.append(Relabel(str(metadata.get("name", "")), node, missing))
    return DriverHandover(tuple(sorted(relabel, key=lambda r: r.name)), tuple(sorted(delete)))


# --- what another operator left that ocp-gpu renders nothing for -------------------------


@dataclasses.dataclass(frozen=True)
class Foreign:
    """An object in ocp-gpu's reach that is not ocp-gpu's (no app.kubernetes.io/managed-by=ocp-gpu)."""

    kind: str
    namespace: str
    name: str
    # The uids its ownerReferences name.
    owners: tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    def describe(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


@dataclasses.dataclass(frozen=True)
class Leftovers:
    """The ClusterPolicy's objects that ocp-gpu does not render: deleted, or left (and why)."""

    delete: tuple[Foreign, ...]
    # Left in place, each with why.
    keep: tuple[tuple[Foreign, str], ...]


def _is_driver(found: Foreign) -> bool:
    return found.labels.get(labels.COMPONENT) == labels.DRIVER_COMPONENT or found.name.startswith(
        labels.DRIVER_APP
    )


def plan_leftovers(
    found: Iterable[Foreign], policy_uid: str, rendered: Iterable[tuple[str, str, str]]
) -> Leftovers:
    """Which of another operator's objects go: only those the active ClusterPolicy owns (their
    ownerReference: the user's own objects are never touched) under a name ocp-gpu renders nothing
    for.  NB: never a driver DaemonSet, whose pods are the running drivers (NVIDIA's vanilla one
    has per-OS counterparts here under other names: deleting it would restart every driver)."""
    ours = set(rendered)
    delete: list[Foreign] = []
    keep: list[tuple[Foreign, str]] = []
    for item in sorted(found, key=lambda f: f.ident):
        if policy_uid not in item.owners:
            continue
        if item.ident in ours:
            # about to be adopted (an apply failed, or is still to come): not a leftover
            continue
        if item.kind == "DaemonSet" and _is_driver(item):
            keep.append((item, "its pods are running drivers"))
        else:
            delete.append(item)
    return Leftovers(tuple(delete), tuple(keep))


def migrated_from(adopted: Iterable[str], leftovers: Leftovers, deleted: Iterable[str]) -> dict[str, Any]:
    """The ClusterPolicy's status.migratedFrom: what ocp-gpu took over and what it left or deleted."""
    return {
        "operator": "NVIDIA GPU Operator",
        "adopted": sorted(set(adopted)),
        "deleted": sorted(set(deleted)),
        "left": [f"{item.describe()} ({why})" for item, why in leftovers.keep],
    }
