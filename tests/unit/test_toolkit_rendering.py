"""We test the container-toolkit state (rendering/operands/toolkit.py,
planning/operands/operand_planning.py), no server:

- `daemonsets.updateStrategy`: RollingUpdate with `maxUnavailable` (a count written as a string
  becomes a number, as the apiserver requires; percentages stay), OnDelete without it;
- the runtime: the policy's `operator.defaultRuntime`, else cri-o on OpenShift, containerd elsewhere,
  with that runtime's config and socket directories mounted;
- the DaemonSet: identity labels win over the policy's, node selector on the deploy label, the
  SCC binding only on OpenShift, the env the template owns cannot be overridden;
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
from ocp_gpu.model.policy import policy_parser, policy_spec
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
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
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
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
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
    benign = render(_spec(token), image=token(18))
    attacked = render(_spec(hostile), image=hostile(18))
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
