"""We test these aspects of pods that hold GPUs through ResourceClaims (DRA), no API:

- what a claim holds, from its JSON: unallocated, a gpu.nvidia.com device, only admin-access
  gpu.nvidia.com devices (their own value), another driver's devices (NVIDIA's PodHasNVIDIAGPUClaim with
  includeAdminAccess=false, as its pod-deletion filter calls it);
- a pod's claim names as NVIDIA resolves them: resourceClaimName, the status entry of a claim
  made from a template, none while the claim is not created;
- which pods are GPU pods: by resource, by a claim holding a GPU, a claim that cannot be read
  (counts, as in NVIDIA), claims unknown because the API is not served (every claim counts);
- the driver upgrade on one node with both kinds of GPU pod: gpuPodDeletion deletes both and
  nothing else, waits for both, fails on an uncontrolled claim pod as on any GPU pod, and goes
  on once only non-GPU pods are left; drain and waitForCompletion pick claim pods by their
  selectors, like any pod (NVIDIA's library does the same);
- the claim watch: only when resource.k8s.io/v1 is served, every namespace, keyed by
  namespace/name (a deletion forgets the right one), one of four shared values per claim;
- a claim with admin-access GPU devices only is no GPU pod's for deletion, but counts where
  NVIDIA's includeAdminAccess=true does (the DRA kubelet plugin's teardown order).
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu import watches
from ocp_gpu.kube import object_watches, reading, upgrading
from ocp_gpu.model import resource_claims, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.upgrades import pod_selection
from ocp_gpu.planning.upgrades.upgrade_actions import DeletePods, EvictPods
from ocp_gpu.reconcilers import object_views, runtime
from tests.unit._upgrades import node, plan_one, pod, policy

S = UpgradeState


def claim_body(
    name: str = "c", namespace: str = "work", results: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A ResourceClaim; `results=None`: not allocated."""
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
        },
    }
    if results is not None:
        body["status"] = {"allocation": {"devices": {"results": results}}}
    return body


def result(driver: str = "gpu.nvidia.com", admin: bool | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": "n1", "device": "gpu-0"}
    if admin is not None:
        entry["adminAccess"] = admin
    return entry


@pytest.mark.parametrize(
    ("results", "hold"),
    [
        (None, ClaimHold.UNALLOCATED),
        ([result()], ClaimHold.GPU),
        ([result(admin=False)], ClaimHold.GPU),
        ([result(admin=True)], ClaimHold.GPU_ADMIN_ACCESS),
        ([result("net.example.com")], ClaimHold.OTHER),
        ([result("net.example.com"), result()], ClaimHold.GPU),
        ([result(admin=True), result()], ClaimHold.GPU),
        ([], ClaimHold.OTHER),
    ],
    ids=[
        "unallocated",
        "gpu",
        "gpu-no-admin",
        "admin-only",
        "other-driver",
        "mixed",
        "admin-and-gpu",
        "empty",
    ],
)
def test_what_a_claim_holds(results: list[dict[str, Any]] | None, hold: ClaimHold) -> None:
    assert reading.claim_hold(claim_body(results=results)) is hold


def test_allocated_devices_name_pool_and_device() -> None:
    devices = reading.allocated_devices(claim_body(results=[result(admin=True)]))
    assert devices == (resource_claims.AllocatedDevice("gpu.nvidia.com", "n1", "gpu-0", admin_access=True),)


def pod_with_claims(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "work", "uid": "u"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}], "resourceClaims": claims},
        "status": {"phase": "Running"},
    }
    if statuses is not None:
        body["status"]["resourceClaimStatuses"] = statuses
    return body


