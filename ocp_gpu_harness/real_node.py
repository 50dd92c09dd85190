"""One real node for the local control plane: containerd, runc and a kubelet that run containers.

kwok's nodes run no container; this node does.  `LocalControlPlane(real_node=True)` starts, after
the rest of the control plane:

- **containerd** (Debian's package, 1.6) with its own root, state and socket under the plane's
  state dir, runc as its runtime (cgroupfs driver), a CNI bridge network of its own (Debian's
  containernetworking-plugins: `bridge` with `host-local` addresses, no masquerading and no
  default route, so a pod reaches only its node) for pods that are not on the host network;
- the **pause image** every pod sandbox needs (registry.k8s.io is out of reach here): a static
  `pause` built with gcc from the few lines below and packed with umoci, once, into the cache;
- **ocp-gpu's image** (hack/build-image.sh's OCI layout) imported as `image_reference()` (`ctr
  images import`), so pods name it with `imagePullPolicy: IfNotPresent` and nothing is pulled;
  `RealNode.tag_image` gives it another name too (the release image the CSV names);
- a **kubelet** (k8s.io/kubernetes/cmd/kubelet at the control plane's version, built from Go
  modules by hack/build-kubelet.sh into the cache) registered as `NODE_NAME` under its own client
  certificate (system:node:<name>, group system:nodes), labelled `LABEL` and tainted `TAINT` so
  only pods that tolerate it land there.  kwok is told to leave it alone (the plane runs kwok with
  a label selector that excludes `LABEL`).

The apiserver then listens on every address (it is reached from pods through the bridge's own
address, `RealNode.apiserver_host`, and authenticates every request) and holds a client
certificate for the kubelet's API, which `kubectl logs` goes through.  There is no kube-proxy:
the `kubernetes` Service's ClusterIP leads nowhere, so a pod that talks to the apiserver is given
``KUBERNETES_SERVICE_HOST``/``PORT`` (the chart's ``operator.env``).

`unavailable_reason` says why this machine cannot run the node (not root, no cgroup
controllers, a missing program or image), so tests skip with that reason.

NB: the kubelet runs on cgroup v1 here with ``failCgroupV1: false`` (v1.36 refuses v1 by
default); containerd 1.6 has no CRI RuntimeConfig, so the kubelet takes the cgroup driver from
its own configuration (it says it will stop doing that in 1.37).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import yaml

from ocp_gpu_harness import binaries as binaries_mod

if TYPE_CHECKING:
    from ocp_gpu_harness.cluster import LocalControlPlane

NODE_NAME: Final = "ocp-gpu-real-node"
# kwok manages every node without this label; pods need the toleration of `TAINT` to land here.
LABEL: Final = "ocp-gpu.io/real-node"
TAINT: Final = {"key": "ocp-gpu.io/real-node", "value": "true", "effect": "NoSchedule"}
TOLERATION: Final = {"key": "ocp-gpu.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
# The name ocp-gpu's image is imported under (its tag is the package version: `image_reference`).
IMAGE_REPOSITORY: Final = "localhost/ocp-gpu"
PAUSE_IMAGE: Final = "localhost/ocp-gpu-harness/pause:1"
# containerd's CRI namespace (the kubelet's containers live there).
CRI_NAMESPACE: Final = "k8s.io"
# Debian's containernetworking-plugins install here.
CNI_BIN_DIR: Final = Path("/usr/lib/cni")
KUBELET_BUILD_SCRIPT: Final = Path("hack") / "build-kubelet.sh"
PROGRAMS: Final = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "umoci", "gcc")

# A pod sandbox's process: waits for a signal and reaps zombies (what registry.k8s.io/pause does;
# written here because that image cannot be pulled).
_PAUSE_C: Final = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, quit);
    signal(SIGTERM, quit);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


class RealNodeError(RuntimeError):
    """The real node could not start (the message says what to fix)."""


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(env.get("OCP_GPU_CACHE") or Path(xdg) / "ocp-gpu")


def kubelet_path(env: Mapping[str, str] | None = None) -> Path:
    """Where hack/build-kubelet.sh puts the kubelet (same formula and override)."""
    env = os.environ if env is None else env
    if env.get("OCP_GPU_KUBELET"):
        return Path(env["OCP_GPU_KUBELET"])
    kube = binaries_mod.versions(env)[0]
    return cache_dir(env) / "bin" / f"kubelet-{kube}" / "kubelet"


def image_layout(env: Mapping[str, str] | None = None) -> Path:
    """ocp-gpu's OCI image layout (``bash hack/build-image.sh <cache>/image`` writes <cache>/image/oci)."""
    env = os.environ if env is None else env
    return Path(env.get("OCP_GPU_IMAGE_LAYOUT") or cache_dir(env) / "image" / "oci")


