"""We test these aspects of the one kubeconfig loader (kube/configuring.py) and the credentials it
yields (kube/authenticating.py), without a server:

- every field the operator honours is read: server, certificate-authority(-data),
  insecure-skip-tls-verify, tls-server-name, proxy-url, token, tokenFile, username/password,
  client-certificate(-data), client-key(-data), exec; relative paths from the kubeconfig's folder;
- $KUBECONFIG as a list of files (the first naming an entry wins), in-cluster config (token file,
  CA, an IPv6 service address);
- each bad input is one line naming the file and the field (ConfigError);
- the exec plugin: run with KUBERNETES_EXEC_INFO, its token or client certificate read, run again
  when its expirationTimestamp passes or after a 401, never when a static token is refused;
  its failures named (exit status, not found with the install hint, wrong apiVersion);
- the credentials survive the JSON trip to the election child, exec plugin included.
The requests themselves go to the local control plane (tests/e2e/test_transport.py).
"""

from __future__ import annotations

import base64
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu.kube import authenticating, configuring

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def write_kubeconfig(
    path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None, **top: Any
) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
        **top,
    }
    path.write_text(yaml.safe_dump(document))
    return path


def load(path: Path, **env: str) -> authenticating.Credentials:
    return configuring.load_credentials(path, env=env)


def test_token_insecure_tls_server_name_and_proxy(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "kc",
        {"token": "s3cret"},
        {"insecure-skip-tls-verify": True, "tls-server-name": "api.example", "proxy-url": "http://p:3128"},
    )
    creds = load(path)
    assert creds.server == "https://127.0.0.1:6443"
    assert (creds.token, creds.verify, creds.tls_server_name, creds.proxy) == (
        "s3cret",
        False,
        "api.example",
        "http://p:3128",
    )
    assert authenticating.Authenticator(creds).current().authorization == "Bearer s3cret"


def test_files_relative_to_the_kubeconfig_and_inline_data(tmp_path: Path) -> None:
    for name in ("ca.crt", "tls.crt", "tls.key", "token"):
        (tmp_path / name).write_text(PEM if name != "token" else "from-file\n")
    path = write_kubeconfig(
        tmp_path / "kc",
        {"client-certificate": "tls.crt", "client-key": "tls.key", "tokenFile": "token"},
        {"certificate-authority": "ca.crt"},
    )
    creds = load(path)
    assert (creds.cert_file, creds.key_file, creds.ca_file, creds.token_file) == tuple(
        str(tmp_path / n) for n in ("tls.crt", "tls.key", "ca.crt", "token")
    )
    assert authenticating.Authenticator(creds).current().authorization == "Bearer from-file"
    b64 = base64.b64encode(PEM.encode()).decode()
    inline = write_kubeconfig(
        tmp_path / "inline",
        {"client-certificate-data": b64, "client-key-data": b64, "username": "a", "password": "b"},
        {"certificate-authority-data": b64},
    )
    creds = load(inline)
    assert (creds.cert_data, creds.key_data, creds.ca_data, creds.cert_file) == (PEM, PEM, PEM, None)
    assert (
        authenticating.Authenticator(creds).current().authorization
        == "Basic " + base64.b64encode(b"a:b").decode()
    )


def test_kubeconfig_list_first_file_wins(tmp_path: Path) -> None:
    first = tmp_path / "one"
    first.write_text(yaml.safe_dump({"users": [{"name": "u", "user": {"token": "first"}}]}))
    second = write_kubeconfig(tmp_path / "two", {"token": "second"})
    creds = configuring.load_credentials(env={"KUBECONFIG": f"{first}:{tmp_path / 'absent'}:{second}"})
    assert creds.token == "first" and creds.server == "https://127.0.0.1:6443"


def test_in_cluster(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text(PEM)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    creds = configuring.load_credentials(env=env, service_account_dir=tmp_path)
    assert creds.server == "https://[fd00::1]:443"
    assert (creds.token_file, creds.ca_file) == (str(tmp_path / "token"), str(tmp_path / "ca.crt"))
    with pytest.raises(configuring.ConfigError, match=r"in-cluster config: .*absent/token does not exist"):
        configuring.load_credentials(env=env, service_account_dir=tmp_path / "absent")


BAD = [
    ({"token": "t"}, {"server": ""}, "clusters[name=c].cluster.server is not set"),
    ({"token": "t"}, {"server": "127.0.0.1:6443"}, "clusters[name=c].cluster.server '127.0.0.1:6443' is not"),
    (
        {"client-certificate": "/nope.crt", "client-key": "/nope.key"},
        {},
        "client-certificate /nope.crt does not",
    ),
    ({"client-certificate-data": "%%%", "client-key-data": "x"}, {}, "client-certificate-data is not base64"),
    ({"auth-provider": {"name": "gcp"}}, {}, "users[name=u].user.auth-provider is not supported"),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v9", "command": "x"}}, {}, "exec.apiVersion"),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}, {}, "users[name=u].user.exec.command is"),
    ({"token": "t"}, {"insecure-skip-tls-verify": "maybe"}, "insecure-skip-tls-verify 'maybe' is not"),
]


@pytest.mark.parametrize(("user", "cluster", "says"), BAD)
def test_bad_fields_are_named_with_the_file(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], says: str
) -> None:
    path = write_kubeconfig(tmp_path / "kc", user, cluster)
    with pytest.raises(configuring.ConfigError) as error:
        load(path)
    message = str(error.value)
    assert says in message and str(path) in message and "\n" not in message


