"""`LocalControlPlane`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok, started as local processes with their own PKI, and an audit log.

We start the processes ourselves rather than through kwokctl (HARNESS.md's fallback)
because tests need an audit log, several client identities (one client certificate
each, so audit events can be attributed) and no downloads or ``~/.kwok`` state.

Everything lives in one state directory::

    pki/         ca, apiserver serving cert, service-account key, client certs
    kubeconfigs/ admin.kubeconfig and one per identity
    etcd/        etcd's data dir
    audit/       policy.yaml and audit.log (JSON lines)
    kwok/        the stage files kwok loads (see `stages`)
    logs/        one log file per process
    pids         "<name> <pid>" per started process, for post-mortem cleanup

Each process runs in its own session (so its process group id is its pid) and is
stopped in reverse start order: SIGTERM to the group, SIGKILL after a grace period.
An atexit hook stops whatever is still running when the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, TypeVar

import kubernetes.client
import kubernetes.config
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ocp_gpu_harness import binaries as binaries_mod
from ocp_gpu_harness import real_node as real_node_mod
from ocp_gpu_harness import stages

# The service network; the apiserver's own ClusterIP is its first address.
SERVICE_CLUSTER_IP_RANGE: Final = "10.0.0.0/24"
KUBERNETES_SERVICE_IP: Final = "10.0.0.1"
# kwok hands pod IPs out of this range. NB: kwok's default (10.0.0.0/24) overlaps
# the service range above; pod IPs that look like ClusterIPs confuse readers.
POD_CIDR: Final = "10.244.0.0/16"
SERVICE_ACCOUNT_ISSUER: Final = "https://kubernetes.default.svc.cluster.local"

# Identities of the components (the bootstrap RBAC roles are bound to these names).
ADMIN_USER: Final = "kubernetes-admin"
MASTERS_GROUP: Final = "system:masters"
KCM_USER: Final = "system:kube-controller-manager"
SCHEDULER_USER: Final = "system:kube-scheduler"
KWOK_USER: Final = "kwok-controller"

# The verbs that change state; the audit policy logs these and nothing else.
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Node leases: written every ~10 s per node by kwok, noise for most write counts.
LEASES: Final = "leases.coordination.k8s.io"

# kwok renews each node's Lease; the node-lifecycle controller then keeps the node
# Ready and never evicts its pods (kwok's heartbeat stage alone runs every ~10 min,
# far beyond the controller's 50 s grace period).
NODE_LEASE_SECONDS: Final = 40

# Client-side request rate (per second; burst twice that) of the controller manager and the
# scheduler: above what the apiserver serves on two cores, so that it sets the pace.
CONTROL_PLANE_QPS: Final = 500
# kwok's own options. kwok has no client-side rate limit; its stage plays, Lease renewals and
# node plays each run on a few workers (default 4), every play one request: at 5,000 nodes
# four workers against a busy apiserver made 5,000 driver pods Ready at tens a second and
# renewed 5,000 Leases besides (2026-11-24: 1,312 of them Ready after 27 minutes).
KWOK_CONFIGURATION: Final = {
    "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
    "kind": "KwokConfiguration",
    "options": {
        "podPlayStageParallelism": 16,
        "nodePlayStageParallelism": 8,
        # NB: 5,000 Leases renewed every 50 s are 100 updates a second; 8 workers at a loaded
        # apiserver's latency renewed some too late, their nodes went NotReady and the node
        # lifecycle controller marked their pods not Ready (2026-11-24 18:39: 136 nodes).
        "nodeLeaseParallelism": 64,
    },
}
# Seconds a control plane may take to come up (it returns as soon as it is up: ~4 s idle).
# NB: at load 30-36 on 2 cores, etcd and kube-apiserver took over 180 s to serve /readyz (issue
# 30: a chaos test's own control plane, 2026-11-28 09:25; the apiserver's rbac/bootstrap-roles
# hook timed out at the same moment).
START_TIMEOUT_S: Final = 600.0
# Name of the throwaway node used to check that kwok makes nodes Ready.
_PROBE_NODE: Final = "ocp-gpu-harness-probe"

_AUDIT_POLICY: Final = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One event per request (ResponseComplete), not two.
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": sorted(WRITE_VERBS)},
        {"level": "None"},
    ],
}

T = TypeVar("T")


# How often `restart_process` starts a kube-apiserver that exits before it is ready.
_APISERVER_STARTS = 3


class ControlPlaneError(RuntimeError):
    """A control plane process failed to start or the cluster never became ready."""


# --- PKI -------------------------------------------------------------------------------


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: Collection[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


@dataclass(frozen=True)
class _CertificateAuthority:
    cert: x509.Certificate
    key: rsa.RSAPrivateKey

    @classmethod
    def create(cls) -> _CertificateAuthority:
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        name = _name("ocp-gpu-harness-ca")
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert=cert, key=key)

    def issue(
        self,
        common_name: str,
        organizations: Collection[str] = (),
        *,
        server: bool = False,
        dns_names: Collection[str] = (),
        ips: Collection[str] = (),
    ) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
        """A leaf certificate: a client cert, or a serving cert with SANs."""
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=True,
                    key_cert_sign=False,
                    crl_sign=False,
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


def write_serving_certificate(
    directory: Path, common_name: str, dns_names: Collection[str]
) -> tuple[Path, Path]:
    """tls.crt and tls.key in `directory`: a serving certificate from a throwaway CA, for a harness
    process's own endpoint that nothing verifies (OLM's catalog operator's metrics, harness/olm.py)."""
    cert, key = _CertificateAuthority.create().issue(common_name, server=True, dns_names=dns_names)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    _write_cert(cert_path, cert)
    _write_key(key_path, key)
    return cert_path, key_path


