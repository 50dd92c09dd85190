"""Waiting until CRDs can be used: Established, then listed by discovery.

Every place that installs a CRD on the local control plane (the demo, the OpenShift and
monitoring emulations, the chaos runs, the tests' fixtures) waits with `wait_until_served`.

NB: not `kubectl wait --for=condition=Established` right after the apply: a new CRD is
stored with ``status.conditions: null`` until the apiextensions controller writes its
conditions, and kubectl then fails at once (``.status.conditions accessor error: <nil> is of
the type <nil>, expected []interface{}``, one attempt in four here) instead of waiting.
We poll the condition ourselves.  Established is not the end either: discovery lists the
resource a moment later, and a client that discovers (kopf, kubectl, the dynamic client)
would miss it in between.  tests/unit/test_no_bare_waits.py keeps such waits out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import kubernetes.client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu_harness import polling

DEFAULT_TIMEOUT: Final = 60.0
_POLL_SECONDS: Final = 0.1


def is_established(conditions: Iterable[Any] | None) -> bool:
    """Whether a CRD's ``status.conditions`` (None right after creation) say Established=True."""
    return any(c.type == "Established" and c.status == "True" for c in conditions or ())


def served_resources(crd: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(group, version) -> plural for each version a CRD manifest serves."""
    spec = crd["spec"]
    return {
        (spec["group"], version["name"]): spec["names"]["plural"]
        for version in spec["versions"]
        if version.get("served", True)
    }


def _listed(api_client: ApiClient, group: str, version: str) -> set[str]:
    """Resources discovery lists for group/version (empty while the group is not served)."""
    try:
        found = kubernetes.client.CustomObjectsApi(api_client).get_api_resources(group, version)
    except ApiException as error:
        if error.status == 404:
            return set()
        raise
    return {resource.name for resource in (found.resources or [])}


def wait_until_served(api_client: ApiClient, names: Iterable[str], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Wait until each CRD named (``<plural>.<group>``) is Established and discovery lists
    every version it serves; `polling.WaitTimeout` (a TimeoutError) names them otherwise."""
    extensions = kubernetes.client.ApiextensionsV1Api(api_client)
    names = list(names)
    waiting = list(names)

    def all_served() -> bool:
        for name in list(waiting):
            crd = extensions.read_custom_resource_definition(name)
            if not is_established(crd.status.conditions if crd.status else None):
                continue
            served = served_resources(api_client.sanitize_for_serialization(crd))
            if all(plural in _listed(api_client, g, v) for (g, v), plural in served.items()):
                waiting.remove(name)
        return not waiting

    polling.wait_for(
        all_served,
        timeout,
        what=f"CRDs Established and discoverable: {', '.join(names)}",
        interval=_POLL_SECONDS,
    )