def test_a_missing_context_or_file_is_one_line(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"token": "t"}, **{"current-context": "gone"})
    with pytest.raises(configuring.ConfigError, match="current-context 'gone' is not among contexts"):
        load(path)
    (tmp_path / "bad").write_text("a: [")
    with pytest.raises(configuring.ConfigError, match=r"bad: not YAML"):
        load(tmp_path / "bad")
    with pytest.raises(
        configuring.ConfigError, match=r"kubeconfig /x/kc \(from --kubeconfig\) does not exist"
    ):
        load(Path("/x/kc"))
    with pytest.raises(configuring.ConfigError, match=r"\(from \$KUBECONFIG\) does not exist"):
        configuring.load_credentials(env={"KUBECONFIG": "/x/kc"})


# --- the exec plugin ----------------------------------------------------------------------------

PLUGIN = """
import json, os, sys
count = int(open(sys.argv[1]).read() or 0) + 1 if os.path.exists(sys.argv[1]) else 1
open(sys.argv[1], "w").write(str(count))
info = os.environ["KUBERNETES_EXEC_INFO"] + "\\n" + os.environ.get("EXTRA", "")
open(sys.argv[1] + ".info", "w").write(info)
status = json.loads(sys.argv[2])
if "token" in status:
    status["token"] = f"{status['token']}-{count}"
version = "client.authentication.k8s.io/v1"
print(json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": status}))
"""


def exec_kubeconfig(tmp_path: Path, status: dict[str, Any], **extra: Any) -> Path:
    (tmp_path / "plugin.py").write_text(PLUGIN)
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "runs"), json.dumps(status)],
        "env": [{"name": "EXTRA", "value": "from-kubeconfig"}],
        **extra,
    }
    return write_kubeconfig(tmp_path / "kc", {"exec": spec})


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def in_seconds(seconds: float) -> str:
    stamp = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_exec_token_is_cached_until_it_expires(tmp_path: Path) -> None:
    creds = load(
        exec_kubeconfig(
            tmp_path, {"token": "t", "expirationTimestamp": in_seconds(3600)}, provideClusterInfo=True
        )
    )
    auth = authenticating.Authenticator(creds)
    first = auth.current()
    assert first.authorization == "Bearer t-1" and first.expires is not None
    assert auth.current() == first and runs(tmp_path) == 1
    info, extra = (tmp_path / "runs.info").read_text().split("\n")
    request = json.loads(info)
    assert request["spec"]["interactive"] is False and request["spec"]["cluster"]["server"] == creds.server
    assert extra == "from-kubeconfig"
    # A 401: run again, a new generation.
    assert auth.refresh(first) is True
    assert auth.current().authorization == "Bearer t-2" and runs(tmp_path) == 2
    # A second thread reporting the same failed credential does not run it a third time.
    assert auth.refresh(first) is True and runs(tmp_path) == 2


def test_an_expired_exec_token_is_renewed_before_use(tmp_path: Path) -> None:
    auth = authenticating.Authenticator(
        load(exec_kubeconfig(tmp_path, {"token": "t", "expirationTimestamp": in_seconds(5)}))
    )
    assert auth.current().authorization == "Bearer t-1"
    # Within EXPIRY_MARGIN_S of its expiry: renewed on the next use.
    assert auth.current().authorization == "Bearer t-2"


def test_exec_client_certificate_and_the_json_trip(tmp_path: Path) -> None:
    creds = load(exec_kubeconfig(tmp_path, {"clientCertificateData": PEM, "clientKeyData": PEM}))
    current = authenticating.Authenticator(creds).current()
    assert (current.authorization, current.cert_data, current.key_data, current.expires) == (
        None,
        PEM,
        PEM,
        None,
    )
    trip = authenticating.Credentials.from_json(json.loads(json.dumps(creds.to_json())))
    assert trip == creds and trip.exec is not None and trip.exec.env == (("EXTRA", "from-kubeconfig"),)


def test_a_static_token_refused_is_not_retried(tmp_path: Path) -> None:
    auth = authenticating.Authenticator(load(write_kubeconfig(tmp_path / "kc", {"token": "t"})))
    assert auth.refresh(auth.current()) is False


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            {"command": "/no/such/plugin", "installHint": "install it from example.com\nsecond line"},
            "command not found: install it from example.com",
        ),
        (
            {
                "command": sys.executable,
                "args": ["-c", "import sys; print('denied', file=sys.stderr); sys.exit(3)"],
            },
            "exited 3: denied",
        ),
        (
            {
                "command": sys.executable,
                "args": [
                    "-c",
                    "import json; print(json.dumps({'kind': 'ExecCredential', "
                    "'apiVersion': 'client.authentication.k8s.io/v1beta1'}))",
                ],
            },
            "it answered apiVersion 'client.authentication.k8s.io/v1beta1'",
        ),
        (
            {
                "command": sys.executable,
                "args": [
                    "-c",
                    "import json; print(json.dumps({'kind': 'ExecCredential', "
                    "'apiVersion': 'client.authentication.k8s.io/v1', 'status': {}}))",
                ],
            },
            "neither token nor clientCertificateData",
        ),
    ],
)
def test_exec_failures_are_named(tmp_path: Path, spec: dict[str, Any], says: str) -> None:
    path = write_kubeconfig(
        tmp_path / "kc", {"exec": {"apiVersion": "client.authentication.k8s.io/v1", **spec}}
    )
    with pytest.raises(authenticating.ConfigError) as error:
        authenticating.Authenticator(load(path)).current()
    assert (
        says in str(error.value)
        and "users[name=u].user.exec" in str(error.value)
        and str(path) in str(error.value)
    )
