"""`ocp-gpu validate driver|toolkit|cuda|plugin` (and the sandbox validator's vfio-pci|vgpu-manager|vgpu-devices): check one step of a node's GPU stack, leave its marker.

Runs in the validator DaemonSet's (init) containers on each GPU node, in stack order.
Each validation first removes its marker and every later one in the validations
directory (`--validations-dir`, /run/nvidia/validations), checks, and on success
writes its marker; the next operands' init containers wait for those files:

| validation | checks | marker |
|---|---|---|
| driver | `nvidia-smi` of a driver installed on the host (its / mounted at `--host-root`, /host), else of the driver container's root (`--driver-root`, /run/nvidia/driver), runs and exits 0 | driver-ready |
| toolkit | `nvidia-smi` found on PATH runs: the NVIDIA runtime injected the driver's utilities into this container (run it with the toolkit's RuntimeClass and NVIDIA_VISIBLE_DEVICES=all); with `$CDI_ENABLED=true`, also the toolkit's management CDI spec (`/var/run/cdi/management.nvidia.com-gpu.yaml` on the host) declares device `all` and every hook it runs (nvidia-cdi-hook under the toolkit's install dir) is on the host | toolkit-ready |
| cuda | a vectorAdd pod (image `$CUDA_VALIDATION_IMAGE`) placed on this node (`$NODE_NAME`) runs to completion; it asks for every GPU through the runtime (NVIDIA_VISIBLE_DEVICES=all) and, for the toolkit's NRI plugin, by annotation (`nvidia.cdi.k8s.io/container.cuda-validation`, as NVIDIA's) | cuda-ready |
| vfio-pci (the sandbox validator's) | writes the node's workload (its nvidia.com/gpu.workload.config, else `$DEFAULT_GPU_WORKLOAD_CONFIG`) to `workload-type`; on vm-passthrough, every NVIDIA GPU under the host's /sys/bus/pci/devices is bound to vfio-pci or nvgrace_gpu_vfio_pci | vfio-pci-ready |
| vgpu-manager (the sandbox validator's) | writes `workload-type` as vfio-pci does; on vm-vgpu, nvidia-smi of the vGPU manager (on the host, else under `--driver-root`) runs, and its parent devices are there: every SR-IOV VF of the NVIDIA GPUs enabled, or (no SR-IOV) a mediated-device parent under the host's /sys/class/mdev_bus | vgpu-manager-ready (host-vgpu-manager-ready for one on the host) |
| vgpu-devices (the sandbox validator's) | writes `workload-type`; on vm-vgpu, the host has vGPU devices (/sys/bus/mdev/devices) | vgpu-devices-ready |
| plugin | the node advertises a GPU resource (nvidia.com/gpu, a MIG or a renamed one; `--resource` to name it), and a pod requesting one is scheduled on this node and starts; with `$CDI_ENABLED=true` (the plugin's CDI strategies), first the plugin's CDI spec (`/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json` on the host) declares a device | plugin-ready |

A failure says what failed and what to check, in the log and in the container's
termination message (`--termination-log`, /dev/termination-log, which `kubectl
describe pod` shows), removes the markers, and exits 1.  `--retry-for S` retries a
failing check for up to S seconds (every `--interval` s) before giving up, as an
init container waiting for its step should; `--timeout` bounds one attempt
(nvidia-smi: 30 s; a workload pod: 300 s).

The workload pods (cuda, plugin) are named per node (`nvidia-cuda-validator-<hash>`,
`nvidia-device-plugin-validator-<hash>`, annotation nvidia.com/validation-node), in
`$OPERATOR_NAMESPACE`; a leftover from an earlier run is deleted first, and the pod
is deleted when the check ends either way (the plugin workload holds a GPU).  With
`$POD_NAME` set (downward API), the validator's own pod owns them, so they go with it.
Image settings: `$VALIDATOR_IMAGE_PULL_POLICY`, `$VALIDATOR_IMAGE_PULL_SECRETS`
(comma-separated), `$VALIDATOR_RUNTIME_CLASS` (default nvidia).  The validator needs
get/create/delete on pods in its namespace and get on nodes.

Exit status: 0 valid (marker written); 1 not valid (markers removed, termination
message written); 2 a bad command line.
"""  # noqa: E501

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from ocp_gpu.kube import clients, requesting, validating
from ocp_gpu.model import labels
from ocp_gpu.planning.operands import validation
from ocp_gpu.planning.operands.validation import Component, Verdict
from ocp_gpu.rendering import validation_workloads

