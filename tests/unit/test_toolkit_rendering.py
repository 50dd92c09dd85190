"""We test the container-toolkit state (rendering/operands/toolkit.py,
planning/operands/operand_planning.py), no server:

- `daemonsets.updateStrategy`: RollingUpdate with `maxUnavailable` (a count written as a string
  becomes a number, as the apiserver requires; percentages stay), OnDelete without it;
- the runtime: the policy's `operator.defaultRuntime`, else cri-o on OpenShift, containerd elsewhere,
  with that runtime's config and socket directories mounted;
- the DaemonSet: identity labels win over the policy's, node selector on the deploy label, the
  SCC binding only on OpenShift, the env the template owns cannot be overridden;
- CDI on by default, off (cri-o's OCI hook, containerd's runtime class), the NRI plugin; the NRI
  plugin without CDI or without the toolkit is an error, as NVIDIA's validateClusterPolicySpec;
- injection-proof: hostile strings in every policy string field render verbatim, as values;
- API errors are described without the response headers (stable across retries).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ocp_gpu.kube import requesting
from ocp_gpu.kube.requesting import ApiException
from ocp_gpu.model import labels
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_checks, policy_parser, policy_spec
from ocp_gpu.model.policy.policy_problems import Severity
from ocp_gpu.model.policy.policy_spec import ContainerRuntime
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering, toolkit
from tests.unit._hostile import swapped
from tests.unit.test_driver_rendering import _spec as driver_spec
from tests.unit.test_driver_rendering import hostile, token

IMAGE = ImageRef("nvcr.io/nvidia/k8s/container-toolkit:v1.16.2-ubuntu20.04")


def render(spec: dict[str, Any], openshift: bool = True, image: str = IMAGE) -> list[dict[str, Any]]:
    policy = policy_parser.parse_policy(spec)
    return operand_rendering.render_operand(
        operand_catalog.CONTAINER_TOOLKIT,
        policy,
        operand_common.OperandRenderInputs("gpu", openshift, ImageRef(image)),
    )


def the_daemonset(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [m for m in manifests if m["kind"] == "DaemonSet"]
    return found


@pytest.mark.parametrize(
    ("daemonsets", "expected"),
    [
        ({}, {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
        (
            {"rollingUpdate": {"maxUnavailable": "25%"}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
        ),
        (
            {"rollingUpdate": {"maxUnavailable": 3}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 3}},
        ),
        (
            {"rollingUpdate": {"maxUnavailable": "2"}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
        ),
        ({"updateStrategy": "OnDelete"}, {"type": "OnDelete"}),
    ],
)
def test_update_strategy(daemonsets: dict[str, Any], expected: dict[str, Any]) -> None:
    assert (
        operand_rendering.update_strategy(policy_parser.parse_policy({"daemonsets": daemonsets}).daemonsets)
        == expected
    )
    assert the_daemonset(render({"daemonsets": daemonsets}))["spec"]["updateStrategy"] == expected


@pytest.mark.parametrize(
    ("configured", "openshift", "runtime"),
    [
        (None, True, ContainerRuntime.CRIO),
        (None, False, ContainerRuntime.CONTAINERD),
        (ContainerRuntime.CONTAINERD, True, ContainerRuntime.CONTAINERD),
        (ContainerRuntime.DOCKER, False, ContainerRuntime.DOCKER),
    ],
)
def test_runtime(configured: ContainerRuntime | None, openshift: bool, runtime: ContainerRuntime) -> None:
    assert policy_spec.container_runtime(configured, openshift) is runtime
    spec = {"operator": {"defaultRuntime": configured.value}} if configured else {}
    ds = the_daemonset(render(spec, openshift=openshift))
    pod = ds["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RUNTIME"] == runtime.value
    paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert (paths["runtime-config"], paths["runtime-socket"]) == toolkit.RUNTIME_PATHS[runtime][:2]


def test_daemonset_identity_selector_and_owned_env() -> None:
    manifests = render(
        {
            "daemonsets": {"labels": {labels.APP: "mine", "team": "gpu"}},
            "toolkit": {"env": [{"name": "RUNTIME", "value": "docker"}, {"name": "EXTRA", "value": "1"}]},
        }
    )
    ds = the_daemonset(manifests)
    assert ds["metadata"]["name"] == toolkit.DAEMONSET
    assert ds["spec"]["selector"]["matchLabels"] == {labels.APP: toolkit.APP}
    assert ds["spec"]["template"]["metadata"]["labels"][labels.APP] == toolkit.APP
    assert ds["spec"]["template"]["metadata"]["labels"]["team"] == "gpu"
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {labels.deploy_label("container-toolkit"): "true"}
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RUNTIME"] == "crio" and env["EXTRA"] == "1"
    assert [i["name"] for i in pod["initContainers"]] == ["driver-validation"]
    assert toolkit.DRIVER_READY_MARKER in pod["initContainers"][0]["args"][0]
    kinds = [m["kind"] for m in manifests]
    assert kinds == ["ServiceAccount", "RoleBinding", "DaemonSet"]
    assert [m["kind"] for m in render({}, openshift=False)] == ["ServiceAccount", "DaemonSet"]


def _spec(text: Any) -> dict[str, Any]:
    return {
        # the same daemonsets fields, with texts 1-9, as the driver's hostile-string test
        "daemonsets": driver_spec(text)["daemonsets"],
        "operator": {"runtimeClass": text(10)},
        "toolkit": {
            "imagePullSecrets": [text(11)],
            "env": [{"name": text(12), "value": text(13)}],
            "args": [text(14)],
            "installDir": text(15),
            "resources": {"limits": {text(16): text(17)}},
        },
    }


def test_hostile_strings_render_verbatim_as_values() -> None:
    # NB: vanilla (containerd): the runtime class reaches CONTAINERD_RUNTIME_CLASS only there.
    benign = render(_spec(token), openshift=False, image=token(18))
    attacked = render(_spec(hostile), openshift=False, image=hostile(18))
    mapping = {hostile(i): token(i) for i in range(18, 0, -1)}  # longest index first: 18 before 1
    seen: set[str] = set()
    assert swapped(yaml.safe_load(yaml.safe_dump(attacked)), mapping, seen) == benign
    assert seen == set(mapping)


def test_api_errors_are_described_without_headers() -> None:
    def failure(audit_id: str) -> ApiException:
        error = ApiException(status=422, reason="Unprocessable Entity")
        error.headers = {"Audit-Id": audit_id, "Date": audit_id}
        error.body = '{"kind":"Status","message":"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid"}'
        return error

    first, second = requesting.describe_error(failure("a")), requesting.describe_error(failure("b"))
    assert (
        first
        == second
        == "HTTP 422 Unprocessable Entity: spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid"
    )
    assert requesting.describe_error(ApiException(status=500, reason="Boom")) == "HTTP 500 Boom"
    assert requesting.describe_error(TimeoutError()) == "TimeoutError"


# --- CDI (NVIDIA's transformToolkitCtrForCDI, transformForRuntime) ---------------------------


def _env_and_volumes(spec: dict[str, Any], openshift: bool) -> tuple[dict[str, Any], dict[str, str]]:
    pod = the_daemonset(render(spec, openshift=openshift))["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    return env, {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}


@pytest.mark.parametrize("openshift", [True, False])
def test_cdi_is_on_by_default_and_the_runtime_gets_cdi_mode(openshift: bool) -> None:
    env, volumes = _env_and_volumes({}, openshift)
    assert env["CDI_ENABLED"] == "true"
    assert env["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"
    # cri-o gets the nvidia runtime handlers in its config (NVIDIA sets it for every runtime).
    assert env["CRIO_CONFIG_MODE"] == "config"
    assert "ENABLE_NRI_PLUGIN" not in env
    assert volumes["cdi-root"] == "/var/run/cdi"


def test_cdi_off_on_crio_installs_the_oci_hook() -> None:
    env, volumes = _env_and_volumes({"cdi": {"enabled": False}}, openshift=True)
    assert env["CRIO_CONFIG_MODE"] == "hook"
    assert "CDI_ENABLED" not in env and "NVIDIA_CONTAINER_RUNTIME_MODE" not in env
    # OpenShift's cri-o reads hooks from /run/containers/oci/hooks.d, the installer writes the default.
    assert volumes["crio-hooks"] == toolkit.OPENSHIFT_CRIO_HOOKS_DIR


def test_cdi_off_on_containerd_registers_the_runtime_class() -> None:
    env, volumes = _env_and_volumes({"cdi": {"enabled": False}}, openshift=False)
    assert "CRIO_CONFIG_MODE" not in env and "CDI_ENABLED" not in env
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    assert "crio-hooks" not in volumes


def test_the_nri_plugin_mounts_the_nri_socket_and_no_runtime_config() -> None:
    env, volumes = _env_and_volumes({"cdi": {"nriPluginEnabled": True}}, openshift=False)
    assert env["ENABLE_NRI_PLUGIN"] == "true"
    assert env["NRI_SOCKET"] == "/runtime/nri-sock-dir/nri.sock"
    assert volumes["nri-socket"] == "/var/run/nri"
    assert "runtime-config" not in volumes and "RUNTIME_CONFIG" not in env
    assert "CONTAINERD_RUNTIME_CLASS" not in env


@pytest.mark.parametrize(
    ("spec", "needs"),
    [
        ({"cdi": {"enabled": False, "nriPluginEnabled": True}}, "spec.cdi.enabled"),
        ({"cdi": {"nriPluginEnabled": True}, "toolkit": {"enabled": False}}, "spec.toolkit.enabled"),
    ],
)
def test_the_nri_plugin_without_cdi_or_the_toolkit_is_an_error(spec: dict[str, Any], needs: str) -> None:
    """As NVIDIA's validateClusterPolicySpec (v26.7.0) refuses it."""
    found = [
        p
        for p in policy_checks.validate_policy(policy_parser.parse_policy(spec), {})
        if p.field == "spec.cdi.nriPluginEnabled"
    ]
    assert [p.severity for p in found] == [Severity.ERROR]
    assert needs in found[0].fix and "spec.cdi.nriPluginEnabled to false" in found[0].fix
    fine = policy_parser.parse_policy({"cdi": {"nriPluginEnabled": True}})
    assert not [p for p in policy_checks.validate_policy(fine, {}) if p.field.startswith("spec.cdi")]


def test_toolkit_env_overrides_the_cdi_settings() -> None:
    env, _ = _env_and_volumes(
        {"toolkit": {"env": [{"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "true"}]}}, openshift=True
    )
    # NVIDIA's documented escape hatch: toolkit.env wins.
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "true"