def image_reference() -> str:
    import ocp_gpu

    return f"{IMAGE_REPOSITORY}:v{ocp_gpu.__version__}"


def _cgroup_problem() -> str | None:
    """None when the cgroup controllers the kubelet needs are mounted (v1 or v2)."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").is_file():
        wanted = {"cpu", "memory", "pids"}
        have = set((root / "cgroup.controllers").read_text().split())
        return None if wanted <= have else f"cgroup v2 lacks controllers {sorted(wanted - have)}"
    missing = [
        c for c in ("cpu", "cpuacct", "memory", "pids", "devices", "freezer") if not (root / c).is_dir()
    ]
    return f"cgroup v1 controllers not mounted under {root}: {', '.join(missing)}" if missing else None


def unavailable_reason(env: Mapping[str, str] | None = None) -> str | None:
    """Why this machine cannot run the real node, or None when it can (the image and kubelet
    included)."""
    env = os.environ if env is None else env
    if os.geteuid() != 0:
        return "the real node needs root (containerd, runc, the kubelet's cgroups and mounts)"
    if problem := _cgroup_problem():
        return problem
    gone = [p for p in PROGRAMS if shutil.which(p) is None]
    if gone:
        return (
            f"not on PATH: {', '.join(gone)} (apt-get install containerd runc containernetworking-plugins "
            "umoci gcc libc6-dev)"
        )
    if not (CNI_BIN_DIR / "bridge").is_file():
        return f"no CNI plugins in {CNI_BIN_DIR} (apt-get install containernetworking-plugins)"
    if not os.access(kubelet_path(env), os.X_OK):
        return f"no kubelet at {kubelet_path(env)} (bash hack/build-kubelet.sh)"
    layout = image_layout(env)
    if not (layout / "index.json").is_file():
        return f"no ocp-gpu image layout at {layout} (bash hack/build-image.sh {layout.parent})"
    return None


# --- images ------------------------------------------------------------------------------------


def _run(args: list[str], what: str, timeout: float = 600) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RealNodeError(
            f"{what} failed ({' '.join(args)}): {result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
    return result.stdout


def pause_layout(env: Mapping[str, str] | None = None) -> Path:
    """The pause image's OCI layout, built on first use (gcc -static, umoci) into the cache."""
    layout = cache_dir(env) / "real-node" / "pause-oci"
    if (layout / "index.json").is_file():
        return layout
    work = layout.parent / "pause-build"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(layout, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "pause.c").write_text(_PAUSE_C)
    _run(["gcc", "-Os", "-static", "-o", str(work / "pause"), str(work / "pause.c")], "compiling pause")
    building = work / "oci"
    _run(["umoci", "init", "--layout", str(building)], "umoci init")
    _run(["umoci", "new", "--image", f"{building}:1"], "umoci new")
    _run(["umoci", "unpack", "--image", f"{building}:1", str(work / "bundle")], "umoci unpack")
    shutil.copy2(work / "pause", work / "bundle" / "rootfs" / "pause")
    _run(["umoci", "repack", "--image", f"{building}:1", str(work / "bundle")], "umoci repack")
    _run(
        [
            "umoci",
            "config",
            "--image",
            f"{building}:1",
            "--config.entrypoint",
            "/pause",
            "--config.user",
            "65535:65535",
        ],
        "umoci config",
    )
    building.rename(layout)
    shutil.rmtree(work, ignore_errors=True)
    return layout