DEFAULT_VALIDATIONS_DIR: Final = "/run/nvidia/validations"
# The sandbox validator's check (validate_vfio_pci), apart from the container stack's Components.
VFIO_PCI: Final = "vfio-pci"
DEFAULT_TERMINATION_LOG: Final = "/dev/termination-log"
DEFAULT_DRIVER_ROOT: Final = "/run/nvidia/driver"
DEFAULT_HOST_ROOT: Final = "/host"
DEFAULT_NAMESPACE: Final = "nvidia-gpu-operator"
# NVIDIA's CUDA vectorAdd sample: adds two vectors on the GPU and checks the result.
DEFAULT_CUDA_VALIDATION_IMAGE: Final = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
DEFAULT_RUNTIME_CLASS: Final = "nvidia"
# Where a driver root keeps nvidia-smi (NVIDIA's driver images: usr/bin).
NVIDIA_SMI_DIRS: Final = ("usr/bin", "usr/sbin", "bin", "sbin", "usr/local/bin")
# Where it keeps libnvidia-ml, which nvidia-smi loads.
NVML_DIRS: Final = ("usr/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib", "lib64")
NVML: Final = "libnvidia-ml.so.1"
# Where CDI specs are on the host (the toolkit's --cdi-output-dir, the plugin's cdiRoot), and
# the two this validator reads: the toolkit's for management containers (its --cdi-kind, as the
# CDI library names a spec file: <vendor>-<class>.yaml) and the device plugin's (its vendor,
# k8s.device-plugin.nvidia.com, written as JSON).  NVIDIA/nvidia-container-toolkit@v1.20.0
# cmd/nvidia-ctk-installer/toolkit/toolkit.go; NVIDIA/k8s-device-plugin@v0.20.0 internal/cdi.
CDI_SPEC_DIR: Final = "var/run/cdi"
MANAGEMENT_CDI_KIND: Final = "management.nvidia.com/gpu"
MANAGEMENT_CDI_SPEC: Final = "management.nvidia.com-gpu.yaml"
PLUGIN_CDI_KIND: Final = "k8s.device-plugin.nvidia.com/gpu"
PLUGIN_CDI_SPEC: Final = "k8s.device-plugin.nvidia.com-gpu.json"
# Kubernetes keeps at most this much of a termination message.
TERMINATION_MESSAGE_LIMIT: Final = 4096
# How often a workload pod is looked at.
POLL_SECONDS: Final = 1.0

log = logging.getLogger("ocp_gpu.validate")


class ValidationFailed(Exception):
    """The check failed; the message says what failed and what to check."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "component",
        choices=[*(component.value for component in Component), VFIO_PCI, "vgpu-manager", "vgpu-devices"],
    )
    parser.add_argument("--validations-dir", type=Path, default=Path(DEFAULT_VALIDATIONS_DIR))
    parser.add_argument("--termination-log", type=Path, default=Path(DEFAULT_TERMINATION_LOG))
    parser.add_argument(
        "--driver-root",
        type=Path,
        default=Path(DEFAULT_DRIVER_ROOT),
        help="driver: where its root is mounted",
    )
    parser.add_argument(
        "--host-root",
        type=Path,
        default=Path(DEFAULT_HOST_ROOT),
        help="driver, and CDI specs (toolkit, plugin): where the host's / is mounted",
    )
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="toolkit: the command the runtime injects")
    parser.add_argument("--timeout", type=float, default=None, help="seconds one attempt may take")
    parser.add_argument(
        "--retry-for", type=float, default=0.0, help="keep retrying a failing check this long"
    )
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between attempts")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="cuda, plugin: default in-cluster")
    parser.add_argument("--node-name", default=None, help="cuda, plugin: default $NODE_NAME")
    parser.add_argument("--namespace", default=None, help="cuda, plugin: default $OPERATOR_NAMESPACE")
    parser.add_argument("--image", default=None, help="cuda, plugin: default $CUDA_VALIDATION_IMAGE")
    parser.add_argument("--resource", default="", help="plugin: the resource to request (default: found)")
    parser.add_argument(
        "--workload-annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="cuda, plugin: an annotation for the workload pod (repeatable)",
    )


# --- markers and the termination message ------------------------------------------------


def clear_markers(directory: Path, component: Component) -> None:
    """Remove the component's marker and every later one."""
    for marker in validation.markers_to_clear(component):
        (directory / marker).unlink(missing_ok=True)


