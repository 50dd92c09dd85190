"""`ocp-gpu must-gather`: everything support needs about the GPU stack, in a directory and a tarball.

Collected (read-only; Secrets never)::

  cluster/clusterpolicies/<name>.yaml          each ClusterPolicy, and <name>.status.yaml
  cluster/nvidiadrivers/<name>.yaml            each NVIDIADriver, cluster/gpuclusters/<name>.yaml
                                               each GPUCluster (where their CRD is served)
  cluster/nodes/<name>.yaml                    each GPU node: labels, annotations (upgrade state),
                                               taints, cordon, readiness, OS (not the full Node)
  cluster/clusterversions/version.yaml         OpenShift only; cluster/proxies/cluster.yaml
  namespaces/openshift/imagestreams/driver-toolkit.yaml     OpenShift only
  namespaces/<ns>/daemonsets/<name>.yaml       each operand DaemonSet, and <name>.describe.txt
  namespaces/<ns>/pods/<pod>.yaml              each operand pod, <pod>.describe.txt, and
  namespaces/<ns>/pods/<pod>/<container>.log   its logs (and <container>.previous.log)
  namespaces/<ns>/events.yaml                  the operator namespace's Events
  namespaces/default/events.yaml               Events about GPU nodes, ClusterPolicies,
                                               NVIDIADrivers and GPUClusters
  operator/<pod>.log, operator/metrics.txt     the operator Deployment's log and /metrics
  README.txt                                   what was collected and what could not be

Through `oc` (openshift-client) when `oc` is on the PATH, else the kubernetes
client (`--client` forces one).  What cannot be read (an API the cluster does not
serve, a pod without logs) is listed in README.txt and the gather goes on.

Usage::

    ocp-gpu must-gather [--dest DIR] [--kubeconfig PATH] [--namespace NS]
                        [--client auto|oc|kubernetes] [--metrics-url URL]

  `--dest` defaults to ./must-gather-<UTC time>; the tarball is DIR.tar.gz beside it.
  `--namespace` defaults to the ClusterPolicies' `status.namespace` (else
  nvidia-gpu-operator and gpu-operator, whichever exists).  `--metrics-url` reads the
  operator's /metrics from there (an operator running outside the cluster) instead
  of through the API server's pod proxy.

Exit status: 0 gathered (README.txt lists anything missing); 1 the cluster could not
be read at all; 2 a bad command line.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tarfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from ocp_gpu.kube import clients, gathering
from ocp_gpu.model import labels
from ocp_gpu.planning import must_gather_plan

EXIT_GATHERED: Final = 0
EXIT_UNREADABLE: Final = 1

CLIENTS: Final = ("auto", "oc", "kubernetes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dest", type=Path, default=None, help="output directory (default ./must-gather-<time>)"
    )
    parser.add_argument(
        "--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG or ~/.kube/config"
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=None,
        help="the operator/operand namespace (repeatable; default: from the ClusterPolicies' status)",
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        default="auto",
        help="auto (oc if on PATH, else kubernetes), oc or kubernetes",
    )
    parser.add_argument("--metrics-url", default=None, help="read the operator's /metrics here instead")


class _Writer:
    """Writes files under the gather directory and keeps the account README.txt gives."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: list[str] = []
        self.failures: list[str] = []

    def text(self, relative: str, content: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        self.written.append(relative)

    def yaml(self, relative: str, obj: Any) -> None:
        self.text(relative, yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))

    def failed(self, what: str, error: BaseException) -> None:
        self.failures.append(f"{what}: {error}")


def _source(args: argparse.Namespace) -> gathering.GatherSource:
    oc_path = shutil.which("oc")
    if args.client == "oc" or (args.client == "auto" and oc_path):
        if not oc_path:
            raise SystemExit("ocp-gpu must-gather: --client oc, but no `oc` on the PATH")
        return gathering.OcSource(oc_path, args.kubeconfig)
    return gathering.KubeSource(clients.load_api_client(args.kubeconfig))


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _namespaces(
    source: gathering.GatherSource, policies: list[dict[str, Any]], given: list[str] | None
) -> list[str]:
    if given:
        return list(dict.fromkeys(given))
    from_status = [str((p.get("status") or {}).get("namespace") or "") for p in policies]
    chosen = [ns for ns in dict.fromkeys(from_status) if ns]
    if chosen:
        return chosen
    # No status yet: the two documented namespaces, whichever exist.
    return [
        ns
        for ns in (labels.OPENSHIFT_NAMESPACE, labels.HELM_NAMESPACE)
        if source.get(must_gather_plan.Resource("v1", "namespaces", "Namespace", False), ns) is not None
    ]