@contextlib.contextmanager
def _reading(layout: Path) -> Iterator[None]:
    """Hold hack/build-image.sh off the layout while it is read: the script rebuilds under an
    exclusive flock of `<OUT>.lock` (OUT holds the layout at OUT/oci); this takes it shared."""
    with open(f"{layout.parent}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield


def _oci_archive(layout: Path, archive: Path) -> Path:
    """The layout as the tar `ctr images import` reads."""
    with tarfile.open(archive, "w") as tar:
        for entry in sorted(layout.iterdir()):
            tar.add(entry, arcname=entry.name)
    return archive


# --- the node ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Network:
    bridge: str
    subnet: str
    gateway: str


BRIDGE_PREFIX: Final = "ocpgpu"


def _pick_network() -> _Network:
    """A bridge name and a /24 no route on this machine uses yet (planes may run side by side)."""
    used = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
    for _ in range(50):
        third = random.randint(0, 255)
        subnet = f"10.245.{third}.0/24"
        if subnet not in used:
            return _Network(bridge=f"{BRIDGE_PREFIX}{third}", subnet=subnet, gateway=f"10.245.{third}.1")
    raise RealNodeError("no free 10.245.x.0/24 subnet for the real node's pod network")


class RealNode:
    """containerd + kubelet, started as processes of a `LocalControlPlane` (see the module doc)."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "real-node"
        self.network = _pick_network()
        self.startup_seconds: float | None = None
        self._netns_before: set[str] = set()

    @property
    def apiserver_host(self) -> str:
        """The address pods on the pod network reach the apiserver at (the bridge's)."""
        return self.network.gateway

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    def ctr(self, *args: str, timeout: float = 600) -> str:
        """Run ``ctr`` against this node's containerd, in the CRI namespace."""
        return _run(
            ["ctr", "--address", str(self.socket), "--namespace", CRI_NAMESPACE, *args], "ctr", timeout
        )

    def tag_image(self, reference: str) -> None:
        """ocp-gpu's image (`image_reference`) under another name too, e.g. the release image a
        ClusterServiceVersion names, so a pod that names it runs ours (nothing is pulled with
        `imagePullPolicy: IfNotPresent`; containerd's CRI plugin learns the name from the event)."""
        self.ctr("images", "tag", "--force", image_reference(), reference)

    # -- start --

    def start(self, plane: LocalControlPlane, kubelet_kubeconfig: Path, deadline: float) -> None:
        began = time.monotonic()
        if reason := unavailable_reason():
            raise RealNodeError(reason)
        sweep_dead_nodes()
        for sub in ("root", "state", "cni", "cni-ipam", "kubelet", "opt"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._write_containerd_config()
        self._write_cni_config()
        self._netns_before = set(_netns_names())
        plane._spawn("containerd", ["containerd", "--config", str(self.dir / "containerd.toml")])
        plane._wait(
            "containerd's socket", lambda: True if self.socket.exists() else None, deadline, "containerd"
        )
        self.ctr(
            "images",
            "import",
            "--base-name",
            PAUSE_IMAGE.rsplit(":", 1)[0],
            str(_oci_archive(pause_layout(), self.dir / "pause.tar")),
        )
        with _reading(image_layout()):
            archive = _oci_archive(image_layout(), self.dir / "ocp-gpu-image.tar")
        self.ctr("images", "import", "--base-name", IMAGE_REPOSITORY, str(archive))
        archive.unlink()
        self._write_kubelet_config(plane)
        self._make_cgroup_root()
        self._make_bridge()
        plane._spawn(
            "kubelet",
            [
                str(kubelet_path()),
                f"--config={self.dir / 'kubelet.yaml'}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--root-dir={self.dir / 'kubelet'}",
                f"--hostname-override={NODE_NAME}",
                # NB: the kubelet refuses a loopback node IP; the bridge's address is the node's.
                f"--node-ip={self.network.gateway}",
                f"--node-labels={LABEL}=true",
                "--v=2",
            ],
        )

        def ready() -> bool | None:
            with plane.api_client() as api:
                import kubernetes.client

                node = kubernetes.client.CoreV1Api(api).read_node(NODE_NAME)
            conditions = node.status.conditions or []
            return True if any(c.type == "Ready" and c.status == "True" for c in conditions) else None

        plane._wait(f"the real node {NODE_NAME} to become Ready", ready, deadline, "kubelet")
        self.startup_seconds = time.monotonic() - began

    def _make_bridge(self) -> None:
        """The pod network's bridge with the node's address, before the kubelet needs that address
        (CNI's bridge plugin takes the existing bridge as it is)."""
        net = self.network
        prefix = net.subnet.rsplit("/", 1)[1]
        _run(["ip", "link", "add", "name", net.bridge, "type", "bridge"], "creating the bridge")
        _run(["ip", "addr", "add", f"{net.gateway}/{prefix}", "dev", net.bridge], "addressing the bridge")
        _run(["ip", "link", "set", net.bridge, "up"], "bringing the bridge up")

    def _make_cgroup_root(self) -> None:
        """The kubelet's ``cgroupRoot`` in every hierarchy (it must exist before the kubelet starts)."""
        for hierarchy in _cgroup_hierarchies():
            root = hierarchy / self.network.bridge
            root.mkdir(exist_ok=True)
            # NB: a new v1 cpuset has no CPUs or memory nodes until given its parent's.
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).is_file() and not (root / name).read_text().strip():
                    (root / name).write_text((hierarchy / name).read_text())

    def _write_containerd_config(self) -> None:
        d = self.dir
        config = f"""version = 2
root = "{d / "root"}"
state = "{d / "state"}"
[grpc]
  address = "{self.socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  # NB: root here lacks CAP_SYS_RESOURCE (a sandboxed machine): lowering a process's
  # oom_score_adj is refused, and runc then failed every pod sandbox (-998) with "can't get
  # final child's PID from pipe: EOF".  Never below containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d / "cni"}"
"""
        (d / "containerd.toml").write_text(config)

    def _write_cni_config(self) -> None:
        net = self.network
        conflist = {
            "cniVersion": "0.4.0",
            "name": "ocp-gpu-real-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": net.bridge,
                    # The bridge holds the gateway address (the node's address on the pod network);
                    # no masquerading and no default route: a pod reaches its node and nothing else.
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": net.subnet, "gateway": net.gateway}]],
                        "dataDir": str(self.dir / "cni-ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (self.dir / "cni" / "10-ocp-gpu.conflist").write_text(json.dumps(conflist, indent=2))

    def _write_kubelet_config(self, plane: LocalControlPlane) -> None:
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # NB: this machine has cgroup v1; v1.36's kubelet refuses it unless told otherwise.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            # Its own cgroup subtree, so two planes on one machine do not share kubepods.
            "cgroupRoot": f"/{self.network.bridge}",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            # The node's address: the apiserver reaches the kubelet's API (logs) here.
            "address": self.network.gateway,
            # Not below 0: see restrict_oom_score_adj in the containerd configuration.
            "oomScoreAdj": 0,
            "port": _free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(plane.ca_cert)},
            },
            # Only the apiserver holds a client certificate of the cluster CA for this port.
            "authorization": {"mode": "AlwaysAllow"},
            "registerWithTaints": [TAINT],
            "failSwapOn": False,
            "staticPodPath": "",
            "resolvConf": "/etc/resolv.conf",
            # A shared build machine: its disk may be fuller than the defaults allow.
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
        }
        (self.dir / "kubelet.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    # -- stop --

    def drain(self, plane: LocalControlPlane, timeout: float = 60.0) -> None:
        """Stop every pod on the node while the kubelet and containerd still run (containerd then
        tears its network down), then kill whatever task is left."""
        with contextlib.suppress(Exception):
            self._delete_pods(plane)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._running_tasks():
                time.sleep(1)
        with contextlib.suppress(Exception):
            for task in self._running_tasks():
                with contextlib.suppress(RealNodeError):
                    self.ctr("tasks", "kill", "--signal", "SIGKILL", task, timeout=30)

    def _delete_pods(self, plane: LocalControlPlane) -> None:
        import kubernetes.client

        with plane.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE_NAME}").items
            for pod in pods:
                with contextlib.suppress(kubernetes.client.ApiException):
                    core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                    )

    def _running_tasks(self) -> list[str]:
        lines = self.ctr("tasks", "ls", timeout=30).splitlines()[1:]
        return [line.split()[0] for line in lines if line.split() and line.split()[-1] == "RUNNING"]

    def clean_up(self) -> None:
        """After containerd and the kubelet exited: kill this containerd's shims, unmount what
        they left under the node's directory, remove the bridge and the kubelet's cgroups."""
        for pid in _pids_with_argument(str(self.socket)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for mount_point in _mounts_under(self.dir):
            subprocess.run(["umount", "-l", mount_point], capture_output=True, check=False)
        # Network namespaces of sandboxes containerd did not stop (containerd 1.6 keeps them in
        # /var/run/netns): those made since the node started that no process is in any more.
        for name in sorted(set(_netns_names()) - self._netns_before):
            pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False)
            if not pids.stdout.strip():
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        _remove_node_network_and_cgroups(self.network.bridge)