def write_marker(directory: Path, component: Component, content: str = "") -> None:
    """Write the marker atomically: a reader never sees a half-written file."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / validation.MARKERS[component]
    partial = directory / f".{final.name}.tmp"
    partial.write_text(content)
    partial.replace(final)


def write_termination_message(path: Path, message: str) -> None:
    try:
        path.write_text(message.encode()[:TERMINATION_MESSAGE_LIMIT].decode(errors="ignore"))
    except OSError as error:
        # Not in a container (or no such file): the log carries the message anyway.
        log.warning("could not write the termination message to %s: %s", path, error)


# --- driver and toolkit: nvidia-smi ---------------------------------------------------------


def _in_root(root: Path, relative: str) -> Path | None:
    """`relative` inside `root`, following symlinks as if `root` were / (absolute links re-rooted)."""
    path = root / relative
    for _ in range(16):
        if not path.is_symlink():
            return path if path.exists() else None
        target = Path(os.readlink(path))
        path = root / target.relative_to("/") if target.is_absolute() else path.parent / target
    return None


def find_nvidia_smi(root: Path) -> Path | None:
    """nvidia-smi in a driver root, or None."""
    for directory in NVIDIA_SMI_DIRS:
        found = _in_root(root, f"{directory}/nvidia-smi")
        if found is not None:
            return found
    return None


def _nvml_env(root: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The environment for the root's nvidia-smi: its libnvidia-ml preloaded when found (as NVIDIA's does)."""
    result = dict(env)
    for directory in NVML_DIRS:
        library = _in_root(root, f"{directory}/{NVML}")
        if library is not None:
            result["LD_PRELOAD"] = ":".join(filter(None, [str(library), env.get("LD_PRELOAD", "")]))
            break
    return result


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def run_nvidia_smi(binary: Path | str, env: Mapping[str, str], timeout: float, what: str, check: str) -> str:
    """Run nvidia-smi; its first line on success, else ValidationFailed naming `what` and `check`."""
    try:
        done = subprocess.run(
            [str(binary)], env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise ValidationFailed(
            f"{what} did not finish within {timeout:.0f}s: the driver may still be loading or a GPU may "
            f"hang; {check}"
        ) from None
    except OSError as error:
        raise ValidationFailed(f"{what} could not be run ({error.strerror or error}); {check}") from None
    if done.returncode != 0:
        output = _tail(done.stderr) or _tail(done.stdout) or "no output"
        raise ValidationFailed(f"{what} exited {done.returncode}: {output}; {check}")
    return (done.stdout.strip().splitlines() or [""])[0]


def validate_driver(host_root: Path, root: Path, timeout: float, env: Mapping[str, str]) -> str:
    """nvidia-smi of the driver runs: the kernel modules are loaded and see the GPUs.

    As NVIDIA's validator: a driver preinstalled on the host first (the host's / at
    `host_root`), then the operator's driver container's root.
    """
    check = (
        "check the driver pod on this node "
        "(kubectl get pods -l app.kubernetes.io/component=nvidia-driver -o wide, "
        f"then its log) and that its root is mounted at {root}"
    )
    failures: list[str] = []
    for where, base, is_host in (("on the host", host_root, True), ("in the driver root", root, False)):
        binary = find_nvidia_smi(base)
        if binary is None:
            continue
        try:
            first = run_nvidia_smi(binary, _nvml_env(base, env), timeout, f"{binary} ({where})", check)
        except ValidationFailed as failure:
            # NB: a broken host install must not hide a working driver container (and vice versa).
            failures.append(str(failure))
            continue
        log.info("driver: %s ran: %s", binary, first)
        return f"IS_HOST_DRIVER={str(is_host).lower()}\nNVIDIA_DRIVER_ROOT={base}\n"
    if failures:
        raise ValidationFailed(" and ".join(failures))
    raise ValidationFailed(
        f"no nvidia-smi on the host ({host_root}) nor under the driver root {root} (looked in "
        f"{', '.join(NVIDIA_SMI_DIRS)}): no driver is installed yet; {check}"
    )


def _cdi_enabled(env: Mapping[str, str]) -> bool:
    return env.get("CDI_ENABLED", "").lower() == "true"


def read_cdi_spec(host_root: Path, name: str, kind: str, check: str) -> Mapping[str, Any]:
    """The CDI spec file `name` in the host's CDI directory, of `kind` and declaring a device."""
    path = host_root / CDI_SPEC_DIR / name
    if not path.is_file():
        raise ValidationFailed(f"no CDI spec /{CDI_SPEC_DIR}/{name} on the host ({path} here); {check}")
    try:
        # NB: JSON is YAML: one parser reads both spec formats.
        spec = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ValidationFailed(f"the CDI spec {path} cannot be read: {error}; {check}") from None
    if not isinstance(spec, Mapping) or spec.get("kind") != kind:
        found = spec.get("kind") if isinstance(spec, Mapping) else type(spec).__name__
        raise ValidationFailed(f"the CDI spec {path} is of kind {found!r}, not {kind!r}; {check}")
    devices = [d for d in spec.get("devices") or () if isinstance(d, Mapping) and d.get("name")]
    if not devices:
        raise ValidationFailed(f"the CDI spec {path} declares no device; {check}")
    return spec


def _hook_paths(spec: Mapping[str, Any]) -> list[str]:
    """Every hook program a CDI spec runs (its own edits' and each device's)."""
    edits = [spec.get("containerEdits") or {}]
    edits += [(d.get("containerEdits") or {}) for d in spec.get("devices") or () if isinstance(d, Mapping)]
    return sorted(
        {
            str(h["path"])
            for e in edits
            for h in e.get("hooks") or ()
            if isinstance(h, Mapping) and h.get("path")
        }
    )


def validate_management_cdi_spec(host_root: Path) -> None:
    """CDI mode: the toolkit's management spec declares `all` and its hooks are on the host."""
    check = (
        "check the container-toolkit pod on this node (kubectl get pods -l "
        "app=nvidia-container-toolkit-daemonset -o wide, then its log: it generates the spec with "
        "CDI_ENABLED=true) and that it mounts the host's /var/run/cdi"
    )
    spec = read_cdi_spec(host_root, MANAGEMENT_CDI_SPEC, MANAGEMENT_CDI_KIND, check)
    names = {str(d.get("name")) for d in spec.get("devices") or () if isinstance(d, Mapping)}
    if "all" not in names:
        raise ValidationFailed(
            f"the CDI spec /{CDI_SPEC_DIR}/{MANAGEMENT_CDI_SPEC} has no device 'all' (it has "
            f"{', '.join(sorted(names))}): operand pods ask for {MANAGEMENT_CDI_KIND}=all; {check}"
        )
    for hook in _hook_paths(spec):
        found = _in_root(host_root, hook.lstrip("/"))
        if found is None or not os.access(found, os.X_OK):
            raise ValidationFailed(
                f"the CDI spec /{CDI_SPEC_DIR}/{MANAGEMENT_CDI_SPEC} runs {hook}, which is not an "
                f"executable on the host: the runtime would fail every GPU container; check "
                f"spec.toolkit.installDir and the container-toolkit pod's log"
            )


def validate_plugin_cdi_spec(host_root: Path) -> None:
    """CDI strategies: the device plugin wrote its spec for the devices it hands out."""
    read_cdi_spec(
        host_root,
        PLUGIN_CDI_SPEC,
        PLUGIN_CDI_KIND,
        "check the device plugin pod on this node (kubectl get pods -l app=nvidia-device-plugin-daemonset "
        "-o wide, then its log) and that it mounts the host's /var/run/cdi",
    )


def validate_toolkit(
    command: str, timeout: float, env: Mapping[str, str], host_root: Path | None = None
) -> str:
    """nvidia-smi is in this container and runs: the NVIDIA runtime injected the driver into it.

    With CDI_ENABLED=true the toolkit's management CDI spec is checked first: without it the
    `nvidia` runtime in CDI mode injects nothing.
    """
    if _cdi_enabled(env):
        validate_management_cdi_spec(host_root or Path(DEFAULT_HOST_ROOT))
    check = (
        "check the container-toolkit pod on this node (kubectl get pods -l "
        "app=nvidia-container-toolkit-daemonset -o wide, then its log), that the RuntimeClass "
        "this pod runs with has the nvidia handler, and that NVIDIA_VISIBLE_DEVICES=all is set"
    )
    binary = shutil.which(command, path=env.get("PATH", os.defpath))
    if binary is None:
        raise ValidationFailed(
            f"{command} is not in this container (PATH={env.get('PATH', '')}): the NVIDIA runtime did not "
            f"inject the driver's utilities; {check}"
        )
    first = run_nvidia_smi(binary, env, timeout, f"{binary} (injected by the runtime)", check)
    log.info("toolkit: %s ran: %s", binary, first)
    return ""


# --- cuda and plugin: workload pods ---------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkloadSettings:
    node: str
    namespace: str
    image: str
    pull_policy: str
    pull_secrets: tuple[str, ...]
    runtime_class: str
    annotations: Mapping[str, str]
    own_pod: str  # "" when not run in a pod (no owner for the workload)
    resource: str  # plugin: the resource to request, "" to find one


def workload_settings(args: argparse.Namespace, env: Mapping[str, str]) -> WorkloadSettings:
    node = args.node_name or env.get("NODE_NAME", "")
    if not node:
        raise ValidationFailed(
            "no node name: set NODE_NAME from the downward API (fieldRef spec.nodeName) or pass --node-name"
        )
    annotations: dict[str, str] = {}
    for item in args.workload_annotation:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValidationFailed(f"--workload-annotation {item!r} is not KEY=VALUE")
        annotations[key] = value
    secrets = tuple(s.strip() for s in env.get("VALIDATOR_IMAGE_PULL_SECRETS", "").split(",") if s.strip())
    return WorkloadSettings(
        node=node,
        namespace=args.namespace or env.get("OPERATOR_NAMESPACE") or DEFAULT_NAMESPACE,
        image=args.image or env.get("CUDA_VALIDATION_IMAGE") or DEFAULT_CUDA_VALIDATION_IMAGE,
        pull_policy=env.get("VALIDATOR_IMAGE_PULL_POLICY") or "IfNotPresent",
        pull_secrets=secrets,
        runtime_class=env.get("VALIDATOR_RUNTIME_CLASS", DEFAULT_RUNTIME_CLASS),
        annotations=annotations,
        own_pod=env.get("POD_NAME", ""),
        resource=args.resource,
    )


def _rbac_hint(settings: WorkloadSettings) -> str:
    return (
        f"check the validator's RBAC (get, create, delete pods in {settings.namespace}; get nodes) "
        "and that the API server is reachable"
    )


def wait_for_gpu_resource(api_client: Any, settings: WorkloadSettings, timeout: float) -> str:
    """The GPU resource the node advertises (waiting up to `timeout` for the device plugin)."""
    deadline = time.monotonic() + timeout
    while True:
        allocatable = validating.read_node_allocatable(api_client, settings.node)
        resource = validation.select_gpu_resource(allocatable, settings.resource)
        if resource is not None:
            return resource
        if time.monotonic() >= deadline:
            wanted = settings.resource or "no nvidia.com/ resource"
            raise ValidationFailed(
                f"node {settings.node} advertises {wanted} after {timeout:.0f}s "
                f"(allocatable: {', '.join(f'{k}={v}' for k, v in sorted(allocatable.items()))}); "
                "check that the device plugin pod on this node is Running (kubectl get pods -l "
                "app=nvidia-device-plugin-daemonset -o wide) and its log"
            )
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def run_workload(
    api_client: Any,
    component: Component,
    settings: WorkloadSettings,
    timeout: float,
    judge: Callable[[Mapping[str, Any]], Verdict],
    resource: str = "",
) -> str:
    """Create the workload pod on the node, wait for `judge` to pass it, delete it; the verdict."""
    owner = (
        validating.read_pod_owner(api_client, settings.namespace, settings.own_pod)
        if settings.own_pod
        else None
    )
    manifest = validation_workloads.render_workload_pod(
        validation_workloads.WorkloadInputs(
            component=component,
            node=settings.node,
            namespace=settings.namespace,
            image=settings.image,
            pull_policy=settings.pull_policy,
            pull_secrets=settings.pull_secrets,
            runtime_class=settings.runtime_class,
            resource=resource,
            owner_pod=owner,
            annotations=settings.annotations,
        )
    )
    name = manifest["metadata"]["name"]
    # A pod left by an earlier run (the validator restarted) would answer for this one.
    validating.delete_pod(api_client, settings.namespace, name, wait=60)
    validating.create_pod(api_client, manifest)
    log.info("%s: created pod %s/%s for node %s", component, settings.namespace, name, settings.node)
    try:
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            pod = validating.read_pod(api_client, settings.namespace, name)
            if pod is None:
                raise ValidationFailed(
                    f"{component} workload pod {settings.namespace}/{name} was deleted while running"
                )
            verdict = judge(pod)
            if verdict.done and verdict.passed:
                return verdict.message
            if verdict.done:
                raise ValidationFailed(verdict.message)
            if verdict.message != last:
                log.info("%s", verdict.message)
                last = verdict.message
            if time.monotonic() >= deadline:
                raise ValidationFailed(f"gave up after {timeout:.0f}s: {verdict.message}")
            time.sleep(POLL_SECONDS)
    finally:
        # Either way: a finished pod is clutter, a running plugin workload holds a GPU.
        try:
            validating.delete_pod(api_client, settings.namespace, name)
        except requesting.ApiException as error:
            log.warning("could not delete pod %s/%s: %s", settings.namespace, name, error.reason)


def validate_workload(
    component: Component, args: argparse.Namespace, env: Mapping[str, str], timeout: float
) -> str:
    settings = workload_settings(args, env)
    api_client = clients.load_api_client(args.kubeconfig)
    try:
        if component is Component.CUDA:
            message = run_workload(api_client, component, settings, timeout, validation.judge_cuda_pod)
        elif (
            skip := validation.plugin_not_on_node(validating.read_node_labels(api_client, settings.node))
        ) is not None:
            message = f"plugin validation not needed: {skip}"
        else:
            if _cdi_enabled(env):
                validate_plugin_cdi_spec(args.host_root)
            resource = wait_for_gpu_resource(api_client, settings, timeout)
            message = run_workload(
                api_client, component, settings, timeout, validation.judge_plugin_pod, resource=resource
            )
    except requesting.ApiException as error:
        described = requesting.describe_error(error)
        hint = _rbac_hint(settings)
        if "RuntimeClass" in described:
            # Admission refused the workload pod: the runtime it asks for is not there.
            hint = (
                f"create the RuntimeClass {settings.runtime_class!r} (the operator does, from "
                "spec.operator.runtimeClass) or set VALIDATOR_RUNTIME_CLASS to an existing one"
            )
        raise ValidationFailed(f"{component} validation: the API refused: {described}; {hint}") from None
    except TimeoutError as error:
        raise ValidationFailed(f"{component} validation: {error}; {_rbac_hint(settings)}") from None
    finally:
        api_client.close()
    log.info("%s: %s", component, message)
    return ""


# --- the command ---------------------------------------------------------------------------


def check(component: Component, args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """One attempt at the component's check; the marker's content, or ValidationFailed."""
    if component is Component.DRIVER:
        return validate_driver(args.host_root, args.driver_root, args.timeout or 30.0, env)
    if component is Component.TOOLKIT:
        return validate_toolkit(args.nvidia_smi, args.timeout or 30.0, env, args.host_root)
    return validate_workload(component, args, env, args.timeout or 300.0)


def validate(component: Component, args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Validate, retrying for `--retry-for`; write or remove the markers; the exit status."""
    directory: Path = args.validations_dir
    clear_markers(directory, component)
    give_up = time.monotonic() + args.retry_for
    while True:
        try:
            content = check(component, args, env)
            break
        except ValidationFailed as failure:
            message = f"{component} validation failed: {failure}"
            if time.monotonic() + args.interval > give_up:
                clear_markers(directory, component)
                log.error("%s", message)
                write_termination_message(args.termination_log, message)
                return 1
            log.warning("%s (retrying in %.0fs)", message, args.interval)
            time.sleep(args.interval)
    write_marker(directory, component, content)
    log.info("%s is valid: wrote %s", component, directory / validation.MARKERS[component])
    return 0


def main(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    # The sandbox validator's: not steps of the container stack's marker chain.
    sandbox = {
        VFIO_PCI: validate_vfio_pci,
        VGPU_MANAGER: validate_vgpu_manager,
        VGPU_DEVICES: validate_vgpu_devices,
    }
    if args.component in sandbox:
        return sandbox[args.component](args, os.environ if env is None else env)
    return validate(Component(args.component), args, os.environ if env is None else env)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments as `ocp-gpu validate` parses them (for tests and callers in Python)."""
    parser = argparse.ArgumentParser(prog="ocp-gpu validate")
    add_arguments(parser)
    return parser.parse_args(list(argv))


# --- vfio-pci (the sandbox validator) ------------------------------------------------------

# NVIDIA's markers of the sandbox validation (cmd/nvidia-validator at v26.7.0).
WORKLOAD_TYPE_MARKER: Final = "workload-type"
VFIO_PCI_MARKER: Final = "vfio-pci-ready"
# The drivers a passed-through NVIDIA GPU may be bound to (NVIDIA's VfioPCI.runValidation).
VFIO_DRIVERS: Final = frozenset({"vfio-pci", "nvgrace_gpu_vfio_pci"})
NVIDIA_VENDOR: Final = "0x10de"
# PCI display classes of a GPU (VGA, 3D controller), as go-nvlib's GetGPUs picks them.
GPU_CLASSES: Final = ("0x0300", "0x0302")


def gpus_not_on_vfio(host_root: Path) -> list[str]:
    """The NVIDIA GPUs (by PCI address, with their driver) not bound to a VFIO driver."""
    wrong: list[str] = []
    devices = host_root / "sys/bus/pci/devices"
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        try:
            vendor = (device / "vendor").read_text().strip()
            pci_class = (device / "class").read_text().strip()
        except OSError:
            continue
        if vendor != NVIDIA_VENDOR or not pci_class.startswith(GPU_CLASSES):
            continue
        driver_link = device / "driver"
        driver = driver_link.resolve().name if driver_link.is_symlink() else ""
        if driver not in VFIO_DRIVERS:
            wrong.append(f"{device.name} (driver {driver or 'none'!r})")
    return wrong


def node_workload(args: argparse.Namespace, env: Mapping[str, str], check: str) -> str | None:
    """The node's workload (its nvidia.com/gpu.workload.config, else $DEFAULT_GPU_WORKLOAD_CONFIG),
    written to the workload-type marker (NVIDIA's getWorkloadConfig); None when the node cannot be
    read (the termination message says why)."""
    directory: Path = args.validations_dir
    node = args.node_name or env.get("NODE_NAME", "")
    api_client = clients.load_api_client(args.kubeconfig)
    try:
        node_labels = validating.read_node_labels(api_client, node)
    except requesting.ApiException as error:
        message = f"{check} validation: could not read node {node}: {requesting.describe_error(error)}"
        log.error("%s", message)
        write_termination_message(args.termination_log, message)
        return None
    finally:
        api_client.close()
    # NVIDIA's validator's variable for the policy's sandboxWorkloads.defaultWorkload.
    default = env.get("DEFAULT_GPU_WORKLOAD_CONFIG", "container")
    workload = node_labels.get(labels.GPU_WORKLOAD_CONFIG) or default
    directory.mkdir(parents=True, exist_ok=True)
    (directory / WORKLOAD_TYPE_MARKER).write_text(workload + "\n")
    return workload


def _retry(args: argparse.Namespace, attempt: Callable[[], str | None], name: str) -> bool:
    """Run `attempt` (None: valid, else what is wrong) until it passes or `--retry-for` runs out;
    the last failure goes to the log and the termination message."""
    give_up = time.monotonic() + args.retry_for
    while (wrong := attempt()) is not None:
        if time.monotonic() + args.interval > give_up:
            log.error("%s", wrong)
            write_termination_message(args.termination_log, wrong)
            return False
        log.warning("%s (retrying in %.0fs)", wrong, args.interval)
        time.sleep(args.interval)
    log.info("%s is valid", name)
    return True


def validate_vfio_pci(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`ocp-gpu validate vfio-pci`: write the node's workload, and on vm-passthrough check that every
    NVIDIA GPU is bound to vfio-pci (NVIDIA's VfioPCI.validate); the exit status."""
    directory: Path = args.validations_dir
    node = args.node_name or env.get("NODE_NAME", "")
    workload = node_workload(args, env, VFIO_PCI)
    if workload is None:
        return 1
    if workload != "vm-passthrough":
        log.info("vfio-pci not required on node %s (workload %s): skipping", node, workload)
        return 0
    (directory / VFIO_PCI_MARKER).unlink(missing_ok=True)

    def attempt() -> str | None:
        wrong = gpus_not_on_vfio(args.host_root)
        return (
            f"vfio-pci validation failed: GPUs not bound to vfio-pci: {', '.join(wrong)}; check the "
            f"nvidia-vfio-manager pod on node {node} (its logs: vfio-manage bind --all)"
            if wrong
            else None
        )

    if not _retry(args, attempt, VFIO_PCI):
        return 1
    (directory / VFIO_PCI_MARKER).write_text("")
    log.info("every NVIDIA GPU is bound to VFIO; wrote %s", directory / VFIO_PCI_MARKER)
    return 0


# --- vgpu-manager and vgpu-devices (the sandbox validator on vm-vgpu nodes) -----------------------

VGPU_MANAGER: Final = "vgpu-manager"
VGPU_DEVICES: Final = "vgpu-devices"
# NVIDIA's markers (cmd/nvidia-validator at v26.7.0): the vGPU manager's container, or one on the host.
VGPU_MANAGER_MARKER: Final = "vgpu-manager-ready"
HOST_VGPU_MANAGER_MARKER: Final = "host-vgpu-manager-ready"
VGPU_DEVICES_MARKER: Final = "vgpu-devices-ready"


def vgpu_parents_missing(host_root: Path) -> str | None:
    """Why the vGPU manager's parent devices are not there yet; None when they are (NVIDIA's
    waitForParentDevices): with SR-IOV (an NVIDIA PF with VFs enabled) every PF has all its VFs,
    else some mediated-device parent is registered (/sys/class/mdev_bus)."""
    pfs: list[tuple[str, int, int]] = []
    devices = host_root / "sys/bus/pci/devices"
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        try:
            if (device / "vendor").read_text().strip() != NVIDIA_VENDOR:
                continue
            total = int((device / "sriov_totalvfs").read_text().strip() or 0)
            enabled = int((device / "sriov_numvfs").read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if total > 0:
            pfs.append((device.name, enabled, total))
    if any(enabled > 0 for _, enabled, _ in pfs):
        short = [f"{name} ({enabled}/{total})" for name, enabled, total in pfs if enabled != total]
        return f"not every SR-IOV VF is enabled yet: {', '.join(short)}" if short else None
    parents = host_root / "sys/class/mdev_bus"
    if parents.is_dir() and any(parents.iterdir()):
        return None
    return f"no mediated-device parent is registered ({parents} is empty) and no SR-IOV VF is enabled"


def vgpu_devices(host_root: Path) -> list[str]:
    """The vGPU (mediated) devices on the host (/sys/bus/mdev/devices, as NVIDIA's nvmdev reads them)."""
    devices = host_root / "sys/bus/mdev/devices"
    return sorted(entry.name for entry in devices.iterdir()) if devices.is_dir() else []


def validate_vgpu_manager(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`ocp-gpu validate vgpu-manager`: write the node's workload, and on vm-vgpu check that the vGPU
    manager runs (nvidia-smi of the host's, else of the vGPU manager container's root) and its parent
    devices are there (NVIDIA's VGPUManager.validate); marker vgpu-manager-ready, or
    host-vgpu-manager-ready for a vGPU manager on the host."""
    directory: Path = args.validations_dir
    node = args.node_name or env.get("NODE_NAME", "")
    workload = node_workload(args, env, VGPU_MANAGER)
    if workload is None:
        return 1
    if workload != "vm-vgpu":
        log.info("vGPU manager not required on node %s (workload %s): skipping", node, workload)
        return 0
    for marker in (VGPU_MANAGER_MARKER, HOST_VGPU_MANAGER_MARKER):
        (directory / marker).unlink(missing_ok=True)
    found: list[str] = []

    def attempt() -> str | None:
        try:
            found[:] = [validate_driver(args.host_root, args.driver_root, args.timeout or 30.0, env)]
        except ValidationFailed as failure:
            return (
                f"vgpu-manager validation failed: {failure} (the vGPU manager: "
                "kubectl get pods -l app.kubernetes.io/component=nvidia-vgpu-manager -o wide)"
            )
        missing = vgpu_parents_missing(args.host_root)
        return f"vgpu-manager validation failed on node {node}: {missing}" if missing else None

    if not _retry(args, attempt, VGPU_MANAGER):
        return 1
    marker = HOST_VGPU_MANAGER_MARKER if "IS_HOST_DRIVER=true" in found[0] else VGPU_MANAGER_MARKER
    (directory / marker).write_text("")
    log.info("the vGPU manager runs; wrote %s", directory / marker)
    return 0


def validate_vgpu_devices(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`ocp-gpu validate vgpu-devices`: write the node's workload, and on vm-vgpu check that vGPU devices
    exist (NVIDIA's VGPUDevices.validate); marker vgpu-devices-ready."""
    directory: Path = args.validations_dir
    node = args.node_name or env.get("NODE_NAME", "")
    workload = node_workload(args, env, VGPU_DEVICES)
    if workload is None:
        return 1
    if workload != "vm-vgpu":
        log.info("vGPU devices not required on node %s (workload %s): skipping", node, workload)
        return 0
    (directory / VGPU_DEVICES_MARKER).unlink(missing_ok=True)

    def attempt() -> str | None:
        if vgpu_devices(args.host_root):
            return None
        return (
            f"vgpu-devices validation failed: no vGPU devices on node {node} "
            f"({args.host_root}/sys/bus/mdev/devices is empty); check the nvidia-vgpu-device-manager pod "
            f"there and the node's {labels.VGPU_CONFIG_STATE} label"
        )

    if not _retry(args, attempt, VGPU_DEVICES):
        return 1
    (directory / VGPU_DEVICES_MARKER).write_text("")
    log.info(
        "found %d vGPU devices; wrote %s", len(vgpu_devices(args.host_root)), directory / VGPU_DEVICES_MARKER
    )
    return 0