def gather(
    source: gathering.GatherSource,
    dest: Path,
    namespaces: list[str] | None = None,
    metrics_url: str | None = None,
) -> _Writer:
    """Collect everything into `dest` (created); returns the account of what was written."""
    out = _Writer(dest)
    policies = source.list(must_gather_plan.CLUSTER_POLICIES)
    for policy in policies:
        name = _name(policy)
        out.yaml(
            must_gather_plan.resource_path(must_gather_plan.CLUSTER_POLICIES, name),
            must_gather_plan.scrub(policy),
        )
        out.yaml(
            must_gather_plan.resource_path(must_gather_plan.CLUSTER_POLICIES, name, suffix=".status.yaml"),
            policy.get("status") or {},
        )

    # NVIDIADrivers and NVIDIA's GPUClusters, spec and status, where their CRD is served.
    others: list[dict[str, Any]] = []
    for resource in (must_gather_plan.NVIDIA_DRIVERS, must_gather_plan.GPU_CLUSTERS):
        try:
            found = source.list(resource)
        except gathering.NotServedError:
            continue  # its CRD is not installed: nothing to gather
        except gathering.GatherError as error:
            out.failed(f"{resource.kind}s", error)
            continue
        for item in found:
            out.yaml(must_gather_plan.resource_path(resource, _name(item)), must_gather_plan.scrub(item))
        others.extend(found)

    gpu_nodes = [n for n in source.list(must_gather_plan.NODES) if must_gather_plan.is_gpu_node(n)]
    for node in gpu_nodes:
        out.yaml(
            must_gather_plan.resource_path(must_gather_plan.NODES, _name(node)),
            must_gather_plan.node_record(node),
        )

    for resource, name, namespace in (
        (must_gather_plan.CLUSTER_VERSIONS, "version", None),
        (must_gather_plan.PROXIES, "cluster", None),
        (must_gather_plan.IMAGESTREAMS, labels.DTK_IMAGESTREAM_NAME, labels.DTK_IMAGESTREAM_NAMESPACE),
    ):
        try:
            obj = source.get(resource, name, namespace)
        except gathering.GatherError as error:
            out.failed(f"{resource.kind} {name}", error)
            continue
        if obj is None:
            out.failures.append(f"{resource.kind} {name}: not served or absent (not OpenShift?)")
        else:
            out.yaml(must_gather_plan.resource_path(resource, name, namespace), must_gather_plan.scrub(obj))

    try:
        default_events = source.list(must_gather_plan.EVENTS, "default")
        involved = [_name(n) for n in gpu_nodes] + [_name(p) for p in [*policies, *others]]
        out.yaml(
            must_gather_plan.relative_path("namespaces", "default", "events.yaml"),
            [must_gather_plan.scrub(e) for e in must_gather_plan.select_events(default_events, involved)],
        )
    except gathering.GatherError as error:
        out.failed("Events in default", error)

    for namespace in _namespaces(source, policies, namespaces):
        _gather_namespace(source, out, namespace, metrics_url)

    out.text("README.txt", must_gather_plan.summarize([*out.written, "README.txt"], out.failures))
    return out


def _gather_namespace(
    source: gathering.GatherSource, out: _Writer, namespace: str, metrics_url: str | None
) -> None:
    try:
        daemonsets = [
            d
            for d in source.list(must_gather_plan.DAEMONSETS, namespace)
            if must_gather_plan.is_operand_daemonset(d)
        ]
        pods = source.list(must_gather_plan.PODS, namespace)
    except gathering.GatherError as error:
        out.failed(f"namespace {namespace}", error)
        return
    for ds in daemonsets:
        _gather_described(source, out, must_gather_plan.DAEMONSETS, namespace, ds)
    for pod in must_gather_plan.select_operand_pods(pods, daemonsets):
        _gather_pod(source, out, namespace, pod)

    try:
        out.yaml(
            must_gather_plan.relative_path("namespaces", namespace, "events.yaml"),
            [
                must_gather_plan.scrub(e)
                for e in must_gather_plan.sort_events(source.list(must_gather_plan.EVENTS, namespace))
            ],
        )
    except gathering.GatherError as error:
        out.failed(f"Events in {namespace}", error)

    deployment = source.get(must_gather_plan.DEPLOYMENTS, labels.OPERATOR_DEPLOYMENT, namespace)
    operator_pods = must_gather_plan.select_operator_pods(pods, deployment)
    for pod in operator_pods:
        name = _name(pod)
        for container in must_gather_plan.container_names(pod):
            try:
                out.text(
                    must_gather_plan.relative_path("operator", f"{name}.{container}.log"),
                    source.logs(namespace, name, container, previous=False),
                )
            except gathering.GatherError as error:
                out.failed(f"operator log {namespace}/{name}", error)
    _gather_metrics(source, out, namespace, operator_pods, metrics_url)