@pytest.mark.parametrize(
    ("claims", "statuses", "names"),
    [
        ([{"name": "gpu", "resourceClaimName": "shared"}], None, ("shared",)),
        (
            [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}],
            ("p-gpu-x7k2q",),
        ),
        ([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], None, ()),
        ([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}], ()),
        (
            [{"name": "a", "resourceClaimName": "shared"}, {"name": "b", "resourceClaimTemplateName": "t"}],
            [{"name": "b", "resourceClaimName": "p-b-1"}],
            ("shared", "p-b-1"),
        ),
    ],
    ids=["by-name", "from-template", "template-not-made-yet", "status-without-name", "both"],
)
def test_claim_names_as_nvidia_resolves_them(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None, names: tuple[str, ...]
) -> None:
    record = upgrading.workload_pod(pod_with_claims(claims, statuses))
    assert record.claims == names
    # a claim alone asks for no extended resource
    assert record.requests_gpu is False


KEY = resource_claims.claim_key("work", "c")


@pytest.mark.parametrize(
    ("gpu", "claims", "known", "uses"),
    [
        (True, (), {}, True),
        (False, (), {}, False),
        (False, ("c",), {KEY: ClaimHold.GPU}, True),
        (False, ("c",), {KEY: ClaimHold.OTHER}, False),
        (False, ("c",), {KEY: ClaimHold.UNALLOCATED}, False),
        # not in the view (deleted, or not seen yet): a GPU, as NVIDIA counts a claim it cannot read
        (False, ("c",), {}, True),
        # the API is not served: nothing is known of any claim
        (False, ("c",), None, True),
        (False, (), None, False),
        # the same name in another namespace is another claim
        (False, ("c",), {resource_claims.claim_key("other", "c"): ClaimHold.OTHER}, True),
        (
            False,
            ("x", "c"),
            {KEY: ClaimHold.GPU, resource_claims.claim_key("work", "x"): ClaimHold.OTHER},
            True,
        ),
    ],
    ids=[
        "resource",
        "neither",
        "gpu-claim",
        "other-claim",
        "unallocated",
        "unreadable",
        "api-not-served",
        "no-claims-no-api",
        "namespaced",
        "second-claim",
    ],
)
def test_which_pods_use_a_gpu(
    gpu: bool, claims: tuple[str, ...], known: dict[str, ClaimHold] | None, uses: bool
) -> None:
    assert pod_selection.uses_gpu(pod("p", gpu=gpu, claims=claims), known) is uses
    assert bool(pod_selection.gpu_pods([pod("p", gpu=gpu, claims=claims)], known)) is uses


HELD = {
    resource_claims.claim_key("work", "gpu-claim"): ClaimHold.GPU,
    resource_claims.claim_key("work", "nic-claim"): ClaimHold.OTHER,
    resource_claims.claim_key("work", "pending-claim"): ClaimHold.UNALLOCATED,
}


def test_both_kinds_of_gpu_pod_on_one_node_are_deleted() -> None:
    by_resource = pod("train", gpu=True)
    by_claim = pod("infer", gpu=False, claims=("gpu-claim",))
    others = [
        pod("nic", gpu=False, claims=("nic-claim",)),
        pod("waiting", gpu=False, claims=("pending-claim",)),
        pod("web", gpu=False),
    ]
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), pods=[by_resource, by_claim, *others], claims=HELD)
    assert (result.transition, result.actions) == (None, (DeletePods((by_resource.ref, by_claim.ref)),))
    assert result.waiting.startswith("deleting 2 GPU pod(s): work/train, work/infer")


def test_a_claim_pod_being_deleted_is_waited_for() -> None:
    going = pod("infer", gpu=False, claims=("gpu-claim",), terminating=True)
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), pods=[going, pod("web", gpu=False)], claims=HELD)
    assert (result.transition, result.actions) == (None, ())


def test_only_non_gpu_claim_pods_left_lets_the_upgrade_go_on() -> None:
    left = [pod("nic", gpu=False, claims=("nic-claim",)), pod("web", gpu=False)]
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), pods=left, claims=HELD)
    assert result.transition is S.POD_RESTART_REQUIRED


