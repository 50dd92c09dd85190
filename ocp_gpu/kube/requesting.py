"""JSON requests to the API server over the operator's own transport (kube/sending.py).

NB: no typed models: the kubernetes client's cost milliseconds per object to
deserialise, and server-side apply takes the manifest as it is; every kube/
function speaks JSON through `request` (issue 13: the operator process does not
load the kubernetes client at all).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ocp_gpu import metrics
from ocp_gpu.kube import sending

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# A JSON merge patch (RFC 7386): only the keys given change; null removes one.
MERGE_PATCH = "application/merge-patch+json"
# Items per LIST page: at thousands of nodes one unpaged list is tens of megabytes at once.
LIST_PAGE = 500

# apiVersion, kind -> (path prefix, plural, namespaced) for every kind the operator writes.
RESOURCES: Mapping[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps", True),
    ("v1", "Service"): ("/api/v1", "services", True),
    ("v1", "Pod"): ("/api/v1", "pods", True),
    ("v1", "Node"): ("/api/v1", "nodes", False),
    ("apps/v1", "DaemonSet"): ("/apis/apps/v1", "daemonsets", True),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "rolebindings",
        True,
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "clusterroles",
        False,
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        False,
    ),
    ("node.k8s.io/v1", "RuntimeClass"): ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    # the chart's CRD hooks only (commands/crds.py)
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        "/apis/monitoring.coreos.com/v1",
        "servicemonitors",
        True,
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): (
        "/apis/monitoring.coreos.com/v1",
        "prometheusrules",
        True,
    ),
    # The DRA driver's (templates/state-dra-driver).
    ("resource.k8s.io/v1", "DeviceClass"): ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
}


class ApiException(Exception):
    """The API server answered an error status; callers branch on `status` (404, 409, 410, 422, 429).

    The constructor and attributes are the kubernetes client's (status, reason, body, headers),
    so handling written for it reads the same.
    """

    def __init__(
        self,
        status: int | None = None,
        reason: str | None = None,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers
        super().__init__(f"({status})\nReason: {reason}\nBody: {(body or '')[:500]}")

    def __str__(self) -> str:
        return f"({self.status})\nReason: {self.reason}\nBody: {(self.body or '')[:500]}"


def object_path(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    """The REST path of one object of a kind in RESOURCES."""
    try:
        prefix, plural, namespaced = RESOURCES[(api_version, kind)]
    except KeyError:
        raise ValueError(f"ocp-gpu does not manage {kind} ({api_version})") from None
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} {name} needs a namespace")
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


# A UTF-16 surrogate pair as json.dumps escapes a character beyond U+FFFF ("\\ud83d\\udd25"),
# preceded by an even number of backslashes (so not itself an escaped backslash).
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _astral(match: re.Match[str]) -> str:
    high, low = int(match.group(2), 16), int(match.group(3), 16)
    return f"{match.group(1)}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"


def yaml_body(body: Any) -> bytes:
    """``body`` as a YAML request body (server-side apply's content type).

    NB: the client sends JSON, which YAML reads, but it escapes a character beyond
    U+FFFF (an emoji in a label value or an env value) as a UTF-16 surrogate pair,
    which the apiserver's YAML parser refuses ("found invalid Unicode character
    escape code"): the apply failed with a parse error instead of applying a valid
    value, or being refused naming the field.  YAML escapes such a character as
    \\UXXXXXXXX; everything else stays ASCII-escaped JSON.
    """
    return _SURROGATE_PAIR.sub(_astral, json.dumps(body)).encode("ascii")


def request(
    api_client: sending.ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
    resource: str = "",
    verb: str = "",
    timeout: float | None = None,
    decoded: bool = True,
) -> Any:
    """One request; returns the decoded JSON body (None when empty). Raises ApiException.

    A write is counted in ocp_gpu_api_writes_total as `verb` (default: the method) on `resource`
    (default: the path's collection). `decoded=False`: the answer is not read (None), for writes
    whose object comes back through a watch anyway (a node label patch: the whole Node).
    """
    payload: bytes | None
    if body is None or isinstance(body, bytes):
        payload = body
    elif isinstance(body, str):
        payload = body.encode()
    elif "yaml" in content_type:
        payload = yaml_body(body)
    else:
        payload = json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if payload is not None:
        headers["Content-Type"] = content_type
    response = api_client.send(method, path, query=query, body=payload, headers=headers, timeout=timeout)
    if not 200 <= response.status < 300:
        raise api_exception(response)
    if method in WRITE_METHODS:
        metrics.api_writes.labels(verb or method.lower(), resource or path.rsplit("/", 2)[-2]).inc()
    return json.loads(response.data) if response.data and decoded else None


def request_text(api_client: sending.ApiClient, path: str, *, timeout: float | None = None) -> str:
    """A GET whose answer is text (a container's log); raises ApiException on an error status."""
    response = api_client.send("GET", path, headers={"Accept": "*/*"}, timeout=timeout)
    if not 200 <= response.status < 300:
        raise api_exception(response)
    return response.data.decode(errors="replace")


def api_exception(response: sending.Response) -> ApiException:
    return ApiException(
        response.status, response.reason, response.data.decode(errors="replace"), dict(response.headers)
    )


def list_items(
    api_client: sending.ApiClient, path: str, query: Sequence[tuple[str, str]] = ()
) -> list[dict[str, Any]]:
    """Every item of a LIST, page by page (LIST_PAGE per page keeps the apiserver's memory flat).

    `query` holds the selectors (`labelSelector`, `fieldSelector`); empty values are left out.
    NB: the one paginated LIST: the operator, `ocp-gpu render --live`, `status` and must-gather.
    """
    items: list[dict[str, Any]] = []
    token = ""
    base = [(key, value) for key, value in query if value]
    while True:
        page = request(
            api_client,
            "GET",
            path,
            query=[*base, ("limit", str(LIST_PAGE)), *([("continue", token)] if token else [])],
        )
        items.extend(page.get("items") or ())
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


def describe_error(error: BaseException) -> str:
    """A stable, readable one-line account of a failed call, for status conditions and logs.

    NB: str(ApiException) includes response headers (Audit-Id, Date), different on every
    try; a status message built from it would change on every pass, and the status write
    would wake the next pass: a hot loop.  The apiserver's own `message` is stable.
    """
    if isinstance(error, ApiException):
        message = ""
        with contextlib.suppress(ValueError, AttributeError):
            message = str(json.loads(error.body or "{}").get("message", ""))
        prefix = f"HTTP {error.status} {error.reason}"
        return f"{prefix}: {message}" if message else prefix
    return str(error) or type(error).__name__