def _cgroup_hierarchies() -> list[Path]:
    """cgroup v2's one hierarchy, or v1's one per controller."""
    base = Path("/sys/fs/cgroup")
    if not base.is_dir():
        return []
    return [base] if (base / "cgroup.controllers").is_file() else [d for d in base.iterdir() if d.is_dir()]


def _cgroup_roots(name: str) -> list[Path]:
    """The directories named ``name`` at the top of every cgroup hierarchy."""
    return [h / name for h in _cgroup_hierarchies() if (h / name).is_dir()]


def _remove_node_network_and_cgroups(bridge: str) -> None:
    """Kill every process still in the node's cgroups, then remove its bridge and its cgroups.

    A container whose shim died (the test run killed, so ``clean_up`` never ran, or the shim killed
    first) is reparented to init and runs on: last session found our operator's container still
    serving :8080 two hours after its run. Its cgroup is the one thing that still names the node."""
    roots = _cgroup_roots(bridge)
    for root in roots:
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
    for root in roots:
        deadline = time.monotonic() + 10
        # NB: a killed process leaves its cgroup only once the kernel reaped it: rmdir says EBUSY until then.
        while root.is_dir() and time.monotonic() < deadline:
            for sub in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir():
                    with contextlib.suppress(OSError):
                        sub.rmdir()
            with contextlib.suppress(OSError):
                root.rmdir()
            if root.is_dir():
                time.sleep(0.2)


