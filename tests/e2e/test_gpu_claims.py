"""We test these aspects of reading ResourceClaims (DRA) on the local control plane:

- the API server (Kubernetes 1.36) serves resource.k8s.io/v1 ResourceClaims, so the operator
  watches them (operator.py's discovery);
- a pod's claims as the API returns it: one by name, one made from a template once the
  claim controller has made it (its status names it), read into WorkloadPod.claims;
- what a claim holds as read by `read_claim_holds` (one GET each, what `ocp-gpu status` uses):
  unallocated, then allocated a gpu.nvidia.com device (an admin writes the allocation, as the
  scheduler would); a claim that cannot be read is left out (planning counts it as a GPU);
- the claim watch (kube/object_watches.claim_watch into reconcilers/object_views.ClaimView):
  lists every namespace's claims, follows an allocation, forgets a deleted claim by
  namespace/name.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, connecting, discovering, object_watches, requesting, upgrading
from ocp_gpu.model import resource_claims
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.reconcilers import object_views, runtime
from ocp_gpu_harness import polling

from .conftest import Run

pytestmark = pytest.mark.e2e

T = TypeVar("T")
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{}/resourceclaims"


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 30.0) -> T:
    return polling.wait_for(check, timeout, what=what, interval=0.1)


def gpu_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
        },
    }


def allocate(api: clients.ApiClient, namespace: str, name: str, node: str) -> None:
    """Write an allocation of the node's gpu-0, as the scheduler would (the status subresource)."""
    body = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": resource_claims.GPU_DRIVER,
                            "pool": node,
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            }
        }
    }
    requesting.request(
        api,
        "PATCH",
        f"{CLAIMS.format(quote(namespace))}/{quote(name)}/status",
        body=body,
        content_type="application/merge-patch+json",
    )


def test_claims_of_pods_and_what_they_hold(
    kube: client.ApiClient, api: clients.ApiClient, namespace: str, run: Run
) -> None:
    assert discovering.serves_resource(
        api, resource_claims.API_GROUP, resource_claims.API_VERSION, resource_claims.CLAIMS_PLURAL
    )
    (node,) = run.gpu_nodes(gpus=1)
    requesting.request(api, "POST", CLAIMS.format(quote(namespace)), body=gpu_claim("shared"))
    requesting.request(
        api,
        "POST",
        f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace)}/resourceclaimtemplates",
        body={
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": gpu_claim("x")["spec"]},
        },
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "infer"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "registry.example/app:1", "resources": {"claims": [{"name": "a"}]}}
            ],
            "resourceClaims": [
                {"name": "a", "resourceClaimName": "shared"},
                {"name": "b", "resourceClaimTemplateName": "one-gpu"},
            ],
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, pod)

    # The claim controller makes the template's claim and names it in the pod's status.
    def both_claims() -> tuple[str, ...] | None:
        (found,) = upgrading.list_pods_on_node(api, node)
        return found.claims if len(found.claims) == 2 else None

    shared, made = wait_for("the claim made from the template", both_claims)
    assert shared == "shared" and made != "one-gpu" and made.startswith("infer-b-")
    workload = upgrading.list_pods_on_node(api, node)
    pods = {NodeName(node): workload}
    assert upgrading.read_claim_holds(api, pods) == {
        f"{namespace}/shared": ClaimHold.UNALLOCATED,
        f"{namespace}/{made}": ClaimHold.UNALLOCATED,
    }
    allocate(api, namespace, "shared", node)
    assert upgrading.read_claim_holds(api, pods)[f"{namespace}/shared"] is ClaimHold.GPU
    # A claim that cannot be read is left out: planning counts it as a GPU (NVIDIA's rule).
    requesting.request(api, "DELETE", f"{CLAIMS.format(quote(namespace))}/shared")
    wait_for("the claim gone", lambda: f"{namespace}/shared" not in upgrading.read_claim_holds(api, pods))


def test_the_claim_watch(api: clients.ApiClient, namespace: str, run: Run) -> None:
    (node,) = run.gpu_nodes(gpus=1)
    rt = runtime.Runtime(api_client=api, namespace=namespace, env={})
    rt.view.resource_claim_api = True
    view = object_views.ClaimView(rt)
    requesting.request(api, "POST", CLAIMS.format(quote(namespace)), body=gpu_claim("early"))
    key = f"{namespace}/early"

    # The watch runs on an event loop of its own (as in the operator), polled from here.
    loop = asyncio.new_event_loop()
    watch = object_watches.claim_watch(lambda renew: connecting.connection_info(api, renew=renew), view)

    async def watching() -> None:
        # NB: cancelled at the end of the test: not an error of the thread.
        with contextlib.suppress(asyncio.CancelledError):
            await watch.run()

    task = loop.create_task(watching())
    runner = threading.Thread(target=loop.run_until_complete, args=(task,), daemon=True)
    runner.start()
    try:
        wait_for("listed", lambda: rt.view.resource_claims.get(key) is ClaimHold.UNALLOCATED)
        assert "resourceclaims.resource.k8s.io" in rt.view.delivered
        allocate(api, namespace, "early", node)
        wait_for("allocated", lambda: rt.view.resource_claims.get(key) is ClaimHold.GPU)
        requesting.request(api, "DELETE", f"{CLAIMS.format(quote(namespace))}/early")
        wait_for("deleted", lambda: key not in rt.view.resource_claims)
    finally:
        loop.call_soon_threadsafe(task.cancel)
        runner.join(10)
