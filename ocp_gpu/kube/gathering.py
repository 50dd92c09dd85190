"""Reading what `ocp-gpu must-gather` collects, through `oc` or our own API client.

Two sources with one interface (`GatherSource`):

- `OcSource` drives the `oc` binary through `openshift-client` (the package the
  design names for this): on OpenShift, admins and support already trust what `oc`
  shows, and `oc describe` is the format support reads.
- `KubeSource` uses our API client (kube/sending.py) where no `oc` is on the PATH (vanilla
  Kubernetes, or a laptop without the OpenShift CLI).  It has no `describe`, so it
  writes its own: the fields `kubectl describe` leads with, plus the object's Events.

Both are read-only (GET only) and both refuse Secrets (`planning.must_gather_plan.check_gatherable`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import openshift_client

from ocp_gpu.kube import clients, requesting
from ocp_gpu.planning import must_gather_plan
from ocp_gpu.planning.must_gather_plan import Resource

# Seconds one read may take: a kwok or unreachable kubelet must not stall the whole gather.
REQUEST_TIMEOUT_S = 15


class GatherError(Exception):
    """One item could not be read; the message says which and why."""


class NotServedError(GatherError):
    """The cluster does not serve this API (e.g. ImageStreams on vanilla Kubernetes)."""


class GatherSource(Protocol):
    """What must-gather needs from a cluster; every method is a read."""

    name: str

    def list(self, resource: Resource, namespace: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None: ...

    def logs(self, namespace: str, pod: str, container: str, previous: bool) -> str: ...

    def describe(self, resource: Resource, name: str, namespace: str | None = None) -> str: ...

    def raw(self, path: str) -> str: ...


def _api_path(resource: Resource, namespace: str | None, name: str = "") -> str:
    prefix = "/api/v1" if resource.group_version == "v1" else f"/apis/{resource.group_version}"
    scope = f"/namespaces/{namespace}" if resource.namespaced and namespace else ""
    return f"{prefix}{scope}/{resource.plural}" + (f"/{name}" if name else "")


class KubeSource:
    """Reads with our API client (no `oc` needed)."""

    name = "kubernetes-client"

    def __init__(self, api_client: clients.ApiClient) -> None:
        self._api = api_client

    def _get_json(self, path: str, query: tuple[tuple[str, str], ...] = ()) -> Any:
        try:
            return requesting.request(self._api, "GET", path, query=query)
        except requesting.ApiException as error:
            if error.status == 404:
                raise NotServedError(f"{path}: not found") from None
            raise GatherError(f"{path}: {requesting.describe_error(error)}") from None

    def list(self, resource: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        must_gather_plan.check_gatherable(resource)
        path = _api_path(resource, namespace)
        # Paged, as the operator lists: a big cluster's nodes do not arrive in one response.
        try:
            listed = requesting.list_items(self._api, path)
        except requesting.ApiException as error:
            if error.status == 404:
                raise NotServedError(f"{path}: not found") from None
            raise GatherError(f"{path}: {requesting.describe_error(error)}") from None
        # NB: list items carry no apiVersion/kind; put them back so each file stands alone.
        return [{"apiVersion": resource.group_version, "kind": resource.kind, **item} for item in listed]

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        must_gather_plan.check_gatherable(resource)
        try:
            obj: dict[str, Any] = self._get_json(_api_path(resource, namespace, name))
        except NotServedError:
            return None
        return obj

    def logs(self, namespace: str, pod: str, container: str, previous: bool) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/log"
        query = urlencode({"container": container, **({"previous": "true"} if previous else {})})
        try:
            return requesting.request_text(self._api, f"{path}?{query}", timeout=REQUEST_TIMEOUT_S)
        except requesting.ApiException as error:
            raise GatherError(
                f"logs of {namespace}/{pod} container {container}{' (previous)' if previous else ''}: "
                f"{requesting.describe_error(error)}"
            ) from None
        except Exception as error:  # a kubelet that does not answer: timeouts, resets
            raise GatherError(f"logs of {namespace}/{pod} container {container}: {error}") from None

    def describe(self, resource: Resource, name: str, namespace: str | None = None) -> str:
        obj = self.get(resource, name, namespace)
        if obj is None:
            raise GatherError(f"{resource.kind} {name} not found")
        uid = (obj.get("metadata") or {}).get("uid", "")
        events_ns = namespace if resource.namespaced else "default"
        try:
            events = self.list(must_gather_plan.EVENTS, events_ns)
        except GatherError:
            events = []
        mine = must_gather_plan.sort_events(
            e for e in events if (e.get("involvedObject") or {}).get("uid") == uid
        )
        return describe_text(obj, mine)

    def raw(self, path: str) -> str:
        try:
            return requesting.request_text(self._api, path, timeout=REQUEST_TIMEOUT_S)
        except requesting.ApiException as error:
            raise GatherError(f"GET {path}: HTTP {error.status}: {(error.body or '')[:300]!r}") from None
        except Exception as error:
            raise GatherError(f"GET {path}: {error}") from None


class OcSource:
    """Reads through `oc`, driven by openshift-client."""

    name = "openshift-client"

    def __init__(self, oc_path: str, kubeconfig: Path | None = None) -> None:
        self._oc_path = oc_path
        self._kubeconfig = str(kubeconfig) if kubeconfig else None

    @contextlib.contextmanager
    def _context(self, namespace: str | None = None) -> Iterator[None]:
        with (
            openshift_client.client_path(self._oc_path),
            openshift_client.api_server(kubeconfig_path=self._kubeconfig),
            openshift_client.project(namespace),
            openshift_client.timeout(REQUEST_TIMEOUT_S * 2),
        ):
            yield

    def _invoke(self, verb: str, args: list[str], namespace: str | None = None) -> str:
        with self._context(namespace):
            result = openshift_client.invoke(
                verb, cmd_args=args, no_namespace=namespace is None, auto_raise=False
            )
        if result.status() != 0:
            err = result.err().strip()
            if "doesn't have a resource type" in err or "NotFound" in err or "not found" in err:
                raise NotServedError(f"oc {verb} {' '.join(args)}: {err}")
            raise GatherError(f"oc {verb} {' '.join(args)}: {err or 'exit ' + str(result.status())}")
        return str(result.out())

    def list(self, resource: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        must_gather_plan.check_gatherable(resource)
        args = [resource.qualified, "-o=json"]
        if resource.namespaced and namespace is None:
            args.append("--all-namespaces")
        body = json.loads(self._invoke("get", args, namespace if resource.namespaced else None) or "{}")
        return list(body.get("items") or ())

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        must_gather_plan.check_gatherable(resource)
        try:
            text = self._invoke(
                "get", [f"{resource.qualified}/{name}", "-o=json"], namespace if resource.namespaced else None
            )
        except NotServedError:
            return None
        obj: dict[str, Any] = json.loads(text)
        return obj

    def logs(self, namespace: str, pod: str, container: str, previous: bool) -> str:
        args = [f"pod/{pod}", "-c", container, *(["--previous"] if previous else [])]
        try:
            return self._invoke("logs", args, namespace)
        except NotServedError as error:
            raise GatherError(str(error)) from None

    def describe(self, resource: Resource, name: str, namespace: str | None = None) -> str:
        must_gather_plan.check_gatherable(resource)
        return self._invoke(
            "describe", [f"{resource.qualified}/{name}"], namespace if resource.namespaced else None
        )

    def raw(self, path: str) -> str:
        return self._invoke("get", ["--raw", path])


def describe_text(obj: Mapping[str, Any], events: list[Mapping[str, Any]]) -> str:
    """A `kubectl describe`-like text of an object: the fields support reads first, then Events."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    lines = [
        f"Name:         {metadata.get('name', '')}",
        f"Namespace:    {metadata.get('namespace', '')}",
        f"Kind:         {obj.get('kind', '')}",
        f"Created:      {metadata.get('creationTimestamp', '')}",
        "Labels:       " + ", ".join(f"{k}={v}" for k, v in sorted((metadata.get("labels") or {}).items())),
        "Annotations:  "
        + ", ".join(f"{k}={v}" for k, v in sorted((metadata.get("annotations") or {}).items())),
        "Owners:       "
        + ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in metadata.get("ownerReferences") or ()),
    ]
    if obj.get("kind") == "Pod":
        lines += [
            f"Node:         {spec.get('nodeName', '')}",
            f"Phase:        {status.get('phase', '')}",
            f"Reason:       {status.get('reason', '')} {status.get('message', '')}".rstrip(),
            "Conditions:",
            *(
                f"  {c.get('type')}={c.get('status')} {c.get('reason', '')}".rstrip()
                for c in status.get("conditions") or ()
            ),
            "Containers:",
        ]
        for cs in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
            state: tuple[str, dict[str, Any]] = next(iter((cs.get("state") or {}).items()), ("unknown", {}))
            last: tuple[str, dict[str, Any]] = next(iter((cs.get("lastState") or {}).items()), ("", {}))
            line = (
                f"  {cs.get('name')}: image {cs.get('image')}, ready {cs.get('ready')}, "
                f"restarts {cs.get('restartCount', 0)}, state {state[0]} {state[1].get('reason', '')}"
            ).rstrip()
            if last[0]:
                line += f", last {last[0]} {last[1].get('reason', '')}".rstrip()
            lines.append(line)
    elif obj.get("kind") == "DaemonSet":
        template = (spec.get("template") or {}).get("spec") or {}
        lines += [
            f"Selector:       {(spec.get('selector') or {}).get('matchLabels', {})}",
            f"Node-Selector:  {template.get('nodeSelector', {})}",
            f"Update:         {(spec.get('updateStrategy') or {}).get('type', '')}",
            "Images:         " + ", ".join(str(c.get("image")) for c in template.get("containers") or ()),
            f"Desired:        {status.get('desiredNumberScheduled', 0)}",
            f"Current:        {status.get('currentNumberScheduled', 0)}",
            f"Ready:          {status.get('numberReady', 0)}",
            f"Up-to-date:     {status.get('updatedNumberScheduled', 0)}",
            f"Misscheduled:   {status.get('numberMisscheduled', 0)}",
        ]
    lines.append("Events:")
    if not events:
        lines.append("  <none>")
    for event in events:
        lines.append(
            f"  {event.get('lastTimestamp') or event.get('eventTime') or ''}  {event.get('type', '')}  "
            f"{event.get('reason', '')}  {event.get('message', '')}"
        )
    return "\n".join(lines) + "\n"