def dead_node_bridges(bridges: list[str], command_lines: list[list[str]]) -> list[str]:
    """The real nodes (by bridge name) whose kubelet no longer runs: a node's kubelet is started with
    ``--node-ip=`` its bridge's gateway (``ocpgpu<N>`` -> 10.245.<N>.1), so no such process means the
    run that made it is gone and left it behind."""
    live_ips = {
        arg.removeprefix("--node-ip=")
        for line in command_lines
        for arg in line
        if arg.startswith("--node-ip=")
    }
    dead = []
    for bridge in bridges:
        suffix = bridge.removeprefix(BRIDGE_PREFIX)
        if bridge.startswith(BRIDGE_PREFIX) and suffix.isdigit() and f"10.245.{suffix}.1" not in live_ips:
            dead.append(bridge)
    return dead


def sweep_dead_nodes() -> list[str]:
    """Remove what killed runs left of their real nodes (processes, bridges, cgroups); returns their names."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    names = {w.rstrip(":").split("@")[0] for w in links.split() if w.startswith(BRIDGE_PREFIX)}
    for hierarchy in _cgroup_hierarchies():
        names.update(p.name for p in hierarchy.iterdir() if p.is_dir() and p.name.startswith(BRIDGE_PREFIX))
    # A node starting beside us (another xdist worker) makes its cgroups and bridge just before its
    # kubelet: anything made in the last minute is left alone.
    young = {
        name for name in names for root in _cgroup_roots(name) if time.time() - root.stat().st_mtime < 60
    }
    command_lines = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                command_lines.append(
                    [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0")]
                )
    dead = dead_node_bridges(sorted(names - young), command_lines)
    for bridge in dead:
        _remove_node_network_and_cgroups(bridge)
    return dead


def _free_port() -> int:
    from ocp_gpu_harness.cluster import _free_port as free

    return free()


def _netns_names() -> list[str]:
    directory = Path("/var/run/netns")
    return [p.name for p in directory.iterdir() if p.name.startswith("cni-")] if directory.is_dir() else []


def _pids_with_argument(argument: str) -> list[int]:
    """Processes whose command line holds ``argument`` (this node's containerd shims name its socket)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if argument.encode() in (proc / "cmdline").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
    return pids


def _mounts_under(directory: Path) -> list[str]:
    """Mount points under ``directory``, deepest first."""
    prefix = str(directory.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)
