"""We test these aspects of the election child's Lease client (kube/leasing.py, kube/electing.py):

- the child process imports nothing heavy: `python -S -m ocp_gpu.kube.electing`'s modules
  include neither the kubernetes client, kopf, yaml nor asyncio (issue 13: its memory);
- it ends at once, cleanly, when its parent closes its stdin before saying anything;
- Lease JSON <-> LeaseRecord, MicroTime both ways, a missing duration taking ours;
- the credentials the operator hands over, resolved from a kubeconfig (token, client
  certificate, CA, insecure-skip-tls-verify, tls-server-name), survive the JSON trip.
The requests themselves are tested on the local control plane (tests/e2e/test_lease_*.py).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ocp_gpu.kube import clients, electing, leasing
from ocp_gpu.planning import leadership

ROOT = Path(electing.__file__).resolve().parents[2]
HEAVY = ("kubernetes", "kopf", "yaml", "asyncio", "aiohttp", "jinja2", "prometheus_client", "urllib3")


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_the_election_child_imports_nothing_heavy() -> None:
    # What `-m ocp_gpu.kube.electing` loads, as an import (the module itself then counts too).
    probe = "import sys, ocp_gpu.kube.electing; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=_child_env(), capture_output=True, text=True, check=True
    ).stdout.split()
    assert "ocp_gpu.kube.leasing" in loaded and "ocp_gpu.planning.leadership" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    ours = sorted(m for m in loaded if m.startswith("ocp_gpu"))
    assert ours == [
        "ocp_gpu",
        "ocp_gpu.kube",
        "ocp_gpu.kube.authenticating",
        "ocp_gpu.kube.electing",
        "ocp_gpu.kube.leasing",
        "ocp_gpu.kube.sending",
        "ocp_gpu.planning",
        "ocp_gpu.planning.leadership",
    ]


def test_the_child_ends_when_the_parent_closes_its_stdin_first() -> None:
    child = subprocess.run(
        [sys.executable, "-S", "-m", "ocp_gpu.kube.electing"],
        env=_child_env(),
        input="",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout == ""


STAMP = datetime.datetime(2026, 11, 24, 4, 35, 50, 123456, tzinfo=datetime.UTC)


def test_micro_time_round_trip() -> None:
    assert leasing.format_micro_time(STAMP) == "2026-11-24T04:35:50.123456Z"
    assert leasing.parse_micro_time("2026-11-24T04:35:50.123456Z") == STAMP
    # Whole seconds and an explicit offset, as other clients write them.
    assert leasing.parse_micro_time("2026-11-24T05:35:50+01:00") == STAMP.replace(microsecond=0)
    assert leasing.parse_micro_time(None) is None and leasing.format_micro_time(None) is None


def test_lease_body_and_record_round_trip() -> None:
    record = leadership.LeaseRecord("me", STAMP, STAMP - datetime.timedelta(seconds=30), 137, 2)
    body = leasing.lease_body("ns", "lease", record, "42")
    assert body["metadata"] == {
        "name": "lease",
        "namespace": "ns",
        "labels": {"app.kubernetes.io/managed-by": "ocp-gpu"},
        "resourceVersion": "42",
    }
    assert body["spec"]["renewTime"] == "2026-11-24T04:35:50.123456Z"
    assert leasing.record_of(json.loads(json.dumps(body)), 15) == record
    # Released (no holder): the field is left out, and reads back as None.
    released = leasing.lease_body("ns", "lease", leadership.released(record), None)
    assert "holderIdentity" not in released["spec"] and "resourceVersion" not in released["metadata"]
    assert leasing.record_of(released, 15).holder is None
    # A Lease written without a duration gets ours.
    assert leasing.record_of({"spec": {"holderIdentity": "x"}}, 15).duration_s == 15


def _kubeconfig(tmp_path: Path, user: dict[str, str], cluster: dict[str, object]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_credentials_from_a_token_kubeconfig(tmp_path: Path) -> None:
    path = _kubeconfig(
        tmp_path, {"token": "s3cret"}, {"insecure-skip-tls-verify": True, "tls-server-name": "api.example"}
    )
    credentials = clients.lease_credentials(clients.load_api_client(path))
    assert credentials.server == "https://127.0.0.1:6443"
    assert credentials.token == "s3cret" and credentials.token_file is None
    assert credentials.verify is False
    assert credentials.tls_server_name == "api.example"
    assert credentials.user_agent == clients.USER_AGENT
    assert leasing.Credentials.from_json(json.loads(json.dumps(credentials.to_json()))) == credentials


def test_credentials_from_a_client_certificate_kubeconfig(tmp_path: Path) -> None:
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_text("-----BEGIN X-----\n-----END X-----\n")
    path = _kubeconfig(
        tmp_path,
        {"client-certificate": str(tmp_path / "tls.crt"), "client-key": str(tmp_path / "tls.key")},
        {"certificate-authority": str(tmp_path / "ca.crt")},
    )
    credentials = clients.lease_credentials(clients.load_api_client(path))
    assert credentials.token is None
    assert credentials.cert_file == str(tmp_path / "tls.crt")
    assert credentials.key_file == str(tmp_path / "tls.key")
    assert credentials.ca_file == str(tmp_path / "ca.crt")
    assert credentials.verify is True and credentials.check_hostname is True
