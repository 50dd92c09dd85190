"""Every watch of the operator, one per kind, each feeding its view (no kopf handlers).

Each watch is kube/watching.py's stream (a paged LIST, then one WATCH that resumes, re-lists
on 410 Gone, retries through an API server restart), filtered by the server, feeding one view
of reconcilers/ that keeps small records in the Runtime's view and wakes the loops that read
them. No pass runs before every kind registered here has been listed once
(reconcilers/cluster_view.ClusterView.listed). docs/architecture.md ("Watches") says why the
operator watches through its own stream and not kopf's.

NB: no watch writes anything (kopf's change-detecting handlers would have stored a diff-base
annotation on every object): a quiet cluster sees no write at all.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.kube import connecting, daemonset_watch, node_watch, object_watches, owning, pod_watch, watching
from ocp_gpu.model import apis, labels
from ocp_gpu.reconcilers import daemonset_view, node_view, object_views, pod_view, runtime
from ocp_gpu.rendering import prepull_rendering
from ocp_gpu.rendering.operands import operand_catalog


def build_watches(rt: runtime.Runtime, login: connecting.Login) -> dict[str, watching.ObjectWatch[Any]]:
    """Every watch, by what it watches; each kind counts in the start-up barrier from now on."""
    namespace = rt.namespace
    watches: dict[str, watching.ObjectWatch[Any]] = {
        # The kinds with thousands of objects or events (issue 13).
        # Every operand's pods (its watch sources: rendering/operands/operand_catalog.POD_APPS).
        "pods": pod_watch.PodWatch(
            login,
            namespace,
            pod_view.PodView(rt),
            apps=(*operand_catalog.POD_APPS, *prepull_rendering.POD_APPS),
        ),
        "nodes": node_watch.NodeWatch(login, node_view.NodeView(rt)),
        "daemonsets": daemonset_watch.DaemonSetWatch(login, namespace, daemonset_view.DaemonSetView(rt)),
    }
    for kind in owning.watched_kinds(rt.view.api_groups):
        # NB: our DaemonSets are daemonset_watch's (both records from one event).
        if kind != daemonset_watch.KIND:
            view = object_views.OwnedView(rt, kind)
            watches[kind.plural] = object_watches.owned_watch(login, kind, namespace, view)
    revisions = object_views.RevisionView(rt)
    watches["controllerrevisions"] = object_watches.revision_watch(login, namespace, revisions)
    if apis.IMAGE_GROUP in rt.view.api_groups:
        # The driver-toolkit ImageStream (OpenShift only).
        stream = object_views.SingletonView(rt, apis.IMAGE_GROUP, "imagestreams", "dtk_imagestream")
        watches["imagestreams"] = object_watches.singleton_watch(
            login,
            apis.IMAGE_GROUP,
            "imagestreams",
            labels.DTK_IMAGESTREAM_NAME,
            labels.DTK_IMAGESTREAM_NAMESPACE,
            stream,
        )
    if apis.CONFIG_GROUP in rt.view.api_groups:
        # OpenShift's ClusterVersion and cluster Proxy.
        version = object_views.SingletonView(rt, apis.CONFIG_GROUP, "clusterversions", "cluster_version")
        watches["clusterversions"] = object_watches.singleton_watch(
            login, apis.CONFIG_GROUP, "clusterversions", "version", None, version
        )
        proxy = object_views.SingletonView(rt, apis.CONFIG_GROUP, "proxies", "cluster_proxy")
        watches["proxies"] = object_watches.singleton_watch(
            login, apis.CONFIG_GROUP, "proxies", "cluster", None, proxy
        )
    policies = object_views.PolicyView(rt, apis.POLICY_GROUP, apis.POLICY_PLURAL)
    watches["clusterpolicies"] = object_watches.policy_watch(
        login, apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, policies
    )
    if rt.view.nvidia_driver_api:
        # NB: only when their CRD is served (discovery at start-up; the bundle and chart ship it).
        drivers = object_views.NvidiaDriverView(rt, apis.NVIDIA_DRIVER_GROUP, apis.NVIDIA_DRIVER_PLURAL)
        watches["nvidiadrivers"] = object_watches.nvidia_driver_watch(
            login, apis.NVIDIA_DRIVER_GROUP, apis.NVIDIA_DRIVER_VERSION, apis.NVIDIA_DRIVER_PLURAL, drivers
        )
    if rt.view.gpu_cluster_api:
        # NB: only when NVIDIA's GPUCluster CRD is served (the bundle and chart ship it).
        watches["gpuclusters"] = object_watches.gpu_cluster_watch(login, object_views.GpuClusterView(rt))
    if rt.view.resource_claim_api:
        # NB: only when resource.k8s.io/v1 is served (discovery at start-up): pods holding GPUs
        # through ResourceClaims (DRA) are GPU pods to the driver upgrade.
        watches["resourceclaims"] = object_watches.claim_watch(login, object_views.ClaimView(rt))
    return watches