def _gather_described(
    source: gathering.GatherSource,
    out: _Writer,
    resource: must_gather_plan.Resource,
    namespace: str,
    obj: Mapping[str, Any],
) -> str:
    """The object as YAML and `kubectl describe`'s text beside it; its name."""
    name = _name(obj)
    out.yaml(must_gather_plan.resource_path(resource, name, namespace), must_gather_plan.scrub(obj))
    try:
        out.text(
            must_gather_plan.resource_path(resource, name, namespace, ".describe.txt"),
            source.describe(resource, name, namespace),
        )
    except gathering.GatherError as error:
        out.failed(f"describe {resource.kind} {namespace}/{name}", error)
    return name


def _gather_pod(source: gathering.GatherSource, out: _Writer, namespace: str, pod: Mapping[str, Any]) -> None:
    name = _gather_described(source, out, must_gather_plan.PODS, namespace, pod)
    restarted = {
        str(cs.get("name"))
        for cs in [
            *((pod.get("status") or {}).get("initContainerStatuses") or ()),
            *((pod.get("status") or {}).get("containerStatuses") or ()),
        ]
        if cs.get("restartCount") or cs.get("lastState")
    }
    for container in must_gather_plan.container_names(pod):
        current, previous = must_gather_plan.pod_paths(namespace, name, container)
        try:
            out.text(current, source.logs(namespace, name, container, previous=False))
        except gathering.GatherError as error:
            out.failed(f"log {namespace}/{name}/{container}", error)
        # NB: a container that never restarted has no previous log; asking is a certain error.
        if container in restarted:
            try:
                out.text(previous, source.logs(namespace, name, container, previous=True))
            except gathering.GatherError as error:
                out.failed(f"previous log {namespace}/{name}/{container}", error)


def _gather_metrics(
    source: gathering.GatherSource,
    out: _Writer,
    namespace: str,
    operator_pods: list[Mapping[str, Any]],
    metrics_url: str | None,
) -> None:
    if metrics_url:
        try:
            with urllib.request.urlopen(metrics_url, timeout=gathering.REQUEST_TIMEOUT_S) as response:
                out.text(
                    must_gather_plan.relative_path("operator", "metrics.txt"),
                    response.read().decode(errors="replace"),
                )
        except OSError as error:
            out.failed(f"operator metrics at {metrics_url}", error)
        return
    for pod in operator_pods:
        name = _name(pod)
        path = (
            f"/api/v1/namespaces/{namespace}/pods/{name}:{must_gather_plan.metrics_port(pod)}/proxy/metrics"
        )
        try:
            out.text(must_gather_plan.relative_path("operator", f"{name}.metrics.txt"), source.raw(path))
        except gathering.GatherError as error:
            out.failed(f"operator metrics of {namespace}/{name}", error)


def tarball(directory: Path) -> Path:
    """DIR.tar.gz beside DIR, holding DIR's name as its top directory."""
    target = directory.with_name(directory.name + ".tar.gz")
    with tarfile.open(target, "w:gz") as tar:
        tar.add(directory, arcname=directory.name)
    return target


def main(args: argparse.Namespace) -> int:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    dest: Path = args.dest or Path(f"must-gather-{stamp}")
    try:
        source = _source(args)
        out = gather(source, dest, args.namespace, args.metrics_url)
    except gathering.GatherError as error:
        print(f"ocp-gpu must-gather: cannot read the cluster: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    archive = tarball(dest)
    print(f"gathered {len(out.written)} file(s) with {source.name} into {dest} and {archive}")
    for failure in out.failures:
        print(f"  not collected: {failure}", file=sys.stderr)
    return EXIT_GATHERED
