"""We test these aspects of the operator's own API client (kube/sending.py, kube/authenticating.py)
on the local control plane:

- a kubeconfig whose user is an `exec` credential plugin printing a client certificate
  (ExecCredential `clientCertificateData`/`clientKeyData`) authenticates the operator's requests,
  and the election child (which runs the plugin itself: it was handed a static token before)
  takes and releases the Lease with it;
- an exec plugin whose first token the API server refuses (401) is run again and the request
  retried once with the new token; the request succeeds and the plugin ran exactly twice;
- errors keep their status for the callers' branches (404, 409 on create), kept-alive
  connections are reused (at most one opened per thread across 40 patches in 8 threads) and
  every write carries the user agent `ocp-gpu/<version>` (the audit log).
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.kube import clients, configuring, electing, requesting, sending
from ocp_gpu_harness import tokens
from ocp_gpu_harness.cluster import LocalControlPlane

from .conftest import STEP_S, wait_for

pytestmark = pytest.mark.e2e

KUBE_SYSTEM_ACCOUNTS = "system:serviceaccount:kube-system:"

PLUGIN = """
import json, os, sys
runs = sys.argv[1]
count = int(open(runs).read()) + 1 if os.path.exists(runs) else 1
open(runs, "w").write(str(count))
status = json.loads(open(sys.argv[2]).read())
if count == 1 and len(sys.argv) > 3:
    status = {"token": "not-a-token"}  # the first answer is refused (401)
version = "client.authentication.k8s.io/v1"
print(json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": status}))
"""


def exec_kubeconfig(
    control_plane: LocalControlPlane, folder: Path, status: dict[str, Any], *extra: str
) -> Path:
    (folder / "plugin.py").write_text(PLUGIN)
    (folder / "status.json").write_text(json.dumps(status))
    (folder / "status.json").chmod(0o600)
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(folder / "plugin.py"), str(folder / "runs"), str(folder / "status.json"), *extra],
    }
    path = folder / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority": str(control_plane.ca_cert),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"exec": spec}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def admin_certificate(control_plane: LocalControlPlane) -> dict[str, str]:
    """The admin kubeconfig's client certificate and key, as an exec plugin would print them."""
    creds = configuring.load_credentials(control_plane.kubeconfig)
    assert creds.cert_file and creds.key_file
    return {
        "clientCertificateData": Path(creds.cert_file).read_text(),
        "clientKeyData": Path(creds.key_file).read_text(),
    }


def test_an_exec_plugin_certificate_serves_the_operator_and_the_election_child(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    api = clients.load_api_client(exec_kubeconfig(control_plane, tmp_path, admin_certificate(control_plane)))
    found = requesting.request(api, "GET", f"/api/v1/namespaces/{namespace}")
    assert found["metadata"]["name"] == namespace
    settings = electing.ElectionSettings(
        namespace=namespace, identity="exec-child", lease_duration_s=4, renew_deadline_s=3, retry_period_s=0.5
    )
    election = electing.ElectionProcess(clients.lease_credentials(api), settings)
    try:
        asyncio.run(asyncio.wait_for(election.acquire(), timeout=STEP_S))
        lease = client.CoordinationV1Api(kube).read_namespaced_lease(electing.LEASE_NAME, namespace)
        assert lease.spec.holder_identity == "exec-child"
    finally:
        election.release()
    lease = client.CoordinationV1Api(kube).read_namespaced_lease(electing.LEASE_NAME, namespace)
    assert lease.spec.holder_identity is None
    # The parent ran the plugin once, the child once more (its own process).
    assert int((tmp_path / "runs").read_text()) == 2
    api.close()


def test_a_refused_exec_token_is_renewed_once(
    control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    token = tokens.request_token(control_plane, namespace, "default", seconds=600)
    api = clients.load_api_client(exec_kubeconfig(control_plane, tmp_path, {"token": token}, "refuse-first"))
    groups = requesting.request(api, "GET", "/apis")
    assert any(group["name"] == "apps" for group in groups["groups"])
    assert int((tmp_path / "runs").read_text()) == 2
    api.close()


def test_statuses_pooling_and_user_agent(
    control_plane: LocalControlPlane, api: sending.ApiClient, namespace: str
) -> None:
    mark = control_plane.audit_line_count()
    with pytest.raises(requesting.ApiException) as missing:
        requesting.request(api, "GET", f"/api/v1/namespaces/{namespace}/configmaps/absent")
    assert missing.value.status == 404 and "absent" in requesting.describe_error(missing.value)
    body = {"metadata": {"name": "once", "namespace": namespace}, "data": {"k": "v"}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    requesting.request(api, "POST", path, body=body, resource="configmaps")
    with pytest.raises(requesting.ApiException) as twice:
        requesting.request(api, "POST", path, body=body, resource="configmaps")
    assert twice.value.status == 409

    opened: list[int] = []
    original = api._open  # the one place a connection is made

    def counting(*args: Any) -> Any:
        opened.append(1)
        return original(*args)

    api._open = counting  # type: ignore[method-assign]

    def patch(index: int) -> str:
        body = {"metadata": {"annotations": {f"n{index}": "x"}}}
        patched = requesting.request(
            api, "PATCH", f"{path}/once", body=body, content_type=requesting.MERGE_PATCH
        )
        return str(patched["metadata"]["name"])

    with ThreadPoolExecutor(8) as pool:
        names = list(pool.map(patch, range(40)))
    assert names == ["once"] * 40
    assert len(opened) <= 8, opened  # at most one per thread; the rest reuse kept-alive ones

    def ours() -> list[dict[str, Any]]:
        return [
            event
            for event in control_plane.read_audit_events(mark)
            if f"/namespaces/{namespace}/configmaps" in event.get("requestURI", "")
            and event.get("stage") == "ResponseComplete"
            # NB: kube-controller-manager's root-ca-cert-publisher writes kube-root-ca.crt into
            # every new namespace, whenever it gets to it: not ours.
            and not event.get("user", {}).get("username", "").startswith(KUBE_SYSTEM_ACCOUNTS)
        ]

    # The create, the refused one and 40 patches (the audit log logs writes, read by polling).
    # Budget 30 s: the apiserver logs a request right after its response (milliseconds quiet).
    events = wait_for(lambda: (found := ours()) and len(found) >= 42 and found, 30, 0.1, "the audit events")
    assert {event.get("userAgent") for event in events} == {clients.USER_AGENT}