def test_without_the_claim_api_a_claim_pod_is_a_gpu_pod() -> None:
    unknown = pod("nic", gpu=False, claims=("nic-claim",))
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), pods=[unknown], claims=None)
    assert result.actions == (DeletePods((unknown.ref,)),)


def test_an_uncontrolled_claim_pod_fails_deletion_like_any_gpu_pod() -> None:
    bare = pod("infer", gpu=False, claims=("gpu-claim",), controller=None)
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), policy(force=False), pods=[bare], claims=HELD)
    assert (result.transition, result.actions) == (S.UPGRADE_FAILED, ())
    forced = plan_one(node(state=S.POD_DELETION_REQUIRED), policy(force=True), pods=[bare], claims=HELD)
    assert forced.actions == (DeletePods((bare.ref,)),)


def test_drain_and_wait_pick_claim_pods_by_selector() -> None:
    job = {"app": "training"}
    claim_job = pod("infer", gpu=False, claims=("gpu-claim",), pod_labels=job)
    waiting = plan_one(
        node(state=S.WAIT_FOR_JOBS_REQUIRED),
        policy(wait_selector="app=training"),
        pods=[claim_job],
        claims=HELD,
    )
    assert waiting.transition is None and "work/infer" in waiting.waiting
    drained = plan_one(node(state=S.DRAIN_REQUIRED), policy(drain=True), pods=[claim_job], claims=HELD)
    assert drained.actions == (EvictPods((claim_job.ref,)),)


# --- the claim watch ------------------------------------------------------------------------


def _runtime(claims_api: bool) -> runtime.Runtime:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]
    rt.view.resource_claim_api = claims_api
    return rt


def _login(renew: bool) -> object:
    raise AssertionError("no watch runs in these tests")


@pytest.mark.parametrize("claims_api", [False, True])
def test_claims_are_watched_only_when_served(claims_api: bool) -> None:
    rt = _runtime(claims_api)
    built = watches.build_watches(rt, _login)  # type: ignore[arg-type]
    assert ("resourceclaims" in built) is claims_api
    assert ("resourceclaims.resource.k8s.io" in rt.view.watched) is claims_api
    if claims_api:
        # every namespace: GPU workloads live anywhere
        assert built["resourceclaims"]._path == "/apis/resource.k8s.io/v1/resourceclaims"


def test_the_claim_view_keys_by_namespace() -> None:
    rt = _runtime(True)
    view = object_views.ClaimView(rt)
    gpu = object_watches.claim_facts(claim_body("c", "a", [result()]))
    other = object_watches.claim_facts(claim_body("c", "b", [result("net.example.com")]))
    view.listed([gpu, other])
    assert rt.view.resource_claims == {"a/c": ClaimHold.GPU, "b/c": ClaimHold.OTHER}
    assert "resourceclaims.resource.k8s.io" in rt.view.delivered
    # the watch tells `gone` the key its ident makes from the deleted object's body
    view.gone(object_watches.claim_key(claim_body("c", "a")))
    assert rt.view.resource_claims == {"b/c": ClaimHold.OTHER}
    # a re-list without it forgets it
    view.listed([])
    assert rt.view.resource_claims == {}


def test_admin_access_counts_only_for_the_plugins_teardown() -> None:
    pod = upgrade_observations.WorkloadPod(
        ref=upgrade_observations.PodRef(namespace="work", name="monitor"),
        node=NodeName("n1"),
        claims=("view",),
    )
    held = {resource_claims.claim_key("work", "view"): ClaimHold.GPU_ADMIN_ACCESS}
    assert not pod_selection.holds_gpu_claim(pod, held)
    assert pod_selection.holds_gpu_claim(pod, held, admin_access=True)
    other = {resource_claims.claim_key("work", "view"): ClaimHold.OTHER}
    assert not pod_selection.holds_gpu_claim(pod, other, admin_access=True)
