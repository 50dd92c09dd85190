"""Reading where the API server is and how to authenticate: a kubeconfig or the in-cluster service account.

The one kubeconfig loader of ocp-gpu: the operator's requests (`kube/sending.py`), kopf's
watches (`kube/connecting.py`) and the election child (`kube/electing.py`) all take the
`authenticating.Credentials` it returns.  It reads what kubectl reads for one context:
`server`, `certificate-authority(-data)`, `insecure-skip-tls-verify`, `tls-server-name`,
`proxy-url`; `token`, `tokenFile`, `username`/`password`, `client-certificate(-data)`,
`client-key(-data)` and `exec`.  Relative paths are relative to the kubeconfig's folder.

Errors are one line naming the file and the field (`ConfigError`).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.kube import authenticating

ConfigError = authenticating.ConfigError

# The in-cluster service account (what the kubelet mounts into every pod).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def load_credentials(
    kubeconfig: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    user_agent: str = "ocp-gpu",
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> authenticating.Credentials:
    """Credentials from `kubeconfig`, else $KUBECONFIG, else in-cluster, else ~/.kube/config.

    Raises ConfigError (one line naming the file and field) when none can be loaded.
    """
    env = os.environ if env is None else env
    origin: str | None
    if kubeconfig is not None:
        paths, origin = [kubeconfig], "--kubeconfig"
    elif env.get("KUBECONFIG"):
        # As kubectl: a list of files, merged (the first file naming an entry wins).
        paths, origin = [Path(p) for p in str(env["KUBECONFIG"]).split(os.pathsep) if p], "$KUBECONFIG"
    elif env.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_credentials(env, service_account_dir, user_agent)
    else:
        paths, origin = [Path(env.get("HOME") or Path.home()) / ".kube" / "config"], None
    existing = [path for path in paths if path.is_file()]
    if not existing or (origin == "--kubeconfig" and len(existing) < len(paths)):
        if origin is None:
            raise ConfigError(
                f"cannot load kubeconfig {paths[0]} (no --kubeconfig, $KUBECONFIG or in-cluster config):"
                " it does not exist"
            )
        if len(paths) == 1:
            raise ConfigError(f"kubeconfig {paths[0]} (from {origin}) does not exist or is not a file")
        raise ConfigError(f"none of the kubeconfigs in $KUBECONFIG ({env.get('KUBECONFIG')}) exists")
    return _from_kubeconfig([(path, _read(path)) for path in existing], user_agent)


def in_cluster_credentials(
    env: Mapping[str, str], service_account_dir: Path = SERVICE_ACCOUNT_DIR, user_agent: str = "ocp-gpu"
) -> authenticating.Credentials:
    """The pod's service account: its token file (re-read as it rotates) and the cluster CA."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set"
        )
    token, ca = service_account_dir / "token", service_account_dir / "ca.crt"
    for path in (token, ca):
        if not path.is_file():
            raise ConfigError(f"in-cluster config: {path} does not exist (is a service account mounted?)")
    # NB: an IPv6 service address needs brackets in a URL.
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return authenticating.Credentials(
        server=server, ca_file=str(ca), token_file=str(token), user_agent=user_agent
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot load kubeconfig {path}: {error}") from None
    except yaml.YAMLError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "invalid YAML"
        raise ConfigError(f"cannot load kubeconfig {path}: not YAML: {first}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"cannot load kubeconfig {path}: not a mapping")
    return document


def _named(
    documents: list[tuple[Path, dict[str, Any]]], section: str, name: str
) -> tuple[dict[str, Any], Path] | None:
    """The first entry of `section` called `name` across the files (kubectl's merge: first wins)."""
    for path, document in documents:
        entries = document.get(section) or []
        if not isinstance(entries, list):
            raise ConfigError(f"cannot load kubeconfig {path}: {section} is not a list")
        for entry in entries:
            if isinstance(entry, dict) and entry.get("name") == name:
                body = entry.get(section[:-1])
                if body is None:
                    body = {}
                if not isinstance(body, dict):
                    raise ConfigError(
                        f"cannot load kubeconfig {path}: {section}[name={name}].{section[:-1]}"
                        " is not a mapping"
                    )
                return body, path
    return None


def _from_kubeconfig(
    documents: list[tuple[Path, dict[str, Any]]], user_agent: str
) -> authenticating.Credentials:
    first = documents[0][0]
    current = next((str(d["current-context"]) for _, d in documents if d.get("current-context")), "")
    if not current:
        raise ConfigError(f"cannot load kubeconfig {first}: current-context is not set")
    found = _named(documents, "contexts", current)
    if found is None:
        raise ConfigError(
            f"cannot load kubeconfig {first}: current-context {current!r} is not among contexts"
        )
    context, where = found
    cluster_name, user_name = str(context.get("cluster") or ""), str(context.get("user") or "")
    if not cluster_name:
        raise ConfigError(
            f"cannot load kubeconfig {where}: contexts[name={current}].context.cluster is not set"
        )
    found = _named(documents, "clusters", cluster_name)
    if found is None:
        raise ConfigError(f"cannot load kubeconfig {where}: cluster {cluster_name!r} is not among clusters")
    cluster, cluster_file = found
    user: dict[str, Any] = {}
    user_file = cluster_file
    if user_name:
        found = _named(documents, "users", user_name)
        if found is None:
            raise ConfigError(f"cannot load kubeconfig {where}: user {user_name!r} is not among users")
        user, user_file = found
    return _credentials(cluster, cluster_file, cluster_name, user, user_file, user_name, user_agent)


def _credentials(
    cluster: dict[str, Any],
    cluster_file: Path,
    cluster_name: str,
    user: dict[str, Any],
    user_file: Path,
    user_name: str,
    user_agent: str,
) -> authenticating.Credentials:
    c_at = f"clusters[name={cluster_name}].cluster"
    u_at = f"users[name={user_name}].user"

    def fail(path: Path, field: str, problem: str) -> ConfigError:
        return ConfigError(f"cannot load kubeconfig {path}: {field} {problem}")

    server = str(cluster.get("server") or "")
    if not server:
        raise fail(cluster_file, f"{c_at}.server", "is not set")
    if not server.startswith(("https://", "http://")):
        raise fail(cluster_file, f"{c_at}.server", f"{server!r} is not an http(s) URL")
    if "auth-provider" in user:
        raise fail(user_file, f"{u_at}.auth-provider", "is not supported (kubectl dropped it too): use exec")
    cert_file, cert_data = _file_or_data(user, "client-certificate", user_file, u_at)
    key_file, key_data = _file_or_data(user, "client-key", user_file, u_at)
    if bool(cert_file or cert_data) != bool(key_file or key_data):
        raise fail(user_file, u_at, "needs client-certificate and client-key together")
    ca_file, ca_data = _file_or_data(cluster, "certificate-authority", cluster_file, c_at)
    token_file = None
    if user.get("tokenFile") and not user.get("token"):
        token_file = str(_path(user["tokenFile"], user_file))
        if not os.path.isfile(token_file):
            raise fail(user_file, f"{u_at}.tokenFile", f"{token_file} does not exist")
    verify = not _bool(
        cluster.get("insecure-skip-tls-verify"), cluster_file, f"{c_at}.insecure-skip-tls-verify"
    )
    return authenticating.Credentials(
        server=server,
        ca_file=ca_file,
        ca_data=ca_data,
        verify=verify,
        token=str(user["token"]) if user.get("token") else None,
        token_file=token_file,
        username=str(user["username"]) if user.get("username") else None,
        password=str(user["password"]) if user.get("password") else None,
        cert_file=cert_file,
        key_file=key_file,
        cert_data=cert_data,
        key_data=key_data,
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
        proxy=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
        exec=_exec_plugin(user.get("exec"), user_file, f"{u_at}.exec") if user.get("exec") else None,
        user_agent=user_agent,
    )


def _path(value: Any, kubeconfig: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else kubeconfig.parent / path


def _bool(value: Any, path: Path, field: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ConfigError(f"cannot load kubeconfig {path}: {field} {value!r} is not true or false")


def _file_or_data(
    section: dict[str, Any], field: str, kubeconfig: Path, at: str
) -> tuple[str | None, str | None]:
    """`field` (a path, checked to exist) or `field-data` (base64 PEM): the data wins, as in kubectl."""
    data = section.get(f"{field}-data")
    if data:
        try:
            return None, base64.b64decode(str(data), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ConfigError(
                f"cannot load kubeconfig {kubeconfig}: {at}.{field}-data is not base64 PEM"
            ) from None
    value = section.get(field)
    if not value:
        return None, None
    path = _path(value, kubeconfig)
    if not path.is_file():
        raise ConfigError(f"cannot load kubeconfig {kubeconfig}: {at}.{field} {path} does not exist")
    return str(path), None


def _exec_plugin(spec: Any, kubeconfig: Path, at: str) -> authenticating.ExecPlugin:
    if not isinstance(spec, dict) or not spec.get("command"):
        raise ConfigError(f"cannot load kubeconfig {kubeconfig}: {at}.command is not set")
    api_version = str(spec.get("apiVersion") or "")
    if api_version not in authenticating.EXEC_API_VERSIONS:
        raise ConfigError(
            f"cannot load kubeconfig {kubeconfig}: {at}.apiVersion {api_version!r} is not one of "
            f"{', '.join(sorted(authenticating.EXEC_API_VERSIONS))}"
        )
    command = str(spec["command"])
    if os.sep in command and not os.path.isabs(command):
        # As kubectl: a relative path with a slash is relative to the kubeconfig's folder.
        command = str(kubeconfig.parent / command)
    env = []
    for index, item in enumerate(spec.get("env") or ()):
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(f"cannot load kubeconfig {kubeconfig}: {at}.env[{index}] needs name and value")
        env.append((str(item["name"]), str(item.get("value") or "")))
    args = spec.get("args") or []
    if not isinstance(args, list):
        raise ConfigError(f"cannot load kubeconfig {kubeconfig}: {at}.args is not a list")
    return authenticating.ExecPlugin(
        command=command,
        args=tuple(str(a) for a in args),
        env=tuple(env),
        api_version=api_version,
        install_hint=str(spec.get("installHint") or ""),
        provide_cluster_info=bool(spec.get("provideClusterInfo")),
        origin=f"{kubeconfig} {at}",
    )
