"""We test these aspects of taking over objects another operator made (planning/operands/takeover.py):

- foreign field managers are named, ocp-gpu's own apply is not, its Update entry is;
- the taken-over managedFields give ocp-gpu's apply every field any manager of the main resource
  owned (the union of their FieldsV1 trees), and keep the status subresource's entries;
- a DaemonSet is replaced exactly when its selector is not the rendered one (order aside);
- the pods to relabel are those the replaced DaemonSet left (no controller, or still it), missing
  a label of the new selector; a pod of another controller or one being deleted is left alone;
- a driver DaemonSet of ours about to be created takes another operator's driver pods on its
  nodes (NVIDIA's single vanilla `nvidia-driver-daemonset` split into ocp-gpu's per-OS ones): an
  orphan or a pod of a foreign DaemonSet gets the missing selector labels, that DaemonSet is to be
  deleted; pods on other nodes, being deleted or of another controller are left alone, and so is
  a foreign DaemonSet under ocp-gpu's own name (adopted in place);
- leftovers: deleted only when the ClusterPolicy owns them and ocp-gpu renders nothing of that
  name; never a driver DaemonSet (its pods are the drivers), never the user's own objects.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.planning.operands import takeover

# As NVIDIA's operator (controller-runtime, manager "gpu-operator") and the DaemonSet controller write them.
NVIDIA_ENTRY = {
    "manager": "gpu-operator",
    "operation": "Update",
    "apiVersion": "apps/v1",
    "fieldsType": "FieldsV1",
    "fieldsV1": {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"nvidia-device-plugin"}': {
                            ".": {},
                            "f:securityContext": {"f:allowPrivilegeEscalation": {}, "f:capabilities": {}},
                        }
                    }
                }
            }
        },
    },
}
STATUS_ENTRY = {
    "manager": "kube-controller-manager",
    "operation": "Update",
    "apiVersion": "apps/v1",
    "subresource": "status",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:status": {"f:numberReady": {}}},
}
OURS = {
    "manager": "ocp-gpu",
    "operation": "Apply",
    "apiVersion": "apps/v1",
    "fieldsType": "FieldsV1",
    "fieldsV1": {
        "f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}},
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"nvidia-device-plugin"}': {"f:securityContext": {"f:privileged": {}}}
                    }
                }
            }
        },
    },
}


def test_foreign_managers_are_named_and_ours_and_status_are_not() -> None:
    assert takeover.foreign_managers([OURS, STATUS_ENTRY]) == ()
    assert takeover.foreign_managers([NVIDIA_ENTRY, OURS, STATUS_ENTRY]) == ("gpu-operator (Update)",)
    # ocp-gpu's own PUT is another manager to server-side apply
    assert takeover.foreign_managers([{**OURS, "operation": "Update"}]) == ("ocp-gpu (Update)",)


def test_taken_over_fields_are_the_union_owned_by_our_apply_alone() -> None:
    result = takeover.taken_over_managed_fields([NVIDIA_ENTRY, OURS, STATUS_ENTRY], "apps/v1")
    assert [(e["manager"], e["operation"], e.get("subresource")) for e in result] == [
        ("ocp-gpu", "Apply", None),
        ("kube-controller-manager", "Update", "status"),
    ]
    assert takeover.foreign_managers(result) == ()
    fields = result[0]["fieldsV1"]
    assert fields["f:metadata"]["f:labels"] == {".": {}, "f:app": {}, "f:app.kubernetes.io/managed-by": {}}
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"nvidia-device-plugin"}']
    # NVIDIA's allowPrivilegeEscalation is now ours: our next apply, which omits it, removes it
    assert container["f:securityContext"] == {
        "f:allowPrivilegeEscalation": {},
        "f:capabilities": {},
        "f:privileged": {},
    }
    # the input is not changed
    assert (
        "f:privileged"
        not in NVIDIA_ENTRY["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][
            'k:{"name":"nvidia-device-plugin"}'
        ]["f:securityContext"]
    )


def ds(match_labels: dict[str, str]) -> dict[str, Any]:
    return {"spec": {"selector": {"matchLabels": match_labels}}}


def test_a_daemonset_is_replaced_exactly_when_its_selector_is_not_ours() -> None:
    nvidia_dtk = ds({"app": "nvidia-driver-daemonset-416.94.202407030122-0"})
    assert not takeover.selector_differs(
        nvidia_dtk, ds({"app": "nvidia-driver-daemonset-416.94.202407030122-0"})
    )
    old_ours = ds(
        {"app": "nvidia-driver-daemonset", "ocp-gpu.io/driver-key": "k", "ocp-gpu.io/driver-strategy": "dtk"}
    )
    assert takeover.selector_differs(old_ours, nvidia_dtk)
    assert not takeover.selector_differs(ds({"a": "1", "b": "2"}), ds({"b": "2", "a": "1"}))


def pod(
    name: str, pod_labels: dict[str, str], owner_uid: str | None = None, deleting: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": pod_labels}
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"kind": "DaemonSet", "uid": owner_uid, "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"nodeName": f"node-{name}"}}


def test_the_replaced_daemonsets_pods_get_the_new_selectors_labels() -> None:
    old = {"app": "nvidia-driver-daemonset", "ocp-gpu.io/driver-key": "k"}
    new = {"matchLabels": {"app": "nvidia-driver-daemonset-k"}}
    pods = [
        pod("orphan", old),
        pod("still-owned", old, owner_uid="old-uid"),
        pod("other-controller", old, owner_uid="someone-else"),
        pod("going", old, deleting=True),
        pod("already", {**old, "app": "nvidia-driver-daemonset-k"}),
    ]
    relabels = takeover.pods_to_relabel(pods, "old-uid", new)
    assert [(r.name, r.node, dict(r.labels)) for r in relabels] == [
        ("orphan", "node-orphan", {"app": "nvidia-driver-daemonset-k"}),
        ("still-owned", "node-still-owned", {"app": "nvidia-driver-daemonset-k"}),
    ]


def test_a_new_driver_daemonset_takes_the_foreign_driver_pods_on_its_nodes() -> None:
    nvidia = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}
    ours = {
        "app": "nvidia-driver-daemonset",
        "ocp-gpu.io/driver-strategy": "vanilla",
        "ocp-gpu.io/driver-key": "ubuntu22.04",
    }
    rendered = {"metadata": {"name": "nvidia-driver-daemonset-ubuntu22.04"}, **ds(ours)}
    foreign = [
        {"metadata": {"name": "nvidia-driver-daemonset", "uid": "nv-uid"}},
        # NVIDIA's DTK DaemonSet under our own name: adopted in place, never handed over
        {"metadata": {"name": "nvidia-driver-daemonset-ubuntu22.04", "uid": "same-name"}},
    ]
    pods = [
        pod("nv-a", nvidia, owner_uid="nv-uid"),
        pod("orphan", nvidia),
        pod("taken", {**nvidia, **ours}),
        pod("elsewhere", nvidia, owner_uid="nv-uid"),
        pod("going", nvidia, owner_uid="nv-uid", deleting=True),
        pod("users", nvidia, owner_uid="a-users-daemonset"),
        pod("same-name", nvidia, owner_uid="same-name"),
    ]
    nodes = [f"node-{name}" for name in ("nv-a", "orphan", "taken", "going", "users", "same-name")]
    plan = takeover.plan_driver_handover(rendered, foreign, pods, nodes)
    wanted = {k: v for k, v in ours.items() if k != "app"}
    assert [(r.name, r.node, dict(r.labels)) for r in plan.relabel] == [
        ("nv-a", "node-nv-a", wanted),
        ("orphan", "node-orphan", wanted),
    ]
    assert plan.delete == (("nvidia-driver-daemonset", "nv-uid"),)
    assert plan.describe() == (
        "took 2 running driver pod(s) of DaemonSet nvidia-driver-daemonset (deleted leaving its pods)"
    )
    # NVIDIA's DaemonSet gone already (the first key's handover): the orphans on this key's nodes
    later = takeover.plan_driver_handover(rendered, [], [pod("orphan", nvidia)], ["node-orphan"])
    assert (len(later.relabel), later.delete) == (1, ())
    # nothing foreign on the nodes: nothing to do
    empty = takeover.plan_driver_handover(rendered, foreign, [pod("elsewhere", nvidia)], nodes)
    assert (empty.relabel, empty.delete) == ((), ())


def test_leftovers_owned_by_the_policy_and_not_rendered_go_the_rest_stay() -> None:
    found = [
        takeover.Foreign("DaemonSet", "ns", "nvidia-device-plugin-mps-control-daemon", ("policy",)),
        takeover.Foreign("ClusterRole", "", "nvidia-driver", ("policy",)),
        # the user's own, no owner or another owner: never touched
        takeover.Foreign("ConfigMap", "ns", "my-config", ()),
        takeover.Foreign("ConfigMap", "ns", "theirs", ("someone-else",)),
        # rendered by ocp-gpu under that name (an apply that failed): not a leftover
        takeover.Foreign("ServiceAccount", "ns", "nvidia-driver", ("policy",)),
        # NVIDIA's vanilla driver DaemonSet: its pods are the running drivers
        takeover.Foreign(
            "DaemonSet",
            "ns",
            "nvidia-driver-daemonset",
            ("policy",),
            {"app.kubernetes.io/component": "nvidia-driver"},
        ),
    ]
    plan = takeover.plan_leftovers(found, "policy", [("ServiceAccount", "ns", "nvidia-driver")])
    assert [item.describe() for item in plan.delete] == [
        "ClusterRole nvidia-driver",
        "DaemonSet ns/nvidia-device-plugin-mps-control-daemon",
    ]
    assert [(item.describe(), why) for item, why in plan.keep] == [
        ("DaemonSet ns/nvidia-driver-daemonset", "its pods are running drivers")
    ]
    status = takeover.migrated_from(["DaemonSet ns/x"], plan, ["ClusterRole nvidia-driver"])
    assert status == {
        "operator": "NVIDIA GPU Operator",
        "adopted": ["DaemonSet ns/x"],
        "deleted": ["ClusterRole nvidia-driver"],
        "left": ["DaemonSet ns/nvidia-driver-daemonset (its pods are running drivers)"],
    }