# --- helpers ---------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on loopback right now.

    NB: the sockets stay open until all are picked, or the kernel may hand out the
    same port twice (seen: etcd's client and peer URLs on one port).  Another
    process may still take a port before ours binds; a failed bind shows up as a
    start error with the log tail.
    """
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _free_port() -> int:
    """A TCP port free on loopback right now (see free_ports)."""
    return free_ports(1)[0]


# Log lines worth showing first: klog errors/fatals, cobra's "Error:", kwok's JSON errors.
_ERROR_LINE = re.compile(r'^(?:[EF]\d{4} |Error: |.*"level":"(?:ERROR|error)")')


def _excerpt(path: Path, lines: int = 30) -> str:
    """The first error lines and the last ``lines`` lines of a log.

    NB: a component that rejects its flags prints "Error: ..." and then its whole
    usage text; the tail alone would show only the usage."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    errors = [line for line in text[:-lines] if _ERROR_LINE.match(line)][:10]
    head = ["first errors:", *errors, "...", "last lines:"] if errors else []
    return "\n".join([*head, *text[-lines:]])


# prctl(2) option: the signal the kernel sends a child when its parent dies.
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL me when my parent dies.

    The safety net for what atexit cannot cover (the test runner SIGKILLed, a CI job
    cancelled): otherwise an apiserver and etcd would outlive the session.
    NB: Linux sends it when the parent *thread* exits, so it is only armed for
    processes started from the main thread (see `_spawn`).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid


def _can_die_with_parent() -> bool:
    return sys.platform == "linux" and threading.current_thread() is threading.main_thread()


def _stop_process(proc: _Process, grace: float) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    # NB: the process group is the pid because each process starts its own session;
    # killing the group also reaps anything it forked.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.popen.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.popen.wait(timeout=10)
    # The leader has exited; stragglers in its group (none expected) get killed too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.log_file.close()


# Every started plane, for the atexit safety net. Strong references: a plane dropped
# without stop() is still stopped gracefully at exit.
_LIVE: set[LocalControlPlane] = set()


@atexit.register
def _stop_all_at_exit() -> None:
    for plane in list(_LIVE):
        with contextlib.suppress(Exception):
            plane.stop()


# --- the control plane -----------------------------------------------------------------


class LocalControlPlane:
    """A real Kubernetes control plane with fake kubelets, on loopback.

    Use as a context manager, or call `start` and `stop`::

        with LocalControlPlane() as cp:
            api = kubernetes.client.CoreV1Api(cp.api_client())
    """

    def __init__(
        self,
        state_dir: Path | str | None = None,
        *,
        binaries: binaries_mod.ControlPlaneBinaries | None = None,
        start_timeout: float = START_TIMEOUT_S,
        stop_grace: float = 5.0,
        keep_state: bool = False,
        node_lease_seconds: int = NODE_LEASE_SECONDS,
        real_node: bool = False,
        real_node_timeout: float = 600.0,
    ) -> None:
        """``state_dir``: where PKI, data and logs go (a new temp dir if None; removed
        by `stop` unless ``keep_state``, or kept when the start failed).
        ``node_lease_seconds``: the fake nodes' Lease duration (kwok renews at a quarter of
        it; the node-lifecycle controller's grace period follows).  Benchmarks with
        thousands of nodes on two cores lengthen it: kwok cannot renew 5,000 Leases every
        10 s there, and nodes it misses go NotReady.
        ``binaries``: default `binaries.find_binaries()` (never builds; the pytest
        fixture calls `binaries.ensure_binaries` first).
        ``real_node``: also start one real node, containerd + runc + a kubelet running real
        containers (`real_node.RealNode`; root only: `real_node.unavailable_reason` says why a
        machine cannot), within ``real_node_timeout`` seconds of the rest being up."""
        self._owns_state_dir = state_dir is None
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._binaries = binaries
        self._start_timeout = start_timeout
        self._stop_grace = stop_grace
        self._keep_state = keep_state
        self._node_lease_seconds = node_lease_seconds
        self._want_real_node = real_node
        self._real_node_timeout = real_node_timeout
        self.real_node: real_node_mod.RealNode | None = None
        self._procs: list[_Process] = []
        # Each process's command line by name, so a chaos test can start it again.
        self._commands: dict[str, list[str]] = {}
        self._etcd_url: str | None = None
        self._ca: _CertificateAuthority | None = None
        self._apiserver_port: int | None = None
        self._started = False
        self.startup_seconds: float | None = None
        self._audit_lock = threading.Lock()
        self._audit_cache: list[str] = []
        self._audit_offset = 0

    # -- context manager --

    def __enter__(self) -> LocalControlPlane:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- properties --

    @property
    def state_dir(self) -> Path:
        if self._state_dir is None:
            raise ControlPlaneError("not started")
        return self._state_dir

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user `ADMIN_USER`, group system:masters)."""
        return self.state_dir / "kubeconfigs" / "admin.kubeconfig"

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        if self._apiserver_port is None:
            raise ControlPlaneError("not started")
        return f"https://127.0.0.1:{self._apiserver_port}"

    @property
    def ca_cert(self) -> Path:
        return self.state_dir / "pki" / "ca.crt"

    @property
    def audit_log(self) -> Path:
        """JSON lines, one audit.k8s.io/v1 Event per write request."""
        return self.state_dir / "audit" / "audit.log"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def etcd_url(self) -> str:
        """etcd's client URL (plain HTTP on loopback; its gRPC gateway serves ``/v3/...``)."""
        if self._etcd_url is None:
            raise ControlPlaneError("not started")
        return self._etcd_url

    @property
    def pids(self) -> dict[str, int]:
        """The running processes' pids by name, in start order."""
        return {p.name: p.pid for p in self._procs}

    # -- lifecycle --

    def start(self) -> None:
        """Start every process and wait until a fake node can become Ready.

        Raises `ControlPlaneError` with an excerpt of the failing process's log.
        """
        if self._started:
            return
        began = time.monotonic()
        if self._state_dir is None:
            self._state_dir = Path(tempfile.mkdtemp(prefix="ocp-gpu-cp-"))
        bins = self._binaries or binaries_mod.find_binaries()
        if any((self.state_dir / "etcd").glob("*")):
            # NB: a fresh PKI against old etcd data breaks every stored token and
            # certificate reference; never reuse a state dir.
            raise ControlPlaneError(f"{self.state_dir} holds a previous cluster's data; give a new directory")
        for sub in ("pki", "kubeconfigs", "etcd", "audit", "kwok", "logs"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._started = True
        _LIVE.add(self)
        with self._audit_lock:
            self._audit_cache, self._audit_offset = [], 0
        deadline = time.monotonic() + self._start_timeout
        try:
            self._write_pki()
            etcd_url = self._start_etcd(bins, deadline)
            self._etcd_url = etcd_url
            self._start_apiserver(bins, etcd_url, deadline)
            self._start_controller_manager(bins)
            self._start_scheduler(bins)
            self._start_kwok(bins)
            self._wait_for_cluster(deadline)
            self._start_node_agent()
            if self.real_node is not None:
                self.real_node.start(
                    self,
                    self.state_dir / "kubeconfigs" / "kubelet.kubeconfig",
                    time.monotonic() + self._real_node_timeout,
                )
        except BaseException:
            # Keep the state dir: its logs are the only clue.
            self._keep_state = True
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def stop(self) -> None:
        """Stop the processes in reverse order; remove a temp state dir."""
        node = self.real_node
        if node is not None and any(p.name == "kubelet" and p.popen.poll() is None for p in self._procs):
            node.drain(self)
        while self._procs:
            _stop_process(self._procs.pop(), self._stop_grace)
        if node is not None:
            node.clean_up()
        if self._started and self._owns_state_dir and not self._keep_state and self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
        self._started = False
        _LIVE.discard(self)

    # -- faults (chaos tests) --

    def kill_process(self, name: str) -> None:
        """SIGKILL one component (a crash: no graceful shutdown) and wait until it is gone.

        Until `restart_process`, `check_processes` reports it as exited."""
        proc = next(p for p in self._procs if p.name == name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.popen.wait(timeout=30)

    def restart_process(self, name: str, *, timeout: float = 120.0) -> None:
        """Start a killed (or still running: it is killed first) component again with the
        same command line, state and port; for the apiserver, wait until ``/readyz`` (starting it
        again, up to `_APISERVER_STARTS` times, when it exits before it is ready)."""
        index = next(i for i, p in enumerate(self._procs) if p.name == name)
        old = self._procs[index]
        if old.popen.poll() is None:
            self.kill_process(name)
        old.log_file.close()
        self._procs.pop(index)
        deadline = time.monotonic() + timeout
        for attempt in range(1, _APISERVER_STARTS + 1):
            new = self._spawn(name, self._commands[name])
            # Keep the start order: `stop` stops in reverse order (kwok before the apiserver...).
            self._procs.remove(new)
            self._procs.insert(index, new)
            if name != "kube-apiserver":
                return
            kept = self._keep_state
            try:
                self._wait("kube-apiserver /readyz", self._apiserver_ready, deadline, name)
                return
            except ControlPlaneError:
                # NB: at load 25-35 a restarted apiserver can exit 255 in a post-start hook
                # ("start-service-ip-repair-controllers ... unable to perform initial IP and Port
                # allocation check": etcd too slow); a kubelet restarts its static pod, and so do we.
                if new.popen.poll() is None or attempt == _APISERVER_STARTS or time.monotonic() >= deadline:
                    raise
                self._keep_state = kept
                new.log_file.close()
                self._procs.pop(index)

    def _apiserver_ready(self) -> bool | None:
        pki = self.state_dir / "pki"
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        with urllib.request.urlopen(f"{self.server}/readyz", context=ctx, timeout=5) as resp:
            return True if resp.status == 200 else None

    # -- identities --

    def make_kubeconfig(
        self, username: str, groups: Collection[str] = (), *, name: str | None = None
    ) -> Path:
        """A kubeconfig authenticating as ``username`` in ``groups`` (client cert
        signed by the cluster CA). ``name``: the file stem (default: the username)."""
        if self._ca is None:
            raise ControlPlaneError("not started")
        stem = (name or username).replace(":", "_").replace("/", "_")
        cert, key = self._ca.issue(username, groups)
        pki = self.state_dir / "pki"
        _write_cert(pki / f"{stem}.crt", cert)
        _write_key(pki / f"{stem}.key", key)
        path = self.state_dir / "kubeconfigs" / f"{stem}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "ocp-gpu",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": username,
                    "user": {
                        "client-certificate": str(pki / f"{stem}.crt"),
                        "client-key": str(pki / f"{stem}.key"),
                    },
                }
            ],
            "contexts": [{"name": "ocp-gpu", "context": {"cluster": "ocp-gpu", "user": username}}],
            "current-context": "ocp-gpu",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def api_client(
        self, kubeconfig: Path | None = None, *, pool_size: int = 32
    ) -> kubernetes.client.ApiClient:
        """A client for the admin (or the identity of ``kubeconfig``).

        ``pool_size``: urllib3 connections kept open; the default of the kubernetes
        client (5 per CPU) throttles thread pools creating hundreds of objects."""
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(kubeconfig or self.kubeconfig), client_configuration=configuration
        )
        configuration.connection_pool_maxsize = pool_size
        return kubernetes.client.ApiClient(configuration)

    # -- audit --

    def audit_line_count(self) -> int:
        """How many events are in the audit log now: a mark for ``since_line``."""
        return len(self._audit_lines())

    def _audit_lines(self) -> list[str]:
        """Every complete line logged so far; reads only what is new since last time."""
        with self._audit_lock:
            try:
                with self.audit_log.open("rb") as f:
                    size = f.seek(0, os.SEEK_END)
                    if size < self._audit_offset:
                        # Rotated (the apiserver rotates at 100 MB): keep counting lines
                        # from the new file so marks taken earlier stay valid.
                        self._audit_offset = 0
                    f.seek(self._audit_offset)
                    chunk = f.read()
            except FileNotFoundError:
                return self._audit_cache
            # NB: the chunk may end in a line the apiserver is still writing: keep it
            # for the next read so a half-written event is never parsed.
            end = chunk.rfind(b"\n") + 1
            self._audit_offset += end
            self._audit_cache.extend(chunk[:end].decode().splitlines())
            return self._audit_cache

    def read_audit_events(self, since_line: int = 0) -> list[dict[str, Any]]:
        """Audit events from line ``since_line`` (0-based) on.

        NB: the apiserver logs an event after it has handled the request, so the
        client may see its response a moment before the event is in the file; poll
        when asserting on writes just made.
        """
        return [json.loads(line) for line in self._audit_lines()[since_line:] if line.strip()]

    def count_writes(
        self, username: str, since_line: int = 0, exclude_resources: Collection[str] = ()
    ) -> int:
        """Write requests (create/update/patch/delete/deletecollection) by ``username``.

        ``exclude_resources``: ``"<resource>.<group>"`` (``"pods"`` for the core group),
        e.g. `LEASES` to ignore leader-election and heartbeat leases."""
        count = 0
        for event in self.read_audit_events(since_line):
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
                continue
            if event.get("user", {}).get("username") != username:
                continue
            ref = event.get("objectRef") or {}
            group = ref.get("apiGroup") or ""
            resource = ref.get("resource", "")
            if (f"{resource}.{group}" if group else resource) in exclude_resources:
                continue
            count += 1
        return count

    # -- internals: PKI and configs --

    def _write_pki(self) -> None:
        pki = self.state_dir / "pki"
        if self._want_real_node:
            # Before the serving certificate: pods reach the apiserver at the node's bridge address.
            self.real_node = real_node_mod.RealNode(self.state_dir)
        self._ca = _CertificateAuthority.create()
        _write_cert(pki / "ca.crt", self._ca.cert)
        _write_key(pki / "ca.key", self._ca.key)
        cert, key = self._ca.issue(
            "kube-apiserver",
            server=True,
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=[
                "127.0.0.1",
                KUBERNETES_SERVICE_IP,
                *([self.real_node.apiserver_host] if self.real_node is not None else []),
            ],
        )
        _write_cert(pki / "apiserver.crt", cert)
        _write_key(pki / "apiserver.key", key)
        # The key that signs (and verifies) service-account tokens.
        sa_key = _new_key()
        _write_key(pki / "sa.key", sa_key)
        (pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        # The apiserver must be known before kubeconfigs are written.
        self._apiserver_port = _free_port()
        self.make_kubeconfig(ADMIN_USER, [MASTERS_GROUP], name="admin")
        self.make_kubeconfig(KCM_USER, name="kube-controller-manager")
        self.make_kubeconfig(SCHEDULER_USER, name="kube-scheduler")
        # kwok patches node and pod status and node leases cluster-wide.
        self.make_kubeconfig(KWOK_USER, [MASTERS_GROUP], name="kwok")
        if self.real_node is not None:
            # The kubelet's own identity (the Node authorizer's), and the apiserver's for the
            # kubelet's API (logs, exec), which the kubelet checks against the cluster CA.
            self.make_kubeconfig(f"system:node:{real_node_mod.NODE_NAME}", ["system:nodes"], name="kubelet")
            cert, key = self._ca.issue("kube-apiserver-kubelet-client", [MASTERS_GROUP])
            _write_cert(pki / "apiserver-kubelet-client.crt", cert)
            _write_key(pki / "apiserver-kubelet-client.key", key)

    def _component_kubeconfig(self, name: str) -> str:
        return str(self.state_dir / "kubeconfigs" / f"{name}.kubeconfig")

    # -- internals: processes --

    def _spawn(self, name: str, args: list[str]) -> _Process:
        self._commands[name] = list(args)
        log = self.logs_dir / f"{name}.log"
        log_file = log.open("ab")
        log_file.write(f"$ {' '.join(args)}\n".encode())
        log_file.flush()
        popen = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.state_dir,
            # Own session: pgid == pid, and a Ctrl-C on the terminal does not reach it
            # before we stop it in order.
            start_new_session=True,
            preexec_fn=_die_with_parent if _can_die_with_parent() else None,
        )
        proc = _Process(name=name, popen=popen, log=log, log_file=log_file)
        self._procs.append(proc)
        with (self.state_dir / "pids").open("a") as f:
            f.write(f"{name} {popen.pid}\n")
        return proc

    def check_processes(self) -> None:
        """Raise `ControlPlaneError` (with a log excerpt) if a process has exited;
        the state dir is then kept for a post-mortem."""
        for proc in self._procs:
            rc = proc.popen.poll()
            if rc is not None:
                self._keep_state = True
                raise ControlPlaneError(
                    f"{proc.name} exited with code {rc}; state kept in {self.state_dir}; "
                    f"from {proc.log}:\n{_excerpt(proc.log)}"
                )

    def _wait(self, what: str, check: Callable[[], T | None], deadline: float, blame: str) -> T:
        """Poll ``check`` until it returns non-None, failing early if a process died."""
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            self.check_processes()
            try:
                result = check()
            except Exception as e:  # not ready yet: connection refused, 403, 404...
                last_error = e
                result = None
            if result is not None:
                return result
            time.sleep(0.1)
        log = self.logs_dir / f"{blame}.log"
        raise ControlPlaneError(
            f"timed out waiting for {what} (last error: {last_error}); state kept in {self.state_dir}; "
            f"from {log}:\n{_excerpt(log)}"
        )

    def _start_etcd(self, bins: binaries_mod.ControlPlaneBinaries, deadline: float) -> str:
        client_port, peer_port = free_ports(2)
        client_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                str(bins.etcd),
                "--name=ocp-gpu",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=ocp-gpu={peer_url}",
                "--initial-cluster-state=new",
                # A test cluster's data is disposable; fsync would dominate write latency.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool | None:
            with urllib.request.urlopen(f"{client_url}/health", timeout=2) as resp:
                return True if json.loads(resp.read()).get("health") == "true" else None

        self._wait("etcd /health", healthy, deadline, "etcd")
        return client_url

    def _start_apiserver(
        self, bins: binaries_mod.ControlPlaneBinaries, etcd_url: str, deadline: float
    ) -> None:
        pki = self.state_dir / "pki"
        policy = self.state_dir / "audit" / "policy.yaml"
        policy.write_text(yaml.safe_dump(_AUDIT_POLICY, sort_keys=False))
        self._spawn(
            "kube-apiserver",
            [
                str(bins.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                f"--secure-port={self._apiserver_port}",
                # With a real node, pods on its bridge reach the apiserver at the bridge's address.
                f"--bind-address={'0.0.0.0' if self.real_node is not None else '127.0.0.1'}",
                "--advertise-address=127.0.0.1",
                # No kube-proxy or real endpoints: do not reconcile the kubernetes Service's endpoints.
                "--endpoint-reconciler-type=none",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                # Each event is written before the next request proceeds: tests read promptly.
                "--audit-log-mode=blocking",
                "--profiling=false",
                *(
                    [
                        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                        # The node's name does not resolve here; its InternalIP is the bridge's.
                        "--kubelet-preferred-address-types=InternalIP",
                    ]
                    if self.real_node is not None
                    else []
                ),
            ],
        )
        self._wait("kube-apiserver /readyz", self._apiserver_ready, deadline, "kube-apiserver")

    def _start_controller_manager(self, bins: binaries_mod.ControlPlaneBinaries) -> None:
        pki = self.state_dir / "pki"
        self._spawn(
            "kube-controller-manager",
            [
                str(bins.kube_controller_manager),
                f"--kubeconfig={self._component_kubeconfig('kube-controller-manager')}",
                "--controllers=*",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                # The CSR signer; lets tests use the certificates API if they want to.
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--leader-elect=false",
                # Each controller runs as its own service account, as in a real cluster,
                # so audit events name the controller (e.g. ...:daemon-set-controller).
                "--use-service-account-credentials=true",
                # No HTTPS endpoint: nothing scrapes it, and no port to collide on.
                "--secure-port=0",
                # The defaults (20/30) make the DaemonSet controller and the garbage
                # collector crawl when tests create hundreds of nodes; at 5,000 nodes even 100/s
                # left the DaemonSet controller 150 s of creating 15,000 pods: the apiserver,
                # not a client-side limit, is to set the pace.
                f"--kube-api-qps={CONTROL_PLANE_QPS}",
                f"--kube-api-burst={2 * CONTROL_PLANE_QPS}",
                # A node is NotReady once its Lease is this old (default 50 s, for a 40 s lease).
                f"--node-monitor-grace-period={max(50, self._node_lease_seconds + 10)}s",
            ],
        )

    def _start_scheduler(self, bins: binaries_mod.ControlPlaneBinaries) -> None:
        self._spawn(
            "kube-scheduler",
            [
                str(bins.kube_scheduler),
                f"--kubeconfig={self._component_kubeconfig('kube-scheduler')}",
                "--leader-elect=false",
                "--secure-port=0",
                # The default (50/s) binds 15,000 DaemonSet pods in 5 minutes at best (each
                # binding also posts an Event): as for the controller manager, the apiserver's pace.
                f"--kube-api-qps={CONTROL_PLANE_QPS}",
                f"--kube-api-burst={2 * CONTROL_PLANE_QPS}",
            ],
        )

    def _start_kwok(self, bins: binaries_mod.ControlPlaneBinaries) -> None:
        stage_files = stages.write_stage_files(bins.stage_files(), self.state_dir / "kwok")
        options = self.state_dir / "kwok" / "kwok-configuration.yaml"
        options.write_text(yaml.safe_dump(KWOK_CONFIGURATION, sort_keys=False))
        self._spawn(
            "kwok",
            [
                str(bins.kwok),
                f"--kubeconfig={self._component_kubeconfig('kwok')}",
                "--manage-all-nodes=true",
                # The real node's kubelet reports its own status and runs its pods: kwok leaves
                # both alone (NB: with --manage-nodes-with-label-selector=!<label> instead, kwok
                # v0.8.0 never made a node Ready here).
                *(
                    [f"--disregard-status-with-label-selector={real_node_mod.LABEL}"]
                    if self.real_node is not None
                    else []
                ),
                f"--config={options}",
                *(f"--config={f}" for f in stage_files),
                f"--node-lease-duration-seconds={self._node_lease_seconds}",
                f"--cidr={POD_CIDR}",
            ],
        )

    def _start_node_agent(self) -> None:
        """SIMULATION of kubelets + the NVIDIA stack on GPU nodes (node_agent.py)."""
        self._spawn(
            "node-agent",
            [sys.executable, "-m", "ocp_gpu_harness.node_agent", f"--kubeconfig={self.kubeconfig}"],
        )

    # -- internals: readiness --

    def _wait_for_cluster(self, deadline: float) -> None:
        with self.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            # The serviceaccount controller (KCM) creates it; pods cannot be created
            # in a namespace before (the ServiceAccount admission plugin rejects them).
            self._wait(
                "the default ServiceAccount in namespace default",
                lambda: core.read_namespaced_service_account("default", "default"),
                deadline,
                "kube-controller-manager",
            )
            core.create_node(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": _PROBE_NODE, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                }
            )

            def probe_ready() -> bool | None:
                node = core.read_node(_PROBE_NODE)
                conditions = node.status.conditions or []
                return True if any(c.type == "Ready" and c.status == "True" for c in conditions) else None

            try:
                self._wait("kwok to make a node Ready", probe_ready, deadline, "kwok")
            finally:
                with contextlib.suppress(kubernetes.client.ApiException):
                    core.delete_node(_PROBE_NODE)


def unique_name(prefix: str) -> str:
    """``prefix`` plus a short random suffix, valid as a DNS-1123 label."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
