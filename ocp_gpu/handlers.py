"""kopf registrations only: every watch feeds the in-memory view and wakes the loop.

NB: no change-detecting handlers (on.create/on.update/on.resume) on Nodes: kopf
would store its diff-base annotation on every node, i.e. a write per node.
We use index handlers (kopf runs them for every listed object *before* any
other handler, so once any event handler runs, the view is complete) and
event handlers, which write nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kubernetes import client

from ocp_gpu.kube import reading
from ocp_gpu.model import nodes
from ocp_gpu.reconcilers import runtime

POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL = "nvidia.com", "v1", "clusterpolicies"


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Leadership comes from our Lease (kube/electing.py), not kopf's peering CRDs.
    settings.peering.standalone = True
    # kopf's own Events about handler outcomes would be writes in steady state.
    settings.posting.enabled = False
    # Only the kinds registered here are watched; no namespace or CRD scanning.
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    return settings


def build_registry(rt: runtime.Runtime) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(rt.api_client)

    @kopf.index("", "v1", "nodes", registry=registry, id="node-facts")
    async def index_node(body: kopf.Body, **_: Any) -> None:
        facts = reading.node_facts(body)
        rt.node_facts[facts.name] = facts

    @kopf.on.event("", "v1", "nodes", registry=registry, id="node-events")
    async def node_event(name: str, type: str | None, **_: Any) -> None:
        if type == "DELETED":
            rt.node_facts.pop(nodes.NodeName(name), None)
        rt.listed.set()
        rt.mark_node(nodes.NodeName(name))

    @kopf.index(POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL, registry=registry, id="policies")
    async def index_policy(body: kopf.Body, meta: kopf.Meta, **_: Any) -> None:
        rt.policies[str(meta["name"])] = runtime.PolicyObject(
            name=str(meta["name"]),
            uid=str(meta["uid"]),
            created=str(meta.get("creationTimestamp", "")),
            generation=int(meta.get("generation", 0)),
            spec=dict(body.get("spec") or {}),
            status=dict(body.get("status") or {}),
        )

    @kopf.on.event(POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL, registry=registry, id="policy-events")
    async def policy_event(name: str, type: str | None, **_: Any) -> None:
        if type == "DELETED":
            rt.policies.pop(name, None)
        rt.listed.set()
        rt.mark_policies()

    return registry


def connection_info(api_client: client.ApiClient) -> kopf.ConnectionInfo:
    """kopf's credentials from the same configuration our kubernetes client uses."""
    configuration = api_client.configuration
    header = configuration.get_api_key_with_prefix("BearerToken") or configuration.get_api_key_with_prefix(
        "authorization"
    )
    scheme, token = [*header.split(" ", 1), ""][:2] if header else (None, None)
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme if token else None,
        token=token or scheme or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


def quiet_kopf() -> None:
    """kopf logs every watch (re)connection at INFO; keep the operator's log readable."""
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("kopf._core.reactor.running").setLevel(logging.WARNING)
