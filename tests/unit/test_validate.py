"""We test these aspects of `ocp-gpu validate` without a cluster (cuda and plugin run
end to end in tests/e2e/test_validate.py):

- driver: against a fake driver root whose `usr/bin/nvidia-smi` is a shell script:
  success, missing binary, non-zero exit, hang (timeout), not executable, an absolute
  symlink inside the root, libnvidia-ml preloaded from the root;
- toolkit: `nvidia-smi` found on PATH (as the runtime injects it) or not; in CDI mode
  (CDI_ENABLED=true) the toolkit's management CDI spec under a fake host root: present,
  of its kind, with device `all`, its hooks executable on the host; each failure named;
- plugin in CDI mode: the device plugin's CDI spec under the fake host root;
- markers: success writes the component's marker (atomically, with content for the
  driver); a failure removes its marker and every later one, keeps earlier ones, writes
  the termination message (what failed, what to check) and exits 1;
- retrying: a check that fails first and then passes, within --retry-for;
- the pure parts: markers_to_clear, the workload pods' verdicts (completed, failed,
  unschedulable, stuck pulling), GPU resource choice, per-node pod names;
- the workload pod manifests (cuda placed by name, plugin through the scheduler), and
  that no annotation value can change their structure;
- the command line: `ocp-gpu validate ...` is wired and exits 0/1/2.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu import cli
from ocp_gpu.commands import validate
from ocp_gpu.planning.operands import validation
from ocp_gpu.planning.operands.validation import Component
from ocp_gpu.rendering import validation_workloads

ALL_MARKERS = ("driver-ready", "toolkit-ready", "cuda-ready", "plugin-ready")

SMI_OK = 'echo "NVIDIA-SMI 550.90.07   Driver Version: 550.90.07   CUDA Version: 12.4"\n'
SMI_NO_DRIVER = (
    'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\nexit 9\n'
)
SMI_HANGS = "sleep 30\n"


def _script(path: Path, body: str, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    validations = tmp_path / "validations"
    validations.mkdir()
    for marker in ALL_MARKERS:
        (validations / marker).write_text("old")
    return {
        "root": tmp_path / "driver-root",
        "host": tmp_path / "host",
        "validations": validations,
        "termination": tmp_path / "termination-log",
        "tmp": tmp_path,
    }


def _run(component: str, dirs: dict[str, Path], *extra: str, env: dict[str, str] | None = None) -> int:
    args = validate.parse(
        [
            component,
            "--validations-dir",
            str(dirs["validations"]),
            "--termination-log",
            str(dirs["termination"]),
            "--driver-root",
            str(dirs["root"]),
            "--host-root",
            str(dirs["host"]),
            *extra,
        ]
    )
    return validate.main(args, env if env is not None else {"PATH": os.environ["PATH"]})


def _markers(dirs: dict[str, Path]) -> set[str]:
    return {path.name for path in dirs["validations"].iterdir()}


# --- driver -------------------------------------------------------------------------------


def test_driver_valid_writes_its_marker(dirs: dict[str, Path]) -> None:
    _script(dirs["root"] / "usr/bin/nvidia-smi", SMI_OK)
    assert _run("driver", dirs) == 0
    assert (dirs["validations"] / "driver-ready").read_text() == (
        f"IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT={dirs['root']}\n"
    )
    # Later markers were cleared when the validation started: their steps revalidate.
    assert _markers(dirs) == {"driver-ready"}
    assert not dirs["termination"].exists()


DRIVER_FAILURES = {
    "missing binary": (None, (), "no nvidia-smi on the host"),
    "non-zero exit": (SMI_NO_DRIVER, (), "exited 9: NVIDIA-SMI has failed because it couldn't communicate"),
    "hangs": (SMI_HANGS, ("--timeout", "0.5"), "did not finish within 0s"),
    "not executable": ("not-executable", (), "could not be run (Permission denied)"),
}


@pytest.mark.parametrize(("script", "extra", "message"), DRIVER_FAILURES.values(), ids=DRIVER_FAILURES.keys())
def test_driver_failures_remove_every_marker_and_say_what_to_check(
    dirs: dict[str, Path], script: str | None, extra: tuple[str, ...], message: str
) -> None:
    if script == "not-executable":
        _script(dirs["root"] / "usr/bin/nvidia-smi", SMI_OK, executable=False)
    elif script is not None:
        _script(dirs["root"] / "usr/bin/nvidia-smi", script)
    else:
        (dirs["root"] / "usr/bin").mkdir(parents=True)
    assert _run("driver", dirs, *extra) == 1
    assert _markers(dirs) == set()
    termination = dirs["termination"].read_text()
    assert termination.startswith("driver validation failed: ")
    assert message in termination
    assert "check the driver pod on this node" in termination


def test_a_driver_installed_on_the_host_comes_first(dirs: dict[str, Path]) -> None:
    _script(dirs["host"] / "usr/bin/nvidia-smi", SMI_OK)
    _script(dirs["root"] / "usr/bin/nvidia-smi", SMI_NO_DRIVER)
    assert _run("driver", dirs) == 0
    assert (dirs["validations"] / "driver-ready").read_text().startswith("IS_HOST_DRIVER=true\n")


def test_a_broken_host_install_does_not_hide_the_driver_container(dirs: dict[str, Path]) -> None:
    _script(dirs["host"] / "usr/bin/nvidia-smi", SMI_NO_DRIVER)
    _script(dirs["root"] / "usr/bin/nvidia-smi", SMI_OK)
    assert _run("driver", dirs) == 0
    assert (dirs["validations"] / "driver-ready").read_text().startswith("IS_HOST_DRIVER=false\n")


def test_both_failing_are_both_reported(dirs: dict[str, Path]) -> None:
    _script(dirs["host"] / "usr/bin/nvidia-smi", SMI_NO_DRIVER)
    _script(dirs["root"] / "usr/bin/nvidia-smi", "exit 3\n")
    assert _run("driver", dirs) == 1
    termination = dirs["termination"].read_text()
    assert "(on the host) exited 9" in termination and "(in the driver root) exited 3" in termination


def test_driver_in_an_absolute_symlink_stays_inside_the_root(dirs: dict[str, Path]) -> None:
    """usr/bin/nvidia-smi -> /opt/nvidia/bin/nvidia-smi means the root's /opt, not the validator's."""
    _script(dirs["root"] / "opt/nvidia/bin/nvidia-smi", SMI_OK)
    (dirs["root"] / "usr/bin").mkdir(parents=True)
    (dirs["root"] / "usr/bin/nvidia-smi").symlink_to("/opt/nvidia/bin/nvidia-smi")
    assert _run("driver", dirs) == 0
    assert "driver-ready" in _markers(dirs)


def test_driver_preloads_the_roots_nvml(dirs: dict[str, Path]) -> None:
    seen = dirs["tmp"] / "ld_preload"
    _script(dirs["root"] / "usr/bin/nvidia-smi", f'echo "$LD_PRELOAD" > {seen}\n' + SMI_OK)
    library = dirs["root"] / "usr/lib64" / validate.NVML
    library.parent.mkdir(parents=True)
    library.write_text("")
    assert _run("driver", dirs) == 0
    assert seen.read_text().strip() == str(library)


def test_driver_retries_until_it_passes(dirs: dict[str, Path]) -> None:
    """An init container waits for the driver: the first attempts fail, a later one passes."""
    attempts = dirs["tmp"] / "attempts"
    _script(
        dirs["root"] / "usr/bin/nvidia-smi",
        f'echo x >> {attempts}\n[ "$(wc -l < {attempts})" -ge 3 ] || exit 9\n' + SMI_OK,
    )
    assert _run("driver", dirs, "--retry-for", "20", "--interval", "0.05") == 0
    assert len(attempts.read_text().splitlines()) == 3
    assert not dirs["termination"].exists()


def test_driver_gives_up_after_retry_for(dirs: dict[str, Path]) -> None:
    attempts = dirs["tmp"] / "attempts"
    _script(dirs["root"] / "usr/bin/nvidia-smi", f"echo x >> {attempts}\nexit 9\n")
    assert _run("driver", dirs, "--retry-for", "0.3", "--interval", "0.05") == 1
    assert len(attempts.read_text().splitlines()) >= 2
    assert "exited 9" in dirs["termination"].read_text()


# --- toolkit ------------------------------------------------------------------------------


def test_toolkit_runs_the_injected_nvidia_smi(dirs: dict[str, Path]) -> None:
    injected = dirs["tmp"] / "injected-bin"
    _script(injected / "nvidia-smi", SMI_OK)
    assert _run("toolkit", dirs, env={"PATH": f"{injected}:/usr/bin:/bin"}) == 0
    # The driver's marker is not the toolkit's to touch; the later ones are cleared.
    assert _markers(dirs) == {"driver-ready", "toolkit-ready"}


def test_toolkit_without_nvidia_smi_names_the_runtime(dirs: dict[str, Path]) -> None:
    assert _run("toolkit", dirs, env={"PATH": str(dirs["tmp"] / "empty")}) == 1
    assert _markers(dirs) == {"driver-ready"}
    termination = dirs["termination"].read_text()
    assert "nvidia-smi is not in this container" in termination
    assert "the NVIDIA runtime did not inject" in termination
    assert "container-toolkit pod on this node" in termination


# --- toolkit and plugin in CDI mode: the specs under a fake host root ------------------------

HOOK = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"


def _management_spec(
    host: Path, devices: tuple[str, ...] = ("all",), kind: str = "management.nvidia.com/gpu"
) -> Path:
    """What nvidia-ctk-installer writes with CDI_ENABLED (the shape of a v0.8 CDI spec)."""
    spec = {
        "cdiVersion": "0.5.0",
        "kind": kind,
        "devices": [
            {"name": name, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}} for name in devices
        ],
        "containerEdits": {
            "hooks": [{"hookName": "createContainer", "path": HOOK, "args": ["nvidia-cdi-hook"]}]
        },
    }
    path = host / "var/run/cdi/management.nvidia.com-gpu.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    return path


def _cdi_run(dirs: dict[str, Path]) -> int:
    injected = dirs["tmp"] / "injected-bin"
    _script(injected / "nvidia-smi", SMI_OK)
    return _run("toolkit", dirs, env={"PATH": f"{injected}:/usr/bin:/bin", "CDI_ENABLED": "true"})


def test_toolkit_in_cdi_mode_checks_the_management_spec_and_its_hook(dirs: dict[str, Path]) -> None:
    _management_spec(dirs["host"])
    _script(dirs["host"] / HOOK.lstrip("/"), "exit 0\n")
    assert _cdi_run(dirs) == 0
    assert _markers(dirs) == {"driver-ready", "toolkit-ready"}


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("no spec", "no CDI spec /var/run/cdi/management.nvidia.com-gpu.yaml on the host"),
        ("wrong kind", "is of kind 'nvidia.com/gpu', not 'management.nvidia.com/gpu'"),
        ("no all", "has no device 'all'"),
        ("no hook", f"runs {HOOK}, which is not an executable on the host"),
        ("hook not executable", f"runs {HOOK}, which is not an executable on the host"),
        ("not yaml", "cannot be read"),
    ],
)
def test_toolkit_in_cdi_mode_names_what_is_missing(dirs: dict[str, Path], plant: str, message: str) -> None:
    if plant != "no spec":
        path = _management_spec(
            dirs["host"],
            devices=("0",) if plant == "no all" else ("all",),
            kind="nvidia.com/gpu" if plant == "wrong kind" else "management.nvidia.com/gpu",
        )
        if plant == "not yaml":
            path.write_text("devices: [unclosed")
    if plant != "no hook":
        _script(dirs["host"] / HOOK.lstrip("/"), "exit 0\n", executable=plant != "hook not executable")
    assert _cdi_run(dirs) == 1
    assert _markers(dirs) == {"driver-ready"}
    assert message in dirs["termination"].read_text()


def test_toolkit_without_cdi_does_not_look_for_a_spec(dirs: dict[str, Path]) -> None:
    injected = dirs["tmp"] / "injected-bin"
    _script(injected / "nvidia-smi", SMI_OK)
    # The legacy hook: no spec anywhere, and valid.
    assert _run("toolkit", dirs, env={"PATH": f"{injected}:/usr/bin:/bin", "CDI_ENABLED": "false"}) == 0


def test_plugin_in_cdi_mode_needs_the_plugins_spec(dirs: dict[str, Path]) -> None:
    with pytest.raises(
        validate.ValidationFailed,
        match=re.escape("no CDI spec /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json"),
    ):
        validate.validate_plugin_cdi_spec(dirs["host"])
    path = dirs["host"] / "var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu", "devices": []}')
    with pytest.raises(validate.ValidationFailed, match="declares no device"):
        validate.validate_plugin_cdi_spec(dirs["host"])
    path.write_text(
        '{"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu", '
        '"devices": [{"name": "GPU-0", "containerEdits": {}}]}'
    )
    validate.validate_plugin_cdi_spec(dirs["host"])


def test_toolkit_failing_nvidia_smi(dirs: dict[str, Path]) -> None:
    injected = dirs["tmp"] / "injected-bin"
    _script(injected / "nvidia-smi", SMI_NO_DRIVER)
    assert _run("toolkit", dirs, env={"PATH": f"{injected}:/usr/bin:/bin"}) == 1
    assert _markers(dirs) == {"driver-ready"}
    assert "exited 9" in dirs["termination"].read_text()


def test_cuda_without_a_node_name_fails_clearly(dirs: dict[str, Path]) -> None:
    assert _run("cuda", dirs, env={}) == 1
    assert _markers(dirs) == {"driver-ready", "toolkit-ready"}
    assert "set NODE_NAME from the downward API" in dirs["termination"].read_text()


def test_the_termination_message_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "log"
    validate.write_termination_message(path, "é" * 5000)
    assert len(path.read_bytes()) <= validate.TERMINATION_MESSAGE_LIMIT


def test_an_unwritable_termination_log_is_not_fatal(dirs: dict[str, Path]) -> None:
    dirs["termination"] = dirs["tmp"] / "no-such-dir" / "termination-log"
    assert _run("driver", dirs) == 1


# --- the command line -----------------------------------------------------------------------


def test_cli_wires_validate(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _script(dirs["root"] / "usr/bin/nvidia-smi", SMI_OK)
    argv = [
        "validate",
        "driver",
        "--validations-dir",
        str(dirs["validations"]),
        "--driver-root",
        str(dirs["root"]),
    ]
    assert cli.main(argv) == 0
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["validate", "gpu"])
    assert exit_info.value.code == 2


# --- the pure parts -------------------------------------------------------------------------

MARKERS_CLEARED = {
    Component.DRIVER: ALL_MARKERS,
    Component.TOOLKIT: ALL_MARKERS[1:],
    Component.CUDA: ALL_MARKERS[2:],
    Component.PLUGIN: ALL_MARKERS[3:],
}


@pytest.mark.parametrize(("component", "cleared"), MARKERS_CLEARED.items())
def test_markers_to_clear(component: Component, cleared: tuple[str, ...]) -> None:
    assert validation.markers_to_clear(component) == cleared


def _pod(phase: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "p"},
        "spec": {"nodeName": "gpu-1"},
        "status": {"phase": phase, **status},
    }


_TERMINATED_1 = {
    "containerStatuses": [
        {
            "name": "cuda-validation",
            "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "bad sum"}},
        }
    ]
}
_PULLING = {
    "containerStatuses": [
        {
            "name": "c",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}},
        }
    ]
}
_UNSCHEDULABLE = {
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu.",
        }
    ]
}
_STARTED = {"containerStatuses": [{"name": "c", "started": True, "state": {"running": {}}}]}

VERDICTS = {
    "cuda completed": (validation.judge_cuda_pod, _pod("Succeeded"), (True, True), "completed"),
    "cuda failed": (
        validation.judge_cuda_pod,
        _pod("Failed", **_TERMINATED_1),
        (True, False),
        "container cuda-validation exited 1 (Error): bad sum; check its log",
    ),
    "cuda running": (validation.judge_cuda_pod, _pod("Running", **_STARTED), (False, False), "is Running"),
    "cuda image pull": (
        validation.judge_cuda_pod,
        _pod("Pending", **_PULLING),
        (False, False),
        "is in ImagePullBackOff: Back-off pulling image",
    ),
    "plugin started": (
        validation.judge_plugin_pod,
        _pod("Running", **_STARTED),
        (True, True),
        "was scheduled on gpu-1 with a GPU",
    ),
    "plugin running, started not reported": (
        validation.judge_plugin_pod,
        _pod(
            "Running",
            containerStatuses=[{"name": "c", "ready": True, "state": {"running": {"startedAt": "t"}}}],
        ),
        (True, True),
        "started",
    ),
    "plugin running, not started yet": (
        validation.judge_plugin_pod,
        _pod("Running"),
        (False, False),
        "Running",
    ),
    "plugin completed": (validation.judge_plugin_pod, _pod("Succeeded"), (True, True), "started"),
    "plugin unschedulable": (
        validation.judge_plugin_pod,
        _pod("Pending", **_UNSCHEDULABLE),
        (False, False),
        "cannot be scheduled: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu.; check that the device",
    ),
    "plugin failed": (
        validation.judge_plugin_pod,
        _pod("Failed", **_TERMINATED_1),
        (True, False),
        "exited 1",
    ),
}


@pytest.mark.parametrize(("judge", "pod", "outcome", "message"), VERDICTS.values(), ids=VERDICTS.keys())
def test_workload_verdicts(judge: Any, pod: dict[str, Any], outcome: tuple[bool, bool], message: str) -> None:
    verdict = judge(pod)
    assert (verdict.done, verdict.passed) == outcome
    assert message in verdict.message
    assert "ns/p" in verdict.message


RESOURCES = {
    "plain GPUs": ({"cpu": "16", "nvidia.com/gpu": "8"}, "", "nvidia.com/gpu"),
    "GPUs preferred over MIG": ({"nvidia.com/mig-1g.5gb": "7", "nvidia.com/gpu": "1"}, "", "nvidia.com/gpu"),
    "MIG": ({"nvidia.com/mig-3g.20gb": "2", "nvidia.com/small": "4"}, "", "nvidia.com/mig-3g.20gb"),
    "renamed": ({"nvidia.com/sharedgpu": "32", "cpu": "4"}, "", "nvidia.com/sharedgpu"),
    "none left": ({"nvidia.com/gpu": "0", "cpu": "4"}, "", None),
    "configured": ({"nvidia.com/gpu": "8", "nvidia.com/small": "2"}, "nvidia.com/small", "nvidia.com/small"),
    "configured but absent": ({"nvidia.com/gpu": "8"}, "nvidia.com/small", None),
}


@pytest.mark.parametrize(("allocatable", "wanted", "expected"), RESOURCES.values(), ids=RESOURCES.keys())
def test_select_gpu_resource(allocatable: dict[str, str], wanted: str, expected: str | None) -> None:
    assert validation.select_gpu_resource(allocatable, wanted) == expected


def test_workload_pod_names_are_valid_and_per_node() -> None:
    long_node = "n" * 253
    name = validation_workloads.workload_pod_name(Component.CUDA, long_node)
    assert len(name) <= 63
    assert name.startswith("nvidia-cuda-validator-")
    assert name != validation_workloads.workload_pod_name(Component.CUDA, "n" * 252)
    assert validation_workloads.workload_pod_name(Component.PLUGIN, "a").startswith(
        "nvidia-device-plugin-validator-"
    )


# --- the workload pods -----------------------------------------------------------------------


def _inputs(component: Component, **overrides: Any) -> validation_workloads.WorkloadInputs:
    fields: dict[str, Any] = {
        "component": component,
        "node": "gpu-1",
        "namespace": "nvidia-gpu-operator",
        "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "runtime_class": "nvidia",
        "resource": "nvidia.com/gpu",
        "pull_secrets": ("regcred",),
        "owner_pod": {"name": "nvidia-operator-validator-abcde", "uid": "1234"},
    }
    return validation_workloads.WorkloadInputs(**(fields | overrides))


def test_cuda_pod_is_placed_by_name_with_every_gpu() -> None:
    pod = validation_workloads.render_workload_pod(_inputs(Component.CUDA))
    spec = pod["spec"]
    assert spec["nodeName"] == "gpu-1"
    assert "affinity" not in spec
    assert spec["restartPolicy"] == "Never"
    assert spec["runtimeClassName"] == "nvidia"
    (container,) = spec["containers"]
    assert container["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert container["resources"] == {}
    assert pod["metadata"]["labels"]["app"] == "nvidia-cuda-validator"
    assert pod["metadata"]["annotations"][validation_workloads.NODE_ANNOTATION] == "gpu-1"
    # NVIDIA's cuda-workload-validation.yaml: with cdi.nriPluginEnabled (no RuntimeClass), the
    # toolkit's NRI plugin gives the container every GPU.
    assert pod["metadata"]["annotations"]["nvidia.cdi.k8s.io/container.cuda-validation"] == (
        "management.nvidia.com/gpu=all"
    )
    assert pod["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "nvidia-operator-validator-abcde", "uid": "1234"}
    ]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_plugin_pod_goes_through_the_scheduler_with_one_gpu() -> None:
    pod = validation_workloads.render_workload_pod(_inputs(Component.PLUGIN, resource="nvidia.com/sharedgpu"))
    spec = pod["spec"]
    assert "nodeName" not in spec
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]
    assert spec["containers"][0]["resources"] == {
        "limits": {"nvidia.com/sharedgpu": 1},
        "requests": {"nvidia.com/sharedgpu": 1},
    }
    assert spec["tolerations"] == [{"operator": "Exists"}]
    # Its GPU comes from the device plugin's allocation, with or without NRI.
    assert not any(key.startswith("nvidia.cdi.k8s.io/") for key in pod["metadata"]["annotations"])


def test_no_runtime_class_and_no_owner() -> None:
    pod = validation_workloads.render_workload_pod(_inputs(Component.CUDA, runtime_class="", owner_pod=None))
    assert "runtimeClassName" not in pod["spec"]
    assert pod["metadata"]["ownerReferences"] == []


HOSTILE = ['x"\n- name: evil', "a: b", "{{ 7*7 }}", "#", "\u2028", "'--- \n"]


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_hostile_strings_stay_values(text: str) -> None:
    pod = validation_workloads.render_workload_pod(
        _inputs(Component.PLUGIN, image=text, annotations={"k": text}, pull_secrets=(text,))
    )
    assert pod["metadata"]["annotations"]["k"] == text
    assert pod["spec"]["containers"][0]["image"] == text
    assert pod["spec"]["imagePullSecrets"] == [{"name": text}]
    assert set(pod["spec"]) == set(
        validation_workloads.render_workload_pod(_inputs(Component.PLUGIN))["spec"]
    )


# --- vfio-pci (the sandbox validator) ---------------------------------------------------------


def _pci_device(host: Path, address: str, vendor: str, pci_class: str, driver: str | None) -> None:
    """A device as the host's /sys/bus/pci/devices shows it: vendor, class, and its driver's link."""
    device = host / "sys/bus/pci/devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    (device / "class").write_text(pci_class + "\n")
    if driver is not None:
        target = host / "sys/bus/pci/drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        (device / "driver").symlink_to(target)


def test_vfio_pci_names_the_gpus_not_bound_to_vfio(tmp_path: Path) -> None:
    host = tmp_path / "host"
    _pci_device(host, "0000:3b:00.0", "0x10de", "0x030200", "vfio-pci")
    _pci_device(host, "0000:5e:00.0", "0x10de", "0x030000", "nvgrace_gpu_vfio_pci")
    # Not a GPU (an NVIDIA audio function, another vendor's GPU): never looked at.
    _pci_device(host, "0000:3b:00.1", "0x10de", "0x040300", "snd_hda_intel")
    _pci_device(host, "0000:00:02.0", "0x8086", "0x030000", "i915")
    assert validate.gpus_not_on_vfio(host) == []
    _pci_device(host, "0000:af:00.0", "0x10de", "0x030200", "nvidia")
    _pci_device(host, "0000:d8:00.0", "0x10de", "0x030200", None)
    assert validate.gpus_not_on_vfio(host) == [
        "0000:af:00.0 (driver 'nvidia')",
        "0000:d8:00.0 (driver 'none')",
    ]


def test_vfio_pci_is_a_command_beside_the_components() -> None:
    args = validate.parse(["vfio-pci", "--retry-for", "0"])
    assert args.component == validate.VFIO_PCI
